//! The kernel module's ring code built for user space, and its tests.
mod c_ffi;
mod c_model;
mod c_ring;
