//! Synthetic boots for the host tests of KCIDB, the matrix and merge: KUnit
//! runs parsed from the captured console logs of `testdata/ktap/`
//! (parameterised cases, skips, a crash that cut a run short, a failed
//! assertion) and userspace tests that pass, fail, skip, plus a harness
//! failure; written with the same functions `cargo xtask test` uses.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use xtask::judge::ktap::Run;
use xtask::kernels::profile::{KernelKind, Profile};
use xtask::report::kcidb::{self, Boot, KernelSource, Source};
use xtask::report::summary::{self, UserTest};

/// The console logs the synthetic boots take in turn.
pub const LOGS: &[&str] = &[
    "parameterized.log",
    "oops_cut_short.log",
    "skipped.log",
    "assert_failure.log",
    "oops_caught.log",
    "multiple_modules.log",
];

pub fn parse(name: &str) -> Run {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/ktap")
        .join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("reading {name}: {e}"));
    Run::parse(&String::from_utf8_lossy(&bytes))
}

pub fn user(name: &str, rc: i32, skipped: bool, ms: u64) -> UserTest {
    UserTest {
        name: name.into(),
        passed: rc == 0,
        skipped,
        rc,
        output_tail: if skipped {
            format!("ok - {name} # SKIP no CXL device")
        } else {
            format!("{name}: checks\n{name}: rc={rc}\n")
        },
        duration_ms: ms,
        reason: None,
        failed_checks: Vec::new(),
    }
}

/// Userspace tests of the `i`-th boot: passes, a skip, and on some boots a
/// failure and a harness failure.
pub fn users(i: usize) -> Vec<UserTest> {
    let mut v = vec![
        user("tk-test-vma", 0, false, 1200),
        user("tk-test-cxl", 0, true, 30),
        user("tk-test-placement", 0, false, 4100),
    ];
    if i % 3 == 1 {
        v.push(user("tk-test-gup", 3, false, 800));
    }
    if i % 4 == 2 {
        v.push(user("[harness] host tests", 1, false, 0));
    }
    v
}

pub fn source() -> Source {
    Source {
        commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
        dirty: false,
        repository_url: Some("https://example.org/tierkit.git".into()),
        branch: Some("main".into()),
    }
}

/// The boot of job `job` (run `run`, `profile`, `kernel`).
pub fn boot(job: &str, run: &str, profile: Profile, kernel: KernelKind) -> Boot {
    let topology = if run.starts_with("cxl") {
        "cxl"
    } else {
        "numa"
    };
    Boot {
        job: job.into(),
        run: run.into(),
        profile,
        kernel,
        topology: topology.into(),
        topology_detail: format!("{topology}: node0: CPUs 0-1 + 8 GiB DRAM"),
        accel: "tcg".into(),
        kernel_source: KernelSource {
            name: match kernel {
                KernelKind::Debian => "Debian linux-image-7.3.4+deb13-amd64".into(),
                _ => "linux-source-7.3".into(),
            },
            version: "7.3.4".into(),
        },
        kernel_key: format!("7.3.4-{}", profile.name()),
        start_time: kcidb::now_rfc3339(),
        duration_secs: 61.5,
    }
}

/// Writes a boot's results.json, junit.xml and kcidb.json into `dir`, as
/// `cargo xtask test` does for a run directory.
pub fn write_boot(dir: &Path, b: &Boot, run: &Run, extra: &[UserTest]) {
    std::fs::create_dir_all(dir).unwrap();
    summary::write_json(&dir.join("results.json"), run, extra).unwrap();
    summary::write_junit(
        &dir.join("junit.xml"),
        &format!("tierkit-{}", b.job),
        run,
        extra,
    )
    .unwrap();
    let doc = kcidb::document(&source(), b, run, extra);
    kcidb::write(&dir.join("kcidb.json"), &doc).unwrap();
}

/// A fresh scratch directory under the target dir.
pub fn scratch(name: &str) -> PathBuf {
    let d =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
