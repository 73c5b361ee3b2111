//! How long a userspace test may run before /init kills it, and what the
//! runner's own tests expect of it.
//!
//! Each `tk-test-*` program runs in its own process group with a deadline:
//! its entry in [`TABLE`], or [`DEFAULT_SECS`]. A scaled deadline is
//! multiplied by `tierkit.deadline_scale=` (xtask passes the factor it
//! applies to the whole boot's timeout: a slower topology, the debug
//! kernel). At the deadline /init kills the whole group and ends the
//! program's markers with `timeout=N` ([`crate::marker::prog_end_with`]);
//! a program that leaves processes behind gets `left=K`, and they are
//! killed.
//!
//! After a program /init killed (at its deadline, or what it left
//! behind), /init waits, at most [`Deadline::settle_secs_at`], until the
//! killed processes are reaped and tierkit's counters of what files hold
//! are back to their values from before the program; if they never come
//! back the end marker says `unreleased=1` and the program fails, whatever
//! it expected: the next test would measure its free memory against
//! pages still being given back.
//!
//! The runner's own tests (`tk-test-runner-*`) are made to time out or to
//! leave a child behind: [`Expect`] says which, and xtask turns the
//! expected verdict into a pass and any other into a failure, so the totals
//! stay green only while the runner does its job. [`judge`] is that rule,
//! for /init's `fails=` count and xtask's verdict alike.

use crate::marker::Ending;

/// Seconds a userspace test may run when [`TABLE`] does not name it.
pub const DEFAULT_SECS: u32 = 120;

/// Seconds /init waits, after it killed a program, for what it held to
/// come back (scaled as the deadline, for a scaled one).
pub const SETTLE_SECS: u32 = 30;

/// The same for the runner's own tests (not scaled).
pub const RUNNER_SETTLE_SECS: u32 = 10;

/// What the runner should report for a program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// An ordinary test: exit status 0 passes.
    Pass,
    /// It runs past its deadline: its group is killed (`timeout=N`).
    Timeout,
    /// It exits but leaves processes behind: they are killed (`left=K`).
    LeftBehind,
    /// It runs past its deadline and what it held comes back only
    /// seconds after it was killed: /init waits for it (`timeout=N
    /// waited=W`, W at least 1, and no `unreleased=1`).
    TimeoutThenWait,
}

/// A program's deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline {
    pub name: &'static str,
    pub secs: u32,
    /// Multiplied by `tierkit.deadline_scale=` (false: the runner's own
    /// tests, whose length does not depend on the kernel's speed).
    pub scaled: bool,
    pub expect: Expect,
}

const fn test(name: &'static str, secs: u32) -> Deadline {
    Deadline {
        name,
        secs,
        scaled: true,
        expect: Expect::Pass,
    }
}

const fn runner(name: &'static str, secs: u32, expect: Expect) -> Deadline {
    Deadline {
        name,
        secs,
        scaled: false,
        expect,
    }
}

/// The programs whose deadline is not [`DEFAULT_SECS`], scaled, passing.
pub const TABLE: &[Deadline] = &[
    // A GiB cleared at first touch and scanned on the CXL node (one round
    // there, two on the other nodes: guest/src/tests/gigantic.rs).
    test("tk-test-gigantic", 300),
    test("tk-test-block-offline", 180),
    // 100 module load/unload cycles and fault injection into finit_module.
    test("tk-test-lifecycle", 180),
    test("tk-test-hostile", 180),
    // Its step 5 waits for the CXL node's pool to fill a GiB twice (slow on
    // emulated CXL memory: Documentation/results/topologies.md), besides the offlines.
    test("tk-test-pool-hostile", 300),
    runner("tk-test-runner-sleep", 2, Expect::Timeout),
    runner("tk-test-runner-orphan", 10, Expect::LeftBehind),
    runner("tk-test-runner-dwait", 2, Expect::Timeout),
    runner("tk-test-runner-release", 2, Expect::TimeoutThenWait),
];

/// `name`'s entry, or the default one.
pub fn of(name: &str) -> Deadline {
    TABLE
        .iter()
        .find(|d| d.name == name)
        .copied()
        .unwrap_or(Deadline {
            name: "",
            secs: DEFAULT_SECS,
            scaled: true,
            expect: Expect::Pass,
        })
}

impl Deadline {
    /// Its seconds under `tierkit.deadline_scale=scale`.
    pub fn secs_at(&self, scale: u32) -> u32 {
        if self.scaled {
            self.secs.saturating_mul(scale.max(1))
        } else {
            self.secs
        }
    }

    /// How long /init waits, after it killed the program, for its
    /// processes to be reaped and tierkit's counters to come back.
    pub fn settle_secs_at(&self, scale: u32) -> u32 {
        if self.scaled {
            SETTLE_SECS.saturating_mul(scale.max(1))
        } else {
            RUNNER_SETTLE_SECS
        }
    }
}

/// The reason of a program whose resources did not come back.
pub const UNRELEASED: &str =
    "what it held did not come back after it was killed (its processes or tierkit's pages)";

/// A program's verdict from its exit status and [`Ending`]: `Ok` with a
/// note when it passed as `d` expects, `Err` with why not (the text the
/// reports show: `timed out after 2 s`, `exit code 3`, ...).
pub fn judge(d: &Deadline, rc: i32, e: Ending) -> Result<Option<String>, String> {
    if e.unreleased {
        return Err(UNRELEASED.into());
    }
    let how = || match (e.timeout, e.left) {
        (Some(t), _) => format!("timed out after {t} s"),
        (None, n) if n > 0 => format!("left {n} process(es) running after it exited"),
        _ => format!("exit code {rc}"),
    };
    match d.expect {
        Expect::Pass if e.timeout.is_none() && e.left == 0 && rc == 0 => Ok(None),
        Expect::Pass => Err(how()),
        Expect::Timeout if e.timeout.is_some() => Ok(Some(format!(
            "{}, as this test of the runner expects",
            how()
        ))),
        Expect::LeftBehind if e.timeout.is_none() && e.left > 0 => Ok(Some(format!(
            "{}, as this test of the runner expects",
            how()
        ))),
        Expect::TimeoutThenWait if e.timeout.is_some() && e.waited > 0 => Ok(Some(format!(
            "{}, and what it held came back {} s later, as this test of the runner expects",
            how(),
            e.waited
        ))),
        Expect::TimeoutThenWait => Err(format!(
            "expected to be killed at its deadline of {} s and /init to wait for what it held; {}, waited {} s",
            d.secs,
            how(),
            e.waited
        )),
        Expect::Timeout => Err(format!(
            "expected to be killed at its deadline of {} s; {}",
            d.secs,
            how()
        )),
        Expect::LeftBehind => Err(format!(
            "expected to leave a process behind for the runner to kill; {}",
            how()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_and_default() {
        assert_eq!(of("tk-test-vma").secs_at(4), DEFAULT_SECS * 4);
        assert_eq!(of("tk-test-vma").expect, Expect::Pass);
        let s = of("tk-test-runner-sleep");
        assert_eq!((s.secs_at(16), s.expect), (2, Expect::Timeout));
        assert_eq!(of("tk-test-gigantic").secs_at(0), 300);
        let mut names: Vec<&str> = TABLE.iter().map(|d| d.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TABLE.len(), "one entry per program");
    }

    #[test]
    fn verdicts() {
        let end = |timeout, left| Ending {
            timeout,
            left,
            ..Ending::default()
        };
        let plain = of("tk-test-vma");
        assert_eq!(judge(&plain, 0, end(None, 0)), Ok(None));
        assert_eq!(judge(&plain, 3, end(None, 0)), Err("exit code 3".into()));
        assert_eq!(
            judge(&plain, 137, end(Some(120), 0)),
            Err("timed out after 120 s".into())
        );
        assert_eq!(
            judge(&plain, 0, end(None, 2)),
            Err("left 2 process(es) running after it exited".into())
        );
        let sleep = of("tk-test-runner-sleep");
        assert!(judge(&sleep, 137, end(Some(2), 0)).unwrap().is_some());
        assert_eq!(
            judge(&sleep, 0, end(None, 0)),
            Err("expected to be killed at its deadline of 2 s; exit code 0".into())
        );
        let orphan = of("tk-test-runner-orphan");
        assert!(judge(&orphan, 0, end(None, 1)).is_ok());
        assert!(judge(&orphan, 0, end(None, 0)).is_err());
        assert!(judge(&orphan, 137, end(Some(10), 1)).is_err());
        // Whatever it expects, a program whose resources never came back
        // fails.
        let gone = |timeout, left| Ending {
            unreleased: true,
            ..end(timeout, left)
        };
        assert_eq!(judge(&sleep, 137, gone(Some(2), 0)), Err(UNRELEASED.into()));
        assert_eq!(
            judge(&plain, 137, gone(Some(120), 0)),
            Err(UNRELEASED.into())
        );
        assert!(judge(&orphan, 0, gone(None, 1)).is_err());
        assert_eq!(plain.settle_secs_at(4), SETTLE_SECS * 4);
        let release = of("tk-test-runner-release");
        let waited = |w| Ending {
            waited: w,
            ..end(Some(2), 1)
        };
        assert!(judge(&release, 137, waited(3)).is_ok());
        assert!(judge(&release, 137, waited(0)).is_err());
        assert!(judge(
            &release,
            0,
            Ending {
                waited: 3,
                ..end(None, 1)
            }
        )
        .is_err());
        assert_eq!(sleep.settle_secs_at(4), RUNNER_SETTLE_SECS);
    }
}
