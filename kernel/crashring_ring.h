/* SPDX-License-Identifier: GPL-2.0 */
/*
 * crashring ring writer: formats a region and records into its per-stream
 * rings of pages, following pstore-ring/FORMAT.md ("Writer rules").
 *
 * The code depends on nothing kernel-only (see crashring_env.h), so the same
 * source is compiled in user space by `cargo test` and checked against the
 * Rust reader and golden images.
 *
 * Concurrency: each stream has one writer at a time. A CPU has one stream
 * per nesting lane (struct crashring_cpu): a context that interrupts a
 * write in progress on the same CPU (softirq, irq, NMI, and anything nested
 * in those) records on the next lane, so nothing is lost to nesting. Only
 * a write nested deeper than the last lane finds that lane busy, drops its
 * event and counts it; the lane's owner folds the count into its page on
 * its next write or its close. Nothing here sleeps, allocates or takes a
 * lock.
 *
 *   enter:   depth++ -> the lane of this depth
 *   reserve: try_enter(busy) -> room check (close + open next page)
 *            -> time prefix + record header written -> pending_end
 *   caller:  fills the payload
 *   commit:  wmb -> { commit, count } in one 8-byte store -> pending_end = 0
 *            -> leave(busy)
 *   leave:   depth--
 *
 * Every page open and close ends by rewriting one of the stream's two tail
 * copies (wmb -> 32 bytes with their CRC), so a reader can tell how far the
 * stream went when its newest pages are unreadable.
 */
#ifndef CRASHRING_RING_H
#define CRASHRING_RING_H

#include "crashring_env.h"
#include "crashring_format.h"

struct crashring_field_def {
	const char *name;
	u8 kind;
	u16 size;
};

struct crashring_event_def {
	u8 id;
	const char *name;
	u16 nfields;
	const struct crashring_field_def *fields;
};

struct crashring_stream_spec {
	u16 kind;
	u16 cpu;
	u8 lane;	/* nesting lane of a kernel CPU stream */
	const char *name;
	u32 pid;	/* user streams: the writing process and its user */
	u32 uid;
};

struct crashring_callsites;

/*
 * A page header's `commit` and `count`, published in one 8-byte store
 * (cr_publish()) so that a reader, a live snapshot's included, reads
 * them in one load and never sees one without the other.
 */
union crashring_published {
	struct {
		u32 commit;
		u32 count;
	} f;
	u64 both;
};

struct crashring_config {
	u32 page_size;
	u32 pages_per_stream;	/* lane 0 (and user streams without user_pages); 0: share the rest */
	u32 lane_pages;		/* each stream of a lane above 0 */
	u32 user_pages;		/* each user stream; 0: as lane 0 */
	u8 word_size;
	u16 nstreams;
	const struct crashring_stream_spec *streams;
	u16 ncustom;
	const struct crashring_event_def *custom;
	u8 boot_id[16];
	u64 generation;
	u64 created_ns;
	s64 wall_offset_ns;
	const char *kernel_release;
	const char *hostname;
	const char *producer;
	u32 callsite_pages;	/* the callsite area's, after every stream's; 0: none */
	struct crashring_callsites *callsites;	/* set up by crashring_format() */
};

/* Per-stream writer state. Lives in ordinary memory, not in the region. */
struct crashring_stream {
	u8 *pages;
	u32 page_size;
	u32 page_count;
	u16 index;
	bool open;
	bool stopped;		/* crashring_stop_all(): records nothing more */
	bool durable;		/* write each ordered step back (persistent memory) */
	u32 cur;
	u64 seq;
	u64 next_index;
	u64 time;
	u32 commit;
	u32 count;
	u32 reserved_len;	/* bytes the pending reservation adds */
	u32 pending_end;	/* commit the reserved record would publish; 0: none */
	u64 bytes_total;	/* committed, for statistics */
	u64 drops_total;	/* counted in pages, for statistics */
	local_t busy;
	local_t pending_drops;
	struct crashring_stream_tail *tails;	/* the stream's two tail copies */
};

/* A CPU's streams, one per nesting lane. Ordinary memory, per CPU. */
struct crashring_cpu {
	local_t depth;		/* writes in progress on this CPU */
	u32 nlanes;
	struct crashring_stream *lane[CRASHRING_MAX_LANES];
};

/* How far crashring_write_back_new() got in a stream. */
struct crashring_wb_mark {
	u64 seq;	/* the page it ended on */
	u64 bytes;	/* the stream's bytes_total then */
};

int crashring_format(void *mem, u64 size, const struct crashring_config *cfg,
		     struct crashring_stream *streams);
u64 crashring_region_size(const void *mem);
int crashring_check_header(const void *mem, u64 max_size);

/* A callsite to add to the callsite area (FORMAT.md, section 18). */
struct crashring_callsite {
	u8 source;
	u8 level;
	u16 category;
	u32 line;
	const char *module;
	const char *function;
	const char *file;
	const char *format;
};

/* The callsite area's writer state. Lives in ordinary memory. */
struct crashring_callsites {
	u8 *area;
	u32 size;
	u64 generation;
	cr_cursor_t next;	/* where the next entry goes */
};

void crashring_callsites_init(struct crashring_callsites *a, void *area, u32 size,
			      u64 generation);
int crashring_callsite_add(struct crashring_callsites *a, const struct crashring_callsite *c,
			   u32 *id);
void crashring_set_state(void *mem, u32 state, u32 reason, u64 crash_ns,
			 u32 crash_cpu, const char *message);
bool crashring_set_hostname(void *mem, const char *name);
bool crashring_state_valid(const struct crashring_state_block *st);
void *crashring_reserve(struct crashring_stream *s, u64 ts, u8 type, u32 len);
void crashring_commit(struct crashring_stream *s);
int crashring_write(struct crashring_stream *s, u64 ts, u8 type,
		    const void *payload, u32 len);
void crashring_drop(struct crashring_stream *s);
void crashring_close(struct crashring_stream *s);
void crashring_start_earlier(struct crashring_stream *s, u64 ts);
struct crashring_stream *crashring_enter(struct crashring_cpu *c);
void crashring_leave(struct crashring_cpu *c);
void crashring_take_innermost(struct crashring_cpu *c);
void crashring_stop_all(struct crashring_stream *streams, u32 n);
void crashring_set_durable(struct crashring_stream *s, bool on);
u32 crashring_write_back_new(const struct crashring_stream *s, struct crashring_wb_mark *mark);
u32 crashring_schema_size(const struct crashring_config *cfg);
void crashring_reset_user_stream(void *mem, struct crashring_stream *s, const char *name,
				 u32 pid, u32 uid, u64 ts);

#endif /* CRASHRING_RING_H */
