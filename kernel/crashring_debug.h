/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The debug source's two halves: crashring_debug.c decides which
 * messages to divert and diverts them; crashring_debug_record.c
 * records them.
 */
#ifndef CRASHRING_DEBUG_H
#define CRASHRING_DEBUG_H

#include <linux/types.h>
#include <linux/stdarg.h>

struct _ddebug;
struct module;

/* The device a message names, as the kernel prints it before ": ". */
#define CR_DEVICE_MAX	128

/* A message's callsite, as the replacement knows it. */
struct cr_call {
	u8 source;
	u16 category;
	unsigned long key, caller;
	const struct _ddebug *desc;	/* dynamic debug's callsites */
	bool prefixed;			/* printk would put dynamic debug's prefix in front */
	const char *fmt;
	const char *device;
};

void crashring_debug_record(const struct cr_call *call, va_list ap);
void crashring_debug_forget(const struct module *mod);
int crashring_debug_record_init(void);
void crashring_debug_record_exit(void);

#endif /* CRASHRING_DEBUG_H */
