// SPDX-License-Identifier: GPL-2.0
/*
 * The debug source: kernel debug messages diverted into the recorder
 * instead of printk, recorded unformatted (FORMAT.md, section 18).
 *
 * What is diverted: DRM's debug messages (drm_dbg_kms() and the rest go
 * through __drm_dev_dbg(), and DRM_DEBUG_KMS() and the like through
 * ___drm_dbg() on the kernels that have it), selected by category; and
 * dynamic debug's pr_debug(), dev_dbg(), netdev_dbg() and ibdev_dbg()
 * callsites (__dynamic_pr_debug(), __dynamic_dev_dbg(),
 * __dynamic_netdev_dbg(), __dynamic_ibdev_dbg()),
 * selected by module, function or file:line, once dynamic debug enabled
 * them (+p: the kernel calls those functions only for enabled callsites).
 * A selection may also name devices (dev_name() or driver), and may ask
 * that selected messages go to printk too. Its user=NAME:CATEGORIES
 * words switch programs' own categories (crashring_user.c), so that one
 * place chooses what a compositor and its DRM device record.
 *
 * How: an ftrace_ops with FTRACE_OPS_FL_IPMODIFY on each function, as
 * livepatch does. Its callback runs at the function's entry; for a
 * selected message it sets the saved instruction pointer to a
 * replacement of the same signature here, which the call then runs
 * instead, with its arguments untouched. An unselected message returns
 * to the original function, which does what it always did (DRM checks
 * drm.debug inside __drm_dev_dbg(), so a selected category is diverted
 * with drm.debug=0 and an unselected one still obeys it). The ops are
 * registered only while something they divert is selected: with nothing
 * selected, the functions run as if the module were not loaded.
 *
 * Conflicts: one IPMODIFY ops per function, so a livepatch of one of
 * these functions (or another tool diverting it) makes registration
 * fail: the function is not diverted and "debug" in sysfs says why.
 * kernel.ftrace_enabled=0 stops every callback: messages then go to
 * printk as without the module. Lockdown does not restrict ftrace.
 *
 * Unload: the ops are unregistered (ftrace waits for callbacks in
 * flight), then synchronize_rcu_tasks() waits until no task is between
 * a callback's return and the end of a replacement (a replacement may
 * be preempted only before its first instruction: it runs with
 * preemption disabled), so no call lands in freed module text.
 *
 * The write path (callback and replacement) takes no lock, allocates
 * nothing and never sleeps: callsites get their ids from a table filled
 * by compare-and-swap, arguments are encoded into a per-CPU buffer of
 * the context, strings are read with the nofault accessors.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/ftrace.h>
#include <linux/kprobes.h>
#include <linux/dynamic_debug.h>
#include <linux/device.h>
#include <linux/netdevice.h>
#include <rdma/ib_verbs.h>
#include <linux/rcupdate.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/stdarg.h>
#include "crashring.h"
#include "crashring_compat.h"
#include "crashring_debug.h"
#include "crashring_internal.h"
#include "crashring_uapi.h"

static char *debug;
module_param(debug, charp, 0400);
MODULE_PARM_DESC(debug, "Debug messages to divert into the recorder: drm=KMS,ATOMIC module=M func=F file=F[:LINE] device=D printk input (see /sys/kernel/crashring/debug)");

/* DRM's categories, by bit (enum drm_debug_category). */
static const char *const cr_drm_categories[] = {
	"CORE", "DRIVER", "KMS", "PRIME", "ATOMIC", "VBL", "STATE", "LEASE", "DP", "DRMRES",
};

#define CR_DEBUG_RULES		16
#define CR_DEBUG_RULE_LEN	128

enum cr_rule_kind { CR_RULE_MODULE, CR_RULE_FUNC, CR_RULE_FILE, CR_RULE_DEVICE, CR_RULE_USER };

struct cr_rule {
	enum cr_rule_kind kind;
	u32 line;		/* file rules: 0 for any */
	char text[CR_DEBUG_RULE_LEN];	/* user rules: "NAME:CAT,CAT" */
};

/*
 * What is selected. Readers (callbacks and replacements, preemption off)
 * follow cr_selection; writers fill the other one, flip the pointer and
 * wait for a grace period, as the printk filter does.
 */
struct cr_selection {
	u32 drm;		/* DRM category bits */
	bool printk;		/* selected messages go to printk too */
	bool input;		/* input-layer callsites may be selected */
	unsigned int nrules;
	struct cr_rule rules[CR_DEBUG_RULES];
};

static struct cr_selection cr_selections[2];
static struct cr_selection __rcu *cr_selection = RCU_INITIALIZER(&cr_selections[0]);

/*
 * Whether drm.ko is loaded (and not going), so that its functions may be
 * hooked: unknown until a selection first asks for a DRM category, since
 * finding out walks every function ftrace knows (45 ms of a 150 ms load
 * under QEMU's TCG, which every boot would pay for nothing), then
 * followed by the module notifier.
 */
static enum { CR_DRM_UNKNOWN, CR_DRM_ABSENT, CR_DRM_LOADED } cr_drm;

/* --- the selection ---------------------------------------------------- */

/* @path is @want, or ends with "/" @want (dynamic debug's file matching). */
static bool cr_file_matches(const char *path, const char *want)
{
	size_t p = strlen(path), w = strlen(want);

	if (p == w)
		return !strcmp(path, want);
	return p > w && path[p - w - 1] == '/' && !strcmp(path + p - w, want);
}

/*
 * Input-layer callsites (input core, HID, keyboards, touch) can carry
 * what a person typed: never diverted unless "input" is selected.
 */
static bool cr_is_input(const struct _ddebug *d)
{
	return !strncmp(d->filename, "drivers/input/", 14) ||
	       !strncmp(d->filename, "drivers/hid/", 12) || !strncmp(d->modname, "hid", 3);
}

static bool cr_device_selected(const struct cr_selection *sel, const struct device *dev)
{
	const char *name;
	unsigned int i;
	bool any = false;

	for (i = 0; i < sel->nrules; i++) {
		const struct cr_rule *r = &sel->rules[i];

		if (r->kind != CR_RULE_DEVICE)
			continue;
		any = true;
		if (!dev)
			continue;
		/* A device not yet named (dev_set_name()) has no name to match. */
		name = dev_name(dev);
		if ((name && !strcmp(name, r->text)) || !strcmp(dev_driver_string(dev), r->text))
			return true;
	}
	return !any;
}

static bool cr_dyndbg_selected(const struct cr_selection *sel, const struct _ddebug *d,
			       const struct device *dev)
{
	unsigned int i;

	if (!d || (cr_is_input(d) && !sel->input) || !cr_device_selected(sel, dev))
		return false;
	for (i = 0; i < sel->nrules; i++) {
		const struct cr_rule *r = &sel->rules[i];

		switch (r->kind) {
		case CR_RULE_MODULE:
			if (!strcmp(d->modname, r->text))
				return true;
			break;
		case CR_RULE_FUNC:
			if (!strcmp(d->function, r->text))
				return true;
			break;
		case CR_RULE_FILE:
			if ((!r->line || r->line == d->lineno) && cr_file_matches(d->filename, r->text))
				return true;
			break;
		case CR_RULE_DEVICE:
		case CR_RULE_USER:
			break;
		}
	}
	return false;
}

static bool cr_drm_selected(const struct cr_selection *sel, u32 category,
			    const struct device *dev)
{
	return category < ARRAY_SIZE(cr_drm_categories) && (sel->drm & BIT(category)) &&
	       cr_device_selected(sel, dev);
}

static bool cr_wants_dyndbg(const struct cr_selection *sel)
{
	unsigned int i;

	for (i = 0; i < sel->nrules; i++)
		if (sel->rules[i].kind != CR_RULE_DEVICE && sel->rules[i].kind != CR_RULE_USER)
			return true;
	return false;
}

/* Whether "printk" is selected: the replacements call the originals too. */
bool crashring_debug_also_printk(void)
{
	return rcu_dereference_sched(cr_selection)->printk;
}

/* --- the hooks -------------------------------------------------------- */

/*
 * A function diverted while something it carries is selected: DRM's by
 * an ftrace_ops (drm.ko is built with ftrace), dynamic debug's by a
 * kprobe at its entry (lib/ is built without ftrace, so
 * __dynamic_pr_debug() and its siblings have no ftrace site; the
 * kprobe's int3 costs more, but only calls of callsites dynamic debug
 * enabled get there).
 */
struct cr_hook {
	const char *name;
	void *replacement;
	bool drm;		/* in drm.ko, hooked while it is loaded */
	struct ftrace_ops ops;	/* DRM's */
	struct kprobe kp;	/* dynamic debug's */
	bool on;
	int err;		/* why it is not diverted, if it should be */
};

/*
 * Whether to divert a call of @h's function, with these first three
 * arguments, to its replacement. Called from the ftrace callback or the
 * kprobe handler at the function's entry: preemption off, this context's
 * recursion excluded. @caller is the call's return address: the
 * replacements' own calls of the originals, for "printk", go on.
 */
static bool cr_divert(const struct cr_hook *h, unsigned long caller, unsigned long arg0,
		      unsigned long arg1, unsigned long arg2)
{
	const struct cr_selection *sel = rcu_dereference_sched(cr_selection);
	void *to = h->replacement;

	if (within_module(caller, THIS_MODULE) ||
	    !(READ_ONCE(crashring.sources) & CR_SRC_DEBUG) || !READ_ONCE(crashring.enabled))
		return false;
	if (to == crashring_dynamic_pr_debug)
		return cr_dyndbg_selected(sel, (void *)arg0, NULL);
	if (to == crashring_dynamic_dev_dbg)
		return cr_dyndbg_selected(sel, (void *)arg0, (void *)arg1);
	if (to == crashring_dynamic_netdev_dbg) {
		const struct net_device *ndev = (void *)arg1;

		return cr_dyndbg_selected(sel, (void *)arg0, ndev ? ndev->dev.parent : NULL);
	}
	if (to == crashring_dynamic_ibdev_dbg) {
		const struct ib_device *ibdev = (void *)arg1;

		return cr_dyndbg_selected(sel, (void *)arg0, ibdev ? ibdev->dev.parent : NULL);
	}
	/* DRM's category is an enum: the upper half of its register is undefined. */
	if (to == crashring_drm_dev_dbg)
		return cr_drm_selected(sel, (u32)arg2, (void *)arg1);
	return cr_drm_selected(sel, (u32)arg1, NULL);
}

/* The ftrace callback at a DRM function's entry. */
static void cr_debug_entry(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
			   struct ftrace_regs *fregs)
{
	const struct cr_hook *h = op->private;

	if (cr_divert(h, parent_ip, cr_fregs_argument(fregs, 0), cr_fregs_argument(fregs, 1),
		      cr_fregs_argument(fregs, 2)))
		cr_fregs_set_ip(fregs, (unsigned long)h->replacement);
}

/*
 * The kprobe handler at a dynamic-debug function's entry. Returning 1 with the
 * instruction pointer changed resumes there, without single-stepping
 * the probed instruction (as error injection's override does).
 */
static int cr_debug_kprobe(struct kprobe *p, struct pt_regs *regs)
{
	const struct cr_hook *h = container_of(p, struct cr_hook, kp);
	unsigned long caller = cr_entry_return_address(regs);

	if (!cr_divert(h, caller, regs_get_kernel_argument(regs, 0),
		       regs_get_kernel_argument(regs, 1), regs_get_kernel_argument(regs, 2)))
		return 0;
	instruction_pointer_set(regs, (unsigned long)h->replacement);
	return 1;
}

#define CR_HOOK(fn, to, in_drm) {						\
	.name = #fn, .replacement = to, .drm = in_drm,				\
}

static struct cr_hook cr_hooks[] = {
	CR_HOOK(__dynamic_pr_debug, crashring_dynamic_pr_debug, false),
	CR_HOOK(__dynamic_dev_dbg, crashring_dynamic_dev_dbg, false),
	CR_HOOK(__dynamic_netdev_dbg, crashring_dynamic_netdev_dbg, false),
	CR_HOOK(__dynamic_ibdev_dbg, crashring_dynamic_ibdev_dbg, false),
	CR_HOOK(__drm_dev_dbg, crashring_drm_dev_dbg, true),
	CR_HOOK(___drm_dbg, crashring_drm_dbg, true),
};

/*
 * Attaches an ftrace hook. Its filter stays set when it is detached,
 * and is freed once, at unload: before 6.15 (ftrace: "Reset ftrace hash
 * pointers to EMPTY_HASH") ftrace_free_filter() left the ops pointing at
 * the freed hash, which the next ftrace_set_filter() freed again.
 */
static int cr_ftrace_attach(struct cr_hook *h)
{
	/* ftrace_set_filter() may write into the pattern it parses. */
	char name[32];
	int err;

	h->ops.func = cr_debug_entry;
	h->ops.flags = CR_FTRACE_ARGS_FLAGS | FTRACE_OPS_FL_IPMODIFY | FTRACE_OPS_FL_RECURSION;
	h->ops.private = h;
	strscpy(name, h->name, sizeof(name));
	/*
	 * A filter that matched nothing fails and is not taken: an ops
	 * registered without one would run on every function.
	 */
	err = ftrace_set_filter(&h->ops, name, strlen(name), 1);
	return err ?: register_ftrace_function(&h->ops);
}

/*
 * An optimized kprobe (a jump instead of the int3) ignores the
 * instruction pointer its handler sets; one with a post handler is
 * never optimized.
 */
static void cr_debug_kprobe_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
}

static int cr_kprobe_attach(struct cr_hook *h)
{
	/* A kprobe is registered afresh each time. */
	h->kp = (struct kprobe){
		.symbol_name = h->name,
		.pre_handler = cr_debug_kprobe,
		.post_handler = cr_debug_kprobe_post,
	};
	return register_kprobe(&h->kp);
}

/* Attaches or detaches @h. */
static int cr_hook_set(struct cr_hook *h, bool on)
{
	int err;

	if (on == h->on)
		return 0;
	if (!on) {
		if (h->drm)
			unregister_ftrace_function(&h->ops);
		else
			unregister_kprobe(&h->kp);
		h->on = false;
		return 0;
	}
	err = h->drm ? cr_ftrace_attach(h) : cr_kprobe_attach(h);
	h->on = !err;
	return err;
}

/*
 * Whether @err is @h's function missing where it may be: ___drm_dbg() is
 * only in 6.1 to 6.12, __dynamic_ibdev_dbg() only with CONFIG_INFINIBAND.
 */
static bool cr_hook_absent(const struct cr_hook *h, int err)
{
	return (err == -EINVAL && !strcmp(h->name, "___drm_dbg")) ||
	       (err == -ENOENT && !strcmp(h->name, "__dynamic_ibdev_dbg"));
}

/* Where drm.ko's presence is probed: never registered. */
static struct ftrace_ops cr_probe_ops;

/*
 * Whether drm.ko is loaded: its __drm_dev_dbg() can be traced. Called
 * with crashring.lock held (or at load).
 */
static bool cr_drm_loaded(void)
{
	char name[] = "__drm_dev_dbg";

	if (cr_drm == CR_DRM_UNKNOWN)
		cr_drm = ftrace_set_filter(&cr_probe_ops, name, strlen(name), 1) ? CR_DRM_ABSENT :
										     CR_DRM_LOADED;
	return cr_drm == CR_DRM_LOADED;
}

/*
 * Hooks what the selection needs and nothing else; a function the
 * kernel may lack is no error. Called with crashring.lock held (or at
 * load).
 */
static void cr_hooks_apply(const struct cr_selection *sel)
{
	bool dyndbg = cr_wants_dyndbg(sel), drm = sel->drm && cr_drm_loaded();
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(cr_hooks); i++) {
		struct cr_hook *h = &cr_hooks[i];
		int err = cr_hook_set(h, h->drm ? drm : dyndbg);

		h->err = cr_hook_absent(h, err) ? 0 : err;
		if (h->err)
			pr_warn("cannot divert %s: %d%s\n", h->name, h->err,
				h->err == -EBUSY ? " (another IPMODIFY user, such as a livepatch)" : "");
	}
}

static void cr_hooks_off(void)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(cr_hooks); i++)
		cr_hook_set(&cr_hooks[i], false);
	/* No task is left between a callback and a replacement's end. */
	synchronize_rcu_tasks();
	for (i = 0; i < ARRAY_SIZE(cr_hooks); i++)
		if (cr_hooks[i].drm)
			ftrace_free_filter(&cr_hooks[i].ops);
	ftrace_free_filter(&cr_probe_ops);
}

/* --- the selection's text --------------------------------------------- */

/* Whether a rule names input-layer callsites ("input" must come with it). */
static bool cr_rule_is_input(const struct cr_rule *r)
{
	switch (r->kind) {
	case CR_RULE_MODULE:
		return !strncmp(r->text, "hid", 3) || !strcmp(r->text, "usbhid") ||
		       !strcmp(r->text, "atkbd") || !strcmp(r->text, "psmouse") ||
		       !strcmp(r->text, "evdev") || !strcmp(r->text, "i8042");
	case CR_RULE_FILE:
		return !strncmp(r->text, "drivers/input/", 14) || !strncmp(r->text, "drivers/hid/", 12);
	default:
		return false;
	}
}

static int cr_parse_drm(const char *list, size_t n, u32 *bits)
{
	while (n) {
		size_t len = strcspn(list, ",");
		unsigned int i;
		bool known = false;

		len = min(len, n);
		for (i = 0; i < ARRAY_SIZE(cr_drm_categories); i++) {
			if ((len == 3 && !strncasecmp(list, "all", 3)) ||
			    (len == strlen(cr_drm_categories[i]) &&
			     !strncasecmp(list, cr_drm_categories[i], len))) {
				*bits |= len == 3 && !strncasecmp(list, "all", 3) ?
					 BIT(ARRAY_SIZE(cr_drm_categories)) - 1 : BIT(i);
				known = true;
			}
		}
		if (!known && len)
			return -EINVAL;
		list += len;
		n -= len;
		if (n) {
			list++;
			n--;
		}
	}
	return 0;
}

/* One "key=value" rule of @n bytes at @p into @sel. */
static int cr_parse_rule(const char *p, size_t n, struct cr_selection *sel)
{
	static const struct { const char *key; enum cr_rule_kind kind; } keys[] = {
		{ "module=", CR_RULE_MODULE }, { "func=", CR_RULE_FUNC },
		{ "file=", CR_RULE_FILE }, { "device=", CR_RULE_DEVICE },
		{ "user=", CR_RULE_USER },
	};
	struct cr_rule *r = &sel->rules[sel->nrules];
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(keys); i++) {
		size_t k = strlen(keys[i].key);
		const char *colon;

		if (n <= k || strncmp(p, keys[i].key, k))
			continue;
		if (sel->nrules == CR_DEBUG_RULES || n - k >= CR_DEBUG_RULE_LEN)
			return -E2BIG;
		memset(r, 0, sizeof(*r));
		r->kind = keys[i].kind;
		memcpy(r->text, p + k, n - k);
		colon = strchr(r->text, ':');
		if (r->kind == CR_RULE_FILE && colon) {
			if (kstrtou32(colon + 1, 10, &r->line) || !r->line)
				return -EINVAL;
			r->text[colon - r->text] = '\0';
		}
		/* A program's name, then the categories it is to record. */
		if (r->kind == CR_RULE_USER && (!colon || colon == r->text || !colon[1]))
			return -EINVAL;
		sel->nrules++;
		return 0;
	}
	return -EINVAL;
}

/* Between the words of a selection (';' for a module parameter). */
#define CR_SEPARATORS	"\t\n ;"

static int cr_parse_selection(const char *spec, struct cr_selection *sel)
{
	const char *p = spec;
	unsigned int i;

	memset(sel, 0, sizeof(*sel));
	while (*p) {
		size_t n = strcspn(p, CR_SEPARATORS);
		int err = 0;

		if (n > 4 && !strncmp(p, "drm=", 4))
			err = cr_parse_drm(p + 4, n - 4, &sel->drm);
		else if (n == 6 && !strncmp(p, "printk", 6))
			sel->printk = true;
		else if (n == 5 && !strncmp(p, "input", 5))
			sel->input = true;
		else if (n)
			err = cr_parse_rule(p, n, sel);
		if (err)
			return err;
		p += n;
		p += strspn(p, CR_SEPARATORS);
	}
	for (i = 0; i < sel->nrules; i++)
		if (cr_rule_is_input(&sel->rules[i]) && !sel->input)
			return -EPERM;
	return 0;
}

/**
 * crashring_set_debug - replace the debug selection
 * @spec: drm=CATEGORIES module=M func=F file=PATH[:LINE] device=D printk
 *        input, separated by spaces or newlines; "" selects nothing
 *
 * Return: 0, -EINVAL (a word it does not know), -E2BIG (too many rules
 * or too long a name) or -EPERM (an input-layer rule without "input").
 * Called with crashring.lock held.
 */
int crashring_set_debug(const char *spec)
{
	struct cr_selection *old = rcu_dereference_protected(cr_selection,
							     lockdep_is_held(&crashring.lock));
	struct cr_selection *next = old == &cr_selections[0] ? &cr_selections[1] : &cr_selections[0];
	int err = cr_parse_selection(spec, next);

	if (err)
		return err;
	/* Publishes *next filled in, on any architecture. */
	rcu_assign_pointer(cr_selection, next);
	/* Callbacks run with preemption off: after this none reads @old. */
	synchronize_rcu();
	cr_hooks_apply(next);
	crashring_user_selection_changed();
	return 0;
}

/* @stream is program @name's: "NAME", or "NAME.N" for stream N of several. */
static bool cr_stream_is(const char *stream, const char *name, size_t len)
{
	const char *rest = stream + len;

	if (strncmp(stream, name, len))
		return false;
	if (!*rest)
		return true;
	return *rest == '.' && rest[1] && strspn(rest + 1, "0123456789") == strlen(rest + 1);
}

/**
 * crashring_debug_user_mask - what a program's categories are to record
 * @stream: its stream's name
 * @ctl: its categories (names, count, defaults)
 *
 * The user=NAME:CATEGORIES words that name @stream's program decide:
 * the categories they list ("all" for every one; names the program has
 * not registered are ignored). With none, the program's defaults.
 *
 * Return: the enabled mask. Called with crashring.lock held.
 */
u64 crashring_debug_user_mask(const char *stream, const struct crashring_user_control *ctl)
{
	const struct cr_selection *sel = rcu_dereference_protected(cr_selection,
								   lockdep_is_held(&crashring.lock));
	u64 every = ctl->count >= 64 ? U64_MAX : BIT_ULL(ctl->count) - 1;
	u64 mask = 0;
	bool named = false;
	unsigned int i, c;

	for (i = 0; i < sel->nrules; i++) {
		const struct cr_rule *r = &sel->rules[i];
		const char *list = strchr(r->text, ':');

		if (r->kind != CR_RULE_USER || !cr_stream_is(stream, r->text, list - r->text))
			continue;
		named = true;
		while (*list++) {
			size_t len = strcspn(list, ",");

			if (len == 3 && !strncmp(list, "all", 3))
				mask |= every;
			for (c = 0; c < ctl->count; c++)
				if (strlen(ctl->names[c]) == len && !strncmp(ctl->names[c], list, len))
					mask |= BIT_ULL(c);
			list += len;
		}
	}
	return named ? mask : ctl->defaults & every;
}

/**
 * crashring_show_debug - the selection, then what is diverted
 * @buf: a page
 * @opener: the euid that opened the file
 * @admin: whether it was opened with CAP_SYS_ADMIN
 *
 * Return: bytes written. Called with crashring.lock held.
 */
int crashring_show_debug(char *buf, kuid_t opener, bool admin)
{
	const struct cr_selection *sel = rcu_dereference_protected(cr_selection,
								   lockdep_is_held(&crashring.lock));
	static const char *const kinds[] = { "module", "func", "file", "device", "user" };
	unsigned int i;
	int n = 0;

	if (sel->drm) {
		n += sysfs_emit_at(buf, n, "drm=");
		for (i = 0; i < ARRAY_SIZE(cr_drm_categories); i++)
			if (sel->drm & BIT(i))
				n += sysfs_emit_at(buf, n, "%s%s", sel->drm & (BIT(i) - 1) ? "," : "",
						   cr_drm_categories[i]);
	}
	for (i = 0; i < sel->nrules; i++) {
		n += sysfs_emit_at(buf, n, "%s%s=%s", n ? " " : "", kinds[sel->rules[i].kind],
				   sel->rules[i].text);
		if (sel->rules[i].line)
			n += sysfs_emit_at(buf, n, ":%u", sel->rules[i].line);
	}
	if (sel->printk)
		n += sysfs_emit_at(buf, n, "%sprintk", n ? " " : "");
	if (sel->input)
		n += sysfs_emit_at(buf, n, "%sinput", n ? " " : "");
	n += sysfs_emit_at(buf, n, "\ndiverting:");
	for (i = 0; i < ARRAY_SIZE(cr_hooks); i++)
		if (cr_hooks[i].on)
			n += sysfs_emit_at(buf, n, " %s", cr_hooks[i].name);
	/* Known: applying a selection with DRM categories found out. */
	if (sel->drm && cr_drm != CR_DRM_LOADED)
		n += sysfs_emit_at(buf, n, " (DRM categories wait for drm.ko)");
	for (i = 0; i < ARRAY_SIZE(cr_hooks); i++)
		if (cr_hooks[i].err)
			n += sysfs_emit_at(buf, n, "\nnot diverted: %s (error %d)", cr_hooks[i].name,
					   cr_hooks[i].err);
	n += sysfs_emit_at(buf, n, "\n");
	return crashring_user_show(buf, n, opener, admin);
}

/* --- load and unload -------------------------------------------------- */

/* Follows drm.ko coming and going, and forgets a going module's callsites. */
static int cr_module_event(struct notifier_block *nb, unsigned long action, void *data)
{
	struct module *mod = data;

	if (action == MODULE_STATE_GOING)
		crashring_debug_forget(mod);
	if ((action != MODULE_STATE_LIVE && action != MODULE_STATE_GOING) ||
	    strcmp(mod->name, "drm"))
		return NOTIFY_DONE;
	mutex_lock(&crashring.lock);
	cr_drm = action == MODULE_STATE_LIVE ? CR_DRM_LOADED : CR_DRM_ABSENT;
	cr_hooks_apply(rcu_dereference_protected(cr_selection, lockdep_is_held(&crashring.lock)));
	mutex_unlock(&crashring.lock);
	return NOTIFY_OK;
}

static struct notifier_block cr_module_nb = {
	.notifier_call = cr_module_event,
};

static int cr_debug_init(void)
{
	int err;

	err = crashring_debug_record_init();
	if (err)
		return err;
	if (debug && cr_parse_selection(debug, &cr_selections[0])) {
		pr_err("debug=%s: see /sys/kernel/crashring/debug for what it takes\n", debug);
		crashring_debug_record_exit();
		return -EINVAL;
	}
	err = register_module_notifier(&cr_module_nb);
	if (err) {
		crashring_debug_record_exit();
		return err;
	}
	mutex_lock(&crashring.lock);
	cr_hooks_apply(&cr_selections[0]);
	mutex_unlock(&crashring.lock);
	return 0;
}

static void cr_debug_exit(void)
{
	unregister_module_notifier(&cr_module_nb);
	cr_hooks_off();
	crashring_debug_record_exit();
}

const struct crashring_source crashring_source_debug = {
	.name = "debug",
	.init = cr_debug_init,
	.exit = cr_debug_exit,
};
