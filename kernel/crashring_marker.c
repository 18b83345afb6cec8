// SPDX-License-Identifier: GPL-2.0
/*
 * The marker source: lines user space writes to /dev/crashring (root and
 * the crashring group, within a byte budget per user) and other modules
 * record with crashring_log(); and the device itself, through which the
 * group also takes user streams (crashring_user.c).
 */
#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/miscdevice.h>
#include <linux/capability.h>
#include <linux/fs.h>
#include <linux/uaccess.h>
#include <linux/slab.h>
#include <linux/sched.h>
#include <linux/string.h>
#include "crashring.h"
#include "crashring_emit.h"

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
	 * budget (crashring_budget.c), and every id of a user namespace is
	 * its owner's. Root (CAP_SYS_ADMIN) is not limited.
	 */
	if (!file_ns_capable(file, &init_user_ns, CAP_SYS_ADMIN) &&
	    !crashring_budget_take(crashring_charged_uid(file->f_cred, file->f_cred->uid),
				   sizeof(rec) + n))
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

const struct crashring_source crashring_source_marker = {
	.name = "marker",
};
