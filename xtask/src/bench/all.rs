//! `cargo xtask bench` with no name: every benchmark, one boot per
//! topology, and the report ([`super::report_all`]).

use anyhow::Result;
use serde_json::Value;
use std::process::ExitCode;

use super::report_all::{Report, RunMeta, TopoRun};
use crate::qemu::Mode;
use crate::topology::TopologyKind;
use crate::util::{fmt_dur, Timer};
use crate::{say, util};

/// The guest mode (`bench-all`, `/bin/tk-bench-all`) and the name of its
/// results file, `target/tierkit/bench/all.json`.
pub const ALL: &str = "all";

/// The topologies `cargo xtask bench` boots without `--topology`.
const REPORT_TOPOLOGIES: [TopologyKind; 2] = [TopologyKind::NUMA, TopologyKind::CXL];

/// `cargo xtask bench` with no name.
pub(crate) fn run_all(g: &crate::cli::GuestArgs) -> Result<ExitCode> {
    let kinds = all_kinds(g);
    let total = Timer::start();
    let load_before = loadavg();
    let report_dir = util::out_dir().join("report");
    std::fs::create_dir_all(&report_dir)?;
    let bench_json = util::out_dir().join("bench").join(format!("{ALL}.json"));
    let mut runs = Vec::new();
    for (i, &kind) in kinds.iter().enumerate() {
        println!();
        say!(
            "===== bench: topology {kind} ({}/{}) =====",
            i + 1,
            kinds.len()
        );
        let _ = std::fs::remove_file(&bench_json);
        let t = Timer::start();
        let label = kind.to_string();
        let mut req = all_request(g, kind);
        req.label = Some(label);
        let ok = match crate::guest::guest_cmd(g, req) {
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
/// [`REPORT_TOPOLOGIES`].
pub(crate) fn all_kinds(g: &crate::cli::GuestArgs) -> Vec<TopologyKind> {
    match g.topology {
        Some(k) => vec![k],
        None => REPORT_TOPOLOGIES.to_vec(),
    }
}

/// The boot of `bench` without a name on `kind` (default profile).
pub(crate) fn all_request(
    g: &crate::cli::GuestArgs,
    kind: TopologyKind,
) -> crate::guest::GuestRequest {
    let mut req = crate::guest::GuestRequest::new(
        Mode::Bench(ALL.into()),
        g,
        crate::profile::Profile::Default,
        kind,
        false,
    );
    req.cxl_opts_on_cxl_only = g.topology.is_none();
    req
}

/// `/proc/loadavg`'s first three figures.
fn loadavg() -> Option<String> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}
