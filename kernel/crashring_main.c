// SPDX-License-Identifier: GPL-2.0
/*
 * crashring.ko: a flight recorder that survives the crash it records.
 *
 * Per-CPU rings of pages (pstore-ring format v1, see crashring_ring.c) in a
 * reserved physical range: memmap=SIZE$PHYS (x86) or a device-tree
 * reserved-memory node marked no-map (arm64) plus region=SIZE@PHYS, or, on
 * 6.11 and later, reserve_mem=SIZE:ALIGN:LABEL plus reserve_mem=LABEL. The
 * range survives a warm reboot and a kexec into a capture kernel; the next
 * boot finds the previous generation in it and keeps it for user space.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/kmsg_dump.h>
#include <linux/io.h>
#include <linux/ioport.h>
#include <linux/slab.h>
#include <linux/panic_notifier.h>
#include <linux/kdebug.h>
#include <linux/random.h>
#include <linux/fs.h>
#include <linux/uuid.h>
#include <linux/libnvdimm.h>
#include <linux/utsname.h>
#include <linux/timekeeping.h>
#include <linux/cpumask.h>
#include <linux/crash_dump.h>
#include <linux/smp.h>
#include <linux/suspend.h>
#include "crashring_internal.h"
#include "crashring_compat.h"

static unsigned int ring_page_size = 4096;
module_param_named(page_size, ring_page_size, uint, 0400);
MODULE_PARM_DESC(page_size, "Ring page size in bytes: a power of two, 256..1048576");

static char *boot_id;
module_param(boot_id, charp, 0400);
MODULE_PARM_DESC(boot_id, "This boot's id as in /proc/sys/kernel/random/boot_id (default: read from there)");

static int durable = -1;
module_param(durable, int, 0400);
MODULE_PARM_DESC(durable, "Write every ordered step of a record back to memory: 1 on, 0 off, -1 (default) on for persistent memory (a power cut without eADR keeps the trace)");

static unsigned int nest_lanes = 5;
module_param(nest_lanes, uint, 0400);
MODULE_PARM_DESC(nest_lanes, "Streams per CPU, one per nesting depth (1..16): a write that interrupts N writes of its CPU records on lane N (default 5: task, softirq, irq, NMI, and an exception inside an NMI)");

static unsigned int lane_pages;
module_param(lane_pages, uint, 0400);
MODULE_PARM_DESC(lane_pages, "Pages of each nesting lane above 0 (default 0: a 32nd of a CPU's share, at least 4)");

static bool overwrite_unarchived;
module_param(overwrite_unarchived, bool, 0400);
MODULE_PARM_DESC(overwrite_unarchived, "When both slots hold unarchived generations, overwrite the older (default: keep both, do not record)");

static unsigned int callsite_pages = 32;
module_param(callsite_pages, uint, 0400);
MODULE_PARM_DESC(callsite_pages, "Pages of each generation's callsite area, where the debug source keeps each message's format once (default 32; 0: none, messages recorded formatted)");

struct crashring_state crashring = {
	.cur = -1,
	.prev = -1,
	.lock = __MUTEX_INITIALIZER(crashring.lock),
};

/**
 * crashring_note - set the one-line status user space reads in sysfs
 * @fmt: printf format
 *
 * Also logged, so the reason is in dmesg too.
 */
void crashring_note(const char *fmt, ...)
{
	va_list args;

	va_start(args, fmt);
	vscnprintf(crashring.status, sizeof(crashring.status), fmt, args);
	va_end(args);
	pr_notice("%s\n", crashring.status);
}

#define CR_BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"

/*
 * The kernel's boot id, so that journal entries of this boot (_BOOT_ID)
 * match the region's. The kernel does not export it; it is generated on
 * the first read of CR_BOOT_ID_PATH and fixed from then on, so reading
 * that file gives the value every other reader sees. A loader may pass it
 * instead (boot_id=), for an early load without /proc.
 */
static int cr_get_boot_id(u8 *out)
{
	char text[UUID_STRING_LEN + 1] = { 0 };
	struct file *f;
	loff_t pos = 0;
	ssize_t n;

	if (boot_id)
		return uuid_parse(boot_id, (uuid_t *)out);
	f = filp_open(CR_BOOT_ID_PATH, O_RDONLY, 0);
	if (IS_ERR(f))
		return PTR_ERR(f);
	n = kernel_read(f, text, UUID_STRING_LEN, &pos);
	filp_close(f, NULL);
	if (n != UUID_STRING_LEN)
		return n < 0 ? n : -EIO;
	return uuid_parse(text, (uuid_t *)out);
}

/*
 * Memory outside the machine's RAM can be mapped and reads back zeros
 * without any error. Flip one word at each end of @mem and see that it
 * sticks; the original contents are put back.
 */
static bool cr_backed_by_memory(u8 *mem, u64 size)
{
	u64 *ends[2] = { (u64 *)mem, (u64 *)(mem + size - sizeof(u64)) };
	bool ok = true;
	int i;

	for (i = 0; i < 2; i++) {
		u64 old = READ_ONCE(*ends[i]);

		WRITE_ONCE(*ends[i], ~old);
		/* The store must reach memory before the load asks it back. */
		mb();
		ok &= READ_ONCE(*ends[i]) == ~old;
		WRITE_ONCE(*ends[i], old);
	}
	return ok;
}

/* What @slot holds: nothing, a generation, or a generation it cannot vouch for. */
static void cr_classify_slot(struct crashring_slot *slot)
{
	struct crashring_region_header h;
	int err = crashring_read_slot(slot, 0, &h, sizeof(h));

	if (err) {
		/* A poisoned header: what it held cannot be told, nor read. */
		crashring_note("slot %d: its header cannot be read (%d); not used",
			       (int)(slot - crashring.slot), err);
		slot->state = CR_SLOT_UNREADABLE;
		return;
	}
	err = crashring_check_header(&h, slot->size);
	if (err == -ENOENT) {
		slot->state = CR_SLOT_EMPTY;
		return;
	}
	/*
	 * A damaged header's generation is not trusted, but it keeps the
	 * next generation's number above it (crashring_start_recording()).
	 */
	slot->state = err ? CR_SLOT_DAMAGED : CR_SLOT_GENERATION;
	slot->generation = h.generation;
}

/**
 * crashring_read_slot - copy bytes of a slot the writer is not using
 * @slot: the slot
 * @off: where in it
 * @dst: where to
 * @len: how many
 *
 * On persistent memory a poisoned line makes a plain load a machine check
 * in kernel mode; copy_mc_to_kernel() (as the pmem driver reads) turns it
 * into -EIO instead.
 *
 * Return: 0, or -EIO when some of the bytes are poisoned.
 */
int crashring_read_slot(const struct crashring_slot *slot, u64 off, void *dst, size_t len)
{
	if (!crashring.pmem) {
		memcpy(dst, slot->mem + off, len);
		return 0;
	}
	return copy_mc_to_kernel(dst, slot->mem + off, len) ? -EIO : 0;
}

/*
 * The slot to expose as "previous": the newest generation other than
 * @except, else a damaged one (its generation unknown), else -1.
 */
static int cr_pick_previous(int except)
{
	int i, best = -1;

	for (i = 0; i < CRASHRING_SLOTS; i++) {
		const struct crashring_slot *s = &crashring.slot[i];

		if (i == except || s->state == CR_SLOT_EMPTY || s->state == CR_SLOT_UNREADABLE)
			continue;
		if (best < 0 ||
		    (s->state == CR_SLOT_GENERATION &&
		     (crashring.slot[best].state == CR_SLOT_DAMAGED ||
		      s->generation > crashring.slot[best].generation)))
			best = i;
	}
	return best;
}

/**
 * crashring_slot_bytes - how much of @slot a reader of "previous" gets
 * @slot: a slot holding a generation or a damaged one
 *
 * The header's own size when it can be trusted, else the whole slot, so
 * that `crashring extract --trust-header` can salvage what is there.
 */
u64 crashring_slot_bytes(const struct crashring_slot *slot)
{
	if (slot->state != CR_SLOT_GENERATION)
		return slot->size;
	return min_t(u64, crashring_region_size(slot->mem), slot->size);
}

/*
 * Writes slot @cur's cache lines back to memory. A warm reset does not
 * write caches back, and on persistent memory without eADR a power cut
 * loses what they hold; so the panic, oops and shutdown paths end with
 * this. arch_wb_cache_pmem() (CLWB on x86, as the pmem driver uses, see
 * arch/x86/lib/usercopy_64.c) is coherent across CPUs: lines that other,
 * stopped CPUs dirtied are written back too. No locks, any context.
 */
void crashring_write_back_slot(int cur)
{
	arch_wb_cache_pmem(crashring.slot[cur].mem, crashring_slot_bytes(&crashring.slot[cur]));
	pmem_wmb();
}

/*
 * Clears @slot's magic so no later boot takes it for a generation, and
 * writes that back: otherwise a reset could bring the cleared generation
 * back from memory the cache never wrote to.
 */
static void cr_clear_slot(int slot)
{
	memset(crashring.slot[slot].mem, 0, CRASHRING_HEADER_SIZE);
	arch_wb_cache_pmem(crashring.slot[slot].mem, CRASHRING_HEADER_SIZE);
	pmem_wmb();
	crashring.slot[slot].state = CR_SLOT_EMPTY;
}

/**
 * crashring_start_recording - format @slot as this boot's generation
 * @slot: a slot holding nothing worth keeping
 *
 * Return: 0 or a negative errno. Called with crashring.lock held or during
 * init.
 */
int crashring_start_recording(int slot)
{
	struct crashring_stream_spec *specs;
	/* A 64-character host name is legal; the header keeps 63 and a NUL. */
	char hostname[sizeof_field(struct crashring_region_header, hostname)];
	struct crashring_config cfg = {
		.page_size = ring_page_size,
		.word_size = sizeof(long),
		.nstreams = crashring.nstreams + crashring.nuser,
		.user_pages = crashring.user_pages,
		.created_ns = ktime_get_mono_fast_ns(),
		.kernel_release = utsname()->release,
		.hostname = hostname,
		.producer = "crashring.ko",
		.callsite_pages = callsite_pages,
		.callsites = &crashring.callsites,
	};
	/* The boot's first generation records what printk logged before it. */
	bool backfill = crashring_backfill_wanted();
	struct kmsg_dump_iter iter;
	unsigned int backfilled = 0;
	unsigned long flags;
	u64 took = 0;
	u64 generation = 0;
	unsigned int i;
	int err;

	strscpy(hostname, utsname()->nodename, sizeof(hostname));
	for (i = 0; i < CRASHRING_SLOTS; i++)
		generation = max(generation, crashring.slot[i].generation);
	cfg.generation = generation == U64_MAX ? generation : generation + 1;
	/* As the clock check reads it: two clock reads could be pulled apart. */
	cfg.wall_offset_ns = ktime_to_ns(ktime_mono_to_real(0));
	memcpy(cfg.boot_id, crashring.boot_id, sizeof(cfg.boot_id));
	specs = kcalloc(cfg.nstreams, sizeof(*specs), GFP_KERNEL);
	if (!specs)
		return -ENOMEM;
	for (i = 0; i < cfg.nstreams; i++) {
		if (i >= crashring.nstreams) {
			/* A free pool stream: no name, no holder yet. */
			specs[i].kind = CRASHRING_STREAM_USER;
			specs[i].cpu = U16_MAX;
			specs[i].name = "";
			continue;
		}
		specs[i].kind = CRASHRING_STREAM_KERNEL_CPU;
		specs[i].cpu = i % nr_cpu_ids;
		specs[i].lane = i / nr_cpu_ids;
	}
	cfg.streams = specs;
	cfg.lane_pages = lane_pages ?: max_t(u64, 4, crashring.slot[slot].size / ring_page_size /
						  nr_cpu_ids / 32);
	err = crashring_format(crashring.slot[slot].mem, crashring.slot[slot].size, &cfg,
			       crashring.streams);
	kfree(specs);
	if (err) {
		crashring_note("cannot format slot %d (%llu bytes) for %u streams and %u user streams of %u pages with %u-byte pages: %d",
			       slot, crashring.slot[slot].size, crashring.nstreams, crashring.nuser,
			       crashring.user_pages, ring_page_size, err);
		return err;
	}
	if (durable > 0 || (durable < 0 && crashring.pmem)) {
		for (i = 0; i < crashring.nstreams; i++)
			crashring_set_durable(&crashring.streams[i], true);
		crashring_write_back_slot(slot);
	}
	crashring.slot[slot].state = CR_SLOT_GENERATION;
	crashring.slot[slot].generation = cfg.generation;
	crashring.wall_offset_ns = cfg.wall_offset_ns;
	/* The area is empty: no callsite has an id in it yet. */
	crashring_debug_reset();
	WRITE_ONCE(crashring.cur, slot);
	/* Before recording: a panic from then on finds the panic clock set. */
	crashring_clock_arm();
	crashring_writeback_arm();
	/* This CPU's stream takes the backfilled lines before any other event. */
	local_irq_save(flags);
	if (backfill)
		crashring_backfill_begin(&iter);
	/*
	 * Release: a CPU that sees recording on (crashring_this_cpu()) also
	 * sees the streams crashring_format() just set up, on any architecture.
	 */
	smp_store_release(&crashring.enabled, true);
	if (backfill) {
		took = ktime_get_mono_fast_ns();
		backfilled = crashring_backfill(&iter);
		took = ktime_get_mono_fast_ns() - took;
	}
	local_irq_restore(flags);
	pr_info("recording generation %llu in slot %d at %pa (%llu bytes, %u CPUs), %u earlier printk lines recorded in %llu us\n",
		cfg.generation, slot, &crashring.slot[slot].phys,
		crashring_region_size(crashring.slot[slot].mem), crashring.nstreams, backfilled,
		div_u64(took, NSEC_PER_USEC));
	return 0;
}

/**
 * crashring_release_previous - forget the previous generation (archived)
 *
 * Clears its magic so no later boot takes it for a generation, and starts
 * recording in its slot if nothing is being recorded. Called with
 * crashring.lock held.
 */
void crashring_release_previous(void)
{
	int prev = crashring.prev;

	if (prev < 0)
		return;
	pr_info("previous generation %llu%s released\n", crashring.slot[prev].generation,
		crashring.slot[prev].state == CR_SLOT_DAMAGED ? " (damaged header)" : "");
	cr_clear_slot(prev);
	crashring.prev = cr_pick_previous(crashring.cur);
	if (crashring.cur < 0 && !crashring_start_recording(prev))
		crashring_note("recording (re-armed after the previous generation was released)");
}

/*
 * Decides which slot to record into and which to keep. Only an empty slot
 * is recorded into: a slot whose header fails its checks may still hold a
 * crash that `crashring extract --trust-header` can salvage (one flipped
 * bit, or a region= that was shrunk), so it is kept read-only like any
 * unarchived generation and offered as "previous".
 */
static int cr_choose_slots(void)
{
	int i, victim;

	for (i = 0; i < CRASHRING_SLOTS; i++) {
		struct crashring_slot *s = &crashring.slot[i];

		cr_classify_slot(s);
		if (s->state == CR_SLOT_DAMAGED)
			crashring_note("slot %d holds a generation whose header is damaged (CRC or field check failed): kept read-only; salvage it with crashring extract --trust-header, then acknowledge it (previous_ack)",
				       i);
	}
	crashring.prev = cr_pick_previous(-1);
	if (crashring.read_only) {
		crashring_note("capture kernel: not recording, and the region stays as the crashed kernel left it (previous_ack refused); the next boot archives it");
		return 0;
	}
	for (i = 0; i < CRASHRING_SLOTS; i++)
		if (crashring.slot[i].state == CR_SLOT_EMPTY)
			return crashring_start_recording(i);
	if (!overwrite_unarchived) {
		crashring_note("not recording: both slots hold unarchived generations; acknowledge the previous one (previous_ack) to re-arm");
		return 0;
	}
	victim = crashring.prev == 0 ? 1 : 0;
	if (crashring.slot[victim].state == CR_SLOT_UNREADABLE)
		return 0;
	pr_warn("overwriting unarchived generation %llu in slot %d (overwrite_unarchived=1)\n",
		crashring.slot[victim].generation, victim);
	crashring.slot[victim].state = CR_SLOT_EMPTY;
	return crashring_start_recording(victim);
}

/* Only where the other CPUs are stopped: the panic path. */
static void cr_close_all(void)
{
	unsigned int i;

	for (i = 0; i < crashring.nstreams; i++)
		crashring_close(&crashring.streams[i]);
}

/*
 * The crash's time, read without the clocksource (crashring_panic_clock()),
 * and no earlier than any event recorded: the crash event is the last of
 * its generation, in time as in order.
 */
static u64 cr_panic_time(void)
{
	u64 now = crashring_panic_clock();
	unsigned int i;

	for (i = 0; i < crashring.nstreams; i++)
		now = max(now, READ_ONCE(crashring.streams[i].time));
	return now;
}

/*
 * Runs on the panicking CPU after the others were stopped, so it may close
 * their pages: their in-flight records lie past the published commit, stay
 * invisible and are counted as dropped. The writes the panic interrupted on
 * this CPU hold the lanes below its own, so its crash record goes on the
 * next lane (crashring_take_innermost() frees one if none is left). No
 * locks, no allocation.
 */
static int cr_panic(struct notifier_block *nb, unsigned long event, void *buf)
{
	int cur = READ_ONCE(crashring.cur);
	const char *msg = buf ? buf : "panic";
	u64 now;

	if (cur < 0)
		return NOTIFY_DONE;
	now = cr_panic_time();
	crashring_take_innermost(&crashring.cpus[raw_smp_processor_id()]);
	crashring_ras_panic(now);
	crashring_record_crash(CRASHRING_REASON_PANIC, msg, now);
	crashring_set_state(crashring.slot[cur].mem, CRASHRING_STATE_CRASHED,
			    CRASHRING_REASON_PANIC, now, raw_smp_processor_id(), msg);
	/*
	 * Stop first, so nothing starts a record after its page was closed:
	 * the crash marker stays the last event of the generation.
	 */
	WRITE_ONCE(crashring.enabled, false);
	cr_close_all();
	crashring_write_back_slot(cur);
	return NOTIFY_DONE;
}

static struct notifier_block cr_panic_nb = {
	.notifier_call = cr_panic,
	.priority = INT_MAX,	/* before notifiers that may hang */
};

/* An oops or die is recorded; if it becomes a panic, the panic path runs. */
static int cr_die(struct notifier_block *nb, unsigned long val, void *data)
{
	struct die_args *args = data;

	int cur = READ_ONCE(crashring.cur);

	if (val != DIE_OOPS || cur < 0)
		return NOTIFY_DONE;
	crashring_record_crash(CRASHRING_REASON_OOPS, args && args->str ? args->str : "oops",
			       ktime_get_mono_fast_ns());
	/* The oops may end in a watchdog's reset rather than a panic. */
	crashring_write_back_slot(cur);
	return NOTIFY_DONE;
}

static struct notifier_block cr_die_nb = {
	.notifier_call = cr_die,
};

/*
 * Hibernation restores the streams' state (sequence numbers, open pages)
 * as the image froze it, while the region, which is not in the image,
 * kept what was written after the snapshot: the writer and the region
 * would disagree from resume on. Refused while recording; unload the
 * module (or disable recording) to hibernate.
 */
static int cr_pm(struct notifier_block *nb, unsigned long event, void *unused)
{
	if (event != PM_HIBERNATION_PREPARE || READ_ONCE(crashring.cur) < 0)
		return NOTIFY_DONE;
	pr_warn("hibernation refused while recording: the region is not part of the image\n");
	return notifier_from_errno(-EBUSY);
}

static struct notifier_block cr_pm_nb = {
	.notifier_call = cr_pm,
};

/*
 * Ends the generation cleanly: stops every CPU's stream, waits for the
 * writers inside one to leave, closes the pages, and only then marks the
 * state clean. Other CPUs are still running here.
 */
static void cr_finish_clean(void)
{
	int cur = READ_ONCE(crashring.cur);

	if (cur < 0)
		return;
	WRITE_ONCE(crashring.enabled, false);
	crashring_stop_all(crashring.streams, crashring.nstreams);
	crashring_mark_clean(crashring.slot[cur].mem);
	crashring_write_back_slot(cur);
}

/*
 * A reboot, power-off, halt or kexec reaches syscore_shutdown() after the
 * reboot notifiers and device_shutdown(), just before the machine goes
 * down: a hang in a driver's shutdown that a watchdog resets still reads
 * as "running", not as a clean shutdown, and what drivers print on the way
 * down is recorded.
 */
static void cr_syscore_shutdown(CR_SYSCORE_ARGS)
{
	cr_finish_clean();
}

static struct cr_syscore cr_syscore = {
	.ops = { .shutdown = cr_syscore_shutdown },
};

static int cr_map(void)
{
	u64 half = (crashring.size / 2) & ~(u64)(PAGE_SIZE - 1);
	int i;

	crashring.map = memremap(crashring.phys, crashring.size, MEMREMAP_WB);
	if (!crashring.map) {
		pr_err("cannot map %pa+%llu\n", &crashring.phys, crashring.size);
		return -ENOMEM;
	}
	for (i = 0; i < CRASHRING_SLOTS; i++) {
		crashring.slot[i].phys = crashring.phys + i * half;
		crashring.slot[i].size = half;
		crashring.slot[i].mem = (u8 *)crashring.map + i * half;
	}
	/*
	 * Persistent memory is a device's, and a plain load there may hit
	 * poison. A capture kernel writes nothing, not even the probe's
	 * flip-and-restore, and a range it cannot read shows no generation.
	 */
	if (!half || (!crashring.pmem && !crashring.read_only &&
		      !cr_backed_by_memory(crashring.map, crashring.size))) {
		pr_err("%pa+%llu does not hold what is written to it: it is outside the machine's RAM\n",
		       &crashring.phys, crashring.size);
		memunmap(crashring.map);
		return -ENXIO;
	}
	return 0;
}

/*
 * Every CPU's lanes: stream lane * nr_cpu_ids + cpu, lane 0 first; then
 * the pool of user streams.
 */
static int cr_alloc_lanes(void)
{
	unsigned int cpu, lane;

	if (!nest_lanes || nest_lanes > CRASHRING_MAX_LANES ||
	    nest_lanes * nr_cpu_ids > CRASHRING_MAX_STREAMS) {
		pr_err("nest_lanes=%u: 1..%u and at most %u streams for %u CPUs\n", nest_lanes,
		       CRASHRING_MAX_LANES, CRASHRING_MAX_STREAMS, nr_cpu_ids);
		return -EINVAL;
	}
	crashring.nlanes = nest_lanes;
	crashring.nstreams = nest_lanes * nr_cpu_ids;
	crashring.nuser = crashring_user_pool(ring_page_size,
					      crashring.nstreams + (callsite_pages ? 1 : 0),
					      &crashring.user_pages);
	crashring.streams = kcalloc(crashring.nstreams + crashring.nuser,
				    sizeof(*crashring.streams), GFP_KERNEL);
	crashring.cpus = kcalloc(nr_cpu_ids, sizeof(*crashring.cpus), GFP_KERNEL);
	if (!crashring.streams || !crashring.cpus) {
		kfree(crashring.streams);
		kfree(crashring.cpus);
		return -ENOMEM;
	}
	for (cpu = 0; cpu < nr_cpu_ids; cpu++) {
		crashring.cpus[cpu].nlanes = nest_lanes;
		for (lane = 0; lane < nest_lanes; lane++)
			crashring.cpus[cpu].lane[lane] = &crashring.streams[lane * nr_cpu_ids + cpu];
	}
	return 0;
}

static void cr_free_lanes(void)
{
	kfree(crashring.cpus);
	kfree(crashring.streams);
}

static int __init crashring_init(void)
{
	unsigned int evidence;
	int err;

	/*
	 * A kdump capture kernel boots with the crashed kernel's command line,
	 * so it would otherwise start its own generation in the region the
	 * capture is about to read, and the next boot would find the capture
	 * kernel's instead of the crash.
	 */
	crashring.read_only = is_kdump_kernel();
	err = crashring_find_range();
	if (err)
		return err;
	err = cr_map();
	if (err)
		goto err_release;
	err = cr_alloc_lanes();
	if (err)
		goto err_unmap;
	err = crashring_user_init();
	if (err)
		goto err_free_lanes;
	err = crashring_writeback_init();
	if (err)
		goto err_user;
	err = cr_get_boot_id(crashring.boot_id);
	if (err) {
		pr_warn("boot id unknown (%s: %d): a random one is recorded, so journal lines cannot match it\n",
			boot_id ? "boot_id=" : CR_BOOT_ID_PATH, err);
		get_random_bytes(crashring.boot_id, sizeof(crashring.boot_id));
	}
	evidence = crashring_keep_reset_evidence();
	if (evidence)
		pr_info("%u lines of this boot's log about the last reset kept in /sys/kernel/crashring/reset_evidence\n",
			evidence);
	crashring.sources = CR_SRC_PRINTK | CR_SRC_MARKER | CR_SRC_CRASH | CR_SRC_DEBUG | CR_SRC_RAS;
	/* Parameters are checked before any slot is formatted. */
	err = crashring_sources_init();
	if (err)
		goto err_free_streams;
	err = cr_choose_slots();
	if (err)
		goto err_sources;
	atomic_notifier_chain_register(&panic_notifier_list, &cr_panic_nb);
	register_die_notifier(&cr_die_nb);
	register_pm_notifier(&cr_pm_nb);
	cr_register_syscore(&cr_syscore);
	err = crashring_shutdown_init();
	if (err)
		goto err_notifiers;
	err = crashring_sysfs_init();
	if (err)
		goto err_shutdown;
	err = crashring_dev_register();
	if (err)
		goto err_sysfs;
	err = crashring_live_register();
	if (err)
		goto err_dev;
	pr_info("%s range %pa+%llu, previous generation %s\n", crashring.source, &crashring.phys,
		crashring.size, crashring.prev >= 0 ? "kept in /sys/kernel/crashring/previous" : "none");
	return 0;

err_dev:
	crashring_dev_unregister();
err_sysfs:
	crashring_sysfs_exit();
err_shutdown:
	crashring_shutdown_exit();
err_notifiers:
	cr_unregister_syscore(&cr_syscore);
	unregister_pm_notifier(&cr_pm_nb);
	unregister_die_notifier(&cr_die_nb);
	atomic_notifier_chain_unregister(&panic_notifier_list, &cr_panic_nb);
err_sources:
	crashring_sources_exit();
	WRITE_ONCE(crashring.enabled, false);
	crashring_clock_stop();
	/*
	 * The generation this load started holds nothing: left formatted, the
	 * next load would keep it as an unarchived previous.
	 */
	if (crashring.cur >= 0)
		cr_clear_slot(crashring.cur);
err_free_streams:
	/* Cancels a pass before the user pool it walks is gone. */
	crashring_writeback_exit();
err_user:
	crashring_user_exit();
err_free_lanes:
	cr_free_lanes();
err_unmap:
	memunmap(crashring.map);
err_release:
	crashring_release_region();
	return err;
}

static void __exit crashring_exit(void)
{
	/*
	 * sysfs goes first: a previous_ack racing with the unload may start
	 * recording, and the slot it records into must be the one closed.
	 * The device goes before it: no new stream is handed out from here.
	 */
	crashring_live_unregister();
	crashring_dev_unregister();
	crashring_sysfs_exit();
	crashring_shutdown_exit();
	cr_unregister_syscore(&cr_syscore);
	unregister_pm_notifier(&cr_pm_nb);
	unregister_die_notifier(&cr_die_nb);
	atomic_notifier_chain_unregister(&panic_notifier_list, &cr_panic_nb);
	crashring_sources_exit();
	/* After sysfs: nothing can re-arm them once they are cancelled. */
	crashring_clock_stop();
	crashring_writeback_exit();
	cr_finish_clean();
	crashring_user_exit();
	cr_free_lanes();
	memunmap(crashring.map);
	crashring_release_region();
}

module_init(crashring_init);
module_exit(crashring_exit);
MODULE_LICENSE("GPL");
MODULE_AUTHOR("crashring developers");
MODULE_DESCRIPTION("Crash-persistent per-CPU flight recorder");
