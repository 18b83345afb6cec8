// SPDX-License-Identifier: GPL-2.0
/*
 * User-space test shim for the kernel module's ring code: sizes the Rust
 * side checks its mirrored structures against.
 */
#include "crashring_ring.h"

size_t cr_test_sizeof_stream(void)
{
	return sizeof(struct crashring_stream);
}

size_t cr_test_sizeof_config(void)
{
	return sizeof(struct crashring_config);
}
