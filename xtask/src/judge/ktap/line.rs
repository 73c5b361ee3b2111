//! Console lines as KTAP sees them: the `printk` prefix removed
//! ([`crate::judge::printk::strip_prefix`]), then a version, subtest header, plan,
//! result (`ok N name # DIRECTIVE reason`) or other line.

use super::{Directive, Status};
use crate::judge::printk;

/// A parsed `ok N name # DIRECTIVE reason` line.
#[derive(Clone, Debug)]
pub(super) struct ResultLine {
    pub(super) ok: bool,
    pub(super) number: usize,
    pub(super) name: String,
    pub(super) directive: Option<Directive>,
    pub(super) reason: Option<String>,
}

impl ResultLine {
    /// The status this line reports on its own (before looking at subtests).
    pub(super) fn status(&self) -> Status {
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
pub(super) enum Kind {
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
pub(super) struct Line {
    /// 1-based line number in the log.
    pub(super) no: usize,
    /// The text after the `printk` prefix, trailing white space removed.
    pub(super) text: String,
    /// Leading white space characters (a tab counts as one).
    pub(super) indent: usize,
    pub(super) kind: Kind,
}

impl Line {
    pub(super) fn classify(no: usize, raw: &str) -> Line {
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

    pub(super) fn is_header(&self) -> bool {
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

/// `kunit: disabled`, `kunit executor: ...`, `kunit module: ...`.
pub(super) fn is_kunit_error(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("kunit: ") || t.starts_with("kunit executor: ") || t.starts_with("kunit module: ")
}
