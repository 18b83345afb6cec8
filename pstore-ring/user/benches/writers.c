// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The user-space writers side by side in one process, for benches/user.rs:
 * crashring-user's C API, LTTng-UST tracepoints and tracef(), write() to
 * /dev/null (a system call per event, the floor of any write()-based
 * recorder such as /dev/crashring's markers), and the clock read both
 * writers make per event (CLOCK_MONOTONIC through the vDSO); and what a
 * log line of a category that is switched off costs (its bit tested,
 * nothing formatted), beside a call of an empty function.
 *
 *   writers REGION N RUNS
 *
 * Each run writes N events of each kind; the kinds alternate within every
 * run so that the machine's state changes hit them alike. Prints, per
 * kind, the median ns/event of the runs, then how many events each
 * crashring stream was given, for the harness to check in the region.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <lttng/tracef.h>
#include "bench_tp.h"
#include "crashring_user.h"

#define KINDS 10
#define MAX_RUNS 31

static const char *const names[KINDS] = {
	"crashring 8", "lttng 8", "crashring 64", "lttng 64",
	"crashring line", "lttng line", "write() 8", "clock",
	"disabled line", "empty call",
};

/* The bench's categories: "input" is off. */
enum { FRAME, INPUT };
static const char *const categories[] = { [FRAME] = "frame", [INPUT] = "input" };

/* A call the compiler must make, and that does nothing. */
__attribute__((noinline)) static void empty(uint64_t v)
{
	__asm__ volatile("" : : "r"(v) : "memory");
}

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	struct crashring_user_config cfg = {
		.name = "bench", .streams = 3, .pages_per_stream = 64,
		.categories = categories, .ncategories = 2, .categories_off = 1 << INPUT,
	};
	const uint64_t *enabled;
	struct crashring_recorder *rec;
	struct crashring_stream *s[3];
	static double took[KINDS][MAX_RUNS];
	uint8_t payload[64];
	volatile double sink = 0;
	unsigned long n, i;
	int runs, r, k, null_fd;

	if (argc != 4)
		return 2;
	cfg.path = argv[1];
	n = strtoul(argv[2], NULL, 10);
	runs = atoi(argv[3]);
	if (n == 0 || runs < 1 || runs > MAX_RUNS)
		return 2;
	rec = crashring_recorder_create(&cfg);
	null_fd = open("/dev/null", O_WRONLY);
	if (!rec || null_fd < 0) {
		perror("setup");
		return 1;
	}
	for (k = 0; k < 3; k++)
		s[k] = crashring_stream_get(rec);
	enabled = crashring_recorder_enabled(rec);
	memset(payload, 0xA5, sizeof(payload));

	for (r = 0; r < runs; r++) {
		for (k = 0; k < KINDS; k++) {
			double t0 = now_ns();

			for (i = 0; i < n; i++) {
				uint64_t v = i;

				switch (k) {
				case 0:
					if (crashring_write(s[0], 40, &v, sizeof(v)))
						return 3;
					break;
				case 1:
					lttng_ust_tracepoint(crashring_bench, p8, v);
					break;
				case 2:
					if (crashring_write(s[1], 41, payload, sizeof(payload)))
						return 3;
					break;
				case 3:
					lttng_ust_tracepoint(crashring_bench, p64, payload);
					break;
				case 4:
					if (crashring_log(s[2], 6, "bench", "frame %lu took %d us", i, 16))
						return 3;
					break;
				case 5:
					lttng_ust_tracef("frame %lu took %d us", i, 16);
					break;
				case 6:
					if (write(null_fd, &v, sizeof(v)) != sizeof(v))
						return 3;
					break;
				case 7:
					sink += now_ns();
					break;
				case 8:
					if (crashring_enabled(enabled, INPUT) &&
					    crashring_log(s[2], 7, "input", "pointer %lu", i))
						return 3;
					break;
				case 9:
					empty(v);
					break;
				}
			}
			took[k][r] = (now_ns() - t0) / n;
		}
	}
	for (k = 0; k < KINDS; k++) {
		qsort(took[k], runs, sizeof(double), cmp);
		printf("%s %.2f\n", names[k], took[k][runs / 2]);
	}
	printf("written %lu\n", n * runs);
	for (k = 0; k < 3; k++)
		crashring_stream_put(s[k]);
	crashring_recorder_destroy(rec);
	return 0;
}
