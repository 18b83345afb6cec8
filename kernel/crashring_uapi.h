/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * crashring.ko's interface to user space beyond sysfs: the ioctl on
 * /dev/crashring that gives the opener a user stream of its own in the
 * region being recorded (pstore-ring/FORMAT.md, section 15).
 *
 * One stream per open file. After the ioctl, mmap(NULL, bytes, PROT_READ |
 * PROT_WRITE, MAP_SHARED, fd, 0) maps exactly its pages, and the process
 * records into them with the format's writer rules. The stream is the
 * file's until the file is closed and unmapped; its pages stay in the
 * region, readable after a crash, until the pool gives them to another.
 */
#ifndef CRASHRING_UAPI_H
#define CRASHRING_UAPI_H

#include <linux/ioctl.h>
#include <linux/types.h>

struct crashring_user_stream {
	char name[32];		/* in: the stream's name, NUL-terminated */
	__u32 pages;		/* in: pages wanted, 0 for the pool's size; out: granted */
	__u32 page_size;	/* out: bytes per page */
	__u32 index;		/* out: the stream's index in the region */
	__u32 flags;		/* in: 0 */
	__u64 bytes;		/* out: the length to map, at offset 0 */
};

/*
 * Errors: EBADF (not opened for writing), EBUSY (this file has a stream),
 * EINVAL (flags, or a name that is empty or not terminated), EFBIG (more
 * pages than a pool stream has), EDQUOT (the user holds user_streams_per_uid
 * streams), ENOSPC (every pool stream is held), ENODEV (nothing is being
 * recorded, or the module has no pool), EFAULT (the argument could not be
 * read; or not written back, and then the stream is this file's all the
 * same, until it is closed).
 */
#define CRASHRING_IOC_USER_STREAM _IOWR(0xC5, 1, struct crashring_user_stream)

/*
 * A program's own categories (its "drm", "input", "frame"...), switched
 * where the kernel's debug messages are: the selection's user=NAME:CATS
 * words (/sys/kernel/crashring/debug, `crashring debug`). After its
 * stream's ioctl, the program names them with this ioctl, and maps the
 * stream's control page read-only: mmap(NULL, page, PROT_READ,
 * MAP_SHARED, fd, bytes), at the offset where the stream's pages end.
 * Before it formats an event of category N it tests bit N of the page's
 * enabled word: no system call, a disabled event costs a load and a test.
 */
#define CRASHRING_USER_CATEGORIES	64
#define CRASHRING_CATEGORY_NAME		32

struct crashring_user_categories {
	__u32 count;		/* categories named, at most 64 */
	__u32 flags;		/* 0 */
	__u64 defaults;		/* enabled while no user= word names the stream */
	/* NUL-terminated, 1 to 31 of [A-Za-z0-9_.-] each, all different */
	char names[CRASHRING_USER_CATEGORIES][CRASHRING_CATEGORY_NAME];
};

/*
 * The control page. The kernel writes enabled (one aligned 64-bit store)
 * whenever the selection or the categories change; the rest is the
 * categories as last named, for readers of the page.
 */
struct crashring_user_control {
	__u64 enabled;		/* bit N: category N is to be recorded */
	__u64 defaults;
	__u32 count;
	__u32 reserved;
	char names[CRASHRING_USER_CATEGORIES][CRASHRING_CATEGORY_NAME];
};

/*
 * Errors: ENOENT (this file has no stream), EINVAL (flags, count, or a
 * name that is empty, too long, repeated or has another character).
 */
#define CRASHRING_IOC_USER_CATEGORIES _IOW(0xC5, 2, struct crashring_user_categories)

#endif /* CRASHRING_UAPI_H */
