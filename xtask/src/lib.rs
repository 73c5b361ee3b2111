//! `cargo xtask`: builds Linux with Rust and tierkit, boots it in QEMU with
//! a CPU-less memory node, and reports KUnit and userspace results.
//!
//! Pipeline, one module per stage:
//! [`setup`] (host tools) -> [`kernel`] (source, config, build) ->
//! [`module`] (tierkit.ko) -> [`userspace`] (static guest binaries) ->
//! [`initramfs`] (cpio with the `tk-init` guest binary as /init) -> [`qemu`] (+ [`topology`]) ->
//! [`verdict`] (markers, [`ktap`]) -> [`report`].
//!
//! The commands: [`cli`] (the flags, the checks, the one dispatch) ->
//! [`commands`] (one file per command, each taking its own request; a
//! boot is [`boot`]'s: build, boot, judge, report); `test` boots the runs
//! of [`runs`]; `run -- CMD` and `shell` share [`commands::in_guest`]
//! (the user's command, the shared working directory, [`guest_tools`] in
//! the initramfs).

pub mod accel;
pub mod bench;
pub mod boot;
pub mod cli;
pub mod commands;
pub mod console;
pub mod debian;
pub mod guest_tools;
pub mod initramfs;
pub mod kcidb;
pub mod kconfig;
pub mod kdir;
pub mod kernel;
pub mod ktap;
pub mod module;
pub mod names;
pub mod printk;
pub mod profile;
pub mod pyenv;
pub mod qemu;
pub mod records;
pub mod report;
pub mod runs;
pub mod setup;
pub mod timings;
pub mod tkrun;
pub mod topology;
pub mod userspace;
pub mod util;
pub mod validate;
pub mod verdict;

// The commands' library parts, at the paths the host tests use.
pub use commands::test as testing;
pub use commands::{lava, matrix, merge};
