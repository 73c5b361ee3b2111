//! What people run in the guest (or on a real NUMA machine with tierkit
//! loaded), each with its doc and `--help` in `src/bin/`:
//!
//! - [`run`]: `tk-run`, runs a program with its large allocations placed by
//!   tierkit (the launcher; the preload library is the `tkrun` crate).
//! - [`calibrate`]: `tk-calibrate`, measures the nodes' bandwidth and
//!   latency and writes the weights; `--apply` uses [`rebalance`].
//! - [`workload`]: `tk-workload`, bandwidth and latency kernels on
//!   placed memory (its command line in [`workload::cli`]).
//! - [`stress`]: `tk-stress`, concurrent mappers, weight writes, clears and
//!   memory blocks going offline (also run as `tk-test-stress`).
//! - [`fuzz`]: `tk-fuzz`, the syscall fuzzer's command line (the fuzzer is
//!   [`crate::tests::fuzz`]).
//! - [`demo`], [`demo_gigantic`]: `tk-demo`, `tk-demo-gigantic` for
//!   `cargo xtask run`.

pub mod calibrate;
pub mod demo;
pub mod demo_gigantic;
pub mod fuzz;
pub mod rebalance;
pub mod run;
pub mod stress;
pub mod workload;
