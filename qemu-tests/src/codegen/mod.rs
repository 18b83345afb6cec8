//! Generated artifacts: the C headers and FORMAT.md's tables.
pub mod cheader;
pub mod formatdoc;
