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
//! What the rooms share:
//! - the kernel: the syscall layer ([`sys`]), what the kernel says about
//!   itself ([`kernel`]: command-line parameters, debugfs, THP), errno
//!   names ([`errno`]), memory blocks ([`memblock`]), mappings and
//!   `/proc` memory figures ([`vma`]), cgroup v2 ([`cgroup`]);
//! - topology: the nodes ([`node`]), CXL regions ([`cxl`]), sockets and
//!   the firmware's per-initiator bandwidth ([`sockets`], [`hmat`]), the weight
//!   files of the kernel and of tierkit ([`weights`]), and where each page
//!   should land ([`interleave`]);
//! - tierkit's ABI: `/dev/tierkit` ([`tk`]), its pre-cleared gigantic pool
//!   ([`pool`]), time to first use of a gigantic page ([`first_use`]);
//! - reporting: the start of a test ([`ready`]), result lines
//!   ([`report`]), `--help` ([`help`]), a seeded random source ([`rng`]).
//!
//! They are built static and run as root from the guest's `/init`; they
//! also run on a real NUMA machine with tierkit.ko loaded (they put the
//! kernel's and tierkit's weights back when they are done).
//!
//! Output protocol (see [`report`]): one `ok - ...` / `not ok - ...: why`
//! line per check, `# ...` comments, and one `TIERKIT-JSON {...}` line last.
//!
//! Everything that does not need the guest is unit-tested on the host with
//! `cargo test -p tierkit-guest`.

pub mod benches;
pub mod init;
pub mod tests;
pub mod tools;

pub mod cgroup;
pub mod cxl;
pub mod errno;
pub mod first_use;
pub mod help;
pub mod hmat;
pub mod interleave;
pub mod kernel;
pub mod memblock;
pub mod node;
pub mod pool;
pub mod ready;
pub mod report;
pub mod rng;
pub mod sockets;
pub mod sys;
pub mod tk;
pub mod vma;
pub mod weights;
