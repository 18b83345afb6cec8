// SPDX-License-Identifier: GPL-2.0
/*
 * crashring callsite area (pstore-ring/FORMAT.md, section 18): the debug
 * source's callsites, each written once from any context and named by its
 * offset in the records that use it.
 */
#include "crashring_layout.h"

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
