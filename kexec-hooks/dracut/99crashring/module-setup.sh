#!/bin/bash
# dracut module "crashring", for the kdump capture initramfs of Fedora and
# RHEL's kdump-utils: add it with `dracut_args --add crashring` in
# /etc/kdump.conf. It puts the crashring binary and a kdump pre.d hook in
# the initramfs; kdump-utils runs /etc/kdump/pre.d/* before it saves the
# dump, so the crash is bundled even if makedumpfile then fails or fills
# the disk.

check() {
	require_binaries crashring stat dirname || return 1
	# Only when asked for: a normal boot's initramfs has no use for it.
	return 255
}

depends() {
	return 0
}

install() {
	inst_binary "$(command -v crashring)" /usr/bin/crashring
	# The hook's: whether the real /var is mounted under /sysroot.
	inst_multiple stat dirname
	# The hook reads the configuration from /sysroot, as it is at the crash.
	inst_script "$moddir/kdump-pre.sh" /etc/kdump/pre.d/50-crashring
}
