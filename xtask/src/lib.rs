//! `cargo xtask`: builds Linux with Rust and tierkit, boots it in QEMU with
//! a CPU-less memory node, and reports KUnit and userspace results.
//!
//! The stages, one folder each, in the order a boot passes them:
//! [`kernels`] (the kernel, tierkit.ko, the guest binaries, the initramfs)
//! -> [`plan`] (the runs, their topologies, the names `--filter` selects
//! from) -> [`boot`] (one boot: QEMU and its live console) -> [`judge`]
//! (the console log read once into a verdict: markers, KTAP, crashes)
//! -> [`report`] (the summary, results.json, JUnit, KCIDB, bench charts,
//! which only write what the judge decided).
//!
//! The commands: [`cli`] (the flags, the checks, the one dispatch) ->
//! [`commands`] (one file per command, each taking its own request; a
//! boot is [`boot`]'s: build, boot, judge, report); `test` boots the runs
//! of [`plan::runs`]; `run -- CMD` and `shell` share [`commands::in_guest`]
//! (the user's command, the shared working directory,
//! [`kernels::guest_tools`] in the initramfs). Shared by all: [`util`]
//! (host facts, input checks, host setup, the Python venv).
//!
//! No module imports another that imports it back (`tests/imports.rs`).

pub mod boot;
pub mod cli;
pub mod commands;
pub mod judge;
pub mod kernels;
pub mod plan;
pub mod report;
pub mod util;

// The commands' library parts, at the paths the host tests use.
pub use commands::test as testing;
pub use commands::{lava, matrix, merge};
