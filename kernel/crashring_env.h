/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The few primitives the ring code needs. In the kernel they come from the
 * kernel's headers; the user-space build that tests the ring code against
 * the Rust reader supplies crashring_user_env.h instead (qemu-tests/csrc).
 */
#ifndef CRASHRING_ENV_H
#define CRASHRING_ENV_H

#ifdef __KERNEL__

#include <linux/types.h>
#include <linux/stddef.h>
#include <linux/string.h>
#include <linux/errno.h>
#include <linux/compiler.h>
#include <linux/crc32.h>
#include <linux/rcupdate.h>
#include <linux/libnvdimm.h>
#include <asm/barrier.h>
#include <asm/local.h>
#include <asm/processor.h>

#ifdef CONFIG_X86_64
#include <asm/cpufeature.h>
#endif
/* The debug source's argument encoder (crashring_debug_args.c). */
#include <linux/ctype.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/limits.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/stdarg.h>
#include <linux/uaccess.h>
#include "crashring_crc.h"

/*
 * The format's CRC-32C, raw (crashring_crc.h); lib/crc32's without SSE4.2,
 * named __crc32c_le() before 6.15 and crc32c() since (Kbuild probes).
 * cpu_feature_enabled() is static_cpu_has() where the feature can be
 * present, and outlived it.
 */
static inline u32 cr_crc32(u32 crc, const void *p, size_t len)
{
#ifdef CONFIG_X86_64
	if (cpu_feature_enabled(X86_FEATURE_XMM4_2))
		return cr_crc32c_sse42(crc, p, len);
#endif
#ifdef CR_HAVE_CRC32C_LE
	return __crc32c_le(crc, p, len);
#else
	return crc32c(crc, p, len);
#endif
}

/* Orders the ring's stores for a reader on another CPU or after a crash. */
#define cr_wmb()		smp_wmb()
/* Orders the panic path's reads of a stopped CPU's stores (pairs with cr_wmb). */
#define cr_rmb()		smp_rmb()
#define cr_try_enter(l)		(local_cmpxchg((l), 0, 1) == 0)
#define cr_leave(l)		local_set((l), 0)
#define cr_local_inc(l)		local_inc(l)
#define cr_local_inc_return(l)	local_inc_return(l)
#define cr_local_dec(l)		local_dec(l)
#define cr_local_take(l)	local_xchg((l), 0)
#define cr_local_read(l)	local_read(l)
/* The callsite area's cursor, shared by every CPU. */
typedef atomic_t cr_cursor_t;
#define cr_cursor_read(c)	atomic_read(c)
#define cr_cursor_set(c, v)	atomic_set((c), (v))
#define cr_cursor_try(c, old, new)	atomic_try_cmpxchg((c), (old), (new))
/*
 * Writers record with preemption off (crashring_this_cpu()), so an RCU
 * grace period waits for every one that started before it.
 */
#define cr_sync_writers()	synchronize_rcu()
#define cr_cpu_relax()		cpu_relax()
/* The pmem driver's way to make stores durable (CLWB on x86), and its fence. */
#define cr_write_back(p, len)	arch_wb_cache_pmem((void *)(p), (len))
#define cr_persist_fence()	pmem_wmb()
/*
 * The live snapshot's reads of the region: on persistent memory a poisoned
 * line makes a plain load a machine check, which copy_mc_to_kernel() turns
 * into an error (as the pmem driver reads); on RAM it is a memcpy().
 */
#define cr_copy_live(dst, src, n)	(copy_mc_to_kernel((dst), (src), (n)) ? -EIO : 0)
/* Where the user-space tests stop a writer as a crash would; nothing here. */
#define cr_stop_point()		do { } while (0)
/*
 * Where crashring_stop_all() is about to close a stream's page: the
 * user-space tests let a writer enter there after the stop; nothing here.
 */
#define cr_stop_all_closing(s)	((void)(s))

#else

#include "crashring_user_env.h"

#endif /* __KERNEL__ */

#endif /* CRASHRING_ENV_H */
