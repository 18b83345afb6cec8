/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The debug source's argument encoder, for crashring_debug_record.c and
 * for the user-space tests (qemu-tests/csrc).
 */
#ifndef CRASHRING_DEBUG_ARGS_H
#define CRASHRING_DEBUG_ARGS_H

#include "crashring_env.h"

/* Where the encoded arguments go: @room bytes at @p; @cut once one did not fit. */
struct cr_args {
	u8 *p;
	u32 room;
	bool cut;
};

void crashring_encode_args(struct cr_args *a, const char *fmt, va_list ap);

#endif /* CRASHRING_DEBUG_ARGS_H */
