//! Host tests of the all-benchmarks report: targets from rows, the files
//! it writes, and notes for missing guest results.

use super::targets::{noise_max, noise_of};
use super::*;

fn row(topo: &str, w: &str, p: &str, m: f64, pred: Option<f64>) -> Value {
    json!({"topology": "guess", "workload": w, "policy": p,
           "unit": if w == "lookup" { "lookups/s" } else { "MB/s" },
           "measured": m, "predicted": pred, "regime": "serial",
           "pages": [[0, 100]], "weights": [[0, 1], [2, 1]], "nodemask": [0, 2],
           "_t": topo})
}

fn doc(topo: &str, good: bool) -> Value {
    let f = if good { 1.0 } else { 0.5 };
    let mut rows = Vec::new();
    for w in MODELLED {
        rows.push(row(topo, w, "local", 1000.0, Some(1000.0)));
        rows.push(row(topo, w, "bind:0", 950.0, Some(1000.0)));
        rows.push(row(topo, w, "bind:2", 10.0, Some(11.0)));
        rows.push(row(topo, w, "kernel-weighted-hmat", 30.0, Some(31.0)));
        rows.push(row(
            topo,
            w,
            "tierkit-auto-measured",
            300.0 * f,
            Some(290.0),
        ));
        rows.push(row(topo, w, "tierkit-optimized", 950.0 * f, Some(1000.0)));
    }
    rows.push(
        json!({"topology": topo, "workload": "fault", "policy": "local", "unit": "faults/s",
        "measured": 1e5, "predicted": null, "regime": "serial", "variant": "page_fault2",
        "by_threads": [[1, 6e4], [2, 1e5]], "pages": [[0, 4096]]}),
    );
    for (v, p, m) in [
        ("tierkit-mmap", "tierkit-weighted-hmat", 1.2e5),
        ("page-by-page", "kernel-weighted-hmat", 9e4),
        ("map-populate", "kernel-weighted-hmat", 1.1e5),
    ] {
        rows.push(
            json!({"topology": topo, "workload": "fault", "policy": p, "unit": "pages/s",
            "measured": m, "predicted": null, "regime": "serial", "variant": v}),
        );
    }
    json!({
        "bench": "all", "topology": topo, "accel": "Tcg", "cpu_model": "max",
        "topology_detail": "node0 ...", "guest_topology": ["node0 cpus=0-1"],
        "results": [
            {"bin": "tk-calibrate", "ok": true, "calibration": {"regime": "serial", "nodes": [
                {"nid": 0, "kind": "dram", "threads": 2, "read_mbps": 3150.0, "write_mbps": 13200.0,
                 "triad_mbps": 4000.0, "latency_ns": 235.0,
                 "hmat": {"read_mbps": 20480, "write_mbps": 20480, "read_latency_ns": 100, "source": "node0 access1"}},
                {"nid": 2, "kind": "cxl", "threads": 2, "read_mbps": 30.0, "write_mbps": 50.0,
                 "copy_mbps": 31.0, "scale_mbps": 32.0, "add_mbps": 33.0,
                 "triad_mbps": 35.0, "latency_ns": 571.0, "hmat": null}],
                "probe": {"pattern": [[0, 100], [2, 1]], "pages": [[0, 6000], [2, 60]],
                          "measured_mbps": 1500.0, "serial_mbps": 1480.0, "parallel_mbps": 3000.0,
                          "regime": "serial"}},
             "weights": {"hmat": [[0, 21], [2, 10]], "measured": [[0, 31], [2, 1]]}},
            {"bin": "tk-workload", "ok": true, "rows": rows, "optimized": []},
            {"bin": "tk-bench-all", "ok": true, "checks": [
                {"name": "tk-bench-clear", "status": "skip", "detail": "CXL topology"}],
             "programs": [{"name": "tk-workload", "rc": 0, "seconds": 60.0}]},
            {"bin": "tk-bench-wi", "ok": true, "mib": 64, "reps": 5, "results": [
                {"variant": "tierkit", "name": "tierkit mmap", "pages_per_s_median": 1e5,
                 "pages_per_s_best": 1.1e5, "tierkit_over_this": 1.0}]},
            {"bin": "tk-bench-gigantic", "ok": true, "reps": 5, "ratios": [], "rows": [
                {"nid": 0, "kind": "dram", "variant": "tierkit", "threads": 1,
                 "median_ns": 230_000_000u64, "samples_ns": [230_000_000u64]},
                {"nid": 0, "kind": "dram", "variant": "tierkit", "threads": 2,
                 "median_ns": 124_000_000u64, "samples_ns": [124_000_000u64]},
                {"nid": 0, "kind": "dram", "variant": "hugetlb", "threads": 1,
                 "median_ns": 233_000_000u64, "samples_ns": [233_000_000u64]}],
             "skipped": [{"nid": 2, "kind": "cxl", "variant": "hugetlb", "reason": "no free GiB"}]},
        ],
    })
}

fn runs(good: bool) -> Vec<TopoRun> {
    ["numa", "cxl"]
        .iter()
        .map(|t| TopoRun {
            topology: t.to_string(),
            ok: true,
            seconds: 100.0,
            doc: Some(doc(t, good)),
        })
        .collect()
}

#[test]
fn targets_from_rows() {
    let rep = Report::build(&runs(true), &RunMeta::default());
    // Accuracy: bind:2 is 10% off, the rest within.
    let acc: Vec<&Target> = rep
        .targets
        .iter()
        .filter(|t| t.target == "model accuracy")
        .collect();
    assert_eq!(acc.len(), 10);
    assert!(acc.iter().all(|t| t.met == Some(true)), "{acc:?}");
    assert!((acc[0].value.unwrap() - 0.1).abs() < 1e-9);
    // Calibration pays on cxl only: 300 / 30 = 10.
    let pays: Vec<&Target> = rep
        .targets
        .iter()
        .filter(|t| t.target == "calibration pays")
        .collect();
    assert_eq!(pays.len(), 5);
    assert!(pays
        .iter()
        .all(|t| t.topology == "cxl" && t.met == Some(true)));
    assert!((pays[0].value.unwrap() - 10.0).abs() < 1e-9);
    // Optimized: 950 / 1000.
    let opt = rep
        .targets
        .iter()
        .find(|t| t.target == "optimized weights")
        .unwrap();
    assert!((opt.value.unwrap() - 0.95).abs() < 1e-9);
    assert_eq!(rep.target_counts(), (25, 0, 0));
    let n = noise_of(&rep.topos[0].rows);
    assert_eq!(n.len(), 5);
    assert!((n[0].3 - 1000.0 / 950.0).abs() < 1e-12);
    assert!((noise_max(&rep.topos[0].rows).unwrap() - 50.0 / 950.0).abs() < 1e-9);

    // Worse figures are reported as missed, not hidden.
    let rep = Report::build(&runs(false), &RunMeta::default());
    let (met, missed, _) = rep.target_counts();
    assert!(missed > 0 && met > 0);
    let opt = rep
        .targets
        .iter()
        .find(|t| t.target == "optimized weights")
        .unwrap();
    assert_eq!(opt.met, Some(false));
    let acc = rep
        .targets
        .iter()
        .find(|t| t.target == "model accuracy")
        .unwrap();
    assert_eq!(acc.met, Some(false));
    assert!(
        acc.detail.contains("worst tierkit-optimized"),
        "{}",
        acc.detail
    );
}

#[test]
fn writes_the_report() {
    let dir = std::env::temp_dir().join(format!("xtask-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let rep = Report::build(&runs(true), &RunMeta::default());
    rep.write(&dir).unwrap();
    let j: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let rows = j["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2 * (30 + 4));
    // Topology from the boot, not the guest's guess; null predictions.
    assert!(rows
        .iter()
        .all(|r| r["topology"] == "numa" || r["topology"] == "cxl"));
    assert!(rows
        .iter()
        .filter(|r| r["workload"] == "fault")
        .all(|r| r["predicted"].is_null()));
    for k in [
        "topology",
        "workload",
        "policy",
        "unit",
        "measured",
        "predicted",
        "regime",
    ] {
        assert!(rows.iter().all(|r| r.get(k).is_some()), "{k}");
    }
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for want in [
        "## Targets",
        "## Topology `cxl`",
        "| 2 | cxl | 2 | 30 | 50 | 31 | 32 | 33 | 35 | 571 | - | - | - | 10 | 1 |",
        "| tierkit-optimized | 0:100 | 950 / 1000 (+5%)",
        "Regime probe",
        "| tierkit-mmap | tierkit-weighted-hmat | 120000 | 1.00 |",
        "| local | 0:4096 | 60000 | 100000 |",
        "### Gigantic pages at first touch (`tk-bench-gigantic`)",
        "![gigantic](gigantic-cxl.svg)",
    ] {
        assert!(md.contains(want), "no {want:?} in\n{md}");
    }
    for f in [
        "cxl-lookup.svg",
        "numa-triad.svg",
        "model-cxl.svg",
        "cxl-fault.svg",
        "wi-cxl.svg",
        "gigantic-numa.svg",
    ] {
        let s = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(
            s.starts_with("<svg") && s.trim_end().ends_with("</svg>"),
            "{f}"
        );
    }
    let lines = rep.summary_lines().join("\n");
    assert!(
        lines.contains("targets: 25 met, 0 missed, 0 not checked"),
        "{lines}"
    );
    assert!(
        lines.contains("noise floor (identical placements, same run): lookup local/bind:0"),
        "{lines}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn missing_guest_results_are_notes() {
    let rep = Report::build(
        &[TopoRun {
            topology: "cxl".into(),
            ok: false,
            seconds: 1.0,
            doc: None,
        }],
        &RunMeta::default(),
    );
    assert!(rep.summary_lines().join("\n").contains("no results"));
    assert!(rep.targets.iter().all(|t| t.met.is_none()));
}
