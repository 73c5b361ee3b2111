//! Offlining the node while a gigantic range on it is cleared, and before
//! the range is registered.

use super::*;

/// Node `nid`'s `MemFree`, kB.
pub fn mem_free_kb(nid: u32) -> Option<u64> {
    let t = std::fs::read_to_string(format!("{NODE_SYSFS}/node{nid}/meminfo")).ok()?;
    t.lines()
        .find(|l| l.contains("MemFree:"))?
        .split_whitespace()
        .rev()
        .nth(1)?
        .parse()
        .ok()
}

/// Waits up to 60 s for node `c`'s MemFree to drop by about a GiB from
/// `free0_kb`: a 1 GiB range was taken there.
pub fn range_taken(c: u32, free0_kb: u64) -> bool {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < Duration::from_secs(60) {
        if mem_free_kb(c).is_some_and(|f| f + 900 * 1024 < free0_kb) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Offlines each of `blocks`, each within `limit`: the blocks that went
/// offline, and every outcome. A write that could not be made fails
/// `what: memoryN`.
pub fn offline_each(
    r: &mut Report,
    what: &str,
    blocks: &[u64],
    limit: Duration,
) -> (Vec<u64>, Vec<(u64, crate::linux::memblock::Timed)>) {
    let (mut offline, mut outcomes) = (Vec::new(), Vec::new());
    for &b in blocks {
        match set_block_state(b, "offline", limit) {
            Ok(t) => {
                if matches!(t.outcome, Outcome::Done) {
                    offline.push(b);
                }
                outcomes.push((b, t));
            }
            Err(e) => {
                r.fail(&format!("{what}: memory{b}"), e.to_string());
            }
        }
    }
    (offline, outcomes)
}

/// The outcomes that are neither done nor EBUSY, described.
pub fn neither_done_nor_busy(outcomes: &[(u64, crate::linux::memblock::Timed)]) -> Vec<String> {
    outcomes
        .iter()
        .filter(|(_, t)| {
            !matches!(t.outcome, Outcome::Done) && !t.outcome.describe().contains("EBUSY")
        })
        .map(|(b, t)| {
            format!(
                "memory{b}: {} after {:.1} s",
                t.outcome.describe(),
                t.elapsed.as_secs_f64()
            )
        })
        .collect()
}

/// Part 7 of the module docs: offline every block of `c` while a
/// `TK_IOC_CLEAR_BENCH` range (no mapping holds it) is being cleared there.
pub fn offline_during_clear(r: &mut Report, c: u32, blocks: &[u64]) -> Vec<u64> {
    const WHAT: &str = "offline during a 1 GiB TK_IOC_CLEAR_BENCH on the node";
    let _opt_in = match MovableGigantic::enable() {
        Ok(g) => g,
        Err(e) => {
            r.fail(&format!("{WHAT}: movable_gigantic"), e.to_string());
            return Vec::new();
        }
    };
    let kmsg = Kmsg::open().ok();
    if let Some(k) = &kmsg {
        let _ = k.skip_to_end();
    }
    let free0 = mem_free_kb(c).unwrap_or(0);
    // SAFETY: this test is single-threaded; the child only runs the ioctl
    // and `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        r.fail(
            &format!("{WHAT}: fork"),
            std::io::Error::last_os_error().to_string(),
        );
        return Vec::new();
    }
    if pid == 0 {
        let rc = Tierkit::open()
            .and_then(|t| {
                t.clear_bench(clear_bench_arg(
                    c as i32,
                    1,
                    tierkit_core::uapi::TK_PLACE_LOCAL,
                    1,
                ))
            })
            .map_or(1, |_| 0);
        // SAFETY: leaves the child without the parent's cleanup.
        unsafe { libc::_exit(rc) };
    }
    // The range is taken when the node's free memory drops by a GiB.
    let taken = range_taken(c, free0);
    let mut offline = Vec::new();
    if taken {
        let (done, outcomes) = offline_each(r, WHAT, blocks, Duration::from_secs(30));
        offline = done;
        let busy: Vec<_> = outcomes
            .iter()
            .filter(|(_, t)| t.outcome.describe().contains("EBUSY"))
            .collect();
        let stuck = neither_done_nor_busy(&outcomes);
        r.check(
            &format!("{WHAT}: every offline returns (done or EBUSY), none hangs"),
            if stuck.is_empty() {
                Ok(())
            } else {
                Err(stuck.join("; "))
            },
        );
        r.check_note(
            &format!("{WHAT}: the range's blocks refuse with EBUSY within 5 s"),
            match busy.iter().map(|(_, t)| t.elapsed).max() {
                None => Err("no offline was refused: the range's blocks went offline?".to_string()),
                Some(d) if d > Duration::from_secs(5) => {
                    Err(format!("slowest EBUSY after {:.1} s", d.as_secs_f64()))
                }
                Some(d) => Ok(format!(
                    "{} blocks EBUSY, slowest {:.3} s; {} done",
                    busy.len(),
                    d.as_secs_f64(),
                    offline.len()
                )),
            },
        );
        let log = kmsg.as_ref().map(Kmsg::read_new).unwrap_or_default();
        r.check_note(
            &format!("{WHAT}: the kernel log names tierkit and the range"),
            log.iter()
                .find(|l| l.contains("tierkit") && l.contains("movable_gigantic"))
                .cloned()
                .ok_or_else(|| "no such line".to_string()),
        );
    } else {
        r.skip(
            WHAT,
            "the bench's range did not show in the node's MemFree within 60 s",
        );
    }
    // SAFETY: `pid` is our child.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let mut st = 0;
    // SAFETY: reaps our child.
    unsafe { libc::waitpid(pid, &mut st, 0) };
    offline
}

/// An offline of the node's memory while tierkit holds a new movable
/// range it has not yet registered (a test delay widens that window to
/// 5 s: `test/movable_register_delay_ms`) is refused with EBUSY at once;
/// without the refusal, an offline of a block inside the range would
/// retry its migration until killed. Returns the blocks it left offline.
pub fn offline_before_registration(r: &mut Report, c: u32, blocks: &[u64]) -> Vec<u64> {
    const WHAT: &str = "offline while a new movable 1 GiB range is not yet registered";
    const DELAY: &str = "/sys/kernel/debug/tierkit/test/movable_register_delay_ms";
    let _opt_in = match MovableGigantic::enable() {
        Ok(g) => g,
        Err(e) => {
            r.fail(&format!("{WHAT}: movable_gigantic"), e.to_string());
            return Vec::new();
        }
    };
    if let Err(e) = std::fs::write(DELAY, "5000") {
        r.fail(&format!("{WHAT}: {DELAY}"), e.to_string());
        return Vec::new();
    }
    let free0 = mem_free_kb(c).unwrap_or(0);
    let mut child = match crate::linux::vma::spawn_synced(|ready| {
        ready();
        Tierkit::open()
            .and_then(|t| {
                t.clear_bench(clear_bench_arg(
                    c as i32,
                    1,
                    tierkit_core::uapi::TK_PLACE_LOCAL,
                    1,
                ))
            })
            .map_or(1, |_| 0)
    }) {
        Ok(ch) => ch,
        Err(e) => {
            let _ = std::fs::write(DELAY, "0");
            r.fail(&format!("{WHAT}: fork"), e.to_string());
            return Vec::new();
        }
    };
    let t0 = std::time::Instant::now();
    let taken = range_taken(c, free0);
    let in_window = t0.elapsed();
    let (offline, results) = if taken {
        offline_each(r, WHAT, blocks, Duration::from_secs(20))
    } else {
        (Vec::new(), Vec::new())
    };
    let spent = t0.elapsed();
    let _ = std::fs::write(DELAY, "0");
    let _ = child.kill_and_reap();
    if !taken {
        r.skip(
            WHAT,
            "the bench's range did not show in the node's MemFree within 60 s",
        );
        return offline;
    }
    let bad = neither_done_nor_busy(&results);
    let busy = results
        .iter()
        .filter(|(_, t)| t.outcome.describe().contains("EBUSY"))
        .count();
    r.check_note(
        &format!("{WHAT}: every offline returns at once (EBUSY in the window), none hangs"),
        if !bad.is_empty() {
            Err(bad.join("; "))
        } else if busy == 0 {
            Err("no offline was refused".into())
        } else {
            Ok(format!(
                "{busy} of {} blocks EBUSY, {} done; window entered after {:.2} s, all tried by {:.2} s",
                results.len(),
                offline.len(),
                in_window.as_secs_f64(),
                spent.as_secs_f64()
            ))
        },
    );
    offline
}
