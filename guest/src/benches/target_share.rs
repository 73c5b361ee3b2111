//! `tk-bench-rebalance`'s target-share comparison: tierkit's
//! `TK_IOC_REBALANCE` against DAMON's own target-share migration (paired
//! push and pull `migrate_hot` schemes with `node_eligible_mem_bp` quota
//! goals, [`super::damon_sysfs`]), in one run, on working sets of the same
//! size that start at the same DRAM:CXL split and are sent to the same
//! new one.
//!
//! DAMON's `paddr` operations see only LRU folios, and tierkit's pages are
//! not on the LRU: DAMON gets an anonymous working set (placed by
//! `MPOL_BIND` blocks in the starting split, then given the default
//! policy), tierkit a `/dev/tierkit` mapping of the same size (placed by
//! its weights). NUMA balancing is turned off while DAMON runs (it would
//! pull the anonymous pages back to the CPU's node) and put back after.
//!
//! While each method works, one thread sweeps the working set without
//! pause, reading and writing one word per page (each page is then
//! accessed in every DAMON sampling interval, DAMON's best case under
//! TCG); its page touches per second before, during (until the split is
//! first within 1% of the target, or the end) and after (from then to the
//! end, the method still active) are the workload's throughput. Another
//! thread samples every page's frame (`/proc/self/pagemap`) and node
//! (`move_pages(2)` query) every [`SAMPLE`]: a changed frame is a move
//! (a page moved twice between two samples counts once: the counts are
//! lower bounds). A method is watched until the split has stayed within
//! 1% for [`Opts::hold_s`], or [`Opts::bound_s`]. The sweep's words are
//! checked at the end: every page kept its own contents.

use super::damon_sysfs::{node_ranges, Goal, Intervals, Kdamond, Stats};
use crate::harness::report::Report;
use crate::linux::memblock::pagemap_pfns;
use crate::linux::sys::{self, monotonic_ns, PAGE_SIZE};
use crate::tools::workload::{Placement, Region};
use crate::topology::node;
use crate::topology::weights::WeightDir;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tierkit_core::uapi::TkRebalance;

/// How often every page's frame and node are sampled.
pub const SAMPLE: Duration = Duration::from_millis(200);

/// The comparison's settings.
#[derive(Clone, Copy, Debug)]
pub struct Opts {
    /// Working set, bytes.
    pub size: usize,
    /// Longest wait for a method to reach the target split, seconds.
    pub bound_s: f64,
    /// How long the split must stay within 1% before the watch ends,
    /// seconds.
    pub hold_s: f64,
    /// The sweep's "before" window, seconds.
    pub before_s: f64,
}

/// The starting and the target weights: DRAM:CXL 2:1 -> 1:2.
const FROM: (u8, u8) = (2, 1);
const TO: (u8, u8) = (1, 2);

/// Every page's moves, and the split over time.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    last_pfn: Vec<Option<u64>>,
    last_node: Vec<i32>,
    moves: Vec<u32>,
    /// `(ns since the change began, pages on the DRAM node, pages whose
    /// node is known)` per sample.
    pub samples: Vec<(u64, usize, usize)>,
}

impl Trace {
    pub fn new(pages: usize) -> Trace {
        Trace {
            last_pfn: vec![None; pages],
            last_node: vec![-1; pages],
            moves: vec![0; pages],
            samples: Vec::new(),
        }
    }

    /// Records one sample at `t`: each page's frame (`None`: not present)
    /// and node (negative: unknown). A frame that differs from the page's
    /// last known one is a move; without frames (pagemap hides them from
    /// unprivileged readers) a changed node is.
    pub fn observe(&mut self, t: u64, pfns: &[Option<u64>], nodes: &[i32], d: u32) {
        let (mut on_d, mut known) = (0, 0);
        for i in 0..self.moves.len() {
            let pfn = pfns.get(i).copied().flatten();
            let nid = nodes.get(i).copied().unwrap_or(-1);
            let moved = match (self.last_pfn[i], pfn) {
                (Some(a), Some(b)) => a != b,
                (None, None) => self.last_node[i] >= 0 && nid >= 0 && self.last_node[i] != nid,
                _ => false,
            };
            self.moves[i] += moved as u32;
            if pfn.is_some() {
                self.last_pfn[i] = pfn;
            }
            if nid >= 0 {
                self.last_node[i] = nid;
                known += 1;
                on_d += (nid == d as i32) as usize;
            }
        }
        self.samples.push((t, on_d, known));
    }

    /// Moves seen, over all pages.
    pub fn moves(&self) -> u64 {
        self.moves.iter().map(|&m| m as u64).sum()
    }

    /// Pages seen moving twice or more.
    pub fn twice(&self) -> usize {
        self.moves.iter().filter(|&&m| m >= 2).count()
    }

    /// Whether sample `(_, on_d, known)` has the DRAM node holding
    /// `share` of the known pages within one percentage point, with at
    /// most 1% of the pages unknown.
    fn within(&self, share: f64, &(_, on_d, known): &(u64, usize, usize)) -> bool {
        let pages = self.moves.len();
        known > 0
            && (pages - known) * 100 <= pages
            && (on_d as f64 / known as f64 - share).abs() <= 0.01
    }

    /// The first sample within 1% of `share`.
    pub fn reached(&self, share: f64) -> Option<u64> {
        self.samples
            .iter()
            .find(|x| self.within(share, x))
            .map(|s| s.0)
    }

    /// The start of the last stretch of samples within 1% of `share`, if
    /// it runs to the last sample and lasted at least `hold_ns`.
    pub fn settled(&self, share: f64, hold_ns: u64) -> Option<u64> {
        let last = self.samples.last()?;
        let start = self
            .samples
            .iter()
            .rev()
            .take_while(|x| self.within(share, x))
            .last()?;
        (last.0 - start.0 >= hold_ns).then_some(start.0)
    }

    /// The fewest and the most pages on the DRAM node from `from` (ns) on.
    pub fn range_from(&self, from: u64) -> (usize, usize) {
        self.samples
            .iter()
            .filter(|s| s.0 >= from)
            .fold((usize::MAX, 0), |(lo, hi), s| (lo.min(s.1), hi.max(s.1)))
    }

    /// The last sample's split: `(on DRAM, known)`.
    pub fn last(&self) -> (usize, usize) {
        self.samples.last().map_or((0, 0), |s| (s.1, s.2))
    }
}

/// One word per page, read and written by [`Sweep::run`]: the page's
/// index in the high half, its count of sweeps in the low half.
struct Sweep {
    base: crate::tools::workload::SendPtr,
    pages: usize,
    stop: AtomicBool,
    /// `(end ns, pages touched)` per chunk.
    marks: Mutex<Vec<(u64, u64)>>,
    /// Whole sweeps done and the next page when the sweep stopped.
    end: Mutex<(u64, usize)>,
}

const CHUNK: usize = 256;

impl Sweep {
    fn new(reg: &Region) -> Sweep {
        let s = Sweep {
            base: crate::tools::workload::SendPtr(reg.as_ptr()),
            pages: reg.len() / PAGE_SIZE,
            stop: AtomicBool::new(false),
            marks: Mutex::new(Vec::new()),
            end: Mutex::new((0, 0)),
        };
        for i in 0..s.pages {
            // SAFETY: page `i` of the live read/write region.
            unsafe { s.word(i).write_volatile((i as u64) << 32) };
        }
        s
    }

    fn word(&self, i: usize) -> *mut u64 {
        self.base.ptr().wrapping_add(i * PAGE_SIZE) as *mut u64
    }

    fn run(&self) {
        let mut sweeps = 0u64;
        loop {
            let mut lo = 0;
            while lo < self.pages {
                let hi = (lo + CHUNK).min(self.pages);
                for i in lo..hi {
                    let w = self.word(i);
                    // SAFETY: page `i` of the region, which outlives the
                    // sweep; only this thread writes it meanwhile.
                    unsafe { w.write_volatile(w.read_volatile().wrapping_add(1)) };
                }
                if let Ok(mut m) = self.marks.lock() {
                    m.push((monotonic_ns(), (hi - lo) as u64));
                }
                if self.stop.load(Ordering::Relaxed) {
                    if let Ok(mut e) = self.end.lock() {
                        *e = (sweeps, hi);
                    }
                    return;
                }
                lo = hi;
            }
            sweeps += 1;
        }
    }

    /// Thousands of page touches per second between `from` and `to` (ns).
    fn rate(&self, from: u64, to: u64) -> f64 {
        per_second(&self.marks, from, to) / 1e3
    }

    /// Pages whose word is not their index and the sweep count the stop
    /// left them with.
    fn errors(&self) -> usize {
        let (sweeps, next) = self.end.lock().map(|e| *e).unwrap_or((0, 0));
        (0..self.pages)
            .filter(|&i| {
                // SAFETY: page `i` of the live region; the sweep is over.
                let v = unsafe { self.word(i).read_volatile() };
                let want = ((i as u64) << 32) + sweeps + (i < next) as u64;
                v != want
            })
            .count()
    }
}

/// Per second between `from` and `to` (ns): the amounts of `marks`,
/// `(end ns, amount)` each, that ended in that time.
pub(super) fn per_second(marks: &Mutex<Vec<(u64, u64)>>, from: u64, to: u64) -> f64 {
    let m = marks.lock().map(|m| m.clone()).unwrap_or_default();
    let n: u64 = m
        .iter()
        .filter(|(t, _)| *t > from && *t <= to)
        .map(|x| x.1)
        .sum();
    n as f64 / (to.saturating_sub(from).max(1) as f64 / 1e9)
}

/// What watching one method gave.
#[derive(Debug)]
pub struct Watched {
    pub trace: Trace,
    /// ns from the change's start to within 1%, if reached.
    pub reached: Option<u64>,
    /// ns from the change's start to the stretch within 1% that held
    /// for the hold, if one did.
    pub settled: Option<u64>,
    /// ns watched after the change began.
    pub watched: u64,
    /// Sweep k page touches/s: before, during, after.
    pub rates: (f64, f64, f64),
    /// Pages whose sweep word was wrong at the end.
    pub errors: usize,
}

fn sample(reg_base: usize, pages: usize, t0: u64, d: u32, tr: &Mutex<Trace>) {
    let pfns = pagemap_pfns(reg_base, pages).unwrap_or_default();
    let nodes = sys::query_page_nodes(reg_base as *const u8, pages).unwrap_or_default();
    if let Ok(mut t) = tr.lock() {
        t.observe(monotonic_ns().saturating_sub(t0), &pfns, &nodes, d);
    }
}

/// Sweeps `reg` throughout; samples it from just before `change` runs
/// until the DRAM node holds `share` within 1% for `o.hold_s`, or
/// `o.bound_s` passed. `change` starts the method (and for tierkit, does
/// all of it); what it returns is handed back.
pub fn watch<T, F>(reg: &Region, d: u32, share: f64, o: &Opts, change: F) -> (Watched, T)
where
    F: FnOnce() -> T,
{
    let pages = reg.len() / PAGE_SIZE;
    let base = reg.as_ptr() as usize;
    let sweep = Sweep::new(reg);
    let trace = Mutex::new(Trace::new(pages));
    let stop = AtomicBool::new(false);
    let (t0, t1, t3, res) = std::thread::scope(|s| {
        s.spawn(|| sweep.run());
        let t0 = monotonic_ns();
        std::thread::sleep(Duration::from_secs_f64(o.before_s));
        let t1 = monotonic_ns();
        sample(base, pages, t1, d, &trace);
        let (trace, stop) = (&trace, &stop);
        let sampler = s.spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(SAMPLE);
                sample(base, pages, t1, d, trace);
            }
        });
        let res = change();
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let now = monotonic_ns() - t1;
            let hold = (o.hold_s * 1e9) as u64;
            let held = trace.lock().ok().and_then(|t| t.settled(share, hold));
            if held.is_some() || now as f64 / 1e9 >= o.bound_s {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        let _ = sampler.join();
        // The sampler has stopped: one last sample, then the sweep stops
        // (the scope joins it).
        sample(base, pages, t1, d, trace);
        let t3 = monotonic_ns();
        sweep.stop.store(true, Ordering::Relaxed);
        (t0, t1, t3, res)
    });
    let trace = trace.into_inner().unwrap_or_default();
    let reached = trace.reached(share);
    let settled = trace.settled(share, (o.hold_s * 1e9) as u64);
    let mid = reached.map_or(t3, |r| t1 + r);
    let w = Watched {
        rates: (
            sweep.rate(t0, t1),
            sweep.rate(t1, mid),
            reached.map_or(f64::NAN, |_| sweep.rate(mid, t3)),
        ),
        errors: sweep.errors(),
        reached,
        settled,
        watched: t3 - t1,
        trace,
    };
    (w, res)
}

/// The comparison, as rows (workload `share`) appended to `r`'s `rows`.
pub fn compare(r: &mut Report, tw: &WeightDir, d: u32, c: u32, o: &Opts) {
    let pages = o.size.div_ceil(PAGE_SIZE);
    let share = TO.0 as f64 / (TO.0 + TO.1) as f64;
    let mut rows = r.json()["rows"].as_array().cloned().unwrap_or_default();
    match tierkit_side(tw, d, c, o, share) {
        Ok((w, moved)) => {
            rows.push(row(
                r,
                "tierkit-rebalance",
                &w,
                d,
                c,
                pages,
                share,
                moved * PAGE_SIZE as u64,
                o,
            ));
        }
        Err(e) => {
            r.fail("target share: tierkit", e);
        }
    }
    if !Kdamond::available() {
        r.fail(
            "target share: DAMON",
            "no /sys/kernel/mm/damon/admin (CONFIG_DAMON_SYSFS)",
        );
    } else {
        match damon_side(r, d, c, o, share) {
            Ok((w, stats)) => {
                let bytes = stats.iter().map(|s| s.sz_applied).sum();
                r.note(format!(
                    "DAMON schemes' stats (push to {c}, pull to {d}): {stats:?}"
                ));
                rows.push(row(
                    r,
                    "damon-migrate_hot",
                    &w,
                    d,
                    c,
                    pages,
                    share,
                    bytes,
                    o,
                ));
            }
            Err(e) => {
                r.fail("target share: DAMON", e);
            }
        }
    }
    r.set("rows", json!(rows));
}

/// The fewest moves from `start_d` pages on the DRAM node to the target
/// split, `exact` pages on it (the working set times the share): a count
/// on either side of `exact` is the split.
pub fn minimum_moves(start_d: usize, exact: f64) -> usize {
    let (lo, hi) = (exact.floor() as usize, exact.ceil() as usize);
    start_d.abs_diff(lo).min(start_d.abs_diff(hi))
}

/// The row of one method, and its checks: contents kept, and (a measured
/// result, not a failure) whether the target was reached.
#[allow(clippy::too_many_arguments)]
fn row(
    r: &mut Report,
    method: &str,
    w: &Watched,
    d: u32,
    c: u32,
    pages: usize,
    share: f64,
    kernel_bytes: u64,
    o: &Opts,
) -> Value {
    let target_d = (pages as f64 * share).round() as usize;
    let start_d = w.trace.samples.first().map_or(0, |s| s.1);
    let minimum = minimum_moves(start_d, pages as f64 * share);
    let (end_d, known) = w.trace.last();
    r.check(
        &format!("target share, {method}: every page kept its contents"),
        if w.errors == 0 {
            Ok(())
        } else {
            Err(format!("{} pages' words wrong", w.errors))
        },
    );
    let secs = |n: Option<u64>| n.map(|n| n as f64 / 1e9);
    let (reached, settled) = (secs(w.reached), secs(w.settled));
    // The DRAM node's pages from the first sample within 1% on: whether
    // the split stayed there.
    let range = w.reached.map(|t| w.trace.range_from(t));
    r.note(format!(
        "{method}: {} moves seen on {pages} pages (minimum {minimum}), {} pages moved twice, \
         kernel's count {kernel_bytes} bytes; split {start_d}:{} -> {end_d}:{} (target \
         {target_d}:{}); within 1% first at {reached:?} s, held {}s from {settled:?} s, DRAM \
         pages from then {range:?}; sweep k pages/s {:.0} / {:.0} / {:.0}",
        w.trace.moves(),
        w.trace.twice(),
        pages - start_d,
        known - end_d,
        pages - target_d,
        o.hold_s,
        w.rates.0,
        w.rates.1,
        w.rates.2,
    ));
    json!({
        "workload": "share",
        "policy": method,
        "unit": "bytes",
        "measured": w.trace.moves() * PAGE_SIZE as u64,
        "pages": pages,
        "from": [[d, FROM.0], [c, FROM.1]],
        "to": [[d, TO.0], [c, TO.1]],
        "minimum": minimum,
        "moves": w.trace.moves(),
        "twice": w.trace.twice(),
        "kernel_bytes": kernel_bytes,
        "reached_s": reached,
        "settled_s": settled,
        "hold_s": o.hold_s,
        "dram_after_reached": range.map(|(lo, hi)| [lo, hi]),
        "bound_s": o.bound_s,
        "watched_s": w.watched as f64 / 1e9,
        "split_start": [start_d, pages - start_d],
        "split_end": [end_d, known - end_d],
        "split_target": [target_d, pages - target_d],
        "before": w.rates.0,
        "during": w.rates.1,
        "after": w.rates.2,
    })
}

/// tierkit: a mapping placed by weights 2:1, then `TK_IOC_REBALANCE` to
/// 1:2. Returns what was watched and the pages tierkit moved.
fn tierkit_side(
    tw: &WeightDir,
    d: u32,
    c: u32,
    o: &Opts,
    share: f64,
) -> Result<(Watched, u64), String> {
    tw.set_weights(&[(d, FROM.0), (c, FROM.1)])
        .map_err(|e| format!("{e:#}"))?;
    let reg = Region::new(&Placement::Tierkit(node::mask_of(&[d, c])), o.size)
        .map_err(|e| format!("{e:#}"))?;
    let (w, res) = watch(&reg, d, share, o, || {
        tw.set_weights(&[(d, TO.0), (c, TO.1)])
            .map_err(|e| format!("{e:#}"))?;
        reg.tierkit()
            .ok_or("no tierkit file")?
            .rebalance(TkRebalance::default())
            .map_err(|e| format!("TK_IOC_REBALANCE: {e}"))
    });
    Ok((w, res?.moved))
}

/// Puts `/proc/sys/kernel/numa_balancing` back when dropped.
struct NumaBalancing(Option<String>);

const NUMA_BALANCING: &str = "/proc/sys/kernel/numa_balancing";

impl NumaBalancing {
    fn off() -> NumaBalancing {
        let old = std::fs::read_to_string(NUMA_BALANCING).ok();
        if old.as_deref().map(str::trim) != Some("0") {
            let _ = std::fs::write(NUMA_BALANCING, "0");
        }
        NumaBalancing(old)
    }
}

impl Drop for NumaBalancing {
    fn drop(&mut self) {
        if let Some(v) = &self.0 {
            let _ = std::fs::write(NUMA_BALANCING, v.trim());
        }
    }
}

/// DAMON's monitoring intervals for a sweep of `period_us`: a sampling
/// interval at least one sweep long (so each page of the working set is
/// accessed in every one), within 5-200 ms; ten samples per aggregation.
pub fn intervals_for(period_us: f64) -> Intervals {
    let sample_us = period_us.clamp(5_000.0, 200_000.0) as u64;
    Intervals {
        sample_us,
        aggr_us: 10 * sample_us,
    }
}

/// DAMON: an anonymous working set placed in blocks 2:1, then the push
/// (to `c`) and pull (to `d`) schemes with the 1:2 share as goals.
fn damon_side(
    r: &mut Report,
    d: u32,
    c: u32,
    o: &Opts,
    share: f64,
) -> Result<(Watched, Vec<Stats>), String> {
    let reg = Region::new(
        &Placement::Pattern(vec![(d, FROM.0 as u32), (c, FROM.1 as u32)]),
        o.size,
    )
    .map_err(|e| format!("{e:#}"))?;
    sys::mbind(reg.as_ptr() as usize, reg.len(), sys::MPOL_DEFAULT, 0, 0)
        .map_err(|e| format!("mbind MPOL_DEFAULT: {e}"))?;
    let ranges = node_ranges(&[d, c])?;
    // The sweep's period, from a short sweep alone.
    let probe = Sweep::new(&reg);
    let t0 = monotonic_ns();
    let period_us = std::thread::scope(|s| {
        s.spawn(|| probe.run());
        std::thread::sleep(Duration::from_millis(500));
        let rate = probe.rate(t0, monotonic_ns());
        probe.stop.store(true, Ordering::Relaxed);
        (reg.len() / PAGE_SIZE) as f64 / rate.max(1e-3) * 1e3
    });
    let iv = intervals_for(period_us);
    let bp = |s: f64| (s * 10_000.0).round() as u32;
    let goals = [
        Goal {
            nid: c,
            bp: bp(1.0 - share),
        },
        Goal {
            nid: d,
            bp: bp(share),
        },
    ];
    r.note(format!(
        "DAMON: paddr over {} ranges {:x?}, sweep period {:.0} ms, sample {} ms, aggr {} ms, \
         goals {goals:?}",
        ranges.len(),
        ranges,
        period_us / 1e3,
        iv.sample_us / 1000,
        iv.aggr_us / 1000,
    ));
    let _nb = NumaBalancing::off();
    let (w, kd) = watch(&reg, d, share, o, || {
        Kdamond::start(&ranges, iv, &goals, 1, 100)
    });
    let kd = kd?;
    let stats = kd.stats();
    kd.stop()?;
    Ok((w, stats?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_count_frame_changes_and_twice() {
        let mut t = Trace::new(3);
        t.observe(0, &[Some(10), Some(20), Some(30)], &[0, 0, 2], 0);
        // Page 0 moves, page 1 is not present (zapped) for a sample.
        t.observe(1, &[Some(11), None, Some(30)], &[2, -2, 2], 0);
        t.observe(2, &[Some(12), Some(21), Some(30)], &[0, 2, 2], 0);
        assert_eq!(t.moves(), 3);
        assert_eq!(t.twice(), 1);
        assert_eq!(t.samples, vec![(0, 2, 3), (1, 0, 2), (2, 1, 3)]);
        assert_eq!(t.last(), (1, 3));
    }

    #[test]
    fn without_frames_a_node_change_is_a_move() {
        let mut t = Trace::new(2);
        t.observe(0, &[], &[0, 0], 0);
        t.observe(1, &[None, None], &[2, 0], 0);
        assert_eq!(t.moves(), 1);
    }

    #[test]
    fn reached_needs_the_share_within_one_point_and_pages_known() {
        let mut t = Trace::new(300);
        t.samples = vec![(0, 200, 300), (5, 103, 300), (7, 101, 250), (9, 102, 299)];
        // 103/300 = 34.3% is off 1/3 by more than one point; 101/250 has
        // too many pages unknown; 102/299 = 34.1% is within.
        assert_eq!(t.reached(1.0 / 3.0), Some(9));
        t.samples.truncate(3);
        assert_eq!(t.reached(1.0 / 3.0), None);
    }

    #[test]
    fn settled_needs_the_last_stretch_within_for_the_hold() {
        let mut t = Trace::new(300);
        t.samples = vec![
            (0, 200, 300),
            (5, 100, 300),
            (6, 180, 300),
            (8, 101, 300),
            (9, 99, 300),
        ];
        assert_eq!(t.reached(1.0 / 3.0), Some(5));
        // Left the share at 6: the stretch from 8 has lasted 1.
        assert_eq!(t.settled(1.0 / 3.0, 1), Some(8));
        assert_eq!(t.settled(1.0 / 3.0, 2), None);
        assert_eq!(t.range_from(5), (99, 180));
        t.samples.push((10, 150, 300));
        assert_eq!(t.settled(1.0 / 3.0, 0), None);
    }

    #[test]
    fn the_minimum_counts_either_side_of_the_exact_split() {
        // 16384 pages at 2:1 put 10923 on DRAM; 1:2 wants 5461.33 there.
        assert_eq!(minimum_moves(10923, 16384.0 / 3.0), 5461);
        assert_eq!(minimum_moves(5000, 16384.0 / 3.0), 461);
        assert_eq!(minimum_moves(300, 300.0), 0);
    }

    #[test]
    fn intervals_cover_a_sweep_within_bounds() {
        assert_eq!(intervals_for(1_000.0).sample_us, 5_000);
        assert_eq!(intervals_for(50_000.0).sample_us, 50_000);
        assert_eq!(intervals_for(50_000.0).aggr_us, 500_000);
        assert_eq!(intervals_for(9e9).sample_us, 200_000);
    }
}
