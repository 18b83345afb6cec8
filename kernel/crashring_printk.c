// SPDX-License-Identifier: GPL-2.0
/*
 * The printk source: every line printk stores, with its level, caller and
 * sequence number.
 *
 * The console tracepoint carries the text after printk stripped its level
 * prefix, and not the level. vprintk_store() decides the level the way
 * the ftrace hook on its entry below does: the `level` argument, else the
 * KERN_<n> prefix of the formatted text (a prefix may come in through an
 * argument, as print_hex_dump()'s "%s%s%s" does), else the running
 * kernel's default message level. The tracepoint probe, which runs next
 * in the same context, picks it up (struct cr_levels: a printk that
 * interrupts or nests inside another between the two does not take its
 * level). Without the hook, or for a task that moved to another CPU in
 * between, lines are recorded with level 255 (unknown).
 *
 * What the console tracepoint does not see, crashring does not record: a
 * line printk's own recursion guard drops, or one its ring buffer cannot
 * reserve room for.
 *
 * Before 6.3 the tracepoint must stay off (CR_CONSOLE_TRACEPOINT_IN_NMI):
 * there the hook formats each line itself, as printk_sprint() is about to,
 * and records it, before printk's recursion guard and ring buffer: only
 * then is a line recorded that printk goes on to drop.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/ftrace.h>
#include <linux/sched.h>
#include <linux/printk.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/string.h>
#include <linux/preempt.h>
#include <linux/stdarg.h>
#include "crashring.h"
#include "crashring_compat.h"
#include "crashring_emit.h"

#define CR_LEVEL_UNKNOWN	255
/* What vprintk_store() calls a KERN_CONT line (CR_LEVEL_CONT is printk-internal). */
#define CR_LEVEL_CONT		(-2)
#define CR_FILTER_LEN		256

static int printk_level = 7;
module_param(printk_level, int, 0400);
MODULE_PARM_DESC(printk_level, "Record printk lines up to this level (0 emerg .. 7 debug)");

static char *printk_prefix;
module_param(printk_prefix, charp, 0400);
MODULE_PARM_DESC(printk_prefix, "Record only printk lines starting with one of these comma-separated prefixes");

/*
 * The printk filter. Readers (the tracepoint probe, preemption off) follow
 * cr_filter; writers fill the other buffer and flip the pointer, then wait
 * for an RCU grace period before the old one may be reused.
 */
struct cr_filter {
	int max_level;
	char prefixes[CR_FILTER_LEN];	/* comma-separated, NUL-terminated */
};

static struct cr_filter cr_filters[2];
static struct cr_filter __rcu *cr_filter = RCU_INITIALIZER(&cr_filters[0]);

/* The contexts interrupt_context_level() tells apart: task, softirq, irq, NMI. */
#define CR_CONTEXTS	4
/* printk nests at most 3 deep per context (PRINTK_MAX_RECURSION); spare room. */
#define CR_LEVEL_DEPTH	8

/* A level the hook saw, for the vprintk_store() frame of @task at @sp. */
struct cr_pending_level {
	const struct task_struct *task;
	unsigned long sp;
	int level;
};

/*
 * Per CPU and context, the levels of printk calls between the hook and
 * the tracepoint, innermost last: a printk nested inside another (a WARN
 * that fires in the console tracepoint, say) is pushed and popped before
 * the outer one is popped. Entries of a call that never reached the
 * tracepoint (printk's recursion guard) or of a task that was preempted
 * and moved to another CPU are skipped by their task and frame.
 */
struct cr_levels {
	struct cr_pending_level pending[CR_CONTEXTS][CR_LEVEL_DEPTH];
	u8 depth[CR_CONTEXTS];
	int last[CR_CONTEXTS];
};

static DEFINE_PER_CPU(struct cr_levels, cr_levels) = {
	.last = { [0 ... CR_CONTEXTS - 1] = CR_LEVEL_UNKNOWN },
};
static atomic64_t cr_printk_seq = ATOMIC64_INIT(0);
static bool cr_hook_on;

/* printk's LOG_LINE_MAX before 6.3 (kernel/printk/internal.h): the longest line it stores. */
#define CR_LINE_MAX		(1024 - 32)

/*
 * Where the hook formats a line, per CPU and context, when it records
 * lines itself. Two deep: ftrace lets a callback recurse once in a context
 * (its transition bit, for an interrupt that arrives before preempt_count
 * says so), never twice. From alloc_percpu(): a module's static per-CPU
 * room is a few KiB shared by every module.
 */
struct cr_line_buf {
	char text[CR_CONTEXTS][2][CR_LINE_MAX];
	u8 depth[CR_CONTEXTS];
};

static struct cr_line_buf __percpu *cr_line_bufs;

static u32 cr_caller_id(void)
{
	return in_task() ? task_pid_nr(current) : 0x80000000U | raw_smp_processor_id();
}

static bool cr_prefix_match(const char *prefixes, const char *text, size_t len)
{
	const char *p = prefixes;

	if (!*p)
		return true;
	while (*p) {
		size_t n = strcspn(p, ",");

		if (n && n <= len && !memcmp(text, p, n))
			return true;
		p += n + (p[n] == ',');
	}
	return false;
}

/* The slot of the calling context: ftrace callbacks and probes run in their caller's. */
static unsigned int cr_context(void)
{
	return interrupt_context_level();
}

/*
 * Applies the KERN_<n> and KERN_CONT prefixes at @text as
 * printk_parse_prefix() reads them: the first level wins, and a KERN_CONT
 * before any level makes the line take the level of the line it continues,
 * as printk's record does when it appends the fragment.
 */
static void cr_parse_prefix(const char *text, int *level)
{
	int kern;

	while ((kern = printk_get_level(text))) {
		if (kern >= '0' && kern <= '7' && *level == LOGLEVEL_DEFAULT)
			*level = kern - '0';
		else if (kern == 'c' && *level == LOGLEVEL_DEFAULT)
			*level = CR_LEVEL_CONT;
		text += 2;
	}
}

/*
 * Where vprintk_store()'s va_list argument arrives as a pointer to the
 * caller's state, which va_copy() can copy and leave for printk to read
 * again: x86-64, whose va_list is an array, and arm64, whose 32-byte
 * va_list struct AAPCS64 passes as a pointer to a copy the caller made
 * ("composite types larger than 16 bytes", B.4 of its parameter passing
 * rules).
 */
#define CR_VA_LIST_BY_POINTER (IS_ENABLED(CONFIG_X86_64) || IS_ENABLED(CONFIG_ARM64))

/*
 * A format that starts with a conversion may take its level from an
 * argument: format its first bytes as vprintk_store() is about to.
 */
static __printf(1, 0) void cr_parse_formatted_prefix(const char *fmt, unsigned long args,
						      int *level)
{
	char prefix[8];
	va_list copy;

	if (!CR_VA_LIST_BY_POINTER || fmt[0] != '%' || !args)
		return;
	va_copy(copy, *(va_list *)args);
	vsnprintf(prefix, sizeof(prefix), fmt, copy);
	va_end(copy);
	cr_parse_prefix(prefix, level);
}

/* Runs with interrupts of this context excluded: ftrace callback or tracepoint probe. */
static void cr_push_level(int level, unsigned long sp)
{
	struct cr_levels *l = this_cpu_ptr(&cr_levels);
	unsigned int ctx = cr_context();
	struct cr_pending_level *p = l->pending[ctx];
	unsigned int d = l->depth[ctx];

	if (d == CR_LEVEL_DEPTH) {
		/* Only stale entries can fill it: drop the oldest. */
		memmove(p, p + 1, (CR_LEVEL_DEPTH - 1) * sizeof(*p));
		d--;
	}
	p[d] = (struct cr_pending_level){ .task = current, .sp = sp, .level = level };
	l->depth[ctx] = d + 1;
}

/*
 * The level of the printk whose console tracepoint is running: the
 * innermost pending entry of this task whose frame is above this one.
 */
static int cr_pop_level(unsigned int ctx)
{
	struct cr_levels *l = this_cpu_ptr(&cr_levels);
	unsigned long sp = (unsigned long)__builtin_frame_address(0);
	unsigned int d = l->depth[ctx];
	int level = CR_LEVEL_UNKNOWN;

	while (d) {
		const struct cr_pending_level *p = &l->pending[ctx][--d];

		if (p->task == current && p->sp > sp) {
			level = p->level;
			break;
		}
	}
	l->depth[ctx] = d;
	return level;
}

/* vprintk_store(facility, level, dev_info, fmt, args): its arguments, by place. */
enum { CR_ARG_FACILITY, CR_ARG_LEVEL, CR_ARG_DEV_INFO, CR_ARG_FMT, CR_ARG_ARGS, CR_NR_ARGS };

/*
 * vprintk_store()'s arguments and stack pointer at its entry: from the
 * whole registers ftrace saves where it can (DYNAMIC_FTRACE_WITH_REGS: x86,
 * and arm64 before 6.2), else from the argument registers it always saves
 * (DYNAMIC_FTRACE_WITH_ARGS: arm64 from 6.2, which dropped WITH_REGS).
 */
#ifdef CONFIG_DYNAMIC_FTRACE_WITH_REGS
#define CR_VPRINTK_OPS_FLAGS (FTRACE_OPS_FL_SAVE_REGS | FTRACE_OPS_FL_RECURSION)

static bool cr_call_args(struct ftrace_regs *fregs, unsigned long *arg, unsigned long *sp)
{
	struct pt_regs *regs = ftrace_get_regs(fregs);
	unsigned int i;

	if (!regs)
		return false;
	for (i = 0; i < CR_NR_ARGS; i++)
		arg[i] = regs_get_kernel_argument(regs, i);
	*sp = kernel_stack_pointer(regs);
	return true;
}
#else
#define CR_VPRINTK_OPS_FLAGS FTRACE_OPS_FL_RECURSION

static bool cr_call_args(struct ftrace_regs *fregs, unsigned long *arg, unsigned long *sp)
{
	unsigned int i;

	for (i = 0; i < CR_NR_ARGS; i++)
		arg[i] = ftrace_regs_get_argument(fregs, i);
	*sp = ftrace_regs_get_stack_pointer(fregs);
	return true;
}
#endif

/* The level vprintk_store() with arguments @arg is about to give its line. */
static int cr_vprintk_level(const unsigned long *arg)
{
	int level = (int)arg[CR_ARG_LEVEL];
	const char *fmt = (const char *)arg[CR_ARG_FMT];

	if (level == LOGLEVEL_DEFAULT && fmt) {
		cr_parse_prefix(fmt, &level);
		if (level == LOGLEVEL_DEFAULT && !printk_get_level(fmt))
			cr_parse_formatted_prefix(fmt, arg[CR_ARG_ARGS], &level);
	}
	return level == LOGLEVEL_DEFAULT ? default_message_loglevel : level;
}

/**
 * crashring_printk_wanted - whether the printk filter keeps a line
 * @level: its level, or CR_LEVEL_UNKNOWN
 * @text: its text
 * @len: @text's bytes
 *
 * Called with preemption off: an RCU-sched read side.
 */
bool crashring_printk_wanted(int level, const char *text, size_t len)
{
	struct cr_filter *f = rcu_dereference_sched(cr_filter);

	if (level != CR_LEVEL_UNKNOWN && level > f->max_level)
		return false;
	return cr_prefix_match(f->prefixes, text, len);
}

/* The next printk event's seq: every line recorded, backfilled or not, counts. */
u64 crashring_printk_next_seq(void)
{
	return atomic64_inc_return(&cr_printk_seq);
}

/* Records a printk line of @level (or CR_LEVEL_CONT) printed in context @ctx. */
static void cr_record_line(unsigned int ctx, int level, const char *text, size_t len)
{
	struct {
		u8 level;
		u8 flags;
		u32 caller;
		u64 seq;
	} __packed rec;

	rec.flags = 0;
	if (level == CR_LEVEL_CONT) {
		level = this_cpu_read(cr_levels.last[ctx]);
		rec.flags |= 2;
	} else if (level < 0 || level > 7) {
		level = CR_LEVEL_UNKNOWN;
	}
	this_cpu_write(cr_levels.last[ctx], level);
	/* Callers run with preemption off. */
	if (!crashring_printk_wanted(level, text, len))
		return;
	rec.level = level;
	rec.caller = cr_caller_id();
	rec.seq = crashring_printk_next_seq();
	cr_emit(CRASHRING_EVENT_PRINTK, &rec, sizeof(rec), text, len, offsetof(typeof(rec), flags));
}

/*
 * Formats the line of the vprintk_store() call with arguments @arg as
 * printk_sprint() is about to (where CR_VA_LIST_BY_POINTER): at most
 * CR_LINE_MAX - 1 bytes, the trailing newline and, for the kernel's own
 * facility, the KERN_<n> and KERN_CONT prefixes taken off. Then records it.
 */
static void cr_record_formatted(const unsigned long *arg, int level)
{
	int facility = (int)arg[CR_ARG_FACILITY];
	const char *fmt = (const char *)arg[CR_ARG_FMT];
	unsigned long args = arg[CR_ARG_ARGS];
	unsigned int ctx = cr_context();
	struct cr_line_buf *b = this_cpu_ptr(cr_line_bufs);
	unsigned int d = b->depth[ctx];
	va_list copy;
	size_t len;
	char *text;

	if (!CR_VA_LIST_BY_POINTER || !fmt || !args || d == ARRAY_SIZE(b->text[ctx]))
		return;
	text = b->text[ctx][d];
	b->depth[ctx] = d + 1;
	va_copy(copy, *(va_list *)args);
	len = vscnprintf(text, CR_LINE_MAX, fmt, copy);
	va_end(copy);
	if (len && text[len - 1] == '\n')
		len--;
	while (!facility && len >= 2 && printk_get_level(text)) {
		text += 2;
		len -= 2;
	}
	cr_record_line(ctx, level, text, len);
	b->depth[ctx] = d;
}

/*
 * The ftrace callback on vprintk_store()'s entry. ftrace runs it in the
 * caller's context with preemption off and lets each context in once
 * (FTRACE_OPS_FL_RECURSION), so an NMI's printk is seen while a task's
 * is in here on the same CPU; a kprobe's handler would miss it.
 */
static void cr_vprintk_store_entry(unsigned long ip, unsigned long parent_ip,
				   struct ftrace_ops *op, struct ftrace_regs *fregs)
{
	unsigned long arg[CR_NR_ARGS], sp;
	int level;

	if (!cr_call_args(fregs, arg, &sp))
		return;
	level = cr_vprintk_level(arg);
	if (CR_CONSOLE_TRACEPOINT_IN_NMI)
		cr_push_level(level, sp);
	else if (READ_ONCE(crashring.sources) & CR_SRC_PRINTK)
		cr_record_formatted(arg, level);
}

static struct ftrace_ops cr_vprintk_ops = {
	.func = cr_vprintk_store_entry,
	.flags = CR_VPRINTK_OPS_FLAGS,
};

static void cr_console_probe(void *data, const char *text, size_t len)
{
	unsigned int ctx;

	if (!(READ_ONCE(crashring.sources) & CR_SRC_PRINTK))
		return;
	ctx = cr_context();
	cr_record_line(ctx, cr_pop_level(ctx), text, len);
}

/**
 * crashring_set_filter - replace the printk filter
 * @spec: "level=N" and/or "prefix=A,B" separated by spaces; "prefix=" clears
 *
 * Return: 0 or -EINVAL. Called with crashring.lock held.
 */
int crashring_set_filter(const char *spec)
{
	struct cr_filter *old = rcu_dereference_protected(cr_filter,
							  lockdep_is_held(&crashring.lock));
	struct cr_filter *next = old == &cr_filters[0] ? &cr_filters[1] : &cr_filters[0];
	const char *p = spec;

	*next = *old;
	while (*p) {
		size_t n = strcspn(p, "\n ");

		if (n > 6 && !strncmp(p, "level=", 6)) {
			char num[4] = { 0 };

			memcpy(num, p + 6, min_t(size_t, n - 6, sizeof(num) - 1));
			if (kstrtoint(num, 10, &next->max_level) || next->max_level < 0 ||
			    next->max_level > 7)
				return -EINVAL;
		} else if (n >= 7 && !strncmp(p, "prefix=", 7)) {
			if (n - 7 >= CR_FILTER_LEN)
				return -EINVAL;
			memset(next->prefixes, 0, sizeof(next->prefixes));
			memcpy(next->prefixes, p + 7, n - 7);
		} else if (n) {
			return -EINVAL;
		}
		p += n;
		p += strspn(p, "\n ");
	}
	/* Publishes *next filled in, on any architecture. */
	rcu_assign_pointer(cr_filter, next);
	/* Probes run with preemption off: after this none still reads @old. */
	synchronize_rcu();
	return 0;
}

void crashring_show_filter(char *buf, size_t len)
{
	struct cr_filter *f;

	rcu_read_lock_sched();
	f = rcu_dereference_sched(cr_filter);

	scnprintf(buf, len, "level=%d prefix=%s%s\n", f->max_level, f->prefixes,
		  cr_hook_on ? "" : CR_CONSOLE_TRACEPOINT_IN_NMI ?
		  " (levels unknown: no vprintk_store hook)" :
		  " (no printk lines: no vprintk_store hook)");
	rcu_read_unlock_sched();
}

/* Attaches cr_vprintk_ops to vprintk_store(), with its line buffers if it needs them. */
static int cr_hook_vprintk_store(void)
{
	/* ftrace_set_filter() may write into the pattern it parses. */
	static unsigned char name[] = "vprintk_store";
	int err;

	if (!CR_CONSOLE_TRACEPOINT_IN_NMI) {
		cr_line_bufs = alloc_percpu(struct cr_line_buf);
		if (!cr_line_bufs)
			return -ENOMEM;
	}
	err = ftrace_set_filter(&cr_vprintk_ops, name, sizeof(name) - 1, 1);
	if (!err)
		err = register_ftrace_function(&cr_vprintk_ops);
	if (err) {
		ftrace_free_filter(&cr_vprintk_ops);
		free_percpu(cr_line_bufs);
		cr_line_bufs = NULL;
	}
	return err;
}

/* After it returns, no callback runs or will run (ftrace waits for them). */
static void cr_unhook_vprintk_store(void)
{
	if (!cr_hook_on)
		return;
	unregister_ftrace_function(&cr_vprintk_ops);
	ftrace_free_filter(&cr_vprintk_ops);
	free_percpu(cr_line_bufs);
	cr_line_bufs = NULL;
	cr_hook_on = false;
}

static int cr_printk_init(void)
{
	cr_filters[0].max_level = clamp(printk_level, 0, 7);
	if (printk_prefix)
		strscpy(cr_filters[0].prefixes, printk_prefix, sizeof(cr_filters[0].prefixes));
	cr_hook_on = !cr_hook_vprintk_store();
	if (!cr_hook_on)
		pr_warn("cannot hook vprintk_store: %s\n",
			CR_CONSOLE_TRACEPOINT_IN_NMI ? "printk levels will be recorded as unknown"
						     : "printk lines will not be recorded");
	return 0;
}

/* Never attached where the vprintk_store() hook records the lines. */
static struct crashring_probe cr_printk_probes[] = {
	{ .tracepoint = "console", .probe = cr_console_probe },
};

const struct crashring_source crashring_source_printk = {
	.name = "printk",
	.probes = cr_printk_probes,
	.nprobes = CR_CONSOLE_TRACEPOINT_IN_NMI ? ARRAY_SIZE(cr_printk_probes) : 0,
	.init = cr_printk_init,
	.exit = cr_unhook_vprintk_store,
};
