//! The commands, one file each, below the dispatch ([`crate::cli`]): each
//! takes a self-contained request made from the flags and never looks back
//! at them. A boot is [`crate::boot`]'s.

pub mod bench;
pub mod build;
pub mod in_guest;
pub mod kernel;
pub mod lava;
pub mod matrix;
pub mod merge;
pub mod module;
pub mod run;
pub mod shell;
pub mod test;
