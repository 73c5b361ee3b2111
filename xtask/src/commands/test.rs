//! `cargo xtask test`: the host tests, then the boots of
//! [`crate::plan::runs`] for each profile, then the tests of `run -- CMD` and
//! `shell` ([`cmd_tests`]), and the combined totals.

use anyhow::{Context, Result};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use crate::boot::{self, BootRequest, GuestFlags, GuestResult};
use crate::util::{self, fmt_dur, Timer};
use crate::{kernels::profile, plan::runs, report::summary, report::timings, say, util::setup};

pub mod cmd_tests;
pub mod lanes;

/// One boot of a `test`: its run and its request.
#[derive(Clone, Debug)]
pub struct TestBoot {
    pub run: runs::TestRun,
    pub req: BootRequest,
}

impl TestBoot {
    /// The boot of `b` with the command's guest flags, labelled
    /// ([`run_label`]): its summary ends in `tierkit [<label>]: ...`, and
    /// the command's one totals line, `tierkit: ...`, is its last.
    pub fn new(f: &GuestFlags, b: &Boot) -> Result<TestBoot> {
        let (p, k, run) = *b;
        let mut req = BootRequest::for_run(f, p, k, &run)?;
        req.label = Some(run_label(p, k, run.name));
        Ok(TestBoot { run, req })
    }
}

/// `cargo xtask test` as asked.
#[derive(Clone)]
pub struct TestRequest {
    /// Run `cargo test --workspace` first.
    pub host_tests: bool,
    pub boots: Vec<TestBoot>,
    /// The tests of `run -- CMD` and `shell`, after the boots.
    pub cmd_tests: Vec<cmd_tests::CmdTest>,
    /// Their kernel (`--ci`: tierkit's own) and accelerator flag.
    pub cmd_kernel: profile::KernelKind,
    pub cmd_kvm: Option<bool>,
    /// Rounds of the boots and run/shell tests (`--repeat`; 0 or 1: one).
    pub repeat: u32,
    /// Boots at once (`--lanes`; 1: one after another): [`lanes`].
    pub lanes: u32,
}

/// `cargo xtask test`: the host tests once, then the boots and the tests
/// of `run -- CMD` and `shell` `repeat` times in a row, stopping at the
/// first round that fails (its results stay in its run directories).
/// With more than one round, each round's totals are labelled and a line
/// says how many passed; the one totals line, of all rounds together, is
/// last.
pub(crate) fn run(t: TestRequest) -> Result<ExitCode> {
    let wall = Timer::start();
    setup::ensure()?;
    let rounds = t.repeat.max(1);
    // The first round's second lane starts before the host tests, which
    // it does not need.
    let two = lanes::decide(&t);
    let mut second = two.then(|| lanes::begin(&t.boots));
    let mut host = if t.host_tests {
        Some(host_tests()?)
    } else {
        None
    };
    let mut sum = summary::Totals::default();
    for round in 1..=rounds {
        if rounds > 1 {
            println!();
            say!("===== round {round} of {rounds} =====");
        }
        let lane = match second.take() {
            Some(l) => Some(l),
            None => two.then(|| lanes::begin(&t.boots)),
        };
        let (ok, totals) = test_all(host.take(), t.clone(), &wall, lane)?;
        sum = sum + totals;
        if rounds > 1 {
            println!("{}", totals.labelled(&format!("round {round} of {rounds}")));
        }
        if !ok {
            if rounds > 1 {
                say!(
                    "repeat: round {round} of {rounds} FAILED ({} passed before it)",
                    round - 1
                );
            }
            println!("{sum}");
            return Ok(ExitCode::FAILURE);
        }
    }
    if rounds > 1 {
        say!("repeat: all {rounds} rounds passed, in a row");
    }
    // The one totals line, last.
    println!("{sum}");
    Ok(ExitCode::SUCCESS)
}

/// The time table of a `test` ([`timings`]): the host tests, then each
/// boot's steps with its slow tests, and the tests of `run -- CMD` and
/// `shell` one by one.
pub(crate) fn time_table(
    host: Option<(bool, Duration)>,
    results: &[(String, GuestResult)],
) -> timings::Table {
    let mut table = timings::Table::default();
    if let Some((_, d)) = host {
        table.step("", "host tests", d);
    }
    for (label, r) in results {
        // The host tests count with the first boot's report: their row
        // is the one above.
        for (step, d) in r.phases.iter().filter(|(s, _)| s != "host tests") {
            table.step(label, step, *d);
        }
        table.parts(label, &r.guest_parts);
        table.tests(label, &r.slow_tests);
    }
    table
}

/// Host tests: `cargo test --workspace` (the core crate's property tests,
/// the KTAP parser, xtask's own unit tests, ...), as [`HOST_TEST_RUNS`]:
/// every library's unit tests, every integration test and the doctests,
/// but not the unit-test harness of each binary target. Those hold no
/// tests (xtask/tests/shape.rs checks it), and the guest crate's 47
/// binaries would be linked as 47 empty test programs, a third of the
/// host tests' build after an edit of guest/src.
pub(crate) const HOST_TEST_RUNS: &[&[&str]] = &[
    &["test", "--workspace", "--lib", "--test", "*"],
    &["test", "--workspace", "--doc"],
];

/// Runs [`HOST_TEST_RUNS`] and counts their results.
pub(crate) fn host_tests() -> Result<(bool, Duration)> {
    let t = Timer::start();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let log = util::out_dir().join("host-tests.log");
    std::fs::create_dir_all(util::out_dir())?;
    say!(
        "host tests: cargo test --workspace (log: {})",
        log.display()
    );
    let mut text = String::new();
    let mut ok = true;
    for args in HOST_TEST_RUNS {
        let out = Command::new(&cargo)
            .current_dir(util::repo_root())
            .args(*args)
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .stdin(Stdio::null())
            .output()
            .context("could not run cargo test")?;
        text.push_str(&format!("$ cargo {}\n", args.join(" ")));
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        text.push_str(&String::from_utf8_lossy(&out.stdout));
        ok &= out.status.success();
        if !ok {
            break;
        }
    }
    std::fs::write(&log, &text)?;
    let (mut passed, mut failed) = (0usize, 0usize);
    for l in text.lines().filter(|l| l.starts_with("test result:")) {
        let num = |key: &str| {
            l.split(';')
                .find_map(|p| {
                    p.trim()
                        .trim_start_matches("test result: ok. ")
                        .trim_start_matches("test result: FAILED. ")
                        .strip_suffix(key)
                        .map(|n| n.trim().parse::<usize>().unwrap_or(0))
                })
                .unwrap_or(0)
        };
        passed += num(" passed");
        failed += num(" failed");
    }
    if ok {
        say!("host tests: {passed} passed ({})", fmt_dur(t.elapsed()));
    } else {
        eprintln!("{}", util::tail_lines(&text, 60));
        say!(
            "host tests FAILED ({failed} failed; log: {}); booting the guest anyway",
            log.display()
        );
    }
    Ok((ok, t.elapsed()))
}

/// The boots of one `test`, in order: each profile on each of its runs
/// ([`runs::select`]) on `--kernel`'s kernel, or with `ci`
/// [`runs::ci_boots`].
pub(crate) fn boots(
    g: &GuestFlags,
    profiles: &[profile::Profile],
    full: bool,
    ci: bool,
) -> Vec<(profile::Profile, profile::KernelKind, runs::TestRun)> {
    if ci {
        return runs::ci_boots();
    }
    let k = g.kernel_kind;
    profiles
        .iter()
        .flat_map(|&p| {
            runs::select(p, full, g.topology, g.cxl_online)
                .into_iter()
                .map(move |r| (p, k, r))
        })
        .collect()
}

/// The label of one boot of a `test` over several runs or profiles: the
/// run's name (`numa`, `cxl`, `cxl-kernel`), after the profile's unless
/// default (`debug numa`) and the kernel's unless tierkit's (`debian numa`).
pub fn run_label(profile: profile::Profile, k: profile::KernelKind, run: &str) -> String {
    let mut s = String::new();
    if k != profile::KernelKind::Tierkit {
        s.push_str(&format!("{k} "));
    }
    if profile != profile::Profile::Default {
        s.push_str(&format!("{profile} "));
    }
    s.push_str(run);
    s
}

/// A boot's job id (`cargo xtask matrix`, `test --job`): its run
/// directory's name after `test-`: the run's name, then `-debug` under the
/// debug profile and `-debian` on Debian's kernel (`numa-full`,
/// `numa-full-debug`, `cxl-debian`).
pub fn job_id(profile: profile::Profile, k: profile::KernelKind, run: &runs::TestRun) -> String {
    format!("{}{}{}", run.name, profile.suffix(), k.suffix())
}

/// One boot of a `test`, as `boots` lists them.
pub type Boot = (profile::Profile, profile::KernelKind, runs::TestRun);

/// `boots`, or with `job` the one boot whose [`job_id`] it is (refused in
/// one line, with the ids there are, if none).
pub(crate) fn select_job(boots: Vec<Boot>, job: Option<&str>) -> Result<Vec<Boot>> {
    let Some(job) = job else {
        return Ok(boots);
    };
    let ids: Vec<String> = boots.iter().map(|(p, k, r)| job_id(*p, *k, r)).collect();
    match ids.iter().position(|id| id == job) {
        Some(i) => Ok(vec![boots[i]]),
        None => anyhow::bail!(
            "--job {job}: no such boot in this test's set; its jobs are {} (cargo xtask matrix lists them)",
            ids.join(", ")
        ),
    }
}

/// `cargo xtask test`'s boots: each profile (in the order given) on each
/// run of [`runs::QUICK_RUNS`] or, `full`, [`runs::FULL_RUNS`]
/// ([`runs::select`]), or [`runs::ci_boots`], or the one `job`; a summary
/// per boot, then, when there was more than one, one line per boot, the
/// combined KCIDB file (`target/tierkit/kcidb.json`) and the combined
/// totals line last.
///
/// The time table ([`time_table`], from `wall`) comes last; the totals
/// line, which [`run`] prints once after it, is the command's last line
/// (each boot's summary ends in its labelled line, `tierkit [numa]: ...`).
/// Returns whether all passed, and the totals.
fn test_all(
    host: Option<(bool, Duration)>,
    t: TestRequest,
    wall: &Timer,
    second: Option<lanes::Second>,
) -> Result<(bool, summary::Totals)> {
    if let ([one], true) = (&t.boots[..], t.cmd_tests.is_empty()) {
        let mut req = one.req.clone();
        req.host = host;
        let label = run_label(req.kernel.profile, req.kernel.kind, one.run.name);
        let r = boot::run(req)?;
        lanes::write_result(&r)?;
        let (ok, totals) = (r.ok, r.totals.unwrap_or_default());
        time_table(host, &[(label, r)]).report(wall.elapsed(), &util::out_dir());
        return Ok((ok, totals));
    }
    // With a second lane, this process runs lane 1's boots; lane 2's
    // results join after the run/shell tests ran here.
    let mut results = match &second {
        Some(second) => run_boots(&second.mine(), host),
        None => run_boots(&t.boots, host),
    };
    if !t.cmd_tests.is_empty() {
        results.push(run_cmd_tests(t.cmd_kernel, t.cmd_kvm, &t.cmd_tests));
    }
    if let Some(second) = second {
        results = second.finish(results)?;
    }
    println!();
    let mut all = summary::Totals::default();
    for (label, r) in &results {
        let t = r.totals.unwrap_or_default();
        all = all + t;
        say!("{label}: {}{}: {}", status(r), times(r), t.labelled(label));
    }
    let mut ok = results.iter().all(|(_, r)| r.ok);
    // The combined KCIDB file of every boot that wrote one.
    let dirs: Vec<&Path> = results
        .iter()
        .filter_map(|(_, r)| r.run_dir.as_deref())
        .collect();
    // Its problem is the report's own: it fails the command, not a test.
    if let Some(p) = crate::merge::write_combined_kcidb(&dirs, &util::out_dir().join("kcidb.json"))
    {
        say!("error: the combined KCIDB report: {p}");
        ok = false;
    }
    time_table(host, &results).report(wall.elapsed(), &util::out_dir());
    Ok((ok, all))
}

/// The tests of `run -- CMD` and `shell` ([`cmd_tests`]): this
/// xtask run as a user would, each its own guest, as harness tests.
pub(crate) fn run_cmd_tests(
    kernel: profile::KernelKind,
    kvm: Option<bool>,
    tests: &[cmd_tests::CmdTest],
) -> (String, GuestResult) {
    println!();
    say!(
        "===== xtask run/shell: {} test(s) of `run -- CMD` and `shell` =====",
        tests.len()
    );
    let t = crate::util::Timer::start();
    let r = match cmd_tests::run_all(kvm, kernel, tests) {
        Ok((tests, report_problem)) => GuestResult {
            ok: tests.iter().all(|t| t.passed) && report_problem.is_none(),
            totals: Some(summary::Totals::of(
                &crate::judge::ktap::Run::default(),
                &tests,
            )),
            boot: Some(t.elapsed()),
            cxl_setup: None,
            run_dir: Some(crate::util::out_dir().join("test-xtask-cmd")),
            error: None,
            report_problem,
            // Each test boots its own guest: each is a step.
            phases: tests
                .iter()
                .map(|u| {
                    let name = u.name.trim_start_matches("[harness] ").to_string();
                    (name, Duration::from_millis(u.duration_ms))
                })
                .collect(),
            slow_tests: Vec::new(),
            guest_parts: Vec::new(),
        },
        Err(e) => {
            eprintln!("\nerror (xtask run/shell): {e:#}");
            GuestResult::failed(format!("{e:#}"))
        }
    };
    ("xtask run/shell".into(), r)
}

/// `ok` or `FAILED`.
pub(crate) fn status(r: &GuestResult) -> &'static str {
    if r.ok {
        "ok"
    } else {
        "FAILED"
    }
}

/// ` (guest 1 min 2 s, CXL setup 3.4 s)`, or nothing.
pub(crate) fn times(r: &GuestResult) -> String {
    let mut time = r
        .boot
        .map(|b| format!(" (guest {}", fmt_dur(b)))
        .unwrap_or_default();
    if let Some(c) = r.cxl_setup {
        time.push_str(&format!(", CXL setup {c:.1} s"));
    }
    if !time.is_empty() {
        time.push(')');
    }
    time
}

/// Boots each of `boots` in turn, each labelled ([`run_label`]) with its
/// summary; the host tests count with the first. A boot that could not be
/// built or booted is one failure.
pub(crate) fn run_boots(
    boots: &[TestBoot],
    host: Option<(bool, Duration)>,
) -> Vec<(String, GuestResult)> {
    let mut results: Vec<(String, GuestResult)> = Vec::new();
    for (i, b) in boots.iter().enumerate() {
        let (profile, k, run) = (&b.req.kernel.profile, &b.req.kernel.kind, &b.run);
        println!();
        let why = if k.has_kunit() {
            run.why.to_string()
        } else {
            format!(
                "{} (userspace tests only: no KUnit in this kernel)",
                run.why
            )
        };
        say!(
            "===== {}, {profile} profile, {k} kernel ({}/{}): {why} =====",
            run.name,
            i + 1,
            boots.len(),
        );
        let label = run_label(*profile, *k, run.name);
        let mut req = b.req.clone();
        // Host tests count once, with the first boot.
        req.host = if i == 0 { host } else { None };
        let r = match boot::run(req) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("\nerror ({label}): {e}");
                for cause in e.chain().skip(1) {
                    eprintln!("  caused by: {cause}");
                }
                println!("{}", summary::Totals::ONE_FAILURE.labelled(&label));
                GuestResult::failed(format!("{e:#}"))
            }
        };
        results.push((label, r));
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::profile::{KernelKind, Profile};

    #[test]
    fn labels_name_the_kernel_and_profile_unless_default() {
        assert_eq!(
            run_label(Profile::Default, KernelKind::Tierkit, "numa"),
            "numa"
        );
        assert_eq!(
            run_label(Profile::Debug, KernelKind::Tierkit, "cxl"),
            "debug cxl"
        );
        assert_eq!(
            run_label(Profile::Default, KernelKind::Debian, "numa"),
            "debian numa"
        );
    }
}
