// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * A compositor's logging, for tests/wlroots.rs: wlroots' own wlr_log()
 * through examples/wlr_log.c into a region at argv[1].
 */
#include <wlr/util/log.h>
#include "crashring_user.h"

void crashring_wlr_log_init(struct crashring_recorder *rec, enum wlr_log_importance verbosity);
void crashring_wlr_log_thread_exit(void);

int main(int argc, char **argv)
{
	struct crashring_user_config cfg = { .name = "compositor", .streams = 1 };
	struct crashring_recorder *rec;

	if (argc != 2)
		return 2;
	cfg.path = argv[1];
	rec = crashring_recorder_create(&cfg);
	if (!rec) {
		perror("crashring_recorder_create");
		return 1;
	}
	crashring_wlr_log_init(rec, WLR_INFO);
	wlr_log(WLR_INFO, "output %s enabled at %dx%d", "HDMI-A-1", 1920, 1080);
	wlr_log(WLR_DEBUG, "below the verbosity: %d", 1);
	wlr_log(WLR_ERROR, "page flip failed: %d", -16);
	crashring_wlr_log_thread_exit();
	crashring_recorder_destroy(rec);
	return 0;
}
