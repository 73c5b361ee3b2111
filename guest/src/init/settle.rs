//! After a test: its processes reaped and what tierkit holds back to
//! where it was, before the next test takes its baselines.
//!
//! A test killed at its deadline may still be giving back what it held
//! when /init moves on: the exit of a process with many mappings takes
//! time (under KASAN, seconds), and a file stays open while any process
//! that has it is still exiting. The next test's check of free pages would
//! then count pages that are on their way back. So after every test /init
//! compares tierkit's own counters with what they were before it
//! ([`holdings`]: per node `held`, `gigantic` and `pool` of
//! `/sys/kernel/debug/tierkit/stats`, and `held_pages`, `orphans` and
//! `gigantic_pool_filling` of `limits`) and waits, up to a bound, for the
//! killed processes to have exited and for the counters to be back:
//!
//! - after a test /init killed ([`Ending::timeout`] or
//!   [`Ending::left`]), until both, or the bound; if they never come back
//!   the test gets `unreleased=1` and fails;
//! - after a test that ended by itself, until its counters are back or
//!   have not changed for [`STABLE`] (what a test leaves on purpose, such
//!   as a pool it filled, is its own checks' business).
//!
//! Every wait longer than [`REPORT`] is reported in the test's output.

use super::supervise::{self, Proc};
use super::Root;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use tierkit_protocol::marker::Ending;

/// tierkit's counters of what its files hold, as `key -> value`.
pub type Holdings = BTreeMap<String, u64>;

/// The `limits` keys compared (beside every column of `stats` but the
/// cumulative `allocated`).
pub const LIMIT_KEYS: [&str; 3] = ["held_pages", "orphans", "gigantic_pool_filling"];

/// How long counters that differ from the baseline must stay unchanged
/// before a test that ended by itself is taken as settled.
pub const STABLE: Duration = Duration::from_secs(1);

/// Waits at least this long are reported.
pub const REPORT: Duration = Duration::from_millis(100);

/// `stats` and `limits` below `root`, `None` without the module (no
/// `stats` file: not loaded, or no debugfs).
pub fn holdings(root: &Root) -> Option<Holdings> {
    let stats = root.read("/sys/kernel/debug/tierkit/stats")?;
    let limits = root.read("/sys/kernel/debug/tierkit/limits");
    parse(&stats, limits.as_deref())
}

/// [`holdings`] of the files' text.
pub fn parse(stats: &str, limits: Option<&str>) -> Option<Holdings> {
    let mut m = crate::tests::faults::parse_holdings(stats, None).ok()?;
    if let Some(l) = limits.and_then(|l| crate::linux::vma::parse_limits(l).ok()) {
        for k in LIMIT_KEYS {
            if let Some(v) = crate::linux::vma::limit(&l, k) {
                m.insert(k.to_string(), v);
            }
        }
    }
    Some(m)
}

/// The processes of a killed program that have not finished exiting:
/// members of its group `pgid` and the `killed` pids, but for those it
/// keeps on purpose ([`supervise::KEEP_COMM`]) and zombies (a zombie has
/// given back its memory and files: `exit_mm()` and `exit_files()` come
/// before `exit_notify()`; /init reaps its own as it waits).
pub fn remaining(all: &[Proc], pgid: i32, killed: &BTreeSet<i32>) -> Vec<Proc> {
    let keep = supervise::KEEP_COMM.to_bytes();
    all.iter()
        .filter(|p| !matches!(p.state, 'Z' | 'X'))
        .filter(|p| p.pgrp == pgid || p.pid == pgid || killed.contains(&p.pid))
        .filter(|p| p.comm.as_bytes() != keep)
        .cloned()
        .collect()
}

/// What one look found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Look {
    /// Processes still there (`pid (comm) state`).
    pub procs: Vec<String>,
    /// The counters (`None`: no module).
    pub holdings: Option<Holdings>,
}

/// Whether the wait is over: `Ok(true)` settled, `Ok(false)` not yet.
/// `killed`: /init killed the program; `same_for`: how long the counters
/// have not changed.
pub fn settled(base: Option<&Holdings>, now: &Look, killed: bool, same_for: Duration) -> bool {
    if !now.procs.is_empty() {
        return false;
    }
    let back = match (base, &now.holdings) {
        // Back: nothing held beyond what was held before it ran. A counter
        // below its baseline is work of tierkit's own that ended meanwhile
        // (the pool's refill of an earlier test finishing its range), not
        // something of this test's.
        (Some(b), Some(n)) => n.iter().all(|(k, v)| *v <= b.get(k).copied().unwrap_or(0)),
        // No module before or after (a test that unloads it, or none
        // loaded): nothing of tierkit's to wait for.
        _ => true,
    };
    back || (!killed && same_for >= STABLE)
}

/// What the wait found, for the test's output and its marker.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub waited: Duration,
    /// A killed program whose processes or counters never came back.
    pub unreleased: bool,
    /// Lines for the test's output (without `tk-init: NAME: `).
    pub notes: Vec<String>,
}

/// Waits, at most `bound`, for the program of group `pgid` to be settled
/// ([`settled`]), reaping children with `reap` as it goes; `base`: the
/// counters before it ran.
pub fn wait(
    root: &Root,
    base: Option<&Holdings>,
    s: &supervise::Supervised,
    bound: Duration,
    reap: &mut dyn FnMut(),
) -> Outcome {
    let killed = s.ending.timeout.is_some() || s.ending.left > 0;
    let t = Instant::now();
    let mut last: Option<Look> = None;
    let mut same_since = Instant::now();
    let now = loop {
        reap();
        let procs = remaining(&supervise::procs(), s.pid, &s.killed)
            .iter()
            .map(|p| format!("{} ({}) state {}", p.pid, p.comm, p.state))
            .collect();
        let look = Look {
            procs,
            holdings: base.and(holdings(root)),
        };
        if last.as_ref().map(|l| &l.holdings) != Some(&look.holdings) {
            same_since = Instant::now();
        }
        if settled(base, &look, killed, same_since.elapsed()) || t.elapsed() >= bound {
            break look;
        }
        last = Some(look);
        std::thread::sleep(Duration::from_millis(50));
    };
    let waited = t.elapsed();
    let done = settled(base, &now, killed, same_since.elapsed());
    outcome(base, &now, killed, done, waited, bound)
}

/// The [`Outcome`] of a wait that ended with `now` after `waited`.
pub fn outcome(
    base: Option<&Holdings>,
    now: &Look,
    killed: bool,
    done: bool,
    waited: Duration,
    bound: Duration,
) -> Outcome {
    let diff = match (base, &now.holdings) {
        (Some(b), Some(n)) => crate::tests::faults::holdings_diff(b, n),
        _ => Vec::new(),
    };
    let mut notes = Vec::new();
    let unreleased = killed && !done;
    if unreleased {
        let mut what = now.procs.clone();
        what.extend(diff.iter().map(|d| format!("tierkit {d}")));
        notes.push(format!(
            "what it held did not come back within {} s after it was killed: {}",
            bound.as_secs(),
            what.join(", ")
        ));
    } else if waited >= REPORT || !diff.is_empty() {
        let mut l = format!(
            "waited {:.1} s for its processes to be reaped and tierkit's counters to come back",
            waited.as_secs_f64()
        );
        if !diff.is_empty() {
            l.push_str(&format!(
                "; they settled elsewhere: {} (before -> after)",
                diff.join(", ")
            ));
        }
        notes.push(l);
    }
    Outcome {
        waited,
        unreleased,
        notes,
    }
}

/// The ending with the wait's verdict.
pub fn with_outcome(e: Ending, o: &Outcome) -> Ending {
    Ending {
        unreleased: e.unreleased || o.unreleased,
        waited: o.waited.as_secs() as u32,
        ..e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATS: &str = "node allocated held gigantic pool\n0 1536 1024 1 2\n1 512 0 0 0\n";
    const LIMITS: &str =
        "file_pages 262144\nheld_pages 263168\norphans 0\ngigantic_pool_filling 1\n";

    fn look(procs: &[&str], h: Option<Holdings>) -> Look {
        Look {
            procs: procs.iter().map(|s| s.to_string()).collect(),
            holdings: h,
        }
    }

    #[test]
    fn the_counters_are_stats_but_allocated_and_three_limits() {
        let h = parse(STATS, Some(LIMITS)).unwrap();
        let keys: Vec<&str> = h.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "gigantic_pool_filling",
                "held_pages",
                "node0 gigantic",
                "node0 held",
                "node0 pool",
                "node1 gigantic",
                "node1 held",
                "node1 pool",
                "orphans"
            ]
        );
        assert_eq!(h["node0 held"], 1024);
        assert_eq!(h["gigantic_pool_filling"], 1);
        assert!(parse("", None).is_none());
    }

    #[test]
    fn a_killed_test_waits_for_its_processes_and_its_counters() {
        let base = parse(STATS, Some(LIMITS)).unwrap();
        let mut more = base.clone();
        *more.get_mut("node0 held").unwrap() += 4096;
        let long = Duration::from_secs(60);
        // Processes still there: never settled.
        assert!(!settled(
            Some(&base),
            &look(&["7 (x) state D"], Some(base.clone())),
            true,
            long
        ));
        // Counters not back: a killed test waits, however stable they are;
        // one that ended by itself takes them once stable.
        assert!(!settled(
            Some(&base),
            &look(&[], Some(more.clone())),
            true,
            long
        ));
        assert!(settled(
            Some(&base),
            &look(&[], Some(more.clone())),
            false,
            STABLE
        ));
        assert!(!settled(
            Some(&base),
            &look(&[], Some(more.clone())),
            false,
            STABLE / 2
        ));
        assert!(settled(
            Some(&base),
            &look(&[], Some(base.clone())),
            true,
            Duration::ZERO
        ));
        // Without the module there is nothing to compare.
        assert!(settled(None, &look(&[], None), true, Duration::ZERO));
        assert!(settled(Some(&base), &look(&[], None), true, Duration::ZERO));
    }

    #[test]
    fn what_never_came_back_fails_a_killed_test_and_is_named() {
        let base = parse(STATS, Some(LIMITS)).unwrap();
        let mut more = base.clone();
        *more.get_mut("node0 held").unwrap() += 4096;
        let b = Duration::from_secs(30);
        let now = look(&["7 (tk-test-x) state D"], Some(more.clone()));
        let o = outcome(Some(&base), &now, true, false, b, b);
        assert!(o.unreleased);
        assert_eq!(
            o.notes,
            ["what it held did not come back within 30 s after it was killed: 7 (tk-test-x) state D, tierkit node0 held Some(1024) -> Some(5120)"]
        );
        let e = with_outcome(Ending::default(), &o);
        assert!(e.unreleased);
        // Back after a wait: reported, not failed.
        let o = outcome(
            Some(&base),
            &look(&[], Some(base.clone())),
            true,
            true,
            Duration::from_millis(2500),
            b,
        );
        assert!(!o.unreleased);
        assert_eq!(
            o.notes,
            ["waited 2.5 s for its processes to be reaped and tierkit's counters to come back"]
        );
        // A quick look says nothing.
        let o = outcome(
            Some(&base),
            &look(&[], Some(base.clone())),
            true,
            true,
            Duration::ZERO,
            b,
        );
        assert!(o.notes.is_empty());
        // A test that ended by itself and left counters changed: noted.
        let o = outcome(Some(&base), &look(&[], Some(more)), false, true, STABLE, b);
        assert!(!o.unreleased);
        assert!(
            o.notes[0].ends_with(
                "they settled elsewhere: node0 held Some(1024) -> Some(5120) (before -> after)"
            ),
            "{:?}",
            o.notes
        );
    }

    #[test]
    fn counters_below_their_baseline_are_back() {
        // The pool's refill, begun by an earlier test, ends during a
        // killed one: `gigantic_pool_filling` 1 -> 0 is not the killed
        // test's; `held_pages` above its baseline is.
        let base: Holdings = [("gigantic_pool_filling", 1), ("held_pages", 0)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let mut now = base.clone();
        now.insert("gigantic_pool_filling".into(), 0);
        assert!(settled(
            Some(&base),
            &look(&[], Some(now.clone())),
            true,
            Duration::ZERO
        ));
        now.insert("held_pages".into(), 16);
        assert!(!settled(
            Some(&base),
            &look(&[], Some(now)),
            true,
            Duration::ZERO
        ));
    }

    #[test]
    fn remaining_processes_are_the_group_and_the_killed() {
        let p = |pid, state, ppid, pgrp| Proc {
            pid,
            comm: "x".into(),
            state,
            ppid,
            pgrp,
        };
        let all = [
            p(1, 'S', 0, 1),
            p(10, 'Z', 1, 10),
            p(11, 'D', 10, 10),
            p(13, 'S', 1, 13),
            p(14, 'S', 1, 14),
            Proc {
                comm: "tk-keep-alive".into(),
                ..p(15, 'S', 1, 10)
            },
        ];
        let killed: BTreeSet<i32> = [13].into();
        let pids: Vec<i32> = remaining(&all, 10, &killed).iter().map(|p| p.pid).collect();
        assert_eq!(pids, [11, 13]);
    }
}
