//! crashring's boot-stage integration: `crashring arm` and `disarm`
//! (reserving the region with `memmap=` through GRUB, the module's
//! options and loading) and `crashring status`.
//!
//! The next-boot recovery service and the capture-kernel hooks will live
//! here too (see ARCHITECTURE.md).

pub mod arm;
pub mod iomem;
pub mod status;
pub mod system;
