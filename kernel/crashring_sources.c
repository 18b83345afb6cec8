// SPDX-License-Identifier: GPL-2.0
/*
 * What crashring.ko records, one source per file behind this table:
 * printk lines (crashring_printk.c), user and kernel markers
 * (crashring_marker.c), sched_switch and irq handlers, off by default
 * (crashring_sched.c), crash markers (here; the panic and die notifiers
 * in crashring_main.c write them), kernel debug messages diverted
 * from printk (crashring_debug.c) and hardware errors (crashring_ras.c). Clock events are not a
 * source: recording always keeps them (crashring_clock.c).
 *
 * A source is turned on and off as a whole: its bit in crashring.sources,
 * which its write path reads, and the tracepoints it attaches to while on.
 * To add one: a file with its probes and a struct crashring_source, a bit
 * in crashring_internal.h, its entry in cr_sources[] below, and its name
 * in FORMAT.md and the README.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/tracepoint.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include "crashring.h"
#include "crashring_emit.h"

static char *sources;
module_param(sources, charp, 0400);
MODULE_PARM_DESC(sources, "Comma-separated event sources: printk,marker,crash,sched,irq,debug,ras (default printk,marker,crash,debug,ras)");

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

static const struct crashring_source cr_source_crash = {
	.name = "crash",
};

/* By bit: cr_sources[n] is the source of BIT(n) in crashring.sources. */
static const struct crashring_source *const cr_sources[CR_NR_SOURCES] = {
	[CR_SRC_PRINTK_NR] = &crashring_source_printk,
	[CR_SRC_MARKER_NR] = &crashring_source_marker,
	[CR_SRC_SCHED_NR] = &crashring_source_sched,
	[CR_SRC_IRQ_NR] = &crashring_source_irq,
	[CR_SRC_CRASH_NR] = &cr_source_crash,
	[CR_SRC_DEBUG_NR] = &crashring_source_debug,
	[CR_SRC_RAS_NR] = &crashring_source_ras,
};

static void cr_find_tracepoint(struct tracepoint *tp, void *unused)
{
	unsigned int i, j;

	for (i = 0; i < CR_NR_SOURCES; i++)
		for (j = 0; j < cr_sources[i]->nprobes; j++)
			if (!strcmp(tp->name, cr_sources[i]->probes[j].tracepoint))
				cr_sources[i]->probes[j].tp = tp;
}

/* Attaches (@on) or detaches @p's probe, unless it already is. */
static int cr_probe_set(struct crashring_probe *p, bool on)
{
	int err;

	if (on == p->registered)
		return 0;
	if (!p->tp) {
		if (on)
			pr_warn("tracepoint %s not found; source not available\n", p->tracepoint);
		return 0;
	}
	if (on)
		err = tracepoint_probe_register(p->tp, p->probe, NULL);
	else
		err = tracepoint_probe_unregister(p->tp, p->probe, NULL);
	if (err) {
		pr_err("cannot %s tracepoint %s: %d\n", on ? "attach to" : "detach from",
		       p->tracepoint, err);
		return err;
	}
	p->registered = on;
	return 0;
}

/**
 * crashring_set_sources - turn event sources on and off
 * @want: CR_SRC_* bits
 *
 * Return: 0, or the error of the first probe that could not be attached.
 * Called with crashring.lock held.
 */
int crashring_set_sources(unsigned long want)
{
	unsigned int i, j;
	int err = 0;

	for (i = 0; i < CR_NR_SOURCES && !err; i++)
		for (j = 0; j < cr_sources[i]->nprobes && !err; j++)
			err = cr_probe_set(&cr_sources[i]->probes[j], want & BIT(i));
	WRITE_ONCE(crashring.sources, want);
	return err;
}

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

		for (i = 0; i < CR_NR_SOURCES; i++) {
			if (n == strlen(cr_sources[i]->name) && !strncmp(p, cr_sources[i]->name, n)) {
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

	for (i = 0; i < CR_NR_SOURCES; i++)
		if (on & BIT(i))
			n += sysfs_emit_at(buf, n, "%s%s", n ? " " : "", cr_sources[i]->name);
	return n + sysfs_emit_at(buf, n, "\n");
}

/* Undoes the first @n sources' init, last first. */
static void cr_sources_exit(unsigned int n)
{
	while (n--)
		if (cr_sources[n]->exit)
			cr_sources[n]->exit();
}

int crashring_sources_init(void)
{
	unsigned long want = crashring.sources;
	unsigned int i;
	int err;

	if (sources && crashring_parse_sources(sources, &want)) {
		pr_err("sources=%s: known sources are printk, marker, crash, sched, irq, debug, ras\n",
		       sources);
		return -EINVAL;
	}
	for (i = 0; i < CR_NR_SOURCES; i++) {
		err = cr_sources[i]->init ? cr_sources[i]->init() : 0;
		if (err) {
			cr_sources_exit(i);
			return err;
		}
	}
	for_each_kernel_tracepoint(cr_find_tracepoint, NULL);
	err = crashring_set_sources(want);
	if (err) {
		crashring_set_sources(0);
		/* No probe may still run when the caller frees the streams. */
		tracepoint_synchronize_unregister();
		cr_sources_exit(CR_NR_SOURCES);
	}
	return err;
}

void crashring_sources_exit(void)
{
	crashring_set_sources(0);
	tracepoint_synchronize_unregister();
	cr_sources_exit(CR_NR_SOURCES);
}
