//! KCIDB output, validated by kcidb-io itself: synthetic boots (KUnit
//! suites with parameters, a crash that cut a run short, skips, failed
//! assertions, userspace tests that pass, fail and skip, a harness
//! failure) are written as `cargo xtask test` writes them, one file per
//! boot and their combination, and every file must pass
//! `kcidb_io.schema.LATEST.validate()` in xtask's venv
//! (`xtask/src/util/pyenv.rs`, made on first use: python3 with venv and PyPI
//! needed; anything missing fails the test with what to install).
//!
//! The same validator must refuse documents broken on purpose (a status
//! the schema does not know, a path with a space, an excerpt over the
//! limit, a missing id): proof that a bad file fails, not passes.

mod common;

use std::path::{Path, PathBuf};

use xtask::judge::records::{self, Outcome};
use xtask::kernels::profile::{KernelKind, Profile};
use xtask::report::kcidb::{self, Document};
use xtask::util::pyenv;

/// Per-boot documents of the synthetic boots, and their files.
fn synthetic(dir: &Path) -> (Vec<Document>, Vec<PathBuf>) {
    let boots = [
        (
            "numa-full",
            "numa-full",
            Profile::Default,
            KernelKind::Tierkit,
        ),
        (
            "cxl-full",
            "cxl-full",
            Profile::Default,
            KernelKind::Tierkit,
        ),
        (
            "numa-full-debug",
            "numa-full",
            Profile::Debug,
            KernelKind::Tierkit,
        ),
        ("cxl-debug", "cxl", Profile::Debug, KernelKind::Tierkit),
        ("numa-debian", "numa", Profile::Default, KernelKind::Debian),
        ("cxl-debian", "cxl", Profile::Default, KernelKind::Debian),
    ];
    let mut docs = Vec::new();
    let mut files = Vec::new();
    for (i, (job, run, p, k)) in boots.iter().enumerate() {
        let b = common::boot(job, run, *p, *k);
        let ktap = common::parse(common::LOGS[i % common::LOGS.len()]);
        let users = common::users(i);
        let d = dir.join(format!("test-{job}"));
        common::write_boot(&d, &b, &ktap, &users);
        let path = d.join("kcidb.json");
        let doc = kcidb::read(&path).unwrap();
        assert_eq!(doc.tests.len(), records::walk(&ktap, &users).len(), "{job}");
        docs.push(doc);
        files.push(path);
    }
    (docs, files)
}

fn validate(files: &[PathBuf]) -> Vec<(PathBuf, String)> {
    let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    pyenv::validate_kcidb(&refs).unwrap_or_else(|e| panic!("{e:#}"))
}

#[test]
fn written_files_are_valid_kcidb_and_broken_ones_are_not() {
    let dir = common::scratch("kcidb-valid");
    let (docs, mut files) = synthetic(&dir);
    let all = kcidb::combine(&docs);
    let combined = dir.join("kcidb.json");
    kcidb::write(&combined, &all).unwrap();
    files.push(combined.clone());
    let bad = validate(&files);
    assert!(bad.is_empty(), "invalid KCIDB: {bad:?}");

    // What the files hold: every status, the params, the crash.
    let statuses: std::collections::BTreeSet<&str> =
        all.tests.iter().map(|t| t.status.as_str()).collect();
    assert_eq!(
        statuses.into_iter().collect::<Vec<_>>(),
        ["ERROR", "FAIL", "PASS", "SKIP"]
    );
    assert_eq!(all.version, kcidb::VERSION);
    assert_eq!(all.checkouts.len(), 1);
    assert_eq!(all.checkouts[0].misc.kernel_sources.len(), 2);
    let builds: Vec<&str> = all.builds.iter().map(|b| b.config_name.as_str()).collect();
    assert_eq!(builds, ["default", "debug", "debian"]);
    let ids: std::collections::BTreeSet<&str> = all.tests.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids.len(), all.tests.len(), "test ids are unique");
    assert!(all
        .tests
        .iter()
        .all(|t| t.id.starts_with("tierkit:") && t.origin == "tierkit"));
    assert!(all
        .tests
        .iter()
        .any(|t| t.path == "userspace._harness__host_tests"));
    assert_eq!(
        all.tests.len(),
        docs.iter().map(|d| d.tests.len()).sum::<usize>()
    );

    // Broken on purpose: each must be refused.
    let mut broken: Vec<(&str, Document)> = Vec::new();
    let mut d = all.clone();
    d.tests[0].status = "CRASHED".into();
    broken.push(("status", d));
    let mut d = all.clone();
    d.tests[1].path = "tierkit wi.case".into();
    broken.push(("path", d));
    let mut d = all.clone();
    d.tests[2].log_excerpt = "x".repeat(kcidb::LOG_EXCERPT_MAX + 1);
    broken.push(("log_excerpt", d));
    let mut d = all.clone();
    d.builds[0].id = "no-origin".into();
    broken.push(("id", d));
    let mut d = all.clone();
    d.version.minor = 99;
    broken.push(("version", d));
    let mut paths = Vec::new();
    for (what, doc) in &broken {
        let p = dir.join(format!("broken-{what}.json"));
        kcidb::write(&p, doc).unwrap();
        paths.push(p);
    }
    let refused: Vec<PathBuf> = validate(&paths).into_iter().map(|(p, _)| p).collect();
    assert_eq!(refused, paths, "every broken file must be refused");

    // As `cargo xtask test` tells it: the report's own problem, naming the
    // file (not a test's failure: the verdict stays the judge's).
    let f = kcidb::check_files(&[paths[0].as_path()]).expect("a problem");
    assert!(
        f.contains("not valid KCIDB") && f.contains(&paths[0].display().to_string()),
        "{f}"
    );
    assert!(kcidb::check_files(&[combined.as_path()]).is_none());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn statuses_follow_the_records() {
    let run = common::parse("oops_cut_short.log");
    let users = common::users(1);
    let b = common::boot("numa", "numa", Profile::Default, KernelKind::Tierkit);
    let doc = kcidb::document(&common::source(), &b, &run, &users);
    let recs = records::walk(&run, &users);
    for (t, r) in doc.tests.iter().zip(&recs) {
        let want = match r.outcome {
            Outcome::Pass => "PASS",
            Outcome::Skip => "SKIP",
            Outcome::Fail => "FAIL",
            Outcome::Error => "ERROR",
        };
        assert_eq!(t.status, want, "{}", t.path);
        assert_eq!(t.misc.group, r.group);
        assert_eq!(t.misc.name, r.name);
        assert!(t.log_excerpt.chars().count() <= kcidb::LOG_EXCERPT_MAX);
        assert_eq!(t.duration, r.duration_ms.map(|ms| ms as f64 / 1000.0));
    }
    // The crash cut a case short: an ERROR with the crash's headline.
    assert!(doc.tests.iter().any(|t| t.status == "ERROR"));
    assert!(doc
        .tests
        .iter()
        .any(|t| t.path.starts_with("kernel.crash_at_console_line_")));
}

/// Real runs: every `test-*` run directory under `$TIERKIT_REAL_RUNS`
/// (e.g. a CI run's `target/tierkit`): the kcidb.json the run wrote,
/// validated and checked against its results; and its console log parsed
/// again with its userspace tests read from its results.json, written as
/// KCIDB and validated. Run by hand: `TIERKIT_REAL_RUNS=DIR cargo test -p xtask
/// --test kcidb -- --ignored`.
#[test]
#[ignore = "needs real run directories in $TIERKIT_REAL_RUNS"]
fn real_runs_are_valid_kcidb() {
    let root = PathBuf::from(std::env::var("TIERKIT_REAL_RUNS").expect("set TIERKIT_REAL_RUNS"));
    let out = common::scratch("kcidb-real");
    let mut files = Vec::new();
    let mut tests = 0;
    let mut owns = 0;
    for e in std::fs::read_dir(&root).unwrap() {
        let dir = e.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let Some(job) = name.strip_prefix("test-") else {
            continue;
        };
        if !dir.join("results.json").is_file() {
            continue;
        }
        if !dir.join("console.log").is_file() {
            // The run/shell tests (test-xtask-cmd): no console of their own.
            if dir.join("kcidb.json").is_file() {
                files.push(dir.join("kcidb.json"));
                owns += 1;
            }
            continue;
        }
        let log = std::fs::read(dir.join("console.log")).unwrap();
        let run = xtask::judge::ktap::Run::parse(&String::from_utf8_lossy(&log));
        let results: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap())
                .unwrap();
        let users: Vec<xtask::report::summary::UserTest> =
            serde_json::from_value(results["userspace"].clone()).unwrap();
        // The same totals as the run reported.
        let t = xtask::report::summary::Totals::of(&run, &users);
        assert_eq!(serde_json::to_value(t).unwrap(), results["totals"], "{job}");
        let (p, k) = match (job.contains("-debug"), job.ends_with("-debian")) {
            (true, _) => (Profile::Debug, KernelKind::Tierkit),
            (_, true) => (Profile::Default, KernelKind::Debian),
            _ => (Profile::Default, KernelKind::Tierkit),
        };
        // JUnit from the one walk (records.rs) is what the run wrote.
        let run_name = job.trim_end_matches("-debian").trim_end_matches("-debug");
        if let Ok(written) = std::fs::read_to_string(dir.join("junit.xml")) {
            let mut xml = Vec::new();
            xtask::report::summary::junit_report(&format!("tierkit-{run_name}"), &run, &users)
                .serialize(&mut xml)
                .unwrap();
            assert!(
                String::from_utf8(xml).unwrap() == written,
                "{job}: JUnit differs"
            );
        }
        // The kcidb.json the run itself wrote: the same tests as its
        // results (but a `[harness] kcidb` failure, which is about it),
        // each with a log excerpt and the topology, userspace tests and
        // KUnit cases with a duration.
        let own = dir.join("kcidb.json");
        if own.is_file() {
            let doc = kcidb::read(&own).unwrap();
            let counted: Vec<_> = users
                .iter()
                .filter(|u| u.name != "[harness] kcidb")
                .cloned()
                .collect();
            assert_eq!(
                doc.tests.len(),
                records::walk(&run, &counted).len(),
                "{job}"
            );
            assert_eq!(doc.builds.len(), 1, "{job}");
            for t in &doc.tests {
                assert!(
                    !t.log_excerpt.is_empty() && !t.misc.topology.is_empty(),
                    "{job}: {}",
                    t.path
                );
                let timed = t.path.starts_with("userspace.")
                    || (!t.path.starts_with("kernel.")
                        && t.status != "SKIP"
                        && t.status != "ERROR");
                assert!(
                    !timed || t.duration.is_some(),
                    "{job}: {} has no duration",
                    t.path
                );
            }
            owns += 1;
            files.push(own);
        }
        let b = common::boot(job, job, p, k);
        let text = String::from_utf8_lossy(&log);
        let doc =
            kcidb::document_with_console(&kcidb::Source::of_repo(), &b, &run, &users, Some(&text));
        // A KUnit case's excerpt is its own console lines, its result last.
        for t in doc.tests.iter().filter(|t| {
            t.status == "PASS"
                && !t.path.starts_with("userspace.")
                && !t.path.starts_with("kernel.")
        }) {
            let last = t.log_excerpt.lines().last().unwrap_or("");
            assert!(last.contains("ok "), "{job}: {}: {last:?}", t.path);
        }
        tests += doc.tests.len();
        let path = out.join(format!("{job}.json"));
        kcidb::write(&path, &doc).unwrap();
        files.push(path);
    }
    assert!(
        !files.is_empty(),
        "no test-* run directories in {}",
        root.display()
    );
    let bad = validate(&files);
    assert!(bad.is_empty(), "invalid KCIDB: {bad:?}");
    eprintln!(
        "{} KCIDB files ({owns} written by the runs, the rest from their logs), {tests} tests regenerated, all valid",
        files.len()
    );
}

/// The `run -- CMD` and `shell` tests' KCIDB file: one test each, with
/// the topology each booted, valid for kcidb-io; a failure is a FAIL.
#[test]
fn run_and_shell_tests_are_kcidb_tests_with_their_topology() {
    let topologies: Vec<(&str, &str)> = xtask::testing::cmd_tests::TESTS
        .iter()
        .map(|t| (t.name, t.topology))
        .collect();
    let users: Vec<_> = xtask::testing::cmd_tests::TESTS
        .iter()
        .enumerate()
        .map(|(i, t)| {
            common::user(
                &format!("[harness] {}", t.name),
                i32::from(i == 1),
                false,
                7000,
            )
        })
        .collect();
    let doc = kcidb::cmd_tests_document(
        &common::source(),
        &xtask::judge::facts::CmdTestsFacts::decide(
            KernelKind::Tierkit,
            &topologies,
            &users,
            kcidb::now_rfc3339(),
        ),
        &users,
    );
    assert_eq!(doc.tests.len(), users.len());
    assert_eq!(doc.builds.len(), 1);
    assert_eq!(doc.builds[0].config_name, "default");
    for (t, (name, topology)) in doc.tests.iter().zip(&topologies) {
        assert_eq!(t.path, format!("userspace._harness__{name}"));
        assert_eq!(t.misc.topology, *topology, "{name}");
        assert_eq!(t.environment.misc["topology"], *topology);
        assert_eq!(t.misc.job, "xtask-cmd");
        assert_eq!(t.duration, Some(7.0));
        assert!(t.log_excerpt.contains(name));
    }
    assert!(doc.tests.iter().any(|t| t.misc.topology == "cxl"));
    assert_eq!(doc.tests[1].status, "FAIL");
    let dir = common::scratch("kcidb-cmd");
    let path = dir.join("kcidb.json");
    kcidb::write(&path, &doc).unwrap();
    let bad = validate(std::slice::from_ref(&path));
    assert!(bad.is_empty(), "invalid KCIDB: {bad:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
