// SPDX-License-Identifier: GPL-2.0
/*
 * The debug source's replacements (crashring_debug.c diverts calls to
 * them): one per diverted function, of the same signature, recording the
 * message (crashring_debug_record.c) and, with "printk" selected,
 * calling the original too.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/dynamic_debug.h>
#include <linux/device.h>
#include <linux/netdevice.h>
#include <rdma/ib_verbs.h>
#include <linux/printk.h>
#include <linux/string.h>
#include <linux/stdarg.h>
#include "crashring.h"
#include "crashring_debug.h"
#include "crashring_format.h"

/* The device as dev_printk() names it: "driver name". */
static void cr_dev_text(char *buf, const struct device *dev)
{
	if (dev)
		snprintf(buf, CR_DEVICE_MAX + 1, "%s %s", dev_driver_string(dev), dev_name(dev));
	else
		buf[0] = '\0';
}

/*
 * Each runs instead of the function it is named after, with the same
 * arguments, preemption disabled from its first instruction to its last
 * (see "Unload" in crashring_debug.c). The selection was checked by the
 * callback. With "printk" selected, each then calls the original, which
 * the callback lets through when called from here.
 */
notrace void crashring_dynamic_pr_debug(struct _ddebug *desc, const char *fmt, ...)
{
	struct cr_call call = {
		.source = CRASHRING_CALLSITE_DYNDBG, .category = U16_MAX,
		.key = (unsigned long)desc, .desc = desc, .fmt = fmt, .device = "",
		.prefixed = true,
	};
	va_list ap;

	preempt_disable_notrace();
	va_start(ap, fmt);
	crashring_debug_record(&call, ap);
	va_end(ap);
	if (crashring_debug_also_printk()) {
		struct va_format vaf = { .fmt = fmt, .va = &ap };

		va_start(ap, fmt);
		__dynamic_pr_debug(desc, "%pV", &vaf);
		va_end(ap);
	}
	preempt_enable_notrace();
}

notrace void crashring_dynamic_dev_dbg(struct _ddebug *desc, const struct device *dev,
				       const char *fmt, ...)
{
	char device[CR_DEVICE_MAX + 1];
	struct cr_call call = {
		.source = CRASHRING_CALLSITE_DYNDBG, .category = U16_MAX,
		.key = (unsigned long)desc, .desc = desc, .fmt = fmt, .device = device,
	};
	va_list ap;

	preempt_disable_notrace();
	/* As __dynamic_dev_dbg() puts it: the prefix only before a device. */
	call.prefixed = dev;
	if (dev)
		cr_dev_text(device, dev);
	else
		strscpy(device, "(NULL device *)", sizeof(device));
	va_start(ap, fmt);
	crashring_debug_record(&call, ap);
	va_end(ap);
	if (crashring_debug_also_printk()) {
		struct va_format vaf = { .fmt = fmt, .va = &ap };

		va_start(ap, fmt);
		__dynamic_dev_dbg(desc, dev, "%pV", &vaf);
		va_end(ap);
	}
	preempt_enable_notrace();
}

notrace void crashring_dynamic_netdev_dbg(struct _ddebug *desc, const struct net_device *dev,
					  const char *fmt, ...)
{
	char device[CR_DEVICE_MAX + 1];
	struct cr_call call = {
		.source = CRASHRING_CALLSITE_DYNDBG, .category = U16_MAX,
		.key = (unsigned long)desc, .desc = desc, .fmt = fmt, .device = device,
	};
	va_list ap;

	preempt_disable_notrace();
	/* As __dynamic_netdev_dbg() names it, the prefix only with a parent. */
	call.prefixed = dev && dev->dev.parent;
	if (dev && dev->dev.parent)
		snprintf(device, sizeof(device), "%s %s %s%s", dev_driver_string(dev->dev.parent),
			 dev_name(dev->dev.parent), netdev_name(dev), netdev_reg_state(dev));
	else if (dev)
		snprintf(device, sizeof(device), "%s%s", netdev_name(dev), netdev_reg_state(dev));
	else
		strscpy(device, "(NULL net_device)", sizeof(device));
	va_start(ap, fmt);
	crashring_debug_record(&call, ap);
	va_end(ap);
	if (crashring_debug_also_printk()) {
		struct va_format vaf = { .fmt = fmt, .va = &ap };

		va_start(ap, fmt);
		__dynamic_netdev_dbg(desc, dev, "%pV", &vaf);
		va_end(ap);
	}
	preempt_enable_notrace();
}

notrace void crashring_dynamic_ibdev_dbg(struct _ddebug *desc, const struct ib_device *ibdev,
					 const char *fmt, ...)
{
	char device[CR_DEVICE_MAX + 1];
	struct cr_call call = {
		.source = CRASHRING_CALLSITE_DYNDBG, .category = U16_MAX,
		.key = (unsigned long)desc, .desc = desc, .fmt = fmt, .device = device,
	};
	va_list ap;

	preempt_disable_notrace();
	/* As __dynamic_ibdev_dbg() names it, the prefix only with a parent. */
	call.prefixed = ibdev && ibdev->dev.parent;
	if (ibdev && ibdev->dev.parent)
		snprintf(device, sizeof(device), "%s %s %s", dev_driver_string(ibdev->dev.parent),
			 dev_name(ibdev->dev.parent), dev_name(&ibdev->dev));
	else if (ibdev)
		strscpy(device, dev_name(&ibdev->dev), sizeof(device));
	else
		strscpy(device, "(NULL ib_device)", sizeof(device));
	va_start(ap, fmt);
	crashring_debug_record(&call, ap);
	va_end(ap);
	if (crashring_debug_also_printk()) {
		struct va_format vaf = { .fmt = fmt, .va = &ap };

		va_start(ap, fmt);
		__dynamic_ibdev_dbg(desc, ibdev, "%pV", &vaf);
		va_end(ap);
	}
	preempt_enable_notrace();
}

/* printk(KERN_DEBUG @fmt, ...), the level an argument as DRM passes it. */
static __printf(1, 2) void cr_printk_debug(const char *fmt, ...)
{
	va_list args;

	va_start(args, fmt);
	vprintk_emit(0, LOGLEVEL_DEBUG, NULL, fmt, args);
	va_end(args);
}

/* What DRM's debug functions print, for "printk" selected. */
static notrace void cr_drm_printk(const struct device *dev, void *caller, const char *fmt,
				  va_list ap)
{
	/* As __drm_dev_dbg() passes it on (__drm_dev_vprintk() since 6.9). */
	const char *level = KERN_DEBUG;
	struct va_format vaf = { .fmt = fmt };
	va_list copy;

	va_copy(copy, ap);
	vaf.va = &copy;
	if (dev)
		dev_printk(level, dev, "[drm:%ps] %pV", caller, &vaf);
	else
		cr_printk_debug("[drm:%ps] %pV", caller, &vaf);
	va_end(copy);
}

notrace void crashring_drm_dev_dbg(struct _ddebug *desc, const struct device *dev,
				   int category, const char *fmt, ...)
{
	char device[CR_DEVICE_MAX + 1];
	/* The return address __drm_dev_dbg() would print as "[drm:%ps]". */
	void *caller = __builtin_return_address(0);
	struct cr_call call = {
		.source = CRASHRING_CALLSITE_DRM, .category = category,
		.key = (unsigned long)fmt, .caller = (unsigned long)caller,
		.fmt = fmt, .device = device,
	};
	va_list ap;

	preempt_disable_notrace();
	cr_dev_text(device, dev);
	va_start(ap, fmt);
	crashring_debug_record(&call, ap);
	va_end(ap);
	if (crashring_debug_also_printk()) {
		va_start(ap, fmt);
		cr_drm_printk(dev, caller, fmt, ap);
		va_end(ap);
	}
	preempt_enable_notrace();
}

/* ___drm_dbg(): 6.1 to 6.12's DRM_DEBUG_*() without a device. */
notrace void crashring_drm_dbg(struct _ddebug *desc, int category, const char *fmt, ...)
{
	void *caller = __builtin_return_address(0);
	struct cr_call call = {
		.source = CRASHRING_CALLSITE_DRM, .category = category,
		.key = (unsigned long)fmt, .caller = (unsigned long)caller,
		.fmt = fmt, .device = "",
	};
	va_list ap;

	preempt_disable_notrace();
	va_start(ap, fmt);
	crashring_debug_record(&call, ap);
	va_end(ap);
	if (crashring_debug_also_printk()) {
		va_start(ap, fmt);
		cr_drm_printk(NULL, caller, fmt, ap);
		va_end(ap);
	}
	preempt_enable_notrace();
}
