//! crashring's boot-stage integration: `crashring arm` and `disarm`
//! (reserving the region with `memmap=` through GRUB, the module's
//! options and loading), `crashring status`, and the policy of the
//! next-boot recovery (`crashring recover`, crashring-recover.service):
//! its configuration, retention and journal messages.
//!
//! The capture-kernel hooks will live here too (see ARCHITECTURE.md).

pub mod arm;
pub mod config;
pub mod iomem;
pub mod journal;
pub mod retention;
pub mod status;
pub mod system;
