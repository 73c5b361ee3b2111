//! tierkit's guest side: the static binaries the guest's `/init` runs, in
//! rooms named for their jobs. Each binary in `src/bin/` is a thin entry:
//! its doc (its `--help`) and a call to its room's `main`.
//!
//! - [`init`]: the guest's `/init` itself (`tk-init`): mounts, CXL region
//!   assembly, insmod, the tests, rmmod, power-off.
//! - [`tests`]: one module per `tk-test-*` test, run by `cargo xtask test`
//!   (exit 0 = pass).
//! - [`benches`]: the `tk-bench-*` benchmarks, run by `cargo xtask bench`.
//! - [`tools`]: what people run: `tk-run`, `tk-calibrate`, `tk-workload`,
//!   `tk-stress`, `tk-fuzz` and the demos (`cargo xtask run`).
//!
//! What the rooms share, each a room of its own:
//! - [`linux`]: the syscall layer, what the kernel says about itself,
//!   errno names, memory blocks, mappings and `/proc` memory figures,
//!   cgroup v2;
//! - [`topology`]: nodes, CXL regions, sockets and the firmware's
//!   per-initiator bandwidth, the weight files of the kernel and of
//!   tierkit, and where each page should land;
//! - [`abi`]: `/dev/tierkit`, its pre-cleared gigantic pool, time to first
//!   use of a gigantic page, the start of a test;
//! - [`harness`]: result lines, `--help`, a seeded random source.
//!
//! Each shared room uses only the rooms above it in this list's reverse
//! order: `harness` none, `linux` only `harness`, `topology` those two,
//! `abi` the three (xtask/tests/imports.rs keeps it so).
//!
//! They are built static and run as root from the guest's `/init`; they
//! also run on a real NUMA machine with tierkit.ko loaded (they put the
//! kernel's and tierkit's weights back when they are done).
//!
//! Output protocol (see [`harness::report`]): one `ok - ...` / `not ok - ...: why`
//! line per check, `# ...` comments, and one `TIERKIT-JSON {...}` line last.
//!
//! Everything that does not need the guest is unit-tested on the host with
//! `cargo test -p tierkit-guest`.

pub mod benches;
pub mod init;
pub mod tests;
pub mod tools;

pub mod abi;
pub mod harness;
pub mod linux;
pub mod topology;
