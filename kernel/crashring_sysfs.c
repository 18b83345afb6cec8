// SPDX-License-Identifier: GPL-2.0
/*
 * /sys/kernel/crashring: control and status.
 *
 *   enabled           rw  1 while recording
 *   sources           rw  printk marker crash sched irq debug
 *   filter            rw  level=N prefix=A,B (printk lines)
 *   debug             rw  the debug messages diverted into the recorder:
 *                     drm=KMS,ATOMIC module=M func=F file=F[:LINE]
 *                     device=D printk input; then, read, what is diverted
 *                     and the categories of the user streams the opener
 *                     may see
 *   region            ro  (0400) where the memory is and how it is used
 *   stats             ro  (0400) per CPU: records, bytes, pages overwritten,
 *                     drops; root's, since its counters advance with every
 *                     printk line and would let anyone time the kernel's
 *                     logging past dmesg_restrict
 *   status            ro  the last thing user space should know
 *   previous          ro  (0400, binary) the previous generation's region
 *   previous_summary  ro  the previous generation in one screen of text;
 *                     its crash message only to an opener with
 *                     CAP_SYS_ADMIN
 *   previous_ack      wo  (0200) "1": archived, release it (EROFS in a
 *                     capture kernel, which leaves the range alone)
 *   shutdown_reason   rw  (0600) one line: why the next restart, halt or
 *                     power-off happens (crashring_shutdown.c); empty
 *                     withdraws it
 *
 * `previous` is removed and created anew whenever the previous generation
 * changes: a reader that opened it before an ack gets -ENODEV instead of
 * the rest of another generation, and a new open sees the new size.
 * `debug` and `previous_summary` are binary attributes too, text in a page:
 * what they show depends on who opened them, and only a binary
 * attribute's callbacks are given the open file.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/kobject.h>
#include <linux/sysfs.h>
#include <linux/string.h>
#include <linux/kernel.h>
#include <linux/mm.h>
#include "crashring_compat.h"
#include "crashring_internal.h"

static struct kobject *cr_kobj;
/* Serialises re-publishing `previous`; never held by its readers. */
static DEFINE_MUTEX(cr_publish_lock);

static ssize_t enabled_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%d\n", READ_ONCE(crashring.enabled));
}

static ssize_t enabled_store(struct kobject *k, struct kobj_attribute *a, const char *buf,
			     size_t count)
{
	bool on;

	if (kstrtobool(buf, &on))
		return -EINVAL;
	mutex_lock(&crashring.lock);
	if (on && crashring.cur < 0) {
		mutex_unlock(&crashring.lock);
		return -EBUSY;
	}
	WRITE_ONCE(crashring.enabled, on);
	if (on) {
		crashring_clock_arm();
		crashring_writeback_arm();
	}
	mutex_unlock(&crashring.lock);
	return count;
}

static ssize_t sources_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	return crashring_show_sources(buf);
}

static ssize_t sources_store(struct kobject *k, struct kobj_attribute *a, const char *buf,
			     size_t count)
{
	unsigned long want;
	int err;

	if (crashring_parse_sources(buf, &want))
		return -EINVAL;
	mutex_lock(&crashring.lock);
	err = crashring_set_sources(want);
	mutex_unlock(&crashring.lock);
	return err ?: count;
}

static ssize_t filter_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	crashring_show_filter(buf, PAGE_SIZE);
	return strlen(buf);
}

static ssize_t filter_store(struct kobject *k, struct kobj_attribute *a, const char *buf,
			    size_t count)
{
	int err;

	mutex_lock(&crashring.lock);
	err = crashring_set_filter(buf);
	mutex_unlock(&crashring.lock);
	return err ?: count;
}

/*
 * Whether @f was opened by someone with CAP_SYS_ADMIN. What `debug` and
 * `previous_summary` show is decided by who opened the file, not by who
 * reads it: a descriptor passed to a set-user-ID root program that echoes
 * its input must not show that program's view (the rule of
 * Documentation/security/credentials.rst, "Open File Credentials").
 */
static bool cr_opened_by_admin(const struct file *f)
{
	const struct cred *reader = override_creds(f->f_cred);
	/* No audit record: reading the file is no attempt at privilege. */
	bool admin = ns_capable_noaudit(&init_user_ns, CAP_SYS_ADMIN);

	revert_creds(reader);
	return admin;
}

/*
 * Serves a page of text, rendered for @f's opener, from @off. Read in one
 * piece (the file's size is a page, as a text attribute's): a reader that
 * takes it in pieces gets a rendering for each.
 */
static ssize_t cr_read_rendered(const struct file *f, char *buf, loff_t off, size_t count,
				int (*render)(char *page, kuid_t opener, bool admin))
{
	char *page = (char *)__get_free_page(GFP_KERNEL);
	ssize_t ret;
	int n;

	if (!page)
		return -ENOMEM;
	n = render(page, f->f_cred->euid, cr_opened_by_admin(f));
	ret = n < 0 ? n : memory_read_from_buffer(buf, count, &off, page, n);
	free_page((unsigned long)page);
	return ret;
}

static int cr_render_debug(char *page, kuid_t opener, bool admin)
{
	int n;

	mutex_lock(&crashring.lock);
	n = crashring_show_debug(page, opener, admin);
	mutex_unlock(&crashring.lock);
	return n;
}

static ssize_t debug_read(struct file *f, struct kobject *k,
			  CR_BIN_ATTR_CONST struct bin_attribute *attr,
			  char *buf, loff_t off, size_t count)
{
	return cr_read_rendered(f, buf, off, count, cr_render_debug);
}

/*
 * Each write is a whole selection, as a text attribute's store. Unlike
 * one, the file is a page long: sysfs cuts a write to what is left of the
 * page after the file offset, and refuses one past it (EFBIG), so an
 * open file takes a page of selections in all; open it again for more.
 * kernfs ends what it was given with a NUL, after the bytes sysfs may
 * have cut off: a write that fills the rest of the page may have been
 * cut, and is refused whole.
 */
static ssize_t debug_write(struct file *f, struct kobject *k,
			   CR_BIN_ATTR_CONST struct bin_attribute *attr,
			   char *buf, loff_t off, size_t count)
{
	int err;

	if (count >= PAGE_SIZE - off)
		return -E2BIG;
	mutex_lock(&crashring.lock);
	err = crashring_set_debug(buf);
	mutex_unlock(&crashring.lock);
	return err ?: count;
}

static ssize_t region_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	int cur = READ_ONCE(crashring.cur);
	int n;

	n = sysfs_emit(buf, "source=%s phys=%pa size=%llu slots=%d slot_size=%llu cpus=%u lanes=%u user_streams=%u boot_id=%16phN",
		       crashring.source, &crashring.phys, crashring.size, CRASHRING_SLOTS,
		       crashring.slot[0].size, nr_cpu_ids, crashring.nlanes, crashring.nuser,
		       crashring.boot_id);
	if (cur >= 0)
		n += sysfs_emit_at(buf, n, " recording_slot=%d recording_phys=%pa generation=%llu",
				   cur, &crashring.slot[cur].phys, crashring.slot[cur].generation);
	n += crashring_writeback_emit(buf, n);
	return n + sysfs_emit_at(buf, n, "\n");
}

/* Longest "cpuN records=... drops=...\n" line, with every number at 20 digits. */
#define CR_STATS_LINE	160

/*
 * A binary attribute, so that a machine with more CPUs than fit in one
 * sysfs page gets every line: the text is built for each read, outside the
 * write path, and served from the offset asked for.
 */
static ssize_t stats_read(struct file *f, struct kobject *k,
			  CR_BIN_ATTR_CONST struct bin_attribute *attr,
			  char *buf, loff_t off, size_t count)
{
	size_t cap = (size_t)crashring.nstreams * CR_STATS_LINE;
	unsigned int i;
	size_t n = 0;
	ssize_t ret;
	char *text;

	text = kvmalloc(cap, GFP_KERNEL);
	if (!text)
		return -ENOMEM;
	mutex_lock(&crashring.lock);
	for (i = 0; i < crashring.nstreams && crashring.cur >= 0; i++) {
		struct crashring_stream *s = &crashring.streams[i];
		u64 seq = READ_ONCE(s->seq);

		n += scnprintf(text + n, cap - n, "cpu%u", i % nr_cpu_ids);
		if (i >= nr_cpu_ids)
			n += scnprintf(text + n, cap - n, ".lane%u", i / nr_cpu_ids);
		n += scnprintf(text + n, cap - n,
			       " records=%llu bytes=%llu pages_overwritten=%llu drops=%llu\n",
			       READ_ONCE(s->next_index), READ_ONCE(s->bytes_total),
			       seq > s->page_count ? seq - s->page_count : 0,
			       READ_ONCE(s->drops_total) + (u64)cr_local_read(&s->pending_drops));
	}
	mutex_unlock(&crashring.lock);
	ret = memory_read_from_buffer(buf, count, &off, text, n);
	kvfree(text);
	return ret;
}

static ssize_t status_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%s\n", crashring.status[0] ? crashring.status : "ok");
}

static const char *cr_state_name(u32 state)
{
	switch (state) {
	case CRASHRING_STATE_RUNNING:
		return "running (no clean shutdown recorded)";
	case CRASHRING_STATE_CRASHED:
		return "crashed";
	case CRASHRING_STATE_CLEAN:
		return "clean-shutdown";
	default:
		return "unknown";
	}
}

/* The previous generation in one screen; its crash message is root's. */
static int cr_render_summary(char *buf, kuid_t opener, bool admin)
{
	struct crashring_region_header h;
	struct crashring_state_block st;
	const struct crashring_slot *slot;
	int prev, n;

	mutex_lock(&crashring.lock);
	prev = crashring.prev;
	if (prev < 0) {
		mutex_unlock(&crashring.lock);
		return sysfs_emit(buf, "none\n");
	}
	slot = &crashring.slot[prev];
	if (slot->state == CR_SLOT_DAMAGED) {
		n = sysfs_emit(buf, "damaged header slot %d generation %llu size %llu: read it with crashring extract --trust-header\n",
			       prev, slot->generation, slot->size);
		mutex_unlock(&crashring.lock);
		return n;
	}
	if (crashring_read_slot(slot, 0, &h, sizeof(h)) ||
	    crashring_read_slot(slot, CRASHRING_STATE_OFFSET, &st, sizeof(st))) {
		mutex_unlock(&crashring.lock);
		return -EIO;
	}
	/*
	 * Readable by all: where the region lies is region's (0400) to say,
	 * and the crash message, the previous generation's, is root's
	 * (@admin, the opener's).
	 */
	n = sysfs_emit(buf, "generation %llu slot %d size %llu\n", h.generation, prev,
		       h.region_size);
	n += sysfs_emit_at(buf, n, "kernel %.*s host %.*s cpus %u page_size %u\n",
			   (int)sizeof(h.kernel_release), h.kernel_release,
			   (int)sizeof(h.hostname), h.hostname, h.cpu_count, h.page_size);
	if (!crashring_state_valid(&st)) {
		n += sysfs_emit_at(buf, n, "state unreadable (CRC mismatch)\n");
	} else {
		n += sysfs_emit_at(buf, n, "state %s reason %u at %llu ns on cpu %u",
				   cr_state_name(st.state), st.reason, st.crash_ns, st.crash_cpu);
		if (admin)
			n += sysfs_emit_at(buf, n, ": %.*s", (int)sizeof(st.message),
					   st.message);
		n += sysfs_emit_at(buf, n, "\n");
	}
	mutex_unlock(&crashring.lock);
	return n;
}

static ssize_t previous_summary_read(struct file *f, struct kobject *k,
				     CR_BIN_ATTR_CONST struct bin_attribute *attr,
				     char *buf, loff_t off, size_t count)
{
	return cr_read_rendered(f, buf, off, count, cr_render_summary);
}

static ssize_t shutdown_reason_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	return crashring_show_shutdown_reason(buf);
}

static ssize_t shutdown_reason_store(struct kobject *k, struct kobj_attribute *a,
				     const char *buf, size_t count)
{
	return crashring_set_shutdown_reason(buf, count) ?: count;
}

static ssize_t previous_read(struct file *f, struct kobject *k,
			     CR_BIN_ATTR_CONST struct bin_attribute *attr,
			     char *buf, loff_t off, size_t count);

static struct bin_attribute cr_attr_previous = {
	.attr = { .name = "previous", .mode = 0400 },
	.read = previous_read,
};

/* (Re)creates `previous` for the current previous generation, sized to it. */
static int cr_publish_previous(void)
{
	mutex_lock(&crashring.lock);
	cr_attr_previous.size = crashring.prev >= 0 ?
		crashring_slot_bytes(&crashring.slot[crashring.prev]) : 0;
	mutex_unlock(&crashring.lock);
	return sysfs_create_bin_file(cr_kobj, &cr_attr_previous);
}

/*
 * "generation=N" releases the previous generation only while it is N
 * (-ESTALE otherwise): a reader acknowledges what it archived, never a
 * generation that took its place meanwhile (two recoveries at once, say).
 * "1" releases whatever is previous.
 */
static ssize_t previous_ack_store(struct kobject *k, struct kobj_attribute *a, const char *buf,
				  size_t count)
{
	const char *named = str_has_prefix(buf, "generation=") ? buf + strlen("generation=") : NULL;
	u64 want = 0;
	bool ack;
	int err;

	if (named ? kstrtou64(named, 10, &want) : kstrtobool(buf, &ack) || !ack)
		return -EINVAL;
	/* A capture kernel leaves the crash for the next boot to archive. */
	if (crashring.read_only)
		return -EROFS;
	mutex_lock(&cr_publish_lock);
	/* Only an ack changes the previous generation, under cr_publish_lock. */
	mutex_lock(&crashring.lock);
	err = crashring.prev < 0 ? -ENOENT : 0;
	if (!err && named && crashring.slot[crashring.prev].generation != want)
		err = -ESTALE;
	mutex_unlock(&crashring.lock);
	if (err) {
		mutex_unlock(&cr_publish_lock);
		return err;
	}
	/*
	 * Removing waits for readers inside previous_read(), which take
	 * crashring.lock: it must not be held here.
	 */
	sysfs_remove_bin_file(cr_kobj, &cr_attr_previous);
	mutex_lock(&crashring.lock);
	crashring_release_previous();
	mutex_unlock(&crashring.lock);
	if (cr_publish_previous())
		pr_err("cannot re-create /sys/kernel/crashring/previous\n");
	mutex_unlock(&cr_publish_lock);
	return count;
}

static ssize_t previous_read(struct file *f, struct kobject *k,
			     CR_BIN_ATTR_CONST struct bin_attribute *attr,
			     char *buf, loff_t off, size_t count)
{
	ssize_t n;
	u64 size;
	int prev;

	mutex_lock(&crashring.lock);
	prev = crashring.prev;
	if (prev < 0) {
		mutex_unlock(&crashring.lock);
		return -ENOENT;
	}
	size = crashring_slot_bytes(&crashring.slot[prev]);
	n = off < 0 || off >= size ? 0 : min_t(u64, count, size - off);
	if (n && crashring_read_slot(&crashring.slot[prev], off, buf, n))
		n = -EIO;
	mutex_unlock(&crashring.lock);
	return n;
}

/* Static once the module is loaded: crashring_keep_reset_evidence(). */
static ssize_t reset_evidence_read(struct file *f, struct kobject *k,
				   CR_BIN_ATTR_CONST struct bin_attribute *attr,
				   char *buf, loff_t off, size_t count)
{
	const char *text;
	size_t len = crashring_reset_evidence(&text);

	return memory_read_from_buffer(buf, count, &off, text, len);
}

static struct kobj_attribute cr_attr_enabled = __ATTR_RW(enabled);
static struct kobj_attribute cr_attr_sources = __ATTR_RW(sources);
static struct kobj_attribute cr_attr_filter = __ATTR_RW(filter);
static struct kobj_attribute cr_attr_region = __ATTR_RO_MODE(region, 0400);
static struct kobj_attribute cr_attr_status = __ATTR_RO(status);
static struct kobj_attribute cr_attr_previous_ack = __ATTR_WO(previous_ack);
static struct kobj_attribute cr_attr_shutdown_reason = __ATTR_RW_MODE(shutdown_reason, 0600);

static struct attribute *cr_attrs[] = {
	&cr_attr_enabled.attr,
	&cr_attr_sources.attr,
	&cr_attr_filter.attr,
	&cr_attr_region.attr,
	&cr_attr_status.attr,
	&cr_attr_previous_ack.attr,
	&cr_attr_shutdown_reason.attr,
	NULL,
};

static struct bin_attribute cr_attr_stats = {
	.attr = { .name = "stats", .mode = 0400 },
	.read = stats_read,
};

/* The kernel's log is root's: dmesg_restrict's rule. */
static struct bin_attribute cr_attr_reset_evidence = {
	.attr = { .name = "reset_evidence", .mode = 0400 },
	.read = reset_evidence_read,
};

/*
 * Binary attributes, whose callbacks get the open file: what they show
 * depends on who opened it (cr_opened_by_admin()). A page, as text
 * attributes' size is.
 */
static struct bin_attribute cr_attr_debug = {
	.attr = { .name = "debug", .mode = 0644 },
	.size = PAGE_SIZE,
	.read = debug_read,
	.write = debug_write,
};

static struct bin_attribute cr_attr_previous_summary = {
	.attr = { .name = "previous_summary", .mode = 0444 },
	.size = PAGE_SIZE,
	.read = previous_summary_read,
};

static CR_BIN_ATTR_CONST struct bin_attribute *cr_bin_attrs[] = {
	&cr_attr_stats,
	&cr_attr_debug,
	&cr_attr_previous_summary,
	&cr_attr_reset_evidence,
	NULL,
};

static const struct attribute_group cr_group = {
	.attrs = cr_attrs,
	.bin_attrs = cr_bin_attrs,
};

int crashring_sysfs_init(void)
{
	int err;

	cr_kobj = kobject_create_and_add("crashring", kernel_kobj);
	if (!cr_kobj)
		return -ENOMEM;
	err = sysfs_create_group(cr_kobj, &cr_group);
	if (err)
		goto err_put;
	err = cr_publish_previous();
	if (err)
		goto err_group;
	return 0;

err_group:
	sysfs_remove_group(cr_kobj, &cr_group);
err_put:
	kobject_put(cr_kobj);
	return err;
}

void crashring_sysfs_exit(void)
{
	sysfs_remove_bin_file(cr_kobj, &cr_attr_previous);
	sysfs_remove_group(cr_kobj, &cr_group);
	kobject_put(cr_kobj);
}
