//! tk-test-faults: systematic fault injection into every tierkit operation,
//! as syzkaller does it, with the kernel's own machinery
//! (`CONFIG_FAULT_INJECTION`, `FAILSLAB`, `FAIL_PAGE_ALLOC`, the per-task
//! `/proc/thread-self/fail-nth`; Documentation/fault-injection/).
//!
//! `failslab` and `fail_page_alloc` are set so that sleeping and order-0
//! allocations can fail (`ignore-gfp-wait=N`, `min-order=0`,
//! `ignore-gfp-highmem=N`, `verbose=1`: one `FAULT_INJECTION: forcing a
//! failure.` line and one `name failslab|fail_page_alloc, ...` line per
//! injected fault, read back from `/dev/kmsg` to count faults per type; no
//! stack dump) and restored afterwards. For each operation, for N = 1, 2,
//! ...: write N to `fail-nth`, make the one call, read `fail-nth` back (0 iff
//! the Nth allocation of the call was made to fail), and stop at the first
//! N for which the call succeeds without an injected fault: the operation
//! has N - 1 injection points.
//!
//! Operations: `open(/dev/tierkit)`, `TK_IOC_SET_POLICY`, `mmap` in 4 KiB
//! mode (32 pages over every memory node), `mmap` in gigantic mode (1 GiB on
//! the node with most free memory; skipped with the reason if no GiB can be
//! had), `TK_IOC_BULK` (32 pages), `TK_IOC_TASK_NEXT` (256 steps),
//! `TK_IOC_SET_GIGANTIC`, `TK_IOC_CLEAR_BENCH` (one range),
//! `TK_IOC_REBALANCE` (32 pages over every memory node asked onto one; a
//! page whose new page fails stays and is counted), the first touch
//! of a gigantic mapping (the fault allocates, clears and maps the GiB; a
//! forked child arms its own `fail-nth` and touches, and a failure is
//! SIGBUS for it, reported as EFAULT), and a write to each debugfs file
//! (`weighted_interleave/nodeN`, `auto`, `bandwidth`, `gigantic/pool`).
//!
//! At every step:
//! - the call succeeded, or failed with a documented errno (ENOMEM: each
//!   fault here is a failed allocation), never without an injected fault;
//! - a failed debugfs write changed nothing (weight, auto, bandwidth, the
//!   table), a successful one did what it says;
//! - the kernel printed no BUG/WARNING/oops (from `/dev/kmsg`);
//! - after the call's files are closed and its mappings unmapped: tierkit
//!   is usable (a fresh open, `TK_IOC_SET_POLICY` and a one-page mmap that
//!   reads zero), what it holds (`held` and `gigantic` of every node in
//!   `stats`, `held_pages` in `limits`) is back at the baseline,
//!   and each node's free pages and `SUnreclaim` are within
//!   [`FREE_TOL_PAGES`] / [`SLAB_TOL_KB`] of where they were before the
//!   operation's first step (see there for why these tolerances), measured
//!   again for up to [`SETTLE_MS`] if not (page tables of a torn-down
//!   mapping are freed after an RCU grace period).
//!   Slab is measured with what is already freed given back: the caches
//!   are shrunk through `/sys/kernel/slab/<cache>/shrink` (all of them for
//!   the test's start, then those that grew since; see
//!   `faults::drain_slab`), which also empties KASAN's quarantine of their
//!   objects. Without that, on a KASAN kernel freed objects stay in the
//!   quarantine (up to 1/32 of RAM) and SUnreclaim grows by megabytes per
//!   step with nothing leaked; objects still allocated stay counted.
//!
//! Calls that take long (a gigantic mmap or a clear benchmark allocate and
//! clear 1 GiB, seconds under TCG) are not stepped through one N at a time
//! past N = [`EXHAUSTIVE_UPTO`] and past the first [`SLOW_EXHAUSTIVE`]
//! slow steps, once three steps in a row took more than [`SLOW_STEP_MS`]
//! each: from there N grows by 16, 64, 256, 256, ... (the
//! points after a gigantic clear are the page-table allocations of
//! inserting 262144 pages, one code path), and once a call succeeds the
//! end is bisected to within [`BISECT_TO`] points. The summary says how many
//! points there were (a range then: `531..545`; the JSON's `points` is the
//! lower bound, `points_upper` the upper) and how many were exercised.
//!
//! The weight table (`auto`, weights, bandwidth) is put back as it was.

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::io;
use std::process::ExitCode;
use std::time::Instant;
use tierkit_core::uapi::{
    TkBulk, TkClearBench, TkGigantic, TkPolicy, TkRebalance, TkTaskNext, TIERKIT_MAX_NODES,
    TK_IOC_BULK, TK_IOC_CLEAR_BENCH, TK_IOC_REBALANCE, TK_IOC_SET_GIGANTIC, TK_IOC_SET_POLICY,
    TK_IOC_TASK_NEXT, TK_PLACE_ANY, TK_TASK_NEXT_MAX,
};
use userspace_tests::faults::{
    crash_lines, holdings, holdings_diff, injected_faults, Armed, FailNth, FaultKnobs, Kmsg,
    MemSnapshot,
};
use userspace_tests::node::Topology;
use userspace_tests::report::Report;
use userspace_tests::sys::PAGE_SIZE;
use userspace_tests::tk::{self, Tierkit, TK_MODE_INTERLEAVE, TK_MODE_WEIGHTED_INTERLEAVE};
use userspace_tests::vma::{fork_run, Exit};
use userspace_tests::weights::{write_file, WeightDir};
use userspace_tests::{errno_name, read_topology, tierkit_weight_dir};

const BIN: &str = "tk-test-faults";

/// Bytes of the 4 KiB-mode mmap: 32 pages, each a fault point of its own
/// (plus page tables and slab). Every page is allocated by the same code
/// and a fault at page k unwinds the k - 1 before it the same way, so 32
/// pages (more than one round of the weights /init sets on numa, 25:6, so both
/// nodes and the turn from one to the other are in it) cover what 512 do:
/// a sweep of 2 MiB had 527 points and took 211 s under the debug kernel.
const MMAP_4K_BYTES: usize = 32 * PAGE_SIZE;
/// Pages of the bulk call (as [`MMAP_4K_BYTES`]: one round of weights).
const BULK_PAGES: u64 = 32;
const GIB: usize = 1 << 30;

/// Free pages a node may have lost between the start of an operation's
/// sweep and any later step, with everything of the step closed: 2 MiB.
/// Free pages are counted with the per-CPU lists (see
/// `faults::MemSnapshot`), so what remains is the kernel's own activity
/// meanwhile: slab pages for our files, page tables and heap of this
/// process, the printk ring. A step that leaks leaks at least what it
/// failed to give back, and the 4 KiB mmap alone takes 32 pages per step,
/// so a leak per step adds up past this within 16 of its about 45 steps.
const FREE_TOL_PAGES: u64 = 512;
/// Growth of `SUnreclaim` allowed over a sweep: 1 MiB (slab caches keep
/// partial slabs; objects freed do not give their pages back at once).
const SLAB_TOL_KB: u64 = 1024;
/// How long a shortfall of free memory may take to go away (deferred
/// frees) before it counts as a leak.
const SETTLE_MS: u64 = 2000;
/// A step slower than this switches the sweep to growing strides.
const SLOW_STEP_MS: u128 = 300;
/// Every N up to here is tried, however slow the steps.
const EXHAUSTIVE_UPTO: u32 = 16;
/// The first this many slow steps are made one N at a time too: right
/// after a gigantic clear come the allocations of the page tables above
/// the range (PUD, PMD) and of the first PTE tables, each its own path
/// (a failed PMD allocation is EFAULT inside vm_insert_pages()).
const SLOW_EXHAUSTIVE: u32 = 8;
/// The first stride once steps are slow; each next one is 4 times larger.
const FIRST_STRIDE: u32 = 16;
/// Once a strided sweep succeeded, the end is bisected until it is known
/// within this many points.
const BISECT_TO: u32 = 32;
/// Largest stride between two N once steps are slow.
const MAX_STRIDE: u32 = 256;
/// No operation has this many fault points; reaching it is a failure.
const MAX_N: u32 = 20_000;
/// Failures listed per operation (the rest are counted).
const MAX_LISTED: usize = 6;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
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
    fn name(self) -> String {
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
    fn allowed(self) -> &'static [i32] {
        match self {
            Op::GiganticTouch => &[libc::EFAULT],
            _ => &[libc::ENOMEM],
        }
    }

    /// A write to a debugfs file.
    fn is_write(self) -> bool {
        matches!(
            self,
            Op::WeightNode(_) | Op::Auto | Op::Bandwidth | Op::Pool
        )
    }
}

/// What the test works with.
struct Env {
    mem_mask: u64,
    /// The node with most free memory, for the gigantic operations.
    big_nid: u32,
    wd: WeightDir,
    /// `bandwidth` as /init left it, and a variant for the bandwidth write.
    bw_orig: String,
    bw_new: String,
    orig_auto: Option<bool>,
    baseline_held: BTreeMap<String, u64>,
    /// Memory at the start, slab caches drained
    /// ([`MemSnapshot::take_drained`]).
    start: MemSnapshot,
}

/// State of the weight table, to check that a failed write changed
/// nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
struct WiState {
    auto: Option<bool>,
    table: [u8; 64],
    bandwidth: String,
}

fn wi_state(wd: &WeightDir) -> Result<WiState, String> {
    Ok(WiState {
        auto: wd.auto().map_err(|e| format!("{e:#}"))?,
        table: wd.table().map_err(|e| format!("{e:#}"))?,
        bandwidth: std::fs::read_to_string(wd.bandwidth_path())
            .map_err(|e| format!("reading bandwidth: {e}"))?,
    })
}

/// The arguments and results of one step; everything the armed call
/// touches is allocated and written before it is armed.
struct Step {
    fd: i32,
    map: *mut c_void,
    map_len: usize,
    policy: TkPolicy,
    bulk: TkBulk,
    next: TkTaskNext,
    gig: TkGigantic,
    bench: TkClearBench,
    rebal: TkRebalance,
    wbuf: Vec<u8>,
    before: Option<WiState>,
}

impl Step {
    fn new() -> Box<Step> {
        Box::new(Step {
            fd: -1,
            map: std::ptr::null_mut(),
            map_len: 0,
            policy: tk::policy(0, 0),
            bulk: TkBulk {
                nr_pages: 0,
                per_node: [0; TIERKIT_MAX_NODES],
                il_prev: 0,
                il_weight: 0,
            },
            next: TkTaskNext {
                count: 0,
                _pad: 0,
                nodes: [0; TK_TASK_NEXT_MAX],
            },
            gig: TkGigantic::default(),
            bench: TkClearBench::default(),
            rebal: TkRebalance::default(),
            wbuf: Vec::new(),
            before: None,
        })
    }

    fn close(&mut self) {
        if !self.map.is_null() {
            // SAFETY: a mapping this step made and nothing else uses.
            unsafe { libc::munmap(self.map, self.map_len) };
            self.map = std::ptr::null_mut();
        }
        if self.fd >= 0 {
            // SAFETY: an fd this step opened.
            unsafe { libc::close(self.fd) };
            self.fd = -1;
        }
    }
}

impl Drop for Step {
    fn drop(&mut self) {
        self.close();
    }
}

fn open_raw(path: &std::ffi::CStr, flags: i32) -> Result<i32, String> {
    // SAFETY: NUL-terminated path.
    let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        Err(format!("open {path:?}: {}", io::Error::last_os_error()))
    } else {
        Ok(fd)
    }
}

fn ioctl_raw<T>(fd: i32, req: u32, arg: &mut T) -> io::Result<()> {
    // SAFETY: `arg` is the `_IOWR` argument of `req`, live across the call.
    let r = unsafe { libc::ioctl(fd, req as _, arg as *mut T) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn node_file(wd: &WeightDir, op: Op) -> std::path::PathBuf {
    match op {
        Op::WeightNode(n) => wd.node_path(n),
        Op::Auto => wd.auto_path(),
        Op::Pool => POOL_PATH.into(),
        _ => wd.bandwidth_path(),
    }
}

/// Sets up everything the armed call needs (nothing of it under fault
/// injection).
fn prepare(env: &Env, op: Op, s: &mut Step) -> Result<(), String> {
    let dev = c"/dev/tierkit";
    match op {
        Op::Open => {}
        Op::SetPolicy | Op::Mmap4k | Op::Bulk | Op::TaskNext => {
            s.fd = open_raw(dev, libc::O_RDWR)?;
            s.policy = tk::policy(TK_MODE_WEIGHTED_INTERLEAVE, env.mem_mask);
            if op != Op::SetPolicy {
                let mut p = s.policy;
                ioctl_raw(s.fd, TK_IOC_SET_POLICY, &mut p)
                    .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
            }
            s.bulk.nr_pages = BULK_PAGES;
            s.next.count = TK_TASK_NEXT_MAX as u32;
        }
        Op::MmapGigantic | Op::GiganticTouch => {
            s.fd = open_raw(dev, libc::O_RDWR)?;
            let mut p = tk::policy(TK_MODE_INTERLEAVE, 1u64 << env.big_nid);
            ioctl_raw(s.fd, TK_IOC_SET_POLICY, &mut p)
                .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
            let mut g = gigantic_arg();
            ioctl_raw(s.fd, TK_IOC_SET_GIGANTIC, &mut g)
                .map_err(|e| format!("TK_IOC_SET_GIGANTIC: {e}"))?;
            if op == Op::GiganticTouch {
                call(Op::MmapGigantic, s).map_err(|e| format!("mmap: {e}"))?;
            }
        }
        Op::SetGigantic => {
            s.fd = open_raw(dev, libc::O_RDWR)?;
            s.gig = gigantic_arg();
        }
        Op::Rebalance => {
            // 32 pages over every memory node, then all of them asked onto
            // the lowest one: each page elsewhere takes a page allocation.
            s.fd = open_raw(dev, libc::O_RDWR)?;
            let mut p = tk::policy(TK_MODE_WEIGHTED_INTERLEAVE, env.mem_mask);
            ioctl_raw(s.fd, TK_IOC_SET_POLICY, &mut p)
                .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
            call(Op::Mmap4k, s).map_err(|e| format!("mmap: {e}"))?;
            s.rebal = TkRebalance {
                nodemask: env.mem_mask & env.mem_mask.wrapping_neg(),
                ..Default::default()
            };
        }
        Op::ClearBench => {
            s.fd = open_raw(dev, libc::O_RDWR)?;
            s.bench = tk::clear_bench_arg(env.big_nid as i32, clear_threads(), TK_PLACE_ANY, 1);
        }
        Op::WeightNode(n) => {
            env.wd
                .set_weight(n, 3)
                .map_err(|e| format!("setting node{n} to 3: {e:#}"))?;
            s.wbuf = b"7\n".to_vec();
        }
        Op::Auto => {
            env.wd
                .write_auto_str("false")
                .map_err(|e| format!("writing false to auto: {e}"))?;
            s.wbuf = b"true\n".to_vec();
        }
        Op::Bandwidth => {
            // Auto mode, so that the write recomputes the weights.
            restore_wi(env)?;
            env.wd
                .write_auto_str("true")
                .map_err(|e| format!("writing true to auto: {e}"))?;
            s.wbuf = env.bw_new.as_bytes().to_vec();
        }
        Op::Pool => {
            // Target 0 on the node: the write changes the pool's state
            // (and nothing is cleared in the background meanwhile).
            s.wbuf = format!("{} 0\n", env.big_nid).into_bytes();
        }
    }
    if op.is_write() {
        s.before = Some(wi_state(&env.wd)?);
        let p = std::ffi::CString::new(node_file(&env.wd, op).as_os_str().as_encoded_bytes())
            .map_err(|e| e.to_string())?;
        s.fd = open_raw(&p, libc::O_WRONLY)?;
    }
    Ok(())
}

/// Gigantic mode with two workers (one where there is one CPU), on any
/// CPU: the clears of the sweep cost seconds each under TCG.
fn gigantic_arg() -> TkGigantic {
    TkGigantic {
        threads: clear_threads(),
        placement: TK_PLACE_ANY,
        ..Default::default()
    }
}

/// Two clearing workers, or one on a one-CPU machine.
fn clear_threads() -> u32 {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| userspace_tests::node::parse_list(&s).ok())
        .map_or(1, |c| c.len().clamp(1, 2) as u32)
}

/// The one call under fault injection: a single syscall on prepared
/// memory (`s` was written in full by `prepare`).
fn call(op: Op, s: &mut Step) -> io::Result<()> {
    match op {
        Op::Open => {
            // SAFETY: NUL-terminated path.
            let fd =
                unsafe { libc::open(c"/dev/tierkit".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            s.fd = fd;
            Ok(())
        }
        Op::SetPolicy => ioctl_raw(s.fd, TK_IOC_SET_POLICY, &mut s.policy),
        Op::Bulk => ioctl_raw(s.fd, TK_IOC_BULK, &mut s.bulk),
        Op::TaskNext => ioctl_raw(s.fd, TK_IOC_TASK_NEXT, &mut s.next),
        Op::SetGigantic => ioctl_raw(s.fd, TK_IOC_SET_GIGANTIC, &mut s.gig),
        Op::ClearBench => ioctl_raw(s.fd, TK_IOC_CLEAR_BENCH, &mut s.bench),
        Op::Rebalance => ioctl_raw(s.fd, TK_IOC_REBALANCE, &mut s.rebal),
        Op::Mmap4k | Op::MmapGigantic => {
            let len = if op == Op::Mmap4k { MMAP_4K_BYTES } else { GIB };
            // SAFETY: a new shared mapping of our fd; no fixed address.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    s.fd,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            s.map = p;
            s.map_len = len;
            Ok(())
        }
        Op::GiganticTouch => Err(io::Error::other("the first touch runs in a child")),
        Op::WeightNode(_) | Op::Auto | Op::Bandwidth | Op::Pool => {
            // SAFETY: writes `wbuf.len()` bytes from a live buffer.
            let r = unsafe { libc::write(s.fd, s.wbuf.as_ptr().cast(), s.wbuf.len()) };
            if r < 0 {
                Err(io::Error::last_os_error())
            } else if r as usize != s.wbuf.len() {
                Err(io::Error::other(format!(
                    "short write {r} of {}",
                    s.wbuf.len()
                )))
            } else {
                Ok(())
            }
        }
    }
}

/// What a call must have done (or not done) besides its return value.
fn effect(env: &Env, op: Op, s: &Step, res: &io::Result<()>) -> Result<(), String> {
    match op {
        Op::SetPolicy if res.is_ok() && s.policy.nodemask != env.mem_mask => {
            return Err(format!(
                "effective mask {:#x}, expected {:#x}",
                s.policy.nodemask, env.mem_mask
            ));
        }
        Op::Bulk if res.is_ok() => {
            let sum: u64 = s.bulk.per_node.iter().sum();
            if sum != BULK_PAGES {
                return Err(format!("per_node adds up to {sum}, expected {BULK_PAGES}"));
            }
        }
        Op::Mmap4k if res.is_ok() => {
            // SAFETY: the mapping made by the call, readable for its length.
            let sl = unsafe { std::slice::from_raw_parts(s.map as *const u64, s.map_len / 8) };
            if let Some(i) = sl.iter().position(|&w| w != 0) {
                return Err(format!("mapped page {} is not zero", i * 8 / PAGE_SIZE));
            }
        }
        Op::Rebalance if res.is_ok() => {
            // A page whose new page could not be had stays and is counted;
            // nothing else may be lost.
            let a = &s.rebal;
            if a.moved + a.no_memory != a.misplaced || a.busy != 0 || a.looked != 32 {
                return Err(format!(
                    "looked {} misplaced {} moved {} no_memory {} busy {}",
                    a.looked, a.misplaced, a.moved, a.no_memory, a.busy
                ));
            }
            // SAFETY: the mapping made by prepare, readable for its length.
            let sl = unsafe { std::slice::from_raw_parts(s.map as *const u64, s.map_len / 8) };
            if let Some(i) = sl.iter().position(|&w| w != 0) {
                return Err(format!(
                    "page {} is not zero after the move",
                    i * 8 / PAGE_SIZE
                ));
            }
        }
        Op::WeightNode(n) => {
            let w = env.wd.weight(n).map_err(|e| format!("{e:#}"))?;
            let want = if res.is_ok() { 7 } else { 3 };
            if w != want {
                return Err(format!(
                    "node{n} reads {w} after the write {}, expected {want}",
                    if res.is_ok() { "succeeded" } else { "failed" }
                ));
            }
            if res.is_ok() && env.wd.auto().map_err(|e| format!("{e:#}"))? == Some(true) {
                return Err(format!("auto still reads true after a write to node{n}"));
            }
            if res.is_err() {
                unchanged(env, s)?;
            }
        }
        Op::Auto | Op::Bandwidth => {
            if res.is_err() {
                unchanged(env, s)?;
            } else if op == Op::Auto && env.wd.auto().map_err(|e| format!("{e:#}"))? != Some(true) {
                return Err("auto does not read true after writing true".into());
            } else if op == Op::Bandwidth {
                let now = std::fs::read_to_string(env.wd.bandwidth_path())
                    .map_err(|e| format!("reading bandwidth: {e}"))?;
                if now != env.bw_new {
                    return Err(format!("bandwidth reads {now:?}, wrote {:?}", env.bw_new));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn unchanged(env: &Env, s: &Step) -> Result<(), String> {
    let now = wi_state(&env.wd)?;
    match &s.before {
        Some(b) if *b != now => Err(format!(
            "the failed write changed the weight table: {b:?} -> {now:?}"
        )),
        _ => Ok(()),
    }
}

/// A fresh open, a policy and a one-page mapping that reads zero.
fn usable(mem_mask: u64) -> Result<(), String> {
    let t = Tierkit::open().map_err(|e| format!("open: {e}"))?;
    t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, mem_mask)
        .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
    let m = t.map(1, 0).map_err(|e| format!("mmap of one page: {e}"))?;
    if m.first_nonzero().is_some() {
        return Err("a fresh page is not zero".into());
    }
    Ok(())
}

/// tierkit's held pages and ranges per node, and its global held_pages.
fn held() -> Result<BTreeMap<String, u64>, String> {
    holdings().map_err(|e| format!("{e:#}"))
}

/// Writes the original bandwidth back, and `true` to `auto` if that is
/// how the table was (which recomputes the weights from it).
fn restore_wi(env: &Env) -> Result<(), String> {
    if !env.bw_orig.is_empty() {
        write_file(&env.wd.bandwidth_path(), &env.bw_orig)
            .map_err(|e| format!("restoring bandwidth: {e}"))?;
    }
    if env.orig_auto == Some(true) && !env.bw_orig.is_empty() {
        env.wd
            .write_auto_str("true")
            .map_err(|e| format!("writing true to auto: {e}"))?;
    }
    Ok(())
}

/// Result of one operation's sweep.
#[derive(Default)]
struct Sweep {
    /// Highest N at which a fault was injected (the number of points).
    points: u32,
    /// With strides, the number of points lies in `points..=points_upper`.
    points_upper: u32,
    /// Steps made (N values tried).
    steps: u32,
    injected_steps: u32,
    by_type: BTreeMap<String, u64>,
    errnos: BTreeMap<String, u64>,
    /// Faults injected but the call succeeded all the same.
    tolerated: u32,
    failures: Vec<String>,
    nr_failures: usize,
    seconds: f64,
    max_free_drift: i64,
    max_slab_drift: i64,
    max_settle_ms: u64,
    done: bool,
}

impl Sweep {
    fn fail(&mut self, n: u32, what: String) {
        self.nr_failures += 1;
        if self.failures.len() < MAX_LISTED {
            self.failures.push(format!("N={n}: {what}"));
        }
    }
}

struct Tester {
    fail: FailNth,
    kmsg: Kmsg,
}

impl Tester {
    /// One step at `n`: returns (succeeded, injected, took ms).
    fn step(
        &self,
        env: &Env,
        op: Op,
        n: u32,
        base: &MemSnapshot,
        sw: &mut Sweep,
    ) -> (bool, bool, u128) {
        let mut s = Step::new();
        if let Err(e) = prepare(env, op, &mut s) {
            sw.fail(n, format!("setting up: {e}"));
            return (false, false, 0);
        }
        let _ = self.kmsg.drain();
        let t0 = Instant::now();
        let armed = if op == Op::GiganticTouch {
            touch_armed(n, &s)
        } else {
            self.fail.run(n, || call(op, &mut s))
        };
        let armed = match armed {
            Ok(a) => a,
            Err(e) => {
                sw.fail(n, format!("fail-nth: {e}"));
                return (false, false, 0);
            }
        };
        let ms = t0.elapsed().as_millis();
        let lines = self.kmsg.drain();
        sw.steps += 1;
        let faults = injected_faults(&lines);
        if armed.injected {
            sw.injected_steps += 1;
            sw.points = sw.points.max(n);
            for (kind, _) in &faults {
                *sw.by_type.entry(kind.clone()).or_default() += 1;
            }
        }
        if armed.injected && faults.is_empty() {
            // fail_dump() is quiet for __GFP_NOWARN allocations.
            *sw.by_type.entry("quiet (__GFP_NOWARN)".into()).or_default() += 1;
        }
        if !armed.injected && !faults.is_empty() {
            sw.fail(
                n,
                format!(
                    "fail-nth says no fault was injected, the kernel log has {} FAULT_INJECTION report(s)",
                    faults.len()
                ),
            );
        }
        if faults.len() > 1 {
            sw.fail(
                n,
                format!("{} faults injected for one fail-nth", faults.len()),
            );
        }
        let crashes = crash_lines(&lines);
        if !crashes.is_empty() {
            sw.fail(n, format!("kernel reported: {}", crashes.join(" | ")));
        }
        let res = armed.value;
        match (&res, armed.injected) {
            (Ok(()), false) => sw.done = true,
            (Ok(()), true) => sw.tolerated += 1,
            (Err(e), inj) => {
                *sw.errnos.entry(errno_name(e)).or_default() += 1;
                if !inj {
                    sw.fail(
                        n,
                        format!("failed with {} without an injected fault", errno_name(e)),
                    );
                } else if !e.raw_os_error().is_some_and(|x| op.allowed().contains(&x)) {
                    sw.fail(
                        n,
                        format!("failed with {}, documented: ENOMEM", errno_name(e)),
                    );
                }
            }
        }
        if let Err(e) = effect(env, op, &s, &res) {
            sw.fail(n, e);
        }
        s.close();
        drop(s);
        if matches!(op, Op::WeightNode(_) | Op::Auto | Op::Bandwidth) {
            if let Err(e) = restore_wi(env) {
                sw.fail(n, e);
            }
        }
        if let Err(e) = usable(env.mem_mask) {
            sw.fail(n, format!("tierkit unusable afterwards: {e}"));
        }
        match held() {
            Ok(h) if h == env.baseline_held => {}
            Ok(h) => sw.fail(
                n,
                format!(
                    "tierkit still holds memory after closing: {}",
                    holdings_diff(&env.baseline_held, &h).join(", ")
                ),
            ),
            Err(e) => sw.fail(n, e),
        }
        match base.settled(FREE_TOL_PAGES, SLAB_TOL_KB, SETTLE_MS) {
            Ok((now, waited)) => {
                let (f, sl) = base.drift(&now);
                sw.max_free_drift = sw.max_free_drift.max(f);
                sw.max_slab_drift = sw.max_slab_drift.max(sl);
                sw.max_settle_ms = sw.max_settle_ms.max(waited);
                let l = base.losses(&now, FREE_TOL_PAGES, SLAB_TOL_KB);
                if !l.is_empty() {
                    sw.fail(
                        n,
                        format!(
                            "memory not given back ({waited} ms later): {}",
                            l.join("; ")
                        ),
                    );
                }
            }
            Err(e) => sw.fail(n, format!("{e:#}")),
        }
        (res.is_ok(), armed.injected, ms)
    }

    fn sweep(&self, env: &Env, op: Op) -> Sweep {
        let mut sw = Sweep::default();
        let t0 = Instant::now();
        let base = match MemSnapshot::take_drained_since(&env.start) {
            Ok(b) => b,
            Err(e) => {
                sw.fail(0, format!("{e:#}"));
                return sw;
            }
        };
        let mut n = 1u32;
        let mut stride = 1u32;
        let mut last_injected = 0u32;
        let mut slow_run = 0u32;
        let mut slow_total = 0u32;
        loop {
            if n > MAX_N {
                sw.fail(n, format!("still injecting after {MAX_N} points"));
                break;
            }
            let before = sw.nr_failures;
            let (ok, injected, ms) = self.step(env, op, n, &base, &mut sw);
            if sw.nr_failures > before && sw.nr_failures > 3 * MAX_LISTED {
                sw.fail(n, "too many failures, stopping this operation".into());
                break;
            }
            if injected {
                last_injected = n;
            }
            if ok && !injected {
                break;
            }
            if !ok && !injected {
                // Failed without a fault: reported; there is no end to find.
                break;
            }
            // Three slow steps in a row: one alone may be the host.
            slow_run = if ms > SLOW_STEP_MS { slow_run + 1 } else { 0 };
            slow_total += u32::from(ms > SLOW_STEP_MS);
            if slow_run >= 3 && slow_total >= SLOW_EXHAUSTIVE && n >= EXHAUSTIVE_UPTO {
                stride = if stride == 1 {
                    FIRST_STRIDE
                } else {
                    (stride * 4).min(MAX_STRIDE)
                };
            }
            n += stride;
        }
        // With strides the end lies in (last_injected, n]: bisect it, to
        // within BISECT_TO (each step of a slow call costs seconds, and the
        // points there are the same allocation over and over).
        sw.points_upper = sw.points;
        if sw.done {
            let (mut lo, mut hi) = (last_injected, n);
            while hi - lo > BISECT_TO {
                let mid = lo + (hi - lo) / 2;
                let (ok, injected, _) = self.step(env, op, mid, &base, &mut sw);
                if injected {
                    lo = mid;
                } else if ok {
                    hi = mid;
                } else {
                    break;
                }
            }
            sw.points_upper = hi - 1;
        }
        sw.seconds = t0.elapsed().as_secs_f64();
        sw
    }
}

/// The bandwidth lines with node `nid`'s figures doubled (another valid
/// table, so that a write shows whether it took effect).
fn bandwidth_variant(orig: &str, nid: u32) -> String {
    orig.lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() == 3 && f[0] == nid.to_string() {
                let d = |s: &str| {
                    s.parse::<u64>()
                        .map_or(s.to_string(), |v| (v * 2).to_string())
                };
                format!("{} {} {}\n", f[0], d(f[1]), d(f[2]))
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

fn main() -> ExitCode {
    userspace_tests::help!();
    let mut r = Report::new(BIN, "test");
    let Some(topo) = read_topology(&mut r) else {
        return r.finish();
    };
    let Some(wd) = tierkit_weight_dir(&mut r) else {
        return r.finish();
    };
    run(&mut r, &topo, wd);
    r.finish()
}

fn run(r: &mut Report, topo: &Topology, wd: WeightDir) {
    let saved = match wd.snapshot() {
        Ok(s) => s,
        Err(e) => {
            r.fail("weight snapshot", format!("{e:#}"));
            return;
        }
    };
    let bw_orig = match std::fs::read_to_string(wd.bandwidth_path()) {
        Ok(s) => s,
        Err(e) => {
            r.fail("read bandwidth", e.to_string());
            return;
        }
    };
    let start = match MemSnapshot::take_drained() {
        Ok(s) => s,
        Err(e) => {
            r.fail("memory counters", format!("{e:#}"));
            return;
        }
    };
    r.note(format!("start: {}", start.describe()));
    let big_nid = start
        .free_pages
        .iter()
        .filter(|(n, _)| topo.memory.contains(n))
        .max_by_key(|(_, &p)| p)
        .map_or(0, |(&n, _)| n);
    let baseline_held = match held() {
        Ok(h) => h,
        Err(e) => {
            r.fail("tierkit stats", e);
            return;
        }
    };
    let first_bw_node = bw_orig
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().next()?.parse().ok());
    let env = Env {
        mem_mask: topo.memory_mask(),
        big_nid,
        bw_new: first_bw_node.map_or(String::new(), |n| bandwidth_variant(&bw_orig, n)),
        bw_orig,
        orig_auto: saved.auto,
        wd,
        baseline_held,
        start: start.clone(),
    };
    let mut knobs = match FaultKnobs::systematic(1) {
        Ok(k) => k,
        Err(e) => {
            r.fail("fault injection setup", format!("{e:#}"));
            return;
        }
    };
    r.ok_note(
        "fault injection setup",
        "failslab and fail_page_alloc: ignore-gfp-wait=N, min-order=0, ignore-gfp-highmem=N, verbose=1",
    );
    let tester = match (FailNth::open(), Kmsg::open_at_end()) {
        (Ok(fail), Ok(kmsg)) => Tester { fail, kmsg },
        (Err(e), _) => {
            r.fail("open /proc/thread-self/fail-nth", e.to_string());
            return;
        }
        (_, Err(e)) => {
            r.fail("open /dev/kmsg", e.to_string());
            return;
        }
    };

    let mut ops = vec![
        Op::Open,
        Op::SetPolicy,
        Op::Mmap4k,
        Op::MmapGigantic,
        Op::Bulk,
        Op::TaskNext,
        Op::SetGigantic,
        Op::ClearBench,
        Op::GiganticTouch,
        Op::Rebalance,
    ];
    ops.extend(
        topo.memory
            .iter()
            .filter(|&&n| n < 64)
            .map(|&n| Op::WeightNode(n)),
    );
    ops.push(Op::Auto);
    if env.bw_new.is_empty() {
        r.skip(
            "write weighted_interleave/bandwidth",
            "no bandwidth was written by /init (no HMAT): nothing to vary",
        );
    } else {
        ops.push(Op::Bandwidth);
    }
    if userspace_tests::pool::present() {
        ops.push(Op::Pool);
    } else {
        r.skip(
            "write gigantic/pool",
            "the module has no gigantic/pool file",
        );
    }

    let mut points = Map::new();
    let mut detail = Map::new();
    for op in ops {
        let name = op.name();
        if matches!(op, Op::MmapGigantic | Op::ClearBench | Op::GiganticTouch) {
            match gib_available(&env, op) {
                Ok(()) => {}
                Err(Unavailable::Skip(why)) => {
                    r.skip(&format!("{name}: every injected fault handled"), why);
                    continue;
                }
                Err(Unavailable::Fail(why)) => {
                    r.fail(&format!("{name}: every injected fault handled"), why);
                    continue;
                }
            }
        }
        let sw = tester.sweep(&env, op);
        let types: Vec<String> = sw.by_type.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let errnos: Vec<String> = sw.errnos.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let exercised = if sw.steps as u64 > u64::from(sw.points) {
            "each".to_string()
        } else {
            format!("{} of them", sw.injected_steps)
        };
        let count = if sw.points_upper > sw.points {
            format!("{}..{}", sw.points, sw.points_upper)
        } else {
            sw.points.to_string()
        };
        let summary = format!(
            "{count} injection points ({exercised} exercised; {}; errors: {}; {} tolerated), {:.1} s, max drift {} pages / SUnreclaim {:+} kB{}",
            if types.is_empty() { "none".into() } else { types.join(", ") },
            if errnos.is_empty() { "none".into() } else { errnos.join(", ") },
            sw.tolerated,
            sw.seconds,
            sw.max_free_drift,
            sw.max_slab_drift,
            if sw.max_settle_ms > 0 {
                format!(" (settled within {} ms)", sw.max_settle_ms)
            } else {
                String::new()
            }
        );
        r.note(format!("{name}: {summary}"));
        if sw.nr_failures == 0 && sw.done {
            r.ok_note(
                &format!("{name}: every injected fault handled"),
                summary.clone(),
            );
        } else {
            let mut why = sw.failures.join("; ");
            if sw.nr_failures > sw.failures.len() {
                why.push_str(&format!(
                    " (and {} more)",
                    sw.nr_failures - sw.failures.len()
                ));
            }
            if !sw.done {
                why.push_str("; never succeeded without an injected fault");
            }
            r.fail(&format!("{name}: every injected fault handled"), why);
        }
        points.insert(name.clone(), json!(sw.points));
        detail.insert(
            name,
            json!({
                "points": sw.points,
                "points_upper": sw.points_upper,
                "steps": sw.steps,
                "injected_steps": sw.injected_steps,
                "by_type": sw.by_type,
                "errnos": sw.errnos,
                "tolerated": sw.tolerated,
                "seconds": (sw.seconds * 10.0).round() / 10.0,
                "max_free_drift_pages": sw.max_free_drift,
                "max_sunreclaim_drift_kb": sw.max_slab_drift,
                "max_settle_ms": sw.max_settle_ms,
                "failures": sw.nr_failures,
            }),
        );
    }
    let total: u64 = points.values().filter_map(Value::as_u64).sum();
    r.note(format!("injection points in total: {total}"));

    r.check("restore fault-injection knobs", knobs.restore());
    let res = restore_wi(&env).and_then(|()| saved.restore().map_err(|e| format!("{e:#}")));
    let now = wi_state(&env.wd);
    r.check(
        "weight table restored",
        res.and_then(|()| {
            let now = now?;
            let want: Vec<(u32, u8)> = saved.weights.clone();
            let got: Vec<(u32, u8)> = want
                .iter()
                .map(|&(n, _)| (n, now.table[n as usize]))
                .collect();
            if got != want || now.auto != saved.auto || now.bandwidth != env.bw_orig {
                return Err(format!(
                    "now {got:?} auto={:?} bandwidth {:?}; was {want:?} auto={:?} bandwidth {:?}",
                    now.auto, now.bandwidth, saved.auto, env.bw_orig
                ));
            }
            Ok(())
        }),
    );
    match start.settled(FREE_TOL_PAGES, SLAB_TOL_KB, SETTLE_MS) {
        Ok((end, _)) => {
            r.note(format!("end: {}", end.describe()));
            r.check(
                "memory given back over the whole test",
                ok_or_join(start.losses(&end, FREE_TOL_PAGES, SLAB_TOL_KB)),
            );
        }
        Err(e) => {
            r.fail("memory given back over the whole test", format!("{e:#}"));
        }
    }
    r.set("injection_points", Value::Object(points));
    r.set("injection_points_total", json!(total));
    r.set("injection", Value::Object(detail));
    r.set(
        "tolerance",
        json!({"free_pages_per_node": FREE_TOL_PAGES, "sunreclaim_kb": SLAB_TOL_KB}),
    );
}

fn ok_or_join(v: Vec<String>) -> Result<(), String> {
    if v.is_empty() {
        Ok(())
    } else {
        Err(v.join("; "))
    }
}

enum Unavailable {
    Skip(String),
    Fail(String),
}

/// Whether one GiB can be had for `op` on the node: the call once without
/// fault injection.
fn gib_available(env: &Env, op: Op) -> Result<(), Unavailable> {
    let mut s = Step::new();
    prepare(env, op, &mut s).map_err(Unavailable::Fail)?;
    let res = if op == Op::GiganticTouch {
        match touch_armed(0, &s) {
            Ok(a) => a.value,
            Err(e) => Err(e),
        }
    } else {
        call(op, &mut s)
    };
    match res {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOMEM | libc::EFAULT)) => {
            Err(Unavailable::Skip(format!(
                "no free naturally aligned GiB on node {} ({} without fault injection)",
                env.big_nid,
                if op == Op::GiganticTouch {
                    "SIGBUS".into()
                } else {
                    errno_name(&e)
                }
            )))
        }
        Err(e) => Err(Unavailable::Fail(format!(
            "{} on node {} failed without fault injection: {}",
            op.name(),
            env.big_nid,
            errno_name(&e)
        ))),
    }
}

// The pool's debugfs file.
use userspace_tests::pool::POOL_PATH;

/// The child's `fail-nth` fd, for its SIGBUS handler.
static CHILD_FAIL_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// The child's SIGBUS handler: the first touch failed. Exits 2 if the
/// armed fault was injected (`fail-nth` reads 0), 3 if not. Only
/// async-signal-safe calls.
extern "C" fn child_sigbus(_: libc::c_int) {
    let fd = CHILD_FAIL_FD.load(std::sync::atomic::Ordering::Relaxed);
    let mut buf = [0u8; 16];
    // SAFETY: reads at most `buf.len()` bytes into a live buffer.
    let r = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    let digits = if r > 0 { &buf[..r as usize] } else { &buf[..0] };
    let zero = !digits.is_empty()
        && digits
            .iter()
            .filter(|b| b.is_ascii_digit())
            .all(|&b| b == b'0');
    // SAFETY: leaves the child at once.
    unsafe { libc::_exit(if zero { 2 } else { 3 }) };
}

/// Touches 64 KiB of stack below the caller's frame, so that the child's
/// calls after arming take no copy-on-write fault of their own.
#[inline(never)]
fn prefault_stack() {
    let mut pad = [0u8; 64 << 10];
    for i in (0..pad.len()).step_by(PAGE_SIZE) {
        // SAFETY: inside `pad`.
        unsafe { std::ptr::write_volatile(pad.as_mut_ptr().add(i), 1) };
    }
    std::hint::black_box(&pad);
}

/// In the child: arm `n` (0: nothing) on its own `fail-nth` and write the
/// first byte of the gigantic mapping at `map`, whose fault makes the GiB
/// (allocate, clear, map one PUD). Exit 0: done without a fault injected,
/// 1: done with one injected (tolerated), 2/3 from [`child_sigbus`].
fn child_touch(n: u32, map: usize) -> i32 {
    let Ok(fail) = FailNth::open() else {
        return 10;
    };
    CHILD_FAIL_FD.store(fail.raw_fd(), std::sync::atomic::Ordering::Relaxed);
    // SAFETY: a plain handler that only calls async-signal-safe functions.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = child_sigbus as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut()) != 0 {
            return 11;
        }
    }
    prefault_stack();
    if n == 0 {
        // SAFETY: the first byte of the parent's shared gigantic mapping,
        // inherited; a failure is SIGBUS, handled above.
        unsafe { std::ptr::write_volatile(map as *mut u8, 1) };
        return 0;
    }
    // SAFETY: as above.
    match fail.run(n, || unsafe { std::ptr::write_volatile(map as *mut u8, 1) }) {
        Ok(a) => i32::from(a.injected),
        Err(_) => 12,
    }
}

/// The gigantic first touch under fault injection: a forked child arms
/// its own `fail-nth` (the parent's fork must not count) and touches the
/// step's mapping. A SIGBUS is `Err(EFAULT)`.
fn touch_armed(n: u32, s: &Step) -> io::Result<Armed<io::Result<()>>> {
    let map = s.map as usize;
    let efault = || Err(io::Error::from_raw_os_error(libc::EFAULT));
    let (value, injected) = match fork_run(|| child_touch(n, map))? {
        Exit::Code(0) => (Ok(()), false),
        Exit::Code(1) => (Ok(()), true),
        Exit::Code(2) => (efault(), true),
        Exit::Code(3) => (efault(), false),
        e => return Err(io::Error::other(format!("the touching child ended: {e}"))),
    };
    Ok(Armed { value, injected })
}
