//! The logic of `tk-bench-rebalance`; what it does and how it is used are the doc of
//! `src/bin/tk-bench-rebalance.rs` (its `--help`).

use super::{move_speed, target_share};
use crate::abi::ready::{tierkit_ready, tierkit_weight_dir};
use crate::harness::report::Report;
use crate::linux::sys::{self, monotonic_ns, PAGE_SIZE};
use crate::tools::workload::calib::{self, weights_from_bandwidth, Calibration, Opts};
use crate::tools::workload::kernels::{Arrays, Bw};
use crate::tools::workload::{settle, Flags, Placement, Region};
use crate::topology::interleave::{expected_seq, fmt_weights, weight_table};
use crate::topology::node;
use crate::topology::weights::WeightDir;
use serde_json::json;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use tierkit_core::uapi::TkRebalance;

const BIN: &str = "tk-bench-rebalance";

pub fn main() -> ExitCode {
    let flags = match Flags::from_args(
        BIN,
        &["share-only"],
        &[
            "size",
            "seconds",
            "move-size",
            "share-size",
            "share-seconds",
            "share-only",
        ],
    ) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let mut r = Report::new(BIN, "bench");
    let size = match flags.size_or("size", 24 << 20) {
        Ok(s) => s,
        Err(e) => {
            r.fail("flags", format!("{e:#}"));
            return r.finish();
        }
    };
    let seconds: f64 = flags.parse_or("seconds", 1.5).unwrap_or(1.5);
    let Some(topo) = tierkit_ready(&mut r) else {
        return r.finish();
    };
    let (Some(d), Some(c)) = (topo.dram_node(), topo.cxl_node()) else {
        r.skip("rebalance", "no DRAM + memory-only node pair");
        return r.finish();
    };
    let Some(tw) = tierkit_weight_dir(&mut r) else {
        return r.finish();
    };
    let kw = WeightDir::kernel();
    let saved_tk = tw.snapshot();
    let saved_k = kw.as_ref().map(|k| k.snapshot());
    if !flags.has("share-only") {
        let res = bench(&mut r, &topo, &tw, kw.as_ref(), d, c, size, seconds);
        if let Err(e) = res {
            r.fail("rebalance benchmark", e);
        }
        let move_size = flags.size_or("move-size", 64 << 20).unwrap_or(64 << 20);
        move_rows(&mut r, d, c, move_size);
    }
    let share = target_share::Opts {
        size: flags.size_or("share-size", 64 << 20).unwrap_or(64 << 20),
        bound_s: flags.parse_or("share-seconds", 60.0).unwrap_or(60.0),
        hold_s: 5.0,
        before_s: 2.0,
    };
    target_share::compare(&mut r, &tw, d, c, &share);
    for (what, s) in [("tierkit", Some(saved_tk)), ("kernel", saved_k)] {
        if let Some(s) = s {
            match s {
                Ok(s) => r.check(&format!("restore {what} weights"), s.restore()),
                Err(e) => r.fail(&format!("restore {what} weights"), format!("{e:#}")),
            };
        }
    }
    r.finish()
}

/// MB/s of triad passes over `arr` recorded as `(end_ns, bytes)` by
/// [`Runner`].
struct Runner {
    stop: AtomicBool,
    passes: Mutex<Vec<(u64, u64)>>,
}

impl Runner {
    fn run(&self, arr: &Arrays) {
        let chunk = 1 << 15;
        let mut no = 0u64;
        while !self.stop.load(Ordering::Relaxed) {
            let mut lo = 0;
            while lo < arr.n {
                arr.pass_range(Bw::Triad, lo, lo + chunk, no);
                let bytes = (chunk.min(arr.n - lo) * 24) as u64;
                if let Ok(mut p) = self.passes.lock() {
                    p.push((monotonic_ns(), bytes));
                }
                lo += chunk;
            }
            no += 1;
        }
    }

    /// MB/s between `from` and `to` (ns).
    fn mbps(&self, from: u64, to: u64) -> f64 {
        target_share::per_second(&self.passes, from, to) / 1e6
    }
}

fn sleep(s: f64) {
    std::thread::sleep(std::time::Duration::from_secs_f64(s));
}

/// Best-of-`rounds` triad MB/s of each region, measured in alternating
/// blocks of `seconds` / `rounds`.
fn side_by_side(regions: &[&Region], seconds: f64, rounds: usize) -> Vec<f64> {
    let mut best = vec![0.0f64; regions.len()];
    for _ in 0..rounds {
        for (i, reg) in regions.iter().enumerate() {
            let arr = Arrays::new(reg);
            // The same TLB state for each block (workload::settle: QEMU's
            // software TLB otherwise keeps a size that halves one block).
            let (base, len) = arr.span();
            settle(base, len);
            let t0 = monotonic_ns();
            let mut bytes = 0u64;
            let mut no = 0;
            while (monotonic_ns() - t0) as f64 / 1e9 < seconds / rounds as f64 {
                arr.pass(Bw::Triad, 0, 1, no);
                bytes += (arr.n * 24) as u64;
                no += 1;
            }
            let mbps = bytes as f64 / ((monotonic_ns() - t0) as f64 / 1e9) / 1e6;
            best[i] = best[i].max(mbps);
        }
    }
    best
}

#[allow(clippy::too_many_arguments)]
fn bench(
    r: &mut Report,
    topo: &node::Topology,
    tw: &WeightDir,
    kw: Option<&WeightDir>,
    d: u32,
    c: u32,
    size: usize,
    seconds: f64,
) -> Result<(), String> {
    let mask = node::mask_of(&[d, c]);
    let Some(Change {
        cal,
        old,
        new,
        pages,
        nodes_new,
        minimum,
    }) = weight_change(r, topo, (d, c), size)?
    else {
        return Ok(());
    };

    tw.set_weights(&old).map_err(|e| format!("{e:#}"))?;
    let reg = Region::new(&Placement::Tierkit(mask), size).map_err(|e| format!("{e:#}"))?;
    let arr = Arrays::new(&reg);
    let want = arr.init(&[], 1);
    let ((before, during, after_run), moved) = rebalance_running(tw, &reg, &arr, &new, seconds)?;
    r.check(
        "moved the minimum",
        if moved.moved == minimum && moved.misplaced == minimum {
            Ok(())
        } else {
            Err(format!(
                "moved {} of {} misplaced, the minimum is {minimum}",
                moved.moved, moved.misplaced
            ))
        },
    );
    let now = reg.page_nodes().map_err(|e| format!("{e:#}"))?;
    let off = now
        .iter()
        .zip(&nodes_new)
        .filter(|(a, b)| **a != **b as i32)
        .count();
    r.check(
        "every page on its new node",
        if off == 0 {
            Ok(())
        } else {
            Err(format!("{off} pages off"))
        },
    );

    // Two fresh placements with the new weights: the second measures how
    // far identical placements differ in this run (the noise floor).
    let fresh = Region::new(&Placement::Tierkit(mask), size).map_err(|e| format!("{e:#}"))?;
    Arrays::new(&fresh).init(&[], 1);
    let twin = Region::new(&Placement::Tierkit(mask), size).map_err(|e| format!("{e:#}"))?;
    Arrays::new(&twin).init(&[], 1);
    let best = side_by_side(&[&reg, &fresh, &twin], 3.0 * seconds, 6);
    let (after, fresh_mbps, twin_mbps) = (best[0], best[1], best[2]);
    let noise = (twin_mbps / fresh_mbps - 1.0).abs();
    // The runner's triads wrote a = b + s*c each pass: check STREAM's
    // invariant with the values it leaves (b and c untouched).
    let errors = arr.errors((want.1 + 3.0 * want.2, want.1, want.2));
    r.check(
        "the working set's data survived the moves",
        if errors == 0 {
            Ok(())
        } else {
            Err(format!("{errors} sampled elements wrong"))
        },
    );
    let move_ms = moved.elapsed_ns as f64 / 1e6;
    let move_mbps =
        (moved.moved as f64 * PAGE_SIZE as f64) / (moved.elapsed_ns.max(1) as f64 / 1e9) / 1e6;
    let copy_mbps = cal
        .nodes
        .iter()
        .find(|n| n.nid == c)
        .map_or(0.0, |n| n.copy_mbps);
    let (mbind_moved, mbind_misplaced) = match kw {
        Some(kw) => mbind_move(kw, mask, &old, &new, size)?,
        None => (0, 0),
    };
    r.note(format!(
        "triad MB/s: before {before:.0}, during {during:.0}, after {after_run:.0} (running), \
         after {after:.0} vs fresh {fresh_mbps:.0} side by side ({:+.1}%; two fresh \
         placements differ by {:.1}%)",
        (after / fresh_mbps - 1.0) * 100.0,
        noise * 100.0
    ));
    r.note(format!(
        "tierkit moved {} of {pages} pages (minimum {minimum}) in {move_ms:.1} ms, \
         {move_mbps:.0} MB/s (node {c} copy: {copy_mbps:.0} MB/s); mbind(MPOL_MF_MOVE) \
         moved {mbind_moved} and left {mbind_misplaced} off the new weights' node",
        moved.moved
    ));
    r.set(
        "rows",
        json!([{
            "topology": topology_name(),
            "workload": "rebalance",
            "policy": "tierkit-rebalance",
            "unit": "MB/s",
            "measured": after,
            "moved": moved.moved,
            "minimum": minimum,
            "pages": pages,
            "before": before,
            "during": during,
            "after": after,
            "after_running": after_run,
            "fresh": fresh_mbps,
            "fresh_twin": twin_mbps,
            "noise": noise,
            "move_ms": move_ms,
            "move_mbps": move_mbps,
            "copy_mbps": copy_mbps,
            "mbind_moved": mbind_moved,
            "mbind_misplaced": mbind_misplaced,
            "weights_before": old,
            "weights_after": new,
        }]),
    );
    Ok(())
}

/// The move speed, side by side in this run: tierkit's `TK_IOC_REBALANCE`
/// and the kernel's `move_pages(2)` moving `size` bytes of pages from `d`
/// to `c` while another thread runs, as the triad ran during the
/// rebalance ([`move_speed`]), one row per method (workload `move`, unit
/// us/page) appended to the record's `rows`, with the ratio.
fn move_rows(r: &mut Report, d: u32, c: u32, size: usize) {
    let s = match move_speed::measure(d, c, size / PAGE_SIZE, 3, true) {
        Ok(s) => s,
        Err(e) => {
            r.fail("move speed against move_pages(2)", e);
            return;
        }
    };
    r.note(s.summary(d, c));
    let row = |method: &str, us: f64, ms: &[u64]| {
        json!({
            "topology": topology_name(),
            "workload": "move",
            "policy": method,
            "unit": "us/page",
            "measured": us,
            "pages": s.pages,
            "from": d,
            "to": c,
            "mbps": PAGE_SIZE as f64 / us,
            "ratio": s.ratio(),
            "runs_ms": ms.iter().map(|n| *n as f64 / 1e6).collect::<Vec<_>>(),
        })
    };
    let mut rows = r.json()["rows"].as_array().cloned().unwrap_or_default();
    rows.push(row(
        "tierkit-rebalance",
        s.tierkit_per_page() / 1e3,
        &s.tierkit_ns,
    ));
    rows.push(row("move_pages", s.kernel_per_page() / 1e3, &s.kernel_ns));
    r.set("rows", json!(rows));
}

/// A weight pair per node of the two: `(node, weight)`.
type Pair = [(u32, u8); 2];

/// The change the run makes: from HMAT's weights to the measured ones.
struct Change {
    cal: Calibration,
    old: Pair,
    new: Pair,
    /// Pages of the working set.
    pages: usize,
    /// Each page's node under the new weights.
    nodes_new: Vec<u32>,
    /// Pages whose node changes: the fewest a rebalance can move.
    minimum: u64,
}

/// The nodes `d` and `c` calibrated, the weights HMAT's bandwidth and the
/// measured bandwidth give, and the pages that change node between them;
/// `None` (a skip in `r`) if there is nothing to change.
fn weight_change(
    r: &mut Report,
    topo: &node::Topology,
    (d, c): (u32, u32),
    size: usize,
) -> Result<Option<Change>, String> {
    let mask = node::mask_of(&[d, c]);
    let memory = topo.memory_mask();
    let opts = Opts {
        nodes: Some(vec![d, c]),
        probe: false,
        ..Opts::defaults()
    };
    let cal = {
        let mut log = |s: String| r.note(s);
        calib::calibrate(topo, &opts, &mut log).map_err(|e| format!("calibrate: {e:#}"))?
    };
    let hmat = cal.hmat_entries();
    if hmat.is_empty() {
        r.skip("rebalance", "no HMAT bandwidth for the nodes");
        return Ok(None);
    }
    let w_old = weights_from_bandwidth(&hmat, memory);
    let w_new = weights_from_bandwidth(&cal.measured_entries(), memory);
    let pair = |w: &[u8; 64]| [(d, w[d as usize]), (c, w[c as usize])];
    let (old, new) = (pair(&w_old), pair(&w_new));
    r.note(format!(
        "weights: HMAT {} -> measured {}",
        fmt_weights(&old),
        fmt_weights(&new)
    ));
    let pages = size.div_ceil(PAGE_SIZE);
    let nodes_old = expected_seq(true, mask, &weight_table(&old), 0, pages);
    let nodes_new = expected_seq(true, mask, &weight_table(&new), 0, pages);
    let minimum = nodes_old
        .iter()
        .zip(&nodes_new)
        .filter(|(a, b)| a != b)
        .count() as u64;
    if minimum == 0 {
        r.skip(
            "rebalance",
            "HMAT and measured weights place every page alike",
        );
        return Ok(None);
    }
    Ok(Some(Change {
        cal,
        old,
        new,
        pages,
        nodes_new,
        minimum,
    }))
}

/// Triad MB/s of a runner on `arr` before, during and after a
/// `TK_IOC_REBALANCE` of `reg` to the weights `new`, `seconds` each side;
/// and what the rebalance did.
fn rebalance_running(
    tw: &WeightDir,
    reg: &Region,
    arr: &Arrays,
    new: &Pair,
    seconds: f64,
) -> Result<((f64, f64, f64), TkRebalance), String> {
    let runner = Runner {
        stop: AtomicBool::new(false),
        passes: Mutex::new(Vec::new()),
    };
    let (t0, t1, t2, t3, moved) = std::thread::scope(|s| {
        s.spawn(|| runner.run(arr));
        let t0 = monotonic_ns();
        sleep(seconds);
        let t1 = monotonic_ns();
        let res = tw
            .set_weights(new)
            .map_err(|e| format!("{e:#}"))
            .and_then(|_| {
                reg.tierkit()
                    .ok_or("no tierkit file")?
                    .rebalance(TkRebalance::default())
                    .map_err(|e| format!("TK_IOC_REBALANCE: {e}"))
            });
        let t2 = monotonic_ns();
        sleep(seconds);
        let t3 = monotonic_ns();
        runner.stop.store(true, Ordering::Relaxed);
        (t0, t1, t2, t3, res)
    });
    let moved = moved?;
    Ok((
        (
            runner.mbps(t0, t1),
            runner.mbps(t1, t2),
            runner.mbps(t2, t3),
        ),
        moved,
    ))
}

/// The same weight change under the kernel's policy: an anonymous working
/// set placed by `MPOL_WEIGHTED_INTERLEAVE` with the kernel's weights
/// `old`, then the weights `new` and `mbind(MPOL_MF_MOVE)` with the same
/// policy. Returns the pages that changed node and the pages left off the
/// node the new weights give their ilx.
fn mbind_move(
    kw: &WeightDir,
    mask: u64,
    old: &[(u32, u8)],
    new: &[(u32, u8)],
    size: usize,
) -> Result<(usize, usize), String> {
    kw.set_weights(old)
        .map_err(|e| format!("kernel weights: {e:#}"))?;
    let reg = Region::new(&Placement::KernelWeighted(mask), size).map_err(|e| format!("{e:#}"))?;
    let before = reg.page_nodes().map_err(|e| format!("{e:#}"))?;
    kw.set_weights(new)
        .map_err(|e| format!("kernel weights: {e:#}"))?;
    sys::mbind(
        reg.as_ptr() as usize,
        reg.len(),
        sys::MPOL_WEIGHTED_INTERLEAVE,
        mask,
        sys::MPOL_MF_MOVE,
    )
    .map_err(|e| format!("mbind MPOL_MF_MOVE: {e}"))?;
    let after = reg.page_nodes().map_err(|e| format!("{e:#}"))?;
    // An anonymous vma's ilx counts from its vm_pgoff: its address in pages.
    let want = expected_seq(
        true,
        mask,
        &weight_table(new),
        reg.as_ptr() as u64 / PAGE_SIZE as u64,
        after.len(),
    );
    let moved = before.iter().zip(&after).filter(|(a, b)| a != b).count();
    let misplaced = after
        .iter()
        .zip(&want)
        .filter(|(a, b)| **a != **b as i32)
        .count();
    Ok((moved, misplaced))
}

/// `cxl` where a CXL region's node exists, else `numa` (`cargo xtask
/// bench` relabels rows from the boot anyway).
fn topology_name() -> &'static str {
    if crate::topology::cxl::cxl_nodes().is_empty() {
        "numa"
    } else {
        "cxl"
    }
}
