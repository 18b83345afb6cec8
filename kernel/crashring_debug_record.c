// SPDX-License-Identifier: GPL-2.0
/*
 * How the debug source records a message (FORMAT.md, section 18): its
 * callsite added once to the region's callsite area, its id found again
 * in a table filled by compare-and-swap, its arguments encoded as the
 * reader's formatter takes them, into a per-CPU buffer of the calling
 * context. No lock, no allocation, no sleeping; strings and what %p
 * extensions read are read without faulting.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/dynamic_debug.h>
#include <linux/percpu.h>
#include <linux/ctype.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/hash.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/stdarg.h>
#include "crashring.h"
#include "crashring_debug.h"
#include "crashring_debug_args.h"
#include "crashring_emit.h"

/*
 * The callsite table: which callsites have an entry in the region's
 * callsite area, and its id. Slots are claimed by compare-and-swap and
 * never freed while recording, except those of an unloading module,
 * which die (their keys' addresses may be reused by the next module).
 */
#define CR_SITE_SLOTS	4096
#define CR_SITE_PROBES	64

enum { CR_SITE_FREE, CR_SITE_CLAIMED, CR_SITE_READY, CR_SITE_DEAD };

struct cr_site {
	unsigned long key, caller;	/* dyndbg: the descriptor; DRM: format, caller */
	u32 id;				/* 0: refused (the area full): record formatted */
	atomic_t state;
};

static struct cr_site *cr_sites;

/* Where messages are encoded, per CPU and context, two deep (as printk's hook). */
#define CR_CONTEXTS	4
#define CR_ARGS_MAX	CRASHRING_MAX_RECORD_SIZE

struct cr_debug_buf {
	u8 bytes[CR_CONTEXTS][2][CR_ARGS_MAX];
	u8 depth[CR_CONTEXTS];
};

static struct cr_debug_buf __percpu *cr_debug_bufs;


/* --- the callsite table ----------------------------------------------- */

/* The module name in "%ps" of a module's address: "func [mod]" gives "mod". */
static void cr_module_of(const char *symbol, char *module, size_t len)
{
	const char *open = strrchr(symbol, '[');
	size_t n;

	module[0] = '\0';
	if (!open || symbol[strlen(symbol) - 1] != ']')
		return;
	n = min(len - 1, strlen(open + 1) - 1);
	memcpy(module, open + 1, n);
	module[n] = '\0';
}

/* Adds @call's callsite to the region's area; its id, or 0 when refused. */
static u32 cr_site_add(const struct cr_call *call)
{
	struct crashring_callsite c = {
		.source = call->source,
		.level = LOGLEVEL_DEBUG,
		.category = call->category,
		.format = call->fmt,
	};
	/* Longer names are cut: this is the write path's stack. */
	char function[128], module[MODULE_NAME_LEN];
	u32 id = 0;

	if (call->desc) {
		c.module = call->desc->modname;
		c.function = call->desc->function;
		c.file = call->desc->filename;
		c.line = call->desc->lineno;
	} else {
		/* What __drm_dev_dbg() prints as its "[drm:%ps]". */
		snprintf(function, sizeof(function), "%ps", (void *)call->caller);
		cr_module_of(function, module, sizeof(module));
		c.module = module;
		c.function = function;
		c.file = "";
	}
	if (crashring_callsite_add(&crashring.callsites, &c, &id))
		return 0;
	return id;
}

/*
 * The id of @call's callsite, adding it the first time; 0 when it has
 * none (the area full or missing, or another CPU adding it right now):
 * the message is then recorded formatted.
 */
static u32 cr_site_id(const struct cr_call *call)
{
	u32 h = hash_long(call->key ^ (call->caller * 31), 32), i;

	if (!cr_sites || !READ_ONCE(crashring.callsites.area))
		return 0;
	for (i = 0; i < CR_SITE_PROBES; i++) {
		struct cr_site *s = &cr_sites[(h + i) % CR_SITE_SLOTS];
		int state = atomic_read_acquire(&s->state);

		if (state == CR_SITE_FREE &&
		    atomic_cmpxchg(&s->state, CR_SITE_FREE, CR_SITE_CLAIMED) == CR_SITE_FREE) {
			s->key = call->key;
			s->caller = call->caller;
			s->id = cr_site_add(call);
			atomic_set_release(&s->state, CR_SITE_READY);
			return s->id;
		}
		/* Lost the race for it: as whoever won left it. */
		if (state == CR_SITE_FREE)
			state = atomic_read_acquire(&s->state);
		if (state == CR_SITE_CLAIMED)
			return 0;
		if (state == CR_SITE_READY && s->key == call->key && s->caller == call->caller)
			return s->id;
	}
	return 0;
}

/**
 * crashring_debug_reset - forget every callsite's id
 *
 * Called before recording starts in a freshly formatted slot, whose
 * callsite area is empty; nothing records then.
 */
void crashring_debug_reset(void)
{
	if (cr_sites)
		memset(cr_sites, 0, CR_SITE_SLOTS * sizeof(*cr_sites));
}

/* --- recording -------------------------------------------------------- */

/*
 * Dynamic debug's prefix flags (+t, +m, +f, +s, +l) of @call as the
 * event's: the reader writes the prefix from them and the callsite's
 * entry, as __dynamic_emit_prefix() does, cut where this kernel cuts it
 * (PREFIX_SIZE grew to 128 with +s, in 6.3).
 */
static u8 cr_prefix_flags(const struct cr_call *call)
{
	unsigned int f = call->prefixed && call->desc ? call->desc->flags : 0;
	u8 out = 0;

	if (f & _DPRINTK_FLAGS_INCL_TID)
		out |= CRASHRING_DEBUG_TID;
	if (f & _DPRINTK_FLAGS_INCL_MODNAME)
		out |= CRASHRING_DEBUG_MODULE;
	if (f & _DPRINTK_FLAGS_INCL_FUNCNAME)
		out |= CRASHRING_DEBUG_FUNCTION;
	if (f & _DPRINTK_FLAGS_INCL_LINENO)
		out |= CRASHRING_DEBUG_LINE;
#ifdef _DPRINTK_FLAGS_INCL_SOURCENAME
	if (f & _DPRINTK_FLAGS_INCL_SOURCENAME)
		out |= CRASHRING_DEBUG_FILE;
	if (out)
		out |= CRASHRING_DEBUG_PREFIX_128;
#endif
	return out;
}

/* The thread id +t shows: the caller's, or none in interrupt context. */
static u32 cr_tid(void)
{
	return in_interrupt() ? CRASHRING_DEBUG_IN_INTERRUPT : (u32)task_pid_vnr(current);
}

/*
 * The prefix of @flags written out, for a message recorded formatted:
 * as __dynamic_emit_prefix() writes it.
 */
static void cr_emit_prefix(char *buf, size_t size, u8 flags, const struct _ddebug *desc)
{
	size_t pos = 0, after_tid;

	buf[0] = '\0';
	if (flags & CRASHRING_DEBUG_TID) {
		u32 tid = cr_tid();

		if (tid == CRASHRING_DEBUG_IN_INTERRUPT)
			pos += scnprintf(buf + pos, size - pos, "<intr> ");
		else
			pos += scnprintf(buf + pos, size - pos, "[%d] ", (int)tid);
	}
	after_tid = pos;
	if (flags & CRASHRING_DEBUG_MODULE)
		pos += scnprintf(buf + pos, size - pos, "%s:", desc->modname);
	if (flags & CRASHRING_DEBUG_FUNCTION)
		pos += scnprintf(buf + pos, size - pos, "%s:", desc->function);
	if (flags & CRASHRING_DEBUG_FILE)
		pos += scnprintf(buf + pos, size - pos, "%s:", desc->filename);
	if (flags & CRASHRING_DEBUG_LINE)
		pos += scnprintf(buf + pos, size - pos, "%u:", desc->lineno);
	if (pos != after_tid)
		scnprintf(buf + pos, size - pos, " ");
}

/* The slot of the calling context: ftrace callbacks and probes run in their caller's. */
static unsigned int cr_context(void)
{
	return interrupt_context_level();
}

/**
 * crashring_debug_record - record one debug message
 * @call: its callsite and device
 * @ap: its arguments
 *
 * Records one message: its callsite's id, the parts of dynamic debug's
 * prefix it asks for (with the thread id first in the arguments for +t)
 * and the arguments; or, when the callsite has no id, the text printk
 * would have printed after the device (DEBUG_FORMATTED), or with a
 * prefix, the whole line, the device in it. Never fails silently for
 * lack of room: what does not fit one record is cut and flagged
 * (DEBUG_CUT). A message diverted here never reaches printk (unless
 * "printk" is selected): one it cannot record is counted dropped, as
 * the ring counts what it cannot keep.
 */
void crashring_debug_record(const struct cr_call *call, va_list ap)
{
	struct cr_debug_buf *b = this_cpu_ptr(cr_debug_bufs);
	unsigned int ctx = cr_context(), d = b->depth[ctx];
	struct crashring_cpu *c;
	struct crashring_stream *s;
	struct {
		u32 callsite;
		u8 level;
		u8 flags;
		u16 category;
	} __packed rec = { .level = LOGLEVEL_DEBUG, .category = call->category };
	u16 ndev = min_t(size_t, strlen(call->device), CR_DEVICE_MAX), nargs;
	struct cr_args a;
	u32 room;
	u8 *dst;

	c = crashring_this_cpu();
	if (!c)
		return;
	if (d == ARRAY_SIZE(b->bytes[ctx])) {
		/* No buffer left in this context for its arguments. */
		crashring_drop(crashring_enter(c));
		crashring_leave(c);
		crashring_put_cpu();
		return;
	}
	b->depth[ctx] = d + 1;
	rec.callsite = cr_site_id(call);
	rec.flags = cr_prefix_flags(call);
	s = crashring_enter(c);
	room = min_t(u32, CRASHRING_MAX_RECORD_SIZE, s->page_size - CRASHRING_PAGE_HEADER_SIZE) -
	       CRASHRING_RECORD_HEADER_SIZE - sizeof(rec) - 2 - ndev - 2;
	a = (struct cr_args){ .p = b->bytes[ctx][d], .room = min_t(u32, room, CR_ARGS_MAX) };
	if (rec.callsite) {
		va_list copy;

		if (rec.flags & CRASHRING_DEBUG_TID) {
			u32 tid = cr_tid();

			/* The room is a record's, far more than 4 bytes. */
			memcpy(a.p, &tid, sizeof(tid));
			a.p += sizeof(tid);
			a.room -= sizeof(tid);
		}
		va_copy(copy, ap);
		crashring_encode_args(&a, call->fmt, copy);
		va_end(copy);
		nargs = a.p - b->bytes[ctx][d];
	} else {
		struct va_format vaf = { .fmt = call->fmt };
		va_list copy;
		int n;

		va_copy(copy, ap);
		vaf.va = &copy;
		if (call->source == CRASHRING_CALLSITE_DRM) {
			n = snprintf(a.p, a.room, "[drm:%ps] %pV", (void *)call->caller, &vaf);
		} else if (rec.flags) {
			/* The prefix goes before the device: the whole line, no device apart. */
			char prefix[128];

			cr_emit_prefix(prefix, rec.flags & CRASHRING_DEBUG_PREFIX_128 ? 128 : 64,
				       rec.flags, call->desc);
			n = snprintf(a.p, a.room, "%s%s%s%pV", prefix, call->device,
				     ndev ? ": " : "", &vaf);
			ndev = 0;
		} else {
			n = snprintf(a.p, a.room, "%pV", &vaf);
		}
		rec.flags = CRASHRING_DEBUG_FORMATTED;
		va_end(copy);
		a.cut = a.room && n >= a.room;
		nargs = a.room ? min_t(u32, n, a.room - 1) : 0;
	}
	if (a.cut)
		rec.flags |= CRASHRING_DEBUG_CUT;
	dst = crashring_reserve(s, ktime_get_mono_fast_ns(), CRASHRING_EVENT_DEBUG,
				sizeof(rec) + 2 + ndev + 2 + nargs);
	if (dst) {
		memcpy(dst, &rec, sizeof(rec));
		dst += sizeof(rec);
		memcpy(dst, &ndev, 2);
		memcpy(dst + 2, call->device, ndev);
		dst += 2 + ndev;
		memcpy(dst, &nargs, 2);
		memcpy(dst + 2, b->bytes[ctx][d], nargs);
		crashring_commit(s);
	}
	crashring_leave(c);
	crashring_put_cpu();
	b->depth[ctx] = d;
}

/**
 * crashring_debug_forget - the callsites of a module going away die
 * @mod: the module
 *
 * Their addresses may come back as another module's.
 */
void crashring_debug_forget(const struct module *mod)
{
	unsigned int i;

	for (i = 0; cr_sites && i < CR_SITE_SLOTS; i++) {
		struct cr_site *s = &cr_sites[i];

		if (atomic_read_acquire(&s->state) == CR_SITE_READY &&
		    (within_module(s->key, mod) || within_module(s->caller, mod)))
			atomic_set(&s->state, CR_SITE_DEAD);
	}
}

void crashring_debug_record_exit(void)
{
	free_percpu(cr_debug_bufs);
	cr_debug_bufs = NULL;
	kvfree(cr_sites);
	cr_sites = NULL;
}

/* The callsite table and the encoding buffers, allocated at load. */
int crashring_debug_record_init(void)
{
	cr_sites = kvcalloc(CR_SITE_SLOTS, sizeof(*cr_sites), GFP_KERNEL);
	cr_debug_bufs = alloc_percpu(struct cr_debug_buf);
	if (!cr_sites || !cr_debug_bufs) {
		crashring_debug_record_exit();
		return -ENOMEM;
	}
	return 0;
}
