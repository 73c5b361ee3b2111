//! Per-check result lines and the one machine-readable summary line.
//!
//! Each check prints one line on stdout (the guest's serial console):
//!
//! ```text
//! ok - placement {0,1} w{3,1} off 0
//! not ok - placement {0,1} w{3,1} off 0: page 3 on node 0, expected 1
//! ok - diff {0,1} w{255,1} # SKIP no memory-only node
//! ```
//!
//! and at the end exactly one line
//!
//! ```text
//! TIERKIT-JSON {"bin":"tk-test-placement","kind":"test","ok":true,"passed":12,"failed":0,"skipped":1,"checks":[...],...}
//! ```
//!
//! `kind` is `test`, `bench` or `demo`. `checks` holds
//! `{"name","status":"ok"|"fail"|"skip","detail"}`. Benchmarks and the
//! demo add their figures as further top-level keys. The process exits 0
//! if no check failed, 1 otherwise.

use serde_json::{json, Map, Value};
use std::io::Write;
use std::process::ExitCode;
use tierkit_protocol::marker;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    Fail,
    Skip,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Fail => "fail",
            Status::Skip => "skip",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
}

/// Formats one check as its console line.
pub fn line(c: &Check) -> String {
    match c.status {
        Status::Ok if c.detail.is_empty() => format!("ok - {}", c.name),
        Status::Ok => format!("ok - {} ({})", c.name, c.detail),
        Status::Fail => format!("not ok - {}: {}", c.name, c.detail),
        Status::Skip => format!("ok - {} # SKIP {}", c.name, c.detail),
    }
}

/// Collects checks, prints each as it comes, and the summary at the end.
#[derive(Debug)]
pub struct Report {
    bin: String,
    kind: String,
    checks: Vec<Check>,
    extra: Map<String, Value>,
    quiet: bool,
}

impl Report {
    /// `bin` is the binary's name, `kind` one of `test`, `bench`, `demo`.
    pub fn new(bin: &str, kind: &str) -> Report {
        println!("# {bin}: start");
        Report {
            bin: bin.into(),
            kind: kind.into(),
            checks: Vec::new(),
            extra: Map::new(),
            quiet: false,
        }
    }

    /// A report that prints nothing (host unit tests).
    pub fn silent(bin: &str, kind: &str) -> Report {
        Report {
            bin: bin.into(),
            kind: kind.into(),
            checks: Vec::new(),
            extra: Map::new(),
            quiet: true,
        }
    }

    fn push(&mut self, name: &str, status: Status, detail: String) -> bool {
        let c = Check {
            name: name.into(),
            status,
            detail,
        };
        if !self.quiet {
            println!("{}", line(&c));
            let _ = std::io::stdout().flush();
        }
        self.checks.push(c);
        status != Status::Fail
    }

    pub fn ok(&mut self, name: &str) -> bool {
        self.push(name, Status::Ok, String::new())
    }

    /// A passing check with a short note in parentheses.
    pub fn ok_note(&mut self, name: &str, note: impl Into<String>) -> bool {
        self.push(name, Status::Ok, note.into())
    }

    pub fn fail(&mut self, name: &str, reason: impl Into<String>) -> bool {
        self.push(name, Status::Fail, reason.into())
    }

    pub fn skip(&mut self, name: &str, reason: impl Into<String>) -> bool {
        self.push(name, Status::Skip, reason.into())
    }

    /// Records `Ok(())` as ok, `Err(reason)` as not ok. Returns whether it
    /// passed.
    pub fn check<E: std::fmt::Display>(&mut self, name: &str, r: Result<(), E>) -> bool {
        match r {
            Ok(()) => self.ok(name),
            Err(e) => self.fail(name, format!("{e:#}")),
        }
    }

    /// Like [`Report::check`] with a note on success.
    pub fn check_note<E: std::fmt::Display>(&mut self, name: &str, r: Result<String, E>) -> bool {
        match r {
            Ok(n) => self.ok_note(name, n),
            Err(e) => self.fail(name, format!("{e:#}")),
        }
    }

    /// Records (and prints) the checks of another report, in order: for
    /// checks made inside a larger one and printed after it.
    pub fn absorb(&mut self, other: Report) {
        for c in other.checks {
            self.push(&c.name, c.status, c.detail);
        }
    }

    /// A comment line (`# ...`), not a check.
    pub fn note(&self, msg: impl AsRef<str>) {
        if !self.quiet {
            for l in msg.as_ref().lines() {
                println!("# {l}");
            }
            let _ = std::io::stdout().flush();
        }
    }

    /// Adds a top-level key to the JSON line.
    pub fn set(&mut self, key: &str, v: Value) {
        self.extra.insert(key.into(), v);
    }

    pub fn failed(&self) -> usize {
        self.count(Status::Fail)
    }

    fn count(&self, s: Status) -> usize {
        self.checks.iter().filter(|c| c.status == s).count()
    }

    /// The summary object.
    pub fn json(&self) -> Value {
        let mut m = Map::new();
        m.insert("bin".into(), json!(self.bin));
        m.insert("kind".into(), json!(self.kind));
        m.insert("ok".into(), json!(self.failed() == 0));
        m.insert("passed".into(), json!(self.count(Status::Ok)));
        m.insert("failed".into(), json!(self.failed()));
        m.insert("skipped".into(), json!(self.count(Status::Skip)));
        m.insert(
            "checks".into(),
            Value::Array(
                self.checks
                    .iter()
                    .map(|c| json!({"name": c.name, "status": c.status.as_str(), "detail": c.detail}))
                    .collect(),
            ),
        );
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        Value::Object(m)
    }

    /// Prints the totals and the JSON line; exit code 0 iff nothing failed.
    pub fn finish(self) -> ExitCode {
        let (p, f, s) = (
            self.count(Status::Ok),
            self.failed(),
            self.count(Status::Skip),
        );
        if !self.quiet {
            println!("# {}: {} passed, {} failed, {} skipped", self.bin, p, f, s);
            println!("{}", marker::line(marker::JSON, &self.json().to_string()));
            let _ = std::io::stdout().flush();
        }
        if f == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines() {
        let c = |status, detail: &str| Check {
            name: "n".into(),
            status,
            detail: detail.into(),
        };
        assert_eq!(line(&c(Status::Ok, "")), "ok - n");
        assert_eq!(line(&c(Status::Ok, "8/2")), "ok - n (8/2)");
        assert_eq!(line(&c(Status::Fail, "why")), "not ok - n: why");
        assert_eq!(line(&c(Status::Skip, "why")), "ok - n # SKIP why");
    }

    #[test]
    fn json_summary() {
        let mut r = Report::silent("tk-x", "test");
        assert!(r.ok("a"));
        assert!(!r.check("b", Err::<(), _>("bad")));
        assert!(r.skip("c", "none"));
        r.set("pages", json!(256));
        let j = r.json();
        assert_eq!(j["ok"], json!(false));
        assert_eq!(j["passed"], json!(1));
        assert_eq!(j["failed"], json!(1));
        assert_eq!(j["skipped"], json!(1));
        assert_eq!(j["pages"], json!(256));
        assert_eq!(j["checks"][1]["detail"], json!("bad"));
        let mut sub = Report::silent("tk-x", "test");
        sub.ok("d");
        r.absorb(sub);
        assert_eq!(r.json()["passed"], json!(2));
        assert_eq!(r.finish(), ExitCode::FAILURE);
    }
}
