//! `cargo xtask bench`: one benchmark (one boot), or with no name every
//! benchmark, one boot per topology, and the report
//! ([`crate::report::bench::Report`]).

use anyhow::Result;
use serde_json::Value;
use std::process::ExitCode;

use crate::boot::{self, BootRequest};
use crate::plan::topology::TopologyKind;
use crate::report::bench::{Report, RunMeta, TopoRun, ALL};
use crate::util::{fmt_dur, Timer};
use crate::{say, util};

/// The topologies `cargo xtask bench` boots without `--topology`.
const REPORT_TOPOLOGIES: [TopologyKind; 2] = [TopologyKind::NUMA, TopologyKind::CXL];

/// `cargo xtask bench` as asked.
pub enum BenchRequest {
    /// `bench <name>`: one boot.
    One(Box<BootRequest>),
    /// `bench`: every benchmark, a boot per topology, and the report.
    All(Vec<BootRequest>),
}

/// `cargo xtask bench`.
pub(crate) fn run(b: BenchRequest) -> Result<ExitCode> {
    match b {
        BenchRequest::One(req) => boot::run(*req).map(|g| g.exit()),
        BenchRequest::All(boots) => run_all(boots),
    }
}

/// `cargo xtask bench` with no name.
fn run_all(boots: Vec<BootRequest>) -> Result<ExitCode> {
    let total = Timer::start();
    let load_before = loadavg();
    let report_dir = util::out_dir().join("report");
    std::fs::create_dir_all(&report_dir)?;
    let bench_json = util::out_dir().join("bench").join(format!("{ALL}.json"));
    let mut runs = Vec::new();
    let n = boots.len();
    for (i, mut req) in boots.into_iter().enumerate() {
        let kind = req.kind();
        println!();
        say!("===== bench: topology {kind} ({}/{n}) =====", i + 1);
        let _ = std::fs::remove_file(&bench_json);
        let t = Timer::start();
        req.label = Some(kind.to_string());
        let ok = match boot::run(req) {
            Ok(r) => r.ok,
            Err(e) => {
                eprintln!("\nerror ({kind}): {e:#}");
                false
            }
        };
        let secs = t.elapsed().as_secs_f64();
        let doc = std::fs::read_to_string(&bench_json)
            .ok()
            .and_then(|s| serde_json::from_str::<Value>(&s).ok());
        if let Some(d) = &doc {
            util::write_atomic(
                &report_dir.join(format!("raw-{kind}.json")),
                serde_json::to_string_pretty(d)?.as_bytes(),
            )?;
        }
        runs.push(TopoRun {
            topology: kind.to_string(),
            ok,
            seconds: secs,
            doc,
        });
    }
    let meta = RunMeta {
        seconds: total.elapsed().as_secs_f64(),
        load_before,
        load_after: loadavg(),
    };
    let rep = Report::build(&runs, &meta);
    rep.write(&report_dir)?;
    println!();
    for l in rep.summary_lines() {
        println!("{l}");
    }
    say!("report: {}", report_dir.join("report.md").display());
    let ok = runs.iter().all(|r| r.ok);
    println!(
        "tierkit bench: {} ({} topolog{}, {})",
        if ok { "ok" } else { "FAILED" },
        runs.len(),
        if runs.len() == 1 { "y" } else { "ies" },
        fmt_dur(total.elapsed())
    );
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The topologies `bench` without a name boots: `--topology`'s, or
/// `REPORT_TOPOLOGIES` (numa, cxl).
pub fn all_kinds(topology: Option<TopologyKind>) -> Vec<TopologyKind> {
    match topology {
        Some(k) => vec![k],
        None => REPORT_TOPOLOGIES.to_vec(),
    }
}

/// `/proc/loadavg`'s first three figures.
fn loadavg() -> Option<String> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}
