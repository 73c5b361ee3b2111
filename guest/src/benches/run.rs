//! The logic of `tk-bench-run`; what it does and how it is used are the doc of
//! `src/bin/tk-bench-run.rs` (its `--help`).

use crate::abi::first_use::{BootPool, HugePage};
use crate::harness::report::Report;
use crate::tools::run::check::{
    agreement, backing, blocks, page_nodes, run, start, CHECK, NUMACTL, STREAM, TK_RUN,
};
use crate::tools::run::CALIBRATION_PATH;
use crate::tools::workload::Flags;
use crate::topology::weights::WeightDir;
use crate::{abi::pool, topology::interleave::weight_table, topology::node::Topology};
use serde_json::{json, Value};
use std::path::Path;
use std::process::ExitCode;

const BIN: &str = "tk-bench-run";
/// The least relative difference between tk-run's and numactl's best
/// triad that counts as noise: alternating repeats of one run on this
/// 2-CPU TCG guest differed by up to 12% (Documentation/results/tk-run.md).
const NOISE_FLOOR: f64 = 0.15;
/// The placement rows' names that are compared.
const NUMACTL_RUN: &str = "numactl --weighted-interleave (global weights)";
const TKRUN_RUN: &str = "tk-run --weights (the same weights)";

/// 1 GiB less one page: glibc's chunk header then fits in one 1 GiB page.
const FIRST_USE_BYTES: &str = "1073737728";
/// tk-run's rows malloc a whole GiB: the library takes chunks of 1 GiB or
/// more as gigantic pages; 1 GiB less a page would be glibc's own chunk
/// (the kernel's memory), as it was in the runs before 5 December 2026.
const TKRUN_FIRST_USE_BYTES: &str = "1073741824";

/// One triad run: the arrays' pages against the rule for `w`, and MB/s.
fn triad(r: &mut Report, name: &str, argv: &[&str], thp_off: bool, w: &[(u32, u8)]) -> Value {
    let h = match start(argv, thp_off) {
        Ok(h) => h,
        Err(e) => {
            r.fail(name, e.to_string());
            return json!({"run": name, "error": e.to_string()});
        }
    };
    let (mut agree, mut pages) = (0, 0);
    let mask = w.iter().fold(0u64, |m, (n, _)| m | 1 << n);
    for (_, addr, bytes) in blocks(&h.lines, "array") {
        if let Ok(nodes) = page_nodes(h.pid(), addr, bytes) {
            let (a, n, _) = agreement(&nodes, addr, mask, &weight_table(w));
            agree += a;
            pages += n;
        }
    }
    let mbps: f64 = h
        .lines
        .iter()
        .find_map(|l| {
            l.strip_prefix("triad ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0.0);
    let (code, err) = h.finish();
    let ws = w
        .iter()
        .map(|(n, w)| format!("{n}:{w}"))
        .collect::<Vec<_>>()
        .join(",");
    if code == 0 && pages > 0 && agree == pages {
        r.ok_note(
            name,
            format!("weights {ws}: {agree}/{pages} pages as the rule, {mbps:.0} MB/s"),
        );
    } else if code == 0 && pages > 0 {
        r.fail(
            name,
            format!("weights {ws}: only {agree}/{pages} pages where the rule puts them"),
        );
    } else {
        r.fail(name, format!("exit {code}, {pages} pages, stderr {err:?}"));
    }
    json!({"run": name, "weights": ws, "agree": agree, "pages": pages, "mbps": mbps, "rc": code})
}

/// Keeps, per run name, the row with the best MB/s, and every run's MB/s
/// in `samples`.
fn keep_best(rows: &mut Vec<Value>, mut row: Value) {
    let mbps = |v: &Value| v.get("mbps").and_then(Value::as_f64).unwrap_or(0.0);
    match rows.iter_mut().find(|x| x["run"] == row["run"]) {
        Some(old) => {
            let mut samples = old["samples"].as_array().cloned().unwrap_or_default();
            samples.push(json!(mbps(&row)));
            if mbps(&row) > mbps(old) {
                *old = row;
            }
            old["samples"] = json!(samples);
        }
        None => {
            row["samples"] = json!([mbps(&row)]);
            rows.push(row);
        }
    }
}

/// (max - min) / max of a row's samples: the run's own noise.
fn spread(row: &Value) -> f64 {
    let s: Vec<f64> = row["samples"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    let max = s.iter().copied().fold(0.0, f64::max);
    let min = s.iter().copied().fold(f64::INFINITY, f64::min);
    if max > 0.0 {
        (max - min) / max
    } else {
        0.0
    }
}

/// tk-run's best triad against numactl's with the same weights: within
/// the noise (the larger of both runs' spread and [`NOISE_FLOOR`]). The
/// ratio goes into tk-run's row (`vs_numactl`, `noise`).
fn same_throughput(r: &mut Report, rows: &mut [Value]) {
    let find = |rows: &[Value], name: &str| rows.iter().position(|x| x["run"] == name);
    let (Some(n), Some(t)) = (find(rows, NUMACTL_RUN), find(rows, TKRUN_RUN)) else {
        r.skip(
            "tk-run --weights: triad within noise of numactl's",
            "no numactl or no tk-run row",
        );
        return;
    };
    let mbps = |v: &Value| v.get("mbps").and_then(Value::as_f64).unwrap_or(0.0);
    let (nm, tm) = (mbps(&rows[n]), mbps(&rows[t]));
    let noise = spread(&rows[n]).max(spread(&rows[t])).max(NOISE_FLOOR);
    let ratio = if nm > 0.0 { tm / nm } else { 0.0 };
    rows[t]["vs_numactl"] = json!(ratio);
    rows[t]["noise"] = json!(noise);
    let what = format!(
        "tk-run {tm:.0} MB/s, numactl {nm:.0} MB/s: ratio {ratio:.3}, noise {:.0}%",
        noise * 100.0
    );
    r.check_note(
        "tk-run --weights: triad within noise of numactl's",
        // Inclusive: tk-run's best equal to numactl's worst sample is a
        // difference of exactly numactl's spread (1e-9 for the rounding).
        if (ratio - 1.0).abs() <= noise + 1e-9 {
            Ok(what)
        } else {
            Err(what)
        },
    );
}

/// [`placement_once`] `repeat` times, alternating the runs (so that a
/// change of the host's load hits all of them), the best of each kept.
fn placement(r: &mut Report, topo: &Topology, n: &str, rounds: &str, repeat: usize) -> Vec<Value> {
    let mut rows = Vec::new();
    for _ in 0..repeat.max(1) {
        for row in placement_once(r, topo, n, rounds) {
            keep_best(&mut rows, row);
        }
    }
    rows
}

fn placement_once(r: &mut Report, topo: &Topology, n: &str, rounds: &str) -> Vec<Value> {
    let mut rows = Vec::new();
    let stream = [STREAM, "-n", n, "-r", rounds, "-w"];
    let kernel = WeightDir::kernel().and_then(|k| k.snapshot().ok());
    let Some(k) = kernel else {
        r.skip("placement", "no kernel weighted_interleave directory");
        return rows;
    };
    let w: Vec<(u32, u8)> = k
        .weights
        .iter()
        .copied()
        .filter(|(n, _)| topo.memory.contains(n))
        .collect();
    let nodes = w
        .iter()
        .map(|(n, _)| n.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let auto = if k.auto == Some(true) {
        "kernel auto (HMAT)"
    } else {
        "kernel manual"
    };
    if Path::new(NUMACTL).exists() {
        let flag = format!("--weighted-interleave={nodes}");
        let mut argv = vec![NUMACTL, flag.as_str()];
        argv.extend_from_slice(&stream);
        let mut row = triad(r, NUMACTL_RUN, &argv, true, &w);
        row["source"] = json!(auto);
        rows.push(row);
    } else {
        r.skip("numactl --weighted-interleave", "no numactl in the guest");
    }
    let ws = w
        .iter()
        .map(|(n, w)| format!("{n}:{w}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut argv = vec![TK_RUN, "--weights", ws.as_str(), "--"];
    argv.extend_from_slice(&stream);
    let mut row = triad(r, TKRUN_RUN, &argv, false, &w);
    row["source"] = json!(auto);
    rows.push(row);
    if Path::new(CALIBRATION_PATH).exists() {
        let mw = measured_weights(topo);
        let mut argv = vec![TK_RUN, "--weights", "measured", "--"];
        argv.extend_from_slice(&stream);
        let mut row = triad(r, "tk-run --weights measured", &argv, false, &mw);
        row["source"] = json!("tk-calibrate");
        rows.push(row);
    } else {
        r.skip("tk-run --weights measured", "no tk-calibrate result");
    }
    rows
}

/// The weights `tk-run --weights measured` resolves to.
fn measured_weights(topo: &Topology) -> Vec<(u32, u8)> {
    let a = crate::tools::run::Args::parse(["--weights", "measured", "--", "x"].map(String::from));
    a.ok()
        .and_then(|a| crate::tools::run::resolve(&a, topo, 0).ok())
        .map(|r| r.weights)
        .unwrap_or_default()
}

/// One `tk-stream -f` run: its first-use time in ms.
fn first_use_run(r: &mut Report, name: &str, argv: &[&str], env: &[(&str, &str)]) -> Value {
    let out = std::process::Command::new(argv[0])
        .args(&argv[1..])
        .envs(env.iter().copied())
        .output();
    let res = out.map_err(|e| e.to_string()).and_then(|o| {
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let ns: f64 = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("first-use ")?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .ok_or_else(|| {
                format!(
                    "{:?}, stderr {:?}",
                    text,
                    String::from_utf8_lossy(&o.stderr)
                )
            })?;
        // "first-use NS ns BYTES bytes ADDR"
        let addr = text
            .lines()
            .find_map(|l| l.strip_prefix("first-use ")?.split_whitespace().nth(4))
            .unwrap_or("")
            .to_string();
        Ok((
            ns / 1e6,
            String::from_utf8_lossy(&o.stderr).into_owned(),
            addr,
        ))
    });
    match res {
        Ok((ms, err, addr)) => {
            r.ok_note(name, format!("{ms:.1} ms"));
            json!({"run": name, "ms": ms, "stderr": err.trim(), "addr": addr})
        }
        Err(e) => {
            r.fail(name, e.clone());
            json!({"run": name, "error": e})
        }
    }
}

fn first_use(r: &mut Report, topo: &Topology) -> Vec<Value> {
    let nid = topo.dram_node().unwrap_or(0);
    let prog = [STREAM, "-f", FIRST_USE_BYTES];
    let mut rows = vec![first_use_run(r, "kernel 4 KiB pages", &prog, &[])];
    match HugePage::get(nid) {
        Ok(_hp) => {
            let before = hugetlb_free(nid);
            let name = "hugetlb 1 GiB pages (glibc.malloc.hugetlb)";
            let mut row = hugetlb_run(r, name, nid);
            row["note"] = json!(format!(
                "node {nid}: free 1 GiB hugetlb pages {before:?} before, {} while held",
                row["held_free"]
            ));
            rows.push(row);
        }
        Err(e) => {
            r.skip("hugetlb 1 GiB pages", e);
        }
    }
    let _boot = BootPool::release(nid);
    let prog = [STREAM, "-f", TKRUN_FIRST_USE_BYTES];
    let mut argv = vec![TK_RUN, "--gigantic", "--"];
    argv.extend_from_slice(&prog);
    let name = "tk-run --gigantic (workers at first touch)";
    let row = first_use_run(r, name, &argv, &[]);
    gigantic_chunk(r, name, &row);
    rows.push(row);
    let mut argv = vec![TK_RUN, "--gigantic", "--pool", "1", "--"];
    argv.extend_from_slice(&prog);
    let taken0 = pool_taken();
    let mut row = first_use_run(r, "tk-run --gigantic --pool 1 (pre-cleared)", &argv, &[]);
    gigantic_chunk(r, "tk-run --gigantic --pool 1 (pre-cleared)", &row);
    // The row is the pool's only if its first touch took the ready range.
    let name = "tk-run --gigantic --pool 1: the first touch took the pre-cleared GiB";
    match (taken0, pool_taken()) {
        (Some(a), Some(b)) if b == a + 1 => {
            r.ok_note(name, format!("gigantic_pool_taken {a} -> {b}"));
        }
        (a, b) => {
            r.fail(name, format!("gigantic_pool_taken {a:?} -> {b:?}"));
        }
    }
    row["pool_taken"] = json!(pool_taken().zip(taken0).map(|(b, a)| b.saturating_sub(a)));
    rows.push(row);
    let _ = pool::set_target(nid, 0);
    rows
}

/// `tk-stream -f` with glibc's hugetlb tunable, held until the free 1 GiB
/// hugetlb pages of `nid` were read: one fewer shows that glibc took one
/// (it falls back to 4 KiB pages silently). Not using one is a failure.
fn hugetlb_run(r: &mut Report, name: &str, nid: u32) -> Value {
    let before = hugetlb_free(nid);
    std::env::set_var("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1073741824");
    let h = start(&[STREAM, "-f", FIRST_USE_BYTES, "-w"], false);
    std::env::remove_var("GLIBC_TUNABLES");
    let h = match h {
        Ok(h) => h,
        Err(e) => {
            r.fail(name, e.to_string());
            return json!({"run": name, "error": e.to_string()});
        }
    };
    let held = hugetlb_free(nid);
    let ns: Option<f64> = h.lines.iter().find_map(|l| {
        l.strip_prefix("first-use ")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    });
    let (code, err) = h.finish();
    let used = matches!((before, held), (Some(b), Some(h)) if h + 1 == b);
    match ns {
        Some(ns) if code == 0 && used => {
            r.ok_note(name, format!("{:.1} ms", ns / 1e6));
            json!({"run": name, "ms": ns / 1e6, "held_free": held})
        }
        _ => {
            let e =
                format!("exit {code}, free hugetlb pages {before:?} -> {held:?}, stderr {err:?}");
            r.fail(name, e.clone());
            json!({"run": name, "error": e, "held_free": held})
        }
    }
}

/// A tk-run row's chunk must be tierkit's gigantic range: GiB aligned
/// (glibc's own chunks start 16 bytes into their mapping).
fn gigantic_chunk(r: &mut Report, name: &str, row: &Value) {
    let addr = row["addr"].as_str().unwrap_or("");
    let a = usize::from_str_radix(addr.trim_start_matches("0x"), 16).ok();
    let check = format!("{name}: the chunk is a gigantic range (GiB aligned)");
    match a {
        Some(a) if a % (1 << 30) == 0 => r.ok_note(&check, addr.to_string()),
        _ => r.fail(
            &check,
            format!("chunk at {addr:?}: not tierkit's gigantic range"),
        ),
    };
}

/// tierkit's `gigantic_pool_taken` (first touches served from the pool).
fn pool_taken() -> Option<u64> {
    let l = crate::linux::vma::read_limits().ok()?;
    crate::linux::vma::limit(&l, "gigantic_pool_taken")
}

fn hugetlb_free(nid: u32) -> Option<u64> {
    std::fs::read_to_string(format!(
        "/sys/devices/system/node/node{nid}/hugepages/hugepages-1048576kB/free_hugepages"
    ))
    .ok()?
    .trim()
    .parse()
    .ok()
}

/// The `fork` rows: `tkrun-check -f MIB` without and under tk-run on the
/// first memory node.
fn fork_rows(r: &mut Report, topo: &Topology, mib: &str) -> Vec<Value> {
    let Some(node) = topo.memory.first() else {
        r.skip("fork", "no node with memory");
        return Vec::new();
    };
    let w = format!("{node}:1");
    let runs: [(&str, Vec<&str>, &str); 2] = [
        ("kernel's memory", vec![CHECK, "-f", mib], "[anon]"),
        (
            "tk-run",
            vec![TK_RUN, "--weights", w.as_str(), "--", CHECK, "-f", mib],
            crate::abi::tk::DEV_PATH,
        ),
    ];
    let mut rows = Vec::new();
    for (name, argv, want) in runs {
        let name = format!("fork with {mib} MiB written: {name}");
        let (code, out, err) = match run(&argv) {
            Ok(x) => x,
            Err(e) => {
                r.fail(&name, e.to_string());
                continue;
            }
        };
        let lines: Vec<String> = out.lines().map(String::from).collect();
        let field = |k: &str| -> Option<f64> {
            lines
                .iter()
                .find_map(|l| l.strip_prefix(k)?.trim().parse().ok())
        };
        let got = backing(&lines, "fork-cost").unwrap_or("(no line)");
        let row = json!({
            "run": name,
            "mib": mib,
            "backing": got,
            "fork_ms": field("fork_ms "),
            "fork_exit_ms": field("fork_exit_ms "),
            "child_kib": field("fork_child_kib "),
            "rss_kib": field("fork_rss_kib "),
            "child_rss_kib": field("fork_child_rss_kib "),
        });
        r.check_note(
            &name,
            if code == 0 && got == want && field("fork_ms ").is_some() {
                Ok(format!("{row}"))
            } else {
                Err(format!(
                    "exit {code}, block backed by {got}, stderr {err:?}"
                ))
            },
        );
        rows.push(row);
    }
    rows
}

pub fn main() -> ExitCode {
    let flags = match Flags::from_args(
        BIN,
        &["no-first-use", "fork-only"],
        &[
            "elements",
            "rounds",
            "repeat",
            "no-first-use",
            "fork-only",
            "fork-mib",
        ],
    ) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let mut r = Report::new(BIN, "bench");
    let Some(topo) = crate::abi::ready::tierkit_ready(&mut r) else {
        return r.finish();
    };
    let n = flags.get("elements").unwrap_or("2097152").to_string();
    let rounds = flags.get("rounds").unwrap_or("3").to_string();
    let repeat: usize = flags
        .get("repeat")
        .and_then(|x| x.parse().ok())
        .unwrap_or(2);
    if !flags.has("fork-only") {
        let mut rows = placement(&mut r, &topo, &n, &rounds, repeat);
        same_throughput(&mut r, &mut rows);
        r.set("placement", json!(rows));
    }
    if !flags.has("no-first-use") && !flags.has("fork-only") {
        let rows = first_use(&mut r, &topo);
        r.set("first_use", json!(rows));
    }
    let mib = flags.get("fork-mib").unwrap_or("4096").to_string();
    if mib != "0" {
        let rows = fork_rows(&mut r, &topo, &mib);
        r.set("fork", json!(rows));
    }
    r.finish()
}
