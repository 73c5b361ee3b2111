//! The one walk over a boot's results: a parsed KUnit [`Run`] plus the
//! userspace tests ([`UserTest`]) become a flat list of [`Record`]s, in
//! report order. JUnit ([`crate::report::summary::junit_report`]) and KCIDB
//! ([`crate::report::kcidb`]) are both written from this list, so they always name
//! the same tests with the same outcome.
//!
//! Order and grouping: one group per KUnit suite (its leaf cases, or the
//! suite itself when it has none or when it failed while its cases passed,
//! then `(ktap)` for its KTAP problems), a
//! `kernel` group for failing crash reports and KTAP problems of the whole
//! log, and a `userspace` group.

use crate::judge::ktap::{Run, Status};
use serde::{Deserialize, Serialize};

/// How many `not ok` lines of a userspace test [`UserTest::failed_checks`]
/// keeps.
pub const FAILED_CHECKS: usize = 10;

/// One userspace test run by `/init` in the guest, reported by the marker
/// line `TIERKIT-USERTEST name rc=N`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserTest {
    pub name: String,
    pub passed: bool,
    /// It passed without checking anything: every check it reported was a
    /// skip (its `TIERKIT-JSON` line has `passed: 0, skipped: N > 0`), e.g.
    /// `tk-test-cxl` on a topology without CXL devices. Counts as skipped.
    #[serde(default)]
    pub skipped: bool,
    /// The exit code.
    pub rc: i32,
    /// The last lines of the test's output.
    pub output_tail: String,
    /// Its `not ok` lines, wherever they were in its output (the first
    /// [`FAILED_CHECKS`] of them), so a failure far from the end of a long
    /// output is still named in the summary.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_checks: Vec<String>,
    pub duration_ms: u64,
    /// Why it failed when its exit code does not say it (`timed out after
    /// 120 s`, `left 2 process(es) running after it exited`, `did not
    /// finish: ...`), or how a test of the runner met its expected verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What a record came to. Maps to JUnit (success, skipped, failure, error)
/// and to KCIDB's statuses (`PASS`, `SKIP`, `FAIL`, `ERROR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    Pass,
    Skip,
    /// The test ran and reported the code as faulty.
    Fail,
    /// The test did not complete (a crash cut it short, a kernel report,
    /// broken KTAP): the code's state is unknown.
    Error,
}

/// One test result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The group: a KUnit suite's name, `kernel` or `userspace` (JUnit's
    /// `<testsuite>` and `classname`).
    pub group: String,
    /// The test inside the group: `case`, `case.param`, the suite's own
    /// name for a suite without cases, `(ktap)`, `crash at console line N`,
    /// `ktap`, or a userspace test's name.
    pub name: String,
    pub outcome: Outcome,
    /// A one-line message (the assertion, `exit code 3`, the crash line).
    pub message: Option<String>,
    /// The kind of a kernel report (`oops`, `KASAN`, ...).
    pub kind: Option<String>,
    /// A longer description (diagnostics, the crash's details and trace).
    pub description: Option<String>,
    pub duration_ms: Option<u64>,
    /// The test's own output (KUnit diagnostics, a userspace test's tail).
    pub output: Option<String>,
    /// The console lines (1-based, inclusive) that are this test's, for a
    /// KUnit case: from its first line to its result line.
    pub console_lines: Option<(usize, usize)>,
}

impl Record {
    fn new(group: &str, name: impl Into<String>, outcome: Outcome) -> Record {
        Record {
            group: group.to_string(),
            name: name.into(),
            outcome,
            message: None,
            kind: None,
            description: None,
            duration_ms: None,
            output: None,
            console_lines: None,
        }
    }

    /// `group.name`, the test's full name.
    pub fn path(&self) -> String {
        format!("{}.{}", self.group, self.name)
    }
}

/// A KTAP status with its reason and diagnostics, as a record.
fn ktap_record(
    group: &str,
    name: &str,
    status: Status,
    reason: Option<&str>,
    diagnostics: &[String],
) -> Record {
    let outcome = match status {
        Status::Pass => Outcome::Pass,
        Status::Skip => Outcome::Skip,
        Status::Fail => Outcome::Fail,
        Status::Crashed => Outcome::Error,
    };
    let mut r = Record::new(group, name, outcome);
    match status {
        Status::Pass => {}
        Status::Skip => r.message = reason.map(str::to_string),
        Status::Fail => {
            // The assertion line is the most useful one-line message.
            let message = diagnostics
                .iter()
                .find(|d| d.contains("FAILED at"))
                .map_or("not ok", String::as_str);
            r.message = Some(message.trim().to_string());
            if !diagnostics.is_empty() {
                r.description = Some(diagnostics.join("\n"));
            }
        }
        Status::Crashed => {
            r.message = Some("crashed: no result line (the output was cut short)".into());
        }
    }
    r
}

/// Every result of one boot, in report order (see the module's doc).
pub fn walk(run: &Run, extra: &[UserTest]) -> Vec<Record> {
    let mut out = Vec::new();
    for suite in run.suites() {
        let group = suite.name.as_str();
        let leaves = suite.leaves();
        if leaves.is_empty() {
            // Skipped as a whole, or failed in suite_init: one record.
            out.push(ktap_record(
                group,
                group,
                suite.status,
                suite.reason.as_deref(),
                &suite.diagnostics,
            ));
        }
        for (path, case) in leaves {
            let mut r = ktap_record(
                group,
                &path,
                case.status,
                case.reason.as_deref(),
                &case.diagnostics,
            );
            r.duration_ms = case.duration_ms;
            if case.end_line >= case.start_line && case.start_line > 0 {
                r.console_lines = Some((case.start_line, case.end_line));
            }
            if !case.diagnostics.is_empty() {
                r.output = Some(case.diagnostics.join("\n"));
            }
            out.push(r);
        }
        if suite.fails_on_its_own() {
            // Its cases passed: the failure is the suite's own, a record
            // of its own so that it is counted and shown.
            let mut r = ktap_record(group, group, suite.status, None, &suite.diagnostics);
            r.message = Some("the suite failed after its cases passed".into());
            if !suite.diagnostics.is_empty() {
                r.output = Some(suite.diagnostics.join("\n"));
            }
            out.push(r);
        }
        if !suite.errors.is_empty() {
            let mut r = Record::new(group, "(ktap)", Outcome::Error);
            r.message = Some("KTAP problems".into());
            r.description = Some(suite.errors.join("\n"));
            out.push(r);
        }
    }

    for crash in run.failing_crashes() {
        let mut r = Record::new(
            "kernel",
            format!("crash at console line {}", crash.line),
            Outcome::Error,
        );
        r.message = Some(crash.message.clone());
        r.kind = Some(crash.kind.to_string());
        let mut description = crash.to_string();
        for line in crash
            .details
            .iter()
            .chain(&crash.rip)
            .chain(&crash.call_trace)
        {
            description.push('\n');
            description.push_str(line);
        }
        r.description = Some(description);
        out.push(r);
    }
    let problems = run.problems();
    if !problems.is_empty() {
        let mut r = Record::new("kernel", "ktap", Outcome::Error);
        r.message = Some("KTAP output is incomplete or inconsistent".into());
        r.description = Some(problems.join("\n"));
        out.push(r);
    }

    for test in extra {
        let outcome = if test.passed && test.skipped {
            Outcome::Skip
        } else if test.passed {
            Outcome::Pass
        } else {
            Outcome::Fail
        };
        let mut r = Record::new("userspace", test.name.as_str(), outcome);
        if outcome == Outcome::Fail {
            r.message = Some(
                test.reason
                    .clone()
                    .unwrap_or_else(|| format!("exit code {}", test.rc)),
            );
        }
        r.duration_ms = Some(test.duration_ms);
        if !test.output_tail.is_empty() {
            r.output = Some(test.output_tail.clone());
        }
        out.push(r);
    }
    out
}

/// Leaf-level totals over KUnit cases and userspace tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub passed: usize,
    /// Failed and crashed.
    pub failed: usize,
    pub skipped: usize,
}

impl Totals {
    /// One failure and nothing else: a boot, a check or a whole command
    /// that could not run counts so in a totals line.
    pub const ONE_FAILURE: Totals = Totals {
        passed: 0,
        failed: 1,
        skipped: 0,
    };

    /// Count a run and its userspace tests.
    pub fn of(run: &Run, extra: &[UserTest]) -> Totals {
        let counts = run.counts();
        let user_passed = extra.iter().filter(|t| t.passed).count();
        let user_skipped = extra.iter().filter(|t| t.passed && t.skipped).count();
        Totals {
            passed: counts.passed + user_passed - user_skipped,
            failed: counts.failed + counts.crashed + (extra.len() - user_passed),
            skipped: counts.skipped + user_skipped,
        }
    }

    /// `tierkit [cxl]: N passed, M failed, K skipped`: one topology's line
    /// when `cargo xtask test` runs several.
    pub fn labelled(&self, label: &str) -> String {
        self.to_string()
            .replacen("tierkit:", &format!("tierkit [{label}]:"), 1)
    }
}
