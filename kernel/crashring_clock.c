// SPDX-License-Identifier: GPL-2.0
/*
 * The clocks: clock events when the wall clock steps, and the panic
 * path's monotonic clock that reads no clocksource.
 */
#include <linux/kernel.h>
#include <linux/sched/clock.h>
#include <linux/ktime.h>
#include <linux/timekeeping.h>
#include <linux/workqueue.h>
#include "crashring.h"
#include "crashring_emit.h"

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
 * The offset is read with ktime_mono_to_real(0), here and for the header:
 * the timekeeper's own CLOCK_REALTIME minus CLOCK_MONOTONIC, read
 * consistently, rather than two clock reads that preemption (or another
 * vCPU's turn under single-threaded TCG) could pull apart by more than the
 * threshold, which made the first check record a step nobody took.
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
 * crashring_mono_minus_local - CLOCK_MONOTONIC less local_clock()
 *
 * Return: the difference in the last published pair: what moves a
 * local_clock() time (printk's) onto the region's clock.
 */
s64 crashring_mono_minus_local(void)
{
	unsigned int seq = READ_ONCE(cr_pair_seq);
	const struct cr_clock_pair *p;

	/* Pairs with cr_pair_sample()'s: the pair the number names, filled. */
	smp_rmb();
	p = &cr_pairs[seq & 1];
	return (s64)(p->mono - p->local);
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
