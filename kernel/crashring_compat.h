/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differences between the kernels crashring.ko supports (6.1 and 6.12),
 * kept out of the .c files. CR_HAVE_RESERVE_MEM_FIND comes from a feature
 * probe in Kbuild.
 */
#ifndef CRASHRING_COMPAT_H
#define CRASHRING_COMPAT_H

#include <linux/mm.h>

#ifdef CR_HAVE_RESERVE_MEM_FIND
#define CR_HAVE_RESERVE_MEM true

static inline bool cr_reserve_mem_find(const char *name, phys_addr_t *start, phys_addr_t *size)
{
	return reserve_mem_find_by_name(name, start, size);
}
#else
#define CR_HAVE_RESERVE_MEM false

static inline bool cr_reserve_mem_find(const char *name, phys_addr_t *start, phys_addr_t *size)
{
	return false;
}
#endif

#endif /* CRASHRING_COMPAT_H */
