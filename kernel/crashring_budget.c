// SPDX-License-Identifier: GPL-2.0
/*
 * crashring.ko: what unprivileged writers may add to the kernel's streams
 * through /dev/crashring markers, in bytes, each user on its own.
 *
 * Markers land in the kernel's own streams, so a member of the crashring
 * group looping on write() overwrites the kernel's history at whatever
 * rate it is allowed. Counting writes let one user's 1 KiB markers evict a
 * CPU's history in seconds, and one shared budget let one user's loop
 * starve everyone else. Each user (the opener of the file) has a bucket of
 * user_marker_bytes_per_sec bytes, refilled continuously up to one
 * second's worth; a marker that does not fit fails with EAGAIN and
 * records nothing. At the default, a user's loop writes 4 KiB a second: a
 * CPU's 1.5 MiB of lane-0 history in a 16 MiB region lasts over six
 * minutes of it, and other users' budgets are untouched.
 *
 * Process context only (write()), never the record path or the panic path.
 */

#include <linux/cred.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/spinlock.h>
#include <linux/uidgid.h>
#include <linux/user_namespace.h>
#include "crashring_internal.h"

static unsigned int user_marker_bytes_per_sec = 4096;
module_param(user_marker_bytes_per_sec, uint, 0400);
MODULE_PARM_DESC(user_marker_bytes_per_sec,
		 "Marker bytes each unprivileged user may add per second (default 4096)");

/* Users tracked at once; a bucket idle for a second is full, and reusable. */
#define CR_BUDGET_USERS	64

/*
 * A bucket counts byte-nanoseconds (bytes times NSEC_PER_SEC), so that a
 * writer calling every few hundred nanoseconds is credited its fraction
 * of a byte each time instead of nothing: at most rate * NSEC_PER_SEC,
 * 4.1e12 at 4 KiB a second, far inside a u64.
 */
struct cr_bucket {
	kuid_t uid;
	bool used;
	u64 at_ns;	/* when credit was last brought up to date */
	u64 credit;	/* what the user may still add, in byte-nanoseconds */
};

static struct cr_bucket cr_buckets[CR_BUDGET_USERS];
static DEFINE_SPINLOCK(cr_budget_lock);

/* The bucket's credit at @now: refilled at @rate, at most one second's. */
static u64 cr_refill(struct cr_bucket *b, u64 now, u64 rate)
{
	u64 full = rate * NSEC_PER_SEC, elapsed = now - b->at_ns;

	b->credit = elapsed >= NSEC_PER_SEC ? full : min(full, b->credit + elapsed * rate);
	b->at_ns = now;
	return b->credit;
}

/**
 * crashring_charged_uid - whose quota and budget an opener's requests use
 * @cred: the opener's credentials
 * @uid: the id of theirs that counts (the effective uid for streams, the
 *	real uid for markers)
 *
 * Inside a user namespace a user made, that user: a member maps as many
 * ids as /etc/subuid grants into a namespace of their own (newuidmap),
 * and each id would otherwise hold streams and write markers on a quota
 * of its own, enough to take every pool stream and to evict the kernel's
 * history at many times the rate one user is allowed. Of nested ones,
 * the outermost such user. Namespaces root made (a service's
 * PrivateUsers=, a container) are no user's: their ids count as
 * themselves, as they did outside, rather than all as root.
 *
 * Return: the outermost owner other than root of the namespaces @cred is
 * in, else @uid.
 */
kuid_t crashring_charged_uid(const struct cred *cred, kuid_t uid)
{
	const struct user_namespace *ns;
	kuid_t charged = uid;

	for (ns = cred->user_ns; ns != &init_user_ns; ns = ns->parent)
		if (!uid_eq(ns->owner, GLOBAL_ROOT_UID))
			charged = ns->owner;
	return charged;
}

/**
 * crashring_budget_take - charge a marker to its user's budget
 * @uid: the user who opened the file written to
 * @bytes: what the marker takes in the stream
 *
 * Return: whether it fits; nothing is charged when it does not. When every
 * bucket is busy (more users writing within a second than are tracked),
 * the marker is refused.
 */
bool crashring_budget_take(kuid_t uid, size_t bytes)
{
	/* A marker as large as the format allows always fits a full bucket. */
	u64 rate = max_t(u64, user_marker_bytes_per_sec, CRASHRING_MAX_RECORD_SIZE);
	u64 now = ktime_get_mono_fast_ns();
	struct cr_bucket *b = NULL, *free = NULL;
	bool fits = false;
	int i;

	spin_lock(&cr_budget_lock);
	for (i = 0; i < CR_BUDGET_USERS && !b; i++) {
		struct cr_bucket *c = &cr_buckets[i];

		if (c->used && uid_eq(c->uid, uid))
			b = c;
		else if (!free && (!c->used || cr_refill(c, now, rate) == rate * NSEC_PER_SEC))
			free = c;
	}
	if (!b && free) {
		b = free;
		b->used = true;
		b->uid = uid;
		b->credit = rate * NSEC_PER_SEC;
		b->at_ns = now;
	}
	if (b && cr_refill(b, now, rate) >= bytes * NSEC_PER_SEC) {
		b->credit -= bytes * NSEC_PER_SEC;
		fits = true;
	}
	spin_unlock(&cr_budget_lock);
	return fits;
}
