/* SPDX-License-Identifier: GPL-2.0 */
/*
 * crashring live snapshot: a copy of the region being recorded, taken
 * while its writers run and without slowing them, in which every page is
 * one its writer really left at some moment (FORMAT.md, "Reading a live
 * region").
 *
 * Kernel-independent (crashring_env.h): qemu-tests builds it for user
 * space and snapshots a region under writer threads.
 */
#ifndef CRASHRING_SNAPSHOT_H
#define CRASHRING_SNAPSHOT_H

#include "crashring_env.h"
#include "crashring_format.h"

/* A descriptor's pages (or the callsite area) in the region. */
struct crashring_snapshot_span {
	u64 start;
	u64 end;
	u16 kind;
	u16 index;
};

/*
 * What a reader of a live region keeps between its reads: the region's
 * geometry, the stream descriptors as they were when it started, and the
 * ring page it copied last, so that a read ending inside a page and the
 * next read, starting there, see one version of it.
 */
struct crashring_snapshot {
	const u8 *live;
	u64 size;		/* the region's bytes */
	u32 page_size;
	/* The header as the copy has it: marked a live copy (HEADER_FLAG_LIVE_COPY). */
	u8 header[CRASHRING_HEADER_SIZE];
	u32 nspans;
	struct crashring_snapshot_span *spans;	/* in region order */
	u8 *desc;		/* the descriptors, nspans x CRASHRING_DESC_SIZE */
	u8 *page;		/* the page copied last */
	u64 page_at;		/* its offset in the region; U64_MAX for none */
	u64 unsteady;		/* pages shown resetting: they changed at every try */
	u64 replaced;		/* pages of a user stream whose holder changed: shown unused */
};

u64 crashring_snapshot_bytes(const void *live, u64 avail);
struct crashring_snapshot *crashring_snapshot_init(void *mem, const void *live, u64 avail);
int crashring_snapshot_read(struct crashring_snapshot *s, u64 off, void *dst, size_t len);

#endif /* CRASHRING_SNAPSHOT_H */
