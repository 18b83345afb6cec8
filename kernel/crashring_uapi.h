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
 * recorded, or the module has no pool).
 */
#define CRASHRING_IOC_USER_STREAM _IOWR(0xC5, 1, struct crashring_user_stream)

#endif /* CRASHRING_UAPI_H */
