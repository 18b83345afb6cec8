// SPDX-License-Identifier: GPL-2.0
/*
 * crashring ring writer: the C twin of pstore-ring's `write` module. Both
 * follow pstore-ring/FORMAT.md, sections 10 ("Writer rules") and 12 ("What
 * a crash can leave behind"); user-space tests hold this file to the Rust
 * writer's golden images byte for byte.
 */
#include "crashring_ring.h"

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#endif

#include "crashring_schema.h"

/*
 * Not const: the magic is complemented at run time from this copy, so the
 * stored form never appears in the module's text for a dump scan to find.
 */
static char cr_magic_plain[] = CRASHRING_MAGIC_PLAIN;

struct cr_plan {
	u32 schema_offset;
	u32 schema_size;
	u32 tail_offset;
	u64 pages_offset;
	u32 pages_per_stream;	/* lane 0, and user streams without user_pages */
	u32 lane_pages;		/* every stream of a lane above 0 */
	u32 user_pages;		/* every user stream; 0: pages_per_stream */
	u64 region_size;
};

/* A stream's pages when they do not depend on what the others leave, else 0. */
static u32 cr_fixed_pages(u32 lane_pages, u32 user_pages, const struct crashring_stream_spec *spec)
{
	if (spec->lane)
		return lane_pages;
	return spec->kind == CRASHRING_STREAM_USER ? user_pages : 0;
}

static u32 cr_stream_pages(const struct cr_plan *p, const struct crashring_stream_spec *spec)
{
	return cr_fixed_pages(p->lane_pages, p->user_pages, spec) ?: p->pages_per_stream;
}

/* The format's CRC-32C over two parts, as every checksum in it is taken. */
static u32 cr_crc2(const void *a, size_t alen, const void *b, size_t blen)
{
	u32 crc = cr_crc32(~0U, a, alen);

	return cr_crc32(crc, b, blen) ^ ~0U;
}

static u32 cr_words(u32 len)
{
	return (CRASHRING_RECORD_HEADER_SIZE + len + CRASHRING_RECORD_ALIGN - 1) /
	       CRASHRING_RECORD_ALIGN;
}

static u32 cr_record_header(u8 type, u32 words, u16 delta)
{
	return (u32)type | (words << 8) | ((u32)delta << 16);
}

/* Copies text into a NUL-padded field; -EINVAL unless a NUL still fits. */
static int cr_put_text(char *dst, size_t cap, const char *src)
{
	size_t n = src ? strlen(src) : 0;

	memset(dst, 0, cap);
	if (n >= cap)
		return -EINVAL;
	memcpy(dst, src, n);
	return 0;
}

static const struct crashring_event_def *cr_def(const struct crashring_config *cfg, u32 i)
{
	if (i < ARRAY_SIZE(cr_builtin))
		return &cr_builtin[i];
	return &cfg->custom[i - ARRAY_SIZE(cr_builtin)];
}

static u32 cr_ndefs(const struct crashring_config *cfg)
{
	return ARRAY_SIZE(cr_builtin) + cfg->ncustom;
}

/**
 * crashring_schema_size - bytes of the schema table for @cfg
 * @cfg: the region's configuration (its custom events)
 */
u32 crashring_schema_size(const struct crashring_config *cfg)
{
	u32 size = CRASHRING_SCHEMA_HEADER_SIZE;
	u32 i;

	for (i = 0; i < cr_ndefs(cfg); i++)
		size += CRASHRING_EVENT_DESC_SIZE +
			cr_def(cfg, i)->nfields * CRASHRING_FIELD_DESC_SIZE;
	return size;
}

static int cr_check_schema(const struct crashring_config *cfg)
{
	u8 seen[32] = { 0 };
	u32 i, f;

	for (i = 0; i < cr_ndefs(cfg); i++) {
		const struct crashring_event_def *d = cr_def(cfg, i);

		if (d->id < CRASHRING_FIRST_EVENT_TYPE || (seen[d->id / 8] & (1 << (d->id % 8))))
			return -EINVAL;
		seen[d->id / 8] |= 1 << (d->id % 8);
		if (!d->name || !*d->name || strlen(d->name) > 31 || d->nfields > 32)
			return -EINVAL;
		for (f = 0; f < d->nfields; f++) {
			const struct crashring_field_def *fd = &d->fields[f];

			if (!fd->name || !*fd->name || strlen(fd->name) > 19)
				return -EINVAL;
			if (fd->kind == CRASHRING_FIELD_CHARS &&
			    (!fd->size || fd->size >= CRASHRING_MAX_RECORD_SIZE))
				return -EINVAL;
		}
	}
	return 0;
}

/* Descriptors: one per stream, and the callsite area's. */
static u32 cr_ndesc(const struct crashring_config *cfg)
{
	return cfg->nstreams + (cfg->callsite_pages ? 1 : 0);
}

static int cr_plan(const struct crashring_config *cfg, u64 size, struct cr_plan *p)
{
	u32 page = cfg->page_size;
	u64 align, stream_bytes, fit, fixed_bytes = 0, room;
	u32 i, nested = 0, flat = 0;

	if (page < CRASHRING_MIN_PAGE_SIZE || page > CRASHRING_MAX_PAGE_SIZE || (page & (page - 1)))
		return -EINVAL;
	if (!cfg->nstreams || cr_ndesc(cfg) > CRASHRING_MAX_STREAMS)
		return -EINVAL;
	if (cfg->callsite_pages && !cfg->callsites)
		return -EINVAL;
	if (cfg->word_size != 4 && cfg->word_size != 8)
		return -EINVAL;
	for (i = 0; i < cfg->nstreams; i++) {
		const struct crashring_stream_spec *spec = &cfg->streams[i];

		if (spec->name && strlen(spec->name) > 31)
			return -EINVAL;
		if (spec->lane >= CRASHRING_MAX_LANES ||
		    (spec->lane && spec->kind != CRASHRING_STREAM_KERNEL_CPU))
			return -EINVAL;
		nested += spec->lane > 0;
		fixed_bytes += (u64)cr_fixed_pages(cfg->lane_pages, cfg->user_pages, spec) * page;
		flat += !cr_fixed_pages(cfg->lane_pages, cfg->user_pages, spec);
	}
	if ((nested && cfg->lane_pages < 2) || cfg->user_pages == 1)
		return -EINVAL;
	fixed_bytes += (u64)cfg->callsite_pages * page;
	if (cr_check_schema(cfg))
		return -EINVAL;
	p->schema_offset = CRASHRING_DESC_OFFSET + cr_ndesc(cfg) * CRASHRING_DESC_SIZE;
	p->schema_size = crashring_schema_size(cfg);
	p->tail_offset = (p->schema_offset + p->schema_size + 7) / 8 * 8;
	align = page < 4096 ? page : 4096;
	p->pages_offset = p->tail_offset +
			  (u64)cr_ndesc(cfg) * CRASHRING_TAIL_COPIES * CRASHRING_TAIL_SIZE;
	p->pages_offset = (p->pages_offset + align - 1) / align * align;
	p->lane_pages = nested ? cfg->lane_pages : 0;
	p->user_pages = cfg->user_pages;
	room = size > p->pages_offset ? size - p->pages_offset : 0;
	if (fixed_bytes > room)
		return -ENOSPC;
	stream_bytes = flat ? (room - fixed_bytes) / flat : 0;
	fit = stream_bytes / page;
	if (fit > 0xffffffffULL)
		fit = 0xffffffffULL;
	p->pages_per_stream = cfg->pages_per_stream ? cfg->pages_per_stream : (u32)fit;
	if (flat && (p->pages_per_stream < 2 || p->pages_per_stream > fit))
		return -ENOSPC;
	p->region_size = p->pages_offset + fixed_bytes + (u64)flat * p->pages_per_stream * page;
	return 0;
}

static void cr_write_schema(u8 *out, const struct crashring_config *cfg, u32 size)
{
	struct crashring_schema_header *sh = (void *)out;
	u32 at = CRASHRING_SCHEMA_HEADER_SIZE;
	u32 i, f;

	for (i = 0; i < cr_ndefs(cfg); i++) {
		const struct crashring_event_def *d = cr_def(cfg, i);
		struct crashring_event_desc *ed = (void *)(out + at);

		ed->type_id = d->id;
		ed->field_count = d->nfields;
		ed->flags = 0;
		cr_put_text(ed->name, sizeof(ed->name), d->name);
		at += CRASHRING_EVENT_DESC_SIZE;
		for (f = 0; f < d->nfields; f++) {
			struct crashring_field_desc *fd = (void *)(out + at);

			cr_put_text(fd->name, sizeof(fd->name), d->fields[f].name);
			fd->kind = d->fields[f].kind;
			fd->reserved = 0;
			fd->size = d->fields[f].size;
			at += CRASHRING_FIELD_DESC_SIZE;
		}
	}
	sh->magic = CRASHRING_SCHEMA_MAGIC;
	sh->count = cr_ndefs(cfg);
	sh->size = size;
	sh->crc = cr_crc2(sh, 12, out + CRASHRING_SCHEMA_HEADER_SIZE,
			  size - CRASHRING_SCHEMA_HEADER_SIZE);
}

static int cr_write_header(u8 *mem, const struct crashring_config *cfg, const struct cr_plan *p)
{
	struct crashring_region_header *h = (void *)mem;
	u32 i, cpus = 0;
	int err;

	for (i = 0; i < 8; i++)
		h->magic[i] = (u8)~READ_ONCE(cr_magic_plain[i]);
	for (i = 0; i < cfg->nstreams; i++)
		cpus += cfg->streams[i].kind == CRASHRING_STREAM_KERNEL_CPU &&
			!cfg->streams[i].lane;
	h->endian_tag = CRASHRING_ENDIAN_TAG;
	h->version = CRASHRING_FORMAT_VERSION;
	h->header_size = CRASHRING_HEADER_SIZE;
	h->word_size = cfg->word_size;
	h->stream_count = cr_ndesc(cfg);
	h->cpu_count = cpus;
	h->page_header_size = CRASHRING_PAGE_HEADER_SIZE;
	h->page_size = cfg->page_size;
	h->desc_size = CRASHRING_DESC_SIZE;
	h->region_size = p->region_size;
	h->desc_offset = CRASHRING_DESC_OFFSET;
	h->schema_offset = p->schema_offset;
	h->schema_size = p->schema_size;
	h->clock_id = CRASHRING_CLOCK_MONOTONIC;
	memcpy(h->boot_id, cfg->boot_id, sizeof(h->boot_id));
	h->generation = cfg->generation;
	h->created_ns = cfg->created_ns;
	h->wall_offset_ns = cfg->wall_offset_ns;
	h->flags = CRASHRING_HEADER_FLAG_TAILS;
	h->tail_offset = p->tail_offset;
	err = cr_put_text(h->kernel_release, sizeof(h->kernel_release), cfg->kernel_release);
	err = err ?: cr_put_text(h->hostname, sizeof(h->hostname), cfg->hostname);
	err = err ?: cr_put_text(h->producer, sizeof(h->producer), cfg->producer);
	if (err)
		return err;
	h->header_crc = cr_crc2(h, CRASHRING_HEADER_SIZE - 4, NULL, 0);
	return 0;
}

static void cr_write_desc(u8 *mem, u32 i, const struct crashring_stream_spec *spec,
			  u32 page_count, u64 pages_offset)
{
	struct crashring_stream_desc *d =
		(void *)(mem + CRASHRING_DESC_OFFSET + i * CRASHRING_DESC_SIZE);

	d->kind = spec->kind;
	d->cpu = spec->cpu;
	d->page_count = page_count;
	d->pages_offset = pages_offset;
	cr_put_text(d->name, sizeof(d->name), spec->name);
	d->pid = spec->pid;
	d->flags = spec->lane;
	d->uid = spec->uid;
	d->crc = cr_crc2(d, CRASHRING_DESC_SIZE - 4, NULL, 0);
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
 * crashring_set_state - rewrite the generation's state block
 * @mem: the region
 * @state: CRASHRING_STATE_*
 * @reason: CRASHRING_REASON_*
 * @crash_ns: time of the crash, or 0
 * @crash_cpu: CPU that crashed
 * @message: the crash message; its first 35 bytes are kept here
 */
void crashring_set_state(void *mem, u32 state, u32 reason, u64 crash_ns, u32 crash_cpu,
			 const char *message)
{
	struct crashring_state_block *b = (void *)((u8 *)mem + CRASHRING_STATE_OFFSET);
	struct crashring_state_block n;
	size_t len = message ? strlen(message) : 0;

	memset(&n, 0, sizeof(n));
	n.state = state;
	n.reason = reason;
	n.crash_ns = crash_ns;
	n.crash_cpu = crash_cpu;
	n.updates = b->updates + 1;
	memcpy(n.message, message, len < 35 ? len : 35);
	n.crc = cr_crc2(&n, CRASHRING_STATE_SIZE - 4, NULL, 0);
	memcpy(b, &n, sizeof(n));
}

/**
 * crashring_state_valid - whether a copy of a state block passes its CRC
 * @st: the copy (of a slot that may be damaged or another boot's)
 */
bool crashring_state_valid(const struct crashring_state_block *st)
{
	return st->crc == cr_crc2(st, CRASHRING_STATE_SIZE - 4, NULL, 0);
}

/**
 * crashring_region_size - the size a formatted region occupies
 * @mem: the region
 */
u64 crashring_region_size(const void *mem)
{
	return ((const struct crashring_region_header *)mem)->region_size;
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
	struct cr_plan p;
	u8 *base = mem;
	u64 pages_at;
	u32 i, slot;
	int err;

	err = cr_plan(cfg, size, &p);
	if (err)
		return err;
	memset(base, 0, p.pages_offset);
	cr_write_schema(base + p.schema_offset, cfg, p.schema_size);
	err = cr_write_header(base, cfg, &p);
	if (err)
		return err;
	crashring_set_state(mem, CRASHRING_STATE_RUNNING, CRASHRING_REASON_NONE, 0, 0, "");
	pages_at = p.pages_offset;
	for (i = 0; i < cfg->nstreams; i++) {
		struct crashring_stream *s = &streams[i];

		memset(s, 0, sizeof(*s));
		s->pages = base + pages_at;
		s->page_size = cfg->page_size;
		s->page_count = cr_stream_pages(&p, &cfg->streams[i]);
		cr_write_desc(base, i, &cfg->streams[i], s->page_count, pages_at);
		pages_at += (u64)s->page_count * cfg->page_size;
		s->index = i;
		s->tails = (void *)(base + p.tail_offset +
				    (u64)i * CRASHRING_TAIL_COPIES * CRASHRING_TAIL_SIZE);
		s->time = cfg->created_ns;
		for (slot = 0; slot < s->page_count; slot++)
			memset(cr_page(s, slot), 0, CRASHRING_PAGE_HEADER_SIZE);
		cr_open_page(s, 0, cfg->created_ns);
	}
	if (cfg->callsite_pages) {
		static const struct crashring_stream_spec area = {
			.kind = CRASHRING_STREAM_CALLSITES,
			.cpu = 0xffff,
			.name = "callsites",
		};
		u32 bytes = cfg->callsite_pages * cfg->page_size;

		cr_write_desc(base, cfg->nstreams, &area, cfg->callsite_pages, pages_at);
		crashring_callsites_init(cfg->callsites, base + pages_at, bytes, cfg->generation);
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
 * Rewrites the stream's descriptor (kind, CPU, pages unchanged; tails not
 * kept) with its checksum, zeroes every page, headers and data, so that
 * the new holder can read nothing of an earlier holder's, an older
 * generation's or the memory's past, and opens page 0 again, as a new
 * stream starts. No writer may be on the stream.
 */
void crashring_reset_user_stream(void *mem, struct crashring_stream *s, const char *name,
				 u32 pid, u32 uid, u64 ts)
{
	struct crashring_stream_desc *d =
		(void *)((u8 *)mem + CRASHRING_DESC_OFFSET + s->index * CRASHRING_DESC_SIZE);

	cr_put_text(d->name, sizeof(d->name), name);
	d->pid = pid;
	d->uid = uid;
	/* The holder maps the pages alone: the tail table is not its to write. */
	d->flags = CRASHRING_DESC_NO_TAILS;
	d->crc = cr_crc2(d, CRASHRING_DESC_SIZE - 4, NULL, 0);
	memset(s->pages, 0, (size_t)s->page_count * s->page_size);
	s->seq = 0;
	s->next_index = 0;
	s->open = false;
	cr_open_page(s, 0, ts);
}

/**
 * crashring_check_header - whether @mem starts with a region header
 * @mem: the memory
 * @max_size: bytes available; the header may not claim more
 *
 * Return: 0 for a valid header, -ENOENT when there is no magic, -EBADMSG
 * when the magic is there but the header fails its checks (a damaged or
 * foreign region).
 */
int crashring_check_header(const void *mem, u64 max_size)
{
	const struct crashring_region_header *h = mem;
	int i;

	for (i = 0; i < 8; i++) {
		u8 want = ~(u8)READ_ONCE(cr_magic_plain[i]);

		if (h->magic[i] != want)
			return -ENOENT;
	}
	if (h->endian_tag != CRASHRING_ENDIAN_TAG || h->version != CRASHRING_FORMAT_VERSION ||
	    h->header_crc != cr_crc2(h, CRASHRING_HEADER_SIZE - 4, NULL, 0) ||
	    h->region_size > max_size)
		return -EBADMSG;
	return 0;
}

/**
 * crashring_callsites_init - zero the callsite area and write its header
 * @a: the writer state to set up
 * @area: the area's bytes in the region
 * @size: how many
 * @generation: the region's generation, which every entry's CRC covers
 */
void crashring_callsites_init(struct crashring_callsites *a, void *area, u32 size,
			      u64 generation)
{
	struct crashring_callsite_header *h = area;

	memset(area, 0, size);
	h->magic = CRASHRING_CALLSITE_MAGIC;
	a->area = area;
	a->size = size;
	a->generation = generation;
	cr_cursor_set(&a->next, CRASHRING_CALLSITE_HEADER_SIZE);
}

static u32 cr_string_room(const char *s)
{
	return 2 + (s ? strlen(s) : 0);
}

static u8 *cr_put_string(u8 *at, const char *s)
{
	u16 n = s ? strlen(s) : 0;

	memcpy(at, &n, 2);
	if (n)
		memcpy(at + 2, s, n);
	return at + 2 + n;
}

/**
 * crashring_callsite_add - add a callsite entry, from any context
 * @a: the area
 * @c: the callsite; its strings NUL-terminated, each under 64 KiB
 * @id: where its id goes
 *
 * Reserves the entry's bytes by a compare-and-swap on the cursor, which
 * never moves past the area's end, then writes `size` first and `crc`
 * last (FORMAT.md, section 18), so that a crash part way leaves a torn
 * entry a reader steps over. No lock, no allocation.
 *
 * Return: 0, or -E2BIG (the entry would be over CRASHRING_MAX_CALLSITE_SIZE)
 * or -ENOSPC (the area is full); either is counted in the header's
 * `refused`, and the caller records the message formatted instead.
 */
int crashring_callsite_add(struct crashring_callsites *a, const struct crashring_callsite *c,
			   u32 *id)
{
	struct crashring_callsite_header *h = (void *)a->area;
	struct crashring_callsite_entry *e;
	u64 want = CRASHRING_CALLSITE_ENTRY_SIZE;
	int at, end;
	u8 *p;

	want += cr_string_room(c->module) + cr_string_room(c->function) +
		cr_string_room(c->file) + cr_string_room(c->format);
	want = (want + CRASHRING_RECORD_ALIGN - 1) / CRASHRING_RECORD_ALIGN *
	       CRASHRING_RECORD_ALIGN;
	if (want > CRASHRING_MAX_CALLSITE_SIZE) {
		WRITE_ONCE(h->refused, READ_ONCE(h->refused) + 1);
		return -E2BIG;
	}
	at = cr_cursor_read(&a->next);
	do {
		end = at + (int)want;
		if ((u32)end > a->size) {
			WRITE_ONCE(h->refused, READ_ONCE(h->refused) + 1);
			return -ENOSPC;
		}
	} while (!cr_cursor_try(&a->next, &at, end));
	e = (void *)(a->area + at);
	WRITE_ONCE(e->size, (u32)want);
	cr_wmb();
	e->source = c->source;
	e->level = c->level;
	e->category = c->category;
	e->line = c->line;
	p = (u8 *)(e + 1);
	p = cr_put_string(p, c->module);
	p = cr_put_string(p, c->function);
	p = cr_put_string(p, c->file);
	p = cr_put_string(p, c->format);
	memset(p, 0, a->area + end - p);
	cr_wmb();
	e->crc = cr_crc2(&a->generation, sizeof(a->generation), &e->source,
			 want - offsetof(struct crashring_callsite_entry, source));
	cr_wmb();
	*id = at;
	return 0;
}
