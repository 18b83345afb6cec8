// SPDX-License-Identifier: GPL-2.0
/*
 * A generation brought down on purpose, and the reason it was given, so
 * that the next boot bundles it as it would a crash: a signage box that
 * its watchdog daemon, a unit's FailureAction= (with RebootArgument=) or a
 * person reboots for a reason.
 *
 * A reason comes from the restart command (reboot(2)'s RESTART2 argument:
 * `systemctl reboot REASON`, systemd's RebootArgument=) or from
 * /sys/kernel/crashring/shutdown_reason, written before any reboot. It goes
 * into the state block as soon as it is known, with the state still
 * running: a reset before the clean end (a driver hanging in its shutdown
 * until a watchdog fires) reads as "running, reason shutdown"; the clean
 * end, in syscore_shutdown(), as "clean, reason shutdown". Every restart,
 * halt and power-off is also recorded as a `shutdown` event, when it
 * began.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/reboot.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/timekeeping.h>
#include "crashring_internal.h"
#include "crashring_emit.h"

/*
 * The reason, NUL-terminated ("" for none), when and where it was given.
 * Written under crashring.lock; read unlocked only where nothing can write
 * it any more (syscore_shutdown(), the module's exit).
 */
static char cr_reason[CRASHRING_SHUTDOWN_REASON_MAX + 1];
static u64 cr_reason_ns;
static u32 cr_reason_cpu;

/* Takes @len bytes of @text as the reason. Under crashring.lock. */
static void cr_take_reason(const char *text, size_t len)
{
	memcpy(cr_reason, text, len);
	cr_reason[len] = '\0';
	cr_reason_ns = len ? ktime_get_mono_fast_ns() : 0;
	cr_reason_cpu = raw_smp_processor_id();
}

/*
 * Records a `shutdown` event (@how, the reason) and keeps the reason in the
 * recording slot's state block, written back so that a reset finds it.
 * Under crashring.lock.
 */
static void cr_keep_reason(u32 how)
{
	int cur = crashring.cur;

	if (cur < 0)
		return;
	if (READ_ONCE(crashring.sources) & CR_SRC_CRASH)
		cr_emit(CRASHRING_EVENT_SHUTDOWN, &how, sizeof(how), cr_reason, strlen(cr_reason),
			-1);
	crashring_set_state(crashring.slot[cur].mem, CRASHRING_STATE_RUNNING,
			    cr_reason[0] ? CRASHRING_REASON_SHUTDOWN : CRASHRING_REASON_NONE,
			    cr_reason_ns, cr_reason_cpu, cr_reason);
	crashring_write_back_slot(cur);
}

/**
 * crashring_set_shutdown_reason - a reason for the next restart, halt or
 * power-off (sysfs "shutdown_reason")
 * @buf: one line of text; empty withdraws the reason
 * @count: its length, a final newline included
 *
 * Return: 0, -EINVAL for more than one line or more than
 * CRASHRING_SHUTDOWN_REASON_MAX bytes, -EROFS in a capture kernel, -EBUSY
 * while no generation records.
 */
int crashring_set_shutdown_reason(const char *buf, size_t count)
{
	size_t len = count && buf[count - 1] == '\n' ? count - 1 : count;
	int err = 0;

	if (len > CRASHRING_SHUTDOWN_REASON_MAX || memchr(buf, '\n', len))
		return -EINVAL;
	if (crashring.read_only)
		return -EROFS;
	mutex_lock(&crashring.lock);
	if (crashring.cur < 0) {
		err = -EBUSY;
	} else {
		cr_take_reason(buf, strnlen(buf, len));
		cr_keep_reason(CRASHRING_SHUTDOWN_ASKED);
	}
	mutex_unlock(&crashring.lock);
	return err;
}

int crashring_show_shutdown_reason(char *buf)
{
	int n;

	mutex_lock(&crashring.lock);
	n = sysfs_emit(buf, "%s\n", cr_reason);
	mutex_unlock(&crashring.lock);
	return n;
}

/*
 * The kernel's reboot notifiers run in process context at the start of
 * every restart, halt and power-off (kernel_restart_prepare(),
 * kernel_shutdown_prepare()), before any driver's shutdown; a kexec reboot
 * is a restart without a command. A restart command replaces a reason
 * given before.
 */
static int cr_reboot(struct notifier_block *nb, unsigned long code, void *cmd)
{
	const char *command = cmd;
	u32 how = code == SYS_HALT ? CRASHRING_SHUTDOWN_HALT :
		  code == SYS_POWER_OFF ? CRASHRING_SHUTDOWN_POWER_OFF :
		  CRASHRING_SHUTDOWN_RESTART;

	mutex_lock(&crashring.lock);
	if (command && command[0])
		cr_take_reason(command, strnlen(command, CRASHRING_SHUTDOWN_REASON_MAX));
	cr_keep_reason(how);
	mutex_unlock(&crashring.lock);
	return NOTIFY_DONE;
}

static struct notifier_block cr_reboot_nb = {
	.notifier_call = cr_reboot,
	.priority = INT_MAX,	/* before notifiers that may hang */
};

/**
 * crashring_mark_clean - the state block of a generation that ended cleanly
 * @mem: its slot
 *
 * Only where no reason can be given any more: syscore_shutdown() (user
 * space is gone) and the module's exit (sysfs and the notifier are).
 */
void crashring_mark_clean(void *mem)
{
	crashring_set_state(mem, CRASHRING_STATE_CLEAN,
			    cr_reason[0] ? CRASHRING_REASON_SHUTDOWN : CRASHRING_REASON_NONE,
			    cr_reason_ns, cr_reason_cpu, cr_reason);
}

int crashring_shutdown_init(void)
{
	return register_reboot_notifier(&cr_reboot_nb);
}

void crashring_shutdown_exit(void)
{
	unregister_reboot_notifier(&cr_reboot_nb);
}
