// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The compositor-crash guest program's checks of user namespaces against
 * the stream quota: whose quota the ids of a namespace count against
 * (crashring_charged_uid() in the module). Called by `compositor
 * security`, in compositor.c, whose helpers they share (compositor.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "compositor.h"

/* Root maps 65536 ids from 100000 into the user namespace @child made. */
static int map_ids(pid_t child)
{
	char path[64];
	int fd, ok;

	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)child);
	fd = open(path, O_WRONLY);
	ok = fd >= 0 && write(fd, "0 100000 65536\n", 15) == 15;
	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

/* A byte through a pipe's end, and one waited for: -1 once the other side is gone. */
static int tell(int fd)
{
	char byte = 0;

	return write(fd, &byte, 1) == 1 ? 0 : -1;
}

static int hear(int fd)
{
	char byte;

	return read(fd, &byte, 1) == 1 ? 0 : -1;
}

/*
 * The member holds its two streams, then makes a user namespace into
 * which root maps 65536 ids of its own (as newuidmap maps a member's
 * /etc/subuid range), and asks for a third stream as one of them: every
 * id of the namespace counts against the member's quota, so it is
 * refused. Each id on a quota of its own would take the whole pool.
 */
void namespaced_ids(uid_t uid, gid_t gid)
{
	int ready[2], mapped[2], fd, fd2, err, status;
	size_t bytes;
	pid_t child;

	if (pipe(ready) || pipe(mapped)) {
		say("quota-userns", "no-pipe");
		return;
	}
	child = fork();
	if (child == 0) {
		close(ready[0]);
		close(mapped[1]);
		become(uid, uid, &gid, 1);
		fd = raw_stream("first", &bytes, &err);
		fd2 = raw_stream("second", &bytes, &err);
		if (fd < 0 || fd2 < 0) {
			say("quota-userns", "no-streams");
			exit(1);
		}
		if (unshare(CLONE_NEWUSER)) {
			say("quota-userns", err_name(errno));
			exit(1);
		}
		if (tell(ready[1]) || hear(mapped[0]) || setresuid(5, 5, 5)) {
			say("quota-userns", "not-mapped");
			exit(1);
		}
		fd = raw_stream("namespaced", &bytes, &err);
		say("quota-userns", err_name(err));
		exit(0);
	}
	close(ready[1]);
	close(mapped[0]);
	if (!hear(ready[0]) && map_ids(child))
		perror("quota-userns: uid_map");
	tell(mapped[1]);
	close(ready[0]);
	close(mapped[1]);
	waitpid(child, &status, 0);
}

/*
 * Root makes a user namespace (as a service's PrivateUsers= or a
 * container manager does), maps 65536 ids into it, and one of them holds
 * two streams: a namespace root made is no user's, so its ids are not
 * charged to root, and root may still take a stream of its own.
 */
void root_made_namespace(gid_t gid)
{
	int ready[2], mapped[2], done[2], fd, fd2, err, status;
	size_t bytes;
	pid_t child;

	if (pipe(ready) || pipe(mapped) || pipe(done)) {
		say("quota-root-ns", "no-pipe");
		return;
	}
	child = fork();
	if (child == 0) {
		close(ready[0]);
		close(mapped[1]);
		close(done[1]);
		if (setgroups(1, &gid) || unshare(CLONE_NEWUSER)) {
			say("quota-root-ns", err_name(errno));
			exit(1);
		}
		if (tell(ready[1]) || hear(mapped[0]) || setresuid(5, 5, 5)) {
			say("quota-root-ns", "not-mapped");
			exit(1);
		}
		fd = raw_stream("container", &bytes, &err);
		fd2 = raw_stream("container-2", &bytes, &err);
		if (fd < 0 || fd2 < 0) {
			say("quota-root-ns", err_name(err));
			exit(1);
		}
		tell(ready[1]);
		hear(done[0]);
		exit(0);
	}
	close(ready[1]);
	close(mapped[0]);
	close(done[0]);
	if (!hear(ready[0]) && map_ids(child))
		perror("quota-root-ns: uid_map");
	tell(mapped[1]);
	if (!hear(ready[0])) {
		fd = raw_stream("root-beside", &bytes, &err);
		say("quota-root-ns", err_name(err));
		if (fd >= 0)
			close(fd);
	}
	tell(done[1]);
	close(ready[0]);
	close(mapped[1]);
	close(done[1]);
	waitpid(child, &status, 0);
}
