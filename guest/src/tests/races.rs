//! What a process's own threads and signals do while tierkit sleeps in a
//! call or a fault of theirs: run by `tk-test-gigantic` (a `prctl` and a
//! 4 KiB touch during the first touch of a GiB) and `tk-test-rebalance`
//! (stop, continue and a handled signal during a paced rebalance and
//! during the wait of a second caller behind it), and by `tk-fuzz`'s
//! scheduled races (those two, and THP flipped while another thread faults
//! 4 KiB pages).

use crate::abi::tk::Tierkit;
use crate::linux::sys::{self, Mapping, PAGE_SIZE};
use crate::linux::vma::{self, Exit, Pipe};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};
use tierkit_core::uapi::{TkRebalance, TK_WALK_PTE, TK_WALK_PUD};

/// The byte thread A writes at the GiB's first touch, and where.
const A_BYTE: (usize, u8) = (5, 0x11);
/// The byte thread B writes after its `prctl`, and where (another page).
const B_BYTE: (usize, u8) = (7 * PAGE_SIZE + 3, 0x22);

/// In a child: thread A makes the first touch of the (untouched) gigantic
/// mapping `m` of `tk`, a PUD fault with its long clear; meanwhile thread B
/// calls `prctl(PR_SET_THP_DISABLE)` and touches another page of the same
/// GiB, a 4 KiB fault whose `pmd_alloc()` puts a PMD table into the PUD
/// slot A's fault is to fill. Both writes must land in the one GiB, each
/// touched page mapped once (by the PUD, or by PTEs of the GiB's pages),
/// and the kernel must not warn (the harness fails the boot on a report).
/// The parent, THP on, then reads both bytes through its own mapping.
/// `limit` bounds the child. Returns what the child saw.
pub fn prctl_during_first_touch(
    tk: &Tierkit,
    m: &Mapping,
    limit: Duration,
) -> Result<String, String> {
    let p = m.as_ptr() as usize;
    let res = vma::fork_run_within(limit, || {
        let a = std::thread::spawn(move || {
            // SAFETY: the child's copy of the parent's shared mapping.
            unsafe { std::ptr::write_volatile((p + A_BYTE.0) as *mut u8, A_BYTE.1) };
        });
        // A is in its fault by now: a GiB's clear takes far longer.
        std::thread::sleep(Duration::from_millis(200));
        if sys::disable_thp().is_err() {
            return 2;
        }
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile((p + B_BYTE.0) as *mut u8, B_BYTE.1) };
        if a.join().is_err() {
            return 3;
        }
        let (Ok(wa), Ok(wb)) = (tk.walk(p + A_BYTE.0), tk.walk(p + B_BYTE.0)) else {
            return 4;
        };
        // Both in the same GiB, by one PUD (TK_IOC_WALK gives the 4 KiB
        // page's pfn) or by PTEs of its pages (pfns from
        // /proc/self/pagemap, which only a PUD must not be read through:
        // the read splits it).
        let same = match (wa.level, wb.level) {
            (TK_WALK_PUD, TK_WALK_PUD) => wb.pfn == wa.pfn + 7,
            (TK_WALK_PTE, TK_WALK_PTE) => match crate::linux::memblock::pagemap_pfns(p, 8) {
                Ok(v) => matches!((v[0], v[7]), (Some(a), Some(b)) if b == a + 7),
                Err(_) => false,
            },
            _ => false,
        };
        if !same {
            return 5;
        }
        // 10: the race was met (B's touch mapped by a PTE); 0: A's PUD
        // came first.
        if wb.level == TK_WALK_PTE {
            10
        } else {
            0
        }
    });
    let how = match res {
        Ok(Exit::Code(10)) => "B's touch came first: the GiB is mapped by PTEs in the child",
        Ok(Exit::Code(0)) => "A's PUD came first (the race was not met this time)",
        Ok(Exit::Code(5)) => {
            return Err("the two touches are not mapped to the same GiB once".into())
        }
        Ok(e) => return Err(format!("the child: {e}, expected exit 0 or 10")),
        Err(e) => return Err(format!("the child: {e}")),
    };
    // SAFETY: the parent's mapping of the same file; THP is on here.
    let (a, b) = unsafe {
        (
            std::ptr::read_volatile((p + A_BYTE.0) as *const u8),
            std::ptr::read_volatile((p + B_BYTE.0) as *const u8),
        )
    };
    if (a, b) != (A_BYTE.1, B_BYTE.1) {
        return Err(format!("the parent reads {a:#x} and {b:#x}"));
    }
    Ok(format!("{how}; both writes in the parent's view"))
}

/// The state letter of `/proc/PID/stat` (R, S, D, T, ...).
pub fn proc_state(pid: i32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Where the children's SIGUSR1 handler writes a byte.
static HANDLER_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_usr1(_: libc::c_int) {
    let fd = HANDLER_FD.load(Ordering::Relaxed);
    // SAFETY: write(2) is async-signal-safe; a one-byte buffer.
    unsafe { libc::write(fd, b"u".as_ptr().cast(), 1) };
}

/// A child that installs a SIGUSR1 handler without `SA_RESTART` (writing
/// to `usr`), signals `ready`, makes `call` and exits 0 if it was ended by
/// the handled signal (`EINTR`), 3 if it finished, 4 otherwise.
fn child(
    ready: &Pipe,
    usr: &Pipe,
    call: impl FnOnce() -> std::io::Result<TkRebalance>,
) -> std::io::Result<libc::pid_t> {
    vma::fork_child(move || {
        HANDLER_FD.store(usr.wr, Ordering::Relaxed);
        // SAFETY: a zeroed sigaction whose handler only calls write(2).
        let ok = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_usr1 as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()) == 0
        };
        if !ok || ready.signal().is_err() {
            return 4;
        }
        match call() {
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => 0,
            Ok(_) => 3,
            Err(_) => 4,
        }
    })
}

/// Reads one byte from `fd` within `limit`.
fn read_within(fd: i32, limit: Duration) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = limit.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd.
    if unsafe { libc::poll(&mut pfd, 1, ms) } != 1 {
        return false;
    }
    let mut b = 0u8;
    // SAFETY: a one-byte buffer.
    unsafe { libc::read(fd, (&mut b as *mut u8).cast(), 1) == 1 }
}

/// Waits until every pid in `pids` is in state `want` within `limit`;
/// the states last seen otherwise.
fn all_in_state(pids: &[i32], want: char, limit: Duration) -> Result<(), String> {
    let t0 = Instant::now();
    loop {
        let states: Vec<Option<char>> = pids.iter().map(|&p| proc_state(p)).collect();
        if states.iter().all(|&s| s == Some(want)) {
            return Ok(());
        }
        if t0.elapsed() > limit {
            return Err(format!(
                "states {states:?} after {limit:?}, expected {want}"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stop, continue and a handled signal while one child of `tk`'s file is
/// in a rebalance paced at 2 pages/s (its file must have hundreds of
/// misplaced pages) and another, paced alike, waits behind it for the
/// file's rebalance lock. Expected: SIGSTOP puts both in T within 2 s (not D: their waits
/// are interruptible); after SIGCONT, SIGUSR1 runs both handlers within
/// 2 s and both calls end with EINTR (the handlers have no SA_RESTART).
pub fn stop_during_paced_rebalance(tk: &Tierkit) -> Result<String, String> {
    stop_during_paced_rebalance_to(tk, 0)
}

/// [`stop_during_paced_rebalance`] with the calls' `nodemask` (0: the
/// file's policy; a node the pages are not on makes every page
/// misplaced).
pub fn stop_during_paced_rebalance_to(tk: &Tierkit, nodemask: u64) -> Result<String, String> {
    let pipe = || Pipe::new().map_err(|e| format!("pipe: {e}"));
    let (ready, usr) = (pipe()?, pipe()?);
    let limit = Duration::from_secs(2);
    let paced = || {
        tk.rebalance(TkRebalance {
            rate_pages: 2,
            nodemask,
            ..Default::default()
        })
    };
    let a = child(&ready, &usr, paced).map_err(|e| format!("fork A: {e}"))?;
    let mut pids = vec![a];
    let res = (|| {
        if !read_within(ready.rd, Duration::from_secs(10)) {
            return Err("child A did not start".to_string());
        }
        // A moves its first page at once, then sleeps out its pace.
        std::thread::sleep(Duration::from_millis(500));
        // Paced too: after SIGCONT both calls restart and either may take
        // the lock first; an unpaced B would finish the walk at once.
        let b = child(&ready, &usr, paced).map_err(|e| format!("fork B: {e}"))?;
        pids.push(b);
        if !read_within(ready.rd, Duration::from_secs(10)) {
            return Err("child B did not start".to_string());
        }
        std::thread::sleep(Duration::from_millis(300));
        let before: Vec<Option<char>> = pids.iter().map(|&p| proc_state(p)).collect();
        for &p in &pids {
            // SAFETY: our own children.
            unsafe { libc::kill(p, libc::SIGSTOP) };
        }
        all_in_state(&pids, 'T', limit).map_err(|e| format!("after SIGSTOP (A, B): {e}"))?;
        for &p in &pids {
            // SAFETY: as above.
            unsafe { libc::kill(p, libc::SIGCONT) };
        }
        std::thread::sleep(Duration::from_millis(200));
        // Both back in their calls: the stop restarted them.
        for (&p, n) in pids.iter().zip(["A", "B"]) {
            if let Some(e) = vma::try_wait(p).map_err(|e| e.to_string())? {
                return Err(format!("{n} left its call after SIGSTOP/SIGCONT: {e}"));
            }
        }
        for &p in &pids {
            // SAFETY: as above.
            unsafe { libc::kill(p, libc::SIGUSR1) };
        }
        for n in ["first", "second"] {
            if !read_within(usr.rd, limit) {
                return Err(format!(
                    "the {n} SIGUSR1 handler did not run within {limit:?}"
                ));
            }
        }
        let t0 = Instant::now();
        for (&p, n) in pids.iter().zip(["A (paced)", "B (waiting)"]) {
            let e = loop {
                if let Some(e) = vma::try_wait(p).map_err(|e| e.to_string())? {
                    break e;
                }
                if t0.elapsed() > Duration::from_secs(5) {
                    return Err(format!("{n} still in its call 5 s after SIGUSR1"));
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            if e != Exit::Code(0) {
                return Err(format!(
                    "{n}: {e}, expected its call to end with EINTR (exit 0)"
                ));
            }
        }
        Ok(format!(
            "states before SIGSTOP {before:?}; T within {limit:?}; handlers ran; both calls EINTR"
        ))
    })();
    for &p in &pids {
        if vma::try_wait(p).ok().flatten().is_none() {
            // SAFETY: our own child, not yet reaped.
            unsafe { libc::kill(p, libc::SIGKILL) };
            let _ = vma::wait_exit(p);
        }
    }
    res
}

/// The word written to page `i` of a mapping in round `round` of
/// [`thp_flips_during_faults`].
fn flip_word(round: u32, i: usize) -> u64 {
    (u64::from(round) << 32) | i as u64 | 0x5a00_0000_0000_0000
}

/// On the 4 KiB mapping `m` of a tierkit file (shared, read-write): one
/// thread zaps the whole mapping (`MADV_DONTNEED`) and faults every page
/// again by touching it, `rounds` times, while another thread flips
/// `prctl(PR_SET_THP_DISABLE)` and `MADV_HUGEPAGE`/`MADV_NOHUGEPAGE` on
/// the mapping as fast as it can. Every fault must map the file's page
/// again: after each zap every page still holds the word of the round
/// before. Leaves THP enabled for the process.
pub fn thp_flips_during_faults(m: &Mapping, rounds: u32) -> Result<String, String> {
    use std::sync::atomic::{AtomicBool, AtomicU64};
    let (p, len, pages) = (m.addr(), m.len(), m.nr_pages());
    let stop = AtomicBool::new(false);
    let flips = AtomicU64::new(0);
    let flip_err = AtomicI32::new(0);
    let res = std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: prctl with integer arguments only.
                let r = unsafe {
                    libc::prctl(libc::PR_SET_THP_DISABLE, (i & 1) as libc::c_ulong, 0, 0, 0)
                };
                if r != 0 {
                    flip_err.store(
                        std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
                        Ordering::Relaxed,
                    );
                }
                let advice = if i & 2 == 0 {
                    libc::MADV_HUGEPAGE
                } else {
                    libc::MADV_NOHUGEPAGE
                };
                // SAFETY: advice on our own mapping changes no data (the
                // answer, EINVAL for a mapping THP cannot back, is moot).
                unsafe { libc::madvise(p as *mut libc::c_void, len, advice) };
                i += 1;
                flips.store(i, Ordering::Relaxed);
                std::thread::yield_now();
            }
        });
        let res = (|| {
            for round in 0..rounds {
                // SAFETY: our own shared mapping; its pages stay with the
                // file and are mapped again at the next fault.
                if unsafe { libc::madvise(p as *mut libc::c_void, len, libc::MADV_DONTNEED) } != 0 {
                    return Err(format!(
                        "MADV_DONTNEED: errno {}",
                        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
                    ));
                }
                for i in 0..pages {
                    let w = (p + i * PAGE_SIZE) as *mut u64;
                    // SAFETY: in bounds of our live read-write mapping.
                    let old = unsafe { std::ptr::read_volatile(w) };
                    let want = if round == 0 {
                        0
                    } else {
                        flip_word(round - 1, i)
                    };
                    if old != want {
                        return Err(format!(
                            "round {round}: page {i} reads {old:#x} after the zap, expected {want:#x}"
                        ));
                    }
                    // SAFETY: as above.
                    unsafe { std::ptr::write_volatile(w, flip_word(round, i)) };
                }
            }
            Ok(())
        })();
        stop.store(true, Ordering::Relaxed);
        res
    });
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 0 as libc::c_ulong, 0, 0, 0) };
    res?;
    match flip_err.load(Ordering::Relaxed) {
        0 => Ok(format!(
            "{rounds} rounds of {pages} faults, {} THP flips meanwhile",
            flips.load(Ordering::Relaxed)
        )),
        e => Err(format!("prctl(PR_SET_THP_DISABLE): errno {e}")),
    }
}
