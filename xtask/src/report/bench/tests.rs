//! Host tests of `bench <name>`: the charts and summaries of clear, wi
//! and gigantic from sample documents, and `finish` writing them.

use super::chart::wrap;
use super::*;
use serde_json::json;

fn clear_doc() -> Value {
    let row = |nid: u32, kind: &str, place: &str, t: u32, tk: u64, ms: u64| {
        json!({
            "nid": nid, "kind": kind, "placement": place, "threads": t, "workers": t,
            "cpu_node": 0, "elapsed_ns": (1u64 << 30) * 1000 / tk, "bytes": 1u64 << 30,
            "tierkit_mbps": tk, "memset_mbps": ms, "store_loop_mbps": 6500,
            "tierkit_speedup": if t == 1 { 1.0 } else { 1.58 },
            "memset_speedup": if t == 1 { 1.0 } else { 1.18 },
            "tierkit_over_memset": tk as f64 / ms as f64,
            "speedup_fraction_of_memset": if t == 1 { 1.0 } else { 1.34 },
        })
    };
    json!({
        "bench": "clear", "accel": "Tcg", "cpu_model": "max", "topology": "numa",
        "topology_detail": "node0: 2 CPUs + 6G, node1: 3G memory-only",
        "results": [{
            "bin": "tk-bench-clear", "kind": "bench", "ok": true, "checks": [],
            "variant": "erms", "nr_gigantic": 1,
            "rows": [
                row(0, "dram", "local", 1, 610, 530),
                row(0, "dram", "local", 2, 960, 620),
                row(0, "dram", "remote", 1, 520, 530),
                row(1, "cxl", "local", 1, 490, 550),
                row(1, "cxl", "local", 2, 820, 660),
            ],
            "kernel_serial": [
                {"nid": 0, "kind": "dram", "elapsed_ns": 1_760_000_000u64, "mbps": 610, "source": "reserved at runtime"},
                {"nid": 1, "kind": "cxl", "elapsed_ns": 1_990_000_000u64, "mbps": 540, "source": "reserved at runtime"},
            ],
        }],
    })
}

fn wi_doc() -> Value {
    let v = |key: &str, name: &str, med: f64, best: f64, ratio: f64| {
        json!({"variant": key, "name": name, "elapsed_ns": [1, 2, 3],
               "pages_per_s_median": med, "pages_per_s_best": best,
               "tierkit_over_this": ratio, "per_node": [[0, 13216], [1, 3168]]})
    };
    json!({
        "bench": "wi", "accel": "Tcg", "cpu_model": "max",
        "results": [{
            "bin": "tk-bench-wi", "kind": "bench", "ok": true, "mib": 64, "reps": 5,
            "results": [
                v("tierkit", "tierkit mmap (weighted interleave)", 96930.0, 122024.0, 1.0),
                v("kernel_weighted_interleave", "anon MPOL_WEIGHTED_INTERLEAVE", 77706.0, 82238.0, 1.25),
                v("kernel_interleave", "anon MPOL_INTERLEAVE", 74792.0, 80000.0, 1.30),
                v("kernel_local", "anon default (local)", 83545.0, 90000.0, 1.16),
            ],
        }],
    })
}

fn tmp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("xtask-bench-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn clear_chart_and_summary() {
    let dir = tmp_dir("clear");
    std::fs::write(dir.join("clear.json"), clear_doc().to_string()).unwrap();
    let svg_path = finish("clear", &dir).unwrap();
    assert_eq!(svg_path, dir.join("clear.svg"));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
    assert!(svg.trim_end().ends_with("</svg>"));
    for name in [
        "tierkit, node 0 (dram), local",
        "tierkit, node 0 (dram), remote",
        "tierkit, node 1 (cxl), local",
        "memset, node 0 (dram)",
        "memset, node 1 (cxl)",
        "kernel serial, node 0 (dram), 1 thread",
        "kernel serial, node 1 (cxl), 1 thread",
        "GB/s against threads",
        "clear_pages variant: erms",
        "\n0.96\n",
    ] {
        assert!(svg.contains(name), "no {name:?} in the SVG");
    }
    // The summary went into the JSON; the rest of it is untouched.
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("clear.json")).unwrap()).unwrap();
    assert_eq!(doc["bench"], "clear");
    let s = &doc["summary"];
    assert_eq!(s["variant"], "erms");
    let k0 = &s["kernel_serial"][0];
    let r = k0["tierkit1_over_kernel_serial_time"].as_f64().unwrap();
    assert!((r - 1.0).abs() < 0.01, "{r}");
    assert_eq!(k0["met"], true);
    let sc = s["scaling_at_max_threads"].as_array().unwrap();
    assert_eq!(sc.len(), 3);
    assert_eq!(sc[0]["threads"], 2);
    assert_eq!(sc[0]["met"], true);
    // One thread only: no speedup target to meet.
    assert_eq!(sc[1]["placement"], "remote");
    assert_eq!(sc[1]["met"], Value::Null);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn clear_summary_lines() {
    let d = ClearData::from_doc(&clear_doc()).unwrap();
    let (_, lines) = clear_summary(&d);
    let text = lines.join("\n");
    assert!(text.contains("clear_pages variant erms"), "{text}");
    assert!(
        text.contains("node 0 (dram): kernel serial 0.61 GB/s; tierkit 1 worker / kernel serial time = 1.00 (target <= 1.10: met)"),
        "{text}"
    );
    assert!(
        text.contains("node 0 (dram) local T=2: tierkit 0.96 GB/s, speedup 1.58x vs memset 1.18x = 1.34 of memset's (target >= 0.90: met)"),
        "{text}"
    );
}

#[test]
fn wi_chart_and_summary() {
    let dir = tmp_dir("wi");
    std::fs::write(dir.join("wi.json"), wi_doc().to_string()).unwrap();
    let svg_path = finish("wi", &dir).unwrap();
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.starts_with("<svg"));
    for name in [
        "tierkit mmap (weighted)",
        "anon MPOL_WEIGHTED_INTERLEAVE",
        "anon MPOL_INTERLEAVE",
        "anon default (local)",
        "96930",
        "tierkit / this = 1.25",
    ] {
        assert!(svg.contains(name), "no {name:?} in the SVG");
    }
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("wi.json")).unwrap()).unwrap();
    assert_eq!(doc["summary"]["variants"].as_array().unwrap().len(), 4);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_rows_is_an_error_not_a_panic() {
    let doc = json!({"bench": "clear", "results": [{"bin": "tk-bench-clear", "ok": false}]});
    assert!(ClearData::from_doc(&doc).is_err());
    assert!(WiData::from_doc(&json!({})).is_err());
}

fn gigantic_doc() -> Value {
    let tk = |nid: u32, kind: &str, t: u32, ns: u64| {
        json!({"nid": nid, "kind": kind, "variant": "tierkit", "threads": t,
               "placement": "local", "workers": t, "cpu_node": 0,
               "samples_ns": [ns, ns + 1, ns - 1], "median_ns": ns, "cpu_net_ns": ns / 5})
    };
    let huge = |nid: u32, kind: &str, ns: u64| {
        json!({"nid": nid, "kind": kind, "variant": "hugetlb", "threads": 1,
               "page": "reserved at runtime", "samples_ns": [ns], "median_ns": ns,
               "cpu_net_ns": 120_000_000u64})
    };
    json!({
        "bench": "gigantic", "accel": "Tcg", "cpu_model": "max", "topology": "numa",
        "topology_detail": "node0: 2 CPUs + 4G, node1: 2G memory-only",
        "results": [{
            "bin": "tk-bench-gigantic", "kind": "bench", "ok": true, "checks": [],
            "reps": 3, "init_on_alloc": false,
            "rows": [
                tk(0, "dram", 1, 1_110_000_000),
                tk(0, "dram", 2, 610_000_000),
                huge(0, "dram", 1_050_000_000),
                json!({"nid": 0, "kind": "dram", "variant": "pool", "threads": 0,
                       "workers": 0, "samples_ns": [42_000_000u64], "median_ns": 42_000_000u64,
                       "cpu_net_ns": 130_000_000u64}),
                tk(1, "cxl", 1, 1_000_000_000),
            ],
            "ratios": [],
            "skipped": [{"nid": 1, "kind": "cxl", "variant": "hugetlb",
                         "reason": "no 1 GiB hugetlb page could be reserved"},
                        {"nid": 1, "kind": "cxl", "variant": "pool",
                         "reason": "ENOSPC"}],
        }],
    })
}

#[test]
fn gigantic_summary_table_and_targets() {
    let d = GiganticData::from_doc(&gigantic_doc()).unwrap();
    assert_eq!(d.reps, 3);
    let (v, lines) = gigantic_summary(&d);
    let text = lines.join("\n");
    // The targets' own figures: 1.05 / 1.11 = 0.95 (just short of 0.95),
    // 1.05 / 0.61 = 1.72.
    assert!(
        text.contains("0 (dram)       hugetlb            1.050     0.120                -"),
        "{text}"
    );
    assert!(
        text.contains("0 (dram)       tierkit T=2        0.610     0.122             1.72"),
        "{text}"
    );
    // The CPU column: each row's net busy time per GiB, and the kernel's
    // init_on_alloc as booted.
    assert!(text.contains("init_on_alloc=0"), "{text}");
    assert!(
        text.contains("1 (cxl)        tierkit T=1        1.000     0.200                -"),
        "{text}"
    );
    assert!(
        text.contains("target node 0 (dram) T=1: hugetlb / tierkit 0.95 (target >= 0.95: missed)"),
        "{text}"
    );
    assert!(
        text.contains("target node 0 (dram) T=2: hugetlb / tierkit 1.72 (target >= 1.8: missed)"),
        "{text}"
    );
    // No hugetlb on node 1: no ratio, no verdict, and the reason shown.
    assert!(
        text.contains("target node 1 (cxl) T=1: hugetlb / tierkit - (target >= 0.95: n/a)"),
        "{text}"
    );
    assert!(
        text.contains("node 1 (cxl) hugetlb: skipped: no 1 GiB hugetlb page"),
        "{text}"
    );
    // From a ready pool: 1.05 / 0.042 = 25.
    assert!(
        text.contains("0 (dram)       tierkit pool       0.042     0.130            25.00"),
        "{text}"
    );
    assert!(
        text.contains("target node 0 (dram) pool: hugetlb / tierkit 25.00 (target >= 20: met)"),
        "{text}"
    );
    assert!(
        text.contains("target node 1 (cxl) pool: hugetlb / tierkit - (target >= 20: n/a)"),
        "{text}"
    );
    assert!(
        text.contains("node 1 (cxl) pool: skipped: ENOSPC"),
        "{text}"
    );
    assert!(!text.contains("not built"), "{text}");
    let t = v["targets"].as_array().unwrap();
    assert_eq!(t.len(), 6);
    assert_eq!(t[0]["met"], false);
    assert_eq!(t[2]["variant"], "pool");
    assert_eq!(t[2]["met"], true);
    assert_eq!(t[3]["met"], Value::Null);
    assert_eq!(t[5]["met"], Value::Null);
    let r = t[1]["hugetlb_over_tierkit"].as_f64().unwrap();
    assert!((r - 1.05 / 0.61).abs() < 1e-9, "{r}");
    assert_eq!(v["table"].as_array().unwrap().len(), 5);
}

#[test]
fn gigantic_target_met_when_faster() {
    let mut doc = gigantic_doc();
    // tierkit T=2 at 0.5 s against hugetlb's 1.05 s: 2.1 >= 1.8.
    doc["results"][0]["rows"][1]["median_ns"] = json!(500_000_000u64);
    let d = GiganticData::from_doc(&doc).unwrap();
    let (v, _) = gigantic_summary(&d);
    assert_eq!(v["targets"][1]["met"], true);
}

#[test]
fn gigantic_chart() {
    let dir = tmp_dir("gigantic");
    std::fs::write(dir.join("gigantic.json"), gigantic_doc().to_string()).unwrap();
    let svg_path = finish("gigantic", &dir).unwrap();
    assert_eq!(svg_path, dir.join("gigantic.svg"));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.starts_with("<svg"));
    assert!(svg.trim_end().ends_with("</svg>"));
    for name in [
        "time to first use of 1 GiB: tierkit vs hugetlb",
        "tierkit, node 0 (dram)",
        "tierkit, node 1 (cxl)",
        "hugetlb first fault, node 0 (dram)",
        "0.61 s (x1.72)",
        "skipped node 1 hugetlb",
        "tierkit from a ready pool, node 0 (dram)",
        "pool 0.042 s (x25.0)",
        "&gt;= 20 from a ready pool",
    ] {
        assert!(svg.contains(name), "no {name:?} in the SVG");
    }
    assert!(!svg.contains("hugetlb first fault, node 1"));
    assert!(!svg.contains("ready pool, node 1"));
    assert!(!svg.contains("not built"));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("gigantic.json")).unwrap()).unwrap();
    assert_eq!(doc["bench"], "gigantic");
    assert_eq!(doc["summary"]["targets"].as_array().unwrap().len(), 6);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gigantic_no_rows_is_an_error() {
    let doc = json!({"bench": "gigantic", "results": [{"bin": "tk-bench-gigantic", "ok": false}]});
    assert!(GiganticData::from_doc(&doc).is_err());
}

#[test]
fn wraps_at_spaces() {
    assert_eq!(wrap("a bb ccc dddd", 6), vec!["a bb", "ccc", "dddd"]);
}
