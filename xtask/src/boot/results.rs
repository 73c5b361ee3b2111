//! What a boot leaves behind: its results files (`results.json`,
//! `junit.xml`, `kcidb.json`), a benchmark's JSON, and what the guest
//! kernel saw.

use anyhow::Result;
use std::path::Path;
use std::time::Duration;

use crate::util;
use crate::{boot::qemu, judge::verdict, kernels::kernel, kernels::profile, report::summary, say};

/// Writes a test boot's `kcidb.json` (validated: an invalid one is a
/// `[harness] kcidb` failure of the boot), `results.json` and `junit.xml`.
pub(super) fn write_test_results(
    run_dir: &Path,
    boot: &crate::report::kcidb::Boot,
    outcome: &mut verdict::Outcome,
) -> Result<()> {
    let results = run_dir.join("results.json");
    let junit = run_dir.join("junit.xml");
    let kcidb = run_dir.join("kcidb.json");
    if let Some(f) =
        crate::report::kcidb::write_boot(&kcidb, boot, &outcome.run, &outcome.user_tests)
    {
        outcome.reasons.push(f.output_tail.clone());
        outcome.user_tests.push(f);
    }
    summary::write_json(&results, &outcome.run, &outcome.user_tests)?;
    summary::write_junit(
        &junit,
        &format!("tierkit-{}", boot.run),
        &outcome.run,
        &outcome.user_tests,
    )?;
    say!(
        "results: {}, {} and {}",
        results.display(),
        junit.display(),
        kcidb.display()
    );
    Ok(())
}

/// The boot as its KCIDB file tells it (`run_dir` named `test-<job>`).
pub(super) fn kcidb_boot(
    run_dir: &Path,
    run: &str,
    cfg: &qemu::GuestConfig,
    kb: &kernel::KernelBuild,
    start_time: String,
    boot_time: Duration,
) -> crate::report::kcidb::Boot {
    crate::report::kcidb::Boot {
        job: run_dir
            .file_name()
            .and_then(|n| n.to_str())
            .map_or("", |n| n.trim_start_matches("test-"))
            .to_string(),
        run: run.to_string(),
        profile: cfg.kernel.profile,
        kernel: cfg.kernel.kind,
        topology: cfg.topology.kind.name().to_string(),
        topology_detail: cfg.topology.describe(),
        accel: format!("{:?}", cfg.accel).to_lowercase(),
        kernel_source: crate::report::kcidb::KernelSource {
            name: match cfg.kernel.kind {
                profile::KernelKind::Debian => format!("Debian linux-image-{}", kb.version),
                _ => kb
                    .src
                    .file_name()
                    .map_or("linux".into(), |n| n.to_string_lossy().into_owned()),
            },
            version: kb.version.clone(),
        },
        kernel_key: kb.key.clone(),
        start_time,
        duration_secs: boot_time.as_secs_f64(),
    }
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
