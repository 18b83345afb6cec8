// SPDX-License-Identifier: GPL-2.0
/*
 * crashring.ko: user streams, a program's own flight recorder in the
 * region (crashring_uapi.h, pstore-ring/FORMAT.md section 15).
 *
 * Every generation has a pool of user_streams streams of
 * user_stream_pages pages after the kernel's. A member of the crashring
 * group opens /dev/crashring, asks for a stream by ioctl, and maps exactly
 * its pages: it records with plain stores, no system call per event. Its
 * stores can reach nothing but those pages, so no user can overwrite the
 * kernel's streams or another process's. A user holds at most
 * user_streams_per_uid streams at once.
 *
 * The kernel never writes a user stream while it is held: it formats it
 * when it hands it out (descriptor with name, pid and uid; page headers
 * cleared, page 0 opened) and leaves it alone afterwards, on the panic
 * path too (the holder's open page is salvaged by readers). Streams are
 * held within one generation: a new one starts only while nothing is
 * recorded, and nothing is handed out then.
 *
 * Each pool stream also has a control page, in kernel memory: the
 * program's own categories as it named them, and which of them the
 * debug selection's user= words enable. Its holder maps it read-only and
 * tests a bit before it formats an event; the kernel rewrites the bits
 * when the selection changes, so a program's categories are switched at
 * run time, from where the kernel's debug messages are.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/cc_platform.h>
#include <linux/cred.h>
#include <linux/ctype.h>
#include <linux/fs.h>
#include <linux/libnvdimm.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include "crashring_compat.h"
#include "crashring_internal.h"
#include "crashring_uapi.h"

static unsigned int user_streams;
module_param(user_streams, uint, 0444);
MODULE_PARM_DESC(user_streams, "User streams in each generation's pool (default 0: no pool)");

static unsigned int user_stream_pages = 16;
module_param(user_stream_pages, uint, 0444);
MODULE_PARM_DESC(user_stream_pages, "Pages of each user stream (default 16)");

static unsigned int user_streams_per_uid = 2;
module_param(user_streams_per_uid, uint, 0444);
MODULE_PARM_DESC(user_streams_per_uid, "User streams one user may hold at once (default 2)");

/* Who holds a pool stream; NULL: free. Index j is stream nstreams + j. */
struct cr_user_slot {
	struct file *holder;
	kuid_t uid;
	kuid_t charged;				/* whose quota it counts against */
	char name[32];				/* the holder's name for it */
	struct crashring_user_control *ctl;	/* its control page */
};

static struct cr_user_slot *cr_user_slots;

/**
 * crashring_user_pool - the pool's size for the next generation
 * @page_size: the region's page size
 * @taken: the generation's descriptors besides the pool's (the CPUs'
 *         streams, the callsite area's)
 * @pages: set to the pages of each pool stream
 *
 * Return: the number of pool streams, within what the descriptors leave;
 * 0 when the page size cannot be mapped page by page (below the
 * machine's page size).
 */
u32 crashring_user_pool(u32 page_size, u32 taken, u32 *pages)
{
	*pages = max(user_stream_pages, 2U);
	if (page_size < PAGE_SIZE || page_size % PAGE_SIZE)
		return 0;
	/*
	 * With host memory encryption (AMD SME) the kernel maps the reserved
	 * range decrypted while a user mapping of it would be encrypted: the
	 * two would read different bytes. No pool there.
	 */
	if (user_streams && cc_platform_has(CC_ATTR_HOST_MEM_ENCRYPT)) {
		pr_warn("no user streams: host memory encryption is on\n");
		return 0;
	}
	if (taken >= CRASHRING_MAX_STREAMS)
		return 0;
	return min_t(u32, user_streams, CRASHRING_MAX_STREAMS - taken);
}

static_assert(sizeof(struct crashring_user_control) <= PAGE_SIZE);

void crashring_user_exit(void)
{
	u32 j;

	for (j = 0; cr_user_slots && j < user_streams; j++)
		free_page((unsigned long)cr_user_slots[j].ctl);
	kfree(cr_user_slots);
	cr_user_slots = NULL;
}

int crashring_user_init(void)
{
	u32 j;

	cr_user_slots = kcalloc(max(user_streams, 1U), sizeof(*cr_user_slots), GFP_KERNEL);
	if (!cr_user_slots)
		return -ENOMEM;
	for (j = 0; j < user_streams; j++) {
		cr_user_slots[j].ctl = (void *)get_zeroed_page(GFP_KERNEL);
		if (!cr_user_slots[j].ctl) {
			crashring_user_exit();
			return -ENOMEM;
		}
	}
	return 0;
}

/* The pool streams charged to @charged (crashring_charged_uid()). */
static u32 cr_held_by(kuid_t charged)
{
	u32 j, n = 0;

	for (j = 0; j < crashring.nuser; j++)
		n += cr_user_slots[j].holder && uid_eq(cr_user_slots[j].charged, charged);
	return n;
}

/* The pool stream @file holds, or NULL. Called with crashring.lock held. */
static struct cr_user_slot *cr_slot_of(struct file *file)
{
	u32 j;

	for (j = 0; j < crashring.nuser; j++)
		if (cr_user_slots[j].holder == file)
			return &cr_user_slots[j];
	return NULL;
}

static long cr_grant(struct file *file, struct crashring_user_stream *req)
{
	/*
	 * The opener's effective uid, which owns what it creates and which
	 * crashring-request.socket's peer credentials give: a set-user-ID
	 * program asks for its own stream, and whoever ran it cannot; its
	 * streams count against its owner's user_streams_per_uid (every id
	 * of a user namespace against the namespace's owner's). The
	 * file's credentials, not the caller's, since whoever holds the file
	 * may map the stream whoever asked for it. (The marker budget, a
	 * rate, is the opener's real uid's: crashring_marker.c.)
	 */
	kuid_t uid = file->f_cred->euid;
	kuid_t charged = crashring_charged_uid(file->f_cred, uid);
	struct crashring_stream *s;
	u32 j;

	/* The stream is mapped shared and read back: both modes, as mmap wants. */
	if ((file->f_mode & (FMODE_READ | FMODE_WRITE)) != (FMODE_READ | FMODE_WRITE))
		return -EBADF;
	if (req->flags || !req->name[0] || strnlen(req->name, sizeof(req->name)) == sizeof(req->name))
		return -EINVAL;
	if (cr_slot_of(file))
		return -EBUSY;
	if (crashring.cur < 0 || !crashring.nuser || !READ_ONCE(crashring.enabled))
		return -ENODEV;
	s = &crashring.streams[crashring.nstreams];
	if (req->pages > s->page_count)
		return -EFBIG;
	if (cr_held_by(charged) >= user_streams_per_uid)
		return -EDQUOT;
	for (j = 0; j < crashring.nuser && cr_user_slots[j].holder; j++)
		;
	if (j == crashring.nuser)
		return -ENOSPC;
	s += j;
	/*
	 * Zeroes every page, data included: the new holder must not read an
	 * earlier holder's records, an older generation's kernel text, or
	 * what the RAM held before it was reserved. Written back, so that a
	 * reset cannot bring the stale bytes back from memory either.
	 */
	crashring_reset_user_stream(crashring.slot[crashring.cur].mem, s, req->name,
				    task_tgid_nr(current), from_kuid_munged(&init_user_ns, uid),
				    ktime_get_mono_fast_ns());
	arch_wb_cache_pmem(s->pages, (size_t)s->page_count * s->page_size);
	pmem_wmb();
	cr_user_slots[j].holder = file;
	cr_user_slots[j].uid = uid;
	cr_user_slots[j].charged = charged;
	strscpy(cr_user_slots[j].name, req->name, sizeof(cr_user_slots[j].name));
	/* No categories: nothing of an earlier holder's is left to read. */
	memset(cr_user_slots[j].ctl, 0, PAGE_SIZE);
	req->pages = s->page_count;
	req->page_size = s->page_size;
	req->index = s->index;
	req->bytes = (u64)s->page_count * s->page_size;
	return 0;
}

/* A category's name: 1 to 31 of [A-Za-z0-9_.-], NUL-terminated. */
static bool cr_category_name_ok(const char *name)
{
	size_t n = strnlen(name, CRASHRING_CATEGORY_NAME);
	size_t i;

	if (!n || n == CRASHRING_CATEGORY_NAME)
		return false;
	for (i = 0; i < n; i++)
		if (!isalnum(name[i]) && !strchr("_.-", name[i]))
			return false;
	return true;
}

static long cr_categories(struct file *file, const struct crashring_user_categories *c)
{
	struct cr_user_slot *u;
	u32 i, k;

	if (c->flags || c->count > CRASHRING_USER_CATEGORIES)
		return -EINVAL;
	for (i = 0; i < c->count; i++) {
		if (!cr_category_name_ok(c->names[i]))
			return -EINVAL;
		for (k = 0; k < i; k++)
			if (!strcmp(c->names[i], c->names[k]))
				return -EINVAL;
	}
	u = cr_slot_of(file);
	if (!u)
		return -ENOENT;
	/* The reader tests enabled alone: it never sees a bit before its name. */
	WRITE_ONCE(u->ctl->enabled, 0);
	memcpy(u->ctl->names, c->names, sizeof(c->names));
	u->ctl->count = c->count;
	u->ctl->defaults = c->defaults;
	WRITE_ONCE(u->ctl->enabled, crashring_debug_user_mask(u->name, u->ctl));
	return 0;
}

/**
 * crashring_user_selection_changed - set every held stream's enabled bits
 *
 * For a new debug selection. With crashring.lock held.
 */
void crashring_user_selection_changed(void)
{
	u32 j;

	for (j = 0; j < crashring.nuser; j++)
		if (cr_user_slots[j].holder)
			WRITE_ONCE(cr_user_slots[j].ctl->enabled,
				   crashring_debug_user_mask(cr_user_slots[j].name,
							     cr_user_slots[j].ctl));
}

/**
 * crashring_user_show - the held streams' categories, for sysfs "debug"
 * @buf: a page
 * @at: bytes already in it
 * @opener: the euid that opened the file
 * @admin: whether it was opened with CAP_SYS_ADMIN
 *
 * One line per stream that named categories: "user NAME: CAT+ CAT-",
 * + for enabled, NAME's spaces and unprintable bytes escaped. The file
 * is readable by all, and a stream's name is its holder's: an opener
 * without CAP_SYS_ADMIN sees only the streams its own euid holds. With
 * crashring.lock held.
 *
 * Return: the bytes in @buf.
 */
int crashring_user_show(char *buf, int at, kuid_t opener, bool admin)
{
	const struct crashring_user_control *ctl;
	u32 j, c;

	for (j = 0; j < crashring.nuser; j++) {
		ctl = cr_user_slots[j].ctl;
		if (!cr_user_slots[j].holder || !ctl->count)
			continue;
		if (!admin && !uid_eq(cr_user_slots[j].uid, opener))
			continue;
		/* A holder names its stream: no newline of its own reaches root. */
		at += sysfs_emit_at(buf, at, "user %*pEsp:",
				    (int)strnlen(cr_user_slots[j].name, sizeof(cr_user_slots[j].name)),
				    cr_user_slots[j].name);
		for (c = 0; c < ctl->count; c++)
			at += sysfs_emit_at(buf, at, " %s%c", ctl->names[c],
					    ctl->enabled & BIT_ULL(c) ? '+' : '-');
		at += sysfs_emit_at(buf, at, "\n");
	}
	return at;
}

long crashring_user_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct crashring_user_categories *cats;
	struct crashring_user_stream req;
	long err;

	if (cmd == CRASHRING_IOC_USER_CATEGORIES) {
		/* Two pages' worth of names would overflow the stack. */
		cats = memdup_user((void __user *)arg, sizeof(*cats));
		if (IS_ERR(cats))
			return PTR_ERR(cats);
		mutex_lock(&crashring.lock);
		err = cr_categories(file, cats);
		mutex_unlock(&crashring.lock);
		kfree(cats);
		return err;
	}
	if (cmd != CRASHRING_IOC_USER_STREAM)
		return -ENOTTY;
	if (copy_from_user(&req, (void __user *)arg, sizeof(req)))
		return -EFAULT;
	mutex_lock(&crashring.lock);
	err = cr_grant(file, &req);
	mutex_unlock(&crashring.lock);
	/*
	 * Not under the lock: the copy may fault, and a fault may wait on
	 * mmap_lock (held by an mmap() of this device waiting for
	 * crashring.lock) or on a file system its user never answers. A
	 * grant the caller never learns of stays its file's until close:
	 * once unlocked, another of its threads may have mapped it.
	 */
	if (!err && copy_to_user((void __user *)arg, &req, sizeof(req)))
		err = -EFAULT;
	return err;
}

/**
 * crashring_user_write_back - write back every held stream, whole
 *
 * For the periodic write-back: the kernel does not see what a holder
 * wrote, so all of each held stream's pages go. With crashring.lock held.
 *
 * Return: the pages written back.
 */
u32 crashring_user_write_back(void)
{
	const struct crashring_stream *s;
	u32 j, pages = 0;

	for (j = 0; j < crashring.nuser; j++) {
		if (!cr_user_slots[j].holder)
			continue;
		s = &crashring.streams[crashring.nstreams + j];
		arch_wb_cache_pmem(s->pages, (size_t)s->page_count * s->page_size);
		pages += s->page_count;
	}
	return pages;
}

/* Maps @u's control page: one page, read-only, at the stream's end. */
static int cr_map_control(struct cr_user_slot *u, struct vm_area_struct *vma)
{
	if (vma->vm_end - vma->vm_start != PAGE_SIZE)
		return -EINVAL;
	if (!(vma->vm_flags & VM_SHARED) || (vma->vm_flags & (VM_WRITE | VM_EXEC)))
		return -EPERM;
	cr_vm_flags_change(vma, VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP,
			   VM_MAYWRITE | VM_MAYEXEC);
	return remap_pfn_range(vma, vma->vm_start, page_to_pfn(virt_to_page(u->ctl)), PAGE_SIZE,
			       vma->vm_page_prot);
}

/*
 * Maps exactly the stream's pages, shared, never executable, not
 * inherited by a child, never grown by mremap(); or, at the offset where
 * they end, its control page.
 */
int crashring_user_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct crashring_slot *slot;
	struct crashring_stream *s;
	struct cr_user_slot *u;
	unsigned long len = vma->vm_end - vma->vm_start;
	phys_addr_t phys;
	int err = -EINVAL;

	mutex_lock(&crashring.lock);
	u = cr_slot_of(file);
	if (!u || crashring.cur < 0)
		goto out;
	s = &crashring.streams[crashring.nstreams + (u - cr_user_slots)];
	slot = &crashring.slot[crashring.cur];
	if ((u64)vma->vm_pgoff << PAGE_SHIFT == (u64)s->page_count * s->page_size) {
		err = cr_map_control(u, vma);
		goto out;
	}
	if (vma->vm_pgoff || len != (u64)s->page_count * s->page_size)
		goto out;
	err = -EPERM;
	if (!(vma->vm_flags & VM_SHARED) || (vma->vm_flags & VM_EXEC))
		goto out;
	cr_vm_flags_change(vma, VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP, VM_MAYEXEC);
	phys = slot->phys + (s->pages - slot->mem);
	/*
	 * remap_pfn_range() maps whole pages: a stream that does not start on
	 * one (page data is only 4 KiB-aligned, a 16 or 64 KiB page kernel)
	 * would map the bytes before it, another stream's, to its holder.
	 */
	err = -EINVAL;
	if (!PAGE_ALIGNED(phys))
		goto out;
	err = remap_pfn_range(vma, vma->vm_start, PHYS_PFN(phys), len, vma->vm_page_prot);
out:
	mutex_unlock(&crashring.lock);
	return err;
}

/*
 * The last close of a file comes after its last mapping is gone, so the
 * stream is free only once nothing can write it.
 */
void crashring_user_release(struct file *file)
{
	struct cr_user_slot *u;

	mutex_lock(&crashring.lock);
	u = cr_slot_of(file);
	if (u)
		u->holder = NULL;
	mutex_unlock(&crashring.lock);
}
