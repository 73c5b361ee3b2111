//! Where a `cargo xtask test` spent its time: one row per step (the host
//! tests; per boot, the kernel, the module, the guest binaries, the
//! initramfs and the guest itself, with its slowest tests under it; each
//! test of `run -- CMD` and `shell`), printed as a table at the end of
//! every run and written to `target/tierkit/timings.json`, so that every
//! CI log and its artifacts show where the time went.

use serde_json::json;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::judge::verdict::phase_tag;
use crate::util::fmt_dur;
use tierkit_protocol::marker::{Marker, Step};

/// A test at least this long gets a row of its own under its boot.
pub const SLOW_TEST: Duration = Duration::from_secs(2);

/// At most this many test rows per boot, the slowest first.
pub const SLOW_TESTS_PER_BOOT: usize = 5;

/// What a row times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A step of its own: the host tests, a build, a guest.
    Step,
    /// A test inside the guest of the row above (its time is part of it).
    Test,
}

/// One row.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The boot's label (`numa`, `debug numa-full`, `xtask run/shell`);
    /// empty for the host tests.
    pub boot: String,
    /// `host tests`, `kernel`, `module`, `guest binaries`, `initramfs`,
    /// `guest`, or a test's name.
    pub step: String,
    pub time: Duration,
    pub kind: Kind,
}

/// A guest's phases from the printk times of its markers (`stamps`, as
/// [`crate::judge::verdict::markers::Markers::stamps`]) and its wall time
/// `guest`: the kernel's boot to /init (`TIERKIT-BOOT`), /init's set-up
/// (CXL regions, topology, kmemleak baseline) to insmod, insmod with the
/// KUnit suites, the userspace tests (to rmmod), rmmod and the rest to
/// `TIERKIT-DONE`, and what the kernel's clock does not see (QEMU's start,
/// firmware, power-off). Phases whose markers are missing are left out.
pub fn guest_parts(stamps: &[(String, f64)], guest: Duration) -> Vec<(String, Duration)> {
    // Each phase's marker, its tag as the verdict stamped it.
    let at = |m: Marker| {
        let tag = phase_tag(&m)?;
        stamps.iter().find(|(t, _)| *t == tag).map(|(_, s)| *s)
    };
    let (insmod_start, insmod) = (
        at(Marker::Start(Step::Insmod)),
        at(Marker::End {
            step: Step::Insmod,
            rc: None,
        }),
    );
    let rmmod_start = at(Marker::Start(Step::Rmmod));
    let span = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b >= a => Some(Duration::from_secs_f64(b - a)),
        _ => None,
    };
    let (boot, done) = (at(Marker::Boot("")), at(Marker::Done { fails: 0 }));
    let parts = [
        ("phase: kernel to /init", span(Some(0.0), boot)),
        ("phase: /init set-up", span(boot, insmod_start)),
        ("phase: insmod and KUnit", span(insmod_start, insmod)),
        ("phase: userspace tests", span(insmod, rmmod_start)),
        ("phase: rmmod to the end", span(rmmod_start, done)),
        (
            "phase: QEMU start and exit",
            done.map(|d| guest.saturating_sub(Duration::from_secs_f64(d))),
        ),
    ];
    parts
        .into_iter()
        .filter_map(|(n, d)| Some((n.to_string(), d?)))
        .collect()
}

/// The rows of one `cargo xtask test`, in the order they ran.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub rows: Vec<Row>,
}

impl Table {
    /// A step of `boot` (empty: of the whole run).
    pub fn step(&mut self, boot: &str, step: &str, time: Duration) {
        self.rows.push(Row {
            boot: boot.to_string(),
            step: step.to_string(),
            time,
            kind: Kind::Step,
        });
    }

    /// The phases of `boot`'s guest ([`guest_parts`]), under its row.
    pub fn parts(&mut self, boot: &str, parts: &[(String, Duration)]) {
        for (name, time) in parts {
            self.rows.push(Row {
                boot: boot.to_string(),
                step: name.clone(),
                time: *time,
                kind: Kind::Test,
            });
        }
    }

    /// The slow tests of `boot` ([`slow_tests`]), under its guest's row.
    pub fn tests(&mut self, boot: &str, tests: &[(String, Duration)]) {
        for (name, time) in slow_tests(tests) {
            self.rows.push(Row {
                boot: boot.to_string(),
                step: name,
                time,
                kind: Kind::Test,
            });
        }
    }

    /// The sum of the steps (tests are inside their guests).
    pub fn timed(&self) -> Duration {
        self.rows
            .iter()
            .filter(|r| r.kind == Kind::Step)
            .map(|r| r.time)
            .sum()
    }

    /// The table, with `wall` (the whole command) and what no step timed.
    pub fn format(&self, wall: Duration) -> String {
        let label = |r: &Row| match (r.kind, r.boot.is_empty()) {
            (Kind::Test, _) => format!("  {}", r.step),
            (Kind::Step, true) => r.step.clone(),
            (Kind::Step, false) => format!("{}: {}", r.boot, r.step),
        };
        let width = self
            .rows
            .iter()
            .map(|r| label(r).len())
            .chain(["step".len(), "other (set-up, reports)".len()])
            .max()
            .unwrap_or(4);
        let mut out = String::new();
        let _ = writeln!(out, "time table ({} wall):", fmt_dur(wall));
        let _ = writeln!(out, "{:<width$}  {:>8}", "step", "time");
        for r in &self.rows {
            let _ = writeln!(out, "{:<width$}  {:>8}", label(r), fmt_dur(r.time));
        }
        let other = wall.saturating_sub(self.timed());
        let _ = writeln!(
            out,
            "{:<width$}  {:>8}",
            "other (set-up, reports)",
            fmt_dur(other)
        );
        out
    }

    /// The table as JSON: `wall_s`, `other_s` and one object per row
    /// (`boot`, `step`, `kind` `step` or `test`, `secs`).
    pub fn to_json(&self, wall: Duration) -> serde_json::Value {
        let secs = |d: Duration| (d.as_secs_f64() * 1000.0).round() / 1000.0;
        json!({
            "wall_s": secs(wall),
            "other_s": secs(wall.saturating_sub(self.timed())),
            "rows": self.rows.iter().map(|r| json!({
                "boot": r.boot,
                "step": r.step,
                "kind": match r.kind { Kind::Step => "step", Kind::Test => "test" },
                "secs": secs(r.time),
            })).collect::<Vec<_>>(),
        })
    }

    /// Prints the table and writes `timings.json` into `dir`.
    pub fn report(&self, wall: Duration, dir: &Path) {
        println!();
        print!("{}", self.format(wall));
        let path = dir.join("timings.json");
        let text = serde_json::to_string_pretty(&self.to_json(wall)).unwrap_or_default();
        if let Err(e) = std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&path, text)) {
            eprintln!("warning: could not write {}: {e}", path.display());
        }
    }
}

/// The tests of `tests` that took at least [`SLOW_TEST`], the slowest
/// first, at most [`SLOW_TESTS_PER_BOOT`].
pub fn slow_tests(tests: &[(String, Duration)]) -> Vec<(String, Duration)> {
    let mut v: Vec<(String, Duration)> = tests
        .iter()
        .filter(|(_, d)| *d >= SLOW_TEST)
        .cloned()
        .collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.truncate(SLOW_TESTS_PER_BOOT);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: u64) -> Duration {
        Duration::from_secs(x)
    }

    #[test]
    fn table_rows_steps_tests_and_the_untimed_rest() {
        let mut t = Table::default();
        t.step("", "host tests", s(60));
        t.step("numa", "module", s(5));
        t.step("numa", "guest", s(30));
        t.tests(
            "numa",
            &[
                ("fast".into(), Duration::from_millis(1500)),
                ("userspace.tk-test-vma".into(), s(4)),
                ("tierkit_wi_alloc.dirty".into(), s(9)),
            ],
        );
        let text = t.format(s(100));
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("time table (1m40s wall)"), "{text}");
        assert!(lines[2].starts_with("host tests "), "{text}");
        assert!(lines[3].starts_with("numa: module "), "{text}");
        assert!(lines[4].starts_with("numa: guest "), "{text}");
        // Slowest first, the test under 2 s left out.
        assert!(lines[5].starts_with("  tierkit_wi_alloc.dirty "), "{text}");
        assert!(lines[6].starts_with("  userspace.tk-test-vma "), "{text}");
        assert!(lines[7].starts_with("other (set-up, reports) "), "{text}");
        assert!(lines[7].ends_with("5.0s"), "{text}");
        assert_eq!(lines.len(), 8, "{text}");
        let j = t.to_json(s(100));
        assert_eq!(j["wall_s"], 100.0);
        assert_eq!(j["other_s"], 5.0);
        assert_eq!(j["rows"][1]["boot"], "numa");
        assert_eq!(j["rows"][3]["kind"], "test");
        assert_eq!(j["rows"][3]["secs"], 9.0);
    }

    #[test]
    fn a_guest_splits_into_phases_at_its_markers() {
        let st = |v: &[(&str, f64)]| -> Vec<(String, f64)> {
            v.iter().map(|(t, s)| (t.to_string(), *s)).collect()
        };
        let stamps = st(&[
            ("BOOT", 3.5),
            ("INSMOD-START", 4.0),
            ("INSMOD", 12.0),
            ("RMMOD-START", 27.0),
            ("DONE", 27.5),
        ]);
        let p = guest_parts(&stamps, s(30));
        let got: Vec<(&str, f64)> = p
            .iter()
            .map(|(n, d)| (n.as_str(), d.as_secs_f64()))
            .collect();
        assert_eq!(
            got,
            [
                ("phase: kernel to /init", 3.5),
                ("phase: /init set-up", 0.5),
                ("phase: insmod and KUnit", 8.0),
                ("phase: userspace tests", 15.0),
                ("phase: rmmod to the end", 0.5),
                ("phase: QEMU start and exit", 2.5),
            ]
        );
        // A boot that never reached rmmod: the phases it had.
        let p = guest_parts(&stamps[..3], s(600));
        assert_eq!(p.len(), 3);
        assert!(guest_parts(&[], s(5)).is_empty());
    }

    #[test]
    fn slow_tests_keeps_the_slowest_few() {
        let tests: Vec<(String, Duration)> = (0..10).map(|i| (format!("t{i}"), s(i))).collect();
        let v = slow_tests(&tests);
        let names: Vec<&str> = v.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["t9", "t8", "t7", "t6", "t5"]);
    }
}
