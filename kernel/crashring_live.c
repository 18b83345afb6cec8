// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/crashring-current: the generation being recorded, for root, read
 * while it is written (crashring_snapshot.c says how). A file of the
 * region's size: `crashring extract /dev/crashring-current` reads it like
 * any copy of a region, and `crashring snapshot` bundles it.
 *
 * Each open file has its own snapshot state: the descriptors as they were
 * at open and the ring page read last, so that reads of any size, in
 * order, see each page once. Reading never takes a lock a writer takes
 * and never stops a writer; reads of one file are serialised by its own
 * mutex. While a file is open the module cannot be unloaded (the misc
 * device holds a reference), so the region stays mapped.
 */
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/fs.h>
#include <linux/capability.h>
#include <linux/uaccess.h>
#include "crashring_internal.h"
#include "crashring_snapshot.h"

/* Bytes copied out per step: the bounce buffer between the region and user space. */
#define CR_LIVE_CHUNK	(256 * 1024)

struct cr_live_file {
	struct mutex lock;	/* one read at a time: the snapshot's page is shared */
	u8 *chunk;
	struct crashring_snapshot *snap;	/* kvmalloc'ed with its arrays */
};

static int cr_live_open(struct inode *inode, struct file *file)
{
	struct cr_live_file *lf;
	const struct crashring_slot *slot;
	void *mem;
	u64 bytes;
	int cur, err;

	/* The device's mode says root; a capability check keeps it so. */
	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	mutex_lock(&crashring.lock);
	cur = crashring.cur;
	slot = cur >= 0 ? &crashring.slot[cur] : NULL;
	mutex_unlock(&crashring.lock);
	if (!slot)
		return -ENODATA;	/* a capture kernel records nothing */
	bytes = crashring_snapshot_bytes(slot->mem, slot->size);
	if (!bytes)
		return -EIO;
	lf = kzalloc(sizeof(*lf), GFP_KERNEL);
	if (!lf)
		return -ENOMEM;
	mem = kvmalloc(bytes, GFP_KERNEL);
	lf->chunk = kvmalloc(CR_LIVE_CHUNK, GFP_KERNEL);
	if (!mem || !lf->chunk) {
		err = -ENOMEM;
		goto fail;
	}
	lf->snap = crashring_snapshot_init(mem, slot->mem, slot->size);
	if (!lf->snap) {
		err = -EIO;
		goto fail;
	}
	mutex_init(&lf->lock);
	file->private_data = lf;
	return 0;

fail:
	kvfree(lf->chunk);
	kvfree(mem);
	kfree(lf);
	return err;
}

static ssize_t cr_live_read(struct file *file, char __user *buf, size_t count, loff_t *pos)
{
	struct cr_live_file *lf = file->private_data;
	ssize_t done = 0;

	if (*pos < 0)
		return -EINVAL;
	if (mutex_lock_interruptible(&lf->lock))
		return -ERESTARTSYS;
	while (done < count) {
		size_t want = min_t(size_t, count - done, CR_LIVE_CHUNK);
		int n = crashring_snapshot_read(lf->snap, *pos, lf->chunk, want);

		if (n < 0 && !done)
			done = n;
		if (n <= 0)
			break;
		if (copy_to_user(buf + done, lf->chunk, n)) {
			done = done ?: -EFAULT;
			break;
		}
		*pos += n;
		done += n;
		if (fatal_signal_pending(current))
			break;
		cond_resched();
	}
	mutex_unlock(&lf->lock);
	return done;
}

static loff_t cr_live_llseek(struct file *file, loff_t off, int whence)
{
	struct cr_live_file *lf = file->private_data;

	return fixed_size_llseek(file, off, whence, lf->snap->size);
}

static int cr_live_release(struct inode *inode, struct file *file)
{
	struct cr_live_file *lf = file->private_data;

	if (lf->snap->unsteady || lf->snap->replaced)
		pr_info("a live read showed %llu pages as resetting (rewritten at every try) and %llu of user streams given to a new holder as unused\n",
			lf->snap->unsteady, lf->snap->replaced);
	kvfree(lf->snap);
	kvfree(lf->chunk);
	kfree(lf);
	return 0;
}

static const struct file_operations cr_live_fops = {
	.owner = THIS_MODULE,
	.open = cr_live_open,
	.read = cr_live_read,
	.llseek = cr_live_llseek,
	.release = cr_live_release,
};

static struct miscdevice cr_live_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "crashring-current",
	.fops = &cr_live_fops,
	.mode = 0400,
};

int crashring_live_register(void)
{
	return misc_register(&cr_live_dev);
}

void crashring_live_unregister(void)
{
	misc_deregister(&cr_live_dev);
}
