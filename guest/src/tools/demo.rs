//! The logic of `tk-demo`; what it does and how it is used are the doc of
//! `src/bin/tk-demo.rs` (its `--help`).

use crate::abi::tk::{self, Tierkit, TK_MODE_WEIGHTED_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::errno::errno_name;
use crate::linux::sys::{Mapping, MPOL_WEIGHTED_INTERLEAVE, PAGE_SHIFT, PAGE_SIZE};
use crate::topology::interleave::{
    compare_nodes, expected_seq, fmt_weights, per_node_counts, picture,
};
use crate::topology::node::{access1_bandwidth, fmt_mask, Topology};
use crate::topology::weights::{WeightDir, WeightSnapshot};
use crate::{topology::node, topology::weights};
use clap::Parser;
use serde_json::json;
use std::process::ExitCode;
use tierkit_core::uapi::{TK_PLACE_LOCAL, TK_THREADS_AUTO};

const BIN: &str = "tk-demo";
const PICTURE_PAGES: usize = 64;

/// The arguments: `[PAGES]`.
#[derive(Parser)]
#[command(disable_help_flag = true)]
struct Args {
    /// Pages of the weighted placement.
    #[arg(default_value_t = 1024)]
    pages: usize,
}

pub fn main() -> ExitCode {
    let nr_pages = Args::parse().pages.max(1);
    let mut r = Report::new(BIN, "demo");
    let topo = match Topology::read() {
        Ok(t) => t,
        Err(e) => {
            r.fail("topology", format!("{e:#}"));
            return r.finish();
        }
    };
    println!("tierkit demo");
    println!("  topology : {}", topo.describe());
    if !Tierkit::present() {
        r.fail(
            "open /dev/tierkit",
            "no /dev/tierkit (is tierkit.ko loaded?)",
        );
        return r.finish();
    }
    let Some(tw) = WeightDir::tierkit() else {
        r.fail(
            "tierkit weight files",
            "no tierkit weighted_interleave directory",
        );
        return r.finish();
    };
    let mask = match (topo.dram_node(), topo.cxl_node()) {
        (Some(d), Some(c)) => node::mask_of(&[d, c]),
        _ => topo.memory_mask(),
    };
    let nodes = node::nodes_of(mask);

    // Weights: the kernel's auto weights, computed by tierkit itself from
    // the same bandwidth when the kernel has it.
    let kw = WeightDir::kernel();
    let ksnap = kw.as_ref().and_then(|k| k.snapshot().ok());
    if let Some(s) = &ksnap {
        println!(
            "  kernel   : {}  ({})",
            s.describe(),
            weights::KERNEL_WI_DIR
        );
    }
    let source = setup_weights(&tw, &topo, &ksnap);
    let table = match tw.table() {
        Ok(t) => t,
        Err(e) => {
            r.fail("read tierkit weights", format!("{e:#}"));
            return r.finish();
        }
    };
    let weights: Vec<(u32, u8)> = nodes.iter().map(|&n| (n, table[n as usize])).collect();
    println!("  tierkit  : {}  ({source})", fmt_weights(&weights));
    r.set("weights", json!(weights));
    r.set("weights_source", json!(source));

    // Weighted placement through /dev/tierkit.
    let Some(got) = weighted_placement(&mut r, mask, &table, nr_pages) else {
        return r.finish();
    };
    let pic_n = show_placement(&mut r, mask, (&weights, &table), &got);

    // The kernel's own policy on an anonymous mapping, and tierkit at the
    // same ilx (offset = the mapping's address).
    if kw.is_some() {
        same_ilx_as_kernel(&mut r, mask, pic_n, &ksnap, &table);
    }
    if let Some(st) = tk::read_stats() {
        let s: Vec<String> = st
            .iter()
            .map(|s| format!("node{}: allocated {} held {}", s.nid, s.allocated, s.held))
            .collect();
        println!("  {}: {}", tk::STATS_PATH, s.join(", "));
    }

    clear_demo(&mut r, &topo);
    r.finish()
}

/// `nr_pages` of `/dev/tierkit` weighted over `mask`: gives each page's
/// node, as `weighted_interleave_nid` gives it and zeroed; `None` (the
/// check failed) otherwise.
fn weighted_placement(
    r: &mut Report,
    mask: u64,
    table: &[u8; 64],
    nr_pages: usize,
) -> Option<Vec<i32>> {
    let res = (|| -> Result<Vec<i32>, String> {
        let t = Tierkit::open().map_err(|e| format!("open: {e}"))?;
        let pol = t
            .set_policy(TK_MODE_WEIGHTED_INTERLEAVE, mask)
            .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
        if pol.nodemask != mask {
            return Err(format!("effective mask {}", fmt_mask(pol.nodemask)));
        }
        let m = t.map(nr_pages, 0).map_err(|e| format!("mmap: {e}"))?;
        let got = m.page_nodes().map_err(|e| format!("move_pages: {e}"))?;
        compare_nodes(&got, &expected_seq(true, mask, table, 0, nr_pages))?;
        if let Some(o) = m.first_nonzero() {
            return Err(format!("byte {o} not zero"));
        }
        Ok(got)
    })();
    match res {
        Ok(g) => Some(g),
        Err(e) => {
            r.fail("weighted placement", e);
            None
        }
    }
}

/// The placement `got` shown: pages per node against the weights, and a
/// picture of the first pages. Gives how many pages the picture has.
fn show_placement(
    r: &mut Report,
    mask: u64,
    (weights, table): (&[(u32, u8)], &[u8; 64]),
    got: &[i32],
) -> usize {
    let nr_pages = got.len();
    println!();
    println!(
        "weighted interleave: {nr_pages} pages of /dev/tierkit over nodes {}, ilx 0..{}",
        fmt_mask(mask),
        nr_pages - 1
    );
    let counts = per_node_counts(got);
    let total_w: u32 = weights.iter().map(|w| w.1 as u32).sum();
    for &(n, c) in &counts {
        let w = table.get(n as usize).copied().unwrap_or(0);
        let pct = 100.0 * c as f64 / nr_pages as f64;
        let bar = "#".repeat(((40 * c) / nr_pages).max(1));
        println!("  node {n}: {c:>6} pages {pct:5.1}%  (weight {w}/{total_w})  {bar}");
    }
    let pic_n = nr_pages.min(PICTURE_PAGES);
    println!("  first {pic_n} pages (node per page):");
    println!("    tierkit : {}", picture(&got[..pic_n]));
    r.ok_note(
        "weighted placement matches weighted_interleave_nid",
        counts_str(&counts),
    );
    r.set("pages", json!(nr_pages));
    r.set("per_node", json!(counts));
    r.set("picture", json!(picture(&got[..pic_n])));
    pic_n
}

/// `pic_n` pages of an anonymous mapping under the kernel's
/// MPOL_WEIGHTED_INTERLEAVE over `mask`, and tierkit's at the same ilx:
/// shown, and checked page by page when tierkit has the kernel's weights
/// (`ksnap`).
fn same_ilx_as_kernel(
    r: &mut Report,
    mask: u64,
    pic_n: usize,
    ksnap: &Option<WeightSnapshot>,
    table: &[u8; 64],
) {
    let nodes = node::nodes_of(mask);
    let res = (|| -> Result<(String, String, usize), String> {
        let anon = Mapping::anon(pic_n * PAGE_SIZE).map_err(|e| format!("mmap: {e}"))?;
        anon.no_huge().map_err(|e| format!("madvise: {e}"))?;
        anon.mbind(MPOL_WEIGHTED_INTERLEAVE, mask, 0)
            .map_err(|e| format!("mbind: {e}"))?;
        anon.touch_pages();
        let k = anon.page_nodes().map_err(|e| format!("move_pages: {e}"))?;
        let ilx = (anon.addr() >> PAGE_SHIFT) as u64;
        let t = Tierkit::open().map_err(|e| format!("open: {e}"))?;
        t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, mask)
            .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
        let m = t.map(pic_n, ilx).map_err(|e| format!("mmap: {e}"))?;
        let g = m.page_nodes().map_err(|e| format!("move_pages: {e}"))?;
        let same = k.iter().zip(&g).filter(|(a, b)| a == b).count();
        Ok((picture(&k), picture(&g), same))
    })();
    match res {
        Ok((k, g, same)) => {
            println!(
                "  same ilx as an anonymous mapping under the kernel's MPOL_WEIGHTED_INTERLEAVE:"
            );
            println!("    kernel  : {k}");
            println!("    tierkit : {g}");
            let msg = format!("{same}/{pic_n} pages on the same node");
            println!("    {msg}");
            if ksnap.as_ref().is_some_and(|s| {
                s.weights
                    .iter()
                    .all(|&(n, w)| !nodes.contains(&n) || table[n as usize] == w)
            }) {
                r.check(
                    "kernel and tierkit agree page by page",
                    if same == pic_n { Ok(()) } else { Err(msg) },
                );
            } else {
                r.skip(
                    "kernel and tierkit agree page by page",
                    "tierkit's weights differ from the kernel's",
                );
            }
        }
        Err(e) => {
            r.skip("kernel and tierkit agree page by page", e);
        }
    }
}

fn counts_str(counts: &[(i32, usize)]) -> String {
    counts
        .iter()
        .map(|(n, c)| format!("node{n}={c}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Gives tierkit the kernel's auto weights; returns where they came from.
fn setup_weights(
    tw: &WeightDir,
    topo: &Topology,
    ksnap: &Option<weights::WeightSnapshot>,
) -> String {
    let bw: Option<Vec<(u32, u32, u32)>> = topo
        .memory
        .iter()
        .filter(|&&n| n < 64)
        .map(|&n| access1_bandwidth(n).map(|(r, w)| (n, r, w)))
        .collect();
    if let Some(bw) = bw.filter(|b| !b.is_empty()) {
        let ok = tw.write_auto_str("false").is_ok()
            && tw.write_bandwidth(&bw).is_ok()
            && tw.write_auto_str("true").is_ok();
        if ok {
            let s: Vec<String> = bw
                .iter()
                .map(|(n, r, w)| format!("node{n} {r}/{w} MB/s"))
                .collect();
            return format!("auto, from HMAT access1 bandwidth {}", s.join(", "));
        }
    }
    if let Some(s) = ksnap {
        if tw.set_weights(&s.weights).is_ok() {
            return "copied from the kernel".into();
        }
    }
    "tierkit's current weights".into()
}

/// One 1 GiB clear per memory node with 1 worker and with the worker count
/// tierkit picks (`TK_THREADS_AUTO`), workers on the memory's node or the
/// nearest node with CPUs.
fn clear_demo(r: &mut Report, topo: &Topology) {
    println!();
    println!("gigantic clearing: one 1 GiB range per node, 1 worker vs all CPUs near the memory (TK_IOC_CLEAR_BENCH, after an untimed warm-up)");
    let t = match Tierkit::open() {
        Ok(t) => t,
        Err(e) => {
            r.skip("gigantic clearing", format!("open: {e}"));
            return;
        }
    };
    // A CXL node onlined `online_movable` (the default) has only
    // ZONE_MOVABLE memory: tierkit takes gigantic ranges there only with
    // its opt-in.
    let _movable = tk::MovableGigantic::enable().ok();
    let mut rows = Vec::new();
    // All CPUs of the guest; the module refuses more than the placement's
    // eligible CPUs with EINVAL, and then tierkit's auto choice is used.
    let ncpus = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);
    for &nid in &topo.memory {
        // Untimed warm-up: the first touch of guest RAM makes the host back
        // it (lazily allocated under QEMU), which would inflate the 1-worker
        // time and fake a speedup.
        let _ = t.clear_bench(tk::clear_bench_arg(nid as i32, 1, TK_PLACE_LOCAL, 1));
        let one = t.clear_bench(tk::clear_bench_arg(nid as i32, 1, TK_PLACE_LOCAL, 1));
        let one = match one {
            Ok(a) => a,
            Err(e) if e.raw_os_error() == Some(libc::ENOTTY) => {
                r.skip(
                    "gigantic clearing",
                    "TK_IOC_CLEAR_BENCH not implemented by this tierkit.ko",
                );
                return;
            }
            Err(e) => {
                let why = match e.raw_os_error() {
                    Some(libc::ENOMEM) => "no free naturally aligned 1 GiB on the node".to_string(),
                    _ => errno_name(&e),
                };
                println!("  node {nid}: skipped: {why}");
                r.skip(&format!("clear 1 GiB on node {nid}"), why);
                continue;
            }
        };
        let all = t
            .clear_bench(tk::clear_bench_arg(nid as i32, ncpus, TK_PLACE_LOCAL, 1))
            .or_else(|_| {
                t.clear_bench(tk::clear_bench_arg(
                    nid as i32,
                    TK_THREADS_AUTO,
                    TK_PLACE_LOCAL,
                    1,
                ))
            });
        let many = match all {
            Ok(a) => a,
            Err(e) => {
                r.fail(
                    &format!("clear 1 GiB on node {nid} with auto workers"),
                    errno_name(&e),
                );
                continue;
            }
        };
        let speedup = if many.elapsed_ns > 0 {
            one.elapsed_ns as f64 / many.elapsed_ns as f64
        } else {
            0.0
        };
        println!(
            "  node {nid}: 1 worker {:>8.1} ms {:>6} MB/s | {} {:>8.1} ms {:>6} MB/s | speedup x{speedup:.2} (CPUs of node {}, clear_pages {})",
            one.elapsed_ns as f64 / 1e6,
            one.mbps,
            if many.workers == 1 {
                "1 worker ".to_string()
            } else {
                format!("{} workers", many.workers)
            },
            many.elapsed_ns as f64 / 1e6,
            many.mbps,
            many.cpu_node,
            tk::variant_str(&many.variant),
        );
        r.ok_note(
            &format!("clear 1 GiB on node {nid}"),
            format!("x{speedup:.2} with {} workers", many.workers),
        );
        rows.push(json!({
            "nid": nid,
            "one_worker": {"elapsed_ns": one.elapsed_ns, "mbps": one.mbps},
            "auto": {"workers": many.workers, "elapsed_ns": many.elapsed_ns, "mbps": many.mbps, "cpu_node": many.cpu_node},
            "speedup": (speedup * 100.0).round() / 100.0,
            "variant": tk::variant_str(&many.variant),
        }));
    }
    r.set("clear", json!(rows));
}
