/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The format's CRC-32C on x86-64's SSE4.2 crc32 instruction (FORMAT.md
 * section 1), shared by the module and the user-space build of the ring
 * code, so `cargo test` checks the module's own loop against the Rust
 * reader. Raw, as __crc32c_le(): no pre- or post-inversion.
 *
 * The instruction works in general registers: no FPU state to save, so it
 * is safe in any context, NMI and the panic path included. One instruction
 * per 8 bytes, against a table lookup per byte for lib/crc32's slice-by-8.
 * Callers check the CPU has SSE4.2 first.
 */
#ifndef CRASHRING_CRC_H
#define CRASHRING_CRC_H

#ifdef __x86_64__
static inline u32 cr_crc32c_sse42(u32 crc, const void *p, size_t len)
{
	const u8 *b = p;
	u64 c = crc, word;

	for (; len >= 8; len -= 8, b += 8) {
		/* Not memcpy(): FORTIFY_SOURCE checks it per word when it knows @p's object. */
		__builtin_memcpy(&word, b, 8);
		asm("crc32q %1, %0" : "+r"(c) : "rm"(word));
	}
	for (; len; len--, b++)
		asm("crc32b %1, %k0" : "+r"(c) : "rm"(*b));
	return c;
}
#endif

#endif /* CRASHRING_CRC_H */
