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
bool crashring_debug_also_printk(void);

struct _ddebug;
struct device;
struct net_device;
struct ib_device;

/* The replacements (crashring_debug_calls.c), each of its original's signature. */
void crashring_dynamic_pr_debug(struct _ddebug *desc, const char *fmt, ...);
void crashring_dynamic_dev_dbg(struct _ddebug *desc, const struct device *dev,
			       const char *fmt, ...);
void crashring_dynamic_netdev_dbg(struct _ddebug *desc, const struct net_device *dev,
				  const char *fmt, ...);
void crashring_dynamic_ibdev_dbg(struct _ddebug *desc, const struct ib_device *ibdev,
				 const char *fmt, ...);
void crashring_drm_dev_dbg(struct _ddebug *desc, const struct device *dev, int category,
			   const char *fmt, ...);
void crashring_drm_dbg(struct _ddebug *desc, int category, const char *fmt, ...);
void crashring_debug_forget(const struct module *mod);
int crashring_debug_record_init(void);
void crashring_debug_record_exit(void);

#endif /* CRASHRING_DEBUG_H */
