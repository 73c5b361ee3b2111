//! What a boot leaves behind: its results files (`results.json`,
//! `junit.xml`, `kcidb.json`), a benchmark's JSON, and what the guest
//! kernel saw.

use anyhow::Result;
use std::path::Path;

use crate::util;
use crate::{boot::qemu, judge::verdict, kernels::profile, report::summary, say};

/// Writes a test boot's `kcidb.json` (validated), `results.json` and
/// `junit.xml`, all from the judge's outcome and facts, which they leave as
/// they are; `Some` problem when the KCIDB file is not valid or could not
/// be written (the report's own, told as such).
pub(super) fn write_test_results(
    run_dir: &Path,
    facts: &crate::judge::facts::Boot,
    outcome: &verdict::Outcome,
) -> Result<Option<String>> {
    let results = run_dir.join("results.json");
    let junit = run_dir.join("junit.xml");
    let kcidb = run_dir.join("kcidb.json");
    let problem =
        crate::report::kcidb::write_boot(&kcidb, facts, &outcome.run, &outcome.user_tests);
    summary::write_json(&results, &outcome.run, &outcome.user_tests)?;
    summary::write_junit(
        &junit,
        &format!("tierkit-{}", facts.run),
        &outcome.run,
        &outcome.user_tests,
    )?;
    say!(
        "results: {}, {} and {}",
        results.display(),
        junit.display(),
        kcidb.display()
    );
    Ok(problem)
}

/// The summary's line for a kernel without KUnit: not a failure.
pub(crate) fn no_kunit_line(k: profile::KernelKind) -> String {
    format!(
        "KUnit: not run on the {k} kernel (CONFIG_KUNIT is off there); tierkit's KUnit suites run on tierkit's own kernels (--kernel tierkit)"
    )
}

/// What the guest kernel saw (its `TIERKIT-TOPO` lines: nodes, memory,
/// CPUs, access0/access1 performance, CXL regions, weighted-interleave
/// weights), and how long the CXL regions took to come online.
pub(super) fn print_guest_view(kind: crate::plan::topology::TopologyKind, m: &verdict::Markers) {
    if m.topology.is_empty() {
        return;
    }
    say!("guest view ({kind}):");
    for l in &m.topology {
        println!("  {l}");
    }
    if let Some(s) = m.cxl_setup_secs() {
        println!("  CXL setup (enumerate, assemble, commit, online): {s:.1} s in the guest");
    }
}

/// Collects the `TIERKIT-JSON` lines of the bench programs into
/// `target/tierkit/bench/<name>.json`.
pub(super) fn write_bench(
    name: &str,
    cfg: &qemu::GuestConfig,
    o: &verdict::Outcome,
    data_log: &Path,
) -> Result<()> {
    let results: Vec<&serde_json::Value> =
        o.markers.progs.iter().flat_map(|p| p.json.iter()).collect();
    let doc = serde_json::json!({
        "bench": name,
        "topology": cfg.topology.kind.to_string(),
        "topology_detail": cfg.topology.describe(),
        "guest_topology": o.markers.topology,
        "cpu_model": cfg.job.cpu_model,
        "accel": format!("{:?}", cfg.accel),
        "programs": o.markers.progs.iter().map(|p| serde_json::json!({"name": p.name, "rc": p.rc})).collect::<Vec<_>>(),
        "results": results,
    });
    let dir = util::out_dir().join("bench");
    let path = dir.join(format!("{name}.json"));
    util::write_atomic(&path, serde_json::to_string_pretty(&doc)?.as_bytes())?;
    say!(
        "bench results: {} ({} JSON records; raw output in {})",
        path.display(),
        results.len(),
        data_log.display()
    );
    Ok(())
}
