//! The logic of `tk-bench-all`; what it does and how it is used are the doc of
//! `src/bin/tk-bench-all.rs` (its `--help`).

use crate::harness::report::Report;
use crate::linux::kernel::kernel_param;
use crate::linux::sys::monotonic_ns;
use crate::tools::workload::Flags;
use serde_json::json;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

const BIN: &str = "tk-bench-all";
const CAL: &str = "/tmp/tierkit-calibration.json";

pub fn main() -> ExitCode {
    let flags = match Flags::from_args(BIN, &["with-cxl-clear"], &["only", "with-cxl-clear"]) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let param = |key: &str| -> Option<Vec<String>> {
        let v = kernel_param(key)?;
        Some(
            v.split(',')
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect(),
        )
    };
    let only = flags.list("only").or_else(|| param("tierkit.bench"));
    let want = |n: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == n));
    // The GiB-clearing benchmarks on a CXL topology: only when asked for.
    let on_cxl = |n: &str| {
        flags.has("with-cxl-clear") || only.as_ref().is_some_and(|o| o.iter().any(|x| x == n))
    };
    let mut r = Report::new(BIN, "bench");
    let cxl = !crate::topology::cxl::cxl_nodes().is_empty();
    // Each program at /bin/<name> in the guest, else next to this binary.
    let dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| "/bin".into());
    let steps: Vec<(&str, &str, Vec<&str>)> = vec![
        ("clear", "tk-bench-clear", vec![]),
        ("wi", "tk-bench-wi", vec![]),
        ("gigantic", "tk-bench-gigantic", vec![]),
        ("calibrate", "tk-calibrate", vec!["--out", CAL]),
        ("workload", "tk-workload", vec!["--calibration", CAL]),
        ("rebalance", "tk-bench-rebalance", vec![]),
        ("run", "tk-bench-run", vec![]),
        ("scale", "tk-test-close-scale", vec![]),
    ];
    let mut progs = Vec::new();
    for (key, name, a) in steps {
        if !want(key) {
            continue;
        }
        let path = dir.join(name);
        if !path.exists() {
            r.fail(name, format!("{} does not exist", path.display()));
            continue;
        }
        if (key == "clear" || key == "gigantic") && cxl && !on_cxl(key) {
            r.skip(
                name,
                "CXL topology: QEMU's CXL memory clears at about 0.02 GB/s (minutes per GiB); --with-cxl-clear runs it",
            );
            continue;
        }
        let mut a: Vec<String> = a.iter().map(|x| x.to_string()).collect();
        a.extend(param(&format!("tierkit.{key}_args")).unwrap_or_default());
        println!("# {BIN}: running {name} {}", a.join(" "));
        let t0 = monotonic_ns();
        let st = Command::new(&path).args(&a).stdin(Stdio::null()).status();
        let secs = (monotonic_ns() - t0) as f64 / 1e9;
        match st {
            Ok(s) if s.success() => {
                r.ok_note(name, format!("{secs:.1} s"));
                progs.push(json!({"name": name, "rc": 0, "seconds": secs}));
            }
            Ok(s) => {
                r.fail(name, format!("{s} after {secs:.1} s"));
                progs.push(json!({"name": name, "rc": s.code(), "seconds": secs}));
            }
            Err(e) => {
                r.fail(name, format!("could not start {}: {e}", path.display()));
            }
        }
    }
    r.set("programs", json!(progs));
    r.finish()
}
