//! tk-bench-all: every benchmark in one boot, for `cargo xtask bench`
//! with no argument (guest mode `bench-all`). Runs, in this order, each as
//! a child process whose output goes straight through (so each prints its
//! own `TIERKIT-JSON` line):
//!
//! 1. `tk-bench-clear` (gigantic clearing);
//! 2. `tk-bench-wi` (pages/s of weighted placement);
//! 3. `tk-bench-gigantic` (time to first use of 1 GiB, tierkit's gigantic
//!    mode against hugetlb's first fault);
//! 4. `tk-calibrate --out /tmp/tierkit-calibration.json`;
//! 5. `tk-workload --calibration /tmp/tierkit-calibration.json`;
//! 6. `tk-bench-rebalance` (a running triad's working set moved from the
//!    HMAT weights to the measured ones);
//! 7. `tk-bench-run` (tk-run against the kernel on unmodified programs,
//!    with the calibration of step 4);
//! 8. `tk-test-close-scale` (munmap and close time against the number of
//!    a file's mappings).
//!
//! The two that clear whole GiBs (`clear`, `gigantic`) do not run on a CXL
//! topology by default: QEMU serves CXL memory access by access (about
//! 0.02 GB/s), so clearing 1 GiB there several times takes many minutes
//! per GiB and says nothing about CXL hardware (Documentation/dev-tools/topologies.md, "Slow memory");
//! the numa boot measures both on its DRAM and memory-only nodes.
//! `--with-cxl-clear`, or naming them in `--only`, runs them anyway.
//!
//! Then one `TIERKIT-JSON` line of its own with each program's exit code
//! and time. Exit 0 iff every program exited 0.
//!
//! Flags: `--only a,b` (names without `tk-`/`tk-bench-`: clear, wi,
//! gigantic, calibrate, workload, rebalance, run, scale; naming `clear` or `gigantic` runs it on
//! CXL too),
//! `--with-cxl-clear`. In the guest the same come from the kernel command
//! line (`cargo xtask bench --append ...`): `tierkit.bench=calibrate,workload`
//! selects programs, and `tierkit.<name>_args=--rounds,5` adds arguments
//! to one (commas for spaces), e.g. `tierkit.workload_args=--workloads,lookup+stream,--rounds,5`
//! (lists inside an argument take `+`).

use serde_json::json;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use userspace_tests::report::Report;
use userspace_tests::sys::monotonic_ns;
use userspace_tests::workload::Flags;

const BIN: &str = "tk-bench-all";
const CAL: &str = "/tmp/tierkit-calibration.json";

fn main() -> ExitCode {
    userspace_tests::help!();
    let flags = match Flags::from_args(BIN, &["with-cxl-clear"], &["only", "with-cxl-clear"]) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    let param = |key: &str| -> Option<Vec<String>> {
        let v = cmdline
            .split_whitespace()
            .find_map(|a| a.strip_prefix(&format!("{key}=")))?;
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
    let cxl = !userspace_tests::cxl::cxl_nodes().is_empty();
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
