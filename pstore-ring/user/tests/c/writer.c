// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * A C program recording through crashring_user.h, for tests/c_api.rs.
 *
 *   writer PATH THREADS COUNT   each thread logs COUNT lines and frames,
 *                               then the recorder ends cleanly
 *   writer PATH THREADS 0       until killed; every 1024th pair, prints
 *                               "THREAD I" once line and frame I are
 *                               committed
 *   writer PATH busy            a second stream of one is refused
 *   writer PATH categories      prints which of three categories are on
 *                               (the middle one off by default), then
 *                               whether a bad name is refused with EINVAL
 *
 * Every thread holds its stream before any writes: a thread that finished
 * and put its stream back before another took one would hand it on, and
 * the two would share a stream (as the API means them to).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "crashring_user.h"

struct frame {
	uint64_t seq;
	char output[8];
} __attribute__((packed));

static const struct crashring_field_def frame_fields[] = {
	{ "seq", CRASHRING_FIELD_U64, 0 },
	{ "output", CRASHRING_FIELD_CHARS, 8 },
};

static const struct crashring_event_def events[] = {
	{ 32, "frame", 2, frame_fields },
};

static struct crashring_recorder *rec;
static unsigned long long count;
static pthread_barrier_t all_held;

static void *run(void *arg)
{
	long t = (long)arg;
	struct crashring_stream *s = crashring_stream_get(rec);
	unsigned long long i;

	if (!s) {
		perror("crashring_stream_get");
		exit(1);
	}
	pthread_barrier_wait(&all_held);
	for (i = 0; count == 0 || i < count; i++) {
		struct frame f = { .seq = i };

		memcpy(f.output, "HDMI-A-1", 8);
		if (crashring_log(s, 6, "render", "thread %ld line %llu", t, i) ||
		    crashring_write(s, 32, &f, sizeof(f))) {
			fprintf(stderr, "event %llu dropped\n", i);
			exit(1);
		}
		if (count == 0 && i % 1024 == 0) {
			printf("%ld %llu\n", t, i);
			fflush(stdout);
		}
	}
	crashring_stream_put(s);
	return NULL;
}

int main(int argc, char **argv)
{
	struct crashring_user_config cfg = {
		.name = "cwriter",
		.pages_per_stream = 8,
		.nevents = 1,
		.events = events,
	};
	pthread_t threads[16];
	long t, n;

	if (argc != 4 && argc != 3)
		return 2;
	cfg.path = argv[1];
	if (strcmp(argv[2], "categories") == 0) {
		static const char *const names[] = { "render", "input", "drm" };
		static const char *const bad[] = { "render", "has space" };
		const uint64_t *on;

		cfg.categories = names;
		cfg.ncategories = 3;
		cfg.categories_off = 1 << 1;
		rec = crashring_recorder_create(&cfg);
		on = rec ? crashring_recorder_enabled(rec) : NULL;
		if (!on)
			return 1;
		printf("%d%d%d%d\n", crashring_enabled(on, 0), crashring_enabled(on, 1),
		       crashring_enabled(on, 2), crashring_enabled(on, 3));
		crashring_recorder_destroy(rec);
		cfg.path = NULL;
		cfg.categories = bad;
		cfg.ncategories = 2;
		rec = crashring_recorder_create(&cfg);
		puts(!rec && errno == EINVAL ? "EINVAL" : "accepted");
		return 0;
	}
	if (strcmp(argv[2], "busy") == 0) {
		cfg.streams = 1;
		rec = crashring_recorder_create(&cfg);
		if (!rec || !crashring_stream_get(rec))
			return 1;
		if (crashring_stream_get(rec) || errno != EBUSY)
			return 1;
		puts("EBUSY");
		return 0;
	}
	n = atol(argv[2]);
	if (n < 1 || n > 16 || argc != 4)
		return 2;
	count = strtoull(argv[3], NULL, 10);
	cfg.streams = n;
	rec = crashring_recorder_create(&cfg);
	if (!rec) {
		perror("crashring_recorder_create");
		return 3;
	}
	pthread_barrier_init(&all_held, NULL, n);
	for (t = 0; t < n; t++)
		pthread_create(&threads[t], NULL, run, (void *)t);
	for (t = 0; t < n; t++)
		pthread_join(threads[t], NULL);
	crashring_recorder_destroy(rec);
	return 0;
}
