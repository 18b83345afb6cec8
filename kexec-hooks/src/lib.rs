//! crashring's boot-stage integration: `crashring arm` and `disarm`
//! (reserving the region with `memmap=` through the boot loader, the module's
//! options and loading), `crashring status`, and the policy of the
//! next-boot recovery (`crashring recover`, crashring-recover.service):
//! its configuration, retention, journal messages, and whether the range
//! kept the last boot's generation, and what the firmware and boot loader
//! do to it; the debug selection kept across boots (`crashring debug
//! --persist`); the initramfs hooks that load the module before the root
//! file system; the kdump capture hooks (a systemd
//! unit for Debian's kdump-tools, a dracut module for kdump-utils).

pub mod arm;
pub mod boot;
pub mod config;
pub mod continuity;
pub mod debug;
pub mod initramfs;
pub mod iomem;
pub mod journal;
pub mod kdump_tools;
pub mod loader;
pub mod reserve;
pub mod retention;
pub mod status;
pub mod system;
