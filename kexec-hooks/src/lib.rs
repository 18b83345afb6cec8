//! crashring's boot-stage hooks: arming the capture kernel, the
//! capture-kernel hook that reads the region, and the next-boot recovery
//! service that archives the previous generation.
//!
//! Nothing lives here yet: the hooks arrive with the kernel module they
//! drive (see ARCHITECTURE.md).
