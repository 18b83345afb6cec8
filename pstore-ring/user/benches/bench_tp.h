/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* LTTng-UST tracepoints with the payloads benches/writers.c records. */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER crashring_bench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./bench_tp.h"

#if !defined(BENCH_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define BENCH_TP_H

#include <stdint.h>
#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(crashring_bench, p8,
	LTTNG_UST_TP_ARGS(uint64_t, v),
	LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(uint64_t, v, v)))

LTTNG_UST_TRACEPOINT_EVENT(crashring_bench, p64,
	LTTNG_UST_TP_ARGS(const uint8_t *, p),
	LTTNG_UST_TP_FIELDS(lttng_ust_field_array(uint8_t, p, p, 64)))

#endif

#include <lttng/tracepoint-event.h>
