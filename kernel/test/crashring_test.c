// SPDX-License-Identifier: GPL-2.0
/*
 * crashring_test.ko: ways to bring a kernel down for the QEMU scenarios.
 * Never load it on a machine you care about.
 *
 *   action=load       a thread per online CPU logs "load cpu=C seq=S" with
 *                     crashring_log() as fast as it can, S counting from 0,
 *                     until the machine panics (the scenario triggers it);
 *                     while the parameter paused is 1, each thread writes
 *                     nothing and says once, in the kernel log, "load
 *                     cpu=C paused after N events" (a reader's count to
 *                     check), then goes on from S=N
 *   action=nested     the load, and on every CPU a timer that logs "irq
 *                     cpu=C seq=S" from hard IRQ context every 200 us and
 *                     schedules a tasklet that logs "softirq cpu=C seq=S":
 *                     writes that land in the middle of the threads' own
 *                     (the scenario adds NMI backtraces with sysrq l)
 *   action=cost       times cost_events records on every CPU through
 *                     crashring_log(), ftrace's trace_puts() and
 *                     trace_printk(), and an empty loop; then the parts of
 *                     a record: the clock it reads, an empty
 *                     crashring_log() and the CRC of 64 bytes; and prints
 *                     "crashring-cost: cpu=C what=W ns=N events=E" lines
 *                     (the best of three rounds); stays loaded
 *   action=panic_irq  a timer panics the kernel from hard IRQ context
 *   action=lockup     CPU 1 spins with interrupts off, reading the clock,
 *                     until a lockup or RCU stall detector panics the
 *                     kernel; prints how often the panicking CPU read the
 *                     HPET after it began stopping the others
 *   action=printk     prints lines whose printk metadata is easy to get
 *                     wrong, and stays loaded: a hex dump at KERN_ERR (its
 *                     level comes in an argument) and a line at the default
 *                     level
 *   action=ras        fires the RAS tracepoints no QEMU device can, each
 *                     once, with the values a driver or firmware record
 *                     would give (the scenario checks them field by field):
 *                     EDAC's mc_event, non_standard_event, arm_event and
 *                     extlog_mem_event; then mce_storm corrected memory
 *                     errors through mce_log(); stays loaded
 *   action=drm        a thread prints a DRM-style debug line,
 *                     "[drm:drm_atomic_commit] crtc-41 flip seq=S" with
 *                     pr_debug() (load with dyndbg=+p, as drm.debug turns
 *                     DRM's on), every 4 ms, S counting from 0, until
 *                     the module is removed or the machine panics (a rate
 *                     one CPU's ring holds for the whole compositor-crash
 *                     run: at 1 ms the thread's own lines wrapped the ring
 *                     of a CPU it stayed on); with ibdev=1, also an
 *                     ibdev_dbg() line about an RDMA device, "crashring_ib0",
 *                     whose parent is QEMU's standard VGA when there is one
 *
 * With action=load or nested, crash= brings the kernel down crash_ms
 * milliseconds later, under that load (the crash campaign):
 *
 *   crash=irq         panic from a timer in hard IRQ context
 *   crash=nmi         panic from an NMI handler, on the next NMI (the
 *                     campaign sends them with sysrq l)
 *   crash=bug         BUG() in a kthread (panic_on_oops makes it a panic)
 *   crash=oops        a NULL pointer write in a kthread (likewise)
 *   crash=lockup      CPU 1 spins with interrupts off (not reading the
 *                     clock) until a detector panics
 *   crash=hung        a kthread sleeps uninterruptibly until the hung-task
 *                     detector panics (hung_task_panic)
 *
 * Each action logs a marker saying what it is about to do, so the trace
 * shows the cause next to the crash.
 */

#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/hrtimer.h>
#include <linux/interrupt.h>
#include <linux/kprobes.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/panic_notifier.h>
#include <linux/pci.h>
#include <rdma/ib_verbs.h>
#ifdef CONFIG_X86
#include <asm/nmi.h>
#endif
#include <linux/percpu.h>
#include <linux/printk.h>
#include <linux/sched.h>
#include <linux/smp.h>
#include <linux/kernel.h>
#include <ras/ras_event.h>
#ifdef CONFIG_X86_MCE
#include <asm/mce.h>
#endif
#include "crashring.h"
#include "crashring_env.h"

static char *action = "load";
module_param(action, charp, 0400);
MODULE_PARM_DESC(action, "load, nested, cost, panic_irq, lockup, printk, ras or drm");

static unsigned int cost_events = 100000;
module_param(cost_events, uint, 0400);
MODULE_PARM_DESC(cost_events, "Records per writer and CPU for action=cost");

static char *crash = "";
module_param(crash, charp, 0400);
MODULE_PARM_DESC(crash, "With load or nested: irq, nmi, bug, oops, lockup or hung");

static unsigned int crash_ms = 1000;
module_param(crash_ms, uint, 0400);
MODULE_PARM_DESC(crash_ms, "How long after loading crash= strikes");

static bool ibdev;
module_param(ibdev, bool, 0400);
MODULE_PARM_DESC(ibdev, "With action=drm: 1 adds an ibdev_dbg() line each round");

static unsigned int mce_storm;
module_param(mce_storm, uint, 0400);
MODULE_PARM_DESC(mce_storm, "With action=ras: corrected memory errors logged through mce_log() after the tracepoints");

static bool paused;
module_param(paused, bool, 0644);
MODULE_PARM_DESC(paused, "With action=load: 1 holds every thread, which says how many events it wrote");

/* The CPU that locks up; CPU 0 keeps the console and the timers going. */
#define LOCKUP_CPU 1

static DEFINE_PER_CPU(struct task_struct *, load_thread);
static struct hrtimer panic_timer;

/* A monotonic timer calling @fn: hrtimer_setup() since 6.13 (Kbuild probes). */
static void cr_hrtimer_setup(struct hrtimer *t, enum hrtimer_restart (*fn)(struct hrtimer *),
			     enum hrtimer_mode mode)
{
#ifdef CR_HAVE_HRTIMER_SETUP
	hrtimer_setup(t, fn, CLOCK_MONOTONIC, mode);
#else
	hrtimer_init(t, CLOCK_MONOTONIC, mode);
	t->function = fn;
#endif
}
static bool timer_armed;

/* action=nested: each CPU's interrupt and softirq writers. */
struct nested_writers {
	struct hrtimer timer;
	struct tasklet_struct tasklet;
	u64 irq_seq;
	u64 softirq_seq;
};

static DEFINE_PER_CPU(struct nested_writers, nested_writers);
static bool nested_on;

#define NESTED_PERIOD_NS	(200 * NSEC_PER_USEC)

static int load_fn(void *unused)
{
	char text[48];
	u64 seq = 0;
	bool said = false;

	while (!kthread_should_stop()) {
		if (READ_ONCE(paused)) {
			if (!said)
				pr_info("load cpu=%d paused after %llu events\n",
					raw_smp_processor_id(), seq);
			said = true;
			schedule_timeout_interruptible(HZ / 10);
			continue;
		}
		said = false;
		snprintf(text, sizeof(text), "load cpu=%d seq=%llu",
			 raw_smp_processor_id(), seq++);
		crashring_log("load", text);
		/* Flat out, but the watchdogs must see the CPU schedule. */
		if (!(seq & 255))
			cond_resched();
	}
	return 0;
}

static int start_load(void)
{
	unsigned int cpu;

	for_each_online_cpu(cpu) {
		struct task_struct *t;

		t = kthread_create_on_cpu(load_fn, NULL, cpu, "crashring_load/%u");
		if (IS_ERR(t))
			return PTR_ERR(t);
		per_cpu(load_thread, cpu) = t;
		wake_up_process(t);
	}
	/*
	 * With action=load nothing else logs: each CPU's stream holds its
	 * thread's events only.
	 */
	return 0;
}

static void stop_load(void)
{
	unsigned int cpu;

	for_each_possible_cpu(cpu) {
		if (per_cpu(load_thread, cpu))
			kthread_stop(per_cpu(load_thread, cpu));
	}
}

static void nested_softirq_fn(struct tasklet_struct *t)
{
	struct nested_writers *w = from_tasklet(w, t, tasklet);
	char text[48];

	snprintf(text, sizeof(text), "softirq cpu=%d seq=%llu", raw_smp_processor_id(),
		 w->softirq_seq++);
	crashring_log("softirq", text);
}

static enum hrtimer_restart nested_irq_fn(struct hrtimer *timer)
{
	struct nested_writers *w = container_of(timer, struct nested_writers, timer);
	char text[48];

	snprintf(text, sizeof(text), "irq cpu=%d seq=%llu", raw_smp_processor_id(), w->irq_seq++);
	crashring_log("irq", text);
	tasklet_schedule(&w->tasklet);
	hrtimer_forward_now(timer, ns_to_ktime(NESTED_PERIOD_NS));
	return HRTIMER_RESTART;
}

/* Runs on each CPU: a pinned timer fires, and its tasklet runs, there. */
static void start_nested_on_cpu(void *unused)
{
	struct nested_writers *w = this_cpu_ptr(&nested_writers);

	hrtimer_start(&w->timer, ns_to_ktime(NESTED_PERIOD_NS), HRTIMER_MODE_REL_PINNED_HARD);
}

static int start_nested(void)
{
	unsigned int cpu;

	for_each_possible_cpu(cpu) {
		struct nested_writers *w = per_cpu_ptr(&nested_writers, cpu);

		cr_hrtimer_setup(&w->timer, nested_irq_fn, HRTIMER_MODE_REL_PINNED_HARD);
		tasklet_setup(&w->tasklet, nested_softirq_fn);
	}
	nested_on = true;
	on_each_cpu(start_nested_on_cpu, NULL, 1);
	return start_load();
}

static void stop_nested(void)
{
	unsigned int cpu;

	if (!nested_on)
		return;
	for_each_possible_cpu(cpu) {
		hrtimer_cancel(&per_cpu(nested_writers, cpu).timer);
		tasklet_kill(&per_cpu(nested_writers, cpu).tasklet);
	}
}

/*
 * The same 32 bytes of text through each writer. trace_puts() is ftrace's
 * cheapest text record (what a write to trace_marker stores), and
 * trace_printk() with one argument its binary printk record.
 */
#define COST_TEXT "crashring cost: 32-byte payload"

/*
 * After the writers, the parts of crashring's record: the clock every
 * record reads, a record with empty tag and text (the fixed cost), and
 * the format's CRC-32C over 64 bytes, as the module computes it (what a
 * 64-byte record adds to its page's CRC when the page closes).
 */
enum cost_writer {
	COST_NONE, COST_CRASHRING, COST_TRACE_PUTS, COST_TRACE_PRINTK,
	COST_CLOCK, COST_CRASHRING_EMPTY, COST_CRC64, COST_WRITERS
};

static const char * const cost_names[COST_WRITERS] = {
	"empty-loop", "crashring_log", "trace_puts", "trace_printk",
	"clock", "crashring_log-empty", "crc32c-64B",
};

static u8 cost_page[4096];
static u64 cost_sink;

static u64 cost_round(enum cost_writer w)
{
	unsigned int i;
	u64 t0, t1;

	t0 = ktime_get_ns();
	for (i = 0; i < cost_events; i++) {
		switch (w) {
		case COST_CRASHRING:
			crashring_log("cost", COST_TEXT);
			break;
		case COST_TRACE_PUTS:
			trace_puts(COST_TEXT "\n");
			break;
		case COST_TRACE_PRINTK:
			trace_printk(COST_TEXT " %u\n", i);
			break;
		case COST_CLOCK:
			cost_sink += ktime_get_mono_fast_ns();
			break;
		case COST_CRASHRING_EMPTY:
			crashring_log("", "");
			break;
		case COST_CRC64:
			cost_sink += cr_crc32(cost_sink, cost_page + i % 64 * 64, 64);
			break;
		default:
			barrier();
			break;
		}
	}
	t1 = ktime_get_ns();
	return t1 - t0;
}

/* Runs bound to one CPU: each writer's best of three rounds, interleaved. */
static int cost_on_cpu(void *unused)
{
	u64 best[COST_WRITERS];
	int round, w;

	for (w = 0; w < COST_WRITERS; w++)
		best[w] = U64_MAX;
	for (round = 0; round < 3; round++)
		for (w = 0; w < COST_WRITERS; w++)
			best[w] = min(best[w], cost_round(w));
	for (w = 0; w < COST_WRITERS; w++)
		pr_info("crashring-cost: cpu=%d what=%s ns=%llu events=%u\n", raw_smp_processor_id(),
			cost_names[w], best[w], cost_events);
	return 0;
}

static int measure_cost(void)
{
	unsigned int cpu;
	int err;

	for_each_online_cpu(cpu) {
		err = smp_call_on_cpu(cpu, cost_on_cpu, NULL, false);
		if (err)
			return err;
	}
	return 0;
}

static enum hrtimer_restart panic_timer_fn(struct hrtimer *timer)
{
	crashring_log("test", "panicking from a timer interrupt");
	/*
	 * Not as the function's last instruction: arm64's backtrace on 6.1
	 * names a return address just past a function's end after the
	 * function that follows it, and the scenario checks the name.
	 */
	if (READ_ONCE(timer_armed))
		panic("crashring-test: panic in hard IRQ context");
	return HRTIMER_NORESTART;
}

#ifdef CONFIG_X86
static bool nmi_armed, nmi_registered;

static int crash_nmi_fn(unsigned int type, struct pt_regs *regs)
{
	if (!READ_ONCE(nmi_armed))
		return NMI_DONE;
	crashring_log("test", "panicking from an NMI handler");
	nmi_panic(regs, "crashring-test: panic in NMI context");
	return NMI_HANDLED;
}

/* On x86 the next NMI (the NMI watchdog's, or sysrq l's) panics. */
static int arm_nmi_crash(void)
{
	int err = register_nmi_handler(NMI_LOCAL, crash_nmi_fn, 0, "crashring_test");

	if (err)
		return err;
	nmi_registered = true;
	crashring_log("test", "the next NMI panics");
	WRITE_ONCE(nmi_armed, true);
	return 0;
}

static void disarm_nmi_crash(void)
{
	if (nmi_registered)
		unregister_nmi_handler(NMI_LOCAL, "crashring_test");
}
#else
/* Elsewhere NMI handlers are the architecture's own, not for modules. */
static int arm_nmi_crash(void)
{
	pr_err("crash=nmi needs x86's NMI handlers\n");
	return -EOPNOTSUPP;
}

static void disarm_nmi_crash(void)
{
}
#endif

static int crash_thread_fn(void *unused)
{
	int *nowhere = NULL;

	msleep(crash_ms);
	if (!strcmp(crash, "bug")) {
		crashring_log("test", "BUG() in a kthread");
		BUG();
	}
	if (!strcmp(crash, "oops")) {
		crashring_log("test", "a NULL pointer write in a kthread");
		WRITE_ONCE(*nowhere, 1);
	}
	if (!strcmp(crash, "hung")) {
		crashring_log("test", "a kthread sleeps uninterruptibly for good");
		set_current_state(TASK_UNINTERRUPTIBLE);
		schedule();
	}
	while (!kthread_should_stop())
		msleep(100);
	return 0;
}

static int lockup_fn(void *poll_clock)
{
	crashring_log("test", poll_clock ? "CPU 1 spins with interrupts off, reading the clock" :
			      "CPU 1 spins with interrupts off");
	local_irq_disable();
	/*
	 * Polling the clock, as a stuck wait with a timeout does, and with no
	 * pause in between (where TCG would switch to another vCPU, here or
	 * inside the read): the stop NMI then finds this CPU inside the
	 * clocksource's read, holding hpet.lock when the clocksource is the
	 * HPET, and the panic path must not wait for it.
	 */
	if (poll_clock)
		for (;;)
			ktime_get();
	for (;;)
		cpu_relax();
	return 0;
}

/*
 * action=lockup counts the HPET reads on the panicking CPU once it began
 * stopping the others (crash_smp_send_stop(), which the scenario's
 * crash_kexec_post_notifiers has panic() call): a CPU stopped by NMI may
 * hold hpet.lock, so each is a read that could wait for good, whether or
 * not this run's spinner was caught inside the lock. A panic notifier
 * that runs after crashring's prints the count, and all HPET reads (none
 * would mean the clocksource was not the HPET, and the count proves
 * nothing).
 */
static int stop_cpu = -1;
static atomic_t hpet_reads = ATOMIC_INIT(0);
static atomic_t panic_clock_reads = ATOMIC_INIT(0);

static int on_crash_stop(struct kprobe *p, struct pt_regs *regs)
{
	WRITE_ONCE(stop_cpu, raw_smp_processor_id());
	return 0;
}

static int on_read_hpet(struct kprobe *p, struct pt_regs *regs)
{
	atomic_inc(&hpet_reads);
	if (READ_ONCE(stop_cpu) == raw_smp_processor_id())
		atomic_inc(&panic_clock_reads);
	return 0;
}

static struct kprobe stop_probe = {
	.symbol_name = "crash_smp_send_stop",
	.pre_handler = on_crash_stop,
};

static struct kprobe hpet_probe = {
	.symbol_name = "read_hpet",
	.pre_handler = on_read_hpet,
};

static int report_clock_reads(struct notifier_block *nb, unsigned long event, void *buf)
{
	pr_emerg("crashring-test: HPET reads: %d, on the panic path after the stop: %d\n",
		 atomic_read(&hpet_reads), atomic_read(&panic_clock_reads));
	return NOTIFY_DONE;
}

static struct notifier_block report_nb = {
	.notifier_call = report_clock_reads,
	.priority = INT_MIN,
};

static bool clock_probes_on;

static int watch_panic_clock(void)
{
	int err = register_kprobe(&stop_probe);

	if (err)
		return err;
	err = register_kprobe(&hpet_probe);
	if (err) {
		unregister_kprobe(&stop_probe);
		return err;
	}
	atomic_notifier_chain_register(&panic_notifier_list, &report_nb);
	clock_probes_on = true;
	return 0;
}

static void unwatch_panic_clock(void)
{
	if (!clock_probes_on)
		return;
	atomic_notifier_chain_unregister(&panic_notifier_list, &report_nb);
	unregister_kprobe(&hpet_probe);
	unregister_kprobe(&stop_probe);
}

/* A line with no level of its own: printk gives it the default. */
static __printf(1, 2) void print_at_default_level(const char *fmt, ...)
{
	va_list args;

	va_start(args, fmt);
	vprintk(fmt, args);
	va_end(args);
}

static void print_metadata_lines(void)
{
	static const char bytes[16] = "crashring-bytes";

	print_hex_dump(KERN_ERR, "crashring-hexdump: ", DUMP_PREFIX_OFFSET, 16, 1, bytes,
		       sizeof(bytes), true);
	print_at_default_level("crashring-test: default level\n");
}

#if IS_ENABLED(CONFIG_ACPI_EXTLOG)
static void fire_extlog(const guid_t *fru)
{
	struct cper_sec_mem_err mem = {
		.validation_bits = CPER_MEM_VALID_PA,
		.physical_addr = 0x76543000,
	};

	trace_extlog_mem_event(&mem, 7, fru, "DIMM B2", CPER_SEV_CORRECTED);
}
#else
/* The tracepoint is declared only where the extlog driver is built: x86. */
static void fire_extlog(const guid_t *fru)
{
}
#endif

/*
 * action=ras. The values are the scenario's (qemu-tests/src/scenarios/
 * ras.rs): change both together.
 */
static void fire_ras_tracepoints(void)
{
	static const guid_t section = GUID_INIT(0x12345678, 0x9abc, 0xdef0, 0x11, 0x22, 0x33, 0x44,
						0x55, 0x66, 0x77, 0x88);
	static const guid_t fru = GUID_INIT(0xfedcba98, 0x7654, 0x3210, 0x01, 0x02, 0x03, 0x04,
					    0x05, 0x06, 0x07, 0x08);
	static const u8 vendor[] = "crashring-test vendor data";
	struct cper_sec_proc_arm proc = {
		.affinity_level = 1,
		.running_state = 1,
		.psci_state = 0x40,
		.mpidr = 0x80000001,
		.midr = 0x410fd034,
	};

	proc.section_length = sizeof(proc);
	trace_mc_event(HW_EVENT_ERR_CORRECTED, "read error", "DIMM_A1", 2, 0, 1, 2, -1, 0x12345000,
		       12, 0x55, "channel 1");
	trace_non_standard_event(&section, &fru, "CPU 0", CPER_SEV_FATAL, vendor, sizeof(vendor));
#ifdef CR_ARM_EVENT_PARTS
	trace_arm_event(&proc, NULL, 0, NULL, 0, NULL, 0, CPER_SEV_CORRECTED, 1);
#else
	trace_arm_event(&proc);
#endif
	fire_extlog(&fru);
}

#ifdef CONFIG_X86_MCE
/*
 * action=ras's storm, as a failing DIMM brings it: mce_storm corrected
 * memory read errors in bank 2 (VAL EN MISCV ADDRV, MCACOD 0x009f; MISC:
 * a physical address valid to the page), each at a page of its own,
 * logged through mce_log(), where the kernel's poll and CMCI handler log
 * what they find in a bank. Distinct pages, as a failing DIMM's: 6.1 and
 * 6.12 merge equal records waiting in their pool, and the kernel's
 * corrected-errors collector (RAS_CEC) takes memory errors without
 * printing each. The kernel drops what finds its pool full (a few dozen
 * records on 6.1); a pause every 16 lets the work that empties it run on
 * this CPU, as the time between a real bank's polls would.
 */
static void log_mce_storm(void)
{
	unsigned int i;

	for (i = 0; i < mce_storm; i++) {
#ifdef CR_HAVE_MCE_HW_ERR
		struct mce_hw_err err = {};
		struct mce *m = &err.m;
#else
		struct mce record = {};
		struct mce *m = &record;
#endif

		m->cpuvendor = X86_VENDOR_INTEL;
		m->bank = 2;
		m->status = 0x9c0000000000009fULL;
		m->addr = 0x56789000ULL + ((u64)i << PAGE_SHIFT);
		m->misc = 0x8c;
		m->extcpu = raw_smp_processor_id();
		m->time = ktime_get_real_seconds();
#ifdef CR_HAVE_MCE_HW_ERR
		mce_log(&err);
#else
		mce_log(m);
#endif
		if (i % 16 == 15)
			usleep_range(50, 100);
	}
}
#else
static void log_mce_storm(void)
{
}
#endif

static int start_lockup(bool poll_clock)
{
	struct task_struct *t;

	if (!cpu_online(LOCKUP_CPU))
		return -ENODEV;
	t = kthread_create_on_cpu(lockup_fn, poll_clock ? (void *)1 : NULL, LOCKUP_CPU,
				  "crashring_lockup");
	if (IS_ERR(t))
		return PTR_ERR(t);
	wake_up_process(t);
	return 0;
}

static void arm_panic_timer(unsigned int ms)
{
	cr_hrtimer_setup(&panic_timer, panic_timer_fn, HRTIMER_MODE_REL_HARD);
	crashring_log("test", "arming a timer that panics");
	WRITE_ONCE(timer_armed, true);
	hrtimer_start(&panic_timer, ms_to_ktime(ms), HRTIMER_MODE_REL_HARD);
}

/* crash= under a load: the campaign's ways down, each at crash_ms. */
static int arm_crash(void)
{
	struct task_struct *t;

	if (!*crash)
		return 0;
	if (!strcmp(crash, "irq")) {
		arm_panic_timer(crash_ms);
		return 0;
	}
	if (!strcmp(crash, "nmi"))
		return arm_nmi_crash();
	if (!strcmp(crash, "lockup")) {
		msleep(crash_ms);
		return start_lockup(false);
	}
	if (strcmp(crash, "bug") && strcmp(crash, "oops") && strcmp(crash, "hung")) {
		pr_err("crash=%s: expected irq, nmi, bug, oops, lockup or hung\n", crash);
		return -EINVAL;
	}
	t = kthread_run(crash_thread_fn, NULL, "crashring_crash");
	return PTR_ERR_OR_ZERO(t);
}

static struct task_struct *drm_thread;

/*
 * An RDMA device for ibdev_dbg(), never registered: __dynamic_ibdev_dbg()
 * reads only its name and its parent's.
 */
static struct ib_device drm_ibdev = { .dev.init_name = "crashring_ib0" };
static struct pci_dev *drm_ibdev_parent;

static int drm_fn(void *unused)
{
	u32 seq = 0;

	while (!kthread_should_stop()) {
		if (ibdev)
			ibdev_dbg(&drm_ibdev, "qp-7 flush seq=%u\n", seq);
		pr_debug("[drm:drm_atomic_commit] crtc-41 flip seq=%u\n", seq++);
		usleep_range(4000, 4100);
	}
	return 0;
}

static int start_drm(void)
{
	/* QEMU's standard VGA (bochs-drm's). */
	drm_ibdev_parent = pci_get_device(0x1234, 0x1111, NULL);
	if (drm_ibdev_parent)
		drm_ibdev.dev.parent = &drm_ibdev_parent->dev;
	drm_thread = kthread_run(drm_fn, NULL, "crashring_drm");
	if (IS_ERR(drm_thread)) {
		int err = PTR_ERR(drm_thread);

		drm_thread = NULL;
		return err;
	}
	return 0;
}

static int __init crashring_test_init(void)
{
	int err;

	if (!strcmp(action, "load") || !strcmp(action, "nested")) {
		err = strcmp(action, "load") ? start_nested() : start_load();
		return err ?: arm_crash();
	}
	if (!strcmp(action, "cost"))
		return measure_cost();
	if (!strcmp(action, "panic_irq")) {
		arm_panic_timer(500);
		return 0;
	}
	if (!strcmp(action, "lockup")) {
		err = watch_panic_clock();
		if (err)
			return err;
		err = start_lockup(true);
		if (err)
			unwatch_panic_clock();
		return err;
	}
	if (!strcmp(action, "printk")) {
		print_metadata_lines();
		return 0;
	}
	if (!strcmp(action, "ras")) {
		fire_ras_tracepoints();
		log_mce_storm();
		return 0;
	}
	if (!strcmp(action, "drm"))
		return start_drm();
	pr_err("action=%s: expected load, nested, cost, panic_irq, lockup, printk, ras or drm\n",
	       action);
	return -EINVAL;
}

static void __exit crashring_test_exit(void)
{
	if (drm_thread)
		kthread_stop(drm_thread);
	pci_dev_put(drm_ibdev_parent);
	stop_nested();
	stop_load();
	disarm_nmi_crash();
	if (timer_armed)
		hrtimer_cancel(&panic_timer);
	unwatch_panic_clock();
}

module_init(crashring_test_init);
module_exit(crashring_test_exit);
MODULE_DESCRIPTION("Crash tests for crashring");
MODULE_LICENSE("GPL");
