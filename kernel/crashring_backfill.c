// SPDX-License-Identifier: GPL-2.0
/*
 * What printk logged before the module loaded, recorded when the boot's
 * first generation starts: the lines of the boot's first seconds (an
 * early machine check, a driver's probe failing before the root file
 * system) are where the trace of this boot's crash begins, even for a
 * module loaded later. Each is a printk event flagged
 * CRASHRING_PRINTK_BACKFILLED, at its own time (printk's local_clock(),
 * moved onto CLOCK_MONOTONIC by the clock pair of crashring_clock.c),
 * read through the kmsg_dump iterator, which pstore's dumpers use.
 *
 * A stream's times must not go back, so the lines go into the loading
 * CPU's stream before any other event: its interrupts stay off from
 * before recording starts until the last line (an NMI writes into a
 * lane of its own unless it comes between two lines). Lines printk
 * stores after the iterator's end is taken and before recording starts,
 * a few microseconds, are in neither.
 *
 * The same lines tell how the boot before this one ended, and only this
 * boot's log has them: the firmware's Boot Error Record Table as the
 * kernel printed it (drivers/acpi/apei/bert.c: "BERT: ", then the CPER
 * lines of cper_estatus_print(), "[Hardware Error]: " as GHES's are), a
 * machine check found in the banks at boot ("mce: [Hardware Error]: ",
 * left across a warm reset or raised in this boot's first seconds), AMD's
 * "Previous system reset reason" (arch/x86/kernel/cpu/amd.c, 6.16+).
 * crashring-recover.service, which bundles the crash they explain, may
 * not read the kernel's log (ProtectKernelLogs=), so the module keeps
 * those lines at load, whatever it records, and gives them to root in
 * /sys/kernel/crashring/reset_evidence.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/kmsg_dump.h>
#include <linux/string.h>
#include "crashring.h"
#include "crashring_emit.h"

/* A record's line as kmsg_dump_get_line() prints it: prefix, text, newline. */
#define CR_BACKFILL_LINE	1200

static char cr_line[CR_BACKFILL_LINE];

/*
 * The reset's evidence as kept: BERT's records are printed 5 at most, each
 * short of 1 KiB, which this holds with room for the other lines.
 */
#define CR_EVIDENCE_SIZE	16384
/* Room kept for the line that says how many more there were. */
#define CR_EVIDENCE_TAIL	64

static char cr_evidence[CR_EVIDENCE_SIZE];
static size_t cr_evidence_len;

/* What marks a line about the previous boot's end: see the top. */
static const char * const cr_evidence_marks[] = {
	"[Hardware Error]: ",
	"BERT: ",
	"Previous system reset reason",
};

/*
 * Parses one line of @len bytes at @s, as record_print_text() prints it
 * with syslog and printk_time set: "<N>[  seconds.micros] text". Returns
 * the text's offset, with *@level and *@ts_ns (printk's clock) set; 0 when
 * the line has no such prefix (printk.time=0).
 */
static size_t cr_parse_prefix(const char *s, size_t len, int *level, u64 *ts_ns)
{
	unsigned long long secs = 0, micros = 0;
	unsigned int prio = 0;
	size_t i = 1;

	if (len < 2 || s[0] != '<')
		return 0;
	while (i < len && s[i] >= '0' && s[i] <= '9')
		prio = prio * 10 + (s[i++] - '0');
	if (i + 1 >= len || s[i] != '>' || s[i + 1] != '[')
		return 0;
	for (i += 2; i < len && s[i] == ' '; i++)
		;
	while (i < len && s[i] >= '0' && s[i] <= '9')
		secs = secs * 10 + (s[i++] - '0');
	if (i >= len || s[i++] != '.')
		return 0;
	while (i < len && s[i] >= '0' && s[i] <= '9')
		micros = micros * 10 + (s[i++] - '0');
	if (i + 1 >= len || s[i] != ']' || s[i + 1] != ' ')
		return 0;
	*level = prio & 7;
	*ts_ns = secs * NSEC_PER_SEC + micros * NSEC_PER_USEC;
	return i + 2;
}

/* @ts of printk's clock on the region's, no earlier than its first nanosecond. */
static u64 cr_to_mono(u64 ts, s64 mono_minus_local)
{
	s64 t = (s64)ts + mono_minus_local;

	return t > 0 ? t : 1;
}

/* Lets this CPU's stream, empty yet, take events from @ts on. */
static void cr_start_earlier_here(u64 ts)
{
	struct crashring_cpu *c = crashring_this_cpu();

	if (!c)
		return;
	crashring_start_earlier(crashring_enter(c), ts);
	crashring_leave(c);
	crashring_put_cpu();
}

/*
 * Records the lines of one record's text, @len bytes at cr_line; the
 * first of all (@lines 0 so far) first takes the stream back to its time.
 */
static unsigned int cr_backfill_record(size_t len, s64 mono_minus_local, unsigned int lines)
{
	unsigned int first = lines;
	size_t at = 0;

	while (at < len) {
		const char *line = cr_line + at;
		const char *end = memchr(line, '\n', len - at);
		size_t n = end ? end - line : len - at, text;
		struct {
			u8 level;
			u8 flags;
			u32 caller;
			u64 seq;
		} __packed rec = { .flags = CRASHRING_PRINTK_BACKFILLED };
		int level;
		u64 ts;

		at += n + 1;
		text = cr_parse_prefix(line, n, &level, &ts);
		if (!text || !crashring_printk_wanted(level, line + text, n - text))
			continue;
		rec.level = level;
		rec.seq = crashring_printk_next_seq();
		if (!lines)
			cr_start_earlier_here(cr_to_mono(ts, mono_minus_local));
		cr_emit_at(cr_to_mono(ts, mono_minus_local), CRASHRING_EVENT_PRINTK, &rec,
			   sizeof(rec), line + text, n - text, offsetof(typeof(rec), flags));
		lines++;
	}
	return lines - first;
}

/* Whether the text of a line, @len bytes at @text, is about the last reset. */
static bool cr_is_evidence(const char *text, size_t len)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(cr_evidence_marks); i++)
		if (strnstr(text, cr_evidence_marks[i], len))
			return true;
	return false;
}

/**
 * crashring_keep_reset_evidence - keep what this boot logged of the last reset
 *
 * Called once, at load, before sysfs shows the lines: every line printk
 * holds that cr_is_evidence() takes, as kmsg_dump_get_line() prints it
 * ("<level>[seconds] text"), in order, as many as fit, then a line that
 * counts the rest.
 *
 * Return: the lines kept.
 */
unsigned int crashring_keep_reset_evidence(void)
{
	static char line[CR_BACKFILL_LINE];
	unsigned int kept = 0, more = 0;
	struct kmsg_dump_iter iter;
	size_t len;

	kmsg_dump_rewind(&iter);
	while (kmsg_dump_get_line(&iter, true, line, sizeof(line), &len)) {
		size_t at = 0;

		while (at < len) {
			const char *end = memchr(line + at, '\n', len - at);
			size_t n = end ? end - (line + at) : len - at;
			int level;
			u64 ts;
			size_t text = cr_parse_prefix(line + at, n, &level, &ts);

			if (cr_is_evidence(line + at + text, n - text)) {
				if (cr_evidence_len + n + 1 + CR_EVIDENCE_TAIL <= sizeof(cr_evidence)) {
					memcpy(cr_evidence + cr_evidence_len, line + at, n);
					cr_evidence_len += n;
					cr_evidence[cr_evidence_len++] = '\n';
					kept++;
				} else {
					more++;
				}
			}
			at += n + 1;
		}
	}
	if (more)
		cr_evidence_len += scnprintf(cr_evidence + cr_evidence_len,
					     sizeof(cr_evidence) - cr_evidence_len,
					     "# %u more lines not kept\n", more);
	return kept;
}

/**
 * crashring_reset_evidence - the lines crashring_keep_reset_evidence() kept
 * @text: set to them
 *
 * Return: their length.
 */
size_t crashring_reset_evidence(const char **text)
{
	*text = cr_evidence;
	return cr_evidence_len;
}

/**
 * crashring_backfill_wanted - whether the generation about to start backfills
 *
 * Called before the slot it goes into is formatted.
 *
 * Return: whether the printk source is on and no slot holds a generation
 * of this boot: a load before this one recorded those lines already.
 */
bool crashring_backfill_wanted(void)
{
	u8 id[sizeof(crashring.boot_id)];
	unsigned int i;

	if (!(READ_ONCE(crashring.sources) & CR_SRC_PRINTK))
		return false;
	for (i = 0; i < CRASHRING_SLOTS; i++)
		if (crashring.slot[i].state == CR_SLOT_GENERATION &&
		    !crashring_read_slot(&crashring.slot[i],
					 offsetof(struct crashring_region_header, boot_id), id,
					 sizeof(id)) &&
		    !memcmp(id, crashring.boot_id, sizeof(id)))
			return false;
	return true;
}

/**
 * crashring_backfill_begin - take the end of what printk holds
 * @iter: the iterator to record from
 *
 * Called with interrupts off, just before recording starts.
 */
void crashring_backfill_begin(struct kmsg_dump_iter *iter)
{
	kmsg_dump_rewind(iter);
}

/**
 * crashring_backfill - record what printk logged before recording started
 * @iter: as crashring_backfill_begin() left it
 *
 * Called on the CPU that started recording, its interrupts still off,
 * before any other event of its stream, and only when the printk source
 * is on.
 *
 * Return: the lines recorded.
 */
unsigned int crashring_backfill(struct kmsg_dump_iter *iter)
{
	s64 mono_minus_local = crashring_mono_minus_local();
	u64 end = iter->next_seq;
	unsigned int lines = 0;
	size_t len;

	while (iter->cur_seq < end &&
	       kmsg_dump_get_line(iter, true, cr_line, sizeof(cr_line), &len))
		lines += cr_backfill_record(len, mono_minus_local, lines);
	return lines;
}
