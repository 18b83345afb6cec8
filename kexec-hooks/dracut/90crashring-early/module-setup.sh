#!/bin/bash
# dracut module "crashring-early": on a machine `crashring arm` armed, the
# initramfs loads the crashring module before udev starts, so that a
# machine check or a driver's failure in the first seconds of boot is
# recorded live, and the module's backfill of the boot's earlier printk
# lines covers less. Its options are arm's (and `crashring debug
# --persist`'s) files in /etc/modprobe.d, copied in.

check() {
	# Armed: arm lists the module for every boot (disarm removes the file).
	grep -qsx crashring "${dracutsysrootdir-}/etc/modules-load.d/crashring.conf" || return 1
	return 0
}

depends() {
	return 0
}

installkernel() {
	hostonly='' instmods crashring
}

install() {
	inst_multiple -o /etc/modprobe.d/crashring.conf /etc/modprobe.d/crashring-debug.conf
	inst_hook pre-udev 10 "$moddir/crashring-early.sh"
}
