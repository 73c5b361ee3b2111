//! tk-bench-run: tk-run against the kernel on unmodified programs, for
//! `cargo xtask bench` (run by tk-bench-all after tk-calibrate). One
//! `TIERKIT-JSON` record with two tables:
//!
//! - `placement`: the triad (`tk-stream`) under `numactl
//!   --weighted-interleave` with the kernel's global weights (THP off),
//!   under `tk-run --weights` with the same weights, and under `tk-run
//!   --weights measured` (tk-calibrate's result, if there is one): pages
//!   of its arrays where the address rule puts them (each run fails unless
//!   every page is), and triad MB/s; `tk-run --weights` fails unless its
//!   best MB/s is within the noise of numactl's (the larger of the spread
//!   of each one's repeats and [`NOISE_FLOOR`]);
//! - `first_use`: time from malloc of 1 GiB - 4 KiB (tk-run: 1 GiB, the
//!   least the library makes gigantic; each tk-run row fails unless its
//!   chunk is GiB aligned) until every 4 KiB
//!   page was written once (`tk-stream -f`), on the local node: the
//!   kernel's 4 KiB pages, hugetlb 1 GiB pages (glibc's
//!   `glibc.malloc.hugetlb` tunable), `tk-run --gigantic` and `tk-run
//!   --gigantic --pool 1` (which fails unless its first touch took the
//!   pre-cleared GiB: `gigantic_pool_taken` + 1);
//! - `fork`: fork's cost with a written block of `--fork-mib` MiB
//!   (`tkrun-check -f`), the kernel's memory against `tk-run` (whose row
//!   fails unless the block is tierkit's): the time until `fork()`
//!   returns in the parent, until the child has exited and been reaped,
//!   the memory the child's start took (MemAvailable before the fork
//!   less in the child), and the resident memory (VmRSS) of the parent
//!   before the fork and of the child at its start. tk-run forks with a
//!   copy-on-write snapshot: its memory does not grow with the block, its
//!   time does, per 4 KiB page (a reference, a share count and the zap of
//!   the parent's PTE), where the kernel's fork of THP-backed memory
//!   costs per 2 MiB.
//!
//! Flags: `--elements N` per triad array (default 2097152), `--rounds R`
//! (3), `--repeat K` (2: each triad run K times, alternating, the best
//! kept), `--no-first-use`, `--fork-mib M` (4096, a 4 GiB process; 0: no
//! fork rows), `--fork-only` (the fork rows alone).

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::benches::run::main()
}
