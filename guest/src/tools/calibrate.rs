//! The logic of `tk-calibrate`; what it does and how it is used are the doc of
//! `src/bin/tk-calibrate.rs` (its `--help`).

use crate::abi::ready::{read_topology, tierkit_weight_dir};
use crate::harness::report::Report;
use crate::tools::workload::calib::{self, weights_from_bandwidth, Calibration, Opts, Workload};
use crate::tools::workload::rows::fmt_num;
use crate::tools::workload::{self, Flags};
use crate::topology::interleave::fmt_weights;
use crate::topology::node::{fmt_mask, nodes_of, parse_list};
use crate::topology::weights::WeightDir;
use serde_json::json;
use std::process::ExitCode;
use tierkit_core::interleave::Nodemask;
use tierkit_protocol::model::{self, Regime};

const BIN: &str = "tk-calibrate";
const KNOWN: &[&str] = &[
    "size",
    "threads",
    "duration",
    "rounds",
    "nodes",
    "regime",
    "no-write",
    "optimize",
    "out",
    "apply",
    "weights",
    "no-settle",
    "per-socket",
];

fn usage() {
    println!(
        "usage: {BIN} [--size 16M] [--threads T] [--duration SECS] [--rounds 3] [--nodes 0,2] \
         [--regime parallel|serial] [--no-write] [--optimize lookup|copy|scale|add|triad] \
         [--apply PID [--weights N:W,...]] [--per-socket] [--out FILE] [--no-settle]"
    );
}

/// `(node, weight)` of the nodes of `mask` in a 64-entry table.
fn pairs(mask: u64, w: &[u8; 64]) -> Vec<(u32, u8)> {
    nodes_of(mask)
        .into_iter()
        .map(|n| (n, w[n as usize]))
        .collect()
}

pub fn main() -> ExitCode {
    let flags = match Flags::from_args_or_usage(
        BIN,
        &["no-write", "no-settle", "per-socket"],
        KNOWN,
        usage,
    ) {
        Ok(f) => f,
        Err(code) => return code,
    };
    workload::set_settle(!flags.has("no-settle"));
    let mut r = Report::new(BIN, "bench");
    let Options {
        opts,
        forced,
        optimize,
        apply,
        weights,
        out,
    } = match options(&mut r, &flags) {
        Ok(o) => o,
        Err(None) => return r.finish(),
        Err(Some(code)) => return code,
    };

    let Some(topo) = read_topology(&mut r) else {
        return r.finish();
    };
    let memory = topo.memory_mask();
    if let (Some(pid), Some(w)) = (apply, &weights) {
        // Explicit weights: nothing to measure, no global table written.
        let bad: Vec<u32> = w
            .iter()
            .map(|&(n, _)| n)
            .filter(|&n| memory & (1 << n) == 0)
            .collect();
        if bad.is_empty() {
            apply_to(&mut r, pid, w);
        } else {
            r.fail(
                "flags",
                format!("--weights: node(s) {bad:?} have no memory"),
            );
        }
        return r.finish();
    }
    r.note(format!(
        "{} per node, {} rounds of {} s blocks, threads {}",
        workload::fmt_size(opts.size),
        opts.rounds,
        opts.duration,
        if opts.threads == 0 {
            "= CPUs of the nearest node".to_string()
        } else {
            opts.threads.to_string()
        }
    ));
    let mut cal = {
        let mut log = |s: String| r.note(s);
        match calib::calibrate(&topo, &opts, &mut log) {
            Ok(c) => c,
            Err(e) => {
                r.fail("calibrate", format!("{e:#}"));
                return r.finish();
            }
        }
    };
    if let Some(g) = forced {
        cal.regime = g.name().into();
    }
    if flags.has("per-socket") {
        match per_socket(&mut r, &topo, &opts) {
            Some(s) => cal.sockets = s,
            None => return r.finish(),
        }
    }
    r.ok_note(
        "calibrate",
        format!(
            "{} node(s) in {:.1} s, regime {}",
            cal.nodes.len(),
            cal.elapsed_s,
            cal.regime
        ),
    );
    for l in cal.table(memory) {
        r.note(l);
    }

    // The weights each source gives, with the kernel's formula.
    let mask = cal.mask();
    let hmat = cal.hmat_entries();
    let w_hmat = (!hmat.is_empty()).then(|| weights_from_bandwidth(&hmat, memory));
    let w_meas = weights_from_bandwidth(&cal.measured_entries(), memory);
    let kernel = WeightDir::kernel().and_then(|k| k.table().ok());
    r.note(format!(
        "weights: HMAT {}, measured {}, the kernel's table {}",
        w_hmat.map_or("-".into(), |w| fmt_weights(&pairs(mask, &w))),
        fmt_weights(&pairs(mask, &w_meas)),
        kernel.map_or("-".into(), |w| fmt_weights(&pairs(mask, &w)))
    ));
    let expect = expectations(&mut r, &cal, w_hmat, &w_meas);

    let optimized = if flags.has("no-write") {
        r.skip("write tierkit's bandwidth", "--no-write");
        serde_json::Value::Null
    } else {
        write_tierkit(&mut r, &cal, &w_meas, optimize)
    };

    if let Some(pid) = apply {
        // The weights just set, as the process's files' own.
        let w = optimize
            .and_then(|w| cal.recommend(w))
            .map_or_else(|| pairs(mask, &w_meas), |c| pairs(c.mask.0, &c.weights));
        let w: Vec<(u32, u8)> = w.into_iter().filter(|&(_, w)| w > 0).collect();
        apply_to(&mut r, pid, &w);
    }

    match cal.save(&out) {
        Ok(()) => r.ok_note("save", out.clone()),
        Err(e) => r.fail("save", format!("{e:#}")),
    };
    r.set(
        "calibration",
        serde_json::to_value(&cal).unwrap_or_default(),
    );
    r.set(
        "weights",
        json!({
            "nodemask": nodes_of(mask),
            "hmat": w_hmat.map(|w| pairs(mask, &w)),
            "measured": pairs(mask, &w_meas),
            "kernel": kernel.map(|w| pairs(mask, &w)),
            "per_socket": cal.sockets.iter().map(|s| json!({
                "socket": s.socket,
                "weights": s.weights,
            })).collect::<Vec<_>>(),
        }),
    );
    r.set("expected", json!(expect));
    r.set("optimized", optimized);
    r.finish()
}

/// `--per-socket`: every node measured again from each socket's CPUs
/// (`physical_package_id`), one table per socket; `None` with the failed
/// check in `r`.
fn per_socket(
    r: &mut Report,
    topo: &crate::topology::node::Topology,
    opts: &Opts,
) -> Option<Vec<calib::SocketCal>> {
    let sockets = match crate::topology::sockets::read_sockets() {
        Ok(s) if !s.is_empty() => s,
        Ok(_) => {
            r.fail("per-socket calibration", "no socket has an online CPU");
            return None;
        }
        Err(e) => {
            r.fail(
                "per-socket calibration",
                format!("reading the sockets: {e}"),
            );
            return None;
        }
    };
    let mut out = Vec::new();
    for s in sockets {
        let name = format!("socket {} (CPUs {:?})", s.id, s.cpus);
        let mut log = |l: String| r.note(l);
        match calib::calibrate_socket(topo, opts, s.id, (s.cpu_nodes, s.cpus), &mut log) {
            Ok(sc) => {
                r.ok_note(
                    &format!("calibrate {name}"),
                    format!("table {}", fmt_weights(&sc.weights)),
                );
                out.push(sc);
            }
            Err(e) => {
                r.fail(&format!("calibrate {name}"), format!("{e:#}"));
                return None;
            }
        }
    }
    Some(out)
}

/// Sets tierkit's weights from the calibration (and, with `--per-socket`,
/// its device-wide tables): what `--optimize` set, or null.
fn write_tierkit(
    r: &mut Report,
    cal: &Calibration,
    w_meas: &[u8; 64],
    optimize: Option<Workload>,
) -> serde_json::Value {
    let Some(tw) = tierkit_weight_dir(r) else {
        return serde_json::Value::Null;
    };
    let optimized = set_tierkit_weights(r, &tw, cal, w_meas, optimize);
    if !cal.sockets.is_empty() {
        set_device_tables(r, &cal.sockets);
    }
    optimized
}

/// `--per-socket` (without `--no-write`): each socket's measured table set
/// as tierkit's device-wide one for that socket (`TK_IOC_SOCKET_WEIGHTS`
/// with `TK_SOCKET_F_DEVICE`), as the flat figures are set as its global
/// weights: every later allocation of a file without its own tables
/// places by the table of the socket it runs on.
fn set_device_tables(r: &mut Report, sockets: &[calib::SocketCal]) {
    use crate::abi::tk::Tierkit;
    use crate::tools::run::socket::{env, nr_node_ids, set_tables, SocketTable};
    use tierkit_core::uapi::TK_SOCKET_F_DEVICE;
    let name = "write tierkit's device-wide per-socket tables";
    let tables: Vec<SocketTable> = sockets
        .iter()
        .map(|s| (s.socket, s.weights.clone()))
        .collect();
    let res = nr_node_ids().map_err(|e| e.0).and_then(|n| {
        let tk = Tierkit::open().map_err(|e| format!("/dev/tierkit: {e}"))?;
        set_tables(&tk, &tables, n, TK_SOCKET_F_DEVICE).map_err(|e| e.0)
    });
    match res {
        Ok(()) => r.ok_note(name, env(&tables)),
        Err(e) => r.fail(name, e),
    };
}

/// What the flags ask for.
struct Options {
    opts: Opts,
    /// `--regime`: the regime forced (no probe).
    forced: Option<Regime>,
    /// `--optimize`: the workload to set optimized weights for.
    optimize: Option<Workload>,
    /// `--apply`: the process to rebalance.
    apply: Option<i32>,
    /// `--weights`: the weights to rebalance it to (then nothing is
    /// measured).
    weights: Option<Vec<(u32, u8)>>,
    /// `--out`: where the calibration is saved.
    out: String,
}

/// The options from the flags. On a bad value: `Err(None)` with the
/// `flags` check failed in `r`, or `Err(Some(code))` to exit with (the
/// usage printed).
fn options(r: &mut Report, flags: &Flags) -> Result<Options, Option<ExitCode>> {
    let mut opts = Opts::defaults();
    let parsed = (|| -> anyhow::Result<()> {
        opts.size = flags.size_or("size", opts.size)?;
        opts.threads = flags.parse_or("threads", opts.threads)?;
        opts.duration = flags.parse_or("duration", opts.duration)?;
        opts.rounds = flags.parse_or("rounds", opts.rounds)?.max(1);
        if let Some(n) = flags.get("nodes") {
            opts.nodes = Some(parse_list(n)?);
        }
        Ok(())
    })();
    if let Err(e) = parsed {
        r.fail("flags", format!("{e:#}"));
        return Err(None);
    }
    let forced = match flags.get("regime") {
        None => None,
        Some(s) => match Regime::from_name(s) {
            Some(g) => Some(g),
            None => {
                r.fail("flags", format!("--regime {s:?}: parallel or serial"));
                return Err(None);
            }
        },
    };
    let optimize = match flags.get("optimize") {
        None => None,
        Some(s) => match Workload::from_name(s) {
            Some(w) if w != Workload::Read => Some(w),
            _ => {
                r.fail(
                    "flags",
                    format!("--optimize {s:?}: lookup, copy, scale, add or triad"),
                );
                return Err(None);
            }
        },
    };
    let refuse = |why: String| {
        eprintln!("{BIN}: {why}");
        usage();
        Err(Some(ExitCode::from(2)))
    };
    let apply = match flags.get("apply").map(str::parse::<i32>) {
        None => None,
        Some(Ok(pid)) if pid > 0 => Some(pid),
        Some(_) => return refuse("--apply takes a process id".into()),
    };
    let weights = match flags.get("weights") {
        None => None,
        Some(_) if apply.is_none() => return refuse("--weights goes with --apply PID".into()),
        Some(_) if flags.has("per-socket") => {
            return refuse("--per-socket measures; --apply PID --weights measures nothing".into())
        }
        Some(s) => match crate::tools::run::parse_weights(s) {
            Ok(w) => Some(w),
            Err(e) => return refuse(e.0),
        },
    };
    opts.probe = forced.is_none();
    let out = flags
        .get("out")
        .unwrap_or("/tmp/tierkit-calibration.json")
        .to_string();
    Ok(Options {
        opts,
        forced,
        optimize,
        apply,
        weights,
        out,
    })
}

/// What the model expects of each weight set (HMAT's `w_hmat`, the
/// measured `w_meas`, the optimized one), per workload: noted, and given
/// for the JSON line.
fn expectations(
    r: &mut Report,
    cal: &Calibration,
    w_hmat: Option<[u8; 64]>,
    w_meas: &[u8; 64],
) -> Vec<serde_json::Value> {
    let mask = cal.mask();
    // What the model expects of each weight set, per workload.
    let regime = cal.regime();
    let mut expect = Vec::new();
    r.note(format!(
        "model ({}): predicted throughput, relative to the best single node",
        regime.name()
    ));
    for w in [Workload::Lookup, Workload::Copy, Workload::Triad] {
        let rates = cal.rates(w);
        let best1 = nodes_of(mask)
            .iter()
            .map(|&n| rates[n as usize])
            .fold(0.0, f64::max);
        let rel = |x: f64| if best1 > 0.0 { x / best1 } else { 0.0 };
        let pred = |t: &[u8; 64]| {
            model::predict(
                regime,
                &rates,
                Nodemask(mask),
                &tierkit_core::interleave::Weights::from_table(*t),
            )
        };
        let rec = cal.recommend(w);
        let ph = w_hmat.map(|t| pred(&t));
        let pm = pred(w_meas);
        r.note(format!(
            "  {:<7} HMAT weights {:>6}  measured weights {:>6}  optimized {:>6} {} {}",
            w.name(),
            ph.map_or("-".into(), |p| format!("{:.3}", rel(p))),
            format!("{:.3}", rel(pm)),
            rec.map_or("-".into(), |c| format!("{:.3}", rel(c.throughput))),
            rec.map_or(String::new(), |c| fmt_mask(c.mask.0)),
            rec.map_or(String::new(), |c| fmt_weights(&pairs(c.mask.0, &c.weights))),
        ));
        expect.push(json!({
            "workload": w.name(),
            "hmat": ph,
            "measured": pm,
            "optimized": rec.map(|c| c.throughput),
            "optimized_nodemask": rec.map(|c| nodes_of(c.mask.0)),
            "optimized_weights": rec.map(|c| pairs(c.mask.0, &c.weights)),
            "unit": if w == Workload::Lookup { "relative to node 0" } else { "MB/s" },
        }));
    }
    expect
}

/// tierkit's bandwidth written (its auto weights checked against the
/// kernel's formula on the measured figures, `w_meas`), and with
/// `optimize` the optimized weights set. Gives those for the JSON line.
fn set_tierkit_weights(
    r: &mut Report,
    tw: &WeightDir,
    cal: &Calibration,
    w_meas: &[u8; 64],
    optimize: Option<Workload>,
) -> serde_json::Value {
    let mask = cal.mask();
    let regime = cal.regime();
    let mut optimized = serde_json::Value::Null;
    let entries = cal.measured_entries();
    let res = tw
        .write_bandwidth(&entries)
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", tw.bandwidth_path().display()))
        .and_then(|_| {
            tw.write_auto_str("true")
                .map_err(|e| anyhow::anyhow!("writing true to auto: {e}"))
        })
        .and_then(|_| tw.table());
    match res {
        Ok(t) => {
            let got = pairs(mask, &t);
            let want = pairs(mask, w_meas);
            r.check_note(
                "tierkit auto weights from the measured bandwidth",
                if got == want {
                    Ok(format!(
                        "{} (bandwidth {})",
                        fmt_weights(&got),
                        entries
                            .iter()
                            .map(|(n, rd, wr)| format!("{n}: {rd}/{wr}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                } else {
                    Err(format!(
                        "tierkit reads {}, the kernel's formula gives {}",
                        fmt_weights(&got),
                        fmt_weights(&want)
                    ))
                },
            );
        }
        Err(e) => {
            r.fail(
                "tierkit auto weights from the measured bandwidth",
                format!("{e:#}"),
            );
        }
    }
    if let Some(w) = optimize {
        match cal.recommend(w) {
            Some(rec) => {
                let p = pairs(rec.mask.0, &rec.weights);
                match tw.set_weights(&p) {
                    Ok(()) => {
                        r.ok_note(
                            &format!("optimized weights for {}", w.name()),
                            format!(
                                "nodemask {} weights {} (predicted {}; pass the nodemask to TK_IOC_SET_POLICY)",
                                fmt_mask(rec.mask.0),
                                fmt_weights(&p),
                                fmt_num(rec.throughput)
                            ),
                        );
                        optimized = json!({
                            "workload": w.name(),
                            "nodemask": nodes_of(rec.mask.0),
                            "weights": p,
                            "predicted": rec.throughput,
                            "regime": regime.name(),
                        });
                    }
                    Err(e) => {
                        r.fail(
                            &format!("optimized weights for {}", w.name()),
                            format!("{e:#}"),
                        );
                    }
                }
            }
            None => {
                r.fail(
                    &format!("optimized weights for {}", w.name()),
                    "no node has a usable figure",
                );
            }
        }
    }
    optimized
}

/// `--apply PID`: gives every tierkit file PID maps `weights` as its own
/// and rebalances it; a failed check (exit status non-zero) with the
/// reason unless every misplaced page moved.
fn apply_to(r: &mut Report, pid: i32, weights: &[(u32, u8)]) {
    use crate::tools::rebalance::{self, fmt_placement};
    let name = format!(
        "rebalance the tierkit mappings of process {pid} to {}",
        fmt_weights(weights)
    );
    let before = rebalance::placement(pid);
    let res = rebalance::apply(pid, rebalance::to_weights(weights));
    let after = rebalance::placement(pid);
    let rep = match res {
        Ok(rep) => rep,
        Err(e) => {
            r.fail(&name, format!("{e}; nothing more moved"));
            return;
        }
    };
    let t = rep.total();
    let (giga, giga_bytes) = rep.gigantic();
    let show = |p: &std::io::Result<std::collections::BTreeMap<u32, u64>>| {
        p.as_ref().map_or_else(|e| e.to_string(), fmt_placement)
    };
    r.set(
        "rebalance",
        json!({
            "pid": pid,
            "weights": weights,
            "files": rep.files.len(),
            "mappings": rep.files.iter().map(|a| a.mappings).sum::<usize>(),
            "bytes": rep.files.iter().map(|a| a.bytes).sum::<u64>(),
            "looked": t.looked,
            "misplaced": t.misplaced,
            "moved": t.moved,
            "no_memory": t.no_memory,
            "busy": t.busy,
            "gigantic_files": giga,
            "gigantic_bytes": giga_bytes,
            "gone_mappings": rep.gone_mappings,
            "elapsed_ms": t.elapsed_ns / 1_000_000,
            "before": before.as_ref().ok(),
            "after": after.as_ref().ok(),
        }),
    );
    let summary = format!(
        "{} file(s) in {} mapping(s): moved {} of {} misplaced pages ({} looked at) in {} ms; \
         mapped pages per node before {}, after {} (a moved page is mapped again at its next touch)",
        rep.files.len(),
        rep.files.iter().map(|a| a.mappings).sum::<usize>(),
        t.moved,
        t.misplaced,
        t.looked,
        t.elapsed_ns / 1_000_000,
        show(&before),
        show(&after)
    );
    let mut why = Vec::new();
    if rep.files.is_empty() {
        why.push(format!(
            "process {pid} maps no /dev/tierkit memory{}",
            if rep.gone_mappings > 0 {
                " any more (its mappings went while they were being taken)"
            } else {
                ""
            }
        ));
    }
    if t.no_memory > 0 {
        why.push(format!(
            "{} page(s) stayed: no free page on the target node",
            t.no_memory
        ));
    }
    if t.busy > 0 {
        why.push(format!(
            "{} page(s) stayed: pinned or referenced (DMA, ptrace)",
            t.busy
        ));
    }
    if t.moved + t.no_memory + t.busy != t.misplaced {
        why.push(format!(
            "moved {} + stayed {} != misplaced {} (stopped early?)",
            t.moved,
            t.no_memory + t.busy,
            t.misplaced
        ));
    }
    if giga > 0 {
        why.push(format!(
            "{giga} gigantic file(s) ({} GiB) stay where they are: tierkit does not move 1 GiB pages",
            giga_bytes >> 30
        ));
    }
    if why.is_empty() {
        r.ok_note(&name, summary);
    } else {
        r.fail(&name, format!("{}; {summary}", why.join("; ")));
    }
}
