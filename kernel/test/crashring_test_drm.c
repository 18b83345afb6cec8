// SPDX-License-Identifier: GPL-2.0
/*
 * crashring_test_drm.ko: what a DRM debug message costs, for `cargo xtask
 * bench` (qemu-tests/src/checks/debug_cost.rs). Apart from
 * crashring_test.ko because it needs drm.ko, which most scenarios never
 * load.
 *
 * Loading it times cost_events calls of one kind on the CPU it loads on,
 * the best of three rounds, prints "crashring-cost: debug what=LABEL
 * ns=N events=E" and stays loaded (remove it before the next):
 *
 *   call=drm            drm_dbg_kms() with three integers and a string:
 *                       what it costs depends on what the bench set up
 *                       around it (drm.debug, crashring's selection, the
 *                       console log level), so the bench names it by label=
 *   call=trace_printk   trace_printk() of the same format and arguments
 *   call=empty          the loop alone
 */

#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/printk.h>
#include <drm/drm_device.h>
#include <drm/drm_print.h>

static char *call = "drm";
module_param(call, charp, 0400);
MODULE_PARM_DESC(call, "drm, trace_printk or empty");

static char *label = "drm";
module_param(label, charp, 0400);
MODULE_PARM_DESC(label, "The name the cost line gives the measurement");

static unsigned int cost_events = 20000;
module_param(cost_events, uint, 0400);
MODULE_PARM_DESC(cost_events, "Calls per round");

/*
 * drm_dbg_kms() takes a drm_device and passes on its device; with none
 * the message is DRM's own ("[drm:FUNC] ..."). Read with READ_ONCE(), so
 * that the compiler keeps the macro's test, as in a driver.
 */
static struct drm_device *cost_drm;

#define COST_FORMAT "crtc-%d plane-%d fb-%d: %s\n"

enum cost_call { CALL_DRM, CALL_TRACE_PRINTK, CALL_EMPTY };

static u64 cost_round(enum cost_call c)
{
	unsigned int i;
	u64 t0, t1;

	t0 = ktime_get_ns();
	for (i = 0; i < cost_events; i++) {
		switch (c) {
		case CALL_DRM:
			drm_dbg_kms(READ_ONCE(cost_drm), COST_FORMAT, 41, 31, i, "committed");
			break;
		case CALL_TRACE_PRINTK:
			trace_printk(COST_FORMAT, 41, 31, i, "committed");
			break;
		default:
			barrier();
			break;
		}
	}
	t1 = ktime_get_ns();
	return t1 - t0;
}

static int __init crashring_test_drm_init(void)
{
	enum cost_call c;
	u64 best = U64_MAX;
	int round;

	if (!strcmp(call, "drm")) {
		c = CALL_DRM;
	} else if (!strcmp(call, "trace_printk")) {
		c = CALL_TRACE_PRINTK;
	} else if (!strcmp(call, "empty")) {
		c = CALL_EMPTY;
	} else {
		pr_err("call=%s: expected drm, trace_printk or empty\n", call);
		return -EINVAL;
	}
	for (round = 0; round < 3; round++)
		best = min(best, cost_round(c));
	pr_info("crashring-cost: debug what=%s ns=%llu events=%u\n", label, best, cost_events);
	return 0;
}

static void __exit crashring_test_drm_exit(void)
{
}

module_init(crashring_test_drm_init);
module_exit(crashring_test_drm_exit);
MODULE_DESCRIPTION("DRM debug message cost for crashring's bench");
MODULE_LICENSE("GPL");
