/* SPDX-License-Identifier: GPL-2.0 */
/*
 * crashring.ko's interface for other kernel modules.
 */
#ifndef CRASHRING_H
#define CRASHRING_H

/**
 * crashring_log - record a marker event in the crash-persistent ring
 * @tag: who logs; up to 15 characters are kept, like a task's comm
 * @text: the message; cut to what fits one record
 *
 * Safe in any context, NMI included: it never sleeps, allocates or locks.
 * A call that interrupts another write on this CPU records on the next
 * nesting lane; only one nested deeper than the lanes is dropped, and
 * counted.
 */
void crashring_log(const char *tag, const char *text);

#endif /* CRASHRING_H */
