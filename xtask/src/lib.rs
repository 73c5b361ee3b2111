//! `cargo xtask`: builds Linux with Rust and tierkit, boots it in QEMU with
//! a CPU-less memory node, and reports KUnit and userspace results.
//!
//! Pipeline, one module per stage:
//! [`setup`] (host tools) -> [`kernel`] (source, config, build) ->
//! [`module`] (tierkit.ko) -> [`userspace`] (static guest binaries) ->
//! [`initramfs`] (cpio with the `tk-init` guest binary as /init) -> [`qemu`] (+ [`topology`]) ->
//! [`verdict`] (markers, [`ktap`]) -> [`report`].
//!
//! The commands: [`cli`] (clap) -> [`guest`] (one boot) or [`testing`]
//! (`test`: host tests and the boots of [`runs`], then [`cmd_tests`]);
//! `run -- CMD` and `shell` -> [`user_cmd`] (the user's command, the
//! shared working directory, [`guest_tools`] in the initramfs).

pub mod accel;
pub mod bench;
pub mod cli;
pub mod cmd_tests;
pub mod console;
pub mod debian;
pub mod guest;
pub mod guest_tools;
pub mod initramfs;
pub mod kcidb;
pub mod kconfig;
pub mod kdir;
pub mod kernel;
pub mod ktap;
pub mod lava;
pub mod matrix;
pub mod merge;
pub mod module;
pub mod printk;
pub mod profile;
pub mod pyenv;
pub mod qemu;
pub mod records;
pub mod report;
pub mod runs;
pub mod setup;
pub mod testing;
pub mod tkrun;
pub mod topology;
pub mod user_cmd;
pub mod userspace;
pub mod util;
pub mod validate;
pub mod verdict;
