/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differences between the kernels crashring.ko supports (6.1 to 7.3),
 * kept out of the .c files. CR_HAVE_RESERVE_MEM_FIND comes from a feature
 * probe in Kbuild.
 */
#ifndef CRASHRING_COMPAT_H
#define CRASHRING_COMPAT_H

#include <linux/mm.h>

#ifdef CR_HAVE_RESERVE_MEM_FIND
#define CR_HAVE_RESERVE_MEM true

static inline bool cr_reserve_mem_find(const char *name, phys_addr_t *start, phys_addr_t *size)
{
	return reserve_mem_find_by_name(name, start, size);
}
#else
#define CR_HAVE_RESERVE_MEM false

static inline bool cr_reserve_mem_find(const char *name, phys_addr_t *start, phys_addr_t *size)
{
	return false;
}
#endif

/*
 * syscore_shutdown() callbacks: 6.18 gave them a data argument and a
 * struct syscore to register (Debian's 6.12 has it backported).
 */
#include <linux/syscore_ops.h>

#ifdef CR_HAVE_SYSCORE_DATA
#define CR_SYSCORE_ARGS void *data

struct cr_syscore {
	struct syscore_ops ops;
	struct syscore reg;
};

static inline void cr_register_syscore(struct cr_syscore *s)
{
	s->reg.ops = &s->ops;
	register_syscore(&s->reg);
}

static inline void cr_unregister_syscore(struct cr_syscore *s)
{
	unregister_syscore(&s->reg);
}
#else
#define CR_SYSCORE_ARGS void

struct cr_syscore {
	struct syscore_ops ops;
};

static inline void cr_register_syscore(struct cr_syscore *s)
{
	register_syscore_ops(&s->ops);
}

static inline void cr_unregister_syscore(struct cr_syscore *s)
{
	unregister_syscore_ops(&s->ops);
}
#endif

/* A mapping's flags: through helpers since 6.3, written directly before. */
#ifdef CR_HAVE_VM_FLAGS_SET
static inline void cr_vm_flags_change(struct vm_area_struct *vma, vm_flags_t set,
				      vm_flags_t clear)
{
	vm_flags_clear(vma, clear);
	vm_flags_set(vma, set);
}
#else
static inline void cr_vm_flags_change(struct vm_area_struct *vma, vm_flags_t set,
				      vm_flags_t clear)
{
	vma->vm_flags = (vma->vm_flags & ~clear) | set;
}
#endif

/*
 * What an ftrace callback reads of the traced function: its arguments,
 * and, for FTRACE_OPS_FL_IPMODIFY, where it resumes. With
 * DYNAMIC_FTRACE_WITH_ARGS (x86-64 since 5.11, arm64) the trampoline
 * saves both without the full pt_regs of FTRACE_OPS_FL_SAVE_REGS, and
 * restores the instruction pointer, as livepatch relies on: the flag is
 * asked for only without it. The accessors' names changed in 6.7.
 */
#include <linux/ftrace.h>

#ifdef CONFIG_HAVE_DYNAMIC_FTRACE_WITH_ARGS
#define CR_FTRACE_ARGS_FLAGS	0
#ifdef CR_HAVE_FTRACE_REGS_GET_ARGUMENT
#define cr_fregs_argument(fregs, n)	ftrace_regs_get_argument(fregs, n)
#define cr_fregs_set_ip(fregs, ip)	ftrace_regs_set_instruction_pointer(fregs, ip)
#else
#define cr_fregs_argument(fregs, n)	regs_get_kernel_argument(&(fregs)->regs, n)
#define cr_fregs_set_ip(fregs, ip)	ftrace_instruction_pointer_set(fregs, ip)
#endif
#else
#define CR_FTRACE_ARGS_FLAGS	FTRACE_OPS_FL_SAVE_REGS
#define cr_fregs_argument(fregs, n)	regs_get_kernel_argument(ftrace_get_regs(fregs), n)
#define cr_fregs_set_ip(fregs, ip)	instruction_pointer_set(ftrace_get_regs(fregs), ip)
#endif

/*
 * The return address of a function stopped at its first instruction (a
 * kprobe at its entry): on top of the stack, where the call pushed it,
 * on x86; in the link register on arm64, which the prologue has not
 * saved yet.
 */
#ifdef CONFIG_X86
#define cr_entry_return_address(regs)	(*(unsigned long *)kernel_stack_pointer(regs))
#else
#define cr_entry_return_address(regs)	procedure_link_pointer(regs)
#endif

/* sysfs hands binary attributes' callbacks a const attribute since 6.17. */
#ifdef CR_HAVE_CONST_BIN_ATTR
#define CR_BIN_ATTR_CONST const
#else
#define CR_BIN_ATTR_CONST
#endif

/*
 * Before 6.3 printk_sprint() calls the console tracepoint as
 * trace_console_rcuidle(), and the rcuidle kind of __DO_TRACE()
 * (include/linux/tracepoint.h) WARNs once when it runs in NMI context with
 * a probe attached, then enters SRCU and context tracking from the NMI
 * all the same: the first line printed in NMI context (sysrq l, a
 * hung-task or RCU-stall backtrace, perf's "interrupt took too long")
 * would panic a machine booted with panic_on_warn. 6.3 dropped the rcuidle
 * call ("printk: Remove trace_.*_rcuidle() usage"). Kbuild probes for it.
 */
#ifdef CR_CONSOLE_TRACEPOINT_RCUIDLE
#define CR_CONSOLE_TRACEPOINT_IN_NMI false
#else
#define CR_CONSOLE_TRACEPOINT_IN_NMI true
#endif

#endif /* CRASHRING_COMPAT_H */
