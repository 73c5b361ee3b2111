//! The checks of `tk-test-faults` (see its doc): systematic fault
//! injection into every tierkit operation. Here: the operations ([`Op`]),
//! the sweep's bounds and the environment it runs in ([`Env`]); one armed
//! call in `step.rs`, the sweep of one operation in `tester.rs`, the run
//! over every operation in `run.rs`, and the first touch of a gigantic
//! mapping in a forked child in `touch.rs`.

mod run;
mod step;
mod tester;
mod touch;

pub use run::*;
pub use step::*;
pub use tester::*;
pub use touch::*;

use crate::abi::tk::{self, Tierkit, TK_MODE_INTERLEAVE, TK_MODE_WEIGHTED_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::errno::errno_name;
use crate::linux::sys::PAGE_SIZE;
use crate::linux::vma::{fork_run, Exit};
use crate::tests::faults::{
    crash_lines, holdings, holdings_diff, injected_faults, Armed, FailNth, FaultKnobs, Kmsg,
    MemSnapshot,
};
use crate::topology::node::Topology;
use crate::topology::weights::{write_file, WeightDir, WeightSnapshot};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::io;
use std::time::Instant;
use tierkit_core::uapi::{
    TkBulk, TkClearBench, TkGigantic, TkPolicy, TkRebalance, TkTaskNext, TIERKIT_MAX_NODES,
    TK_IOC_BULK, TK_IOC_CLEAR_BENCH, TK_IOC_REBALANCE, TK_IOC_SET_GIGANTIC, TK_IOC_SET_POLICY,
    TK_IOC_TASK_NEXT, TK_PLACE_ANY, TK_TASK_NEXT_MAX,
};
// The pool's debugfs file.
use crate::abi::pool::POOL_PATH;

/// Bytes of the 4 KiB-mode mmap: 32 pages, each a fault point of its own
/// (plus page tables and slab). Every page is allocated by the same code
/// and a fault at page k unwinds the k - 1 before it the same way, so 32
/// pages (more than one round of the weights /init sets on numa, 25:6, so both
/// nodes and the turn from one to the other are in it) cover what 512 do:
/// a sweep of 2 MiB had 527 points and took 211 s under the debug kernel.
pub const MMAP_4K_BYTES: usize = 32 * PAGE_SIZE;

/// Pages of the bulk call (as [`MMAP_4K_BYTES`]: one round of weights).
pub const BULK_PAGES: u64 = 32;

pub const GIB: usize = 1 << 30;

/// Free pages a node may have lost between the start of an operation's
/// sweep and any later step, with everything of the step closed: 2 MiB.
/// Free pages are counted with the per-CPU lists (see
/// `faults::MemSnapshot`), so what remains is the kernel's own activity
/// meanwhile: slab pages for our files, page tables and heap of this
/// process, the printk ring. A step that leaks leaks at least what it
/// failed to give back, and the 4 KiB mmap alone takes 32 pages per step,
/// so a leak per step adds up past this within 16 of its about 45 steps.
pub const FREE_TOL_PAGES: u64 = 512;

/// Growth of `SUnreclaim` allowed over a sweep: 1 MiB (slab caches keep
/// partial slabs; objects freed do not give their pages back at once).
pub const SLAB_TOL_KB: u64 = 1024;

/// How long a shortfall of free memory may take to go away (deferred
/// frees) before it counts as a leak.
pub const SETTLE_MS: u64 = 2000;

/// A step slower than this switches the sweep to growing strides.
pub const SLOW_STEP_MS: u128 = 300;

/// Every N up to here is tried, however slow the steps.
pub const EXHAUSTIVE_UPTO: u32 = 16;

/// The first this many slow steps are made one N at a time too: right
/// after a gigantic clear come the allocations of the page tables above
/// the range (PUD, PMD) and of the first PTE tables, each its own path
/// (a failed PMD allocation is EFAULT inside vm_insert_pages()).
pub const SLOW_EXHAUSTIVE: u32 = 8;

/// The first stride once steps are slow; each next one is 4 times larger.
pub const FIRST_STRIDE: u32 = 16;

/// Once a strided sweep succeeded, the end is bisected until it is known
/// within this many points.
pub const BISECT_TO: u32 = 32;

/// Largest stride between two N once steps are slow.
pub const MAX_STRIDE: u32 = 256;

/// No operation has this many fault points; reaching it is a failure.
pub const MAX_N: u32 = 20_000;

/// Failures listed per operation (the rest are counted).
pub const MAX_LISTED: usize = 6;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Open,
    SetPolicy,
    Mmap4k,
    MmapGigantic,
    Bulk,
    TaskNext,
    SetGigantic,
    ClearBench,
    GiganticTouch,
    Rebalance,
    WeightNode(u32),
    Auto,
    Bandwidth,
    Pool,
}

impl Op {
    pub fn name(self) -> String {
        match self {
            Op::Open => "open".into(),
            Op::SetPolicy => "TK_IOC_SET_POLICY".into(),
            Op::Mmap4k => "mmap 4k".into(),
            Op::MmapGigantic => "mmap gigantic".into(),
            Op::Bulk => "TK_IOC_BULK".into(),
            Op::TaskNext => "TK_IOC_TASK_NEXT".into(),
            Op::SetGigantic => "TK_IOC_SET_GIGANTIC".into(),
            Op::ClearBench => "TK_IOC_CLEAR_BENCH".into(),
            Op::GiganticTouch => "gigantic first touch".into(),
            Op::Rebalance => "TK_IOC_REBALANCE".into(),
            Op::WeightNode(n) => format!("write weighted_interleave/node{n}"),
            Op::Auto => "write weighted_interleave/auto".into(),
            Op::Bandwidth => "write weighted_interleave/bandwidth".into(),
            Op::Pool => "write gigantic/pool".into(),
        }
    }

    /// Errnos the ABI documents for a failed allocation in this call. A
    /// gigantic first touch that fails is SIGBUS for the toucher, reported
    /// here as EFAULT.
    pub fn allowed(self) -> &'static [i32] {
        match self {
            Op::GiganticTouch => &[libc::EFAULT],
            _ => &[libc::ENOMEM],
        }
    }

    /// A write to a debugfs file.
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Op::WeightNode(_) | Op::Auto | Op::Bandwidth | Op::Pool
        )
    }
}

/// What the test works with.
pub struct Env {
    pub mem_mask: u64,
    /// The node with most free memory, for the gigantic operations.
    pub big_nid: u32,
    pub wd: WeightDir,
    /// `bandwidth` as /init left it, and a variant for the bandwidth write.
    pub bw_orig: String,
    pub bw_new: String,
    pub orig_auto: Option<bool>,
    pub baseline_held: BTreeMap<String, u64>,
    /// Memory at the start, slab caches drained
    /// ([`MemSnapshot::take_drained`]).
    pub start: MemSnapshot,
}

/// State of the weight table, to check that a failed write changed
/// nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WiState {
    pub auto: Option<bool>,
    pub table: [u8; 64],
    pub bandwidth: String,
}

pub fn wi_state(wd: &WeightDir) -> Result<WiState, String> {
    Ok(WiState {
        auto: wd.auto().map_err(|e| format!("{e:#}"))?,
        table: wd.table().map_err(|e| format!("{e:#}"))?,
        bandwidth: std::fs::read_to_string(wd.bandwidth_path())
            .map_err(|e| format!("reading bandwidth: {e}"))?,
    })
}
