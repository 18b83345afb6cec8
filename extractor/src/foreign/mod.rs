//! Traces and logs the kernel keeps itself, read from a dump beside
//! crashring's own regions: its printk log ([`printk`]).

pub mod printk;
