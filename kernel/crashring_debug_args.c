// SPDX-License-Identifier: GPL-2.0
/*
 * The debug source's argument encoder (FORMAT.md, section 18): a debug
 * message's arguments, taken as its format's conversions say, in the
 * tagged binary form the reader formats. Kernel-independent, through
 * crashring_env.h, so that qemu-tests builds it for user space and checks
 * what it encodes against what the reader decodes.
 */
#include "crashring_env.h"
#include "crashring_format.h"
#include "crashring_debug_args.h"

/*
 * Once one argument did not fit, none after it is written either: the
 * reader must not take a later argument for the missing one.
 */
static bool cr_put(struct cr_args *a, u8 tag, const void *v, u32 n)
{
	if (a->cut || a->room < 1 + n) {
		a->cut = true;
		return false;
	}
	*a->p = tag;
	memcpy(a->p + 1, v, n);
	a->p += 1 + n;
	a->room -= 1 + n;
	return true;
}

static bool cr_put_int(struct cr_args *a, u64 v)
{
	return cr_put(a, CRASHRING_ARG_INT, &v, sizeof(v));
}

/* Room for a counted argument: where its bytes go, and at most how many. */
static u8 *cr_counted(struct cr_args *a, u32 *max)
{
	if (a->cut || a->room < 3) {
		a->cut = true;
		return NULL;
	}
	*max = min_t(u32, a->room - 3, U16_MAX);
	return a->p + 3;
}

static void cr_counted_done(struct cr_args *a, u8 tag, u16 n)
{
	a->p[0] = tag;
	memcpy(a->p + 1, &n, 2);
	a->p += 3 + n;
	a->room -= 3 + n;
}

/*
 * Copies the string at @src, at most @max bytes of it, to @dst without
 * faulting (copy_from_kernel_nofault(), chunk by chunk, none across a
 * page it does not need); sets *@more when bytes follow the copied ones.
 * Chunks start at 16 bytes, the length of most debug messages' strings
 * (names of connectors, planes, states), and grow to 64.
 * Return: the bytes copied, or -EFAULT.
 */
static long cr_copy_string(u8 *dst, const char *src, u32 max, bool *more)
{
	u32 n = 0, step = 16;
	char next;

	*more = false;
	while (n < max) {
		unsigned long at = (unsigned long)src + n;
		u32 chunk = min3(max - n, step, (u32)(PAGE_SIZE - offset_in_page(at)));
		u8 *nul;

		step = min(step * 2, 64U);
		if (copy_from_kernel_nofault(dst + n, src + n, chunk))
			return n ? (long)n : -EFAULT;
		nul = memchr(dst + n, 0, chunk);
		if (nul)
			return nul - dst;
		n += chunk;
	}
	/* Whether the string goes on past what fitted. */
	*more = !copy_from_kernel_nofault(&next, src + n, 1) && next;
	return n;
}

/* A %s argument as string() would read it, at most @precision bytes. */
static void cr_put_string(struct cr_args *a, const char *s, int precision)
{
	u32 max, want;
	u8 *dst = cr_counted(a, &max);
	bool more;
	long got;

	if (!dst)
		return;
	/* check_pointer_msg()'s rules. */
	if (!s)
		s = "(null)";
	else if ((unsigned long)s < PAGE_SIZE || IS_ERR_VALUE(s))
		s = "(efault)";
	want = precision >= 0 ? min_t(u32, precision, max) : max;
	got = cr_copy_string(dst, s, want, &more);
	if (got < 0) {
		got = min_t(u32, 8, max);
		memcpy(dst, "(efault)", got);
	} else if (more && (precision < 0 || got < precision)) {
		/* The record's room ended the string, not its precision. */
		a->cut = true;
	}
	cr_counted_done(a, CRASHRING_ARG_STR, got);
}

/*
 * %p extensions that read through the pointer or resolve a symbol
 * (lib/vsprintf.c's pointer()): formatted now, while what they read
 * exists. Plain %p, %px, %pK and unknown ones are kept as addresses.
 */
static bool cr_pointer_is_text(char ext)
{
	return ext && strchr("SsFfBRrhMmIiEUVNadDgCGOeuktbT", ext);
}

/*
 * A %p argument. @spec .. @end is its conversion ("%" through the
 * extension); its '*'s, in order, were @stars.
 */
static void cr_put_pointer(struct cr_args *a, void *ptr, const char *spec, const char *end,
			   const int *stars)
{
	const char *ext = strchr(spec, 'p') + 1;
	char fmt[48];
	size_t n = 0;
	u32 max;
	u8 *dst;
	int len;

	if (!cr_pointer_is_text(*ext)) {
		u64 v = (unsigned long)ptr;

		cr_put(a, CRASHRING_ARG_ADDR, &v, sizeof(v));
		return;
	}
	/* The conversion as written, its '*'s made numbers. */
	for (; spec < end && n < sizeof(fmt) - 12; spec++) {
		if (*spec == '*')
			n += scnprintf(fmt + n, sizeof(fmt) - n, "%d", *stars++);
		else
			fmt[n++] = *spec;
	}
	fmt[n] = '\0';
	dst = cr_counted(a, &max);
	if (!dst)
		return;
	len = max ? snprintf((char *)dst, max, fmt, ptr) : 0;
	if (len > 0 && (u32)len >= max) {
		a->cut = true;
		len = max ? max - 1 : 0;
	}
	cr_counted_done(a, CRASHRING_ARG_TEXT, len);
}

/**
 * crashring_encode_args - encode a debug message's arguments
 * @a: where, and how much room
 * @fmt: the callsite's format
 * @ap: the arguments
 *
 * Encodes @fmt's arguments from @ap as FORMAT.md section 18 says, each
 * taken with the type its conversion gives it (format_decode()'s
 * rules, which the reader's formatter follows too). Stops at a
 * conversion the kernel does not know, as vsnprintf() does, and where
 * the room ends (a->cut).
 */
void crashring_encode_args(struct cr_args *a, const char *fmt, va_list ap)
{
	const char *spec;

	while (!a->cut && (spec = strchr(fmt, '%'))) {
		/* The '*' width and precision, in order; -1: no precision. */
		int stars[2], nstars = 0, precision = -1;
		char qualifier = 0;

		fmt = spec + 1;
		while (*fmt == '-' || *fmt == '+' || *fmt == ' ' || *fmt == '#' || *fmt == '0')
			fmt++;
		if (isdigit(*fmt)) {
			while (isdigit(*fmt))
				fmt++;
		} else if (*fmt == '*') {
			stars[nstars] = va_arg(ap, int);
			cr_put_int(a, (u32)stars[nstars++]);
			fmt++;
		}
		if (*fmt == '.') {
			fmt++;
			if (isdigit(*fmt)) {
				precision = 0;
				/* The kernel keeps 16 bits of it. */
				while (isdigit(*fmt)) {
					precision = precision * 10 + *fmt++ - '0';
					precision = min(precision, 1 << 16);
				}
			} else if (*fmt == '*') {
				precision = va_arg(ap, int);
				stars[nstars++] = precision;
				cr_put_int(a, (u32)precision);
				/* A negative one is 0 (set_precision()). */
				precision = max(precision, 0);
				fmt++;
			}
		}
		if (*fmt == 'h' || *fmt == 'l' || *fmt == 'L' || *fmt == 'z' || *fmt == 't') {
			qualifier = *fmt++;
			if ((qualifier == 'h' || qualifier == 'l') && *fmt == qualifier) {
				qualifier = qualifier == 'l' ? 'L' : 'H';
				fmt++;
			}
		}
		switch (*fmt++) {
		case '%':
			break;
		case 'c':
			cr_put_int(a, (u32)va_arg(ap, int));
			break;
		case 's':
			cr_put_string(a, va_arg(ap, const char *), precision);
			break;
		case 'p':
			while (isalnum(*fmt))
				fmt++;
			cr_put_pointer(a, va_arg(ap, void *), spec, fmt, stars);
			break;
		case 'd':
		case 'i':
		case 'u':
		case 'o':
		case 'x':
		case 'X':
			switch (qualifier) {
			case 'l':
				cr_put_int(a, va_arg(ap, unsigned long));
				break;
			case 'L':
				cr_put_int(a, va_arg(ap, unsigned long long));
				break;
			case 'z':
				cr_put_int(a, va_arg(ap, size_t));
				break;
			case 't':
				cr_put_int(a, va_arg(ap, ptrdiff_t));
				break;
			default:
				/* int, short and char travel as int. */
				cr_put_int(a, (u32)va_arg(ap, int));
			}
			break;
		default:
			/* %n, a lone '%' at the end, anything unknown: vsnprintf() stops. */
			return;
		}
	}
}
