// SPDX-License-Identifier: GPL-2.0
/*
 * crashring.ko: a flight recorder that survives the crash it records.
 *
 * Per-CPU rings of pages (pstore-ring format v1, see crashring_ring.c) in a
 * reserved physical range: memmap=SIZE$PHYS plus region=SIZE@PHYS, or, on
 * 6.11 and later, reserve_mem=SIZE:ALIGN:LABEL plus reserve_mem=LABEL. The
 * range survives a warm reboot and a kexec into a capture kernel; the next
 * boot finds the previous generation in it and keeps it for user space.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/io.h>
#include <linux/ioport.h>
#include <linux/slab.h>
#include <linux/panic_notifier.h>
#include <linux/kdebug.h>
#include <linux/reboot.h>
#include <linux/random.h>
#include <linux/utsname.h>
#include <linux/timekeeping.h>
#include <linux/cpumask.h>
#include <linux/smp.h>
#include "crashring_internal.h"
#include "crashring_compat.h"

static char *region;
module_param(region, charp, 0400);
MODULE_PARM_DESC(region, "Reserved physical range SIZE@PHYS (e.g. 16M@0x40000000), reserved with memmap=SIZE$PHYS");

static char *reserve_mem;
module_param(reserve_mem, charp, 0400);
MODULE_PARM_DESC(reserve_mem, "Label of a reserve_mem=SIZE:ALIGN:LABEL range (6.11+)");

static unsigned int ring_page_size = 4096;
module_param_named(page_size, ring_page_size, uint, 0400);
MODULE_PARM_DESC(page_size, "Ring page size in bytes: a power of two, 256..1048576");

static bool overwrite_unarchived;
module_param(overwrite_unarchived, bool, 0400);
MODULE_PARM_DESC(overwrite_unarchived, "When both slots hold unarchived generations, overwrite the older (default: keep both, do not record)");

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

/**
 * crashring_this_stream - the calling CPU's stream, preemption disabled
 *
 * Return: the stream, or NULL (preemption enabled again) when not recording.
 * A non-NULL return must be paired with crashring_put_stream().
 */
struct crashring_stream *crashring_this_stream(void)
{
	struct crashring_stream *streams;
	unsigned int cpu;

	preempt_disable_notrace();
	streams = READ_ONCE(crashring.streams);
	cpu = raw_smp_processor_id();
	if (!streams || !READ_ONCE(crashring.enabled) || cpu >= crashring.nstreams) {
		preempt_enable_notrace();
		return NULL;
	}
	return &streams[cpu];
}

void crashring_put_stream(void)
{
	preempt_enable_notrace();
}

static int cr_parse_region(phys_addr_t *phys, u64 *size)
{
	char *at;

	*size = memparse(region, &at);
	if (*at != '@' || !*size)
		return -EINVAL;
	*phys = memparse(at + 1, &at);
	return *at ? -EINVAL : 0;
}

/* Finds the reserved range from the module parameters. */
static int cr_find_range(void)
{
	if (region && reserve_mem) {
		pr_err("give region= or reserve_mem=, not both\n");
		return -EINVAL;
	}
	if (region) {
		if (cr_parse_region(&crashring.phys, &crashring.size)) {
			pr_err("region=%s: expected SIZE@PHYS, e.g. 16M@0x40000000\n", region);
			return -EINVAL;
		}
		crashring.source = "region";
		/* memmap=$ ranges are reserved, never System RAM in use. */
		if (region_intersects(crashring.phys, crashring.size, IORESOURCE_SYSTEM_RAM,
				      IORES_DESC_NONE) != REGION_DISJOINT) {
			pr_err("region %pa+%llu overlaps System RAM in use: reserve it first with memmap=%llu$%pa\n",
			       &crashring.phys, crashring.size, crashring.size, &crashring.phys);
			return -EBUSY;
		}
		return 0;
	}
	if (reserve_mem) {
		phys_addr_t start, size;

		if (!CR_HAVE_RESERVE_MEM) {
			pr_err("reserve_mem= needs Linux 6.11 or later; use memmap= and region=\n");
			return -EOPNOTSUPP;
		}
		if (!cr_reserve_mem_find(reserve_mem, &start, &size)) {
			pr_err("no reserve_mem range labelled \"%s\" (boot with reserve_mem=SIZE:ALIGN:%s)\n",
			       reserve_mem, reserve_mem);
			return -ENOENT;
		}
		crashring.phys = start;
		crashring.size = size;
		crashring.source = "reserve_mem";
		return 0;
	}
	pr_err("no memory given: load with region=SIZE@PHYS or reserve_mem=LABEL\n");
	return -EINVAL;
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

/* Whether @slot holds a generation; @corrupt when its header is damaged. */
static bool cr_slot_valid(struct crashring_slot *slot, bool *corrupt)
{
	int err = crashring_check_header(slot->mem, slot->size);

	*corrupt = err == -EBADMSG;
	if (err)
		return false;
	slot->generation = ((struct crashring_region_header *)slot->mem)->generation;
	return true;
}

static int cr_newest_occupied(int except)
{
	int i, best = -1;

	for (i = 0; i < CRASHRING_SLOTS; i++)
		if (i != except && crashring.slot[i].occupied &&
		    (best < 0 || crashring.slot[i].generation > crashring.slot[best].generation))
			best = i;
	return best;
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
	struct crashring_config cfg = {
		.page_size = ring_page_size,
		.word_size = sizeof(long),
		.nstreams = crashring.nstreams,
		.created_ns = ktime_get_mono_fast_ns(),
		.kernel_release = utsname()->release,
		.hostname = utsname()->nodename,
		.producer = "crashring.ko",
	};
	u64 generation = 0;
	unsigned int i;
	int err;

	for (i = 0; i < CRASHRING_SLOTS; i++)
		if (crashring.slot[i].occupied && crashring.slot[i].generation > generation)
			generation = crashring.slot[i].generation;
	cfg.generation = generation + 1;
	cfg.wall_offset_ns = ktime_get_real_ns() - cfg.created_ns;
	memcpy(cfg.boot_id, crashring.boot_id, sizeof(cfg.boot_id));
	specs = kcalloc(crashring.nstreams, sizeof(*specs), GFP_KERNEL);
	if (!specs)
		return -ENOMEM;
	for (i = 0; i < crashring.nstreams; i++) {
		specs[i].kind = CRASHRING_STREAM_KERNEL_CPU;
		specs[i].cpu = i;
	}
	cfg.streams = specs;
	err = crashring_format(crashring.slot[slot].mem, crashring.slot[slot].size, &cfg,
			       crashring.streams);
	kfree(specs);
	if (err) {
		crashring_note("cannot format slot %d (%llu bytes) for %u CPUs with %u-byte pages: %d",
			       slot, crashring.slot[slot].size, crashring.nstreams, ring_page_size, err);
		return err;
	}
	crashring.slot[slot].occupied = true;
	crashring.slot[slot].generation = cfg.generation;
	WRITE_ONCE(crashring.cur, slot);
	WRITE_ONCE(crashring.enabled, true);
	pr_info("recording generation %llu in slot %d at %pa (%llu bytes, %u CPUs)\n",
		cfg.generation, slot, &crashring.slot[slot].phys,
		crashring_region_size(crashring.slot[slot].mem), crashring.nstreams);
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
	memset(crashring.slot[prev].mem, 0, CRASHRING_HEADER_SIZE);
	crashring.slot[prev].occupied = false;
	crashring.prev = cr_newest_occupied(crashring.cur);
	pr_info("previous generation %llu released\n", crashring.slot[prev].generation);
	if (crashring.cur < 0 && !crashring_start_recording(prev))
		crashring_note("recording (re-armed after the previous generation was released)");
}

/* Decides which slot to record into and which to keep. */
static int cr_choose_slots(void)
{
	bool corrupt;
	int i, victim;

	for (i = 0; i < CRASHRING_SLOTS; i++) {
		struct crashring_slot *s = &crashring.slot[i];

		s->occupied = cr_slot_valid(s, &corrupt);
		if (corrupt)
			crashring_note("slot %d at %pa has a damaged header (CRC or field check failed); it will be reinitialised",
				       i, &s->phys);
	}
	crashring.prev = cr_newest_occupied(-1);
	for (i = 0; i < CRASHRING_SLOTS; i++)
		if (!crashring.slot[i].occupied)
			return crashring_start_recording(i);
	if (!overwrite_unarchived) {
		crashring_note("not recording: both slots hold unarchived generations; acknowledge the previous one (previous_ack) to re-arm");
		return 0;
	}
	victim = crashring.prev == 0 ? 1 : 0;
	pr_warn("overwriting unarchived generation %llu in slot %d (overwrite_unarchived=1)\n",
		crashring.slot[victim].generation, victim);
	crashring.slot[victim].occupied = false;
	return crashring_start_recording(victim);
}

static void cr_close_all(void)
{
	unsigned int i;

	for (i = 0; i < crashring.nstreams; i++)
		crashring_close(&crashring.streams[i]);
}

/*
 * Runs on the panicking CPU after the others were stopped, so it may close
 * their pages: their in-flight records lie past the published commit and
 * stay invisible. No locks, no allocation.
 */
static int cr_panic(struct notifier_block *nb, unsigned long event, void *buf)
{
	int cur = READ_ONCE(crashring.cur);
	const char *msg = buf ? buf : "panic";

	if (cur < 0)
		return NOTIFY_DONE;
	crashring_record_crash(CRASHRING_REASON_PANIC, msg);
	crashring_set_state(crashring.slot[cur].mem, CRASHRING_STATE_CRASHED,
			    CRASHRING_REASON_PANIC, ktime_get_mono_fast_ns(),
			    raw_smp_processor_id(), msg);
	/*
	 * Stop first, so nothing starts a record after its page was closed:
	 * the crash marker stays the last event of the generation.
	 */
	WRITE_ONCE(crashring.enabled, false);
	cr_close_all();
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

	if (val == DIE_OOPS)
		crashring_record_crash(CRASHRING_REASON_OOPS, args && args->str ? args->str : "oops");
	return NOTIFY_DONE;
}

static struct notifier_block cr_die_nb = {
	.notifier_call = cr_die,
};

/* A clean reboot or power-off marks the generation clean-shutdown. */
static int cr_reboot(struct notifier_block *nb, unsigned long code, void *unused)
{
	int cur = READ_ONCE(crashring.cur);

	if (cur >= 0) {
		crashring_set_state(crashring.slot[cur].mem, CRASHRING_STATE_CLEAN,
				    CRASHRING_REASON_NONE, 0, 0, "");
		cr_close_all();
	}
	return NOTIFY_DONE;
}

static struct notifier_block cr_reboot_nb = {
	.notifier_call = cr_reboot,
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
	if (!half || !cr_backed_by_memory(crashring.map, crashring.size)) {
		pr_err("%pa+%llu does not hold what is written to it: it is outside the machine's RAM\n",
		       &crashring.phys, crashring.size);
		memunmap(crashring.map);
		return -ENXIO;
	}
	return 0;
}

static int __init crashring_init(void)
{
	int err;

	err = cr_find_range();
	if (err)
		return err;
	err = cr_map();
	if (err)
		return err;
	crashring.nstreams = nr_cpu_ids;
	crashring.streams = kcalloc(crashring.nstreams, sizeof(*crashring.streams), GFP_KERNEL);
	if (!crashring.streams) {
		err = -ENOMEM;
		goto err_unmap;
	}
	get_random_bytes(crashring.boot_id, sizeof(crashring.boot_id));
	crashring.sources = CR_SRC_PRINTK | CR_SRC_MARKER | CR_SRC_CRASH;
	err = cr_choose_slots();
	if (err)
		goto err_free_streams;
	err = crashring_sources_init();
	if (err)
		goto err_free_streams;
	atomic_notifier_chain_register(&panic_notifier_list, &cr_panic_nb);
	register_die_notifier(&cr_die_nb);
	register_reboot_notifier(&cr_reboot_nb);
	err = crashring_sysfs_init();
	if (err)
		goto err_notifiers;
	pr_info("%s range %pa+%llu, previous generation %s\n", crashring.source, &crashring.phys,
		crashring.size, crashring.prev >= 0 ? "kept in /sys/kernel/crashring/previous" : "none");
	return 0;

err_notifiers:
	unregister_reboot_notifier(&cr_reboot_nb);
	unregister_die_notifier(&cr_die_nb);
	atomic_notifier_chain_unregister(&panic_notifier_list, &cr_panic_nb);
	crashring_sources_exit();
err_free_streams:
	WRITE_ONCE(crashring.enabled, false);
	kfree(crashring.streams);
err_unmap:
	memunmap(crashring.map);
	return err;
}

static void __exit crashring_exit(void)
{
	int cur = crashring.cur;

	crashring_sysfs_exit();
	unregister_reboot_notifier(&cr_reboot_nb);
	unregister_die_notifier(&cr_die_nb);
	atomic_notifier_chain_unregister(&panic_notifier_list, &cr_panic_nb);
	crashring_sources_exit();
	WRITE_ONCE(crashring.enabled, false);
	synchronize_rcu();
	if (cur >= 0) {
		crashring_set_state(crashring.slot[cur].mem, CRASHRING_STATE_CLEAN,
				    CRASHRING_REASON_NONE, 0, 0, "");
		cr_close_all();
	}
	kfree(crashring.streams);
	memunmap(crashring.map);
}

module_init(crashring_init);
module_exit(crashring_exit);
MODULE_LICENSE("GPL");
MODULE_AUTHOR("crashring developers");
MODULE_DESCRIPTION("Crash-persistent per-CPU flight recorder");
