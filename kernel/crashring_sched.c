// SPDX-License-Identifier: GPL-2.0
/*
 * The sched and irq sources (off by default): what ran on each CPU before
 * the crash, from the sched_switch and irq_handler_entry/exit tracepoints.
 */
#include <linux/kernel.h>
#include <linux/interrupt.h>
#include <linux/sched.h>
#include <linux/string.h>
#include "crashring.h"
#include "crashring_emit.h"

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

static struct crashring_probe cr_sched_probes[] = {
	{ .tracepoint = "sched_switch", .probe = cr_sched_switch_probe },
};

static struct crashring_probe cr_irq_probes[] = {
	{ .tracepoint = "irq_handler_entry", .probe = cr_irq_entry_probe },
	{ .tracepoint = "irq_handler_exit", .probe = cr_irq_exit_probe },
};

const struct crashring_source crashring_source_sched = {
	.name = "sched",
	.probes = cr_sched_probes,
	.nprobes = ARRAY_SIZE(cr_sched_probes),
};

const struct crashring_source crashring_source_irq = {
	.name = "irq",
	.probes = cr_irq_probes,
	.nprobes = ARRAY_SIZE(cr_irq_probes),
};
