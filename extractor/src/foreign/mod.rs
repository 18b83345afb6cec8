//! Traces and logs the kernel keeps itself, read from a dump beside
//! crashring's own regions: its printk log ([`printk`]) and pstore's
//! RAM backend ([`ramoops`]).

pub mod printk;
pub mod ramoops;
