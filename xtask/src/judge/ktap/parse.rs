//! The recursive-descent parser: classified [`Line`]s -> [`Document`]s of
//! [`Test`]s, tests cut short marked crashed, plans and
//! KUnit's totals checked; case durations from the time stamps.

use super::line::{Kind, Line};
use super::{Counts, Directive, Document, Status, Test};

/// How many diagnostic lines one test keeps. When a crash cuts a test short,
/// everything up to the end of the log becomes its diagnostics; the head
/// (the oops itself) and the tail are kept.
const MAX_DIAGNOSTICS_HEAD: usize = 60;
const MAX_DIAGNOSTICS_TAIL: usize = 140;

/// Sets `duration_ms` of `cases` (and their subcases): each runs from the
/// line before it, `prev_line` for the first, to its own result line.
pub(super) fn set_durations(mut prev_line: usize, cases: &mut [Test], times: &[Option<u64>]) {
    let at = |line: usize| {
        line.checked_sub(1)
            .and_then(|i| times.get(i).copied().flatten())
    };
    for case in cases {
        set_durations(prev_line, &mut case.subtests, times);
        if case.number.is_some() {
            if let (Some(from), Some(to)) = (at(prev_line), at(case.end_line)) {
                case.duration_ms = Some(to.saturating_sub(from) / 1000);
            }
        }
        prev_line = case.end_line;
    }
}

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

    fn into_case(self) -> Test {
        Test {
            name: self.name,
            number: self.number,
            status: self.status,
            directive: self.directive,
            reason: self.reason,
            plan: self.plan,
            subtests: self.children.into_iter().map(Node::into_case).collect(),
            diagnostics: tidy_diagnostics(self.diagnostics),
            totals: None,
            errors: self.errors,
            start_line: self.start_line,
            end_line: self.end_line,
            duration_ms: None,
        }
    }

    fn into_suite(self) -> Test {
        let diagnostics = tidy_diagnostics(self.diagnostics);
        let totals = diagnostics.iter().rev().find_map(|d| parse_totals(d));
        let mut errors = self.errors;
        if self.headed && self.plan.is_none() {
            errors.push("missing plan (no `1..N` line)".to_string());
        }
        let mut suite = Test {
            name: self.name,
            number: self.number,
            status: self.status,
            directive: self.directive,
            reason: self.reason,
            plan: self.plan,
            subtests: self.children.into_iter().map(Node::into_case).collect(),
            diagnostics,
            totals,
            errors,
            start_line: self.start_line,
            end_line: self.end_line,
            duration_ms: None,
        };
        if let Some(totals) = suite.totals {
            // KUnit's totals count cases, not a failure of the suite's own.
            let parsed = if suite.subtests.is_empty() {
                suite.counts()
            } else {
                suite.subtest_counts()
            };
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

pub(super) struct Parser<'a> {
    pub(super) lines: &'a [Line],
    pub(super) pos: usize,
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
    pub(super) fn documents(mut self) -> Vec<Document> {
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
