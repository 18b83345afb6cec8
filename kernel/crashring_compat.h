/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differences between the kernels crashring.ko supports (6.1 and 6.12),
 * kept out of the .c files.
 */
#ifndef CRASHRING_COMPAT_H
#define CRASHRING_COMPAT_H

#include <linux/version.h>
#include <linux/mm.h>

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 11, 0)
static inline bool cr_reserve_mem_find(const char *name, phys_addr_t *start, phys_addr_t *size)
{
	return reserve_mem_find_by_name(name, start, size);
}

#define CR_HAVE_RESERVE_MEM true
#else
static inline bool cr_reserve_mem_find(const char *name, phys_addr_t *start, phys_addr_t *size)
{
	return false;
}

#define CR_HAVE_RESERVE_MEM false
#endif

#endif /* CRASHRING_COMPAT_H */
