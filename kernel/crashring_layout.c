// SPDX-License-Identifier: GPL-2.0
/*
 * crashring region layout: plans where a configuration's header, stream
 * descriptors, schema table, tails and pages go (pstore-ring/FORMAT.md,
 * sections 2 to 6) and writes everything but the pages, which belong to
 * the writer (crashring_ring.c). The C twin of the layout half of
 * pstore-ring's `write::format`; user-space tests hold both to the same
 * golden images.
 */
#include "crashring_layout.h"

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
 * crashring_set_hostname - the host name a region's header gives
 * @mem: the region
 * @name: the host's name; its first 63 bytes are kept
 *
 * A generation is formatted with the name the kernel has then, and a
 * module loaded from the initramfs formats one before the system has
 * named itself ("(none)"); the module follows the name after. The header
 * is rewritten in place, its CRC last: a crash between the two leaves a
 * header a reader must take as it stands (FORMAT.md, section 3).
 * Return: whether the header changed.
 */
bool crashring_set_hostname(void *mem, const char *name)
{
	struct crashring_region_header *h = mem;
	char n[sizeof(h->hostname)];
	size_t len = strnlen(name, sizeof(n) - 1);

	memset(n, 0, sizeof(n));
	memcpy(n, name, len);
	if (!memcmp(n, h->hostname, sizeof(n)))
		return false;
	memcpy(h->hostname, n, sizeof(n));
	h->header_crc = cr_crc2(h, CRASHRING_HEADER_SIZE - 4, NULL, 0);
	return true;
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
 * crashring_lay_out - write a region's header, state block, descriptors and
 * schema table
 * @mem: the memory, 8-byte aligned
 * @size: its bytes; the region uses whole pages of it
 * @cfg: what to lay out
 *
 * Zeroes everything before the pages (the tails included) and, when @cfg
 * has a callsite area, sets it up. The streams' pages are the caller's:
 * each descriptor says where they are.
 *
 * Return: 0, -EINVAL for an impossible @cfg, -ENOSPC when @size is too small.
 */
int crashring_lay_out(void *mem, u64 size, const struct crashring_config *cfg)
{
	struct cr_plan p;
	u8 *base = mem;
	u64 pages_at;
	u32 i, count;
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
		count = cr_stream_pages(&p, &cfg->streams[i]);
		cr_write_desc(base, i, &cfg->streams[i], count, pages_at);
		pages_at += (u64)count * cfg->page_size;
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
 * crashring_desc_set_holder - rewrite a user stream's descriptor for a new
 * holder
 * @mem: the region
 * @index: the stream's descriptor
 * @name: the holder's name for the stream
 * @pid: the holder's process
 * @uid: the holder's user
 *
 * Kind, CPU and pages stay; the tails are no longer kept, since the holder
 * maps the pages alone and the tail table is not its to write.
 */
void crashring_desc_set_holder(void *mem, u32 index, const char *name, u32 pid, u32 uid)
{
	struct crashring_stream_desc *d =
		(void *)((u8 *)mem + CRASHRING_DESC_OFFSET + index * CRASHRING_DESC_SIZE);

	cr_put_text(d->name, sizeof(d->name), name);
	d->pid = pid;
	d->uid = uid;
	d->flags = CRASHRING_DESC_NO_TAILS;
	d->crc = cr_crc2(d, CRASHRING_DESC_SIZE - 4, NULL, 0);
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
