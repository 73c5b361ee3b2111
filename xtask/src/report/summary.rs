//! Presenting results: a compact summary for the terminal, JSON, and JUnit
//! XML for CI.
//!
//! Everything works on a parsed KUnit [`Run`] plus the userspace tests that
//! `/init` ran in the guest ([`UserTest`]). Counts are leaf-level: a
//! parameterised case counts each parameter, a suite skipped as a whole
//! counts once, and a case that crashed counts as failed.

use std::fmt::{self, Write as _};
use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use serde::Serialize;

use crate::judge::ktap::{Run, Status, Test};
use crate::judge::records::{self, Outcome, Record};

/// Diagnostic lines shown per failed case in the summary.
const SUMMARY_DIAGNOSTIC_LINES: usize = 20;
/// Output lines shown per failed userspace test in the summary.
const SUMMARY_OUTPUT_LINES: usize = 10;
/// Skipped cases listed by name in the summary.
const SUMMARY_SKIPPED: usize = 20;
/// Kernel reports quoted in the summary.
const SUMMARY_CRASHES: usize = 20;
/// Call-trace frames quoted per kernel report.
const SUMMARY_FRAMES: usize = 8;

/// The lines that quote a kernel report under its headline: what it says
/// (the access, the locks, the leaked object's owner), its `RIP:`, and the
/// first frames of its call trace without the reporting machinery
/// (`dump_stack`, `kasan_report`, `lock_acquire`, ...).
pub fn quote_crash(crash: &crate::judge::ktap::Crash) -> Vec<String> {
    let mut out: Vec<String> = crash.details.clone();
    out.extend(crash.rip.iter().cloned());
    let frames: Vec<&String> = crash
        .call_trace
        .iter()
        .filter(|f| !crate::judge::console::is_reporting_frame(f))
        .collect();
    // A trace of nothing but machinery is still better than none.
    let frames = if frames.is_empty() {
        crash.call_trace.iter().collect()
    } else {
        frames
    };
    out.extend(frames.into_iter().take(SUMMARY_FRAMES).cloned());
    out
}

/// The userspace tests are the judge's ([`crate::judge::records`]).
pub use crate::judge::records::UserTest;

pub use crate::judge::records::Totals;

/// Sum of two totals (the final line over several boots).
impl std::ops::Add for Totals {
    type Output = Totals;
    fn add(self, o: Totals) -> Totals {
        Totals {
            passed: self.passed + o.passed,
            failed: self.failed + o.failed,
            skipped: self.skipped + o.skipped,
        }
    }
}

impl fmt::Display for Totals {
    /// The totals line: `tierkit: N passed, M failed, K skipped`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tierkit: {} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        )
    }
}

/// Print [`format_summary`] to stdout.
pub fn print_summary(run: &Run, extra: &[UserTest]) {
    print!("{}", format_summary(run, extra));
}

/// [`print_summary`] for one of several topologies: its totals line is
/// [`Totals::labelled`], so that only the final, combined line starts with
/// `tierkit: `.
pub fn print_summary_labelled(run: &Run, extra: &[UserTest], label: &str) {
    let s = format_summary(run, extra);
    let body = s.trim_end().rsplit_once('\n').map_or("", |(b, _)| b);
    println!("{body}\n{}", Totals::of(run, extra).labelled(label));
}

/// How many of the slowest tests the summary names.
const SLOWEST: usize = 5;

/// The human summary: a table with passed/failed/skipped per suite (and a
/// `userspace` row), then failed cases with their diagnostics, skipped
/// cases with their reasons, kernel crashes, structural problems, and the
/// totals line last.
pub fn format_summary(run: &Run, extra: &[UserTest]) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_summary(&mut out, run, extra);
    out
}

fn write_summary(out: &mut String, run: &Run, extra: &[UserTest]) -> fmt::Result {
    let suites: Vec<&Test> = run.suites().collect();
    write_table(out, &suites, extra)?;
    write_slowest(out, &suites, extra)?;
    let leaves = leaf_results(&suites);
    write_failed(out, &leaves, extra)?;
    write_skipped(out, &leaves, extra)?;
    write_crashes(out, run)?;
    write_problems(out, run)?;
    writeln!(out, "\n{}", Totals::of(run, extra))
}

/// The table: passed, failed and skipped per suite, and the `userspace` row.
fn write_table(out: &mut String, suites: &[&Test], extra: &[UserTest]) -> fmt::Result {
    let width = suites
        .iter()
        .map(|s| s.name.len())
        .chain([5, "userspace".len()])
        .max()
        .unwrap_or(5);

    writeln!(
        out,
        "{:<width$}  {:>7} {:>7} {:>7}",
        "suite", "passed", "failed", "skipped"
    )?;
    for suite in suites {
        let c = suite.counts();
        let mut note = String::new();
        if suite.status == Status::Crashed {
            note.push_str("  CRASHED");
        } else if suite.status == Status::Fail && c.failed + c.crashed == 0 {
            note.push_str("  FAILED");
        }
        if !suite.errors.is_empty() {
            note.push_str("  (KTAP problems, see below)");
        }
        writeln!(
            out,
            "{:<width$}  {:>7} {:>7} {:>7}{note}",
            suite.name,
            c.passed,
            c.failed + c.crashed,
            c.skipped
        )?;
    }
    if suites.is_empty() {
        writeln!(out, "{:<width$}  (no KUnit suites ran)", "-")?;
    }
    if !extra.is_empty() {
        let passed = extra.iter().filter(|t| t.passed).count();
        let skipped = extra.iter().filter(|t| t.passed && t.skipped).count();
        writeln!(
            out,
            "{:<width$}  {:>7} {:>7} {:>7}",
            "userspace",
            passed - skipped,
            extra.len() - passed,
            skipped
        )?;
    }
    Ok(())
}

/// Every timed test of a boot, KUnit cases (`suite.case`) and userspace
/// tests (`userspace.NAME`) together, in milliseconds, slowest first.
pub fn timed_tests(run: &Run, extra: &[UserTest]) -> Vec<(u64, String)> {
    let suites: Vec<&Test> = run.suites().collect();
    timed_of(&suites, extra)
}

fn timed_of(suites: &[&Test], extra: &[UserTest]) -> Vec<(u64, String)> {
    let mut timed: Vec<(u64, String)> = suites
        .iter()
        .flat_map(|suite| {
            suite.leaves().into_iter().filter_map(|(path, case)| {
                Some((case.duration_ms?, format!("{}.{path}", suite.name)))
            })
        })
        .chain(
            extra
                .iter()
                .map(|t| (t.duration_ms, format!("userspace.{}", t.name))),
        )
        .collect();
    timed.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    timed
}

/// The slowest tests, KUnit cases and userspace tests together.
fn write_slowest(out: &mut String, suites: &[&Test], extra: &[UserTest]) -> fmt::Result {
    let timed = timed_of(suites, extra);
    if !timed.is_empty() {
        let top: Vec<String> = timed
            .iter()
            .take(SLOWEST)
            .map(|(ms, name)| format!("{name} {:.1} s", *ms as f64 / 1000.0))
            .collect();
        writeln!(out, "\nslowest {}: {}", top.len(), top.join(", "))?;
    }
    Ok(())
}

/// Failed cases with their diagnostics, failed userspace tests with the
/// end of their output.
fn write_failed(out: &mut String, leaves: &[Leaf], extra: &[UserTest]) -> fmt::Result {
    let failed: Vec<&Leaf> = leaves.iter().filter(|l| l.status.is_failure()).collect();
    let failed_users: Vec<&UserTest> = extra.iter().filter(|t| !t.passed).collect();
    if !failed.is_empty() || !failed_users.is_empty() {
        writeln!(out, "\nFailed:")?;
        for leaf in &failed {
            writeln!(out, "  {} {}", leaf.status, leaf.path)?;
            for line in summary_diagnostics(leaf.diagnostics) {
                writeln!(out, "      {line}")?;
            }
        }
        for test in &failed_users {
            match &test.reason {
                Some(r) => writeln!(
                    out,
                    "  FAIL userspace.{} ({r}; rc={}, {} ms)",
                    test.name, test.rc, test.duration_ms
                )?,
                None => writeln!(
                    out,
                    "  FAIL userspace.{} (rc={}, {} ms)",
                    test.name, test.rc, test.duration_ms
                )?,
            }
            let lines: Vec<&str> = test.output_tail.lines().collect();
            let tail = &lines[lines.len().saturating_sub(SUMMARY_OUTPUT_LINES)..];
            let earlier: Vec<&String> = test
                .failed_checks
                .iter()
                .filter(|c| !tail.contains(&c.as_str()))
                .collect();
            for line in &earlier {
                writeln!(out, "      {line}")?;
            }
            if !earlier.is_empty() {
                writeln!(out, "      [... the end of its output:]")?;
            }
            for line in tail {
                writeln!(out, "      {line}")?;
            }
        }
    }
    Ok(())
}

/// Skipped userspace tests and cases with their reasons.
fn write_skipped(out: &mut String, leaves: &[Leaf], extra: &[UserTest]) -> fmt::Result {
    let skipped: Vec<&Leaf> = leaves.iter().filter(|l| l.status == Status::Skip).collect();
    let skipped_users: Vec<&UserTest> = extra.iter().filter(|t| t.passed && t.skipped).collect();
    if !skipped.is_empty() || !skipped_users.is_empty() {
        writeln!(out, "\nSkipped:")?;
        for t in &skipped_users {
            let why = t
                .output_tail
                .lines()
                .find_map(|l| l.split_once("# SKIP ").map(|x| x.1))
                .unwrap_or("every check skipped");
            writeln!(out, "  userspace.{}: {why}", t.name)?;
        }
        for leaf in skipped.iter().take(SUMMARY_SKIPPED) {
            match leaf.reason {
                Some(reason) => writeln!(out, "  {}: {reason}", leaf.path)?,
                None => writeln!(out, "  {}", leaf.path)?,
            }
        }
        if skipped.len() > SUMMARY_SKIPPED {
            writeln!(out, "  ... and {} more", skipped.len() - SUMMARY_SKIPPED)?;
        }
    }
    Ok(())
}

/// Kernel crashes that fail the run, quoted, then kernel reports that do
/// not.
fn write_crashes(out: &mut String, run: &Run) -> fmt::Result {
    let failing: Vec<&crate::judge::ktap::Crash> = run.failing_crashes().collect();
    if !failing.is_empty() {
        writeln!(out, "\nKernel crashes:")?;
        for crash in failing.iter().take(SUMMARY_CRASHES) {
            writeln!(out, "  {crash}")?;
            for line in quote_crash(crash) {
                writeln!(out, "      {line}")?;
            }
        }
        if failing.len() > SUMMARY_CRASHES {
            writeln!(
                out,
                "  ... and {} more (all of them in the console log)",
                failing.len() - SUMMARY_CRASHES
            )?;
        }
    }
    let benign: Vec<&crate::judge::ktap::Crash> = run
        .crashes
        .iter()
        .filter(|c| c.not_a_failure.is_some())
        .collect();
    if !benign.is_empty() {
        writeln!(out, "\nKernel reports that are not failures:")?;
        for crash in &benign {
            writeln!(
                out,
                "  console line {}: {} ({})",
                crash.line,
                crash.message,
                crash.not_a_failure.unwrap_or_default()
            )?;
        }
    }
    Ok(())
}

/// Structural problems of the KTAP output.
fn write_problems(out: &mut String, run: &Run) -> fmt::Result {
    let problems = run.problems();
    if !problems.is_empty() {
        writeln!(out, "\nKTAP problems:")?;
        for problem in &problems {
            writeln!(out, "  {problem}")?;
        }
    }
    Ok(())
}

/// One leaf-level result: a case or parameter, or a suite without cases
/// (skipped as a whole, or failed in `suite_init`) or failing on its own.
struct Leaf<'a> {
    /// `suite`, `suite.case` or `suite.case.param`.
    path: String,
    status: Status,
    reason: Option<&'a str>,
    diagnostics: &'a [String],
}

/// All leaf-level results, in log order.
fn leaf_results<'a>(suites: &[&'a Test]) -> Vec<Leaf<'a>> {
    let mut out = Vec::new();
    for suite in suites {
        // A suite without cases, or one that failed while they passed.
        if suite.subtests.is_empty() || suite.fails_on_its_own() {
            out.push(Leaf {
                path: suite.name.clone(),
                status: suite.status,
                reason: suite.reason.as_deref(),
                diagnostics: &suite.diagnostics,
            });
        }
        for (path, case) in suite.leaves() {
            out.push(Leaf {
                path: format!("{}.{path}", suite.name),
                status: case.status,
                reason: case.reason.as_deref(),
                diagnostics: &case.diagnostics,
            });
        }
    }
    out
}

/// The diagnostics of a failed case worth showing in the summary: KUnit's
/// `# ...` lines and the lines that continue them (assertion details),
/// without interleaved console output such as a crash dump, which has its
/// own section. At most [`SUMMARY_DIAGNOSTIC_LINES`], the last ones.
fn summary_diagnostics(lines: &[String]) -> Vec<String> {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut kept: Vec<&str> = Vec::new();
    // The indentation of the last kept `#` line while its continuation
    // lines (indented at least as much) follow.
    let mut open: Option<usize> = None;
    for line in lines {
        let text = line.trim_start();
        // KTAP diagnostics are `# text`; the kernel's `#PF: ...` is not one.
        if text.starts_with("# ") || text == "#" {
            kept.push(line);
            open = Some(indent(line));
        } else if !text.is_empty() && open.is_some_and(|i| indent(line) >= i) {
            kept.push(line);
        } else {
            open = None;
        }
    }
    if kept.is_empty() {
        // No KUnit diagnostics: show the console lines before the result.
        kept = lines.iter().map(String::as_str).collect();
    }
    let mut out = Vec::new();
    let omitted = lines.len() - kept.len();
    let earlier = kept.len().saturating_sub(SUMMARY_DIAGNOSTIC_LINES);
    if omitted + earlier > 0 {
        out.push(format!(
            "[{} more console line(s) in the log]",
            omitted + earlier
        ));
    }
    let kept = &kept[earlier..];
    let common = kept.iter().map(|l| indent(l)).min().unwrap_or(0);
    out.extend(kept.iter().map(|l| l[common..].to_string()));
    out
}

/// The JSON document [`write_json`] writes.
#[derive(Serialize)]
struct JsonReport<'a> {
    totals: Totals,
    kunit: &'a Run,
    userspace: &'a [UserTest],
}

/// Write the run and the userspace tests as JSON:
/// `{ "totals": {...}, "kunit": <Run>, "userspace": [<UserTest>...] }`.
pub fn write_json(path: &Path, run: &Run, extra: &[UserTest]) -> anyhow::Result<()> {
    let report = JsonReport {
        totals: Totals::of(run, extra),
        kunit: run,
        userspace: extra,
    };
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut writer = BufWriter::new(file);
    serde_json::to_writer_pretty(&mut writer, &report)
        .with_context(|| format!("writing {}", path.display()))?;
    writeln!(writer)?;
    writer
        .flush()
        .with_context(|| format!("writing {}", path.display()))
}

/// Build the JUnit report as kunit_tool writes it
/// (tools/testing/kunit/kunit_junit.py), plus time: one `<testsuite>` per
/// KUnit suite with `tests`, `failures`, `errors` (crashed cases and KTAP
/// problems) and `skipped`, and one `<testcase>` per leaf case (`case` or
/// `case.param`: parameters are not nested suites), a `kernel` suite for
/// crashes and KTAP problems when there are any, and a `userspace` suite
/// for the userspace tests: one per group of [`records::walk`]. A suite
/// that failed while its cases passed has a case of its own name, so that
/// its failure is counted and shown (kunit_tool counts it, with no case).
/// Every case and suite has a `time` (0 where the log has no timing).
pub fn junit_report(name: &str, run: &Run, extra: &[UserTest]) -> Report {
    let mut report = Report::new(name);
    let mut suite: Option<(TestSuite, u64, usize)> = None;
    let close = |report: &mut Report, (mut ts, ms, skipped): (TestSuite, u64, usize)| {
        ts.set_time(Duration::from_millis(ms));
        ts.extra
            .insert("skipped".into(), skipped.to_string().into());
        report.add_test_suite(ts);
    };
    for r in records::walk(run, extra) {
        if suite.as_ref().is_some_and(|s| s.0.name.as_str() != r.group) {
            close(&mut report, suite.take().expect("checked"));
        }
        let s = suite.get_or_insert_with(|| (TestSuite::new(r.group.as_str()), 0, 0));
        s.0.add_test_case(junit_case(&r));
        s.1 += r.duration_ms.unwrap_or(0);
        s.2 += usize::from(r.outcome == Outcome::Skip);
    }
    if let Some(s) = suite {
        close(&mut report, s);
    }
    report
}

/// One record as a JUnit `<testcase>`.
fn junit_case(r: &Record) -> TestCase {
    let mut status = match r.outcome {
        Outcome::Pass => TestCaseStatus::success(),
        Outcome::Skip => TestCaseStatus::skipped(),
        Outcome::Fail => TestCaseStatus::non_success(NonSuccessKind::Failure),
        Outcome::Error => TestCaseStatus::non_success(NonSuccessKind::Error),
    };
    if let Some(m) = &r.message {
        status.set_message(m.as_str());
    }
    if let Some(d) = &r.description {
        status.set_description(d.as_str());
    } else if let (Outcome::Skip, Some(m)) = (r.outcome, &r.message) {
        // kunit_tool: `<skipped>reason</skipped>`.
        status.set_description(m.as_str());
    }
    if let Some(k) = &r.kind {
        status.set_type(k.as_str());
    }
    let mut tc = TestCase::new(r.name.as_str(), status);
    tc.set_classname(r.group.as_str());
    tc.set_time(Duration::from_millis(r.duration_ms.unwrap_or(0)));
    if let Some(out) = &r.output {
        tc.set_system_out(out.as_str());
    }
    tc
}

/// Write [`junit_report`] as JUnit XML; `name` is the report's name
/// (`tierkit-numa`, `tierkit-cxl`).
pub fn write_junit(path: &Path, name: &str, run: &Run, extra: &[UserTest]) -> anyhow::Result<()> {
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut writer = BufWriter::new(file);
    junit_report(name, run, extra)
        .serialize(&mut writer)
        .with_context(|| format!("writing {}", path.display()))?;
    writer
        .flush()
        .with_context(|| format!("writing {}", path.display()))
}
