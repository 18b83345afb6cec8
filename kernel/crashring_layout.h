/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared by the ring code's own files alone: the region's layout
 * (crashring_layout.c) as the writer (crashring_ring.c) and the callsite
 * area (crashring_callsites.c) use it. Like them, free of kernel-only
 * dependencies, so the user-space build compiles all three.
 */
#ifndef CRASHRING_LAYOUT_H
#define CRASHRING_LAYOUT_H

#include "crashring_ring.h"

/* The format's CRC-32C over two parts, as every checksum in it is taken. */
static inline u32 cr_crc2(const void *a, size_t alen, const void *b, size_t blen)
{
	u32 crc = cr_crc32(~0U, a, alen);

	return cr_crc32(crc, b, blen) ^ ~0U;
}

int crashring_lay_out(void *mem, u64 size, const struct crashring_config *cfg);
void crashring_desc_set_holder(void *mem, u32 index, const char *name, u32 pid, u32 uid);

#endif /* CRASHRING_LAYOUT_H */
