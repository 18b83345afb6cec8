// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * wlroots' log into a crashring flight recorder.
 *
 * A compositor calls crashring_wlr_log_init() where it would call
 * wlr_log_init(): every line wlroots (and the compositor, through
 * wlr_log()) logs at or above `verbosity` is recorded as a `log` event of
 * category "wlroots", on the kernel's CLOCK_MONOTONIC timeline, and still
 * printed to standard error. After a crash, `crashring extract` shows the
 * last lines beside the kernel's DRM messages.
 *
 * Each thread that logs takes a stream of its own the first time, so
 * threads never share a writer; a thread that ends calls
 * crashring_wlr_log_thread_exit() to give its stream back.
 *
 *	cc compositor.c wlr_log.c $(pkg-config --cflags --libs wlroots crashring-user)
 */
#include <wlr/util/log.h>
#include "crashring_user.h"

static struct crashring_recorder *recorder;
static __thread struct crashring_stream *stream;

/* wlroots' importances as syslog levels. */
static int syslog_level(enum wlr_log_importance importance)
{
	switch (importance) {
	case WLR_ERROR:
		return 3;
	case WLR_INFO:
		return 6;
	case WLR_DEBUG:
		return 7;
	default:
		return 5;
	}
}

/* A wlr_log_func_t. */
static void record(enum wlr_log_importance importance, const char *fmt, va_list args)
{
	va_list copy;

	/* wlroots leaves the filtering to the callback. */
	if (importance > wlr_log_get_verbosity())
		return;
	if (!stream)
		stream = crashring_stream_get(recorder);
	if (stream) {
		va_copy(copy, args);
		crashring_vlog(stream, syslog_level(importance), "wlroots", fmt, copy);
		va_end(copy);
	}
	vfprintf(stderr, fmt, args);
	fputc('\n', stderr);
}

void crashring_wlr_log_init(struct crashring_recorder *rec, enum wlr_log_importance verbosity)
{
	recorder = rec;
	wlr_log_init(verbosity, record);
}

void crashring_wlr_log_thread_exit(void)
{
	crashring_stream_put(stream);
	stream = NULL;
}
