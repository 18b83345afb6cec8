// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * What the compositor-crash guest program's files share: compositor.c's
 * helpers for the security checks, and the checks userns.c holds.
 */
#ifndef COMPOSITOR_H
#define COMPOSITOR_H

#include <stddef.h>
#include <sys/types.h>

#define DEVICE "/dev/crashring"

/* Prints "crashring-test: security NAME RESULT". */
void say(const char *name, const char *result);
/* An errno's name, or "ok" for 0. */
const char *err_name(int e);
/* Drops to @uid, @gid and @groups, or exits. */
void become(uid_t uid, gid_t gid, const gid_t *groups, int ngroups);
/* A pool stream by the raw ioctl: the open file, its size in *bytes. */
int raw_stream(const char *name, size_t *bytes, int *err);

/* userns.c */
void namespaced_ids(uid_t uid, gid_t gid);
void root_made_namespace(gid_t gid);

#endif
