//! The `tk-bench-*` benchmarks run by `cargo xtask bench`, one module each:
//! `tk-bench-NAME` is `NAME::main`, with its doc and `--help` in
//! `src/bin/tk-bench-NAME.rs`.

pub mod all;
pub mod clear;
pub mod damon_sysfs;
pub mod gigantic;
pub mod move_speed;
pub mod rebalance;
pub mod run;
pub mod target_share;
pub mod wi;
