//! The logic of `tk-test-rebalance`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-rebalance.rs` (its `--help`).

use crate::abi::ready::{tierkit_ready, tierkit_weight_dir};
use crate::abi::tk::{self, Tierkit, TK_MODE_WEIGHTED_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::sys::Mapping;
use crate::topology::interleave::{expected_seq, weight_table};
use crate::topology::node;
use crate::topology::weights::WeightDir;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tierkit_core::uapi::{TkRebalance, TK_REBALANCE_F_DRY_RUN, TK_REBALANCE_F_WEIGHTS};

const BIN: &str = "tk-test-rebalance";
/// Pages of the mapping under test (8 MiB).
const PAGES: usize = 2048;
const PAGE: usize = 4096;
/// The pattern word at the start of page `i`.
fn pattern(i: usize) -> u64 {
    0xa5a5_0000_0000_0000 | i as u64
}

pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let Some(topo) = tierkit_ready(&mut r) else {
        return r.finish();
    };
    let Some(wd) = tierkit_weight_dir(&mut r) else {
        return r.finish();
    };
    let (Some(d), Some(c)) = (topo.dram_node(), topo.cxl_node()) else {
        r.skip("rebalance", "no DRAM + memory-only node pair");
        return r.finish();
    };
    let saved = wd.snapshot();
    let run = Run {
        wd: &wd,
        d,
        c,
        mask: node::mask_of(&[d, c]),
    };
    if let Err(e) = run.checks(&mut r) {
        r.fail("rebalance set-up", e);
    }
    r.check_note(
        "own weights {1,3} (TK_REBALANCE_F_WEIGHTS); the global table untouched",
        run.own_weights(),
    );
    r.check_note(
        "another file at the same offsets keeps every page mapped",
        run.other_file(),
    );
    // With no tierkit file open here, so that the child has only its own.
    r.check_note(
        "another process's mapping through TK_IOC_MAPPED_FILE (tk-calibrate --apply)",
        run.other_process(),
    );
    r.check_note(
        "SIGSTOP during a paced call and a second caller's wait: T, handlers run, EINTR",
        run.stopped(),
    );
    r.check_note(
        "a mapping placed on the DRAM node alone, rebalanced to both nodes: every misplaced page moves",
        run.widened(),
    );
    r.check_note(
        "a mapping nobody maps any more is neither moved nor counted",
        run.unmapped(),
    );
    refusals(&mut r, d, c);
    match saved {
        Ok(s) => r.check("restore tierkit weights", s.restore()),
        Err(e) => r.fail("restore tierkit weights", format!("no snapshot: {e:#}")),
    };
    r.finish()
}

struct Run<'a> {
    wd: &'a WeightDir,
    d: u32,
    c: u32,
    mask: u64,
}

impl Run<'_> {
    fn set(&self, wd_: u8, wc: u8) -> Result<[u8; 64], String> {
        let w = [(self.d, wd_), (self.c, wc)];
        self.wd.set_weights(&w).map_err(|e| format!("{e:#}"))?;
        Ok(weight_table(&w))
    }

    fn expected(&self, table: &[u8; 64]) -> Vec<i32> {
        expected_seq(true, self.mask, table, 0, PAGES)
            .into_iter()
            .map(|n| n as i32)
            .collect()
    }

    fn checks(&self, r: &mut Report) -> Result<(), String> {
        let w11 = self.set(1, 1)?;
        let (t, m) = mapped_file(self.mask)?;
        for i in 0..PAGES {
            write_word(&m, i, 0, pattern(i));
        }
        let before = self.expected(&w11);
        r.check("placed under {1,1}", same_nodes(&m, &before));
        let w31 = self.set(3, 1)?;
        let after = self.expected(&w31);
        let minimum = differ(&before, &after);
        r.note(format!(
            "weights {{1,1}} -> {{3,1}}: {minimum} of {PAGES} pages change node"
        ));

        let dry = t.rebalance(TkRebalance {
            flags: TK_REBALANCE_F_DRY_RUN,
            ..Default::default()
        });
        r.check(
            "dry run counts the minimum and moves nothing",
            dry.map_err(|e| e.to_string()).and_then(|a| {
                expect(
                    a.misplaced == minimum as u64 && a.moved == 0 && a.looked == PAGES as u64,
                    &a,
                )?;
                same_nodes(&m, &before)
            }),
        );

        let held0 = tk::read_stats().ok_or("no stats file")?;
        let moved = with_writer(&m, || {
            t.rebalance(TkRebalance::default())
                .map_err(|e| e.to_string())
        });
        let res = moved.and_then(|(a, last)| {
            expect(
                a.moved == minimum as u64
                    && a.misplaced == minimum as u64
                    && a.no_memory == 0
                    && a.busy == 0,
                &a,
            )?;
            same_nodes(&m, &after)?;
            contents(&m, last)?;
            Ok(format!(
                "{} moved in {} ms",
                a.moved,
                a.elapsed_ns / 1_000_000
            ))
        });
        r.check_note(
            "moves exactly the minimum under a concurrent writer; placement and contents",
            res,
        );
        r.check(
            "held statistics follow the moves",
            self.held_moved(&held0, &before, &after),
        );

        let again = t.rebalance(TkRebalance::default());
        r.check(
            "a second call moves nothing",
            again
                .map_err(|e| e.to_string())
                .and_then(|a| expect(a.misplaced == 0 && a.moved == 0, &a)),
        );

        // Back to {1,1} in two calls: a budget of 10, then the rest.
        let w11 = self.set(1, 1)?;
        let res = (|| {
            let a = t
                .rebalance(TkRebalance {
                    budget_pages: 10,
                    ..Default::default()
                })
                .map_err(|e| e.to_string())?;
            expect(a.moved == 10 && a.misplaced == minimum as u64, &a)?;
            let b = t
                .rebalance(TkRebalance::default())
                .map_err(|e| e.to_string())?;
            expect(b.moved == minimum as u64 - 10, &b)?;
            same_nodes(&m, &self.expected(&w11))
        })();
        r.check("a budget of 10 pages moves 10; the next call the rest", res);

        self.set(3, 1)?;
        r.check_note(
            "killed half-way, then finished",
            killed(&t, &m, &before, &after),
        );

        let res = (|| {
            let a = t
                .rebalance(TkRebalance {
                    nodemask: 1 << self.d,
                    ..Default::default()
                })
                .map_err(|e| e.to_string())?;
            let on_c = after.iter().filter(|&&n| n == self.c as i32).count() as u64;
            expect(a.moved == on_c && a.nodemask == 1 << self.d, &a)?;
            same_nodes(&m, &vec![self.d as i32; PAGES])?;
            let next = t
                .task_next(4)
                .map_err(|e| format!("TK_IOC_TASK_NEXT: {e}"))?;
            if next.iter().any(|&n| u32::from(n) != self.d) {
                return Err(format!("task path {next:?} leaves node {}", self.d));
            }
            contents_pattern(&m)
        })();
        r.check(
            "a new nodemask moves every page to it; the task path follows",
            res,
        );
        Ok(())
    }

    /// Files A and B both map offsets 0.. under {1,1}; B is rebalanced to
    /// {3,1}; none of A's pages may have been zapped (each file has an
    /// address space of its own) or moved.
    fn other_file(&self) -> Result<String, String> {
        let w11 = self.set(1, 1)?;
        let (_a, ma) = mapped_file(self.mask)?;
        let (b, _mb) = mapped_file(self.mask)?;
        for i in 0..PAGES {
            write_word(&ma, i, 0, pattern(i));
        }
        self.set(3, 1)?;
        let r = b
            .rebalance(TkRebalance::default())
            .map_err(|e| format!("TK_IOC_REBALANCE: {e}"))?;
        if r.moved == 0 {
            return Err("B moved nothing: the check would prove nothing".into());
        }
        let gone = not_present(&ma)?;
        if gone != 0 {
            return Err(format!(
                "{gone} of A's {PAGES} pages were zapped by B's rebalance ({} moves)",
                r.moved
            ));
        }
        same_nodes(&ma, &self.expected(&w11))?;
        contents_pattern(&ma)?;
        Ok(format!(
            "B moved {}, A's {PAGES} pages all still mapped",
            r.moved
        ))
    }

    /// A file under {1,1} whose weights become {3,1} (hundreds of pages
    /// misplaced): `races::stop_during_paced_rebalance`.
    fn stopped(&self) -> Result<String, String> {
        self.set(1, 1)?;
        let (t, _m) = mapped_file(self.mask)?;
        self.set(3, 1)?;
        crate::tests::races::stop_during_paced_rebalance(&t)
    }

    /// A mapping made with the DRAM node as the policy's only node, then
    /// rebalanced with the nodemask of both nodes: whichever zone the
    /// memory-only node has (a CXL node onlined movable has only
    /// ZONE_MOVABLE), each page bound for it moves, none counts as
    /// `no_memory`.
    fn widened(&self) -> Result<String, String> {
        let w11 = self.set(1, 1)?;
        let (t, m) = mapped_file(1 << self.d)?;
        for i in 0..PAGES {
            write_word(&m, i, 0, pattern(i));
        }
        same_nodes(&m, &vec![self.d as i32; PAGES])?;
        let want = self.expected(&w11);
        let minimum = want.iter().filter(|&&n| n == self.c as i32).count() as u64;
        let a = t
            .rebalance(TkRebalance {
                nodemask: self.mask,
                ..Default::default()
            })
            .map_err(|e| format!("TK_IOC_REBALANCE: {e}"))?;
        expect(
            a.misplaced == minimum && a.moved == minimum && a.no_memory == 0,
            &a,
        )?;
        same_nodes(&m, &want)?;
        contents_pattern(&m)?;
        Ok(format!("moved {minimum} of {minimum}"))
    }

    /// A file with two mappings under {1,1}; one is unmapped; after
    /// {3,1} a rebalance looks at the mapped one's pages only.
    fn unmapped(&self) -> Result<String, String> {
        let w11 = self.set(1, 1)?;
        let t = weighted_file(self.mask)?;
        let kept = Mapping::new(PAGES * PAGE, libc::MAP_SHARED, t.fd(), 0)
            .map_err(|e| format!("mmap: {e}"))?;
        let gone = Mapping::new(
            PAGES * PAGE,
            libc::MAP_SHARED,
            t.fd(),
            (PAGES * PAGE) as u64,
        )
        .map_err(|e| format!("mmap: {e}"))?;
        drop(gone);
        let w31 = self.set(3, 1)?;
        let minimum = differ(&self.expected(&w11), &self.expected(&w31)) as u64;
        let a = t
            .rebalance(TkRebalance::default())
            .map_err(|e| format!("TK_IOC_REBALANCE: {e}"))?;
        expect(
            a.looked == PAGES as u64 && a.misplaced == minimum && a.moved == minimum,
            &a,
        )?;
        same_nodes(&kept, &self.expected(&w31))?;
        Ok(format!("looked at {} pages, moved {}", a.looked, a.moved))
    }

    /// A file placed under the global {1,1} is rebalanced to its own
    /// {1,3}; the global table stays {1,1}.
    fn own_weights(&self) -> Result<String, String> {
        let w11 = self.set(1, 1)?;
        let (t, m) = mapped_file(self.mask)?;
        for i in 0..PAGES {
            write_word(&m, i, 0, pattern(i));
        }
        let own = [(self.d, 1), (self.c, 3)];
        let mut arg = TkRebalance {
            flags: TK_REBALANCE_F_WEIGHTS,
            ..Default::default()
        };
        for &(n, w) in &own {
            arg.weights[n as usize] = w;
        }
        let want = self.expected(&weight_table(&own));
        let minimum = differ(&self.expected(&w11), &want) as u64;
        let a = t
            .rebalance(arg)
            .map_err(|e| format!("TK_IOC_REBALANCE: {e}"))?;
        expect(a.moved == minimum, &a)?;
        same_nodes(&m, &want)?;
        contents_pattern(&m)?;
        let table = self.wd.table().map_err(|e| format!("{e:#}"))?;
        if (table[self.d as usize], table[self.c as usize]) != (1, 1) {
            return Err(format!(
                "the global table changed to {}/{}",
                table[self.d as usize], table[self.c as usize]
            ));
        }
        // A zero own weight for a node of the mask is refused.
        arg.weights[self.c as usize] = 0;
        match t.rebalance(arg) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            other => return Err(format!("a zero own weight: {other:?}, expected EINVAL")),
        }
        Ok(format!("moved {minimum}"))
    }

    /// A child maps and fills the pages under {1,1}; the weights become
    /// {3,1} and the parent rebalances the child's file from outside; the
    /// child then checks its own pages.
    fn other_process(&self) -> Result<String, String> {
        let w11 = self.set(1, 1)?;
        let before = self.expected(&w11);
        let (ready_r, ready_w) = pipe()?;
        let (go_r, go_w) = pipe()?;
        // SAFETY: fork in a test binary; the child runs only the code below
        // and leaves with _exit.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(format!("fork: {}", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            let ok = (|| -> Result<(), String> {
                let (_t, m) = mapped_file(self.mask)?;
                for i in 0..PAGES {
                    write_word(&m, i, 0, pattern(i));
                }
                same_nodes(&m, &before)?;
                signal(ready_w)?;
                wait_for(go_r)?;
                let w31 = weight_table(&[(self.d, 3), (self.c, 1)]);
                same_nodes(&m, &self.expected(&w31))?;
                contents_pattern(&m)
            })();
            if let Err(e) = &ok {
                println!("# child: {e}");
            }
            // SAFETY: leave without the parent's destructors.
            unsafe { libc::_exit(i32::from(ok.is_err())) };
        }
        let res = (|| {
            wait_for(ready_r)?;
            let after = self.expected(&self.set(3, 1)?);
            let minimum = differ(&before, &after) as u64;
            let rep = crate::tools::rebalance::apply(pid, TkRebalance::default())
                .map_err(|e| format!("apply: {e}"))?;
            let moved = rep.total().moved;
            if rep.files.len() != 1 || moved != minimum {
                return Err(format!(
                    "{} file(s), moved {moved}, expected one file and {minimum}",
                    rep.files.len()
                ));
            }
            let p = crate::tools::rebalance::placement(pid).map_err(|e| e.to_string())?;
            let want_c = after.iter().filter(|&&n| n == self.c as i32).count() as u64;
            Ok((moved, p, want_c))
        })();
        // The child waits for this whatever happened here.
        let _ = signal(go_w);
        let mut status = 0;
        // SAFETY: our own child; `status` is valid for a write.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        let (moved, p, want_c) = res?;
        if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
            return Err(format!("the child's own check failed (status {status:#x})"));
        }
        let on_c = p.get(&self.c).copied().unwrap_or(0);
        if on_c > want_c {
            return Err(format!(
                "numa_maps shows {on_c} pages on node {}, at most {want_c}",
                self.c
            ));
        }
        Ok(format!(
            "moved {moved}; numa_maps after the moves {}",
            crate::tools::rebalance::fmt_placement(&p)
        ))
    }

    /// The per-node `held` counts moved by the placement change.
    fn held_moved(
        &self,
        before: &[tk::NodeStats],
        want_before: &[i32],
        want_after: &[i32],
    ) -> Result<(), String> {
        let now = tk::read_stats().ok_or("no stats file")?;
        for n in [self.d, self.c] {
            let count = |v: &[i32]| v.iter().filter(|&&x| x == n as i32).count() as i64;
            let delta = count(want_after) - count(want_before);
            let got = tk::stats_of(&now, n).1 as i64 - tk::stats_of(before, n).1 as i64;
            if got != delta {
                return Err(format!("node {n}: held moved by {got}, expected {delta}"));
            }
        }
        Ok(())
    }
}

/// A child paced at 200 pages/s is killed after 0.5 s; the parent's call
/// then moves only what the child left.
fn killed(t: &Tierkit, m: &Mapping, before: &[i32], after: &[i32]) -> Result<String, String> {
    let minimum = differ(before, after);
    // SAFETY: fork in a test binary; the child only makes one ioctl and
    // exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        let _ = t.rebalance(TkRebalance {
            rate_pages: 50,
            ..Default::default()
        });
        // SAFETY: the child leaves without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    // Killed once it has moved a page (at 50 pages/s the rest takes
    // seconds), whatever the host's load.
    let moved_so_far = |m: &Mapping| -> Result<usize, String> {
        Ok(nodes(m)?
            .iter()
            .zip(before.iter().zip(after))
            .filter(|(n, (b, a))| b != a && n == a)
            .count())
    };
    let t0 = std::time::Instant::now();
    while moved_so_far(m)? == 0 && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: our own child.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let mut status = 0;
    // SAFETY: our own child; `status` is valid for a write.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if !libc::WIFSIGNALED(status) {
        return Err(format!(
            "the child was not killed (status {status:#x}): it finished first"
        ));
    }
    let done = moved_so_far(m)?;
    if done == 0 || done >= minimum {
        return Err(format!(
            "the child moved {done} of {minimum} before the kill"
        ));
    }
    let a = t
        .rebalance(TkRebalance::default())
        .map_err(|e| e.to_string())?;
    expect(a.moved == (minimum - done) as u64, &a)?;
    same_nodes(m, after)?;
    contents_pattern(m)?;
    Ok(format!(
        "child moved {done}, parent {} of {minimum}",
        a.moved
    ))
}

fn refusals(r: &mut Report, d: u32, c: u32) {
    let errno = |res: std::io::Result<TkRebalance>| match res {
        Ok(a) => Err(format!("accepted: {a:?}")),
        Err(e) => Ok(e.raw_os_error().unwrap_or(0)),
    };
    let case = |name: &str, want: i32, f: &dyn Fn() -> Result<i32, String>| {
        (
            name.to_string(),
            f().and_then(|e| {
                if e == want {
                    Ok(())
                } else {
                    Err(format!("errno {e}, expected {want}"))
                }
            }),
        )
    };
    let mask = node::mask_of(&[d, c]);
    let cases = [
        case("unknown flags: EINVAL", libc::EINVAL, &|| {
            errno(weighted_file(mask)?.rebalance(TkRebalance {
                flags: 1 << 7,
                ..Default::default()
            }))
        }),
        case("no policy: EINVAL", libc::EINVAL, &|| {
            let t = Tierkit::open().map_err(|e| e.to_string())?;
            errno(t.rebalance(TkRebalance::default()))
        }),
        case(
            "a mask of nodes without memory: EINVAL",
            libc::EINVAL,
            &|| {
                errno(weighted_file(mask)?.rebalance(TkRebalance {
                    nodemask: 1 << 63,
                    ..Default::default()
                }))
            },
        ),
        case("gigantic mode: EOPNOTSUPP", libc::EOPNOTSUPP, &|| {
            let t = Tierkit::gigantic_on(d).map_err(|e| e.to_string())?;
            errno(t.rebalance(TkRebalance::default()))
        }),
    ];
    for (name, res) in cases {
        r.check(&format!("refused: {name}"), res);
    }
    let res = (|| {
        let a = weighted_file(mask)?
            .rebalance(TkRebalance::default())
            .map_err(|e| e.to_string())?;
        expect(a.looked == 0 && a.moved == 0, &a)
    })();
    r.check("a file without mappings: nothing looked at", res);
}

/// Words 1..=SLOTS of each page take the writer's rounds in turn (word 0
/// holds the pattern).
const SLOTS: u64 = 500;

/// The word round `r` (from 1) writes.
fn slot_of(r: u64) -> usize {
    1 + ((r - 1) % SLOTS) as usize
}

/// Runs `f` while a thread writes round `r` into word [`slot_of`]`(r)` of
/// every page, round after round: a write lost in any round (not only the
/// last) leaves its word behind. Returns `f`'s result and the last round.
fn with_writer<T>(m: &Mapping, f: impl FnOnce() -> Result<T, String>) -> Result<(T, u64), String> {
    let stop = Arc::new(AtomicBool::new(false));
    let base = m.addr();
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                round += 1;
                for i in 0..PAGES {
                    let p = (base + i * PAGE + 8 * slot_of(round)) as *mut u64;
                    // SAFETY: a word of page i of a live shared mapping
                    // that only this thread writes meanwhile.
                    unsafe { p.write_volatile(round) };
                }
            }
            round
        })
    };
    // Let it run a round before the moves begin.
    std::thread::sleep(Duration::from_millis(20));
    let out = f();
    stop.store(true, Ordering::Relaxed);
    let last = writer
        .join()
        .map_err(|_| "the writer panicked".to_string())?;
    Ok((out?, last))
}

/// A new `/dev/tierkit` file with a weighted-interleave policy over `mask`.
fn weighted_file(mask: u64) -> Result<Tierkit, String> {
    let t = Tierkit::open().map_err(|e| e.to_string())?;
    t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, mask)
        .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
    Ok(t)
}

/// [`weighted_file`] with [`PAGES`] pages mapped at offset 0.
fn mapped_file(mask: u64) -> Result<(Tierkit, Mapping), String> {
    let t = weighted_file(mask)?;
    let m = t.map(PAGES, 0).map_err(|e| format!("mmap: {e}"))?;
    Ok((t, m))
}

/// Pages of `m` that no PTE maps now (`/proc/self/pagemap` bit 63).
fn not_present(m: &Mapping) -> Result<usize, String> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open("/proc/self/pagemap").map_err(|e| format!("pagemap: {e}"))?;
    let mut buf = vec![0u8; PAGES * 8];
    f.read_exact_at(&mut buf, (m.addr() / PAGE * 8) as u64)
        .map_err(|e| format!("pagemap: {e}"))?;
    Ok(buf.chunks_exact(8).filter(|e| e[7] & 0x80 == 0).count())
}

fn pipe() -> Result<(i32, i32), String> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is valid for two ints.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    Ok((fds[0], fds[1]))
}

fn signal(fd: i32) -> Result<(), String> {
    // SAFETY: one byte from a live buffer.
    if unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) } != 1 {
        return Err(format!("write: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

fn wait_for(fd: i32) -> Result<(), String> {
    let mut b = 0u8;
    // SAFETY: one byte into a live buffer.
    if unsafe { libc::read(fd, (&mut b as *mut u8).cast(), 1) } != 1 {
        return Err(format!("read: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

fn write_word(m: &Mapping, page: usize, word: usize, v: u64) {
    // SAFETY: in bounds of a live read/write mapping.
    unsafe { (m.as_ptr().add(page * PAGE + word * 8) as *mut u64).write_volatile(v) };
}

fn read_word(m: &Mapping, page: usize, word: usize) -> u64 {
    // SAFETY: in bounds of a live mapping.
    unsafe { (m.as_ptr().add(page * PAGE + word * 8) as *const u64).read_volatile() }
}

/// The node of every page, each read first (a moved page faults back in).
fn nodes(m: &Mapping) -> Result<Vec<i32>, String> {
    for i in 0..PAGES {
        read_word(m, i, 0);
    }
    m.page_nodes().map_err(|e| format!("move_pages: {e}"))
}

fn same_nodes(m: &Mapping, want: &[i32]) -> Result<(), String> {
    let got = nodes(m)?;
    match got.iter().zip(want).position(|(g, w)| g != w) {
        None => Ok(()),
        Some(i) => Err(format!(
            "page {i} on node {}, expected {} ({} pages differ)",
            got[i],
            want[i],
            differ(&got, want)
        )),
    }
}

fn contents_pattern(m: &Mapping) -> Result<(), String> {
    match (0..PAGES).find(|&i| read_word(m, i, 0) != pattern(i)) {
        None => Ok(()),
        Some(i) => Err(format!("page {i}: pattern {:#x} lost", read_word(m, i, 0))),
    }
}

/// The pattern, and in every page each word the writer's rounds
/// `1..=last` went to holds the last of them.
fn contents(m: &Mapping, last: u64) -> Result<(), String> {
    contents_pattern(m)?;
    for i in 0..PAGES {
        for r in last.saturating_sub(SLOTS - 1).max(1)..=last {
            let got = read_word(m, i, slot_of(r));
            if got != r {
                return Err(format!(
                    "page {i}: round {r}'s write ({} rounds in all) reads {got}: lost",
                    last
                ));
            }
        }
    }
    Ok(())
}

fn differ(a: &[i32], b: &[i32]) -> usize {
    a.iter().zip(b).filter(|(x, y)| x != y).count()
}

fn expect(ok: bool, a: &TkRebalance) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!(
            "looked {} misplaced {} moved {} no_memory {} busy {}",
            a.looked, a.misplaced, a.moved, a.no_memory, a.busy
        ))
    }
}
