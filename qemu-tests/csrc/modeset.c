// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The drm-flight-recorder scenario's guest program: modesets through the
 * kernel's own KMS ioctls, no library between, as a compositor's first
 * frames do.
 *
 *   modeset CARD N
 *	finds CARD's first connected connector and a CRTC, makes a dumb
 *	buffer as large as its largest mode, then sets N modes on the
 *	CRTC, alternating between its first two, and prints
 *	"crashring-test: modeset N done" (or what failed)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
/* The kernel's DRM uapi, as libdrm-dev installs it (no libdrm code). */
#include <drm.h>
#include <drm_mode.h>

static int fail(const char *what)
{
	printf("crashring-test: modeset failed: %s: %s\n", what, strerror(errno));
	return 1;
}

static void *array(uint32_t n, size_t size)
{
	return calloc(n ? n : 1, size);
}

int main(int argc, char **argv)
{
	struct drm_mode_card_res res = { 0 };
	struct drm_mode_modeinfo *modes = NULL;
	struct drm_mode_create_dumb dumb = { 0 };
	struct drm_mode_fb_cmd fb = { 0 };
	uint32_t *crtcs, *connectors, conn_id = 0, nmodes = 0, i;
	int fd, n;

	if (argc != 3)
		return fprintf(stderr, "usage: modeset CARD N\n"), 2;
	n = atoi(argv[2]);
	fd = open(argv[1], O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return fail(argv[1]);
	if (ioctl(fd, DRM_IOCTL_MODE_GETRESOURCES, &res))
		return fail("GETRESOURCES");
	crtcs = array(res.count_crtcs, sizeof(*crtcs));
	connectors = array(res.count_connectors, sizeof(*connectors));
	res.crtc_id_ptr = (uintptr_t)crtcs;
	res.connector_id_ptr = (uintptr_t)connectors;
	res.count_fbs = res.count_encoders = 0;
	if (ioctl(fd, DRM_IOCTL_MODE_GETRESOURCES, &res) || !res.count_crtcs)
		return fail("GETRESOURCES (ids)");
	for (i = 0; i < res.count_connectors && !conn_id; i++) {
		struct drm_mode_get_connector c = { .connector_id = connectors[i] };

		/* The first call probes the connector and counts its modes. */
		if (ioctl(fd, DRM_IOCTL_MODE_GETCONNECTOR, &c))
			return fail("GETCONNECTOR");
		if (c.connection != 1 || !c.count_modes)
			continue;
		modes = array(c.count_modes, sizeof(*modes));
		c.modes_ptr = (uintptr_t)modes;
		c.count_props = c.count_encoders = 0;
		if (ioctl(fd, DRM_IOCTL_MODE_GETCONNECTOR, &c))
			return fail("GETCONNECTOR (modes)");
		conn_id = connectors[i];
		nmodes = c.count_modes;
	}
	if (!conn_id)
		return errno = ENODEV, fail("no connected connector");
	for (i = 0; i < nmodes && i < 2; i++) {
		if (modes[i].hdisplay > dumb.width)
			dumb.width = modes[i].hdisplay;
		if (modes[i].vdisplay > dumb.height)
			dumb.height = modes[i].vdisplay;
	}
	dumb.bpp = 32;
	if (ioctl(fd, DRM_IOCTL_MODE_CREATE_DUMB, &dumb))
		return fail("CREATE_DUMB");
	fb.width = dumb.width;
	fb.height = dumb.height;
	fb.pitch = dumb.pitch;
	fb.bpp = 32;
	fb.depth = 24;
	fb.handle = dumb.handle;
	if (ioctl(fd, DRM_IOCTL_MODE_ADDFB, &fb))
		return fail("ADDFB");
	for (i = 0; i < (uint32_t)n; i++) {
		struct drm_mode_crtc crtc = {
			.crtc_id = crtcs[0],
			.fb_id = fb.fb_id,
			.set_connectors_ptr = (uintptr_t)&conn_id,
			.count_connectors = 1,
			.mode = modes[nmodes > 1 ? i % 2 : 0],
			.mode_valid = 1,
		};

		if (ioctl(fd, DRM_IOCTL_MODE_SETCRTC, &crtc))
			return fail("SETCRTC");
	}
	printf("crashring-test: modeset %d done\n", n);
	return 0;
}
