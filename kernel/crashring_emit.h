/* SPDX-License-Identifier: GPL-2.0 */
/*
 * How every source writes an event: into the calling CPU's innermost free
 * lane, never sleeping, allocating or taking a lock.
 */
#ifndef CRASHRING_EMIT_H
#define CRASHRING_EMIT_H

#include <linux/minmax.h>
#include <linux/string.h>
#include <linux/ktime.h>
#include <linux/timekeeping.h>
#include "crashring_internal.h"

/*
 * Records one event stamped @at (0: the clock when it is written): @fixed
 * bytes, then, if @str is not NULL, a str field
 * (u16 length, then the bytes) cut to what fits one record and one page.
 * When it is cut and @cut_flag_at is not negative, bit 0 of that byte of
 * the fixed part is set (printk's "truncated" flag).
 *
 * Inlined into each source, where @flen is a constant: the fixed part's
 * copy becomes a few moves and the call's prologue goes, which took a
 * ninth of a 32-byte marker's instructions (`cargo xtask bench`).
 */
static __always_inline void cr_emit_at(u64 at, u8 type, const void *fixed, u32 flen,
				       const char *str, u32 slen, int cut_flag_at)
{
	struct crashring_cpu *c = crashring_this_cpu();
	struct crashring_stream *s;
	u32 room, len;
	u16 n;
	u8 *dst;

	if (!c)
		return;
	s = crashring_enter(c);
	room = min_t(u32, CRASHRING_MAX_RECORD_SIZE, s->page_size - CRASHRING_PAGE_HEADER_SIZE) -
	       CRASHRING_RECORD_HEADER_SIZE - flen - (str ? 2 : 0);
	n = min_t(u32, slen, room);
	len = flen + (str ? 2 + n : 0);
	dst = crashring_reserve(s, at ? at : ktime_get_mono_fast_ns(), type, len);
	if (dst) {
		memcpy(dst, fixed, flen);
		if (n < slen && cut_flag_at >= 0)
			dst[cut_flag_at] |= 1;
		if (str) {
			memcpy(dst + flen, &n, 2);
			memcpy(dst + flen + 2, str, n);
		}
		crashring_commit(s);
	}
	crashring_leave(c);
	crashring_put_cpu();
}

/* cr_emit_at(), stamped with the clock read once the record's lane is held. */
static __always_inline void cr_emit(u8 type, const void *fixed, u32 flen, const char *str,
				    u32 slen, int cut_flag_at)
{
	cr_emit_at(0, type, fixed, flen, str, slen, cut_flag_at);
}

#endif /* CRASHRING_EMIT_H */
