/* SPDX-License-Identifier: GPL-2.0 */
/*
 * User-space stand-ins for the kernel primitives the ring code uses
 * (kernel/crashring_env.h), so `cargo test` can build and drive it.
 */
#ifndef CRASHRING_USER_ENV_H
#define CRASHRING_USER_ENV_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <stdbool.h>
#include <errno.h>
#include <time.h>

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
typedef struct {
	long v;
} local_t;

#include "crashring_crc.h"

/*
 * The module's own SSE4.2 loop where the CPU has it, so the tests check
 * it; else the test harness's (crc32c), so there is one CRC.
 */
u32 crashring_user_crc32(u32 crc, const void *p, size_t len);

static inline u32 cr_crc32(u32 crc, const void *p, size_t len)
{
#ifdef __x86_64__
	if (__builtin_cpu_supports("sse4.2"))
		return cr_crc32c_sse42(crc, p, len);
#endif
	return crashring_user_crc32(crc, p, len);
}

#define READ_ONCE(x)		(*(const volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, v)	(*(volatile __typeof__(x) *)&(x) = (v))
#define cr_wmb()		__atomic_thread_fence(__ATOMIC_RELEASE)
#define cr_rmb()		__atomic_thread_fence(__ATOMIC_ACQUIRE)

static inline bool cr_try_enter(local_t *l)
{
	long zero = 0;

	/*
	 * Sequentially consistent, so that with cr_sync_writers() below it
	 * forms the store-then-load pairing crashring_stop_all() needs: a
	 * writer either sees `stopped` or is seen busy. (The kernel gets the
	 * same from an RCU grace period.)
	 */
	return __atomic_compare_exchange_n(&l->v, &zero, 1, false, __ATOMIC_SEQ_CST,
					   __ATOMIC_RELAXED);
}

#define cr_leave(l)		__atomic_store_n(&(l)->v, 0, __ATOMIC_RELEASE)
#define cr_local_inc(l)		__atomic_add_fetch(&(l)->v, 1, __ATOMIC_RELAXED)
#define cr_local_inc_return(l)	__atomic_add_fetch(&(l)->v, 1, __ATOMIC_SEQ_CST)
#define cr_local_dec(l)		__atomic_sub_fetch(&(l)->v, 1, __ATOMIC_SEQ_CST)
#define cr_local_take(l)	__atomic_exchange_n(&(l)->v, 0, __ATOMIC_RELAXED)
#define cr_local_read(l)	__atomic_load_n(&(l)->v, __ATOMIC_ACQUIRE)
typedef struct {
	int v;
} cr_cursor_t;
#define cr_cursor_read(c)	__atomic_load_n(&(c)->v, __ATOMIC_RELAXED)
#define cr_cursor_set(c, n)	__atomic_store_n(&(c)->v, (n), __ATOMIC_RELAXED)
#define cr_cursor_try(c, old, n) \
	__atomic_compare_exchange_n(&(c)->v, (old), (n), false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)
#define cr_sync_writers()	__atomic_thread_fence(__ATOMIC_SEQ_CST)
/*
 * A user-space writer is a thread the scheduler may hold off for a long
 * time on a loaded machine (a kernel writer runs with preemption off and
 * leaves within microseconds). Waiting in 100 us sleeps makes the spin
 * budget in crashring_stop_all() last about 100 s instead of the second
 * sched_yield() gave, so a preempted writer is waited for, not taken for
 * one that died inside a record.
 */
static inline void cr_cpu_relax(void)
{
	struct timespec t = { .tv_sec = 0, .tv_nsec = 100000 };

	nanosleep(&t, NULL);
}

/* Lets a test see what the ring code wrote back (ring_shim.c). */
void crashring_user_wrote_back(const void *p, size_t len);

/*
 * Writes cache lines back as the kernel's arch_wb_cache_pmem() does: CLWB
 * where the CPU has it, else CLFLUSH (which also evicts the line).
 */
static inline void cr_write_back(const void *p, size_t len)
{
	const char *end = (const char *)p + len;
	const char *line = (const char *)((uintptr_t)p & ~(uintptr_t)63);

	crashring_user_wrote_back(p, len);
#if defined(__x86_64__)
	if (__builtin_cpu_supports("clwb")) {
		for (; line < end; line += 64)
			__asm__ volatile("clwb %0" : "+m"(*(volatile char *)line));
		return;
	}
	for (; line < end; line += 64)
		__asm__ volatile("clflush %0" : "+m"(*(volatile char *)line));
#else
	(void)end;
	(void)line;
#endif
}

#if defined(__x86_64__)
#define cr_persist_fence()	__asm__ volatile("sfence" ::: "memory")
#else
#define cr_persist_fence()	__atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

/* Lets a test stop the writer at each ordered step of opening a page. */
void crashring_user_stop_point(void);
#define cr_stop_point()		crashring_user_stop_point()

/* Lets a test enter a writer just before crashring_stop_all() closes a page. */
struct crashring_stream;
void crashring_user_stop_all_closing(struct crashring_stream *s);
#define cr_stop_all_closing(s)	crashring_user_stop_all_closing(s)

/*
 * What the debug source's argument encoder (crashring_debug_args.c) takes
 * from the kernel: ctype, snprintf, the nofault copy (a plain one here:
 * the tests hand it readable strings) and the kernel's min/max helpers.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>

#define PAGE_SIZE		4096UL
#define offset_in_page(p)	((unsigned long)(p) & (PAGE_SIZE - 1))
#define MAX_ERRNO		4095
#define IS_ERR_VALUE(x)		((unsigned long)(void *)(x) >= (unsigned long)-MAX_ERRNO)
#define U16_MAX			((u16)~0U)
#define U32_MAX			((u32)~0U)
#define U64_MAX			((u64)~0ULL)
#define INT_MAX			__INT_MAX__
/* Each argument evaluated once, as the kernel's are. */
#define min(a, b)		({ __typeof__(a) a__ = (a); __typeof__(b) b__ = (b); a__ < b__ ? a__ : b__; })
#define max(a, b)		({ __typeof__(a) a__ = (a); __typeof__(b) b__ = (b); a__ > b__ ? a__ : b__; })
#define min_t(t, a, b)		min((t)(a), (t)(b))
#define max_t(t, a, b)		max((t)(a), (t)(b))
#define min3(a, b, c)		min(min(a, b), c)
#define scnprintf(buf, size, ...)					\
	({								\
		int n__ = snprintf((buf), (size), __VA_ARGS__);		\
		n__ < 0 ? 0 : (size_t)n__ >= (size) ? (int)(size) - 1 : n__;	\
	})

/* The snapshot's reads of the live region: plain memory here, never poisoned. */
static inline int cr_copy_live(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
	return 0;
}

static inline long copy_from_kernel_nofault(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
	return 0;
}

#endif /* CRASHRING_USER_ENV_H */
