/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The few primitives the ring code needs, for the kernel and for the
 * user-space build that tests it against the Rust reader. This is the only
 * file that knows which of the two it is built for.
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
#include <asm/barrier.h>
#include <asm/local.h>

typedef local_t cr_local_t;

static inline u32 cr_crc32(u32 crc, const void *p, size_t len)
{
	return crc32_le(crc, p, len);
}

/* Orders the ring's stores for a reader on another CPU or after a crash. */
#define cr_wmb()		smp_wmb()
#define cr_try_enter(l)		(local_cmpxchg((l), 0, 1) == 0)
#define cr_leave(l)		local_set((l), 0)
#define cr_local_inc(l)		local_inc(l)
#define cr_local_take(l)	local_xchg((l), 0)
#define cr_local_read(l)	local_read(l)

#else /* user space */

#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <stdbool.h>
#include <errno.h>

typedef uint8_t __u8;
typedef uint16_t __u16;
typedef uint32_t __u32;
typedef uint64_t __u64;
typedef int64_t __s64;
typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int64_t s64;
typedef long cr_local_t;

/* Supplied by the test harness (crc32fast), so there is one CRC. */
u32 crashring_user_crc32(u32 crc, const void *p, size_t len);
#define cr_crc32(crc, p, len)	crashring_user_crc32((crc), (p), (len))

#define READ_ONCE(x)		(*(const volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, v)	(*(volatile __typeof__(x) *)&(x) = (v))
#define cr_wmb()		__atomic_thread_fence(__ATOMIC_RELEASE)
static inline bool cr_try_enter(cr_local_t *l)
{
	long zero = 0;

	return __atomic_compare_exchange_n(l, &zero, 1, false,
					   __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}
#define cr_leave(l)		__atomic_store_n((l), 0, __ATOMIC_RELEASE)
#define cr_local_inc(l)		__atomic_add_fetch((l), 1, __ATOMIC_RELAXED)
#define cr_local_take(l)	__atomic_exchange_n((l), 0, __ATOMIC_RELAXED)
#define cr_local_read(l)	__atomic_load_n((l), __ATOMIC_RELAXED)

#endif /* __KERNEL__ */

#endif /* CRASHRING_ENV_H */
