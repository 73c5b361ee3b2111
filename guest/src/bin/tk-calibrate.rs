//! tk-calibrate: measure each memory node from its nearest CPUs, print the
//! figures next to HMAT's (or the CXL region's) with the weights each
//! gives, and set tierkit's weights from the measurement.
//!
//! Per node: read, write and triad bandwidth (and STREAM's copy, scale and
//! add) with T threads and the load latency by pointer chase, each the
//! best of a few rounds (see `tierkit_guest::tools::workload::calib`), then a
//! probe that tells the parallel regime (hardware: nodes serve traffic at
//! once) from the serial one (emulation: every access paid in turn).
//!
//! Then, with tierkit loaded:
//! - **auto from measurement** (default): writes the measured read and
//!   write bandwidth to tierkit's `bandwidth` file and sets `auto`, so
//!   tierkit's weights follow the kernel's own formula
//!   (`reduce_interleave_weights`) on measured instead of firmware figures;
//! - **optimized** (`--optimize WORKLOAD`, one of `lookup`, `copy`,
//!   `scale`, `add`, `triad`/`stream`): writes the weights the bandwidth
//!   model recommends for that workload in the measured regime (any of
//!   1..255; nodes may be left out: the nodemask to pass to
//!   `TK_IOC_SET_POLICY` is printed and saved).
//!
//! **`--apply PID`**: every `/dev/tierkit` file process PID maps (a tk-run
//! program's too) gets the new weights as its own and is rebalanced to
//! them (`TK_IOC_REBALANCE`: only the pages whose node changes move, while
//! the process runs); the moves and the placement of its tierkit mappings
//! before and after (`/proc/PID/numa_maps`) are printed, and the totals
//! are in the JSON line (`rebalance`). The weights: `--weights N:W,...`
//! (then nothing is measured and no global table is written), else the
//! optimized ones with `--optimize`, else the measured ones. The exit
//! status is non-zero, with the reason, unless every misplaced page moved:
//! no such process or it exited meanwhile, no tierkit mapping, no
//! CAP_SYS_ADMIN, a page that could not move, a gigantic file (its GiBs
//! stay). See `tierkit_guest::tools::rebalance`.
//!
//! **`--per-socket`**: then every node is measured again from each socket
//! (CPU package, `physical_package_id`): the same measurement, by threads
//! pinned to that socket's CPUs whichever node is nearest, and the
//! socket's weight table is the kernel's formula on those figures (the
//! flat weights' formula, nodes not measured at 0). The tables are saved
//! beside the flat calibration (`sockets`, one entry per socket with its
//! CPUs, figures and `weights`) for `tk-run --weights
//! per-socket:measured`; a file without them still serves `--weights
//! measured`. Unless `--no-write`, each table is also set as tierkit's
//! device-wide table for its socket (`TK_IOC_SOCKET_WEIGHTS` with
//! `TK_SOCKET_F_DEVICE`), as the flat figures set its global weights: a
//! file without tables of its own then places by the table of the socket
//! its allocation runs on.
//!
//! The calibration is saved as JSON (`--out`, default
//! `/tmp/tierkit-calibration.json`) for `tk-workload --calibration`.
//!
//! Flags: `--size BYTES` per node (default 16M in tierkit's guest, 1G
//! elsewhere: use more than the last-level cache), `--threads T` (default:
//! every CPU of the node nearest to the memory; 1 in tierkit's guest, on a
//! shared host), `--duration SECS` per
//! block (0.15 in the guest, 1 elsewhere), `--rounds R` (3), `--nodes 0,2`,
//! `--regime parallel|serial` (skip the probe), `--no-write` (measure and
//! print only), `--optimize WORKLOAD`, `--apply PID`, `--weights N:W,...`
//! (with `--apply`), `--per-socket`, `--out FILE`, `--no-settle` (no TLB settle before
//! each timed block).

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tools::calibrate::main()
}
