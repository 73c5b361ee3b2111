//! The protocol between the harness (`cargo xtask`, on the host) and the
//! guest's `/init` (`tk-init` of `tierkit-guest`), defined once for both
//! sides, and read one way. Its only dependencies are serde and the
//! module's pure core; the guest builds it static.
//!
//! - [`marker`]: every line /init reports starts with `TIERKIT-`; it goes
//!   to `/dev/kmsg` (a printk record, ordered with the kernel's own output
//!   such as KTAP, with the usual `[    1.234567] ` prefix on the console)
//!   and to `/dev/ttyS1` (the data channel, a file on the host), together
//!   with the output of every guest program, so that lines like
//!   `TIERKIT-JSON {...}` arrive whole, never interleaved with printk.
//! - [`param`]: the kernel command-line parameters /init reads
//!   (`tierkit.mode=`, `tierkit.filter=`, `tierkit.cxl=`, ...).
//! - [`cxl`]: the value of `tierkit.cxl=` (one RAM region per window).
//! - [`deadline`]: how long each userspace test may run, and the
//!   verdicts the runner's own tests expect.
//! - [`select`]: which tests a boot runs (`--filter`'s one glob dialect,
//!   the kernel's `glob_match()`).
//! - [`cmd`]: `/etc/tierkit/cmd`, the command of `cargo xtask run -- CMD`
//!   and the terminal of `cargo xtask shell`.
//! - [`rows`]: the benchmark report's rows, as `tk-workload` emits them
//!   and `cargo xtask bench` reads them.
//! - [`kmsg`]: the kernel's own report lines of an injected fault, read
//!   on the serial console by xtask and on `/dev/kmsg` by the guest tests.
//! - [`model`]: the bandwidth model the guest's calibration and workloads
//!   predict with and the report checks against.

pub mod cmd;
pub mod cxl;
pub mod deadline;
pub mod kmsg;
pub mod marker;
pub mod model;
pub mod param;
pub mod rows;
pub mod select;
