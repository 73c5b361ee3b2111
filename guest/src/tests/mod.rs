//! The `tk-test-*` tests, one module each: `tk-test-NAME` is
//! [`NAME::main`](placement::main) (dashes become underscores), with its
//! doc and `--help` in `src/bin/tk-test-NAME.rs`. `cargo xtask test` runs
//! them from the guest's `/init`; exit 0 is a pass.
//!
//! Exceptions to the one-to-one naming: [`pool`] holds `tk-test-pool` and
//! `tk-test-pool-cxl` (the pool on the DRAM node and on the memory-only
//! node), [`runner`] the three `tk-test-runner-*` tests of /init's runner.
//! [`callers`] (the kernel's other users of a page) and [`races`] (threads
//! and signals during a sleeping call) are parts shared by several tests;
//! [`fuzz`] and [`faults`] are also used by the `tk-fuzz` tool and by
//! /init (its kernel-log reader).

pub mod block_offline;
pub mod callers;
pub mod close_scale;
pub mod cpuset;
pub mod cxl;
pub mod diff;
pub mod faults;
pub mod fuzz;
pub mod gigantic;
pub mod gigantic_cow;
pub mod gup;
pub mod hostile;
pub mod lifecycle;
pub mod memcg;
pub mod mm;
pub mod mmap_budget;
pub mod node_offline;
pub mod offline_held;
pub mod perm;
pub mod placement;
pub mod pool;
pub mod pool_hostile;
pub mod races;
pub mod rebalance;
pub mod rebalance_speed;
pub mod run;
pub mod run_apply;
pub mod run_gigantic;
pub mod runner;
pub mod socket;
pub mod socket_cpuset;
pub mod socket_hotplug;
pub mod socket_machine;
pub mod socket_place;
pub mod socket_run;
pub mod stress;
pub mod task;
pub mod vma;
