//! The races every run makes, on a schedule, each counted: a random draw
//! may never hit a narrow race (an offline while another call is inside
//! its mmap), so these are set up on purpose, both sides in the worker
//! (or in a child it runs), and the run fails if one of them never ran
//! ([`check_races`]).
//!
//! - THP flipped (`prctl(PR_SET_THP_DISABLE)`, `MADV_HUGEPAGE`/
//!   `MADV_NOHUGEPAGE`) by one thread while another zaps and faults a
//!   4 KiB mapping again and again (`races::thp_flips_during_faults`);
//! - a `prctl(PR_SET_THP_DISABLE)` and a 4 KiB touch during another
//!   thread's first touch of a GiB (`races::prctl_during_first_touch`);
//! - SIGSTOP, SIGCONT and a handled SIGUSR1 during a paced
//!   `TK_IOC_REBALANCE` and a second caller's wait behind it: both in T
//!   within 2 s, back in their calls after SIGCONT, both `EINTR` after the
//!   handler (`races::stop_during_paced_rebalance_to`);
//! - a pipe (`vmsplice`) and an io_uring registered buffer that outlive
//!   the mapping and the file they took their pages from (kept in the
//!   worker's arena; on a machine with ZONE_MOVABLE memory the ring's
//!   long-term writable pin is refused with `EFAULT`);
//! - an offline of a ZONE_MOVABLE block of the node a 4 KiB `mmap` or a
//!   `TK_IOC_BULK` of another thread is allocating on, begun while that
//!   call is in flight: done or refused within 20 s, never a spin.
//!
//! The races that make a process's THP state or signals their subject run
//! in a child (this binary again, told by [`RACE_CHILD_ENV`] what to do),
//! so that they stop, signal or change no fuzz worker, and a `SIGBUS` of a
//! GiB that cannot be made ends only the child.

use super::*;
use crate::abi::tk::{Tierkit, TK_MODE_INTERLEAVE, TK_MODE_WEIGHTED_INTERLEAVE};

/// The races, in the order they are dealt to the workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Race {
    Thp4k,
    ThpGigantic,
    StopPaced,
    PipeOutlivesFile,
    RingOutlivesFile,
    OfflineMmap,
    OfflineBulk,
}

pub const RACES: [Race; 7] = [
    Race::Thp4k,
    Race::ThpGigantic,
    Race::StopPaced,
    Race::PipeOutlivesFile,
    Race::RingOutlivesFile,
    Race::OfflineMmap,
    Race::OfflineBulk,
];

impl Race {
    pub fn name(self) -> &'static str {
        match self {
            Race::Thp4k => "THP flips during 4 KiB faults",
            Race::ThpGigantic => "prctl and a 4 KiB touch during a GiB's first touch",
            Race::StopPaced => "SIGSTOP, SIGCONT, SIGUSR1 during paced rebalances",
            Race::PipeOutlivesFile => "a vmspliced pipe outlives its file",
            Race::RingOutlivesFile => "an io_uring buffer outlives its file",
            Race::OfflineMmap => "an offline during a 4 KiB mmap",
            Race::OfflineBulk => "an offline during TK_IOC_BULK",
        }
    }

    /// Most runs of this race per worker (a GiB, a pace of seconds and an
    /// offline are dear).
    fn most(self) -> u32 {
        match self {
            Race::ThpGigantic => 1,
            Race::StopPaced | Race::OfflineMmap | Race::OfflineBulk => 2,
            Race::Thp4k => 4,
            Race::PipeOutlivesFile | Race::RingOutlivesFile => 8,
        }
    }

    /// The races this machine can run: offlines need a ZONE_MOVABLE block.
    pub fn here(env: &Env) -> Vec<Race> {
        RACES
            .iter()
            .copied()
            .filter(|r| {
                env.movable.is_some() || !matches!(r, Race::OfflineMmap | Race::OfflineBulk)
            })
            .collect()
    }

    /// The races worker `index` of `nworkers` makes: every `nworkers`-th,
    /// from its own index.
    pub(super) fn dealt(env: &Env, index: usize, nworkers: usize) -> Vec<Race> {
        Race::here(env)
            .into_iter()
            .enumerate()
            .filter(|(k, _)| k % nworkers.max(1) == index % nworkers.max(1))
            .map(|(_, r)| r)
            .collect()
    }
}

/// The environment variable that makes `tk-fuzz` and `tk-test-fuzz` a
/// race child: `thp-4k NID`, `thp-gigantic NID`, `stop-paced FROM TO`.
pub const RACE_CHILD_ENV: &str = "TK_FUZZ_RACE_CHILD";
/// The race child's answer on stdout: `ran: ...`, `skip: ...`, `fail: ...`.
const RACE_LINE: &str = "TK-FUZZ-RACE";
/// A race child still running after this is killed and fails the race.
const CHILD_LIMIT: Duration = Duration::from_secs(180);

/// How a race ended.
enum Ran {
    /// It ran; the outcome (counted by it) and a note.
    Yes(String, String),
    /// It could not run here (no GiB, no block); why.
    Skip(String),
    /// It ran and found a fault.
    Fail(String),
}

/// If this process is a race child ([`RACE_CHILD_ENV`] set), runs the race
/// it names, prints its answer and exits; otherwise returns. First thing
/// in `main` of the binaries that run the fuzzer.
pub fn race_child_if_asked() {
    let Ok(spec) = std::env::var(RACE_CHILD_ENV) else {
        return;
    };
    let line = match race_child(&spec) {
        Ran::Yes(o, n) => format!("ran: {o}: {n}"),
        Ran::Skip(w) => format!("skip: {w}"),
        Ran::Fail(e) => format!("fail: {e}"),
    };
    println!("{RACE_LINE} {line}");
    std::process::exit(0);
}

fn race_child(spec: &str) -> Ran {
    let w: Vec<&str> = spec.split_whitespace().collect();
    let nid = |i: usize| w.get(i).and_then(|s| s.parse::<u32>().ok());
    let open = |mask: u64| -> Result<Tierkit, String> {
        let t = Tierkit::open().map_err(|e| format!("open: {e}"))?;
        t.set_policy(TK_MODE_INTERLEAVE, mask)
            .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
        Ok(t)
    };
    match (w.first().copied(), nid(1), nid(2)) {
        (Some("thp-4k"), Some(n), _) => {
            let res = open(1 << n).and_then(|t| {
                let m = t.map(64, 0).map_err(|e| format!("mmap: {e}"))?;
                crate::tests::races::thp_flips_during_faults(&m, 16)
            });
            match res {
                Ok(n) => Ran::Yes("ok".into(), n),
                Err(e) => Ran::Fail(e),
            }
        }
        (Some("thp-gigantic"), Some(n), _) => {
            let res = Tierkit::gigantic_on(n)
                .map_err(|e| format!("gigantic mode on node {n}: {e}"))
                .and_then(|t| {
                    let m = crate::linux::sys::Mapping::new(GIB, libc::MAP_SHARED, t.fd(), 0)
                        .map_err(|e| format!("mmap: {e}"))?;
                    crate::tests::races::prctl_during_first_touch(&t, &m, CHILD_LIMIT / 2)
                });
            match res {
                Ok(n) if n.starts_with("B's") => Ran::Yes("met".into(), n),
                Ok(n) => Ran::Yes("the PUD first".into(), n),
                // The first touch found no free aligned GiB.
                Err(e) if e.contains("killed by SIGBUS") => {
                    Ran::Skip(format!("no GiB on node {n}: {e}"))
                }
                Err(e) => Ran::Fail(e),
            }
        }
        (Some("stop-paced"), Some(a), Some(b)) => {
            let res = open(1 << a).and_then(|t| {
                let m = t.map(256, 0).map_err(|e| format!("mmap: {e}"))?;
                m.touch_pages();
                crate::tests::races::stop_during_paced_rebalance_to(&t, 1 << b)
            });
            match res {
                Ok(n) => Ran::Yes("T, EINTR".into(), n),
                Err(e) => Ran::Fail(e),
            }
        }
        _ => Ran::Fail(format!("unknown race child {spec:?}")),
    }
}

/// Runs a race child for `spec` and reads its answer.
fn run_child(spec: &str) -> Ran {
    use std::io::Read;
    let mut c = match std::process::Command::new("/proc/self/exe")
        .env(RACE_CHILD_ENV, spec)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Ran::Fail(format!("spawning the race child {spec:?}: {e}")),
    };
    let t0 = Instant::now();
    let status = loop {
        match c.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if t0.elapsed() < CHILD_LIMIT => std::thread::sleep(Duration::from_millis(20)),
            _ => break None,
        }
    };
    let Some(status) = status else {
        let _ = c.kill();
        let _ = c.wait();
        return Ran::Fail(format!(
            "the race child {spec:?} still ran after {CHILD_LIMIT:?}"
        ));
    };
    let mut out = String::new();
    if let Some(mut o) = c.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    let Some(line) = out.lines().find_map(|l| l.strip_prefix(RACE_LINE)) else {
        return Ran::Fail(format!("the race child {spec:?} gave no answer ({status})"));
    };
    let line = line.trim();
    if let Some(r) = line.strip_prefix("ran: ") {
        let (o, n) = r.split_once(": ").unwrap_or((r, ""));
        Ran::Yes(o.to_string(), n.to_string())
    } else if let Some(w) = line.strip_prefix("skip: ") {
        Ran::Skip(w.to_string())
    } else {
        Ran::Fail(line.strip_prefix("fail: ").unwrap_or(line).to_string())
    }
}

/// The online ZONE_MOVABLE blocks of `nid`.
fn movable_blocks(nid: u32) -> Vec<u64> {
    use crate::linux::memblock::{block_state, block_zone, node_blocks};
    node_blocks(nid)
        .into_iter()
        .filter(|&b| {
            block_zone(b).as_deref() == Some("Movable")
                && block_state(b).as_deref() == Some("online")
        })
        .collect()
}

/// A ZONE_MOVABLE node with an online movable block, if any.
pub(super) fn movable_node(mem_nodes: &[u32]) -> Option<u32> {
    mem_nodes
        .iter()
        .copied()
        .find(|&n| !movable_blocks(n).is_empty())
}

impl Worker<'_> {
    /// The next race this worker owes, if one is due: the first after 100
    /// calls, each of its other races 10 calls after the one before (so
    /// that a run the time bound stops early, as on a slow debug kernel,
    /// still made each), then one every 40th of its quota, each race at
    /// most [`Race::most`] times. Returns the time it took (zero: none).
    pub(super) fn race_if_due(&mut self, o: &mut Rng, quota: u64) -> Duration {
        if !self.cfg.races || self.res.calls < self.next_race || self.races.is_empty() {
            return Duration::ZERO;
        }
        self.next_race = self.res.calls
            + if (self.race_no as usize) + 1 < self.races.len() {
                10
            } else {
                (quota / 40).max(100)
            };
        let n = self.races.len();
        let Some(race) = (0..n)
            .map(|k| self.races[(self.race_no as usize + k) % n])
            .find(|r| self.res.races_of(r.name()) < u64::from(r.most()))
        else {
            return Duration::ZERO;
        };
        self.race_no += 1;
        let t0 = Instant::now();
        let ran = match race {
            Race::Thp4k => run_child(&format!("thp-4k {}", self.env.mem_nodes[0])),
            Race::ThpGigantic => run_child(&format!("thp-gigantic {}", self.env.mem_nodes[0])),
            Race::StopPaced => match (self.env.mem_nodes.first(), self.env.mem_nodes.last()) {
                (Some(a), Some(b)) if a != b => run_child(&format!("stop-paced {a} {b}")),
                _ => Ran::Skip("one memory node".into()),
            },
            Race::PipeOutlivesFile => self.outlives_file(false),
            Race::RingOutlivesFile => self.outlives_file(true),
            Race::OfflineMmap => self.offline_during(o, false),
            Race::OfflineBulk => self.offline_during(o, true),
        };
        let key = match ran {
            Ran::Yes(outcome, _) => format!("{} | {outcome}", race.name()),
            Ran::Skip(why) => format!("{} | skipped: {why}", race.name()),
            Ran::Fail(e) => {
                self.fail(format!("{}: {e}", race.name()));
                format!("{} | failed", race.name())
            }
        };
        // One line a race, as it ends: a hang shows which one.
        eprintln!(
            "# fuzz: worker {} after {} calls: race {key} ({:.1} s)",
            self.id,
            self.res.calls,
            t0.elapsed().as_secs_f64()
        );
        *self.res.races.entry(key).or_default() += 1;
        t0.elapsed()
    }

    /// A 16-page mapping of a new file on the movable node (if any),
    /// vmspliced into a new pipe or registered as an io_uring buffer,
    /// then unmapped and closed: the pipe or ring, kept in the arena,
    /// holds the pages past their file.
    fn outlives_file(&mut self, ring: bool) -> Ran {
        let nid = self.env.movable.unwrap_or(self.env.mem_nodes[0]);
        let t = match Tierkit::open()
            .and_then(|t| t.set_policy(TK_MODE_INTERLEAVE, 1 << nid).map(|_| t))
        {
            Ok(t) => t,
            Err(e) => return Ran::Fail(format!("a file on node {nid}: {e}")),
        };
        let m = match t.map(16, 0) {
            Ok(m) => m,
            Err(e) => return Ran::Fail(format!("mmap of 16 pages on node {nid}: {e}")),
        };
        m.touch_pages();
        let iov = libc::iovec {
            iov_base: m.as_ptr() as *mut c_void,
            iov_len: m.len(),
        };
        let r = if ring {
            let Ok(ring) = io_uring::IoUring::new(2) else {
                return Ran::Skip("no io_uring".into());
            };
            // SAFETY: the ring keeps its own pins of the pages, whatever
            // happens to the mapping; it is kept or dropped whole.
            let r = unsafe { ring.submitter().register_buffers(&[iov]) };
            let r = r.map(|()| 0).map_err(|e| e.raw_os_error().unwrap_or(0));
            if r.is_ok() {
                self.keep(Kept::Ring {
                    _ring: Box::new(ring),
                });
            }
            r
        } else {
            let mut p = [0i32; 2];
            // SAFETY: writes two fds into `p`.
            if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
                return Ran::Fail(format!("pipe2: {}", errno_str(errno())));
            }
            // SAFETY: the kernel reads our own mapping.
            let r = sys_res(unsafe { libc::vmsplice(p[1], &iov, 1, 0) } as i64);
            self.keep(Kept::Pipe(p));
            r
        };
        drop(m);
        drop(t);
        let movable = self.env.movable.is_some();
        match r {
            Ok(_) => Ran::Yes(format!("kept past the file (node {nid})"), String::new()),
            // A 4 KiB mapping refuses long-term writable pins where a
            // node has ZONE_MOVABLE memory (the ABI's pfn_mkwrite rule).
            Err(libc::EFAULT) if ring && movable => {
                Ran::Yes("EFAULT (ZONE_MOVABLE memory here)".into(), String::new())
            }
            Err(e) => Ran::Fail(format!(
                "{} of a 16-page mapping on node {nid}: {}",
                if ring {
                    "io_uring buffer registration"
                } else {
                    "vmsplice"
                },
                errno_str(e)
            )),
        }
    }

    /// Another thread makes a 4 KiB `mmap` of 4,096 pages (or a
    /// `TK_IOC_BULK` of 16,384) on the movable node; once it is in its
    /// call, a random online movable block of that node goes offline:
    /// done (and online again at once) or refused within 20 s.
    fn offline_during(&mut self, o: &mut Rng, bulk: bool) -> Ran {
        use crate::linux::memblock::{set_block_state, Outcome};
        use std::sync::atomic::AtomicU32;
        let Some(nid) = self.env.movable else {
            return Ran::Skip("no ZONE_MOVABLE block".into());
        };
        let blocks = movable_blocks(nid);
        if blocks.is_empty() {
            return Ran::Skip(format!("no online movable block on node {nid}"));
        }
        let b = *o.pick(&blocks);
        let wait_ms = o.below(30);
        // 0 before the call, 1 inside it, 2 after.
        let phase = AtomicU32::new(0);
        // The bulk path serves weighted interleave only.
        let mode = if bulk {
            TK_MODE_WEIGHTED_INTERLEAVE
        } else {
            TK_MODE_INTERLEAVE
        };
        let limit = Duration::from_secs(20);
        let (call, offline, overlap) = std::thread::scope(|s| {
            let h = s.spawn(|| -> Result<(), String> {
                let t = Tierkit::open()
                    .and_then(|t| t.set_policy(mode, 1 << nid).map(|_| t))
                    .map_err(|e| format!("a file on node {nid}: {e}"))?;
                phase.store(1, Ordering::SeqCst);
                let r = if bulk {
                    t.bulk(16_384).map(|_| ())
                } else {
                    t.map(4096, 0).map(drop)
                };
                phase.store(2, Ordering::SeqCst);
                // ENOMEM and EBUSY are answers an offline may cause.
                match r {
                    Err(e)
                        if ![libc::ENOMEM, libc::EBUSY]
                            .contains(&e.raw_os_error().unwrap_or(0)) =>
                    {
                        Err(format!(
                            "{}: {e}",
                            if bulk { "TK_IOC_BULK" } else { "mmap" }
                        ))
                    }
                    _ => Ok(()),
                }
            });
            while phase.load(Ordering::SeqCst) == 0 && !h.is_finished() {
                std::thread::yield_now();
            }
            std::thread::sleep(Duration::from_millis(wait_ms));
            let overlap = phase.load(Ordering::SeqCst) == 1;
            let off = set_block_state(b, "offline", limit);
            let call = h
                .join()
                .unwrap_or_else(|_| Err("the caller panicked".into()));
            (call, off, overlap)
        });
        if let Err(e) = call {
            return Ran::Fail(e);
        }
        let t = match offline {
            Ok(t) => t,
            Err(e) => return Ran::Fail(format!("offline of memory{b}: {e}")),
        };
        let when = if overlap {
            "begun inside the call"
        } else {
            "begun after the call"
        };
        match t.outcome {
            Outcome::Done => {
                let back = set_block_state(b, "online_movable", limit);
                if !back.is_ok_and(|t| t.outcome == Outcome::Done) {
                    return Ran::Fail(format!("memory{b} did not come online again"));
                }
                Ran::Yes(format!("done, {when}"), String::new())
            }
            Outcome::Failed(e) if [libc::EBUSY, libc::EINTR, libc::ENOMEM].contains(&e) => {
                Ran::Yes(format!("{}, {when}", errno_str(e)), String::new())
            }
            _ => Ran::Fail(format!(
                "offline of memory{b} {when}: {} after {:.1} s",
                t.outcome.describe(),
                t.elapsed.as_secs_f64()
            )),
        }
    }
}

/// Each race's runs in `out`, by outcome, noted in `r`; fails if a race
/// this machine can run ran no time (a skip is no run), when the run had
/// every worker (`--only` makes only its worker's).
pub fn check_races(r: &mut crate::harness::report::Report, cfg: &Config, env: &Env, out: &Outcome) {
    if !cfg.races {
        return;
    }
    let all = out.races();
    let mut none = Vec::new();
    for race in Race::here(env) {
        let mine: Vec<(&String, &u64)> = all
            .iter()
            .filter(|(k, _)| k.split(" | ").next() == Some(race.name()))
            .collect();
        let ran: u64 = mine
            .iter()
            .filter(|(k, _)| !k.contains("| skipped") && !k.ends_with("| failed"))
            .map(|(_, v)| **v)
            .sum();
        let detail: Vec<String> = mine
            .iter()
            .map(|(k, v)| format!("{v} {}", k.split(" | ").nth(1).unwrap_or("")))
            .collect();
        r.note(format!(
            "fuzz: race {}: ran {ran} time(s) ({})",
            race.name(),
            detail.join(", ")
        ));
        if ran == 0 {
            none.push(race.name());
        }
    }
    if cfg.only.is_none() {
        r.check(
            "fuzz: every scheduled race ran",
            if none.is_empty() {
                Ok(())
            } else {
                Err(format!("never ran: {}", none.join("; ")))
            },
        );
    }
}
