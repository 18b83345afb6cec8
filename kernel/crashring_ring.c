// SPDX-License-Identifier: GPL-2.0
/*
 * crashring ring writer: the C twin of pstore-ring's `write` module. Both
 * follow pstore-ring/FORMAT.md, sections 10 ("Writer rules") and 12 ("What
 * a crash can leave behind"); user-space tests hold this file to the Rust
 * writer's golden images byte for byte. The region around the pages is
 * crashring_layout.c's.
 */
#include "crashring_layout.h"

static u32 cr_words(u32 len)
{
	return (CRASHRING_RECORD_HEADER_SIZE + len + CRASHRING_RECORD_ALIGN - 1) /
	       CRASHRING_RECORD_ALIGN;
}

static u32 cr_record_header(u8 type, u32 words, u16 delta)
{
	return (u32)type | (words << 8) | ((u32)delta << 16);
}

static struct crashring_page_header *cr_page(const struct crashring_stream *s, u32 slot)
{
	return (void *)(s->pages + (u64)slot * s->page_size);
}

static u8 *cr_data(const struct crashring_stream *s, u32 slot)
{
	return s->pages + (u64)slot * s->page_size + CRASHRING_PAGE_HEADER_SIZE;
}

/*
 * On persistent memory without eADR a store survives a power cut only once
 * its cache line was written back: where FORMAT.md section 13 orders two
 * steps, a durable stream writes the first one back and fences before the
 * second. On RAM the ordering of visibility (cr_wmb) is enough and this
 * costs nothing.
 */
static void cr_persist(const struct crashring_stream *s, const void *p, size_t len)
{
	if (s->durable) {
		cr_write_back(p, len);
		cr_persist_fence();
	}
}

/*
 * Rewrites copy @seq & 1 of the stream's tail (FORMAT.md, "Stream tails"),
 * whole and with its CRC: a stop part-way leaves that copy failing its CRC
 * and the other copy holding the update before.
 */
static void cr_put_tail(struct crashring_stream *s, u64 seq, u64 first, u64 end, u16 state)
{
	struct crashring_stream_tail t = {
		.seq = seq,
		.first_index = first,
		.end_index = end,
		.stream = s->index,
		.state = state,
	};

	t.crc = cr_crc32(~0U, &t, offsetof(struct crashring_stream_tail, crc)) ^ ~0U;
	/* The page stores the tail describes are in place before it. */
	cr_wmb();
	memcpy(&s->tails[seq & 1], &t, sizeof(t));
	cr_persist(s, &s->tails[seq & 1], sizeof(t));
}

/* Takes @slot as the stream's next page (FORMAT.md, "Opening a page"). */
static void cr_open_page(struct crashring_stream *s, u32 slot, u64 ts)
{
	struct crashring_page_header *h = cr_page(s, slot);

	s->seq++;
	s->cur = slot;
	s->time = ts;
	s->commit = 0;
	s->count = 0;
	s->open = true;
	cr_stop_point();
	/* Invalidate first: a crash from here on leaves a "resetting" page. */
	WRITE_ONCE(h->flags, CRASHRING_PAGE_RESETTING);
	cr_wmb();
	cr_persist(s, h, sizeof(*h));
	cr_stop_point();
	h->magic = CRASHRING_PAGE_MAGIC;
	h->stream = s->index;
	h->first_ts = ts;
	cr_stop_point();
	h->first_index = s->next_index;
	h->commit = 0;
	h->count = 0;
	h->dropped = 0;
	h->crc = 0;
	/* Every field is in place before the page gets its identity. */
	cr_wmb();
	cr_persist(s, h, sizeof(*h));
	cr_stop_point();
	WRITE_ONCE(h->seq, s->seq);
	cr_wmb();
	cr_persist(s, h, sizeof(*h));
	cr_stop_point();
	WRITE_ONCE(h->flags, CRASHRING_PAGE_OPEN);
	cr_persist(s, h, sizeof(*h));
	cr_put_tail(s, s->seq, s->next_index, s->next_index, CRASHRING_TAIL_OPEN);
}

/*
 * Publishes commit and count in one 8-byte store, so a reader (or the panic
 * path closing this page) never sees one without the other.
 */
static void cr_publish(struct crashring_page_header *h, u32 commit, u32 count)
{
	union crashring_published u = { .f = { commit, count } };

	WRITE_ONCE(*(u64 *)&h->commit, u.both);
}

/*
 * Closes the current page from what its header has published. With
 * @writer_gone, the stream's writer will never run again (the panic path,
 * a stop): the events it still owed the page are counted in `dropped`
 * before the CRC covers it, namely the nested drops it had not folded in
 * yet and the record it had reserved and not committed.
 */
static void cr_close_page(struct crashring_stream *s, bool writer_gone)
{
	struct crashring_page_header *h, copy;
	u64 lost;
	u32 crc;

	if (!s->open)
		return;
	h = cr_page(s, s->cur);
	/*
	 * Pairs with the writer's cr_wmb()s: when another CPU's writer was
	 * stopped, its header stores are read in the order it made them.
	 */
	cr_rmb();
	memcpy(&copy, h, sizeof(copy));
	if (copy.flags != CRASHRING_PAGE_OPEN || copy.seq != s->seq ||
	    copy.commit > s->page_size - CRASHRING_PAGE_HEADER_SIZE)
		return;
	if (writer_gone) {
		/* Set once the record is placed, cleared once it is published. */
		lost = cr_local_take(&s->pending_drops) + (READ_ONCE(s->pending_end) > copy.commit);
		if (lost) {
			s->drops_total += lost;
			lost += copy.dropped;
			copy.dropped = lost > 0xffffffffULL ? 0xffffffffU : (u32)lost;
			WRITE_ONCE(h->dropped, copy.dropped);
		}
		WRITE_ONCE(s->pending_end, 0);
	}
	copy.flags = CRASHRING_PAGE_CLOSED;
	crc = cr_crc2(&copy, offsetof(struct crashring_page_header, crc),
		      cr_data(s, s->cur), copy.commit);
	WRITE_ONCE(h->crc, crc);
	/* The CRC is in place before the flag that makes it count. */
	cr_wmb();
	cr_persist(s, h, sizeof(*h));
	cr_stop_point();
	WRITE_ONCE(h->flags, CRASHRING_PAGE_CLOSED);
	cr_persist(s, h, sizeof(*h));
	cr_stop_point();
	s->open = false;
	cr_put_tail(s, copy.seq, copy.first_index, copy.first_index + copy.count,
		    CRASHRING_TAIL_CLOSED);
}

/**
 * crashring_close - close the stream's current page with its CRC, for good
 * @s: the stream, whose writer will not run again: a CPU that was stopped
 *     or interrupted by the panic path, or one crashring_stop_all() waited
 *     for
 *
 * Uses only what the page header has published, so the panic path may call
 * it for a writer stopped in the middle of a record: that record, not yet
 * committed, stays outside the CRC and invisible, and is counted as
 * dropped (FORMAT.md, "Nesting lanes"). A CPU stopped half-way through
 * opening a page leaves it resetting, or with the seq of the page it
 * replaces; such a page is left alone, so it reads as resetting (FORMAT.md
 * section 12, cases 3 and 4) instead of getting a valid CRC over old
 * events under new header fields. One stopped after closing its page but
 * before it knew leaves the page closed. Either way the stream then counts
 * as having no open page, so that a later write (the panic path's crash
 * record, on the lane crashring_take_innermost() took) opens the next one
 * instead of landing in a page that reads as resetting or whose CRC it
 * would break.
 */
void crashring_close(struct crashring_stream *s)
{
	cr_close_page(s, true);
	s->open = false;
}

static void cr_add_dropped(struct crashring_stream *s, u64 n)
{
	struct crashring_page_header *h;
	u64 sum;

	if (!n)
		return;
	if (!s->open)
		cr_open_page(s, (s->cur + 1) % s->page_count, s->time);
	h = cr_page(s, s->cur);
	s->drops_total += n;
	sum = (u64)h->dropped + n;
	WRITE_ONCE(h->dropped, sum > 0xffffffffULL ? 0xffffffffU : (u32)sum);
	cr_persist(s, h, sizeof(*h));
}

/**
 * crashring_drop - count one event that could not be recorded
 * @s: the stream
 *
 * Safe from any context: a nested caller only bumps a per-stream counter
 * that the owner folds into the page on its next write.
 */
void crashring_drop(struct crashring_stream *s)
{
	if (!cr_try_enter(&s->busy)) {
		cr_local_inc(&s->pending_drops);
		return;
	}
	if (!READ_ONCE(s->stopped))
		cr_add_dropped(s, 1);
	cr_leave(&s->busy);
}

/**
 * crashring_start_earlier - let a stream record events from before its region
 * @s: a stream whose open page holds nothing yet
 * @ts: the first such event's time
 *
 * Lowers the page's first_ts, and the running time, to @ts, so that those
 * events (the printk lines of the boot before the module loaded) keep
 * their own times (FORMAT.md, "Writer rules"). Does nothing to a page
 * that holds a record, or for a @ts no earlier than the running time.
 */
void crashring_start_earlier(struct crashring_stream *s, u64 ts)
{
	struct crashring_page_header *h = cr_page(s, s->cur);

	if (!s->open || s->count || s->commit || ts >= s->time)
		return;
	s->time = ts;
	h->first_ts = ts;
	cr_persist(s, &h->first_ts, sizeof(h->first_ts));
}

/**
 * crashring_enter - the stream a write of the calling context records on
 * @c: the calling CPU's lanes, preemption off
 *
 * A write takes the lane of its depth: the number of writes of this CPU it
 * interrupted (FORMAT.md, "Nesting lanes"). Interrupts nest last in, first
 * out, so that lane has no other writer until this one leaves. Depths past
 * the last lane share it: a write there finds it busy and is counted as
 * dropped. Every crashring_enter() is paired with crashring_leave().
 */
struct crashring_stream *crashring_enter(struct crashring_cpu *c)
{
	long depth = cr_local_inc_return(&c->depth) - 1;

	return c->lane[depth < c->nlanes ? depth : c->nlanes - 1];
}

void crashring_leave(struct crashring_cpu *c)
{
	cr_local_dec(&c->depth);
}

/**
 * crashring_take_innermost - make room for the panic path's own write
 * @c: the panicking CPU's lanes
 *
 * The writes the panic interrupted on this CPU never resume. When they hold
 * every lane, the innermost one is closed for good (its record in flight
 * counted as dropped) and handed to the panic path, so that the crash
 * record is written whatever the panic interrupted: writes at any depth
 * past the last lane take that lane.
 */
void crashring_take_innermost(struct crashring_cpu *c)
{
	struct crashring_stream *s = c->lane[c->nlanes - 1];

	if (cr_local_read(&c->depth) < c->nlanes)
		return;
	crashring_close(s);
	cr_leave(&s->busy);
}

/* How often crashring_stop_all() looks again at a writer still inside. */
#define CR_STOP_SPINS	1000000

/**
 * crashring_stop_all - end recording and close every page, writers running
 * @streams: the streams
 * @n: how many
 *
 * For a clean shutdown or unload, when other CPUs may be in the middle of a
 * record: closing their pages under them would let a commit land in a
 * closed page whose CRC no longer matches. Each stream is stopped first
 * (a writer that enters after the stop records nothing); cr_sync_writers()
 * then waits until every writer that entered before it has left (an RCU
 * grace period in the kernel) or, in the user-space build, makes it
 * visible as busy; each stream is closed once its writer has left. A
 * writer that never leaves (it died inside a record) keeps its page open
 * for the reader to salvage. May sleep (cr_sync_writers); not for the
 * panic path, where the other CPUs are already stopped and
 * crashring_close() is used directly.
 */
void crashring_stop_all(struct crashring_stream *streams, u32 n)
{
	u32 i, spins;

	for (i = 0; i < n; i++)
		WRITE_ONCE(streams[i].stopped, true);
	cr_sync_writers();
	for (i = 0; i < n; i++) {
		/*
		 * Once the writer is seen outside, every write that began before
		 * the stop has ended; one that enters later sees `stopped` and
		 * leaves without touching the page. So only a writer never seen
		 * outside keeps its page open: a later look could catch such a
		 * passing writer and leave a stopped page open for nothing.
		 */
		for (spins = 0; cr_local_read(&streams[i].busy); spins++) {
			if (spins == CR_STOP_SPINS)
				break;
			cr_cpu_relax();
		}
		cr_stop_all_closing(&streams[i]);
		if (spins < CR_STOP_SPINS)
			crashring_close(&streams[i]);
	}
}

static u32 cr_prefix_len(u64 delta)
{
	if (delta <= CRASHRING_DELTA_MAX)
		return 0;
	return delta <= 0xffffffffULL ? 4 : 12;
}

/**
 * crashring_reserve - start a record of @len payload bytes
 * @s: the stream, which must belong to the calling CPU (preemption off)
 * @ts: CLOCK_MONOTONIC nanoseconds; clamped so time never goes backwards
 * @type: event type id, 16..255
 * @len: payload bytes
 *
 * Return: where to write the payload, to be followed by crashring_commit(),
 * or NULL when the event was dropped (and counted).
 */
void *crashring_reserve(struct crashring_stream *s, u64 ts, u8 type, u32 len)
{
	u32 cap = s->page_size - CRASHRING_PAGE_HEADER_SIZE;
	u32 body, prefix, word;
	u64 delta;
	u8 *rec;

	if (!cr_try_enter(&s->busy)) {
		cr_local_inc(&s->pending_drops);
		return NULL;
	}
	/* Checked inside busy: crashring_stop_all() relies on the order. */
	if (READ_ONCE(s->stopped)) {
		cr_leave(&s->busy);
		return NULL;
	}
	body = len <= CRASHRING_MAX_RECORD_SIZE ? cr_words(len) * CRASHRING_RECORD_ALIGN : ~0U;
	if (type < CRASHRING_FIRST_EVENT_TYPE || body > CRASHRING_MAX_RECORD_SIZE || body > cap) {
		cr_add_dropped(s, 1);
		cr_leave(&s->busy);
		return NULL;
	}
	if (ts < s->time)
		ts = s->time;
	prefix = cr_prefix_len(ts - s->time);
	if (!s->open || s->commit + prefix + body > cap) {
		cr_close_page(s, false);
		cr_open_page(s, (s->cur + 1) % s->page_count, ts);
		prefix = 0;
	}
	/* A plain read first: the exchange is a locked instruction on x86. */
	if (cr_local_read(&s->pending_drops))
		cr_add_dropped(s, cr_local_take(&s->pending_drops));
	delta = ts - s->time;
	rec = cr_data(s, s->cur) + s->commit;
	if (prefix == 4) {
		word = cr_record_header(CRASHRING_TYPE_TIME_EXTEND, 1, (u16)(delta >> 16));
		memcpy(rec, &word, 4);
	} else if (prefix == 12) {
		word = cr_record_header(CRASHRING_TYPE_TIME_ABS, 3, 0);
		memcpy(rec, &word, 4);
		memcpy(rec + 4, &ts, 8);
		delta = 0;
	}
	/*
	 * The padding (under a word) is zero: zero the record's last word and
	 * let the header, then the caller's payload, cover the rest of it. A
	 * store of 4 instead of a memset() call of a length not known here.
	 */
	word = 0;
	memcpy(rec + prefix + body - 4, &word, 4);
	word = cr_record_header(type, body / CRASHRING_RECORD_ALIGN, (u16)delta);
	memcpy(rec + prefix, &word, 4);
	s->reserved_len = prefix + body;
	s->time = ts;
	/* The record is placed: a writer that stops from here on owes it. */
	WRITE_ONCE(s->pending_end, s->commit + s->reserved_len);
	return rec + prefix + CRASHRING_RECORD_HEADER_SIZE;
}

/**
 * crashring_commit - make the reserved record visible
 * @s: the stream passed to the successful crashring_reserve()
 */
void crashring_commit(struct crashring_stream *s)
{
	cr_persist(s, cr_data(s, s->cur) + s->commit, s->reserved_len);
	s->commit += s->reserved_len;
	s->bytes_total += s->reserved_len;
	s->count++;
	s->next_index++;
	/* The record's bytes are in place before commit covers them. */
	cr_wmb();
	cr_publish(cr_page(s, s->cur), s->commit, s->count);
	WRITE_ONCE(s->pending_end, 0);
	/*
	 * No fence of its own: the next ordered step's fence (the next
	 * record's, a close's) orders it, and the panic and shutdown paths
	 * end with a fence.
	 */
	if (s->durable)
		cr_write_back(cr_page(s, s->cur), CRASHRING_PAGE_HEADER_SIZE);
	cr_leave(&s->busy);
}

/**
 * crashring_write_back_new - write back what @s recorded since @mark
 * @s: a kernel stream, its writer maybe running on another CPU
 * @mark: how far the last call got, zeroed before the first; updated
 *
 * The periodic write-back's step for one stream (crashring_writeback.c):
 * the pages opened since the last call, the page that call ended on
 * (which may have gained records since), and the stream's tails. The
 * writer's page sequence is read once: a page it opens after that read is
 * the next call's. Each stream's first page (seq 1) is slot 0 and every
 * later page takes the next slot, so page seq lives in slot (seq - 1) %
 * page_count. A mark ahead of the stream (a generation started anew)
 * counts from the first page.
 *
 * Return: the pages written back; 0 when the stream recorded nothing since.
 */
u32 crashring_write_back_new(const struct crashring_stream *s, struct crashring_wb_mark *mark)
{
	u64 seq = READ_ONCE(s->seq), bytes = READ_ONCE(s->bytes_total), from, p;

	if (!seq || (seq == mark->seq && bytes == mark->bytes))
		return 0;
	from = mark->seq && mark->seq <= seq ? mark->seq : 1;
	if (seq - from >= s->page_count)
		from = seq - s->page_count + 1;
	for (p = from; p <= seq; p++)
		cr_write_back(cr_page(s, (p - 1) % s->page_count), s->page_size);
	cr_write_back(s->tails, 2 * sizeof(*s->tails));
	mark->seq = seq;
	mark->bytes = bytes;
	return seq - from + 1;
}

/**
 * crashring_set_durable - write every ordered step back to memory
 * @s: a stream just formatted, before it records
 * @on: whether the region is persistent memory without eADR
 */
void crashring_set_durable(struct crashring_stream *s, bool on)
{
	s->durable = on;
}

/**
 * crashring_write - record one event whose payload is already encoded
 * @s: the stream
 * @ts: CLOCK_MONOTONIC nanoseconds
 * @type: event type id
 * @payload: encoded fields (pstore-ring/FORMAT.md section 6)
 * @len: bytes of @payload
 *
 * Return: 0, or -ENOSPC when the event was dropped and counted.
 */
int crashring_write(struct crashring_stream *s, u64 ts, u8 type, const void *payload, u32 len)
{
	void *dst = crashring_reserve(s, ts, type, len);

	if (!dst)
		return -ENOSPC;
	memcpy(dst, payload, len);
	crashring_commit(s);
	return 0;
}

/**
 * crashring_format - lay out a region and open page 0 of every stream
 * @mem: the memory, 8-byte aligned
 * @size: its bytes; the region uses whole pages of it
 * @cfg: what to lay out
 * @streams: @cfg->nstreams writer states to initialise
 *
 * Return: 0, -EINVAL for an impossible @cfg, -ENOSPC when @size is too small.
 */
int crashring_format(void *mem, u64 size, const struct crashring_config *cfg,
		     struct crashring_stream *streams)
{
	const struct crashring_region_header *h = mem;
	u8 *base = mem;
	u32 i, slot;
	int err;

	err = crashring_lay_out(mem, size, cfg);
	if (err)
		return err;
	for (i = 0; i < cfg->nstreams; i++) {
		const struct crashring_stream_desc *d =
			(void *)(base + CRASHRING_DESC_OFFSET + i * CRASHRING_DESC_SIZE);
		struct crashring_stream *s = &streams[i];

		memset(s, 0, sizeof(*s));
		s->pages = base + d->pages_offset;
		s->page_size = cfg->page_size;
		s->page_count = d->page_count;
		s->index = i;
		s->tails = (void *)(base + h->tail_offset +
				    (u64)i * CRASHRING_TAIL_COPIES * CRASHRING_TAIL_SIZE);
		s->time = cfg->created_ns;
		for (slot = 0; slot < s->page_count; slot++)
			memset(cr_page(s, slot), 0, CRASHRING_PAGE_HEADER_SIZE);
		cr_open_page(s, 0, cfg->created_ns);
	}
	return 0;
}

/**
 * crashring_reset_user_stream - format a user stream for a new holder
 * @mem: the region
 * @s: the stream, as crashring_format() set it up
 * @name: the holder's name for it
 * @pid: the holder's process
 * @uid: the holder's user
 * @ts: now
 *
 * Rewrites the stream's descriptor for the holder, zeroes every page,
 * headers and data, so that the new holder can read nothing of an earlier
 * holder's, an older generation's or the memory's past, and opens page 0
 * again, as a new stream starts. No writer may be on the stream.
 */
void crashring_reset_user_stream(void *mem, struct crashring_stream *s, const char *name,
				 u32 pid, u32 uid, u64 ts)
{
	crashring_desc_set_holder(mem, s->index, name, pid, uid);
	memset(s->pages, 0, (size_t)s->page_count * s->page_size);
	s->seq = 0;
	s->next_index = 0;
	s->open = false;
	cr_open_page(s, 0, ts);
}
