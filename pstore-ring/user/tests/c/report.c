// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * Asks for a report through crashring_user.h: report REASON [STREAM]
 * prints "rc R bundle B events E copy C why W", C being the copy's first
 * bytes (or "none").
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "crashring_user.h"

int main(int argc, char **argv)
{
	struct crashring_report r;
	const char *streams[1];
	char copy[16] = "none";
	int rc;

	if (argc < 2)
		return 2;
	if (argc > 2) {
		streams[0] = argv[2];
		rc = crashring_request_report_of(argv[1], streams, 1, 1, &r);
	} else {
		rc = crashring_request_report(argv[1], &r);
	}
	if (r.copy_fd >= 0) {
		ssize_t n = pread(r.copy_fd, copy, sizeof(copy) - 1, 0);

		copy[n > 0 ? n : 0] = 0;
		close(r.copy_fd);
	}
	printf("rc %d bundle %s events %llu copy %s why %s\n", rc, r.bundle,
	       (unsigned long long)r.events, copy, r.why);
	return 0;
}
