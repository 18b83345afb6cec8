// SPDX-License-Identifier: GPL-2.0
/*
 * crashring.ko: the periodic write-back, for the resets nobody announces.
 *
 * The panic, oops and shutdown paths end by writing the generation's
 * cache lines back to memory, because a warm reset does not and on
 * persistent memory without eADR a power cut loses them. A hang ended by
 * a hardware or BMC watchdog runs none of those paths: whatever the CPUs'
 * caches held dirty (a server's last-level cache holds a good part of a
 * 64 MiB region) is lost, and so are the last seconds before the hang.
 *
 * Every writeback_ms (default 1000; 0 turns it off) a work item writes
 * back what each kernel stream recorded since the last pass
 * (crashring_write_back_new(): only the pages opened since and the one the
 * last pass ended on, so an idle stream costs nothing), every held user
 * stream whole (the kernel does not see what its holder wrote: at most the
 * pool, 512 KiB with `crashring arm`'s settings), and, once per
 * generation, the whole slot with its header (and the header again when
 * the host's name changes, cr_follow_hostname()). What a reset without any
 * warning can still lose is what was recorded in the last writeback_ms
 * and not yet evicted by the caches themselves. Streams that are durable
 * (persistent memory) write each step back as they go and are skipped.
 *
 * Process context, under crashring.lock; never on the record path.
 */

#include <linux/jiffies.h>
#include <linux/libnvdimm.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/utsname.h>
#include <linux/workqueue.h>
#include "crashring_internal.h"

static unsigned int writeback_ms = 1000;
module_param(writeback_ms, uint, 0644);
MODULE_PARM_DESC(writeback_ms,
		 "Write what was recorded back to memory every this many ms, for resets without a panic (default 1000, 0: off)");

/* Polled this often while writeback_ms is 0, so setting it takes effect. */
#define CR_WB_IDLE_MS 1000

static struct crashring_wb_mark *cr_marks;	/* one per kernel stream */
static u64 cr_marked_generation;		/* the generation cr_marks are of */
static int cr_marked_slot = -1;
static u64 cr_passes, cr_pages;			/* for status */

static void cr_writeback_fn(struct work_struct *work);
static DECLARE_DELAYED_WORK(cr_wb_work, cr_writeback_fn);

static void cr_rearm(void)
{
	unsigned int ms = READ_ONCE(writeback_ms);

	schedule_delayed_work(&cr_wb_work, msecs_to_jiffies(ms ?: CR_WB_IDLE_MS));
}

static void cr_write_back_pass(int cur)
{
	struct crashring_slot *slot = &crashring.slot[cur];
	u32 i;

	if (cur != cr_marked_slot || slot->generation != cr_marked_generation) {
		/* A new generation: its header and formatted pages, once. */
		memset(cr_marks, 0, crashring.nstreams * sizeof(*cr_marks));
		arch_wb_cache_pmem(slot->mem, crashring_slot_bytes(slot));
		cr_marked_slot = cur;
		cr_marked_generation = slot->generation;
	}
	for (i = 0; i < crashring.nstreams; i++) {
		if (crashring.streams[i].durable)
			continue;
		cr_pages += crashring_write_back_new(&crashring.streams[i], &cr_marks[i]);
		cond_resched();
	}
	cr_pages += crashring_user_write_back();
	pmem_wmb();
	cr_passes++;
}

/*
 * The header names the host as the kernel named it when the generation
 * began, and a module loaded from the initramfs begins one before the
 * system has named itself: the name is followed here. Read without
 * uts_sem: a name caught half-written is put right on the next pass.
 */
static void cr_follow_hostname(int cur)
{
	u8 *mem = crashring.slot[cur].mem;

	if (crashring_set_hostname(mem, init_utsname()->nodename))
		arch_wb_cache_pmem(mem, CRASHRING_HEADER_SIZE);
}

static void cr_writeback_fn(struct work_struct *work)
{
	int cur;

	mutex_lock(&crashring.lock);
	cur = READ_ONCE(crashring.cur);
	if (!READ_ONCE(crashring.enabled) || cur < 0) {
		/* Not re-armed: crashring_writeback_arm() does when recording resumes. */
		mutex_unlock(&crashring.lock);
		return;
	}
	cr_follow_hostname(cur);
	if (READ_ONCE(writeback_ms))
		cr_write_back_pass(cur);
	mutex_unlock(&crashring.lock);
	cr_rearm();
}

/**
 * crashring_writeback_init - allocate the per-stream marks
 *
 * Return: 0 or -ENOMEM. After the streams are allocated.
 */
int crashring_writeback_init(void)
{
	cr_marks = kcalloc(crashring.nstreams, sizeof(*cr_marks), GFP_KERNEL);
	return cr_marks ? 0 : -ENOMEM;
}

/**
 * crashring_writeback_arm - start the periodic write-back
 *
 * Called when recording starts or resumes, with crashring.lock held or
 * during init; does nothing if a pass is already pending.
 */
void crashring_writeback_arm(void)
{
	cr_rearm();
}

/**
 * crashring_writeback_exit - stop it and free the marks
 *
 * Waits for a running pass. Must not be called with crashring.lock held.
 */
void crashring_writeback_exit(void)
{
	cancel_delayed_work_sync(&cr_wb_work);
	kfree(cr_marks);
	cr_marks = NULL;
}

/**
 * crashring_writeback_emit - the write-back's fields of the region line
 * @buf: the sysfs buffer
 * @at: where in it
 *
 * Return: bytes written.
 */
int crashring_writeback_emit(char *buf, int at)
{
	int n;

	mutex_lock(&crashring.lock);
	n = sysfs_emit_at(buf, at, " writeback_ms=%u writeback_passes=%llu writeback_pages=%llu",
			  READ_ONCE(writeback_ms), cr_passes, cr_pages);
	mutex_unlock(&crashring.lock);
	return n;
}
