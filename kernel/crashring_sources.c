// SPDX-License-Identifier: GPL-2.0
/*
 * What crashring.ko records: printk lines (through the `console`
 * tracepoint, which sees every line, dynamic debug included, on the CPU
 * that printed it), user markers written to /dev/crashring, sched_switch
 * and irq_handler_entry/exit (off by default), crash markers, and
 * crashring_log() for other modules.
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
#include <linux/tracepoint.h>
#include <linux/miscdevice.h>
#include <linux/capability.h>
#include <linux/fs.h>
#include <linux/uaccess.h>
#include <linux/slab.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/interrupt.h>
#include <linux/printk.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/string.h>
#include <linux/timekeeping.h>
#include <linux/sysfs.h>
#include <linux/preempt.h>
#include <linux/stdarg.h>
#include <linux/workqueue.h>
#include <linux/capability.h>
#include "crashring.h"
#include "crashring_compat.h"
#include "crashring_internal.h"

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

static char *sources;
module_param(sources, charp, 0400);
MODULE_PARM_DESC(sources, "Comma-separated event sources: printk,marker,crash,sched,irq (default printk,marker,crash)");

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

struct cr_tracepoint {
	const char *name;
	void *probe;
	unsigned long source;
	struct tracepoint *tp;
	bool registered;
};

/*
 * Records one event stamped @at (0: the clock when it is written): @fixed
 * bytes, then, if @str is not NULL, a str field
 * (u16 length, then the bytes) cut to what fits one record and one page.
 * When it is cut and @cut_flag_at is not negative, bit 0 of that byte of
 * the fixed part is set (printk's "truncated" flag).
 *
 * Inlined into each source, where @flen is a constant: the fixed part's
 * copy becomes a few moves and the call's prologue goes, which took a
 * ninth of a 32-byte marker's instructions (`cargo xtask bench`).
 */
static __always_inline void cr_emit_at(u64 at, u8 type, const void *fixed, u32 flen,
				       const char *str, u32 slen, int cut_flag_at)
{
	struct crashring_cpu *c = crashring_this_cpu();
	struct crashring_stream *s;
	u32 room, len;
	u16 n;
	u8 *dst;

	if (!c)
		return;
	s = crashring_enter(c);
	room = min_t(u32, CRASHRING_MAX_RECORD_SIZE, s->page_size - CRASHRING_PAGE_HEADER_SIZE) -
	       CRASHRING_RECORD_HEADER_SIZE - flen - (str ? 2 : 0);
	n = min_t(u32, slen, room);
	len = flen + (str ? 2 + n : 0);
	dst = crashring_reserve(s, at ? at : ktime_get_mono_fast_ns(), type, len);
	if (dst) {
		memcpy(dst, fixed, flen);
		if (n < slen && cut_flag_at >= 0)
			dst[cut_flag_at] |= 1;
		if (str) {
			memcpy(dst + flen, &n, 2);
			memcpy(dst + flen + 2, str, n);
		}
		crashring_commit(s);
	}
	crashring_leave(c);
	crashring_put_cpu();
}

/* cr_emit_at(), stamped with the clock read once the record's lane is held. */
static __always_inline void cr_emit(u8 type, const void *fixed, u32 flen, const char *str,
				    u32 slen, int cut_flag_at)
{
	cr_emit_at(0, type, fixed, flen, str, slen, cut_flag_at);
}

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
 * A format that starts with a conversion may take its level from an
 * argument: format its first bytes as vprintk_store() is about to (on
 * x86-64, where the va_list argument is a pointer to its state).
 */
static __printf(1, 0) void cr_parse_formatted_prefix(const char *fmt, unsigned long args,
						      int *level)
{
	char prefix[8];
	va_list copy;

	if (!IS_ENABLED(CONFIG_X86_64) || fmt[0] != '%' || !args)
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

/*
 * The level vprintk_store(facility, level, dev_info, fmt, args) is about
 * to give its line.
 */
static int cr_vprintk_level(struct pt_regs *regs)
{
	int level = (int)regs_get_kernel_argument(regs, 1);
	const char *fmt = (const char *)regs_get_kernel_argument(regs, 3);

	if (level == LOGLEVEL_DEFAULT && fmt) {
		cr_parse_prefix(fmt, &level);
		if (level == LOGLEVEL_DEFAULT && !printk_get_level(fmt))
			cr_parse_formatted_prefix(fmt, regs_get_kernel_argument(regs, 4), &level);
	}
	return level == LOGLEVEL_DEFAULT ? default_message_loglevel : level;
}

/* Records a printk line of @level (or CR_LEVEL_CONT) printed in context @ctx. */
static void cr_record_line(unsigned int ctx, int level, const char *text, size_t len)
{
	struct cr_filter *f;
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
	/* Callers run with preemption off: an RCU-sched read side. */
	f = rcu_dereference_sched(cr_filter);
	if (level != CR_LEVEL_UNKNOWN && level > f->max_level)
		return;
	if (!cr_prefix_match(f->prefixes, text, len))
		return;
	rec.level = level;
	rec.caller = cr_caller_id();
	rec.seq = atomic64_inc_return(&cr_printk_seq);
	cr_emit(CRASHRING_EVENT_PRINTK, &rec, sizeof(rec), text, len, offsetof(typeof(rec), flags));
}

/*
 * Formats the line of the vprintk_store() call at @regs as printk_sprint()
 * is about to (on x86-64, where the va_list argument is a pointer to its
 * state, which va_copy() leaves for printk to read again): at most
 * CR_LINE_MAX - 1 bytes, the trailing newline and, for the kernel's own
 * facility, the KERN_<n> and KERN_CONT prefixes taken off. Then records it.
 */
static void cr_record_formatted(struct pt_regs *regs, int level)
{
	int facility = (int)regs_get_kernel_argument(regs, 0);
	const char *fmt = (const char *)regs_get_kernel_argument(regs, 3);
	unsigned long args = regs_get_kernel_argument(regs, 4);
	unsigned int ctx = cr_context();
	struct cr_line_buf *b = this_cpu_ptr(cr_line_bufs);
	unsigned int d = b->depth[ctx];
	va_list copy;
	size_t len;
	char *text;

	if (!IS_ENABLED(CONFIG_X86_64) || !fmt || !args || d == ARRAY_SIZE(b->text[ctx]))
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
	struct pt_regs *regs = ftrace_get_regs(fregs);
	int level;

	if (!regs)
		return;
	level = cr_vprintk_level(regs);
	if (CR_CONSOLE_TRACEPOINT_IN_NMI)
		cr_push_level(level, kernel_stack_pointer(regs));
	else if (READ_ONCE(crashring.sources) & CR_SRC_PRINTK)
		cr_record_formatted(regs, level);
}

static struct ftrace_ops cr_vprintk_ops = {
	.func = cr_vprintk_store_entry,
	.flags = FTRACE_OPS_FL_SAVE_REGS | FTRACE_OPS_FL_RECURSION,
};

static void cr_printk_probe(void *data, const char *text, size_t len)
{
	unsigned int ctx;

	if (!(READ_ONCE(crashring.sources) & CR_SRC_PRINTK))
		return;
	ctx = cr_context();
	cr_record_line(ctx, cr_pop_level(ctx), text, len);
}

static void cr_sched_switch_probe(void *data, bool preempt, struct task_struct *prev,
				  struct task_struct *next, unsigned int prev_state)
{
	struct {
		s32 prev_pid;
		s32 prev_prio;
		u32 prev_state;
		s32 next_pid;
		s32 next_prio;
		char prev_comm[16];
		char next_comm[16];
	} __packed rec;

	rec.prev_pid = prev->pid;
	rec.prev_prio = prev->prio;
	rec.prev_state = prev_state;
	rec.next_pid = next->pid;
	rec.next_prio = next->prio;
	memcpy(rec.prev_comm, prev->comm, sizeof(rec.prev_comm));
	memcpy(rec.next_comm, next->comm, sizeof(rec.next_comm));
	cr_emit(CRASHRING_EVENT_SCHED_SWITCH, &rec, sizeof(rec), NULL, 0, -1);
}

static void cr_irq_entry_probe(void *data, int irq, struct irqaction *action)
{
	u32 nr = irq;
	const char *name = action && action->name ? action->name : "";

	cr_emit(CRASHRING_EVENT_IRQ_HANDLER_ENTRY, &nr, sizeof(nr), name, strlen(name), -1);
}

static void cr_irq_exit_probe(void *data, int irq, struct irqaction *action, int ret)
{
	u32 rec[2] = { irq, ret };

	cr_emit(CRASHRING_EVENT_IRQ_HANDLER_EXIT, rec, sizeof(rec), NULL, 0, -1);
}

static struct cr_tracepoint cr_tracepoints[] = {
	/* Never attached where the vprintk_store() hook records the lines. */
	{ "console", cr_printk_probe, CR_CONSOLE_TRACEPOINT_IN_NMI ? CR_SRC_PRINTK : 0 },
	{ "sched_switch", cr_sched_switch_probe, CR_SRC_SCHED },
	{ "irq_handler_entry", cr_irq_entry_probe, CR_SRC_IRQ },
	{ "irq_handler_exit", cr_irq_exit_probe, CR_SRC_IRQ },
};

static void cr_find_tracepoint(struct tracepoint *tp, void *unused)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(cr_tracepoints); i++)
		if (!strcmp(tp->name, cr_tracepoints[i].name))
			cr_tracepoints[i].tp = tp;
}

/**
 * crashring_record_crash - record a crash marker on this CPU
 * @reason: CRASHRING_REASON_*
 * @message: the panic or oops message
 * @at: its time (crashring_panic_clock() on the panic path)
 */
void crashring_record_crash(u32 reason, const char *message, u64 at)
{
	u32 rec[2] = { reason, raw_smp_processor_id() };

	if (READ_ONCE(crashring.sources) & CR_SRC_CRASH)
		cr_emit_at(at, CRASHRING_EVENT_CRASH, rec, sizeof(rec), message, strlen(message),
			   -1);
}

/*
 * Wall clock steps. The header's wall_offset_ns (CLOCK_REALTIME minus
 * CLOCK_MONOTONIC) is taken when the region is formatted, usually early in
 * boot, before NTP, `date -s` or a corrected RTC steps the wall clock; every
 * wall time a reader derives would then be off by the step. So a delayed
 * work item compares the current offset with the last one recorded (the
 * header's, then each clock event's) and, when it has moved, records a
 * clock event carrying the new one (FORMAT.md section 9).
 *
 * Polling, because the kernel's notification of a set clock
 * (clock_was_set(), the timerfd TFD_TIMER_CANCEL_ON_SET machinery and
 * hrtimer base offsets) is not exported to modules. Once a second: a step
 * is then dated within a second of when it happened, and the work costs
 * nothing measurable. More than 1 ms: a step is at least milliseconds (NTP
 * steps only past 128 ms), while slewing moves the offset by at most 0.5 ms
 * per second, so a slewed clock costs one event per few seconds of slew
 * at worst, and the wall times read stay within 1 ms of the truth.
 *
 * The offset is read with ktime_mono_to_real(0): the timekeeper's own
 * CLOCK_REALTIME minus CLOCK_MONOTONIC, read consistently, rather than two
 * clock reads that preemption could pull apart by more than the threshold.
 */
#define CR_CLOCK_PERIOD		HZ
#define CR_CLOCK_THRESHOLD_NS	NSEC_PER_MSEC

static void cr_clock_check(struct work_struct *work);
static DECLARE_DELAYED_WORK(cr_clock_work, cr_clock_check);

/*
 * The panic path's clock. It runs after the other CPUs were stopped
 * wherever they were, and reading the clocksource can wait for one of
 * them: where the TSC was found unstable the clocksource is the HPET, and
 * read_hpet() (arch/x86/kernel/hpet.c), outside NMI context, waits for the
 * CPU holding hpet.lock to publish the count it read. A CPU stopped by NMI
 * inside that lock never does, and the panic would hang before the
 * reboot. ktime_get_mono_fast_ns() is safe against the timekeeper, not
 * against its clocksource. So the panic path reads local_clock()
 * (sched_clock: the TSC or jiffies, without a lock; what printk stamps
 * lines with) and moves it onto CLOCK_MONOTONIC by a pair of both clocks
 * read together when recording starts and at each wall-clock check. Over
 * the second between checks the two clocks drift apart by microseconds.
 *
 * Two pairs, a latch: the writer (crashring.lock held) fills the one
 * cr_pair_seq does not name, then publishes it. The panic path reads
 * without retrying, as its other CPUs are stopped: one stopped halfway
 * through a fill leaves the published pair whole.
 */
struct cr_clock_pair {
	u64 mono;
	u64 local;
};

static struct cr_clock_pair cr_pairs[2];
static unsigned int cr_pair_seq;

static void cr_pair_sample(void)
{
	unsigned int seq = cr_pair_seq + 1;
	struct cr_clock_pair *p = &cr_pairs[seq & 1];
	unsigned long flags;

	local_irq_save(flags);
	p->mono = ktime_get_mono_fast_ns();
	p->local = local_clock();
	local_irq_restore(flags);
	/* The pair before the sequence number that names it. */
	smp_wmb();
	WRITE_ONCE(cr_pair_seq, seq);
}

/**
 * crashring_panic_clock - CLOCK_MONOTONIC without reading the clocksource
 *
 * Return: the last published pair's monotonic time plus the local_clock()
 * time since (none if this CPU's local_clock() reads behind the CPU that
 * read the pair).
 */
u64 crashring_panic_clock(void)
{
	unsigned int seq = READ_ONCE(cr_pair_seq);
	const struct cr_clock_pair *p;
	s64 since;

	/* Pairs with cr_pair_sample()'s: the pair the number names, filled. */
	smp_rmb();
	p = &cr_pairs[seq & 1];
	since = (s64)(local_clock() - p->local);
	return p->mono + max_t(s64, since, 0);
}

/**
 * crashring_record_clock - record a clock event on this CPU
 * @wall_offset_ns: CLOCK_REALTIME - CLOCK_MONOTONIC from now on
 */
void crashring_record_clock(s64 wall_offset_ns)
{
	cr_emit(CRASHRING_EVENT_CLOCK, &wall_offset_ns, sizeof(wall_offset_ns), NULL, 0, -1);
}

static void cr_clock_check(struct work_struct *work)
{
	s64 now = ktime_to_ns(ktime_mono_to_real(0));

	mutex_lock(&crashring.lock);
	if (!READ_ONCE(crashring.enabled)) {
		/* Not re-armed: crashring_clock_arm() does when recording resumes. */
		mutex_unlock(&crashring.lock);
		return;
	}
	if (abs(now - crashring.wall_offset_ns) > CR_CLOCK_THRESHOLD_NS) {
		crashring_record_clock(now);
		crashring.wall_offset_ns = now;
	}
	cr_pair_sample();
	mutex_unlock(&crashring.lock);
	schedule_delayed_work(&cr_clock_work, CR_CLOCK_PERIOD);
}

/**
 * crashring_clock_arm - start watching the wall clock for steps
 *
 * Called when recording starts or resumes, with crashring.lock held or
 * during init: takes the panic clock's first pair, and schedules the check
 * unless it is already pending.
 */
void crashring_clock_arm(void)
{
	cr_pair_sample();
	schedule_delayed_work(&cr_clock_work, CR_CLOCK_PERIOD);
}

/**
 * crashring_clock_stop - stop watching the wall clock
 *
 * Waits for a running check, which cannot re-arm itself afterwards. Must
 * not be called with crashring.lock held (the check takes it).
 */
void crashring_clock_stop(void)
{
	cancel_delayed_work_sync(&cr_clock_work);
}

/**
 * crashring_log - record a marker from kernel code
 * @tag: who logs (up to 15 characters are kept, like a comm)
 * @text: the message
 *
 * Usable from any context, NMI included; never sleeps or allocates.
 */
void crashring_log(const char *tag, const char *text)
{
	struct {
		u32 pid;
		char comm[16];
	} __packed rec = { .pid = in_task() ? task_pid_nr(current) : 0 };

	/*
	 * rec is zeroed: up to 15 bytes of the tag, then at least one NUL.
	 * strscpy_pad() took a tenth of a 32-byte marker's instructions.
	 */
	memcpy(rec.comm, tag, strnlen(tag, sizeof(rec.comm) - 1));
	cr_emit(CRASHRING_EVENT_MARKER, &rec, sizeof(rec), text, strlen(text), -1);
}
EXPORT_SYMBOL_GPL(crashring_log);

static ssize_t cr_marker_write(struct file *file, const char __user *ubuf, size_t count,
			       loff_t *ppos)
{
	struct {
		u32 pid;
		char comm[16];
	} __packed rec = { .pid = task_tgid_nr(current) };
	size_t n = min_t(size_t, count, CRASHRING_MAX_RECORD_SIZE);
	char *text;

	if (!(READ_ONCE(crashring.sources) & CR_SRC_MARKER))
		return -ENODEV;
	/*
	 * Whoever opened the file, not whoever writes: a setuid-root program
	 * printing into a member's descriptor stays within the member's
	 * budget (crashring_budget.c). Root (CAP_SYS_ADMIN) is not limited.
	 */
	if (!file_ns_capable(file, &init_user_ns, CAP_SYS_ADMIN) &&
	    !crashring_budget_take(file->f_cred->uid, sizeof(rec) + n))
		return -EAGAIN;
	text = memdup_user(ubuf, n);
	if (IS_ERR(text))
		return PTR_ERR(text);
	while (n && text[n - 1] == '\n')
		n--;
	get_task_comm(rec.comm, current);
	cr_emit(CRASHRING_EVENT_MARKER, &rec, sizeof(rec), text, n, -1);
	kfree(text);
	return count;
}

static int cr_dev_release(struct inode *inode, struct file *file)
{
	crashring_user_release(file);
	return 0;
}

static const struct file_operations cr_marker_fops = {
	.owner = THIS_MODULE,
	.write = cr_marker_write,
	.unlocked_ioctl = crashring_user_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.mmap = crashring_user_mmap,
	.release = cr_dev_release,
	.llseek = noop_llseek,
};

/*
 * Only root, and the crashring group the package's udev rule gives the
 * node to, may add markers (within crashring_budget_take()) and take user
 * streams. Nobody reads here.
 */
static struct miscdevice cr_marker_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "crashring",
	.fops = &cr_marker_fops,
	.mode = 0660,
};

/**
 * crashring_set_sources - turn event sources on and off
 * @want: CR_SRC_* bits
 *
 * Return: 0, or the error of the first probe that could not be attached.
 * Called with crashring.lock held.
 */
int crashring_set_sources(unsigned long want)
{
	int i, err = 0;

	for (i = 0; i < ARRAY_SIZE(cr_tracepoints); i++) {
		struct cr_tracepoint *t = &cr_tracepoints[i];
		bool on = want & t->source;

		if (on == t->registered)
			continue;
		if (!t->tp) {
			if (on)
				pr_warn("tracepoint %s not found; source not available\n", t->name);
			continue;
		}
		if (on)
			err = tracepoint_probe_register(t->tp, t->probe, NULL);
		else
			err = tracepoint_probe_unregister(t->tp, t->probe, NULL);
		if (err) {
			pr_err("cannot %s tracepoint %s: %d\n", on ? "attach to" : "detach from",
			       t->name, err);
			break;
		}
		t->registered = on;
	}
	WRITE_ONCE(crashring.sources, want);
	return err;
}

static const char * const cr_source_names[] = { "printk", "marker", "sched", "irq", "crash" };

/**
 * crashring_parse_sources - turn "printk,marker ..." into CR_SRC_* bits
 * @spec: names separated by commas, spaces or newlines
 * @bits: the result
 *
 * Return: 0, or -EINVAL for an unknown name.
 */
int crashring_parse_sources(const char *spec, unsigned long *bits)
{
	const char *p = spec;
	int i;

	*bits = 0;
	while (*p) {
		size_t n = strcspn(p, ",\n ");
		bool known = !n;

		for (i = 0; i < ARRAY_SIZE(cr_source_names); i++) {
			if (n == strlen(cr_source_names[i]) && !strncmp(p, cr_source_names[i], n)) {
				*bits |= BIT(i);
				known = true;
			}
		}
		if (!known)
			return -EINVAL;
		p += n;
		p += strspn(p, ",\n ");
	}
	return 0;
}

/**
 * crashring_show_sources - the names of the sources that are on
 * @buf: a sysfs buffer
 *
 * Return: bytes written.
 */
int crashring_show_sources(char *buf)
{
	unsigned long on = READ_ONCE(crashring.sources);
	int i, n = 0;

	for (i = 0; i < ARRAY_SIZE(cr_source_names); i++)
		if (on & BIT(i))
			n += sysfs_emit_at(buf, n, "%s%s", n ? " " : "", cr_source_names[i]);
	return n + sysfs_emit_at(buf, n, "\n");
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

int crashring_sources_init(void)
{
	unsigned long want = crashring.sources;
	int err;

	cr_filters[0].max_level = clamp(printk_level, 0, 7);
	if (printk_prefix)
		strscpy(cr_filters[0].prefixes, printk_prefix, sizeof(cr_filters[0].prefixes));
	if (sources && crashring_parse_sources(sources, &want)) {
		pr_err("sources=%s: known sources are printk, marker, crash, sched, irq\n", sources);
		return -EINVAL;
	}
	for_each_kernel_tracepoint(cr_find_tracepoint, NULL);
	cr_hook_on = !cr_hook_vprintk_store();
	if (!cr_hook_on)
		pr_warn("cannot hook vprintk_store: %s\n",
			CR_CONSOLE_TRACEPOINT_IN_NMI ? "printk levels will be recorded as unknown"
						     : "printk lines will not be recorded");
	err = crashring_set_sources(want);
	if (err) {
		crashring_set_sources(0);
		/* No probe may still run when the caller frees the streams. */
		tracepoint_synchronize_unregister();
		cr_unhook_vprintk_store();
	}
	return err;
}

void crashring_sources_exit(void)
{
	crashring_set_sources(0);
	tracepoint_synchronize_unregister();
	cr_unhook_vprintk_store();
}

/*
 * /dev/crashring appears last at load and goes first at unload: once a
 * user can open it, nothing that init might still undo (the streams a
 * stream grant points into, say) may be freed under the open file.
 */
int crashring_dev_register(void)
{
	return misc_register(&cr_marker_dev);
}

void crashring_dev_unregister(void)
{
	misc_deregister(&cr_marker_dev);
}
