/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * crashring-user: a program's own flight recorder in a crash-persistent
 * region (pstore-ring/FORMAT.md, section 15), for C programs.
 *
 * A recorder's streams are in the region the kernel records (the
 * crashring module's pool, for members of the crashring group), or in a
 * region file it maps (by default NAME.PID.crashring in
 * $CRASHRING_USER_DIR or /dev/shm). Each thread takes a stream of its own
 * and records into it with plain stores:
 * no lock, no system call but the vDSO's clock read, no allocation. What a
 * stream has committed stays readable when the process is killed at any
 * point; `crashring extract FILE` reads it, on the kernel's
 * CLOCK_MONOTONIC timeline.
 *
 *	struct crashring_user_config cfg = { .name = "weston" };
 *	struct crashring_recorder *rec = crashring_recorder_create(&cfg);
 *	struct crashring_stream *s = crashring_stream_get(rec);  // per thread
 *	crashring_log(s, 6, "drm", "page flip on CRTC %d", 41);
 *	crashring_stream_put(s);
 *	crashring_recorder_destroy(rec);
 *
 * Build with `pkg-config --cflags --libs crashring-user`.
 */
#ifndef CRASHRING_USER_H
#define CRASHRING_USER_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <linux/types.h>

/* Field kinds (CRASHRING_FIELD_*), event ids (CRASHRING_EVENT_*). */
#include "crashring_format.h"

#ifdef __cplusplus
extern "C" {
#endif

struct crashring_recorder;
struct crashring_stream;

/* One field of a program's event type, in payload order. */
struct crashring_field_def {
	const char *name;	/* 1 to 19 bytes */
	uint8_t kind;		/* CRASHRING_FIELD_* */
	uint16_t size;		/* the length of a CRASHRING_FIELD_CHARS field */
};

/* A program's own event type, id 32 to 255. */
struct crashring_event_def {
	uint8_t id;
	const char *name;	/* 1 to 31 bytes */
	uint16_t nfields;
	const struct crashring_field_def *fields;
};

/* Where the streams are (struct crashring_user_config.backing). */
#define CRASHRING_USER_AUTO 0	/* the kernel's pool if it gives one, else a file */
#define CRASHRING_USER_KERNEL 1	/* the kernel module's pool: survives a kernel panic */
#define CRASHRING_USER_FILE 2	/* a region file of the program's own */

/*
 * Zero members take the defaults: 4 streams of 4096-byte pages, 64 pages
 * each in a file, the pool's size in the kernel's region.
 */
struct crashring_user_config {
	const char *name;	/* each stream's name: NAME, or NAME.N of several */
	const char *path;	/* the region file; NULL: the default place */
	uint16_t streams;	/* threads that record at the same time */
	uint32_t pages_per_stream;
	uint32_t page_size;
	uint16_t nevents;	/* the program's own types: a file only */
	const struct crashring_event_def *events;
	uint32_t backing;	/* CRASHRING_USER_* */
	/*
	 * The program's own categories, bit N for categories[N]: at most 64,
	 * each 1 to 31 of [A-Za-z0-9_.-]. In the kernel's region, `crashring
	 * debug select user=NAME:CATEGORY,...` switches them while the
	 * program runs; crashring_enabled() says whether to record one.
	 */
	const char *const *categories;
	uint16_t ncategories;
	uint64_t categories_off;	/* off until selected; 0: every one on */
};

/* The longest log line kept whole; longer ones are cut. */
#define CRASHRING_LOG_TEXT_MAX 997

/*
 * Makes a recorder: takes a first stream from the kernel's pool, or
 * formats and maps a region file. NULL with errno set on failure: EINVAL
 * for a bad configuration, EEXIST if the file is already there (an earlier
 * recording is never replaced), the file's or the kernel's error otherwise
 * (crashring_uapi.h lists the kernel's).
 */
struct crashring_recorder *
crashring_recorder_create(const struct crashring_user_config *cfg);

/* Closes every page and marks the region cleanly ended. Put every stream
 * back first. */
void crashring_recorder_destroy(struct crashring_recorder *rec);

/*
 * The calling thread's stream: a free one, or a new one from the kernel's
 * pool; NULL with errno EBUSY when all `streams` are held, or the kernel's
 * error.
 */
struct crashring_stream *crashring_stream_get(const struct crashring_recorder *rec);

/*
 * The word whose bit N says whether category N is recorded now; it lives
 * as long as the recorder. Test it with crashring_enabled() before
 * formatting anything.
 */
const uint64_t *crashring_recorder_enabled(const struct crashring_recorder *rec);

/* Whether category N is to be recorded: one load and a bit test. */
static inline int crashring_enabled(const uint64_t *word, unsigned int category)
{
	return category < 64 && (__atomic_load_n(word, __ATOMIC_RELAXED) >> category & 1);
}

/* Gives the stream back; the next thread to get it continues its ring. */
void crashring_stream_put(struct crashring_stream *s);

/*
 * Records a `log` event: level 0 (emergency) to 7 (debug), a category of
 * up to 16 bytes, len bytes of text. 0, or -EMSGSIZE if it could not be
 * recorded (counted as dropped in the stream).
 */
int crashring_log_text(struct crashring_stream *s, int level, const char *category,
		       const char *text, size_t len);

/* Records len bytes already encoded as event type_id (FORMAT.md, "Records"). */
int crashring_write(struct crashring_stream *s, uint8_t type_id, const void *payload,
		    size_t len);

/* Formats a log line on the stack and records it. */
static inline int crashring_vlog(struct crashring_stream *s, int level, const char *category,
				 const char *fmt, va_list ap)
{
	char line[CRASHRING_LOG_TEXT_MAX + 1];
	int n = vsnprintf(line, sizeof(line), fmt, ap);

	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	return crashring_log_text(s, level, category, line, (size_t)n);
}

__attribute__((format(printf, 4, 5)))
static inline int crashring_log(struct crashring_stream *s, int level, const char *category,
				const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = crashring_vlog(s, level, category, fmt, ap);
	va_end(ap);
	return ret;
}

/* What crashring_request_report() answers. */
struct crashring_report {
	char bundle[256];	/* the bundle's name in the bundle directory */
	uint64_t events;	/* the events it holds */
	int copy_fd;		/* a copy of it in memory (a memfd, at 0), or -1 */
	char why[512];		/* on failure: why */
};

/*
 * Asks crashring's request service (crashring-request.socket, or the
 * socket $CRASHRING_REQUEST_SOCKET names, except in a set-user-ID,
 * set-group-ID or file-capability program, getauxval(AT_SECURE), whose
 * invoker sets that variable) for a bug report of the caller's own
 * session without a crash: its own streams and the kernel events
 * crashring.conf's [Request] policy grants, redacted, written by the
 * service into the bundle directory. Blocks while the service bundles (a
 * second or two). 0 with *out filled in; otherwise a negative errno with
 * out->why saying why: -EPERM refused by the policy, -EAGAIN
 * rate-limited or busy with another request of the caller's (try again
 * later; out->why says which), -EIO the service failed or broke the protocol (sent a
 * copy not asked for, say: out->copy_fd stays -1), -EINVAL a reason that
 * is not one line of at most 512 bytes, -ENOENT or -ECONNREFUSED no
 * service.
 */
int crashring_request_report(const char *reason, struct crashring_report *out);

/*
 * The same for the named streams of the caller's only (a name that is
 * not the caller's own is refused), with a copy of the bundle
 * (its bytes, in this process's memory: a memfd) in out->copy_fd if
 * want_copy and the policy allows. -EIO with out->bundle set: the report
 * was written (and counted against the rate limit), its copy did not
 * come whole (cut short, over the bytes announced, announced over
 * 4 GiB, or not all there within 10 s of the answer).
 */
int crashring_request_report_of(const char *reason, const char *const *streams,
				size_t nstreams, int want_copy, struct crashring_report *out);

#ifdef __cplusplus
}
#endif

#endif /* CRASHRING_USER_H */
