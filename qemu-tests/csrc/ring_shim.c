// SPDX-License-Identifier: GPL-2.0
/*
 * User-space test shim for the kernel module's ring code: sizes the Rust
 * side checks its mirrored structures against, and a way to stop a writer
 * at any ordered step.
 */
#include <setjmp.h>
#include "crashring_ring.h"

size_t cr_test_sizeof_stream(void)
{
	return sizeof(struct crashring_stream);
}

size_t cr_test_sizeof_config(void)
{
	return sizeof(struct crashring_config);
}

size_t cr_test_sizeof_cpu(void)
{
	return sizeof(struct crashring_cpu);
}

/* A page's CRC as the module computes it (FORMAT.md section 1), for the bench. */
u32 cr_test_crc(const void *p, size_t len)
{
	return cr_crc32(~0U, p, len) ^ ~0U;
}

/*
 * Stopping a writer dead, as a CPU halted by another CPU's panic: the ring
 * code calls cr_stop_point() between the ordered steps of opening a page;
 * the n-th call of one cr_test_write_stopping_at() jumps back out of it.
 * Per thread, so tests running in parallel do not see each other's points.
 */
static __thread int cr_stop_at;
static __thread int cr_points;
static __thread jmp_buf cr_stop_jmp;

void crashring_user_stop_point(void)
{
	if (cr_stop_at && ++cr_points == cr_stop_at)
		longjmp(cr_stop_jmp, 1);
}

/* Return: 1 when the writer was stopped, else what crashring_write() said. */
int cr_test_write_stopping_at(struct crashring_stream *s, u64 ts, u8 type,
			      const void *payload, u32 len, int stop_at)
{
	int rc;

	cr_points = 0;
	cr_stop_at = stop_at;
	if (setjmp(cr_stop_jmp)) {
		cr_stop_at = 0;
		return 1;
	}
	rc = crashring_write(s, ts, type, payload, len);
	cr_stop_at = 0;
	return rc;
}

/*
 * A writer that enters a stream after crashring_stop_all() stopped it: it
 * holds `busy` while it passes (it sees `stopped` and leaves), here while
 * the stopper closes the page. Per thread.
 */
static __thread bool cr_late_writers;

void crashring_user_stop_all_closing(struct crashring_stream *s)
{
	if (cr_late_writers)
		(void)cr_try_enter(&s->busy);
}

/* crashring_stop_all() with such a writer in each stream; they leave after. */
void cr_test_stop_all_with_late_writers(struct crashring_stream *streams, u32 n)
{
	u32 i;

	cr_late_writers = true;
	crashring_stop_all(streams, n);
	cr_late_writers = false;
	for (i = 0; i < n; i++)
		cr_leave(&streams[i].busy);
}

/*
 * What the ring code wrote back, while a test logs it: the ranges, in
 * order, up to CR_WB_LOG of them (the rest are counted). Per thread.
 */
#define CR_WB_LOG 4096
struct cr_wb_range {
	const void *p;
	size_t len;
};
static __thread struct cr_wb_range *cr_wb_log;
static __thread size_t cr_wb_count;

void crashring_user_wrote_back(const void *p, size_t len)
{
	if (!cr_wb_log)
		return;
	if (cr_wb_count < CR_WB_LOG)
		cr_wb_log[cr_wb_count] = (struct cr_wb_range){ p, len };
	cr_wb_count++;
}

/* Starts logging into @log (CR_WB_LOG entries), or stops with NULL. */
void cr_test_log_write_backs(struct cr_wb_range *log)
{
	cr_wb_log = log;
	cr_wb_count = 0;
}

size_t cr_test_write_backs(void)
{
	return cr_wb_count;
}
