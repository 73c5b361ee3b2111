//! KTAP parser for a whole serial console log.
//!
//! The guest's console interleaves three kinds of output: KUnit's KTAP
//! results, other `printk` output, and whatever userspace writes. This
//! module finds every KTAP document in such a log, turns it into a tree of
//! [`Suite`]s and [`Case`]s, spots kernel crashes anywhere in the log, and
//! decides whether the run passed ([`Run::verdict`]).
//!
//! # What the kernel prints (Linux 7.3)
//!
//! Formats follow `Documentation/dev-tools/ktap.rst` and what
//! `lib/kunit/{executor,test}.c` print. At boot, the executor prints one
//! document for the built-in suites, even when there are none:
//!
//! ```text
//! KTAP version 1
//! 1..0
//! ```
//!
//! Every module load that carries suites prints another document with one
//! suite per subtest. Suites and parameterised cases are nested documents,
//! indented by four spaces per level:
//!
//! ```text
//! KTAP version 1
//! 1..1
//!     KTAP version 1
//!     # Subtest: tierkit_topology
//!     1..2
//!     # node1_online: ASSERTION FAILED at module/tierkit.rs:40
//!     Expected node_online(1) to be true, but is false
//!     not ok 1 node1_online
//!         KTAP version 1
//!         # Subtest: weights
//!         ok 1 node0=25 node1=6
//!     # weights: pass:1 fail:0 skip:0 total:1
//!     ok 2 weights
//! # tierkit_topology: pass:1 fail:1 skip:0 total:2
//! # Totals: pass:1 fail:1 skip:0 total:2
//! not ok 1 tierkit_topology
//! ```
//!
//! Older kernels print the TAP-14 flavour (`TAP version 14`, `# Subtest:`
//! without a version line, tab indentation, `ok 1 - name`), and module
//! suites without the outer `KTAP version 1` / `1..N` header. Both parse.
//!
//! # How the parser works
//!
//! Each console line loses its `printk` prefix (`[    1.234567] `, an
//! optional `[    T1] ` caller id, an optional `<6>` level) and is
//! classified as a version, subtest header, plan, result, or other line.
//! "Other" lines are diagnostics of whatever test is open; that is how
//! interleaved `printk` noise is tolerated.
//!
//! Parsing is recursive descent, as in the kernel's own
//! `tools/testing/kunit/kunit_parser.py`: a test with children starts with
//! a version and/or `# Subtest:` line, then an optional plan, its children,
//! and finally its own result line. Unlike `kunit_parser.py`, this parser
//! reads any number of documents, and it uses indentation to notice when
//! output is cut short. A header line that is not indented deeper than the
//! open test's header starts a sibling or a new document, so the open test
//! never got its result line: it is marked [`Status::Crashed`]. The same
//! happens at the end of the log. This assumes that nested output is
//! indented, as KTAP requires and KUnit does.

use std::fmt;

use serde::Serialize;

use crate::printk;

/// How many diagnostic lines one test keeps. When a crash cuts a test short,
/// everything up to the end of the log becomes its diagnostics; the head
/// (the oops itself) and the tail are kept.
const MAX_DIAGNOSTICS_HEAD: usize = 60;
const MAX_DIAGNOSTICS_TAIL: usize = 140;

/// How many call-trace frames a [`Crash`] keeps.
const MAX_CALL_TRACE: usize = 24;

/// How many kernel reports a [`Verdict`] names one by one.
const MAX_CRASH_REASONS: usize = 20;

/// How many explaining lines a [`Crash`] keeps ([`Crash::details`]).
const MAX_DETAILS: usize = 8;

/// A crash report that has not reached its `---[ end` line is considered
/// over after this many lines.
const MAX_CRASH_REPORT_LINES: usize = 200;

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
    /// test reported. Usually a kernel crash; see [`Run::crashes`].
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
    fn parse(word: &str) -> Option<Self> {
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

pub use crate::console::CrashKind;

/// A kernel crash report found in the console log.
#[derive(Clone, Debug, Serialize)]
pub struct Crash {
    /// Console line (1-based) of the report's first marker.
    pub line: usize,
    pub kind: CrashKind,
    /// The first marker line, e.g. `BUG: kernel NULL pointer dereference,
    /// address: 0000000000000008`.
    pub message: String,
    /// The lines of the report that explain it, boilerplate left out: the
    /// access of a KASAN report (`Read of size 8 at addr ... by task ...`),
    /// the locks of a lockdep report, the owner of a leaked object, ...
    pub details: Vec<String>,
    /// The report's `RIP:` line, if any.
    pub rip: Option<String>,
    /// The first frames after `Call Trace:`.
    pub call_trace: Vec<String>,
    /// The test running when it happened: `suite`, `suite.case` or
    /// `suite.case.param`.
    pub during: Option<String>,
    /// Why this report does not fail the run
    /// ([`crate::console::not_a_failure`]); `None` for nearly all.
    pub not_a_failure: Option<&'static str>,
}

impl fmt::Display for Crash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kernel {} at console line {}: {}",
            self.kind, self.line, self.message
        )?;
        if let Some(during) = &self.during {
            write!(f, " (during {during})")?;
        }
        Ok(())
    }
}

/// Everything found in one console log.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Run {
    /// KTAP documents in log order.
    pub documents: Vec<Document>,
    /// Kernel crash reports in log order.
    pub crashes: Vec<Crash>,
    /// KUnit's own complaints: `kunit: disabled`, `kunit executor: ...`,
    /// `kunit module: error filtering suites: ...`.
    pub kunit_errors: Vec<String>,
    /// Number of lines in the log.
    pub lines: usize,
}

/// The pass/fail decision for a [`Run`], with the reasons for a failure.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// Why the run failed; empty when it passed.
    pub reasons: Vec<String>,
}

impl Verdict {
    /// True when nothing failed.
    pub fn is_ok(&self) -> bool {
        self.reasons.is_empty()
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_ok() {
            return f.write_str("KUnit: all good");
        }
        write!(f, "KUnit run failed:")?;
        for reason in &self.reasons {
            write!(f, "\n  - {reason}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Verdict {}

impl Run {
    /// Parse a whole console log.
    pub fn parse(log: &str) -> Run {
        let lines: Vec<Line> = log
            .lines()
            .enumerate()
            .map(|(i, raw)| Line::classify(i + 1, raw))
            .collect();
        let crashes = scan_crashes(&lines);
        let kunit_errors = lines
            .iter()
            .filter(|l| is_kunit_error(&l.text))
            .map(|l| l.text.trim().to_string())
            .collect();
        let documents = Parser {
            lines: &lines,
            pos: 0,
        }
        .documents();
        let mut run = Run {
            documents,
            crashes,
            kunit_errors,
            lines: lines.len(),
        };
        let times: Vec<Option<u64>> = log.lines().map(printk::micros).collect();
        for doc in &mut run.documents {
            for suite in &mut doc.suites {
                set_durations(suite.start_line, &mut suite.cases, &times);
            }
        }
        for i in 0..run.crashes.len() {
            let mut during = run.test_at_line(run.crashes[i].line);
            // A case the crash cut short has no result line, hence no name
            // (`#3 (no result)`); a Rust case's wrapper in the call trace
            // has it.
            if let Some(d) = &mut during {
                if let Some(case) = rust_case_in_trace(&run.crashes[i].call_trace) {
                    if let Some((suite_and_parents, last)) = d.rsplit_once('.') {
                        if last.ends_with("(no result)") {
                            *d = format!("{suite_and_parents}.{case}");
                        }
                    }
                }
            }
            run.crashes[i].during = during;
        }
        run
    }

    /// All suites of all documents, in log order.
    pub fn suites(&self) -> impl Iterator<Item = &Suite> {
        self.documents.iter().flat_map(|d| d.suites.iter())
    }

    /// The kernel reports that fail the run: all but the few
    /// [`crate::console::not_a_failure`] explains.
    pub fn failing_crashes(&self) -> impl Iterator<Item = &Crash> {
        self.crashes.iter().filter(|c| c.not_a_failure.is_none())
    }

    /// Leaf-level counts over all suites.
    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        for suite in self.suites() {
            counts.add(suite.counts());
        }
        counts
    }

    /// Structural problems: KUnit's own errors, and document, suite and case
    /// errors (missing plan, plan mismatch, output cut short, ...), each
    /// prefixed with where it was found. Failed tests and crashes are not
    /// included.
    pub fn problems(&self) -> Vec<String> {
        fn case_errors(path: &str, case: &Case, out: &mut Vec<String>) {
            let path = format!("{path}.{}", case.name);
            out.extend(case.errors.iter().map(|e| format!("{path}: {e}")));
            for sub in &case.subcases {
                case_errors(&path, sub, out);
            }
        }
        let mut out: Vec<String> = self
            .kunit_errors
            .iter()
            .map(|e| format!("KUnit reported: {e}"))
            .collect();
        for doc in &self.documents {
            out.extend(
                doc.errors
                    .iter()
                    .map(|e| format!("KTAP document at line {}: {e}", doc.start_line)),
            );
            for suite in &doc.suites {
                out.extend(suite.errors.iter().map(|e| format!("{}: {e}", suite.name)));
                for case in &suite.cases {
                    case_errors(&suite.name, case, &mut out);
                }
            }
        }
        out
    }

    /// Decide whether the run passed. It fails on any failed or crashed
    /// case or suite, any kernel crash report, any structural problem (see
    /// [`Run::problems`]), and, when `expect_suites` is set, when no suite
    /// ran at all (module not loaded, filter too narrow, `quiet` console).
    pub fn verdict(&self, expect_suites: bool) -> Verdict {
        let mut reasons = Vec::new();
        for suite in self.suites() {
            let mut any_case_failed = false;
            for (path, case) in suite.leaves() {
                if case.status.is_failure() {
                    any_case_failed = true;
                    let what = match case.status {
                        Status::Crashed => "crashed (no result line)",
                        _ => "failed",
                    };
                    reasons.push(format!("{}.{path} {what}", suite.name));
                }
            }
            if suite.status.is_failure() && !any_case_failed {
                let what = match suite.status {
                    Status::Crashed => "crashed (no result line)",
                    _ => "failed",
                };
                reasons.push(format!("suite {} {what}", suite.name));
            }
        }
        let failing: Vec<&Crash> = self.failing_crashes().collect();
        reasons.extend(
            failing
                .iter()
                .take(MAX_CRASH_REASONS)
                .map(|c| c.to_string()),
        );
        if failing.len() > MAX_CRASH_REASONS {
            reasons.push(format!(
                "... and {} more kernel reports (all of them in the console log)",
                failing.len() - MAX_CRASH_REASONS
            ));
        }
        reasons.extend(self.problems());
        if expect_suites && self.suites().next().is_none() {
            reasons.push(
                "no KUnit suite ran: was the module loaded, is the console `quiet`, \
                 or does kunit.filter_glob match nothing?"
                    .to_string(),
            );
        }
        Verdict { reasons }
    }

    /// The test that was running at a console line: the deepest suite, case
    /// or parameter whose line span contains it, as a dotted path.
    pub fn test_at_line(&self, line: usize) -> Option<String> {
        fn find(case: &Case, line: usize, path: &mut String) {
            for sub in &case.subcases {
                if sub.start_line <= line && line <= sub.end_line {
                    path.push('.');
                    path.push_str(&sub.name);
                    find(sub, line, path);
                    return;
                }
            }
        }
        let suite = self
            .suites()
            .find(|s| s.start_line <= line && line <= s.end_line)?;
        let mut path = suite.name.clone();
        if let Some(case) = suite
            .cases
            .iter()
            .find(|c| c.start_line <= line && line <= c.end_line)
        {
            path.push('.');
            path.push_str(&case.name);
            find(case, line, &mut path);
        }
        Some(path)
    }
}

// ---------------------------------------------------------------------------
// Line classification
// ---------------------------------------------------------------------------

/// A parsed `ok N name # DIRECTIVE reason` line.
#[derive(Clone, Debug)]
struct ResultLine {
    ok: bool,
    number: usize,
    name: String,
    directive: Option<Directive>,
    reason: Option<String>,
}

impl ResultLine {
    /// The status this line reports on its own (before looking at subtests).
    fn status(&self) -> Status {
        match (self.directive, self.ok) {
            (Some(Directive::Skip), _) => Status::Skip,
            // An expected failure is not a failure; count it as skipped.
            (Some(Directive::Todo | Directive::Xfail), false) => Status::Skip,
            (_, true) => Status::Pass,
            (_, false) => Status::Fail,
        }
    }

    fn parse(text: &str) -> Option<ResultLine> {
        let (ok, rest) = if let Some(rest) = text.strip_prefix("not ok ") {
            (false, rest)
        } else if let Some(rest) = text.strip_prefix("ok ") {
            (true, rest)
        } else {
            return None;
        };
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let number = rest[..digits].parse().ok()?;
        let rest = &rest[digits..];
        // The number must end at a word boundary: "ok 12abc" is no result.
        if !(rest.is_empty() || rest.starts_with(' ')) {
            return None;
        }
        let rest = rest.trim_start();
        // TAP 13/14 put a dash between number and description.
        let rest = rest
            .strip_prefix("- ")
            .or_else(|| (rest == "-").then_some(""))
            .unwrap_or(rest);
        let (name, directive, reason) = split_directive(rest);
        Some(ResultLine {
            ok,
            number,
            name,
            directive,
            reason,
        })
    }
}

/// Split `name # DIRECTIVE reason` into its parts. The description cannot
/// contain ` #`, so the first ` #` starts the directive part. A bare `#` in
/// a name (`node#1`) stays in the name.
fn split_directive(rest: &str) -> (String, Option<Directive>, Option<String>) {
    let hash = if rest.starts_with('#') {
        Some(0)
    } else {
        rest.find(" #").map(|i| i + 1)
    };
    let Some(hash) = hash else {
        return (rest.trim().to_string(), None, None);
    };
    let name = rest[..hash].trim().to_string();
    let tail = rest[hash + 1..].trim();
    let word_len = tail
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(tail.len());
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_string());
    match Directive::parse(&tail[..word_len]) {
        Some(d) => (name, Some(d), non_empty(tail[word_len..].trim())),
        None => (name, None, non_empty(tail)),
    }
}

/// What a console line is, as far as KTAP goes.
#[derive(Clone, Debug)]
enum Kind {
    /// `KTAP version 1`, `TAP version 14`.
    Version,
    /// `# Subtest: name`.
    Subtest(String),
    /// `1..N`.
    Plan(usize),
    /// `ok N name`, `not ok N name # SKIP reason`.
    Result(ResultLine),
    /// Anything else: a diagnostic or unrelated output.
    Other,
}

/// One console line, with its `printk` prefix removed.
#[derive(Clone, Debug)]
struct Line {
    /// 1-based line number in the log.
    no: usize,
    /// The text after the `printk` prefix, trailing white space removed.
    text: String,
    /// Leading white space characters (a tab counts as one).
    indent: usize,
    kind: Kind,
}

impl Line {
    fn classify(no: usize, raw: &str) -> Line {
        let text = printk::strip_prefix(raw).trim_end().to_string();
        let body = text.trim_start();
        let indent = text.len() - body.len();
        let kind = if let Some(rest) = body
            .strip_prefix("KTAP version ")
            .or_else(|| body.strip_prefix("TAP version "))
        {
            if !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()) {
                Kind::Version
            } else {
                Kind::Other
            }
        } else if let Some(name) = body.strip_prefix("# Subtest:") {
            Kind::Subtest(name.trim().to_string())
        } else if let Some(plan) = parse_plan(body) {
            Kind::Plan(plan)
        } else if let Some(result) = ResultLine::parse(body) {
            Kind::Result(result)
        } else {
            Kind::Other
        };
        Line {
            no,
            text,
            indent,
            kind,
        }
    }

    fn is_header(&self) -> bool {
        matches!(self.kind, Kind::Version | Kind::Subtest(_))
    }
}

/// `1..N`, optionally followed by ` # ...`.
fn parse_plan(body: &str) -> Option<usize> {
    let rest = body.strip_prefix("1..")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let tail = &rest[digits..];
    if !(tail.is_empty() || tail.starts_with(' ')) {
        return None;
    }
    rest[..digits].parse().ok()
}

/// Sets `duration_ms` of `cases` (and their subcases): each runs from the
/// line before it, `prev_line` for the first, to its own result line.
fn set_durations(mut prev_line: usize, cases: &mut [Case], times: &[Option<u64>]) {
    let at = |line: usize| {
        line.checked_sub(1)
            .and_then(|i| times.get(i).copied().flatten())
    };
    for case in cases {
        set_durations(prev_line, &mut case.subcases, times);
        if case.number.is_some() {
            if let (Some(from), Some(to)) = (at(prev_line), at(case.end_line)) {
                case.duration_ms = Some(to.saturating_sub(from) / 1000);
            }
        }
        prev_line = case.end_line;
    }
}

/// The KUnit case whose wrapper is in a call trace: the `#[kunit_tests]`
/// macro of Rust's kernel crate runs case `foo` through
/// `kunit_rust_wrapper_foo`, whose (mangled) symbol names it.
fn rust_case_in_trace(trace: &[String]) -> Option<String> {
    const WRAPPER: &str = "kunit_rust_wrapper_";
    trace.iter().find_map(|f| {
        let at = f.find(WRAPPER)?;
        // In a v0-mangled symbol the identifier is preceded by its length
        // (`26kunit_rust_wrapper_clear_1g`), and other path parts may follow
        // it directly; a demangled one ends at a non-identifier character.
        let digits = f[..at].bytes().rev().take_while(u8::is_ascii_digit).count();
        let ident_len = f[at - digits..at].parse::<usize>().ok();
        let rest = &f[at + WRAPPER.len()..];
        let name: String = match ident_len {
            Some(n) if n > WRAPPER.len() && n - WRAPPER.len() <= rest.len() => rest
                .get(..n - WRAPPER.len())
                .unwrap_or_default()
                .to_string(),
            _ => rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect(),
        };
        (!name.is_empty()).then_some(name)
    })
}

/// `kunit: disabled`, `kunit executor: ...`, `kunit module: ...`.
fn is_kunit_error(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("kunit: ") || t.starts_with("kunit executor: ") || t.starts_with("kunit module: ")
}

// ---------------------------------------------------------------------------
// Crash reports
// ---------------------------------------------------------------------------

/// Find crash reports, by the patterns of [`crate::console`]. One report (a
/// BUG, its `Oops:` line, `RIP:` and call trace; a debugobjects message and
/// its WARNING) gives one [`Crash`]; a panic always starts a new one, and
/// so does a warning unless it carries an open debugobjects or list report.
/// A report ends at its `---[ end ...` line (or KASAN's closing `=` row). A
/// `RIP:` line outside a report starts one only if no report came shortly
/// before it: x86 repeats the registers after `---[ end trace ...]---` as an
/// "executive summary".
fn scan_crashes(lines: &[Line]) -> Vec<Crash> {
    let mut crashes: Vec<Crash> = Vec::new();
    // Index into `crashes` of the report still open.
    let mut open: Option<usize> = None;
    let mut in_trace = false;
    let mut injected = crate::console::InjectedDumps::default();
    for line in lines {
        let t = line.text.trim();
        let recent = crashes
            .last()
            .is_some_and(|c| line.no <= c.line + MAX_CRASH_REPORT_LINES);
        if !recent {
            open = None;
            in_trace = false;
        }
        if let Some(kind) = crate::console::ClassifyInjected::classify(&mut injected, t) {
            let merge = match (kind, open) {
                (CrashKind::Other, _) => recent,
                (_, Some(i)) => crate::console::merges_into(kind, crashes[i].kind),
                _ => false,
            };
            if merge {
                if let Some(i) = open {
                    if kind == CrashKind::Other && crashes[i].rip.is_none() {
                        crashes[i].rip = Some(t.to_string());
                    }
                }
            } else {
                crashes.push(Crash {
                    line: line.no,
                    kind,
                    message: t.to_string(),
                    details: Vec::new(),
                    rip: (kind == CrashKind::Other).then(|| t.to_string()),
                    call_trace: Vec::new(),
                    during: None,
                    not_a_failure: None,
                });
                open = Some(crashes.len() - 1);
                in_trace = false;
            }
            continue;
        }
        let Some(i) = open else { continue };
        if crate::console::ends_report(t) {
            open = None;
            in_trace = false;
        } else if crate::console::starts_trace(t) {
            // Only the first trace: KASAN's "Allocated by task" and
            // "Freed by task" traces follow the one of the bad access.
            in_trace = crashes[i].call_trace.is_empty();
        } else if in_trace {
            if t.starts_with("</TASK>") || t.is_empty() {
                in_trace = false;
            } else if t.contains("+0x") && crashes[i].call_trace.len() < MAX_CALL_TRACE {
                crashes[i].call_trace.push(t.to_string());
            }
        } else if crashes[i].call_trace.is_empty()
            && crashes[i].details.len() < MAX_DETAILS
            && crate::console::is_detail(t)
            && !t.starts_with("RIP: ")
        {
            crashes[i].details.push(t.to_string());
        }
    }
    for c in &mut crashes {
        c.not_a_failure = crate::console::not_a_failure(c.kind, &c.call_trace);
    }
    crashes
}

// ---------------------------------------------------------------------------
// The parser
// ---------------------------------------------------------------------------

/// A test while it is being parsed: a suite, a case, or a parameter.
#[derive(Debug)]
struct Node {
    name: String,
    number: Option<usize>,
    status: Status,
    directive: Option<Directive>,
    reason: Option<String>,
    /// Whether it had a version or `# Subtest:` header (may have children).
    headed: bool,
    plan: Option<usize>,
    children: Vec<Node>,
    diagnostics: Vec<String>,
    errors: Vec<String>,
    start_line: usize,
    end_line: usize,
}

impl Node {
    fn new(start_line: usize) -> Node {
        Node {
            name: String::new(),
            number: None,
            status: Status::Crashed,
            directive: None,
            reason: None,
            headed: false,
            plan: None,
            children: Vec::new(),
            diagnostics: Vec::new(),
            errors: Vec::new(),
            start_line,
            end_line: start_line,
        }
    }

    fn into_case(self) -> Case {
        Case {
            name: self.name,
            number: self.number,
            status: self.status,
            directive: self.directive,
            reason: self.reason,
            plan: self.plan,
            subcases: self.children.into_iter().map(Node::into_case).collect(),
            diagnostics: tidy_diagnostics(self.diagnostics),
            errors: self.errors,
            start_line: self.start_line,
            end_line: self.end_line,
            duration_ms: None,
        }
    }

    fn into_suite(self) -> Suite {
        let diagnostics = tidy_diagnostics(self.diagnostics);
        let totals = diagnostics.iter().rev().find_map(|d| parse_totals(d));
        let mut errors = self.errors;
        if self.headed && self.plan.is_none() {
            errors.push("missing plan (no `1..N` line)".to_string());
        }
        let mut suite = Suite {
            name: self.name,
            number: self.number,
            status: self.status,
            directive: self.directive,
            reason: self.reason,
            plan: self.plan,
            cases: self.children.into_iter().map(Node::into_case).collect(),
            diagnostics,
            totals,
            errors,
            start_line: self.start_line,
            end_line: self.end_line,
        };
        if let Some(totals) = suite.totals {
            let parsed = suite.counts();
            let matches = totals.passed == parsed.passed
                && totals.failed == parsed.failed + parsed.crashed
                && totals.skipped == parsed.skipped;
            if !matches {
                suite.errors.push(format!(
                    "KUnit's totals (pass:{} fail:{} skip:{}) disagree with the results \
                     parsed (pass:{} fail:{} skip:{}); were console lines lost?",
                    totals.passed,
                    totals.failed,
                    totals.skipped,
                    parsed.passed,
                    parsed.failed + parsed.crashed,
                    parsed.skipped
                ));
            }
        }
        suite
    }
}

/// Parse `# Totals: pass:P fail:F skip:S total:T`.
fn parse_totals(line: &str) -> Option<Counts> {
    let rest = line.trim().strip_prefix("# Totals:")?;
    let mut counts = Counts::default();
    for field in rest.split_whitespace() {
        let (key, value) = field.split_once(':')?;
        let value: usize = value.parse().ok()?;
        match key {
            "pass" => counts.passed = value,
            "fail" => counts.failed = value,
            "skip" => counts.skipped = value,
            _ => {}
        }
    }
    Some(counts)
}

/// Remove the indentation all lines share (like Python's `textwrap.dedent`)
/// and bound the number of lines kept.
fn tidy_diagnostics(lines: Vec<String>) -> Vec<String> {
    let common = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let mut out: Vec<String> = lines
        .into_iter()
        .map(|l| l.get(common..).unwrap_or("").to_string())
        .collect();
    let max = MAX_DIAGNOSTICS_HEAD + MAX_DIAGNOSTICS_TAIL;
    if out.len() > max {
        let omitted = out.len() - max;
        let tail = out.split_off(out.len() - MAX_DIAGNOSTICS_TAIL);
        out.truncate(MAX_DIAGNOSTICS_HEAD);
        out.push(format!("[... {omitted} lines omitted ...]"));
        out.extend(tail);
    }
    out
}

/// If a cut-short test printed `# name: ...` diagnostics, take its name
/// from the last of them (KUnit prefixes test messages that way).
fn guess_name(diagnostics: &[String], number: usize) -> String {
    diagnostics
        .iter()
        .rev()
        .find_map(|d| {
            let rest = d.trim_start().strip_prefix("# ")?;
            let (name, _) = rest.split_once(": ")?;
            let plausible = !name.is_empty()
                && !name.contains(char::is_whitespace)
                && name != "Subtest"
                && name != "Totals";
            plausible.then(|| name.to_string())
        })
        .unwrap_or_else(|| format!("#{number} (no result)"))
}

/// Where the children of an open test (or the suites of a document) stop.
#[derive(Clone, Copy, Debug)]
struct Scope {
    /// A version or `# Subtest:` line indented at most this much belongs to
    /// a sibling or an ancestor (`None`: any indentation nests).
    header_max: Option<usize>,
    /// A result line indented less than this is the open test's own, or an
    /// ancestor's; it belongs to no child.
    result_min: usize,
    /// A document header (a version line not followed by `# Subtest:`)
    /// indented at most this much starts a new document.
    doc_max: Option<usize>,
}

/// Why a test has no result line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    /// The log ended.
    Eof,
    /// A header that is not nested in the open test: a sibling, or a new
    /// document.
    Boundary,
}

struct Parser<'a> {
    lines: &'a [Line],
    pos: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&'a Line> {
        self.lines.get(self.pos)
    }

    /// The number of the current line, or one past the last line.
    fn line_no(&self) -> usize {
        self.peek().map_or(self.lines.len() + 1, |l| l.no)
    }

    /// Consume "other" lines and return their text.
    fn diagnostics(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(
            line @ Line {
                kind: Kind::Other, ..
            },
        ) = self.peek()
        {
            out.push(line.text.clone());
            self.pos += 1;
        }
        out
    }

    /// Like [`Parser::diagnostics`], but a plan line where no plan can be
    /// (between tests) counts as a diagnostic too.
    fn diagnostics_between_tests(&mut self) -> Vec<String> {
        let mut out = self.diagnostics();
        while let Some(
            line @ Line {
                kind: Kind::Plan(_),
                ..
            },
        ) = self.peek()
        {
            out.push(line.text.clone());
            self.pos += 1;
            out.extend(self.diagnostics());
        }
        out
    }

    /// Consume a plan line if one is next.
    fn plan(&mut self) -> Option<usize> {
        match self.peek() {
            Some(Line {
                kind: Kind::Plan(n),
                ..
            }) => {
                self.pos += 1;
                Some(*n)
            }
            _ => None,
        }
    }

    /// The index of the next line at or after `pos` that is not an "other"
    /// line.
    fn next_ktap_pos(&self, pos: usize) -> Option<usize> {
        (pos..self.lines.len()).find(|&i| !matches!(self.lines[i].kind, Kind::Other))
    }

    /// Whether the version line at `pos` heads a document rather than a
    /// suite, i.e. the next KTAP line is not `# Subtest:`.
    fn is_document_header(&self, pos: usize) -> bool {
        matches!(self.lines[pos].kind, Kind::Version)
            && !self
                .next_ktap_pos(pos + 1)
                .is_some_and(|i| matches!(self.lines[i].kind, Kind::Subtest(_)))
    }

    /// Whether the current line (a KTAP line) cannot belong to a child of
    /// the test or document whose scope this is.
    fn ends_scope(&self, line: &Line, scope: Scope) -> bool {
        match &line.kind {
            Kind::Version | Kind::Subtest(_) => {
                scope.header_max.is_some_and(|max| line.indent <= max)
                    || scope
                        .doc_max
                        .is_some_and(|max| line.indent <= max && self.is_document_header(self.pos))
            }
            Kind::Result(_) => line.indent < scope.result_min,
            _ => false,
        }
    }

    /// Parse every document in the log.
    fn documents(mut self) -> Vec<Document> {
        let mut docs = Vec::new();
        while let Some(line) = self.peek() {
            if line.is_header() {
                docs.push(self.document());
            } else {
                // Outside any document: unrelated output.
                self.pos += 1;
            }
        }
        docs
    }

    /// Parse one document, starting at a version or `# Subtest:` line.
    fn document(&mut self) -> Document {
        let first = self
            .peek()
            .expect("document() called at the end of the log");
        let start_line = first.no;
        let mut errors = Vec::new();
        let explicit = self.is_document_header(self.pos);
        let (version, plan, scope) = if explicit {
            self.pos += 1;
            self.diagnostics();
            let plan = self.plan();
            if plan.is_none() {
                errors.push("missing plan (no `1..N` line after the version line)".to_string());
            }
            let scope = Scope {
                header_max: Some(first.indent),
                result_min: 0,
                doc_max: Some(first.indent),
            };
            (Some(first.text.trim().to_string()), plan, scope)
        } else {
            // Suites without the outer header, as older kernels print them
            // at module load. Suites are as indented as the first one; a
            // less indented header, or any document header, ends the
            // document.
            let scope = Scope {
                header_max: first.indent.checked_sub(1),
                result_min: 0,
                doc_max: Some(first.indent),
            };
            (None, None, scope)
        };

        let mut suites: Vec<Node> = Vec::new();
        loop {
            if plan.is_some_and(|p| suites.len() >= p) && !self.extra_suite_follows(first.indent) {
                break;
            }
            let start = self.line_no();
            // Output between suites (or between documents) is not kept.
            self.diagnostics_between_tests();
            let Some(line) = self.peek() else {
                break;
            };
            if self.ends_scope(line, scope) {
                break;
            }
            // Suite numbers restart in every document; without the header
            // one cannot tell where a module's suites end, so do not check.
            let expected = explicit.then_some(suites.len() + 1);
            suites.push(self.test(start, expected, Vec::new(), scope.result_min));
        }

        if let Some(p) = plan {
            let reported = suites.iter().filter(|s| s.number.is_some()).count();
            if reported < p {
                // Whatever stopped the last suite stops the document.
                let why = match self.peek() {
                    Some(_) => "a new KTAP document starts",
                    None => "the log ends",
                };
                errors.push(format!(
                    "cut short: plan 1..{p} but {why} after {reported} suite result(s)"
                ));
            } else if suites.len() > p {
                errors.push(format!(
                    "plan mismatch: plan 1..{p} but {} suites",
                    suites.len()
                ));
            }
        }
        let end_line = suites
            .last()
            .map_or(start_line, |s| s.end_line.max(start_line));
        Document {
            version,
            plan,
            suites: suites.into_iter().map(Node::into_suite).collect(),
            errors,
            start_line,
            end_line,
        }
    }

    /// After a document's plan is complete: whether the next KTAP line is
    /// nevertheless another suite of it, so that the surplus is reported
    /// rather than mistaken for a new document.
    ///
    /// A suite header nested deeper than the document header qualifies,
    /// unless the suite reports number 1: then it is the first suite of a
    /// document without the outer header (older kernels' module loads).
    fn extra_suite_follows(&self, doc_indent: usize) -> bool {
        let Some(i) = self.next_ktap_pos(self.pos) else {
            return false;
        };
        let header = &self.lines[i];
        if !header.is_header() || header.indent <= doc_indent || self.is_document_header(i) {
            return false;
        }
        // The suite's own result line is the first one indented less than
        // its header.
        self.lines[i..]
            .iter()
            .find_map(|l| match &l.kind {
                Kind::Result(r) if l.indent < header.indent => Some(r.number != 1),
                _ => None,
            })
            .unwrap_or(false)
    }

    /// Parse one test at the current position: a header, its children and
    /// its result line, or just a result line.
    ///
    /// `start` is the first line that belongs to it, where `pending` (its
    /// leading diagnostics) began. `expected` is the number it should
    /// report (`None`: unchecked). A result line indented less than
    /// `result_min` is an ancestor's.
    fn test(
        &mut self,
        start: usize,
        expected: Option<usize>,
        pending: Vec<String>,
        result_min: usize,
    ) -> Node {
        let mut node = Node::new(start);
        node.diagnostics = pending;

        // The header: a version line and/or `# Subtest: name`, then the plan.
        let mut header_indent: Option<usize> = None;
        if let Some(
            line @ Line {
                kind: Kind::Version,
                ..
            },
        ) = self.peek()
        {
            header_indent = Some(line.indent);
            self.pos += 1;
        }
        if let Some(
            line @ Line {
                kind: Kind::Subtest(name),
                ..
            },
        ) = self.peek()
        {
            node.name = name.clone();
            header_indent = Some(header_indent.map_or(line.indent, |i| i.min(line.indent)));
            self.pos += 1;
        }
        if let Some(h) = header_indent {
            node.headed = true;
            node.diagnostics.extend(self.diagnostics());
            node.plan = self.plan();
            if let Err(cut) = self.children(&mut node, h) {
                self.cut_short(&mut node, cut);
                return node;
            }
        }

        // The result line: `children()` stopped at one, or the caller did.
        let line = self.peek().expect("test() expects a result line here");
        let Kind::Result(result) = &line.kind else {
            unreachable!("test() expects a result line here");
        };
        let ours = !node.headed
            || node.name.is_empty()
            || result.name == node.name
            || (result_min > 0 && line.indent >= result_min);
        if !ours {
            // An ancestor's result line: ours never came.
            node.status = Status::Crashed;
            node.errors.push(format!(
                "missing result line (the next one is `{}`)",
                line.text.trim()
            ));
            node.end_line = line.no.saturating_sub(1).max(node.start_line);
            return node;
        }
        self.pos += 1;
        node.end_line = line.no;
        node.number = Some(result.number);
        if !node.headed || node.name.is_empty() {
            node.name = result.name.clone();
        }
        node.directive = result.directive;
        node.reason = result.reason.clone();
        node.status = result.status();
        if let Some(n) = expected {
            if result.number != n {
                node.errors
                    .push(format!("expected test number {n}, found {}", result.number));
            }
        }
        if node.headed {
            check_children(&mut node);
        }
        node
    }

    /// Parse the children of a headed test whose header is indented `h`.
    /// `Ok` when the test's result line follows, `Err` when it never comes.
    fn children(&mut self, node: &mut Node, h: usize) -> Result<(), Cut> {
        let scope = Scope {
            header_max: Some(h),
            result_min: h,
            doc_max: None,
        };
        loop {
            let start = self.line_no();
            let pending = self.diagnostics_between_tests();
            let Some(line) = self.peek() else {
                self.keep_cut_short_lines(node, pending, start);
                return Err(Cut::Eof);
            };
            // A producer that does not indent prints our result line at our
            // children's indentation; recognise it by name once the plan is
            // complete.
            let own_result = match &line.kind {
                Kind::Result(r) => {
                    !node.name.is_empty()
                        && r.name == node.name
                        && node.plan.is_none_or(|p| node.children.len() >= p)
                }
                _ => false,
            };
            if line.is_header() && self.ends_scope(line, scope) {
                self.keep_cut_short_lines(node, pending, start);
                return Err(Cut::Boundary);
            }
            if own_result || self.ends_scope(line, scope) {
                node.diagnostics.extend(pending);
                return Ok(());
            }
            let number = node.children.len() + 1;
            let child = self.test(start, Some(number), pending, h);
            node.children.push(child);
        }
    }

    /// A test was cut short after the lines in `pending`, which start at
    /// line `start`. If its plan says a child was still due, and no child
    /// is already marked as cut short, those lines are that child's: add it
    /// as a crashed placeholder. Otherwise they are the test's own.
    fn keep_cut_short_lines(&self, node: &mut Node, pending: Vec<String>, start: usize) {
        let child_cut_short = node.children.last().is_some_and(|c| c.number.is_none());
        let child_due = node.plan.is_some_and(|p| node.children.len() < p);
        if child_due && !child_cut_short {
            let number = node.children.len() + 1;
            let mut child = Node::new(start);
            child.name = guess_name(&pending, number);
            child.diagnostics = pending;
            child.end_line = self.line_no().saturating_sub(1).max(start);
            child
                .errors
                .push("no result line: the output was cut short".to_string());
            node.children.push(child);
        } else {
            node.diagnostics.extend(pending);
        }
    }

    /// Mark a headed test that never got its result line as crashed.
    fn cut_short(&self, node: &mut Node, cut: Cut) {
        node.status = Status::Crashed;
        node.end_line = self.line_no().saturating_sub(1).max(node.start_line);
        let why = match cut {
            Cut::Eof => "the log ends",
            Cut::Boundary => "another test or document starts",
        };
        let reported = node.children.iter().filter(|c| c.number.is_some()).count();
        node.errors.push(match node.plan {
            Some(p) => format!("cut short: {why} after {reported} of {p} planned results"),
            None => format!("cut short: {why} before its result line"),
        });
    }
}

/// After a headed test's result line: compare its children with its plan,
/// and let crashed or failed children decide its status.
fn check_children(node: &mut Node) {
    if let Some(p) = node.plan {
        let n = node.children.len();
        if n != p {
            node.errors
                .push(format!("plan mismatch: plan 1..{p} but {n} results"));
        }
    }
    if node.children.iter().any(|c| c.status == Status::Crashed) {
        node.status = Status::Crashed;
    } else if node.status == Status::Pass && node.children.iter().any(|c| c.status == Status::Fail)
    {
        node.status = Status::Fail;
        node.errors
            .push("reported ok although a subtest failed".to_string());
    }
}
