//! `tk-test-gigantic`'s race of a GiB's copy on write against 4 KiB
//! faults of the same GiB (Documentation/ABI/testing/dev-tierkit,
//! "TK_IOC_SNAPSHOT"; module/src/mapping/gib.rs).
//!
//! In a process with THP disabled (its GiB mapped by 4 KiB PTEs), four
//! threads zap 2 MiB of a GiB with `MADV_DONTNEED` and read a page of it,
//! again and again, while a fifth writes the GiB just after a snapshot
//! (`TK_IOC_SNAPSHOT`) shared it with a forked child: the write copies
//! the GiB, and the child exits in the middle of the copy, so the old GiB
//! is freed as the copy replaces it. A fault that looked the old GiB up
//! before the replacement must not map its page after the free: that
//! mapped a freed page (SIGBUS from `vm_insert_page()`'s refcount check,
//! or `VM_BUG_ON_FOLIO` under the debug kernel) before faults mapped under
//! the backing's lock.

use crate::abi::tk::Tierkit;
use crate::harness::report::Report;
use crate::topology::node::Topology;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

const GIB: usize = 1 << 30;
const STEP: usize = 2 << 20;
/// Trials, the child told to exit at a different point of the copy in
/// each (the first measures how long a whole copy takes, the child
/// exiting after it).
const TRIALS: u32 = 6;

/// What a trial's process reports by its exit status.
const SIGBUS_EXIT: i32 = 99;
/// Its exit status when the snapshot found no spare GiB (`ENOMEM`).
const NO_SPARE_EXIT: i32 = 3;
const NO_SPARE: &str = "TK_IOC_SNAPSHOT: ENOMEM";
const NAME: &str =
    "a GiB copied on write while 4 KiB faults of it race and the child exits mid-copy";

extern "C" fn on_sigbus(_: libc::c_int) {
    // SAFETY: async-signal-safe.
    unsafe { libc::_exit(SIGBUS_EXIT) };
}

/// A pipe's two ends.
fn pipe() -> Result<[i32; 2], String> {
    let mut pp = [0i32; 2];
    // SAFETY: a pipe into a local array.
    if unsafe { libc::pipe(pp.as_mut_ptr()) } != 0 {
        return Err("pipe".into());
    }
    Ok(pp)
}

/// One trial, in a process of its own (THP disabled for it alone): the
/// time the writer's copy took, or why it failed.
fn trial(nid: u32, release: Option<Duration>) -> Result<Duration, String> {
    let tk = Tierkit::gigantic_on(nid).map_err(|e| format!("gigantic file: {e}"))?;
    let m = tk
        .map(GIB / 4096, 0)
        .map_err(|e| format!("mmap of 1 GiB: {e}"))?;
    let a = m.addr();
    for o in (0..GIB).step_by(STEP) {
        // SAFETY: `o` is inside the mapping.
        unsafe { *(a as *mut u8).add(o) = b'P' };
    }
    let snap = Tierkit::open().map_err(|e| format!("open: {e}"))?;
    snap.snapshot(a, GIB).map_err(|e| {
        if e.raw_os_error() == Some(libc::ENOMEM) {
            NO_SPARE.to_string()
        } else {
            format!("TK_IOC_SNAPSHOT: {e}")
        }
    })?;
    let pp = pipe()?;
    // SAFETY: the trial's process has no other thread yet.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: the child maps the snapshot over the range, reads it,
        // and waits for the word to exit; only async-signal-safe calls.
        unsafe {
            let p = libc::mmap(
                a as *mut libc::c_void,
                GIB,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                snap.fd(),
                0,
            );
            if p == libc::MAP_FAILED || std::ptr::read_volatile(a as *const u8) != b'P' {
                libc::_exit(2);
            }
            let mut c = 0u8;
            libc::read(pp[0], (&mut c as *mut u8).cast(), 1);
            libc::_exit(0);
        }
    }
    drop(snap);
    // SAFETY: closing our copy of the read end.
    unsafe { libc::close(pp[0]) };
    let stop = AtomicBool::new(false);
    let took = std::thread::scope(|s| {
        for t in 0..4usize {
            let stop = &stop;
            s.spawn(move || {
                let mut i = t * 100;
                while !stop.load(Relaxed) {
                    let o = (i * 7919 % 512) * STEP;
                    // SAFETY: a zap and a read inside the mapping.
                    unsafe {
                        libc::madvise((a + o) as *mut libc::c_void, STEP, libc::MADV_DONTNEED);
                        std::ptr::read_volatile((a + o + i % 512 * 4096) as *const u8);
                    }
                    i += 1;
                }
            });
        }
        std::thread::sleep(Duration::from_millis(20));
        let t0 = Instant::now();
        let writer = s.spawn(move || {
            for o in (0..GIB).step_by(STEP) {
                // SAFETY: a write inside the mapping (the first copies it).
                unsafe { std::ptr::write_volatile((a as *mut u8).add(o + 1), b'w') };
            }
        });
        // The child exits `release` into the copy; without one (the first
        // trial) after it, so that the time is a whole copy's.
        let took = match release {
            Some(d) => {
                std::thread::sleep(d);
                // SAFETY: tells the child to exit (one byte down the pipe).
                unsafe { libc::write(pp[1], b"x".as_ptr().cast(), 1) };
                let _ = writer.join();
                t0.elapsed()
            }
            None => {
                let _ = writer.join();
                let took = t0.elapsed();
                // SAFETY: as above.
                unsafe { libc::write(pp[1], b"x".as_ptr().cast(), 1) };
                took
            }
        };
        std::thread::sleep(Duration::from_millis(50));
        stop.store(true, Relaxed);
        took
    });
    let mut st = 0;
    // SAFETY: our child; the write end closed after.
    unsafe {
        libc::waitpid(pid, &mut st, 0);
        libc::close(pp[1]);
    }
    if !(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0) {
        return Err(format!("the child ended with status {st:#x}"));
    }
    for o in (0..GIB).step_by(STEP) {
        // SAFETY: reads inside the mapping.
        let (p, w) = unsafe { (*(a as *const u8).add(o), *(a as *const u8).add(o + 1)) };
        if (p, w) != (b'P', b'w') {
            return Err(format!("at {o:#x}: {:?}, wanted \"Pw\"", [p, w]));
        }
    }
    Ok(took)
}

/// Runs [`trial`] in a forked process with THP disabled: its exit status
/// says how it went (0, 1 with the reason on its stderr, or
/// [`SIGBUS_EXIT`]); the copy's time comes back through a pipe.
fn in_process(nid: u32, release: Option<Duration>) -> Result<Duration, String> {
    let pp = pipe()?;
    // SAFETY: tk-test-gigantic has no other thread here.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: this process alone: THP off, a SIGBUS handler.
        unsafe {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
            libc::signal(
                libc::SIGBUS,
                on_sigbus as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
        let code = match trial(nid, release) {
            Ok(d) => {
                let ns = d.as_nanos() as u64;
                // SAFETY: writes a local to our pipe.
                unsafe { libc::write(pp[1], (&ns as *const u64).cast(), 8) };
                0
            }
            Err(e) if e == NO_SPARE => NO_SPARE_EXIT,
            Err(e) => {
                eprintln!("{e}");
                1
            }
        };
        // SAFETY: the trial's process ends here.
        unsafe { libc::_exit(code) };
    }
    // SAFETY: closing our write end, then reading the child's word.
    let mut ns = 0u64;
    unsafe {
        libc::close(pp[1]);
        libc::read(pp[0], (&mut ns as *mut u64).cast(), 8);
        libc::close(pp[0]);
    }
    let mut st = 0;
    // SAFETY: waits for our own child.
    unsafe { libc::waitpid(pid, &mut st, 0) };
    match (libc::WIFEXITED(st), libc::WEXITSTATUS(st)) {
        (true, 0) => Ok(Duration::from_nanos(ns)),
        (true, SIGBUS_EXIT) => Err("SIGBUS in a thread faulting the GiB".into()),
        (true, NO_SPARE_EXIT) => Err(NO_SPARE.into()),
        _ => Err(format!(
            "the trial ended with status {st:#x} (its stderr above)"
        )),
    }
}

/// [`TRIALS`] trials on the node without CXL memory that has the most
/// free memory (a snapshot takes a spare GiB there); each must end with
/// every byte as written, no SIGBUS, the child's own view intact, and the
/// spares given back.
pub fn refault_race(r: &mut Report, topo: &Topology) {
    let Some(nid) = crate::topology::cxl::roomiest_non_cxl_node(topo) else {
        r.skip(NAME, "no memory node without CXL memory");
        return;
    };
    let _boot = crate::abi::first_use::BootPool::release(nid);
    let name = format!("node {nid}: {NAME}");
    let spares = || {
        crate::linux::vma::read_limits()
            .ok()
            .and_then(|l| crate::linux::vma::limit(&l, "gigantic_cow_spares"))
    };
    let before = spares();
    let mut copy = None;
    let mut notes = Vec::new();
    for t in 0..TRIALS {
        // The child exits at 30 to 90 % of the first trial's copy time.
        let release = copy.map(|c: Duration| c.mul_f64(0.3 + 0.6 * f64::from(t % 5) / 4.0));
        match in_process(nid, release) {
            Ok(d) => {
                copy.get_or_insert(d);
                notes.push(format!("{:.2}s", d.as_secs_f64()));
            }
            Err(e) if e == NO_SPARE => {
                r.skip(&name, format!("trial {t}: {e}: no spare GiB on the node"));
                return;
            }
            Err(e) => {
                r.fail(&name, format!("trial {t}: {e}"));
                return;
            }
        }
    }
    let after = spares();
    r.check_note(
        &name,
        match (before, after) {
            (Some(b), Some(a)) if a == b => Ok(format!(
                "{TRIALS} trials, copies took {}, spares {b} -> {a}",
                notes.join(" ")
            )),
            _ => Err(format!("gigantic_cow_spares {before:?} -> {after:?}")),
        },
    );
}
