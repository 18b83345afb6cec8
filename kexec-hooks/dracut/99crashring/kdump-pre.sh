#!/bin/sh
# kdump-utils' pre.d hook, run in the capture initramfs before the dump is
# saved: bundles the crashed kernel's trace from /proc/vmcore into the
# bundle directory of the root file system, which kdump-utils has mounted
# at /sysroot. The region is left as it is, and nothing is acknowledged:
# the next boot's crashring-recover.service finds the bundle's summary and
# only acknowledges the generation. A failure is logged by kdump-utils and
# does not stop the dump.
exec crashring recover --capture --dir /sysroot/var/lib/crashring
