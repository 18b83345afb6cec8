// SPDX-License-Identifier: GPL-2.0
/*
 * crashring live snapshot (FORMAT.md, "Reading a live region"): the region
 * being recorded, copied while its writers run. Writers are never waited
 * for or slowed: each page is copied as a seqlock reader copies, its
 * header's `seq` and `flags` read before and after its bytes, and copied
 * again when they changed. A page that changed at every try is shown as
 * resetting, which is what it was; one whose bytes cannot be read
 * (poisoned persistent memory) is shown corrupt. So a snapshot holds no
 * torn or invented event, only pages as their writers left them, each at
 * its own moment.
 *
 * The copy's header says it is one (HEADER_FLAG_LIVE_COPY): its tails,
 * before the pages, are older than they. The tables are copied until two
 * copies agree (the tails change at every page open and close), the
 * stream descriptors as they were when the reader started: a user stream
 * given to a new holder since then has its pages shown unused, never its
 * new holder's events under its old holder's name. The callsite area is append-only and each
 * entry is checked by its CRC; a reader going through the region in order
 * copies it after the pages, so that every event it copied finds its
 * callsite.
 */
#include "crashring_ring.h"
#include "crashring_snapshot.h"

/* Copies of a page, or of the tables, before it is given up. */
#define CR_SNAPSHOT_TRIES	8

static bool cr_span_has_pages(const struct crashring_snapshot_span *sp)
{
	return sp->kind != CRASHRING_STREAM_CALLSITES;
}

/**
 * crashring_snapshot_bytes - the memory a snapshot of @live needs
 * @live: the region being recorded
 * @avail: its bytes
 *
 * Return: the bytes to give crashring_snapshot_init(), or 0 when @live
 * does not start with a usable region header.
 */
u64 crashring_snapshot_bytes(const void *live, u64 avail)
{
	const struct crashring_region_header *h = live;

	if (avail < CRASHRING_HEADER_SIZE || crashring_check_header(live, avail) ||
	    h->stream_count == 0 || h->stream_count > CRASHRING_MAX_STREAMS + 1 ||
	    h->page_size < CRASHRING_MIN_PAGE_SIZE || h->page_size > CRASHRING_MAX_PAGE_SIZE ||
	    h->desc_offset != CRASHRING_DESC_OFFSET ||
	    CRASHRING_DESC_OFFSET + (u64)h->stream_count * CRASHRING_DESC_SIZE > h->region_size)
		return 0;
	return sizeof(struct crashring_snapshot) +
	       (u64)h->stream_count * (sizeof(struct crashring_snapshot_span) + CRASHRING_DESC_SIZE) +
	       h->page_size;
}

/* Copies @len bytes of the live region that may change meanwhile until two copies agree. */
static int cr_copy_steady(void *dst, const u8 *src, size_t len)
{
	int tries, err;

	for (tries = 0; tries < CR_SNAPSHOT_TRIES; tries++) {
		err = cr_copy_live(dst, src, len);
		if (err)
			return err;
		cr_rmb();
		if (!memcmp(dst, src, len))
			return 0;
	}
	/* Still changing: what a crash now would leave, each part checked by its CRC. */
	return 0;
}

/**
 * crashring_snapshot_init - start a snapshot of @live
 * @mem: crashring_snapshot_bytes(@live, @avail) bytes, 8-byte aligned
 * @live: the region being recorded
 * @avail: its bytes
 *
 * Return: the snapshot, or NULL when @live's tables are not the ones its
 * writer laid out (a span outside the region, or out of order).
 */
struct crashring_snapshot *crashring_snapshot_init(void *mem, const void *live, u64 avail)
{
	const struct crashring_region_header *h = live;
	struct crashring_snapshot *s = mem;
	struct crashring_region_header *hc;
	u64 at;
	u32 i;

	if (!crashring_snapshot_bytes(live, avail))
		return NULL;
	memset(s, 0, sizeof(*s));
	s->live = live;
	s->size = h->region_size;
	s->page_size = h->page_size;
	s->nspans = h->stream_count;
	s->spans = (void *)(s + 1);
	s->desc = (u8 *)(s->spans + s->nspans);
	s->page = s->desc + (u64)s->nspans * CRASHRING_DESC_SIZE;
	s->page_at = U64_MAX;
	memcpy(s->header, live, sizeof(s->header));
	hc = (void *)s->header;
	hc->flags |= CRASHRING_HEADER_FLAG_LIVE_COPY;
	hc->header_crc = cr_crc32(~0U, hc, CRASHRING_HEADER_SIZE - 4) ^ ~0U;
	if (cr_copy_steady(s->desc, s->live + CRASHRING_DESC_OFFSET,
			   (size_t)s->nspans * CRASHRING_DESC_SIZE))
		return NULL;
	at = 0;
	for (i = 0; i < s->nspans; i++) {
		const struct crashring_stream_desc *d =
			(const void *)(s->desc + (u64)i * CRASHRING_DESC_SIZE);
		struct crashring_snapshot_span *sp = &s->spans[i];
		u64 bytes = (u64)d->page_count * s->page_size;

		if (d->pages_offset < at || bytes > s->size || d->pages_offset > s->size - bytes)
			return NULL;
		sp->start = d->pages_offset;
		sp->end = d->pages_offset + bytes;
		sp->kind = d->kind;
		sp->index = i;
		at = sp->end;
	}
	return s;
}

/* The span holding region byte @off, or NULL for the tables and the gaps. */
static const struct crashring_snapshot_span *cr_span_at(const struct crashring_snapshot *s,
							u64 off)
{
	u32 lo = 0, hi = s->nspans;

	while (lo < hi) {
		u32 mid = lo + (hi - lo) / 2;

		if (off < s->spans[mid].start)
			hi = mid;
		else if (off >= s->spans[mid].end)
			lo = mid + 1;
		else
			return &s->spans[mid];
	}
	return NULL;
}

/* Where the span after region byte @off starts, or the region's end. */
static u64 cr_next_span(const struct crashring_snapshot *s, u64 off)
{
	u32 i;

	for (i = 0; i < s->nspans; i++)
		if (s->spans[i].start > off)
			return s->spans[i].start;
	return s->size;
}

/* Whether the user stream @sp still has the holder it had when the snapshot started. */
static bool cr_same_holder(const struct crashring_snapshot *s,
			   const struct crashring_snapshot_span *sp)
{
	const u8 *then = s->desc + (u64)sp->index * CRASHRING_DESC_SIZE;

	if (sp->kind != CRASHRING_STREAM_USER)
		return true;
	cr_rmb();
	return !memcmp(then, s->live + CRASHRING_DESC_OFFSET + (u64)sp->index * CRASHRING_DESC_SIZE,
		       CRASHRING_DESC_SIZE);
}

/*
 * One try at copying the page at @at into s->page. Pairs with the
 * writer's barriers in cr_open_page() (flags resetting, the fields, seq,
 * flags open, then records), cr_commit() (a record's bytes, then commit
 * and count in one store) and cr_close_page() (crc, then flags closed),
 * read in the opposite order: seq, flags, commit and count, the bytes,
 * flags, seq. The page is taken when seq did not change, the page was
 * not being reset, and its flags stayed, or went from open to closed
 * (the bytes up to the commit read are the same either way).
 */
static int cr_try_page(struct crashring_snapshot *s, u64 at, bool *steady)
{
	const struct crashring_page_header *live = (const void *)(s->live + at);
	struct crashring_page_header *h = (void *)s->page;
	union crashring_published u;
	u16 flags, now;
	u64 seq;
	int err;

	seq = READ_ONCE(live->seq);
	cr_rmb();
	flags = READ_ONCE(live->flags);
	cr_rmb();
	u.both = READ_ONCE(*(const u64 *)&live->commit);
	cr_rmb();
	err = cr_copy_live(s->page, live, s->page_size);
	if (err)
		return err;
	cr_rmb();
	now = READ_ONCE(live->flags);
	cr_rmb();
	*steady = READ_ONCE(live->seq) == seq &&
		  (now == flags || (flags == CRASHRING_PAGE_OPEN && now == CRASHRING_PAGE_CLOSED));
	h->flags = flags;
	h->seq = seq;
	h->commit = u.f.commit;
	h->count = u.f.count;
	/* An unused page is all zeros, its flags those of a page being reset. */
	if (flags == CRASHRING_PAGE_RESETTING)
		*steady = *steady && !seq && !h->magic;
	return 0;
}

/* Copies the page at @at of @sp into s->page, as its writer left it at some moment. */
static void cr_copy_page(struct crashring_snapshot *s, const struct crashring_snapshot_span *sp,
			 u64 at)
{
	struct crashring_page_header *h = (void *)s->page;
	bool steady = false;
	int tries;

	/* A writer opens a page in nanoseconds: each try follows the last at once. */
	for (tries = 0; tries < CR_SNAPSHOT_TRIES && !steady; tries++) {
		if (cr_try_page(s, at, &steady)) {
			/*
			 * Unreadable: a header no reader takes for a page, and
			 * nothing of a try's partial copy or of the page before.
			 */
			memset(s->page, 0, s->page_size);
			h->magic = ~(u32)CRASHRING_PAGE_MAGIC;
			s->page_at = at;
			return;
		}
	}
	if (!steady) {
		/* Rewritten under every try: being reset, as a crash now could leave it. */
		h->flags = CRASHRING_PAGE_RESETTING;
		s->unsteady++;
	}
	if (!cr_same_holder(s, sp)) {
		memset(s->page, 0, s->page_size);
		s->replaced++;
	}
	s->page_at = at;
}

/* Puts @fixed, the copy's bytes from region offset @start, over those of [@off, @off + @n) in @out. */
static void cr_put_fixed(const u8 *fixed, u64 start, u64 len, u64 off, u8 *out, size_t n)
{
	u64 from = max_t(u64, off, start), to = min_t(u64, off + n, start + len);

	if (from < to)
		memcpy(out + (from - off), fixed + (from - start), to - from);
}

/**
 * crashring_snapshot_read - copy bytes of the region being recorded
 * @s: the snapshot
 * @off: the first byte's offset in the region
 * @dst: where to
 * @len: how many; the region's end may come first
 *
 * Each ring page is copied whole, as its writer left it at some moment,
 * and kept until a read touches another page, so that reads in any
 * sizes, in order, see each page once.
 *
 * Return: the bytes copied (0 at the region's end), or -EIO when bytes
 * of the region's tables cannot be read.
 */
int crashring_snapshot_read(struct crashring_snapshot *s, u64 off, void *dst, size_t len)
{
	u8 *out = dst;
	size_t done = 0;

	if (off >= s->size)
		return 0;
	len = min_t(u64, len, s->size - off);
	len = min_t(size_t, len, INT_MAX);
	while (done < len) {
		const struct crashring_snapshot_span *sp = cr_span_at(s, off);
		size_t n;
		int err;

		if (sp && cr_span_has_pages(sp)) {
			u64 page = sp->start + (off - sp->start) / s->page_size * s->page_size;

			if (s->page_at != page)
				cr_copy_page(s, sp, page);
			n = min_t(u64, len - done, page + s->page_size - off);
			memcpy(out + done, s->page + (off - page), n);
		} else {
			u64 end = sp ? sp->end : cr_next_span(s, off);

			n = min_t(u64, len - done, end - off);
			err = sp ? cr_copy_live(out + done, s->live + off, n) :
				   cr_copy_steady(out + done, s->live + off, n);
			if (err)
				return done ? (int)done : err;
			if (!sp) {
				cr_put_fixed(s->header, 0, sizeof(s->header), off, out + done, n);
				cr_put_fixed(s->desc, CRASHRING_DESC_OFFSET,
					     (u64)s->nspans * CRASHRING_DESC_SIZE, off, out + done, n);
			}
		}
		off += n;
		done += n;
	}
	return (int)done;
}
