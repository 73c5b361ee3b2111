//! Stage two, the plan: what to boot, known before anything is built.
//! The [`runs`] of `cargo xtask test`, each a [`topology`] with its
//! options; the [`names`] a `--filter` selects from; the accelerator a
//! boot gets ([`accel`]).

pub mod accel;
pub mod names;
pub mod runs;
pub mod topology;
