//! The logic of `tk-workload`; what it does and how it is used are the doc of
//! `src/bin/tk-workload.rs` (its `--help`).

use crate::abi::ready::read_topology;
use crate::harness::report::Report;
use crate::linux::sys::{self, PAGE_SIZE};
use crate::tools::workload::calib::{self, Calibration, Opts, Workload};
use crate::tools::workload::compare::{fault, lookup, pairs, stream, Ctx, InRun, Policy, Settings};
use crate::tools::workload::rows;
use crate::tools::workload::Flags;
use crate::topology::interleave::fmt_weights;
use crate::topology::node::{fmt_mask, nodes_of, Topology};
use crate::topology::weights::WeightDir;
use crate::{abi::tk, topology::cxl, topology::weights};
use anyhow::{Context, Result};
use serde_json::json;
use std::process::ExitCode;

const BIN: &str = "tk-workload";

const KNOWN: &[&str] = &[
    "calibration",
    "threads",
    "fault-threads",
    "duration",
    "lookup-size",
    "stream-size",
    "fault-size",
    "map-size",
    "nuclides",
    "reps",
    "rounds",
    "workloads",
    "policies",
    "topology",
    "no-settle",
];

fn usage() {
    println!(
        "usage: {BIN} [--calibration FILE] [--workloads lookup,stream,fault] [--policies local,bind:0,...] \
         [--threads T] [--fault-threads N] [--duration SECS] [--lookup-size 32M] [--stream-size 8M] [--fault-size 2M] \
         [--map-size 8M] [--nuclides 34] [--reps 3] [--rounds 3] [--topology NAME]"
    );
}

pub fn main() -> ExitCode {
    let flags = match Flags::from_args_or_usage(BIN, &["no-settle"], KNOWN, usage) {
        Ok(f) => f,
        Err(code) => return code,
    };
    super::set_settle(!flags.has("no-settle"));
    let mut r = Report::new(BIN, "bench");
    let Some((s, workloads)) = settings(&mut r, &flags) else {
        return r.finish();
    };
    // THP off for the whole process: every working set in 4 KiB pages, as
    // tierkit's.
    let _ = sys::disable_thp();

    let Some(topo) = read_topology(&mut r) else {
        return r.finish();
    };
    let Some(dram) = topo.dram_node().or_else(|| topo.memory.first().copied()) else {
        r.fail("topology", "no memory node");
        return r.finish();
    };
    let memory = topo.memory_mask();
    let tw = if tk::Tierkit::present() {
        WeightDir::tierkit()
    } else {
        None
    };
    let tsaved = tw.as_ref().map(|t| {
        (
            t.snapshot(),
            std::fs::read_to_string(t.bandwidth_path()).unwrap_or_default(),
        )
    });
    let kernel_w = WeightDir::kernel().and_then(|k| k.table().ok());

    let cpus = super::node_cpus(topo.dram_node().unwrap_or(dram));
    let threads = if s.threads == 0 {
        cpus.len().max(1)
    } else {
        s.threads
    };
    let fault_threads = if s.fault_threads == 0 {
        cpus.len().max(1)
    } else {
        s.fault_threads
    };
    let Some(cal) = calibration(&mut r, &flags, &topo, threads) else {
        return r.finish();
    };
    let topology = topology_name(&flags, &topo);
    let Some(policies) = policies(&mut r, &flags, &topo, kernel_w.is_some(), tw.is_some()) else {
        return r.finish();
    };
    let ctx = Ctx {
        topo,
        cal,
        memory,
        kernel_w,
        tw,
        cpus,
        threads,
        fault_threads,
        dram,
        topology,
    };
    r.note(format!(
        "{}: memory {}, {} thread(s) on CPUs {:?} (node {}), regime {}, kernel weights {}, {} s per measurement",
        ctx.topology,
        fmt_mask(ctx.memory),
        ctx.threads,
        ctx.cpus,
        ctx.topo.dram_node().unwrap_or(dram),
        ctx.cal.regime,
        ctx.kernel_w
            .map_or("-".into(), |k| fmt_weights(&pairs(ctx.memory, &k))),
        s.duration
    ));

    let t0 = sys::monotonic_ns();
    let mut all_rows = Vec::new();
    let mut inrun: InRun = Vec::new();
    for w in &workloads {
        let t = sys::monotonic_ns();
        let rows = match w.as_str() {
            "lookup" => lookup(&ctx, &s, &policies, &mut r, &mut inrun),
            "stream" => stream(&ctx, &s, &policies, &mut r, &mut inrun),
            _ => fault(&ctx, &s, &policies, &mut r),
        };
        r.note(format!(
            "{w}: {:.1} s",
            (sys::monotonic_ns() - t) as f64 / 1e9
        ));
        all_rows.extend(rows);
    }
    for l in rows::table(&all_rows) {
        r.note(l);
    }

    // Put tierkit's weights and bandwidth table back.
    if let (Some(tw), Some((snap, bw))) = (&ctx.tw, tsaved) {
        let res = (|| -> Result<()> {
            if !bw.trim().is_empty() {
                weights::write_file(&tw.bandwidth_path(), &bw)
                    .context("writing the bandwidth table back")?;
            }
            snap?.restore()
        })();
        r.check("restore tierkit weights", res);
    }
    set_results(&mut r, &ctx, &s, t0, inrun, &all_rows);
    r.finish()
}

/// The settings and the workloads from the flags; `None` (with the
/// `flags` check failed) on a bad value.
fn settings(r: &mut Report, flags: &Flags) -> Option<(Settings, Vec<String>)> {
    let mut s = Settings::defaults();
    let parsed = (|| -> Result<()> {
        s.threads = flags.parse_or("threads", s.threads)?;
        s.fault_threads = flags.parse_or("fault-threads", s.fault_threads)?;
        s.duration = flags.parse_or("duration", s.duration)?;
        s.lookup_size = flags.size_or("lookup-size", s.lookup_size)?;
        s.stream_size = flags.size_or("stream-size", s.stream_size)?;
        s.fault_size = flags.size_or("fault-size", s.fault_size)?.max(PAGE_SIZE);
        s.map_size = flags.size_or("map-size", s.map_size)?.max(PAGE_SIZE);
        s.nuclides = flags.parse_or("nuclides", s.nuclides)?;
        s.reps = flags.parse_or("reps", s.reps)?;
        s.rounds = flags.parse_or("rounds", s.rounds)?.max(1);
        Ok(())
    })();
    if let Err(e) = parsed {
        r.fail("flags", format!("{e:#}"));
        return None;
    }
    let workloads = flags
        .list("workloads")
        .unwrap_or_else(|| vec!["lookup".into(), "stream".into(), "fault".into()]);
    for w in &workloads {
        if !["lookup", "stream", "fault"].contains(&w.as_str()) {
            r.fail(
                "flags",
                format!("--workloads: unknown {w:?} (lookup, stream, fault)"),
            );
            return None;
        }
    }
    Some((s, workloads))
}

/// The calibration: loaded from `--calibration FILE`, else measured here
/// (its table noted) with `threads` threads.
fn calibration(
    r: &mut Report,
    flags: &Flags,
    topo: &Topology,
    threads: usize,
) -> Option<Calibration> {
    let memory = topo.memory_mask();
    Some(match flags.get("calibration") {
        Some(path) => match Calibration::load(path) {
            Ok(c) => {
                r.ok_note("calibration", format!("{path}: regime {}", c.regime));
                c
            }
            Err(e) => {
                r.fail("calibration", format!("{e:#}"));
                return None;
            }
        },
        None => {
            let mut o = Opts::defaults();
            o.threads = threads;
            let mut log = |l: String| r.note(l);
            match calib::calibrate(topo, &o, &mut log) {
                Ok(c) => {
                    for l in c.table(memory) {
                        r.note(l);
                    }
                    r.ok_note("calibration", format!("measured, regime {}", c.regime));
                    c
                }
                Err(e) => {
                    r.fail("calibration", format!("{e:#}"));
                    return None;
                }
            }
        }
    })
}

/// The topology's name for the rows: `--topology`, else from what the
/// machine has (CXL nodes, memory-only nodes).
fn topology_name(flags: &Flags, topo: &Topology) -> String {
    flags
        .get("topology")
        .map(str::to_string)
        .unwrap_or_else(|| {
            if !cxl::cxl_nodes().is_empty() {
                "cxl".into()
            } else if !topo.memory_only().is_empty() {
                "numa".into()
            } else {
                "flat".into()
            }
        })
}

/// The policies that apply here (tierkit's if `tierkit`, the kernel's
/// weighted interleave if `kernel_weights`), or those of `--policies`.
fn policies(
    r: &mut Report,
    flags: &Flags,
    topo: &Topology,
    kernel_weights: bool,
    tierkit: bool,
) -> Option<Vec<Policy>> {
    let mut all = vec![Policy::Local];
    all.extend(topo.memory.iter().map(|&n| Policy::Bind(n)));
    if topo.memory.len() >= 2 {
        all.push(Policy::KernelInterleave);
        if kernel_weights {
            all.push(Policy::KernelWeighted);
        }
    }
    if tierkit {
        if kernel_weights && topo.memory.len() >= 2 {
            all.push(Policy::TierkitHmat);
        }
        all.push(Policy::TierkitAuto);
        all.push(Policy::TierkitOptimized);
    } else {
        r.skip("tierkit policies", "no /dev/tierkit or weight directory");
    }
    Some(match flags.list("policies") {
        None => all,
        Some(names) => {
            let mut v = Vec::new();
            for n in names {
                match all.iter().find(|p| p.name() == n) {
                    Some(p) => v.push(p.clone()),
                    None => {
                        r.fail(
                            "flags",
                            format!(
                                "--policies: {n:?} does not apply here ({})",
                                all.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
                            ),
                        );
                        return None;
                    }
                }
            }
            v
        }
    })
}

/// The figures of the run for the JSON line: settings, calibration, the
/// model's recommendations, the rows.
fn set_results(
    r: &mut Report,
    ctx: &Ctx,
    s: &Settings,
    t0: u64,
    inrun: InRun,
    all_rows: &[rows::Row],
) {
    let opt: Vec<_> = [Workload::Lookup, Workload::Triad]
        .iter()
        .filter_map(|&w| {
            let rec = ctx.cal.recommend(w)?;
            Some(
                json!({"workload": w.name(), "nodemask": nodes_of(rec.mask.0),
                        "weights": pairs(rec.mask.0, &rec.weights), "predicted": rec.throughput}),
            )
        })
        .collect();
    r.set("topology", json!(ctx.topology));
    r.set("regime", json!(ctx.cal.regime));
    r.set("threads", json!(ctx.threads));
    r.set("elapsed_s", json!((sys::monotonic_ns() - t0) as f64 / 1e9));
    r.set(
        "settings",
        json!({"duration": s.duration, "lookup_size": s.lookup_size, "stream_size": s.stream_size,
               "fault_size": s.fault_size, "map_size": s.map_size, "nuclides": s.nuclides, "reps": s.reps}),
    );
    r.set(
        "calibration",
        serde_json::to_value(&ctx.cal).unwrap_or_default(),
    );
    r.set("optimized", json!(opt));
    r.set(
        "calibration_in_run",
        serde_json::Value::Object(inrun.into_iter().collect()),
    );
    r.set("nodemask", json!(nodes_of(ctx.memory)));
    r.set("rows", serde_json::to_value(all_rows).unwrap_or_default());
}
