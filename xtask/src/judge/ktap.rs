//! KTAP parser for a whole serial console log.
//!
//! The guest's console interleaves three kinds of output: KUnit's KTAP
//! results, other `printk` output, and whatever userspace writes. This
//! module finds every KTAP document in such a log, turns it into a tree of
//! suites and cases ([`Test`]s), spots kernel crashes anywhere in the log, and
//! lists why the run failed ([`Run::failures`], the KTAP part of the
//! boot's verdict, [`crate::judge::verdict`]).
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

mod crash;
mod line;
mod parse;
mod tree;

use std::fmt;

use serde::Serialize;

use crate::judge::printk;
use crash::{rust_case_in_trace, scan_crashes};
pub use crash::{Crash, CrashKind};
use line::{is_kunit_error, Line};
use parse::{set_durations, Parser};
pub use tree::{Counts, Directive, Document, Status, Test};

/// How many kernel reports [`Failures`] names one by one.
const MAX_CRASH_REASONS: usize = 20;

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

/// Why a [`Run`] failed (the KTAP part of a boot's verdict); none: it
/// passed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Failures {
    /// Why the run failed; empty when it passed.
    pub reasons: Vec<String>,
}

impl Failures {
    /// True when nothing failed.
    pub fn is_ok(&self) -> bool {
        self.reasons.is_empty()
    }
}

impl fmt::Display for Failures {
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

impl std::error::Error for Failures {}

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
                set_durations(suite.start_line, &mut suite.subtests, &times);
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
    pub fn suites(&self) -> impl Iterator<Item = &Test> {
        self.documents.iter().flat_map(|d| d.suites.iter())
    }

    /// The kernel reports that fail the run: all but the few
    /// [`crate::judge::console::not_a_failure`] explains.
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
        fn case_errors(path: &str, case: &Test, out: &mut Vec<String>) {
            let path = format!("{path}.{}", case.name);
            out.extend(case.errors.iter().map(|e| format!("{path}: {e}")));
            for sub in &case.subtests {
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
                for case in &suite.subtests {
                    case_errors(&suite.name, case, &mut out);
                }
            }
        }
        out
    }

    /// Why the run failed; none when it passed. It fails on any failed or crashed
    /// case or suite, any kernel crash report, any structural problem (see
    /// [`Run::problems`]), and, when `expect_suites` is set, when no suite
    /// ran at all (module not loaded, filter too narrow, `quiet` console).
    pub fn failures(&self, expect_suites: bool) -> Failures {
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
        Failures { reasons }
    }

    /// The test that was running at a console line: the deepest suite, case
    /// or parameter whose line span contains it, as a dotted path.
    pub fn test_at_line(&self, line: usize) -> Option<String> {
        fn find(case: &Test, line: usize, path: &mut String) {
            for sub in &case.subtests {
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
            .subtests
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
