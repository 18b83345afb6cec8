#!/bin/sh
# kdump-utils' pre.d hook, run in the capture initramfs before the dump is
# saved: bundles the crashed kernel's trace from /proc/vmcore into the
# bundle directory of the root file system, which kdump-utils has mounted
# at /sysroot. The region is left as it is, and nothing is acknowledged:
# the next boot's crashring-recover.service finds the bundle's summary and
# only acknowledges the generation. A failure is logged by kdump-utils and
# does not stop the dump; where no bundle can be written (a read-only
# root that cannot be remounted, a /var of its own not mounted here), the
# hook says so and leaves the crash to the next boot, which finds it in
# the region.

say() {
	echo "crashring: $*" >&2
}

# The root file system mounted read-only (the initramfs's default): as
# kdump-utils does for its own dump target, remount it read-write.
if ! [ -w /sysroot ]; then
	if ! mount -o remount,rw /sysroot; then
		say "/sysroot is read-only and cannot be remounted read-write: no bundle; the next boot archives the crash from the region"
		exit 1
	fi
fi

# The real system's bundle directory may lie on a file system of its own
# (/var, /var/lib or /var/lib/crashring in its fstab), which kdump-utils
# does not mount: /sysroot/var would then be the empty directory under
# it, hidden by that mount once the system boots. Write only where the
# real system will find the bundle.
mount_point=
if [ -r /sysroot/etc/fstab ]; then
	while read -r spec file _; do
		case "$spec" in
		'#'*) continue ;;
		esac
		case "$file" in
		/var | /var/lib | /var/lib/crashring)
			if [ "${#file}" -gt "${#mount_point}" ]; then
				mount_point=$file
			fi
			;;
		esac
	done < /sysroot/etc/fstab
fi
if [ -n "$mount_point" ]; then
	# Mounted here if it is not on the same device as its parent.
	parent=$(dirname "$mount_point")
	if ! [ -d "/sysroot$mount_point" ] ||
		[ "$(stat -c %d "/sysroot$mount_point")" = "$(stat -c %d "/sysroot$parent")" ]; then
		say "$mount_point is a file system of its own (/sysroot/etc/fstab) and is not mounted under /sysroot: no bundle; the next boot archives the crash from the region"
		exit 1
	fi
fi

# The root file system's own configuration, not a copy of it baked into
# this initramfs: where `crashring arm` placed the range picks the crashed
# kernel's region among stale copies of older ones in the dump. The region
# is copied to a temporary file before it is read: on the disk, in the
# bundle directory, which recover creates first (an unnamed file, gone
# with the process), never in the small RAM of the capture kernel (the
# initramfs's /tmp).
TMPDIR=/sysroot/var/lib/crashring exec crashring recover --capture \
	--dir /sysroot/var/lib/crashring --config-root /sysroot
