//! The tree a KTAP document parses into: [`Status`], [`Directive`],
//! [`Counts`], and the [`Document`]s of a [`super::Run`], each a tree of
//! one node type, [`Test`] (suites, cases and parameters alike, as
//! kunit_tool's `Test`).

use std::fmt;

use serde::Serialize;

/// The outcome of a test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// `ok`.
    Pass,
    /// `not ok`, or `ok` while a subtest failed.
    Fail,
    /// `# SKIP`, or an expected failure (`not ok ... # TODO` / `# XFAIL`).
    Skip,
    /// No result line: the log ended, or a new document started, before the
    /// test reported. Usually a kernel crash; see [`super::Run::crashes`].
    Crashed,
}

impl Status {
    /// Whether this status should fail the run.
    pub fn is_failure(self) -> bool {
        matches!(self, Status::Fail | Status::Crashed)
    }

    /// A short upper-case label: PASS, FAIL, SKIP, CRASHED.
    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Skip => "SKIP",
            Status::Crashed => "CRASHED",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// A directive after `#` on a result line (KTAP v1 list).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Directive {
    Skip,
    Todo,
    Xfail,
    Timeout,
    Error,
}

impl Directive {
    pub(super) fn parse(word: &str) -> Option<Self> {
        Some(match word.to_ascii_uppercase().as_str() {
            "SKIP" => Directive::Skip,
            "TODO" => Directive::Todo,
            "XFAIL" => Directive::Xfail,
            "TIMEOUT" => Directive::Timeout,
            "ERROR" => Directive::Error,
            _ => return None,
        })
    }
}

/// Counts of leaf-level results: a case with subcases counts its subcases,
/// not itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub crashed: usize,
}

impl Counts {
    /// Count one result.
    pub fn add_status(&mut self, status: Status) {
        match status {
            Status::Pass => self.passed += 1,
            Status::Fail => self.failed += 1,
            Status::Skip => self.skipped += 1,
            Status::Crashed => self.crashed += 1,
        }
    }

    /// Add another set of counts to this one.
    pub fn add(&mut self, other: Counts) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.skipped += other.skipped;
        self.crashed += other.crashed;
    }
}

/// A test, as kunit_tool's `Test`: a suite (a top-level subtest of a
/// [`Document`]), a case (a suite's subtest) or a parameter of a
/// parameterised case (a case's subtest), with the subtests it ran.
#[derive(Clone, Debug)]
pub struct Test {
    /// The description from the result line, e.g. `tierkit_topology`,
    /// `node1_has_memory` or `size=2M node=1`. A test the log cut short
    /// before its result line gets a name from its header or its last
    /// `# name: ...` diagnostic, or `#N (no result)`.
    pub name: String,
    /// The test number from the result line; `None` if it never reported.
    pub number: Option<usize>,
    pub status: Status,
    /// The directive after `#`, if any.
    pub directive: Option<Directive>,
    /// The text after the directive (skip reason, e.g. for `ok 1 suite #
    /// SKIP no CXL memory`), or diagnostic data after `#` when there was no
    /// directive.
    pub reason: Option<String>,
    /// Its plan (`1..N`), if it printed one. KUnit always prints one for a
    /// suite it runs; a suite skipped or failed in `suite_init` has no
    /// header at all.
    pub plan: Option<usize>,
    /// Its subtests: a suite's cases, a parameterised case's parameters.
    pub subtests: Vec<Test>,
    /// Diagnostic and interleaved lines that belong to this test and to
    /// none of its subtests, with the common indentation removed: `# case:
    /// ASSERTION FAILED at ...`; in a suite, attributes (`# module:
    /// tierkit`), `# suite: pass:...` and `# Totals: ...` lines, `# failed
    /// to initialize (-12)`.
    pub diagnostics: Vec<String>,
    /// A suite's `# Totals: pass:P fail:F skip:S total:T` line from KUnit,
    /// if printed.
    pub totals: Option<Counts>,
    /// Structural problems (plan mismatch, missing result line, ...).
    pub errors: Vec<String>,
    /// First and last console line (1-based) that belong to this test.
    pub start_line: usize,
    pub end_line: usize,
    /// How long a case or parameter ran, from the printk timestamps: from
    /// the line before it (the previous case's result, or the suite
    /// header) to its own result line. `None` without timestamps or a
    /// result line, and for suites.
    pub duration_ms: Option<u64>,
}

impl Test {
    /// Leaf-level counts: this test itself if it has no subtests (a case,
    /// or a suite skipped as a whole or failed in `suite_init`). A test
    /// that failed while none of its subtests did counts its own failure
    /// once more, as kunit_tool's `bubble_up_test_results()` does.
    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        if self.subtests.is_empty() {
            counts.add_status(self.status);
        } else {
            for sub in &self.subtests {
                counts.add(sub.counts());
            }
            if self.fails_on_its_own_given(&counts) {
                counts.add_status(self.status);
            }
        }
        counts
    }

    /// The counts of its subtests alone (KUnit's `# Totals:`), without
    /// a failure of its own.
    pub fn subtest_counts(&self) -> Counts {
        let mut counts = Counts::default();
        for sub in &self.subtests {
            counts.add(sub.counts());
        }
        counts
    }

    /// Whether this test has subtests, none of which failed or crashed,
    /// and failed itself (a suite's exit, a leak check after its cases).
    pub fn fails_on_its_own(&self) -> bool {
        !self.subtests.is_empty() && self.fails_on_its_own_given(&self.subtest_counts())
    }

    fn fails_on_its_own_given(&self, subtests: &Counts) -> bool {
        self.status == Status::Fail && subtests.failed + subtests.crashed == 0
    }

    /// Every leaf below this test with its path inside it (`case` or
    /// `case.param`), in log order.
    pub fn leaves(&self) -> Vec<(String, &Test)> {
        fn walk<'a>(prefix: &str, test: &'a Test, out: &mut Vec<(String, &'a Test)>) {
            let path = if prefix.is_empty() {
                test.name.clone()
            } else {
                format!("{prefix}.{}", test.name)
            };
            if test.subtests.is_empty() {
                out.push((path, test));
            } else {
                for sub in &test.subtests {
                    walk(&path, sub, out);
                }
            }
        }
        let mut out = Vec::new();
        for sub in &self.subtests {
            walk("", sub, &mut out);
        }
        out
    }
}

/// A suite in `results.json`: its subtests are `cases`, it has `totals`.
#[derive(Serialize)]
struct SuiteJson<'a> {
    name: &'a str,
    number: Option<usize>,
    status: Status,
    directive: Option<Directive>,
    reason: &'a Option<String>,
    plan: Option<usize>,
    cases: Vec<CaseJson<'a>>,
    diagnostics: &'a [String],
    totals: Option<Counts>,
    errors: &'a [String],
    start_line: usize,
    end_line: usize,
}

/// A case or parameter in `results.json`: its subtests are `subcases`,
/// it has `duration_ms`.
#[derive(Serialize)]
struct CaseJson<'a> {
    name: &'a str,
    number: Option<usize>,
    status: Status,
    directive: Option<Directive>,
    reason: &'a Option<String>,
    plan: Option<usize>,
    subcases: Vec<CaseJson<'a>>,
    diagnostics: &'a [String],
    errors: &'a [String],
    start_line: usize,
    end_line: usize,
    duration_ms: Option<u64>,
}

impl<'a> CaseJson<'a> {
    fn of(t: &'a Test) -> CaseJson<'a> {
        CaseJson {
            name: &t.name,
            number: t.number,
            status: t.status,
            directive: t.directive,
            reason: &t.reason,
            plan: t.plan,
            subcases: t.subtests.iter().map(CaseJson::of).collect(),
            diagnostics: &t.diagnostics,
            errors: &t.errors,
            start_line: t.start_line,
            end_line: t.end_line,
            duration_ms: t.duration_ms,
        }
    }
}

impl<'a> SuiteJson<'a> {
    fn of(t: &'a Test) -> SuiteJson<'a> {
        SuiteJson {
            name: &t.name,
            number: t.number,
            status: t.status,
            directive: t.directive,
            reason: &t.reason,
            plan: t.plan,
            cases: t.subtests.iter().map(CaseJson::of).collect(),
            diagnostics: &t.diagnostics,
            totals: t.totals,
            errors: &t.errors,
            start_line: t.start_line,
            end_line: t.end_line,
        }
    }
}

/// A document's suites as `results.json` has them.
fn suites_json<S: serde::Serializer>(suites: &[Test], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(suites.iter().map(SuiteJson::of))
}

/// One KTAP document: the boot-time one, or one per module load.
#[derive(Clone, Debug, Serialize)]
pub struct Document {
    /// The version line (`KTAP version 1`, `TAP version 14`), or `None` when
    /// suites appeared without the outer header.
    pub version: Option<String>,
    /// The top-level plan: the number of suites (`1..0` at boot when no
    /// suites are built in).
    pub plan: Option<usize>,
    #[serde(serialize_with = "suites_json")]
    pub suites: Vec<Test>,
    /// Structural problems: missing plan, cut short, plan mismatch.
    pub errors: Vec<String>,
    pub start_line: usize,
    pub end_line: usize,
}
