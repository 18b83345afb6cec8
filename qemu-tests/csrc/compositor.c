// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The compositor-crash scenario's guest program, built against
 * crashring_user.h and the crashring-user library. Started as root, it
 * drops to the users it is told.
 *
 *   compositor security UID GID OUTSIDER
 *	checks what an unprivileged program may and may not do with
 *	/dev/crashring, as a member (UID, in group GID) and as OUTSIDER (in
 *	no group), then floods markers and a stream for two seconds as the
 *	member; prints "crashring-test: security NAME RESULT" lines; then
 *	the per-user marker budget: two members flood CPU 1 for ten seconds
 *	beside a third writing once a second ("crashring-test: budget ...")
 *   compositor summary UID
 *	on the boot after a crash: whether previous_summary's crash message
 *	is shown to root ("crashring-test: security summary-root R") and
 *	hidden from a descriptor UID opened and root reads ("... summary-opener
 *	R"), the view being its opener's
 *   compositor fresh
 *	takes a stream, fills its whole mapping with a pattern, releases
 *	it, takes the same pool stream again and prints "crashring-test:
 *	security fresh-header R" (whether the mapping starts with the page
 *	header the module wrote for it) and "... fresh-stale R" (whether any
 *	of the pattern survived); security runs the same as the member
 *   compositor run UID GID
 *	as the member, records "frame N" lines into a kernel stream named
 *	"compositor" until the machine goes down; every 500 frames, an
 *	ordering point: a marker "ordering point K" through /dev/crashring,
 *	then the line "after ordering point K". Its categories: "render"
 *	(the frames, on by default) and "input" (off by default: a line
 *	"pointer at frame N" after each frame, while `crashring debug`
 *	selects it); each tested before anything is formatted
 *   compositor set-user-id UID GID RUID
 *	as a program set-user-ID to the member (UID, in group GID) that RUID
 *	runs (real uid RUID, effective UID): takes a kernel stream named
 *	"set-user-id", writes a line, prints "crashring-test: set-user-id
 *	holding" and holds the stream until the machine goes down
 *   compositor report UID GID NAME FRAMES COPY
 *	as the member, records FRAMES "frame N" lines and "atomic commit
 *	failed" into a kernel stream NAME, then, still holding it, asks
 *	crashring-request.socket for a report of that stream with a copy
 *	(crashring_request_report_of()), which it writes to the new file
 *	COPY, and prints "crashring-test: report rc R bundle B events E copy
 *	C ms T" (C: the copy's size, or -1; T: how long the call took)
 *   compositor hang-ups UID N
 *	as UID (in no group: anyone may connect), opens N connections to
 *	crashring-request.socket as fast as it can and closes each without
 *	asking, and prints "crashring-test: hang-ups N connected C" (C: the
 *	connections made); a flood that must leave the socket serving
 *   compositor bench N
 *	times N events of 8 bytes into a kernel stream, then N write()s of
 *	8 bytes to /dev/crashring, and prints
 *	"crashring-cost: stream what=W ns=NS events=N" for each
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/types.h>
#include <stddef.h>
#include "crashring_format.h"
#include "crashring_uapi.h"
#include "crashring_user.h"
#include "compositor.h"



void say(const char *name, const char *result)
{
	printf("crashring-test: security %s %s\n", name, result);
	fflush(stdout);
}

const char *err_name(int e)
{
	switch (e) {
	case 0: return "ok";
	case EACCES: return "EACCES";
	case EINVAL: return "EINVAL";
	case EPERM: return "EPERM";
	case EBUSY: return "EBUSY";
	case EDQUOT: return "EDQUOT";
	case EBADF: return "EBADF";
	case EAGAIN: return "EAGAIN";
	case E2BIG: return "E2BIG";
	default: return strerror(e);
	}
}

void become(uid_t uid, gid_t gid, const gid_t *groups, int ngroups)
{
	if (setgroups(ngroups, groups) || setgid(gid) || setuid(uid)) {
		perror("dropping privileges");
		exit(1);
	}
}

/* A stream by the raw ioctl: the open file, and its size in *bytes. */
int raw_stream(const char *name, size_t *bytes, int *err)
{
	struct crashring_user_stream req = { 0 };
	int fd = open(DEVICE, O_RDWR);

	*err = fd < 0 ? errno : 0;
	if (fd < 0)
		return -1;
	strncpy(req.name, name, sizeof(req.name) - 1);
	if (ioctl(fd, CRASHRING_IOC_USER_STREAM, &req)) {
		*err = errno;
		close(fd);
		return -1;
	}
	*bytes = req.bytes;
	return fd;
}

static int map_err(int fd, size_t len, int prot, int flags, off_t off)
{
	void *p = mmap(NULL, len, prot, flags, fd, off);

	if (p == MAP_FAILED)
		return errno;
	munmap(p, len);
	return 0;
}

/* What one holder leaves in its stream for the next to look for. */
#define STALE "crSTALE!"

/* Takes a pool stream, maps it; NULL on failure, with the error said as @what. */
static char *take_mapped(const char *what, struct crashring_user_stream *req, int *fd)
{
	char *p;

	*fd = open(DEVICE, O_RDWR);
	if (*fd < 0 || ioctl(*fd, CRASHRING_IOC_USER_STREAM, req)) {
		say(what, err_name(errno));
		return NULL;
	}
	p = mmap(NULL, req->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	if (p == MAP_FAILED) {
		say(what, err_name(errno));
		close(*fd);
		return NULL;
	}
	return p;
}

/*
 * A holder fills its whole stream, headers and data, with STALE and
 * releases it; the next holder of the same pool stream (the lowest free
 * one, both times) must map the page header the module wrote for it
 * (not the bytes before its pages) and nothing of the first holder's.
 */
static void fresh(void)
{
	struct crashring_user_stream first = { .name = "first" }, next = { .name = "next" };
	const struct crashring_page_header *h;
	size_t i, stale = 0;
	char *p, line[64];
	int fd;

	p = take_mapped("fresh-header", &first, &fd);
	if (!p)
		return;
	for (i = 0; i + 8 <= first.bytes; i += 8)
		memcpy(p + i, STALE, 8);
	munmap(p, first.bytes);
	close(fd);
	p = take_mapped("fresh-header", &next, &fd);
	if (!p)
		return;
	h = (const void *)p;
	if (next.index != first.index)
		snprintf(line, sizeof(line), "another-stream %u %u", first.index, next.index);
	else if (h->magic != CRASHRING_PAGE_MAGIC || h->stream != next.index)
		snprintf(line, sizeof(line), "foreign magic=%#x stream=%u", h->magic, h->stream);
	else
		snprintf(line, sizeof(line), "ok");
	say("fresh-header", line);
	for (i = 0; i + 8 <= next.bytes; i += 8)
		stale += !memcmp(p + i, STALE, 8);
	snprintf(line, sizeof(line), stale ? "found %zu" : "ok", stale * 8);
	say("fresh-stale", line);
	munmap(p, next.bytes);
	close(fd);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void outsider(uid_t uid)
{
	struct crashring_user_config cfg = { .name = "outsider", .backing = CRASHRING_USER_KERNEL };
	int fd;

	become(uid, uid, NULL, 0);
	fd = open(DEVICE, O_WRONLY);
	say("outsider-marker", err_name(fd < 0 ? errno : 0));
	say("outsider-stream", err_name(crashring_recorder_create(&cfg) ? 0 : errno));
}

/* Names @names as the categories of the stream @fd holds; the errno. */
static int name_categories(int fd, const char *const *names, unsigned int n)
{
	static struct crashring_user_categories req;
	unsigned int i;

	memset(&req, 0, sizeof(req));
	req.count = n;
	req.defaults = ~0ULL;
	for (i = 0; i < n; i++)
		strncpy(req.names[i], names[i], sizeof(req.names[i]) - 1);
	return ioctl(fd, CRASHRING_IOC_USER_CATEGORIES, &req) ? errno : 0;
}

/* What the open file @fd says from its start, into @text (@size bytes). */
static void read_text(int fd, char *text, size_t size)
{
	ssize_t len = fd < 0 ? 0 : pread(fd, text, size - 1, 0);

	text[len > 0 ? len : 0] = '\0';
}

/* What sysfs "debug" says to the caller, into @text (@size bytes). */
static void read_debug(char *text, size_t size)
{
	int sys = open("/sys/kernel/crashring/debug", O_RDONLY);

	read_text(sys, text, size);
	if (sys >= 0)
		close(sys);
}

/*
 * The selection sysfs "debug" holds, padded with spaces to a whole page
 * and written back: what the write says (0 or an errno). Valid as it
 * stands, but a page may be a longer selection cut short.
 */
static int write_debug_page(void)
{
	char page[4096];
	int sys;
	int err;

	read_debug(page, sizeof(page));
	memset(page + strcspn(page, "\n"), ' ', sizeof(page) - strcspn(page, "\n"));
	page[sizeof(page) - 1] = '\n';
	sys = open("/sys/kernel/crashring/debug", O_WRONLY);
	if (sys < 0)
		return errno;
	err = write(sys, page, sizeof(page)) < 0 ? errno : 0;
	close(sys);
	return err;
}

/*
 * @path opened by @uid (in no group) in a child, and passed back over a
 * socket: an open file whose opener is @uid, read here as root, as a
 * set-user-ID program would read a descriptor handed to it. -1 if not.
 */
static int open_as(uid_t uid, const char *path)
{
	union {
		struct cmsghdr align;
		char bytes[CMSG_SPACE(sizeof(int))];
	} control;
	char byte = 0;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = control.bytes, .msg_controllen = sizeof(control.bytes),
	};
	struct cmsghdr *c;
	int pair[2], fd = -1, status;
	pid_t child;

	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, pair))
		return -1;
	child = fork();
	if (child == 0) {
		become(uid, uid, NULL, 0);
		fd = open(path, O_RDONLY);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
		exit(fd < 0 || sendmsg(pair[1], &msg, 0) != 1);
	}
	close(pair[1]);
	/* Sent before the child exits: never waited for here. */
	if (child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) &&
	    !WEXITSTATUS(status) && recvmsg(pair[0], &msg, MSG_DONTWAIT) == 1) {
		c = CMSG_FIRSTHDR(&msg);
		if (c && c->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
	}
	close(pair[0]);
	return fd;
}

/*
 * The control page of the stream @fd holds (@bytes long): read-only for
 * its holder, for good; its categories as the kernel checks them; and a
 * stream named to forge a line of what sysfs "debug" says to root.
 */
static void control_page(int fd, size_t bytes)
{
	static const char *const good[] = { "render", "input" };
	static const char *const bad[] = { "render", "with space" };
	static const char *const twice[] = { "render", "render" };
	char text[4096];
	void *p;

	say("categories-bad", err_name(name_categories(fd, bad, 2)));
	say("categories-twice", err_name(name_categories(fd, twice, 2)));
	say("categories", err_name(name_categories(fd, good, 2)));
	say("control-write", err_name(map_err(fd, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, bytes)));
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, bytes);
	if (p == MAP_FAILED) {
		say("control-read", err_name(errno));
		return;
	}
	say("control-read", *(const uint64_t *)p == 3 ? "ok" : "not-defaults");
	say("control-mprotect", err_name(mprotect(p, 4096, PROT_READ | PROT_WRITE) ? errno : 0));
	munmap(p, 4096);
	read_debug(text, sizeof(text));
	say("show-forged", !strstr(text, "\nuser root:") && strstr(text, "user limits") ?
	    "ok" : "forged");
}

static void member(uid_t uid, gid_t gid)
{
	struct crashring_user_config cfg = { .name = "flood", .backing = CRASHRING_USER_KERNEL };
	struct crashring_recorder *rec;
	struct crashring_stream *s;
	unsigned long ok = 0, refused = 0, events = 0;
	char line[96];
	size_t bytes, b2;
	int fd, fd2, fd3, err, marker;
	double end;

	become(uid, uid, &gid, 1);
	fd = open("/sys/kernel/crashring/previous", O_RDONLY);
	say("member-previous", err_name(fd < 0 ? errno : 0));
	/* The generation being recorded is root's to read, as the previous one. */
	fd = open("/dev/crashring-current", O_RDONLY);
	say("member-current", err_name(fd < 0 ? errno : 0));

	fd = raw_stream("limits\nuser root: all+", &bytes, &err);
	say("member-stream", err_name(err));
	if (fd < 0)
		return;
	say("map-beyond", err_name(map_err(fd, bytes + 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 0)));
	say("map-offset", err_name(map_err(fd, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, 4096)));
	say("map-exec", err_name(map_err(fd, bytes, PROT_READ | PROT_EXEC, MAP_SHARED, 0)));
	say("map-private", err_name(map_err(fd, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, 0)));
	say("map-exact", err_name(map_err(fd, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, 0)));
	control_page(fd, bytes);
	{
		struct crashring_user_stream again = { .name = "again" };

		say("second-on-file", err_name(ioctl(fd, CRASHRING_IOC_USER_STREAM, &again) ?
					       errno : 0));
	}
	fd2 = raw_stream("second", &b2, &err);
	say("quota-second", err_name(err));
	fd3 = raw_stream("third", &b2, &err);
	say("quota-third", err_name(err));
	if (fd3 >= 0)
		close(fd3);
	close(fd);
	if (fd2 >= 0)
		close(fd2);
	/* A released stream is no file's: a new file maps nothing. */
	fd = open(DEVICE, O_RDWR);
	say("map-unheld", err_name(map_err(fd, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, 0)));
	close(fd);
	fd = open(DEVICE, O_WRONLY);
	{
		struct crashring_user_stream w = { .name = "write-only" };

		say("stream-write-only", err_name(ioctl(fd, CRASHRING_IOC_USER_STREAM, &w) ?
						  errno : 0));
	}
	close(fd);
	fresh();

	/* The flood: markers and a stream, as fast as they go, for 2 s. */
	rec = crashring_recorder_create(&cfg);
	s = rec ? crashring_stream_get(rec) : NULL;
	marker = open(DEVICE, O_WRONLY);
	if (!s || marker < 0) {
		say("flood", "no-stream");
		return;
	}
	end = now() + 2;
	while (now() < end) {
		int i;

		for (i = 0; i < 64; i++)
			crashring_log(s, 6, "flood", "flood %lu", events++);
		if (write(marker, "flood marker", 12) == 12)
			ok++;
		else if (errno == EAGAIN)
			refused++;
	}
	snprintf(line, sizeof(line), "markers=%lu refused=%lu stream-events=%lu", ok, refused, events);
	say("flood", line);
	crashring_stream_put(s);
	crashring_recorder_destroy(rec);
}

/*
 * The member opens /dev/crashring and hands the file to root, which floods
 * markers through it for a second: the budget is the opener's, so root's
 * writes are refused past it as the member's would be.
 */
static void flood_through_members_file(uid_t uid, gid_t gid)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 }, byte = 0, line[64];
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	unsigned long ok = 0, refused = 0;
	int sv[2], fd, status;
	double end;

	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv)) {
		say("opener-budget", "no-socketpair");
		return;
	}
	if (fork() == 0) {
		become(uid, uid, &gid, 1);
		fd = open(DEVICE, O_WRONLY);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
		exit(fd < 0 || sendmsg(sv[1], &msg, 0) != 1);
	}
	wait(&status);
	if (recvmsg(sv[0], &msg, 0) != 1 || !(c = CMSG_FIRSTHDR(&msg))) {
		say("opener-budget", "no-file");
		return;
	}
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	end = now() + 1;
	while (now() < end) {
		if (write(fd, "root through a member's file", 28) == 28)
			ok++;
		else if (errno == EAGAIN)
			refused++;
	}
	close(fd);
	close(sv[0]);
	close(sv[1]);
	snprintf(line, sizeof(line), refused ? "ok" : "bypassed written=%lu", ok);
	say("opener-budget", line);
}

/* Members of the group besides the compositor's user, for the budget. */
#define SECOND_FLOODER	1003
#define STEADY_WRITER	1002
/* printk lines CPU 1 prints before the flood, all of which must survive it. */
#define LINES_BEFORE	200
/* The flood's markers: as long as a page of the format can hold. */
#define FLOOD_MARKER	994
#define FLOOD_SECONDS	10

static void on_cpu1(void)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(1, &one);
	sched_setaffinity(0, sizeof(one), &one);
}

/*
 * As @uid in the group, pinned to CPU 1: @seconds of markers of @len
 * bytes, one every @gap_us (0: flat out); prints what was written and
 * refused as "crashring-test: budget WHO written=N refused=M".
 */
static void marker_writer(const char *who, uid_t uid, gid_t gid, size_t len,
			  double seconds, useconds_t gap_us)
{
	unsigned long ok = 0, refused = 0;
	char text[FLOOD_MARKER];
	double end;
	int fd;

	on_cpu1();
	become(uid, uid, &gid, 1);
	fd = open(DEVICE, O_WRONLY);
	memset(text, 'f', sizeof(text));
	for (end = now() + seconds; now() < end; ) {
		if (write(fd, text, len) == (ssize_t)len)
			ok++;
		else if (errno == EAGAIN)
			refused++;
		if (gap_us)
			usleep(gap_us);
	}
	printf("crashring-test: budget %s written=%lu refused=%lu\n", who, ok, refused);
	fflush(stdout);
	exit(0);
}

/*
 * The marker budget is each user's own, in bytes: CPU 1 prints numbered
 * printk lines, then two members flood it with 994-byte markers for ten
 * seconds while a third writes one a second. The check after the crash
 * finds every line from before the flood; here the steady writer must
 * never be refused.
 */
static void budget(uid_t uid, gid_t gid)
{
	int kmsg = open("/dev/kmsg", O_WRONLY), i, status;
	char line[64];

	on_cpu1();
	for (i = 1; i <= LINES_BEFORE; i++) {
		int n = snprintf(line, sizeof(line), "<6>crashring-flood: before %d", i);

		if (write(kmsg, line, n) != n)
			break;
	}
	close(kmsg);
	if (fork() == 0)
		marker_writer("flood-a", uid, gid, FLOOD_MARKER, FLOOD_SECONDS, 0);
	if (fork() == 0)
		marker_writer("flood-b", SECOND_FLOODER, gid, FLOOD_MARKER, FLOOD_SECONDS, 0);
	if (fork() == 0)
		marker_writer("steady", STEADY_WRITER, gid, 32, FLOOD_SECONDS - 0.5, 1000000);
	for (i = 0; i < 3; i++)
		wait(&status);
}

/* Says @path's permission bits, in octal, as the answer to @check. */
static void say_mode(const char *check, const char *path)
{
	struct stat st;
	char mode[16];

	if (stat(path, &st) != 0) {
		say(check, err_name(errno));
		return;
	}
	snprintf(mode, sizeof(mode), "%o", st.st_mode & 07777);
	say(check, mode);
}

/*
 * What sysfs "debug" says of a stream root holds: its name and categories
 * to root, nothing to a member, who sees only its own streams, nor to
 * root through a descriptor the member opened; and that a page written
 * to it, which may be a longer selection cut short, is refused.
 */
static void others_streams(uid_t uid, gid_t gid)
{
	static const char *const secret[] = { "secret" };
	char text[4096];
	size_t bytes;
	int fd, err, status, opened;

	fd = raw_stream("root-private", &bytes, &err);
	if (fd < 0 || name_categories(fd, secret, 1)) {
		say("show-others", "no-stream");
		return;
	}
	if (fork() == 0) {
		become(uid, uid, &gid, 1);
		read_debug(text, sizeof(text));
		say("show-others", strstr(text, "root-private") ? "shown" : "ok");
		exit(0);
	}
	wait(&status);
	read_debug(text, sizeof(text));
	say("show-root", strstr(text, "user root-private: secret+") ? "ok" : "hidden");
	/* The member's descriptor, read by root: the member's view. */
	opened = open_as(uid, "/sys/kernel/crashring/debug");
	read_text(opened, text, sizeof(text));
	say("show-opener", opened < 0 ? "no-file" : !strstr(text, "diverting:") ? "empty" :
	    strstr(text, "root-private") ? "shown" : "ok");
	if (opened >= 0)
		close(opened);
	say("debug-page", err_name(write_debug_page()));
	close(fd);
}

static int security(uid_t uid, gid_t gid, uid_t outsider_uid)
{
	int status, fd;

	say_mode("previous-mode", "/sys/kernel/crashring/previous");
	say_mode("current-mode", "/dev/crashring-current");
	/* A side of a namespace check gone early ends it, not this program. */
	signal(SIGPIPE, SIG_IGN);
	/* Debian's 6.1 asks for it; newer kernels have no such switch. */
	fd = open("/proc/sys/kernel/unprivileged_userns_clone", O_WRONLY);
	if (fd >= 0) {
		if (write(fd, "1", 1) != 1)
			perror("unprivileged_userns_clone");
		close(fd);
	}
	if (fork() == 0) {
		outsider(outsider_uid);
		exit(0);
	}
	wait(&status);
	if (fork() == 0) {
		member(uid, gid);
		exit(0);
	}
	wait(&status);
	namespaced_ids(uid, gid);
	root_made_namespace(gid);
	others_streams(uid, gid);
	flood_through_members_file(uid, gid);
	budget(uid, gid);
	return 0;
}

/* Whether previous_summary's state line, in @text, ends in a message. */
static int summary_has_message(const char *text)
{
	const char *state = strstr(text, "\nstate ");
	const char *end = state ? strchr(state + 1, '\n') : NULL;
	const char *colon = state ? strstr(state, ": ") : NULL;

	return colon && (!end || colon < end);
}

/*
 * The crash message in previous_summary: root's own open shows it, a
 * descriptor the member opened does not, though root reads both.
 */
static int crash_message_views(uid_t uid)
{
	char text[4096];
	int fd = open("/sys/kernel/crashring/previous_summary", O_RDONLY);

	read_text(fd, text, sizeof(text));
	say("summary-root", fd < 0 ? "no-file" : summary_has_message(text) ? "ok" : "hidden");
	if (fd >= 0)
		close(fd);
	fd = open_as(uid, "/sys/kernel/crashring/previous_summary");
	read_text(fd, text, sizeof(text));
	say("summary-opener", fd < 0 ? "no-file" : !strstr(text, "\nstate ") ? "no-state" :
	    summary_has_message(text) ? "shown" : "ok");
	if (fd >= 0)
		close(fd);
	return 0;
}

/* The compositor's categories, by bit. */
enum { RENDER, INPUT };
static const char *const categories[] = { [RENDER] = "render", [INPUT] = "input" };

static int run(uid_t uid, gid_t gid)
{
	struct crashring_user_config cfg = {
		.name = "compositor", .streams = 1, .backing = CRASHRING_USER_KERNEL,
		.categories = categories, .ncategories = 2, .categories_off = 1 << INPUT,
	};
	struct crashring_recorder *rec;
	struct crashring_stream *s;
	unsigned int frame, point = 0;
	const uint64_t *enabled;
	int marker;

	become(uid, uid, &gid, 1);
	rec = crashring_recorder_create(&cfg);
	s = rec ? crashring_stream_get(rec) : NULL;
	marker = open(DEVICE, O_WRONLY);
	if (!s || marker < 0) {
		perror("crashring-test: compositor");
		return 1;
	}
	enabled = crashring_recorder_enabled(rec);
	printf("crashring-test: compositor recording\n");
	fflush(stdout);
	for (frame = 0;; frame++) {
		if (crashring_enabled(enabled, RENDER))
			crashring_log(s, 6, "render", "frame %u", frame);
		if (crashring_enabled(enabled, INPUT))
			crashring_log(s, 7, "input", "pointer at frame %u", frame);
		if (frame % 500 == 499) {
			char text[32];
			int n = snprintf(text, sizeof(text), "ordering point %u", point);

			/* The marker's time is taken in the kernel, during write(). */
			if (write(marker, text, n) == n)
				crashring_log(s, 6, "render", "after ordering point %u", point);
			point++;
		}
		usleep(200);
	}
}

static int set_user_id(uid_t uid, gid_t gid, uid_t ruid)
{
	struct crashring_user_config cfg = {
		.name = "set-user-id", .streams = 1, .backing = CRASHRING_USER_KERNEL,
	};
	struct crashring_recorder *rec;
	struct crashring_stream *s;

	if (setgroups(1, &gid) || setgid(gid) || setresuid(ruid, uid, uid)) {
		perror("crashring-test: set-user-id");
		return 1;
	}
	rec = crashring_recorder_create(&cfg);
	s = rec ? crashring_stream_get(rec) : NULL;
	if (!s) {
		perror("crashring-test: set-user-id");
		return 1;
	}
	crashring_log(s, 6, "setuid", "run by uid %u as uid %u", (unsigned int)ruid,
		      (unsigned int)uid);
	printf("crashring-test: set-user-id holding\n");
	fflush(stdout);
	for (;;)
		pause();
}

/* Copies what is left of fd into the new file path; its size, or -1. */
static long long save(int fd, const char *path)
{
	int out = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	long long total = 0;
	char buf[65536];
	ssize_t n;

	if (out < 0)
		return -1;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		if (write(out, buf, n) != n) {
			total = -1;
			break;
		}
		total += n;
	}
	close(out);
	return n < 0 ? -1 : total;
}

static int report(uid_t uid, gid_t gid, const char *name, unsigned int frames,
		  const char *copy)
{
	struct crashring_user_config cfg = { .name = name, .streams = 1,
					     .backing = CRASHRING_USER_KERNEL };
	struct crashring_recorder *rec;
	struct crashring_stream *s;
	struct crashring_report r;
	const char *streams[] = { name };
	long long saved = -1;
	unsigned int frame;
	double t0, ms;
	int rc;

	become(uid, uid, &gid, 1);
	rec = crashring_recorder_create(&cfg);
	s = rec ? crashring_stream_get(rec) : NULL;
	if (!s) {
		perror("crashring-test: asking");
		return 1;
	}
	for (frame = 0; frame < frames; frame++)
		crashring_log(s, 6, "render", "%s frame %u", name, frame);
	crashring_log(s, 3, "render", "%s: atomic commit failed on crtc-41", name);
	t0 = now();
	rc = crashring_request_report_of("atomic commit failed on crtc-41", streams, 1, 1, &r);
	ms = (now() - t0) * 1000;
	if (!rc && r.copy_fd >= 0) {
		saved = save(r.copy_fd, copy);
		close(r.copy_fd);
	}
	printf("crashring-test: report rc %d bundle %s events %llu copy %lld ms %.0f why %s\n",
	       rc, rc ? "-" : r.bundle, (unsigned long long)r.events, saved, ms,
	       rc ? r.why : "-");
	crashring_stream_put(s);
	crashring_recorder_destroy(rec);
	return 0;
}

static int hang_ups(uid_t uid, unsigned int n)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX,
				    .sun_path = "/run/crashring/request.socket" };
	unsigned int i, connected = 0;

	become(uid, uid, NULL, 0);
	for (i = 0; i < n; i++) {
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

		if (fd < 0)
			break;
		if (!connect(fd, (struct sockaddr *)&addr, sizeof(addr)))
			connected++;
		close(fd);
	}
	printf("crashring-test: hang-ups %u connected %u\n", n, connected);
	return 0;
}

static int bench(unsigned long n)
{
	struct crashring_user_config cfg = { .name = "bench", .streams = 1,
					     .backing = CRASHRING_USER_KERNEL };
	struct crashring_recorder *rec = crashring_recorder_create(&cfg);
	struct crashring_stream *s = rec ? crashring_stream_get(rec) : NULL;
	int marker = open(DEVICE, O_WRONLY);
	double t0, t1, t2;
	uint64_t i;

	if (!s || marker < 0) {
		perror("crashring-cost: bench");
		return 1;
	}
	t0 = now();
	for (i = 0; i < n; i++)
		if (crashring_write(s, CRASHRING_EVENT_LOST, &i, sizeof(i)))
			return 1;
	t1 = now();
	for (i = 0; i < n; i++)
		if (write(marker, &i, sizeof(i)) != sizeof(i))
			return 1;
	t2 = now();
	printf("crashring-cost: stream what=user-stream ns=%.0f events=%lu\n", (t1 - t0) * 1e9, n);
	printf("crashring-cost: stream what=marker-write ns=%.0f events=%lu\n", (t2 - t1) * 1e9, n);
	crashring_stream_put(s);
	crashring_recorder_destroy(rec);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "security"))
		return security(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
	if (argc == 3 && !strcmp(argv[1], "summary"))
		return crash_message_views(atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "run"))
		return run(atoi(argv[2]), atoi(argv[3]));
	if (argc == 5 && !strcmp(argv[1], "set-user-id"))
		return set_user_id(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
	if (argc == 7 && !strcmp(argv[1], "report"))
		return report(atoi(argv[2]), atoi(argv[3]), argv[4], strtoul(argv[5], NULL, 10),
			      argv[6]);
	if (argc == 4 && !strcmp(argv[1], "hang-ups"))
		return hang_ups(atoi(argv[2]), strtoul(argv[3], NULL, 10));
	if (argc == 3 && !strcmp(argv[1], "bench"))
		return bench(strtoul(argv[2], NULL, 10));
	if (argc == 2 && !strcmp(argv[1], "fresh")) {
		fresh();
		return 0;
	}
	fprintf(stderr, "usage: compositor security UID GID OUTSIDER | summary UID | fresh | run UID GID | set-user-id UID GID RUID | report UID GID NAME FRAMES COPY | hang-ups UID N | bench N\n");
	return 2;
}
