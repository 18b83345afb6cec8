// SPDX-License-Identifier: MIT OR Apache-2.0
/* The LTTng-UST probes of bench_tp.h, in a unit of their own. */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "bench_tp.h"
