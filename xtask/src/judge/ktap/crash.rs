//! Kernel crash reports anywhere in the console log (BUG, Oops, KASAN,
//! lockdep, WARN, ... by the patterns of [`crate::judge::console`]) as [`Crash`]es,
//! and the Rust KUnit case a call trace names.

use std::fmt;

use serde::Serialize;

use super::line::Line;

/// How many call-trace frames a [`Crash`] keeps.
const MAX_CALL_TRACE: usize = 24;

/// How many explaining lines a [`Crash`] keeps ([`Crash::details`]).
const MAX_DETAILS: usize = 8;

/// A crash report that has not reached its `---[ end` line is considered
/// over after this many lines.
const MAX_CRASH_REPORT_LINES: usize = 200;

pub use crate::judge::console::CrashKind;

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
    /// ([`crate::judge::console::not_a_failure`]); `None` for nearly all.
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

/// The KUnit case whose wrapper is in a call trace: the `#[kunit_tests]`
/// macro of Rust's kernel crate runs case `foo` through
/// `kunit_rust_wrapper_foo`, whose (mangled) symbol names it.
pub(super) fn rust_case_in_trace(trace: &[String]) -> Option<String> {
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

/// Find crash reports, by the patterns of [`crate::judge::console`]. One report (a
/// BUG, its `Oops:` line, `RIP:` and call trace; a debugobjects message and
/// its WARNING) gives one [`Crash`]; a panic always starts a new one, and
/// so does a warning unless it carries an open debugobjects or list report.
/// A report ends at its `---[ end ...` line (or KASAN's closing `=` row). A
/// `RIP:` line outside a report starts one only if no report came shortly
/// before it: x86 repeats the registers after `---[ end trace ...]---` as an
/// "executive summary".
pub(super) fn scan_crashes(lines: &[Line]) -> Vec<Crash> {
    let mut crashes: Vec<Crash> = Vec::new();
    // Index into `crashes` of the report still open.
    let mut open: Option<usize> = None;
    let mut in_trace = false;
    let mut injected = crate::judge::console::InjectedDumps::default();
    for line in lines {
        let t = line.text.trim();
        let recent = crashes
            .last()
            .is_some_and(|c| line.no <= c.line + MAX_CRASH_REPORT_LINES);
        if !recent {
            open = None;
            in_trace = false;
        }
        if let Some(kind) = crate::judge::console::ClassifyInjected::classify(&mut injected, t) {
            let merge = match (kind, open) {
                (CrashKind::Other, _) => recent,
                (_, Some(i)) => crate::judge::console::merges_into(kind, crashes[i].kind),
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
        if crate::judge::console::ends_report(t) {
            open = None;
            in_trace = false;
        } else if crate::judge::console::starts_trace(t) {
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
            && crate::judge::console::is_detail(t)
            && !t.starts_with("RIP: ")
        {
            crashes[i].details.push(t.to_string());
        }
    }
    for c in &mut crashes {
        c.not_a_failure = crate::judge::console::not_a_failure(c.kind, &c.call_trace);
    }
    crashes
}
