//! tierkit's syscall fuzzer, used by `tk-fuzz` (command line) and
//! `tk-test-fuzz` (fixed bounds, in `cargo xtask test`).
//!
//! Workers (`--procs` processes forked from one parent, `--threads`
//! threads each) make random calls against tierkit:
//!
//! - `ioctl` on `/dev/tierkit`: its seven commands (`TK_IOC_SET_POLICY`,
//!   `BULK`, `TASK_NEXT`, `SET_GIGANTIC`, `CLEAR_BENCH`, `REBALANCE`,
//!   `SNAPSHOT`) with random fields (modes, flags, nodemasks empty, full,
//!   beyond `nr_node_ids`, counts, thread counts, placements, chunk sizes;
//!   for a snapshot, parts of the worker's own mappings, 4 KiB, gigantic or
//!   not tierkit's, while its other threads use them, and bad ranges), the
//!   same numbers with another
//!   size or direction, other numbers of its magic, random numbers; the
//!   argument valid, NULL, unmapped, non-canonical, a kernel address
//!   (`0xffff888000000000`, kernel text), read-only, `PROT_NONE`, or
//!   straddling into a `PROT_NONE` page. Also on debugfs files, `O_PATH`
//!   fds and bad fds.
//! - `mmap` with random lengths (0, unaligned, pages, past 1 GiB, huge),
//!   offsets (huge, unaligned, overflowing), flags (shared, private,
//!   validate, populate, locked, ...) and protections; then `munmap` (whole,
//!   head, tail), `mprotect`, `madvise` (`MADV_HWPOISON` and
//!   `MADV_SOFT_OFFLINE` excepted), `mremap`, `msync`, and reads and writes
//!   of the mapping through the kernel (`/proc/self/mem`, a pipe,
//!   `process_vm_readv`), never by touching it (a fault would be a signal);
//!   pipes filled by `vmsplice` and io_uring rings with registered buffers
//!   kept past the call (up to 4 a worker), so that their pages outlive
//!   their mappings and files (every orphan must be freed by the end).
//! - Writes to tierkit's debugfs files (`nodeN`, `auto`, `bandwidth`,
//!   `stats`): numbers valid and not, huge, signed, hex, octal, booleans,
//!   bandwidth lines good and malformed, random bytes with NULs, empty and
//!   long writes, at offsets, from bad buffers; reads.
//! - `open`/`close`/`dup` of device and debugfs files, and `read`, `write`,
//!   `lseek`, `fstat`, `poll`, `fcntl`, `fsync`, `ftruncate`, `fallocate`,
//!   `flock` on them.
//! - THP flipped while the other threads fault: `prctl(PR_SET_THP_DISABLE)`
//!   for the process, `MADV_HUGEPAGE`/`MADV_NOHUGEPAGE` for a mapping; and
//!   a paced `TK_IOC_REBALANCE` while a child stops and continues the
//!   process (`races.rs`).
//! - Scheduled races, set up on purpose so that every run makes each
//!   (`scheduled.rs`): THP flips during 4 KiB faults and during a GiB's
//!   first touch, stop/continue/SIGUSR1 during paced rebalances, pipes and
//!   io_uring buffers outliving their files, offlines during a 4 KiB mmap
//!   and a `TK_IOC_BULK`; each counted by outcome, and the run fails if
//!   one that the machine can run never ran.
//!
//! Files are shared (opened by the parent before the fork: every process
//! and thread uses them; one per process: its threads share it) and
//! separate (each worker opens and closes its own).
//!
//! Each result is checked against the ABI where the ABI fixes it: an
//! unknown command is `ENOTTY`, a bad argument pointer `EFAULT`, a bad fd
//! `EBADF`, `TK_IOC_SET_POLICY` succeeds exactly for a valid mode, zero
//! flags (or `TK_POLICY_F_WEIGHTS` with weighted mode and a weight for
//! every node left) and a mask that meets N_MEMORY and returns that intersection,
//! `TK_IOC_BULK` places exactly `nr_pages` on memory nodes, a private
//! mapping is refused, a weight write of `0`, `256` or `abc` is `EINVAL`
//! and of `7` succeeds, and so on ([`Worker`]); other results are counted by
//! errno. The kernel's own reports (BUG, WARNING, oops) are the harness's.
//!
//! Memory: 4 KiB mappings are 1 to 16 pages and the pages of a mapping stay
//! with its file until the file is closed, so a run holds at most a few
//! hundred MB. Calls that take a GiB (a gigantic mmap, `TK_IOC_CLEAR_BENCH`
//! of one range) and offlines of a random ZONE_MOVABLE block (racing the
//! other workers' mmaps and bulk calls; each must end within 20 s, and a
//! block that went offline comes back at once) are made only by worker
//! 0.0, at most `--big` times.
//!
//! Determinism: worker `p.t` draws from its own xoshiro256** stream seeded
//! from (seed, p, t) by SplitMix64 (written out here, not taken from a
//! crate, so that a seed means the same calls in every version), and each
//! call from a sub-stream seeded by one draw of it, so the calls a worker
//! makes do not depend on what earlier calls returned. What cannot be
//! deterministic with more than one worker: the interleaving of workers
//! (a shared file's policy, mode and mapped state, the weights at the time
//! of a call, hence `EBUSY`/`EINVAL`/`ENOMEM` on shared files), fd numbers,
//! and where the time bound stops a worker. `--only P.T` replays one
//! worker's stream alone (same calls, in one thread), which reproduces
//! anything that does not need another worker's help.
//!
//! Here: the configuration, environment and outcome of a run. The worker
//! is in `worker.rs` (its state, bookkeeping and loop), its calls by kind
//! in `ioctl.rs`, `mm.rs` and `files.rs`, the debugfs payloads in
//! `payloads.rs`, the processes, threads and status board ([`run`]) in
//! `procs.rs`, and [`checked_run`] in `checked.rs`.

pub use crate::linux::errno::errno_str;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ffi::{c_void, CString};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tierkit_core::uapi::{
    TkBulk, TkClearBench, TkGigantic, TkPolicy, TkRebalance, TkSnapshot, TkTaskNext, TK_IOC_BULK,
    TK_IOC_CLEAR_BENCH, TK_IOC_REBALANCE, TK_IOC_SET_GIGANTIC, TK_IOC_SET_POLICY, TK_IOC_SNAPSHOT,
    TK_IOC_TASK_NEXT, TK_PLACE_ANY, TK_REBALANCE_F_DRY_RUN, TK_REBALANCE_F_WEIGHTS,
    TK_THREADS_AUTO,
};

mod checked;
mod files;
mod ioctl;
mod mm;
mod payloads;
mod procs;
mod races;
mod scheduled;
pub mod suite;
mod worker;

pub use checked::*;
pub use files::*;
pub use ioctl::*;
pub use payloads::*;
pub use procs::*;
pub use scheduled::{check_races, race_child_if_asked, Race, RACES, RACE_CHILD_ENV};
use worker::*;

#[cfg(test)]
mod tests;

// ---------------------------------------------------------------------------
// Random numbers
// ---------------------------------------------------------------------------

pub use crate::harness::rng::{splitmix64, Rng};

/// The seed of worker `p.t`'s stream.
pub fn worker_seed(seed: u64, p: u32, t: u32) -> u64 {
    let mut x = seed ^ (u64::from(p) << 32 | u64::from(t)).wrapping_mul(0xd605_bbb5_8c8a_bd35);
    splitmix64(&mut x);
    splitmix64(&mut x)
}

// ---------------------------------------------------------------------------
// Configuration and environment
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct Config {
    pub seed: u64,
    /// Fuzzed syscalls in total, split evenly over the workers.
    pub calls: u64,
    /// Wall-time bound: workers stop starting calls after it.
    pub seconds: f64,
    pub threads: u32,
    pub procs: u32,
    /// GiB-sized calls worker 0.0 may make.
    pub big: u32,
    /// Run only this worker's stream, alone.
    pub only: Option<(u32, u32)>,
    /// Write to the debugfs weight files (changes tierkit's weight table
    /// meanwhile; [`run`]'s caller restores it).
    pub debugfs_writes: bool,
    /// Make the scheduled races ([`Race`]).
    pub races: bool,
}

/// What the fuzzer needs to know about the machine.
#[derive(Clone, Debug)]
pub struct Env {
    pub mem_nodes: Vec<u32>,
    pub mem_mask: u64,
    pub nr_node_ids: u32,
    /// tierkit's weighted_interleave directory.
    pub wi: PathBuf,
    /// Online CPUs: the most threads `TK_IOC_SET_GIGANTIC` takes.
    pub online_cpus: u32,
    /// `bandwidth` has an entry for every memory node, so valid bandwidth
    /// writes can be undone by writing it back (entries cannot be
    /// removed); without, only invalid ones are made.
    pub bandwidth_ok: bool,
    /// A node with an online ZONE_MOVABLE block at discovery: the
    /// offline races are made there.
    pub movable: Option<u32>,
}

impl Env {
    pub fn discover() -> anyhow::Result<Env> {
        use anyhow::Context;
        let topo = crate::topology::node::Topology::read()?;
        let possible = std::fs::read_to_string("/sys/devices/system/node/possible")
            .context("reading node/possible")?;
        let nr_node_ids = crate::topology::node::parse_list(&possible)?
            .last()
            .map_or(1, |&n| n + 1);
        let wi = crate::topology::weights::WeightDir::tierkit()
            .context("no tierkit weighted_interleave directory")?
            .path;
        let bw = std::fs::read_to_string(wi.join("bandwidth")).unwrap_or_default();
        let covered: Vec<u32> = bw
            .lines()
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect();
        let cpus = std::fs::read_to_string("/sys/devices/system/cpu/online")
            .context("reading cpu/online")?;
        let mem_nodes: Vec<u32> = topo.memory.iter().copied().filter(|&n| n < 64).collect();
        Ok(Env {
            movable: scheduled::movable_node(&mem_nodes),
            online_cpus: crate::topology::node::parse_list(&cpus)?.len() as u32,
            bandwidth_ok: topo.memory.iter().all(|n| covered.contains(n)),
            mem_mask: topo.memory_mask(),
            mem_nodes,
            nr_node_ids,
            wi,
        })
    }
}

/// One worker's figures.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WorkerResult {
    pub worker: String,
    pub ops: u64,
    pub calls: u64,
    pub by_op: BTreeMap<String, u64>,
    /// `op result` -> count, e.g. `ioctl ENOTTY`.
    pub results: BTreeMap<String, u64>,
    pub failures: Vec<String>,
    pub nr_failures: u64,
    pub big_used: u32,
    pub seconds: f64,
    /// `race | outcome` -> runs of the scheduled races.
    pub races: BTreeMap<String, u64>,
}

impl WorkerResult {
    /// Runs of the race named `name`, whatever their outcome.
    pub fn races_of(&self, name: &str) -> u64 {
        self.races
            .iter()
            .filter(|(k, _)| k.split(" | ").next() == Some(name))
            .map(|(_, v)| v)
            .sum()
    }
}

/// The whole run.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub workers: Vec<WorkerResult>,
    /// Processes that did not end well: signal, exit code, no result.
    pub crashed: Vec<String>,
    /// Workers still inside a call at the deadline (plus grace).
    pub hung: Vec<String>,
    pub seconds: f64,
}

impl Outcome {
    pub fn calls(&self) -> u64 {
        self.workers.iter().map(|w| w.calls).sum()
    }
    pub fn ops(&self) -> u64 {
        self.workers.iter().map(|w| w.ops).sum()
    }
    pub fn failures(&self) -> Vec<String> {
        self.workers
            .iter()
            .flat_map(|w| w.failures.iter().cloned())
            .collect()
    }
    pub fn nr_failures(&self) -> u64 {
        self.workers.iter().map(|w| w.nr_failures).sum()
    }
    /// Summed `op result` counts.
    pub fn results(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for w in &self.workers {
            for (k, v) in &w.results {
                *m.entry(k.clone()).or_default() += v;
            }
        }
        m
    }
    /// Summed `race | outcome` counts of the scheduled races.
    pub fn races(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for w in &self.workers {
            for (k, v) in &w.races {
                *m.entry(k.clone()).or_default() += v;
            }
        }
        m
    }
    pub fn by_op(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for w in &self.workers {
            for (k, v) in &w.by_op {
                *m.entry(k.clone()).or_default() += v;
            }
        }
        m
    }
}
