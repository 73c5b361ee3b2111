//! The logic of `tk-bench-wi`; what it does and how it is used are the doc of
//! `src/bin/tk-bench-wi.rs` (its `--help`).

use crate::abi::ready::{read_topology, tierkit_weight_dir};
use crate::abi::tk::{Tierkit, TK_MODE_WEIGHTED_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::kernel::thp_note;
use crate::linux::sys::{
    monotonic_ns, Mapping, MPOL_INTERLEAVE, MPOL_WEIGHTED_INTERLEAVE, PAGE_SIZE,
};
use crate::topology::interleave::{expected_seq, fmt_weights, per_node_counts, weight_table};
use crate::topology::node;
use crate::topology::node::fmt_mask;
use crate::topology::weights::WeightDir;
use clap::Parser;
use serde_json::json;
use std::process::ExitCode;

const BIN: &str = "tk-bench-wi";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Tierkit,
    KernelWeighted,
    KernelInterleave,
    KernelLocal,
}

impl Variant {
    const ALL: [Variant; 4] = [
        Variant::Tierkit,
        Variant::KernelWeighted,
        Variant::KernelInterleave,
        Variant::KernelLocal,
    ];

    fn name(self) -> &'static str {
        match self {
            Variant::Tierkit => "tierkit mmap (weighted interleave)",
            Variant::KernelWeighted => "anon MPOL_WEIGHTED_INTERLEAVE",
            Variant::KernelInterleave => "anon MPOL_INTERLEAVE",
            Variant::KernelLocal => "anon default (local)",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Variant::Tierkit => "tierkit",
            Variant::KernelWeighted => "kernel_weighted_interleave",
            Variant::KernelInterleave => "kernel_interleave",
            Variant::KernelLocal => "kernel_local",
        }
    }
}

/// One timed run: `(elapsed_ns, nodes of the pages)`. Nodes are queried
/// after the clock stops, only when `query`.
fn run(v: Variant, nr_pages: usize, mask: u64, query: bool) -> Result<(u64, Vec<i32>), String> {
    let len = nr_pages * PAGE_SIZE;
    match v {
        Variant::Tierkit => {
            let t = Tierkit::open().map_err(|e| format!("open: {e}"))?;
            t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, mask)
                .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
            let t0 = monotonic_ns();
            let m = t.map(nr_pages, 0).map_err(|e| format!("mmap: {e}"))?;
            m.touch_pages();
            let dt = monotonic_ns() - t0;
            let nodes = if query {
                m.page_nodes().map_err(|e| e.to_string())?
            } else {
                Vec::new()
            };
            Ok((dt, nodes))
        }
        _ => {
            let t0 = monotonic_ns();
            let m = Mapping::anon(len).map_err(|e| format!("mmap: {e}"))?;
            m.no_huge().map_err(|e| format!("MADV_NOHUGEPAGE: {e}"))?;
            match v {
                Variant::KernelWeighted => m.mbind(MPOL_WEIGHTED_INTERLEAVE, mask, 0),
                Variant::KernelInterleave => m.mbind(MPOL_INTERLEAVE, mask, 0),
                _ => Ok(()),
            }
            .map_err(|e| format!("mbind: {e}"))?;
            m.touch_pages();
            let dt = monotonic_ns() - t0;
            let nodes = if query {
                m.page_nodes().map_err(|e| e.to_string())?
            } else {
                Vec::new()
            };
            Ok((dt, nodes))
        }
    }
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    if v.is_empty() {
        0
    } else {
        v[v.len() / 2]
    }
}

fn rate(pages: usize, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        pages as f64 * 1e9 / ns as f64
    }
}

/// The arguments: `[MIB [REPS]]`.
#[derive(Parser)]
#[command(disable_help_flag = true)]
struct Args {
    /// MiB mapped per run.
    #[arg(default_value_t = 64)]
    mib: usize,
    /// Repetitions of each variant.
    #[arg(default_value_t = 5)]
    reps: usize,
}

pub fn main() -> ExitCode {
    let args = Args::parse();
    let (mib, reps) = (args.mib, args.reps.max(1));
    let nr_pages = mib * (1 << 20) / PAGE_SIZE;

    let mut r = Report::new(BIN, "bench");
    let Some(topo) = read_topology(&mut r) else {
        return r.finish();
    };
    r.note(thp_note());
    let Some(tw) = tierkit_weight_dir(&mut r) else {
        return r.finish();
    };
    let tsaved = tw.snapshot();

    // The mask: DRAM + first memory-only node, else all memory nodes.
    let mask = match (topo.dram_node(), topo.cxl_node()) {
        (Some(d), Some(c)) => node::mask_of(&[d, c]),
        _ => topo.memory_mask(),
    };
    // The kernel's current weights, copied to tierkit.
    let kt = WeightDir::kernel()
        .and_then(|k| k.table().ok())
        .unwrap_or([1; 64]);
    let weights: Vec<(u32, u8)> = node::nodes_of(mask)
        .iter()
        .map(|&n| (n, kt[n as usize]))
        .collect();
    if let Err(e) = tw.set_weights(&weights) {
        r.fail("copy kernel weights to tierkit", format!("{e:#}"));
        return r.finish();
    }
    r.note(format!(
        "{} pages ({mib} MiB) x {reps} reps, nodemask {}, weights {} (the kernel's)",
        nr_pages,
        fmt_mask(mask),
        fmt_weights(&weights)
    ));

    let runs = measure(&mut r, nr_pages, mask, reps);
    let results = report_variants(&mut r, nr_pages, &runs);
    check_counts(&mut r, &runs, mask, &weights, nr_pages);

    match tsaved {
        Ok(s) => r.check("restore tierkit weights", s.restore()),
        Err(e) => r.fail("restore tierkit weights", format!("no snapshot: {e:#}")),
    };
    r.set("pages", json!(nr_pages));
    r.set("mib", json!(mib));
    r.set("reps", json!(reps));
    r.set("nodemask", json!(node::nodes_of(mask)));
    r.set("weights", json!(weights));
    r.set("results", json!(results));
    r.finish()
}

/// The runs of every variant: elapsed ns of each repetition, pages per
/// node of the first, whether it failed.
struct Runs {
    times: Vec<Vec<u64>>,
    nodes: Vec<Vec<(i32, usize)>>,
    failed: Vec<bool>,
}

/// Every variant `reps` times, in turn; a failure fails the variant's
/// check and ends its runs.
fn measure(r: &mut Report, nr_pages: usize, mask: u64, reps: usize) -> Runs {
    let mut times: Vec<Vec<u64>> = vec![Vec::new(); Variant::ALL.len()];
    let mut nodes: Vec<Vec<(i32, usize)>> = vec![Vec::new(); Variant::ALL.len()];
    let mut failed = vec![false; Variant::ALL.len()];
    for rep in 0..reps {
        for (i, &v) in Variant::ALL.iter().enumerate() {
            if failed[i] {
                continue;
            }
            match run(v, nr_pages, mask, rep == 0) {
                Ok((dt, n)) => {
                    times[i].push(dt);
                    if rep == 0 {
                        nodes[i] = per_node_counts(&n);
                    }
                }
                Err(e) => {
                    failed[i] = true;
                    r.fail(v.name(), e);
                }
            }
        }
    }
    Runs {
        times,
        nodes,
        failed,
    }
}

/// The table of the variants on stdout, one check per variant that ran;
/// gives the results for the JSON line.
fn report_variants(r: &mut Report, nr_pages: usize, runs: &Runs) -> Vec<serde_json::Value> {
    let Runs {
        times,
        nodes,
        failed,
    } = runs;
    let med: Vec<u64> = times.iter().map(|t| median(&mut t.clone())).collect();
    let best: Vec<u64> = times
        .iter()
        .map(|t| t.iter().copied().min().unwrap_or(0))
        .collect();
    let tk_rate = rate(nr_pages, med[0]);
    println!(
        "# {:<36} {:>14} {:>14} {:>12}  pages per node",
        "variant", "pages/s median", "pages/s best", "tierkit/x"
    );
    let mut results = Vec::new();
    for (i, &v) in Variant::ALL.iter().enumerate() {
        if failed[i] {
            continue;
        }
        let (rm, rb) = (rate(nr_pages, med[i]), rate(nr_pages, best[i]));
        let ratio = if rm > 0.0 { tk_rate / rm } else { 0.0 };
        let per: Vec<String> = nodes[i].iter().map(|(n, c)| format!("{n}:{c}")).collect();
        println!(
            "# {:<36} {:>14.0} {:>14.0} {:>12.2}  {}",
            v.name(),
            rm,
            rb,
            ratio,
            per.join(" ")
        );
        results.push(json!({
            "variant": v.key(),
            "name": v.name(),
            "elapsed_ns": times[i],
            "pages_per_s_median": rm.round(),
            "pages_per_s_best": rb.round(),
            "tierkit_over_this": (ratio * 1000.0).round() / 1000.0,
            "per_node": nodes[i].iter().map(|(n, c)| json!([n, c])).collect::<Vec<_>>(),
        }));
        if v != Variant::Tierkit {
            r.ok_note(
                &format!("ran {}", v.name()),
                format!("{rm:.0} pages/s, tierkit x{ratio:.2}"),
            );
        } else {
            r.ok_note(&format!("ran {}", v.name()), format!("{rm:.0} pages/s"));
        }
    }
    results
}

/// The weighted variants must have put pages where the weights say.
fn check_counts(r: &mut Report, runs: &Runs, mask: u64, weights: &[(u32, u8)], nr_pages: usize) {
    let Runs { nodes, failed, .. } = runs;
    for i in [0usize, 1] {
        if failed[i] || nodes[i].is_empty() {
            continue;
        }
        let want = per_node_counts(
            &expected_seq(true, mask, &weight_table(weights), 0, nr_pages)
                .iter()
                .map(|&n| n as i32)
                .collect::<Vec<_>>(),
        );
        let got: Vec<(i32, usize)> = nodes[i].clone();
        // Counts over a whole number of cycles do not depend on the ilx
        // start; allow one cycle of slack for the anonymous mapping's start.
        let slack: usize = weights.iter().map(|w| w.1 as usize).sum();
        let close = want.len() == got.len()
            && want
                .iter()
                .zip(&got)
                .all(|(a, b)| a.0 == b.0 && a.1.abs_diff(b.1) <= slack);
        let name = format!(
            "{}: per-node counts follow the weights",
            Variant::ALL[i].name()
        );
        r.check(
            &name,
            if close {
                Ok(())
            } else {
                Err(format!("{got:?}, expected about {want:?}"))
            },
        );
    }
}
