//! Move speed against the kernel's own migration: the time per page of
//! tierkit's `TK_IOC_REBALANCE` moving every page of a `/dev/tierkit`
//! mapping from one node to another, and of `move_pages(2)` moving the
//! same number of pages of an anonymous mapping between the same nodes,
//! measured side by side in one run (`tk-bench-rebalance`'s move row,
//! `tk-test-rebalance-speed`'s bound).
//!
//! Each repetition maps, fills and moves a fresh mapping of each kind (the
//! order alternates), times the move call alone, and checks its real
//! outcome: every page on the target node (`move_pages` query) and every
//! page's pattern words kept. A warm-up repetition of each is measured
//! first and dropped; the figures are the medians of the repetitions.
//!
//! With `running`, another thread of the process spins on memory of its
//! own on another CPU meanwhile, as a workload whose pages are moved
//! does: the mm is then live on two CPUs, so each TLB flush of a move is
//! an IPI the mover waits for (how many the move takes is what batching
//! decides; a lone thread's flushes are local).

use crate::abi::tk::{Tierkit, TK_MODE_INTERLEAVE};
use crate::linux::sys::{self, monotonic_ns, Mapping, PAGE_SIZE};
use std::sync::atomic::{AtomicBool, Ordering};
use tierkit_core::uapi::TkRebalance;

/// The two methods' times for moving `pages` pages, one entry per
/// repetition (ns of the move call).
#[derive(Clone, Debug)]
pub struct Speed {
    pub pages: usize,
    pub tierkit_ns: Vec<u64>,
    pub kernel_ns: Vec<u64>,
}

fn median(v: &[u64]) -> u64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    s.get(s.len() / 2).copied().unwrap_or(0)
}

impl Speed {
    /// tierkit's median ns per page moved.
    pub fn tierkit_per_page(&self) -> f64 {
        median(&self.tierkit_ns) as f64 / self.pages.max(1) as f64
    }

    /// `move_pages(2)`'s median ns per page moved.
    pub fn kernel_per_page(&self) -> f64 {
        median(&self.kernel_ns) as f64 / self.pages.max(1) as f64
    }

    /// tierkit's time per page over the kernel's.
    pub fn ratio(&self) -> f64 {
        self.tierkit_per_page() / self.kernel_per_page().max(f64::MIN_POSITIVE)
    }

    /// One line for a report.
    pub fn summary(&self, from: u32, to: u32) -> String {
        let mbps = |ns: f64| PAGE_SIZE as f64 / ns * 1e3;
        format!(
            "{} pages node {from} -> {to}: tierkit {:.1} us/page ({:.0} MB/s), move_pages(2) \
             {:.1} us/page ({:.0} MB/s), ratio {:.2} (medians of {} and {}; tierkit ms {:?}, \
             move_pages ms {:?})",
            self.pages,
            self.tierkit_per_page() / 1e3,
            mbps(self.tierkit_per_page()),
            self.kernel_per_page() / 1e3,
            mbps(self.kernel_per_page()),
            self.ratio(),
            self.tierkit_ns.len(),
            self.kernel_ns.len(),
            self.tierkit_ns
                .iter()
                .map(|n| n / 1_000_000)
                .collect::<Vec<_>>(),
            self.kernel_ns
                .iter()
                .map(|n| n / 1_000_000)
                .collect::<Vec<_>>(),
        )
    }
}

/// The pattern words of page `i` in repetition `seed`: at its start and
/// at its end.
fn word(seed: u64, i: usize, end: bool) -> u64 {
    (seed << 40) ^ ((i as u64) << 1) ^ end as u64 ^ 0x5a5a_0000_0000_0000
}

/// Writes repetition `seed`'s pattern words into every page of `m`.
pub fn fill(m: &Mapping, seed: u64) {
    for i in 0..m.nr_pages() {
        let p = m.as_ptr().wrapping_add(i * PAGE_SIZE) as *mut u64;
        // SAFETY: both words lie in page `i` of a live read/write mapping.
        unsafe {
            p.write_volatile(word(seed, i, false));
            p.add(PAGE_SIZE / 8 - 1).write_volatile(word(seed, i, true));
        }
    }
}

/// Pages whose pattern words differ from repetition `seed`'s.
pub fn wrong(m: &Mapping, seed: u64) -> usize {
    (0..m.nr_pages())
        .filter(|&i| {
            let p = m.as_ptr().wrapping_add(i * PAGE_SIZE) as *const u64;
            // SAFETY: as in `fill`.
            let (a, b) = unsafe { (p.read_volatile(), p.add(PAGE_SIZE / 8 - 1).read_volatile()) };
            a != word(seed, i, false) || b != word(seed, i, true)
        })
        .count()
}

/// `Ok` if every page of `m` is on `nid`, else how many are not.
fn all_on(m: &Mapping, nid: u32, what: &str) -> Result<(), String> {
    let nodes = m
        .page_nodes()
        .map_err(|e| format!("{what}: move_pages query: {e}"))?;
    let off = nodes.iter().filter(|&&n| n != nid as i32).count();
    if off == 0 {
        Ok(())
    } else {
        Err(format!(
            "{what}: {off} of {} pages not on node {nid} (first: {:?})",
            nodes.len(),
            nodes.iter().find(|&&n| n != nid as i32)
        ))
    }
}

/// After a move: contents, then (the pages mapped again by the reads)
/// every page on `to`.
fn check_moved(m: &Mapping, seed: u64, to: u32, what: &str) -> Result<(), String> {
    match wrong(m, seed) {
        0 => all_on(m, to, what),
        n => Err(format!("{what}: {n} pages lost their contents in the move")),
    }
}

/// tierkit: a mapping of `pages` pages placed on `from`, filled, then
/// `TK_IOC_REBALANCE` with the nodemask `{to}`. The call's ns.
fn tierkit_once(from: u32, to: u32, pages: usize, seed: u64) -> Result<u64, String> {
    let what = "tierkit";
    let tk = Tierkit::open().map_err(|e| format!("open /dev/tierkit: {e}"))?;
    tk.set_policy(TK_MODE_INTERLEAVE, 1 << from)
        .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
    let m = tk.map(pages, 0).map_err(|e| format!("mmap: {e}"))?;
    fill(&m, seed);
    all_on(&m, from, what)?;
    let t0 = monotonic_ns();
    let a = tk
        .rebalance(TkRebalance {
            nodemask: 1 << to,
            ..TkRebalance::default()
        })
        .map_err(|e| format!("TK_IOC_REBALANCE: {e}"))?;
    let ns = monotonic_ns() - t0;
    if a.moved != pages as u64 {
        return Err(format!(
            "{what}: moved {} of {pages} pages ({a:?})",
            a.moved
        ));
    }
    check_moved(&m, seed, to, what)?;
    Ok(ns)
}

/// The kernel: an anonymous mapping of `pages` order-0 pages bound to
/// `from`, filled, then `move_pages(2)` of every page to `to`. The
/// call's ns.
fn kernel_once(from: u32, to: u32, pages: usize, seed: u64) -> Result<u64, String> {
    let what = "move_pages(2)";
    let m = Mapping::anon(pages * PAGE_SIZE).map_err(|e| format!("mmap: {e}"))?;
    m.no_huge().map_err(|e| format!("no THP: {e}"))?;
    m.mbind(sys::MPOL_BIND, 1 << from, 0)
        .map_err(|e| format!("mbind: {e}"))?;
    fill(&m, seed);
    all_on(&m, from, what)?;
    let addrs: Vec<*const libc::c_void> = (0..pages)
        .map(|i| m.as_ptr().wrapping_add(i * PAGE_SIZE) as *const libc::c_void)
        .collect();
    let nodes = vec![to as libc::c_int; pages];
    let mut status = vec![i32::MIN; pages];
    let t0 = monotonic_ns();
    // SAFETY: `addrs`, `nodes` and `status` hold `pages` elements each;
    // the kernel reads the first two and writes `status`.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0 as libc::pid_t,
            pages as libc::c_ulong,
            addrs.as_ptr(),
            nodes.as_ptr(),
            status.as_mut_ptr(),
            sys::MPOL_MF_MOVE as libc::c_int,
        )
    };
    let ns = monotonic_ns() - t0;
    if ret != 0 {
        return Err(format!(
            "{what}: returned {ret} ({})",
            std::io::Error::last_os_error()
        ));
    }
    let off = status.iter().filter(|&&s| s != to as i32).count();
    if off != 0 {
        return Err(format!("{what}: {off} statuses not node {to}"));
    }
    check_moved(&m, seed, to, what)?;
    Ok(ns)
}

/// Measures both methods moving `pages` pages from `from` to `to`: one
/// warm-up of each (dropped), then `reps` repetitions of each,
/// alternating which goes first; with `running`, beside a spinning thread
/// (see the module docs).
pub fn measure(
    from: u32,
    to: u32,
    pages: usize,
    reps: usize,
    running: bool,
) -> Result<Speed, String> {
    if !running {
        return measure_alone(from, to, pages, reps);
    }
    beside_spinner(|| measure_alone(from, to, pages, reps))
}

/// Runs `f` while another thread of the process spins on memory of its
/// own (on another CPU when there is one), so that the mm is live on two
/// CPUs and each TLB flush of a move or an unmap is an IPI that `f`'s
/// kernel work waits for.
pub fn beside_spinner<R>(f: impl FnOnce() -> R) -> R {
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            let mut buf = [0u64; 512];
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for w in buf.iter_mut() {
                    // SAFETY: a valid, aligned element of a local array.
                    unsafe { core::ptr::write_volatile(w, n) };
                }
                n = n.wrapping_add(1);
            }
        });
        let res = f();
        stop.store(true, Ordering::Relaxed);
        res
    })
}

fn measure_alone(from: u32, to: u32, pages: usize, reps: usize) -> Result<Speed, String> {
    let mut s = Speed {
        pages,
        tierkit_ns: Vec::new(),
        kernel_ns: Vec::new(),
    };
    tierkit_once(from, to, pages, 0)?;
    kernel_once(from, to, pages, 0)?;
    for rep in 1..=reps as u64 {
        if rep % 2 == 0 {
            s.kernel_ns.push(kernel_once(from, to, pages, rep)?);
            s.tierkit_ns.push(tierkit_once(from, to, pages, rep)?);
        } else {
            s.tierkit_ns.push(tierkit_once(from, to, pages, rep)?);
            s.kernel_ns.push(kernel_once(from, to, pages, rep)?);
        }
    }
    Ok(s)
}
