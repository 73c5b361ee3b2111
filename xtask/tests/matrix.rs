//! Sharding and merging: the `--ci` job list of `cargo xtask matrix`,
//! split into 3 shards ([`Shard::pick`]), each shard's results collected
//! as `matrix --shard` collects them ([`matrix::collect`]), then
//! `cargo xtask merge` ([`merge::cmd_merge`]) over the three shard
//! directories, must give the same totals and the same tests (KCIDB and
//! JUnit) as the unsharded combination `cargo xtask test --ci` makes
//! ([`merge::write_combined_kcidb`], the sum of each boot's totals).
//! The boots themselves are synthetic (`common`): nothing is built or
//! booted.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use quick_junit::Report;
use xtask::matrix::{self, Job, JobKind, Selection, Shard};
use xtask::merge;
use xtask::report::summary::{self, Totals};
use xtask::{plan::runs, report::kcidb};

fn ci_jobs() -> Vec<Job> {
    let sel = Selection {
        ci: true,
        ..Default::default()
    };
    matrix::jobs(&sel, &runs::ci_boots())
}

/// The synthetic results of the `i`-th job: a boot's KUnit run and
/// userspace tests, or for the `run -- CMD` and `shell` job its tests
/// (one failing) and no KUnit.
fn results_of(
    i: usize,
    job: &Job,
) -> (
    xtask::judge::ktap::Run,
    Vec<xtask::report::summary::UserTest>,
) {
    if job.kind == JobKind::XtaskCmd {
        let users = job
            .tests
            .iter()
            .enumerate()
            .map(|(n, t)| common::user(&format!("[harness] {t}"), i32::from(n == 2), false, 9000))
            .collect();
        return (xtask::judge::ktap::Run::default(), users);
    }
    (
        common::parse(common::LOGS[i % common::LOGS.len()]),
        common::users(i),
    )
}

/// Writes every job's synthetic results into `runs/test-<id>/`, as the
/// boots of `test` and its `run -- CMD`/`shell` tests would; returns the
/// sum of their totals (what one `test --ci` prints last).
fn boot_all(runs_dir: &Path, jobs: &[Job]) -> Totals {
    let mut all = Totals::default();
    let boots = runs::ci_boots();
    assert_eq!(jobs.len(), boots.len() + 1, "every boot, then xtask-cmd");
    for (i, job) in jobs.iter().enumerate() {
        let (ktap, users) = results_of(i, job);
        let dir = runs_dir.join(format!("test-{}", job.id));
        if let Some((p, k, run)) = boots.get(i) {
            assert_eq!(job.kind, JobKind::Boot);
            assert_eq!(job.id, xtask::testing::job_id(*p, *k, run));
            let b = common::boot(&job.id, run.name, *p, *k);
            common::write_boot(&dir, &b, &ktap, &users);
        } else {
            assert_eq!(job.kind, JobKind::XtaskCmd);
            assert_eq!(job.id, "xtask-cmd");
            let topologies: Vec<(&str, &str)> = xtask::testing::cmd_tests::TESTS
                .iter()
                .map(|t| (t.name, t.topology))
                .collect();
            let doc = kcidb::cmd_tests_document(
                &common::source(),
                &xtask::judge::facts::CmdTestsFacts::decide(
                    xtask::kernels::profile::KernelKind::Tierkit,
                    &topologies,
                    &users,
                    kcidb::now_rfc3339(),
                ),
                &users,
            );
            std::fs::create_dir_all(&dir).unwrap();
            summary::write_json(&dir.join("results.json"), &ktap, &users).unwrap();
            summary::write_junit(&dir.join("junit.xml"), "tierkit-xtask-cmd", &ktap, &users)
                .unwrap();
            kcidb::write(&dir.join("kcidb.json"), &doc).unwrap();
        }
        all = all + Totals::of(&ktap, &users);
    }
    all
}

/// `(job, path, status)` of every KCIDB test.
fn kcidb_tests(path: &Path) -> BTreeSet<(String, String, String)> {
    let doc = kcidb::read(path).unwrap();
    let v: Vec<_> = doc
        .tests
        .iter()
        .map(|t| (t.misc.job.clone(), t.path.clone(), t.status.clone()))
        .collect();
    let set: BTreeSet<_> = v.iter().cloned().collect();
    assert_eq!(set.len(), v.len(), "a test twice in {}", path.display());
    set
}

/// `(suite, case, kind)` of every JUnit test case.
fn junit_cases(r: &Report) -> BTreeSet<(String, String, String)> {
    r.test_suites
        .iter()
        .flat_map(|s| {
            s.test_cases.iter().map(move |c| {
                (
                    s.name.as_str().to_string(),
                    c.name.as_str().to_string(),
                    format!("{:?}", c.status).chars().take(24).collect(),
                )
            })
        })
        .collect()
}

#[test]
fn three_shards_merge_to_the_unsharded_results() {
    let root = common::scratch("matrix-merge");
    let jobs = ci_jobs();
    assert_eq!(jobs.len(), runs::ci_boots().len() + 1);
    let runs_dir = root.join("runs");
    let totals = boot_all(&runs_dir, &jobs);

    // Unsharded, as `test --ci` combines its boots.
    let run_dirs: Vec<PathBuf> = jobs
        .iter()
        .map(|j| runs_dir.join(format!("test-{}", j.id)))
        .collect();
    let refs: Vec<&Path> = run_dirs.iter().map(PathBuf::as_path).collect();
    let whole = root.join("kcidb.json");
    assert!(merge::write_combined_kcidb(&refs, &whole).is_none());
    let mut whole_junit = BTreeSet::new();
    for (i, job) in jobs.iter().enumerate() {
        let (ktap, users) = results_of(i, job);
        let r = summary::junit_report("x", &ktap, &users);
        for (s, c, st) in junit_cases(&r) {
            whole_junit.insert((format!("{}/{s}", job.id), c, st));
        }
    }

    // Sharded: every job in exactly one shard.
    let mut shard_dirs = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for k in 1..=3 {
        let s = Shard { k, n: 3 };
        let mine = s.pick(&jobs);
        assert!(!mine.is_empty());
        seen.extend(mine.iter().map(|j| j.id.clone()));
        let dir = root.join("download").join(s.dir_name());
        matrix::collect(&runs_dir, &mine, &[], &dir).unwrap();
        // As `matrix --shard` ends: the shard's own combination beside.
        let (c, harness) = matrix::combine_shard(&dir).unwrap();
        assert!(harness.is_none());
        assert_eq!(c.boots.len(), mine.len());
        assert!(dir.join("results.json").is_file() && dir.join("kcidb.json").is_file());
        shard_dirs.push(dir);
    }
    seen.sort();
    let mut ids: Vec<String> = jobs.iter().map(|j| j.id.clone()).collect();
    ids.sort();
    assert_eq!(seen, ids, "the shards cover every job once");

    let out = root.join("merged");
    let code = merge::cmd_merge(&shard_dirs, &out, None).unwrap();
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert_eq!(summary.lines().last().unwrap(), totals.to_string());
    assert_eq!(summary.lines().count(), jobs.len() + 1);
    assert_eq!(
        code == std::process::ExitCode::SUCCESS,
        totals.failed == 0,
        "exit status follows the failures"
    );
    let merged: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(
        serde_json::from_value::<Totals>(merged["totals"].clone()).unwrap(),
        totals
    );

    let merged_tests = kcidb_tests(&out.join("kcidb.json"));
    assert_eq!(merged_tests, kcidb_tests(&whole));
    let a = kcidb::read(&out.join("kcidb.json")).unwrap();
    let b = kcidb::read(&whole).unwrap();
    assert_eq!(a.checkouts, b.checkouts);
    let ids = |d: &kcidb::Document| {
        d.builds
            .iter()
            .map(|b| b.id.clone())
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(ids(&a), ids(&b));

    let xml = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    let merged_junit = junit_cases(&Report::deserialize_from_str(&xml).unwrap());
    assert_eq!(merged_junit, whole_junit);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_job_without_results_counts_as_a_failure_and_a_job_given_twice_is_refused() {
    let root = common::scratch("matrix-missing");
    let jobs = ci_jobs();
    let runs_dir = root.join("runs");
    let mine = Shard { k: 2, n: 3 }.pick(&jobs);
    // The shard's first job wrote nothing (its build failed).
    let written = boot_all(&runs_dir, &jobs);
    std::fs::remove_dir_all(runs_dir.join(format!("test-{}", mine[0].id))).unwrap();
    let dir = root.join("shard");
    let errors = vec![(mine[0].id.clone(), "kernel build failed".to_string())];
    matrix::collect(&runs_dir, &mine, &errors, &dir).unwrap();
    let boots = merge::find_boot_dirs(std::slice::from_ref(&dir)).unwrap();
    assert_eq!(boots.len(), mine.len());
    let failed = boots.iter().find(|b| b.job == mine[0].id).unwrap();
    assert_eq!(
        failed.totals,
        Totals {
            passed: 0,
            failed: 1,
            skipped: 0
        }
    );
    assert!(written.passed > 0);
    // Its KCIDB file: the failure, under the build its id names.
    let doc = kcidb::read(&failed.dir.join("kcidb.json")).unwrap();
    assert_eq!(doc.tests.len(), 1);
    assert_eq!(doc.tests[0].status, "FAIL");
    assert_eq!(doc.tests[0].path, "userspace._harness__boot");
    assert!(doc.tests[0].log_excerpt.contains("kernel build failed"));
    assert_eq!(doc.tests[0].misc.job, mine[0].id);
    let c = merge::Combined::of(boots).unwrap();
    let line = c
        .lines()
        .into_iter()
        .find(|l| l.starts_with(&format!("{}:", mine[0].id)));
    assert!(
        line.is_some_and(|l| l.contains("FAILED")),
        "{:?}",
        c.lines()
    );

    // A job that uploaded nothing at all: `merge --expect` counts it.
    let jobs_file = root.join("jobs.json");
    std::fs::write(&jobs_file, matrix::to_json(&jobs)).unwrap();
    let out = root.join("merged");
    let code = merge::cmd_merge(std::slice::from_ref(&dir), &out, Some(&jobs_file)).unwrap();
    assert_ne!(code, std::process::ExitCode::SUCCESS);
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert_eq!(summary.lines().count(), jobs.len() + 1, "{summary}");
    let last = summary.lines().last().unwrap();
    let missing = jobs.len() - mine.len();
    assert!(
        last.contains(&format!(" {} failed", c.totals.failed + missing)),
        "{last}"
    );
    // Every expected job is in the merged KCIDB file (validated by merge).
    let merged = kcidb::read(&out.join("kcidb.json")).unwrap();
    let in_kcidb: BTreeSet<&str> = merged.tests.iter().map(|t| t.misc.job.as_str()).collect();
    for j in &jobs {
        assert!(
            in_kcidb.contains(j.id.as_str()),
            "{} not in the merged KCIDB",
            j.id
        );
    }
    let refs = [out.join("kcidb.json")];
    assert!(kcidb::check_files(&[refs[0].as_path()]).is_none());
    // The bare list the GitHub workflow passes on works too.
    let bare = serde_json::to_string(&jobs).unwrap();
    std::fs::write(&jobs_file, bare).unwrap();
    assert_eq!(matrix::read_job_ids(&jobs_file).unwrap().len(), jobs.len());

    let e = merge::find_boot_dirs(&[dir.clone(), dir.clone()])
        .expect_err("the same shard twice is refused");
    assert!(e.to_string().contains("is in both"), "{e}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn named_matrices_are_the_boots_of_their_test_command_lines() {
    use xtask::kernels::profile::{KernelKind, Profile};
    use xtask::matrix::Named;
    let ids = |sel: &Selection, boots: &[xtask::testing::Boot]| -> Vec<String> {
        matrix::jobs(sel, boots).into_iter().map(|j| j.id).collect()
    };
    let quick = |p: Profile, full: bool, k: KernelKind| -> Vec<xtask::testing::Boot> {
        runs::select(p, full, None, None)
            .into_iter()
            .map(|r| (p, k, r))
            .collect()
    };
    let ci = Named::Ci.selection();
    assert_eq!(ci.test_args(), ["test", "--ci"]);
    let mut want: Vec<String> = runs::ci_boots()
        .iter()
        .map(|(p, k, r)| xtask::testing::job_id(*p, *k, r))
        .collect();
    want.push("xtask-cmd".into());
    assert_eq!(ids(&ci, &runs::ci_boots()), want);

    let q = Named::Quick.selection();
    assert_eq!(q.test_args(), ["test"]);
    let boots = quick(Profile::Default, false, KernelKind::Tierkit);
    assert_eq!(ids(&q, &boots), ["numa", "cxl", "xtask-cmd"]);

    let f = Named::Full.selection();
    assert_eq!(f.test_args(), ["test", "--full"]);

    // The debug kernel runs no run/shell tests (they need the default
    // profile), so its matrix has no xtask-cmd job.
    let d = Named::FullDebug.selection();
    assert_eq!(d.test_args(), ["test", "--full", "--profile", "debug"]);
    let boots = quick(Profile::Debug, true, KernelKind::Tierkit);
    let got = ids(&d, &boots);
    assert!(got.iter().all(|id| id.ends_with("-debug")), "{got:?}");
    assert!(matrix::cmd_job(&d).is_none());

    let deb = Named::Debian.selection();
    assert_eq!(deb.test_args(), ["test", "--kernel", "debian"]);
    let boots = quick(Profile::Default, false, KernelKind::Debian);
    let jobs = matrix::jobs(&deb, &boots);
    assert_eq!(
        jobs.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        ["numa-debian", "cxl-debian", "xtask-cmd"]
    );
    // Every job's command is `cargo xtask` and its args.
    for j in &jobs {
        assert_eq!(j.argv[..2], ["cargo", "xtask"]);
        assert_eq!(j.argv[2..], j.args[..]);
    }
    let cmd = jobs.last().unwrap();
    assert_eq!(cmd.kind, JobKind::XtaskCmd);
    assert_eq!(cmd.kernel, "debian");
    assert_eq!(
        cmd.command,
        "cargo xtask test --kernel debian --filter 'xtask-*' --no-host-tests"
    );
}

/// Real runs: the `test-*` run directories of one `cargo xtask test --ci`
/// under `$TIERKIT_REAL_RUNS` (its `target/tierkit`), split into 3 shards
/// as `matrix --shard K/3` collects them and merged by `cargo xtask
/// merge`, must give the run's own totals: the sum of its run
/// directories' results.json and, with `$TIERKIT_REAL_LOG` (the run's
/// output), the totals line it printed last. Jobs without a run directory
/// (a run still going) are left out unless the log is given. Run by hand:
/// `TIERKIT_REAL_RUNS=DIR [TIERKIT_REAL_LOG=LOG] cargo test -p xtask
/// --test matrix -- --ignored`.
#[test]
#[ignore = "needs a real run's directories in $TIERKIT_REAL_RUNS"]
fn a_real_ci_run_split_into_three_shards_merges_to_its_totals() {
    let runs_dir =
        PathBuf::from(std::env::var("TIERKIT_REAL_RUNS").expect("set TIERKIT_REAL_RUNS"));
    let log = std::env::var("TIERKIT_REAL_LOG").ok();
    let all = ci_jobs();
    let jobs: Vec<Job> = all
        .iter()
        .filter(|j| {
            let done = runs_dir
                .join(format!("test-{}/results.json", j.id))
                .is_file();
            assert!(done || log.is_none(), "job {} has no results", j.id);
            done
        })
        .cloned()
        .collect();
    assert!(
        !jobs.is_empty(),
        "no run directories in {}",
        runs_dir.display()
    );
    let mut sum = Totals::default();
    for j in &jobs {
        let b = merge::BootDir::read(&runs_dir.join(format!("test-{}", j.id))).unwrap();
        sum = sum + b.totals;
    }
    let root = common::scratch("matrix-real");
    let mut shard_dirs = Vec::new();
    for k in 1..=3 {
        let mine = Shard { k, n: 3 }.pick(&all);
        let mine: Vec<Job> = mine.into_iter().filter(|j| jobs.contains(j)).collect();
        if mine.is_empty() {
            // Only with a run still going: its jobs of this shard are to come.
            continue;
        }
        let dir = root.join(Shard { k, n: 3 }.dir_name());
        matrix::collect(&runs_dir, &mine, &[], &dir).unwrap();
        let (_, harness) = matrix::combine_shard(&dir).unwrap();
        assert!(harness.is_none(), "{harness:?}");
        shard_dirs.push(dir);
    }
    let out = root.join("merged");
    merge::cmd_merge(&shard_dirs, &out, None).unwrap();
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    let merged = summary.lines().last().unwrap().to_string();
    assert_eq!(merged, sum.to_string(), "{summary}");
    // Every boot's KCIDB tests, once each, in the merged file.
    let mut n = 0;
    for j in &jobs {
        let k = runs_dir.join(format!("test-{}/kcidb.json", j.id));
        if k.is_file() {
            n += kcidb::read(&k).unwrap().tests.len();
        }
    }
    assert_eq!(kcidb::read(&out.join("kcidb.json")).unwrap().tests.len(), n);
    if let Some(log) = log {
        let text = std::fs::read_to_string(&log).unwrap();
        let last = text
            .lines()
            .rev()
            .find(|l| l.starts_with("tierkit: ") && l.contains(" passed, "))
            .expect("the run's totals line");
        assert_eq!(merged, last, "merged shards against the run's own line");
    }
    eprintln!("{} jobs in 3 shards: {merged}", jobs.len());
    std::fs::remove_dir_all(&root).unwrap();
}
