//! Traces and logs the kernel keeps itself, read from a dump beside
//! crashring's own regions: its printk log ([`printk`]), pstore's RAM
//! backend ([`ramoops`], its parity checked by [`reed_solomon`]) and its
//! persistent ftrace buffers ([`ftrace`]); and the firmware's record of
//! the errors that ended a boot, as the next boot finds it ([`bert`]).

pub mod bert;
pub mod ftrace;
pub mod printk;
pub mod ramoops;
pub mod reed_solomon;
