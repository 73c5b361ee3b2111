//! The tree a KTAP document parses into: [`Status`], [`Directive`],
//! [`Counts`], and the [`Document`]s, [`Suite`]s and [`Case`]s of a
//! [`super::Run`].

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

/// A test case, or a parameter of a parameterised case (then it sits in its
/// parent's `subcases`).
#[derive(Clone, Debug, Serialize)]
pub struct Case {
    /// The description from the result line, e.g. `node1_has_memory` or
    /// `size=2M node=1`. A case the log cut short before its result line gets
    /// a name from its last `# name: ...` diagnostic, or `#N (no result)`.
    pub name: String,
    /// The test number from the result line; `None` if it never reported.
    pub number: Option<usize>,
    pub status: Status,
    /// The directive after `#`, if any.
    pub directive: Option<Directive>,
    /// The text after the directive (skip reason), or diagnostic data after
    /// `#` when there was no directive.
    pub reason: Option<String>,
    /// The plan of a parameterised case (`1..N`), if it printed one.
    pub plan: Option<usize>,
    /// Parameters of a parameterised case.
    pub subcases: Vec<Case>,
    /// Diagnostic and interleaved lines that belong to this case, with the
    /// common indentation removed: `# case: ASSERTION FAILED at ...` etc.
    pub diagnostics: Vec<String>,
    /// Structural problems (plan mismatch, missing result line, ...).
    pub errors: Vec<String>,
    /// First and last console line (1-based) that belong to this case.
    pub start_line: usize,
    pub end_line: usize,
    /// How long the case ran, from the printk timestamps: from the line
    /// before it (the previous case's result, or the suite header) to its
    /// own result line. `None` without timestamps or a result line.
    pub duration_ms: Option<u64>,
}

impl Case {
    /// Leaf-level counts: this case itself if it has no subcases.
    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        if self.subcases.is_empty() {
            counts.add_status(self.status);
        } else {
            for sub in &self.subcases {
                counts.add(sub.counts());
            }
        }
        counts
    }
}

/// A KUnit suite: a top-level subtest of a KTAP document.
#[derive(Clone, Debug, Serialize)]
pub struct Suite {
    pub name: String,
    /// The suite number from its result line; `None` if it never reported.
    pub number: Option<usize>,
    pub status: Status,
    pub directive: Option<Directive>,
    /// Skip reason, e.g. for `ok 1 suite # SKIP no CXL memory`.
    pub reason: Option<String>,
    /// The suite's plan (`1..N`). KUnit always prints one for a suite it
    /// runs; a suite skipped or failed in `suite_init` has no header at all.
    pub plan: Option<usize>,
    pub cases: Vec<Case>,
    /// Lines inside the suite that belong to no case: attributes
    /// (`# module: tierkit`), `# suite: pass:...` and `# Totals: ...` lines,
    /// `# failed to initialize (-12)`.
    pub diagnostics: Vec<String>,
    /// KUnit's own `# Totals: pass:P fail:F skip:S total:T` line, if printed.
    pub totals: Option<Counts>,
    pub errors: Vec<String>,
    pub start_line: usize,
    pub end_line: usize,
}

impl Suite {
    /// Leaf-level counts. A suite without cases (skipped as a whole, or
    /// failed in `suite_init`) counts as one result.
    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        if self.cases.is_empty() {
            counts.add_status(self.status);
        } else {
            for case in &self.cases {
                counts.add(case.counts());
            }
        }
        counts
    }

    /// Every leaf case with its path inside the suite (`case` or
    /// `case.param`), in log order.
    pub fn leaves(&self) -> Vec<(String, &Case)> {
        fn walk<'a>(prefix: &str, case: &'a Case, out: &mut Vec<(String, &'a Case)>) {
            let path = if prefix.is_empty() {
                case.name.clone()
            } else {
                format!("{prefix}.{}", case.name)
            };
            if case.subcases.is_empty() {
                out.push((path, case));
            } else {
                for sub in &case.subcases {
                    walk(&path, sub, out);
                }
            }
        }
        let mut out = Vec::new();
        for case in &self.cases {
            walk("", case, &mut out);
        }
        out
    }
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
    pub suites: Vec<Suite>,
    /// Structural problems: missing plan, cut short, plan mismatch.
    pub errors: Vec<String>,
    pub start_line: usize,
    pub end_line: usize,
}
