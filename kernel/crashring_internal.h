/* SPDX-License-Identifier: GPL-2.0 */
/*
 * crashring.ko internals shared by its files.
 *
 * The reserved range is split into two slots of equal size. Each slot holds
 * one generation (a region of pstore-ring format v1). A boot records into a
 * free slot and keeps the other one, if it holds a previous generation,
 * read-only until user space acknowledges it has archived it: a crashed
 * generation is never overwritten before it was read, at the cost of half
 * the reserved memory per generation.
 */
#ifndef CRASHRING_INTERNAL_H
#define CRASHRING_INTERNAL_H

#include <linux/types.h>
#include <linux/bits.h>
#include <linux/uidgid.h>
#include <linux/cpumask.h>
#include <linux/fs.h>
#include <linux/mm_types.h>
#include <linux/mutex.h>
#include <linux/preempt.h>
#include <linux/smp.h>
#include "crashring_ring.h"

#define CRASHRING_SLOTS 2

/* The longest shutdown reason kept: a restart command's, as reboot(2) takes it. */
#define CRASHRING_SHUTDOWN_REASON_MAX 255

/* Which event sources are on: bits of crashring.sources (crashring_sources.c). */
enum {
	CR_SRC_PRINTK_NR,
	CR_SRC_MARKER_NR,
	CR_SRC_SCHED_NR,
	CR_SRC_IRQ_NR,
	CR_SRC_CRASH_NR,
	CR_SRC_DEBUG_NR,
	CR_SRC_RAS_NR,
	CR_NR_SOURCES
};

#define CR_SRC_PRINTK	BIT(CR_SRC_PRINTK_NR)
#define CR_SRC_MARKER	BIT(CR_SRC_MARKER_NR)
#define CR_SRC_SCHED	BIT(CR_SRC_SCHED_NR)
#define CR_SRC_IRQ	BIT(CR_SRC_IRQ_NR)
#define CR_SRC_CRASH	BIT(CR_SRC_CRASH_NR)
#define CR_SRC_DEBUG	BIT(CR_SRC_DEBUG_NR)
#define CR_SRC_RAS	BIT(CR_SRC_RAS_NR)

struct tracepoint;

/* A tracepoint a source attaches @probe to while it is on. */
struct crashring_probe {
	const char *tracepoint;
	void *probe;
	struct tracepoint *tp;	/* found at load; NULL: not in this kernel */
	bool registered;
};

/*
 * An event source: its name (in sources=, sysfs "sources" and FORMAT.md),
 * the tracepoints it attaches to while on, and what it sets up at load
 * (@init, before any probe is attached; an error fails the load) and
 * takes down at unload (@exit, once no probe can run).
 */
struct crashring_source {
	const char *name;
	struct crashring_probe *probes;
	unsigned int nprobes;
	int (*init)(void);
	void (*exit)(void);
};

enum crashring_slot_state {
	CR_SLOT_EMPTY,		/* no magic: free to record into */
	CR_SLOT_GENERATION,	/* a generation with a valid header */
	CR_SLOT_DAMAGED,	/* magic, but the header fails its checks */
	CR_SLOT_UNREADABLE,	/* poisoned persistent memory: left alone */
};

struct crashring_slot {
	phys_addr_t phys;
	u64 size;
	u8 *mem;
	enum crashring_slot_state state;
	u64 generation;		/* the last one it held (unchecked if damaged) */
};

struct crashring_state {
	phys_addr_t phys;
	u64 size;
	const char *source;	/* "region" or "reserve_mem" */
	bool claimed;		/* region= range requested in /proc/iomem */
	bool pmem;		/* the range is persistent memory */
	bool read_only;		/* a capture kernel: never writes the range */
	void *map;
	struct crashring_slot slot[CRASHRING_SLOTS];
	int cur;		/* slot being recorded into, or -1 */
	int prev;		/* slot exposed as "previous", or -1 */
	/* stream lane * nr_cpu_ids + cpu, then the user stream pool */
	struct crashring_stream *streams;
	u32 nstreams;		/* the kernel's streams */
	u32 nuser;		/* the pool's streams after them */
	u32 user_pages;		/* pages of each pool stream */
	struct crashring_cpu *cpus;		/* each CPU's lanes, by CPU */
	u32 nlanes;
	u8 boot_id[16];
	bool enabled;		/* recording on (sysfs "enabled") */
	s64 wall_offset_ns;	/* the last recorded: the header's, then clock events' */
	unsigned long sources;	/* CR_SRC_* */
	struct crashring_callsites callsites;	/* the recording slot's callsite area */
	char status[256];	/* what user space should know, one line */
	struct mutex lock;	/* serialises control changes, never the write path */
};

extern struct crashring_state crashring;

/**
 * crashring_this_cpu - the calling CPU's lanes, preemption disabled
 *
 * Return: the lanes, or NULL (preemption enabled again) when not recording.
 * A non-NULL return must be paired with crashring_put_cpu().
 */
static inline struct crashring_cpu *crashring_this_cpu(void)
{
	struct crashring_cpu *cpus;
	unsigned int cpu;

	preempt_disable_notrace();
	/* Pairs with the release in crashring_start_recording(). */
	if (!smp_load_acquire(&crashring.enabled)) {
		preempt_enable_notrace();
		return NULL;
	}
	cpus = READ_ONCE(crashring.cpus);
	cpu = raw_smp_processor_id();
	if (!cpus || cpu >= nr_cpu_ids) {
		preempt_enable_notrace();
		return NULL;
	}
	return &cpus[cpu];
}

static inline void crashring_put_cpu(void)
{
	preempt_enable_notrace();
}

/* crashring_main.c */
int crashring_start_recording(int slot);
void crashring_release_previous(void);
u64 crashring_slot_bytes(const struct crashring_slot *slot);
int crashring_read_slot(const struct crashring_slot *slot, u64 off, void *dst, size_t len);
void crashring_note(const char *fmt, ...) __printf(1, 2);
void crashring_write_back_slot(int cur);

/* crashring_region.c */
int crashring_find_range(void);
void crashring_release_region(void);

/* crashring_shutdown.c */
int crashring_shutdown_init(void);
void crashring_shutdown_exit(void);
int crashring_set_shutdown_reason(const char *buf, size_t count);
int crashring_show_shutdown_reason(char *buf);
void crashring_mark_clean(void *mem);

/* crashring_sources.c */
int crashring_sources_init(void);
void crashring_sources_exit(void);
int crashring_set_sources(unsigned long want);
int crashring_parse_sources(const char *spec, unsigned long *bits);
int crashring_show_sources(char *buf);
void crashring_record_crash(u32 reason, const char *message, u64 at);

/* crashring_printk.c */
extern const struct crashring_source crashring_source_printk;
int crashring_set_filter(const char *spec);
void crashring_show_filter(char *buf, size_t len);
bool crashring_printk_wanted(int level, const char *text, size_t len);
u64 crashring_printk_next_seq(void);

/* crashring_backfill.c */
struct kmsg_dump_iter;
bool crashring_backfill_wanted(void);
void crashring_backfill_begin(struct kmsg_dump_iter *iter);
unsigned int crashring_backfill(struct kmsg_dump_iter *iter);
unsigned int crashring_keep_reset_evidence(void);
size_t crashring_reset_evidence(const char **text);

/* crashring_marker.c */
extern const struct crashring_source crashring_source_marker;
int crashring_dev_register(void);
void crashring_dev_unregister(void);

/* crashring_sched.c */
/* crashring_debug.c */
extern const struct crashring_source crashring_source_debug;
int crashring_set_debug(const char *spec);
int crashring_show_debug(char *buf, kuid_t opener, bool admin);
struct crashring_user_control;
u64 crashring_debug_user_mask(const char *stream, const struct crashring_user_control *ctl);
void crashring_debug_reset(void);

extern const struct crashring_source crashring_source_sched;
extern const struct crashring_source crashring_source_irq;

/* crashring_ras.c */
extern const struct crashring_source crashring_source_ras;
void crashring_ras_panic(u64 at);

/* crashring_clock.c */
u64 crashring_panic_clock(void);
s64 crashring_mono_minus_local(void);
void crashring_record_clock(s64 wall_offset_ns);
void crashring_clock_arm(void);
void crashring_clock_stop(void);

/* crashring_budget.c */
kuid_t crashring_charged_uid(const struct cred *cred, kuid_t uid);
bool crashring_budget_take(kuid_t uid, size_t bytes);

int crashring_writeback_init(void);
void crashring_writeback_arm(void);
void crashring_writeback_exit(void);
int crashring_writeback_emit(char *buf, int at);

/* crashring_user.c */
u32 crashring_user_pool(u32 page_size, u32 taken, u32 *pages);
int crashring_user_init(void);
void crashring_user_exit(void);
long crashring_user_ioctl(struct file *file, unsigned int cmd, unsigned long arg);
int crashring_user_mmap(struct file *file, struct vm_area_struct *vma);
void crashring_user_release(struct file *file);
u32 crashring_user_write_back(void);
void crashring_user_selection_changed(void);
int crashring_user_show(char *buf, int at, kuid_t opener, bool admin);

/* crashring_live.c */
int crashring_live_register(void);
void crashring_live_unregister(void);

/* crashring_sysfs.c */
int crashring_sysfs_init(void);
void crashring_sysfs_exit(void);

#endif /* CRASHRING_INTERNAL_H */
