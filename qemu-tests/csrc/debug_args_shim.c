// SPDX-License-Identifier: GPL-2.0
/*
 * Calls the module's argument encoder (kernel/crashring_debug_args.c)
 * with arguments a test gives as an array. Each is passed as a 64-bit
 * value: on x86-64 every variadic argument of these kinds travels in an
 * 8-byte slot, and va_arg(ap, int) reads the low half of one, as it
 * would of an int the caller promoted.
 */
#include <stdint.h>
#include "crashring_debug_args.h"

static size_t encode(uint8_t *out, uint32_t room, bool *cut, const char *fmt, ...)
{
	struct cr_args a = { .p = out, .room = room };
	va_list ap;

	va_start(ap, fmt);
	crashring_encode_args(&a, fmt, ap);
	va_end(ap);
	*cut = a.cut;
	return a.p - out;
}

size_t crashring_test_encode(uint8_t *out, uint32_t room, const char *fmt, const uint64_t *v,
			     bool *cut)
{
	return encode(out, room, cut, fmt, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
}
