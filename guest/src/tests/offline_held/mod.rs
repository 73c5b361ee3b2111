//! The cases of `tk-test-offline-held` (see its doc): offlines of a
//! ZONE_MOVABLE block that holds tierkit pages no registered mapping
//! answers for. Every offline is bounded (a child writes `offline` and is
//! killed at its deadline), so a kernel that spins fails the check
//! instead of hanging the test.

pub mod in_flight;
pub mod scale;

use in_flight::{fixed_buffer_case, in_flight_case, Holder};

use crate::abi::ready::tierkit_ready;
use crate::abi::tk::{read_stats, Tierkit, TK_MODE_WEIGHTED_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::errno::errno_name;
use crate::linux::memblock::{self, Kmsg};
use crate::linux::memblock::{blocks_of, node_blocks, Outcome};
use crate::linux::sys::Mapping;
use crate::linux::vma;
use crate::tests::block_offline::{all_pfns, fill_page, open_on, secs, PROMPT, T};
use crate::tests::block_offline::{node_kind, Kind};
use crate::topology::weights::write_file;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tierkit_core::uapi::{TK_PAGE_ANON, TK_PAGE_BUDDY};

/// A file on a node with `n` of its pages mapped and filled with the
/// pattern: the case's holdings, whose pfns and memory blocks it offlines.
pub struct Filled {
    pub tk: Tierkit,
    pub m: Mapping,
    /// Each memory block of the pages, with how many it holds.
    pub blocks: Vec<(u64, usize)>,
}

/// Opens a file on `nid`, maps `n` pages and fills them ([`Filled`]);
/// `None` after a failed check.
pub fn filled(t: &mut T, what: &str, nid: u32, n: usize) -> Option<Filled> {
    let tk = open_on(&mut t.r, what, nid)?;
    let m = match tk.map(n, 0) {
        Ok(m) => m,
        Err(e) => {
            t.r.fail(
                &format!("{what}: mmap {n} pages on node {nid}"),
                errno_name(&e),
            );
            return None;
        }
    };
    for i in 0..n {
        fill_page(&m, i);
    }
    let pfns = all_pfns(&mut t.r, what, &m)?;
    let blocks = blocks_of(
        &pfns.iter().map(|&p| Some(p)).collect::<Vec<_>>(),
        t.block_bytes,
    );
    Some(Filled { tk, m, blocks })
}

/// An offline that is still running after this failed the check: a
/// refusal must come at once ([`PROMPT`]), and an offline that can
/// succeed takes well under this on an emulated CXL block.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// The test hook that widens the windows of a 4 KiB mmap and of
/// `TK_IOC_BULK` (Documentation/ABI/testing/debugfs-tierkit).
pub const DELAY_PATH: &str = "/sys/kernel/debug/tierkit/test/movable_register_delay_ms";

/// Pages of the window cases: 256 MiB, as the reproduction.
pub const WINDOW_PAGES: usize = 65_536;

/// `orphans` in tierkit's `limits` file.
pub fn orphans() -> Result<u64, String> {
    let l = vma::read_limits().map_err(|e| format!("{}: {e:#}", vma::LIMITS_PATH))?;
    vma::limit(&l, "orphans").ok_or_else(|| format!("no orphans in {}", vma::LIMITS_PATH))
}

/// Waits up to `limit` for `orphans` to read `want`; the last value read.
pub fn wait_orphans(want: u64, limit: Duration) -> Result<u64, String> {
    let t0 = Instant::now();
    loop {
        let n = orphans()?;
        if n == want || t0.elapsed() > limit {
            return Ok(n);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Offlines `block` and checks that it is refused with EBUSY at once.
fn refused_at_once(t: &mut T, what: &str, block: u64, pages: usize) {
    let Some(o) = t.offline_within(what, block, pages, DEADLINE) else {
        return;
    };
    let res = match o.outcome {
        Outcome::Failed(e) if e == libc::EBUSY && o.elapsed <= PROMPT => {
            Ok(format!("EBUSY after {}", secs(o.elapsed)))
        }
        _ => Err(format!(
            "{} after {} (expected EBUSY within {})",
            o.outcome.describe(),
            secs(o.elapsed),
            secs(PROMPT)
        )),
    };
    t.r.check_note(
        &format!("{what}: offline memory{block} is EBUSY at once"),
        res,
    );
}

/// vmsplice() 16 pages of a 4 KiB mapping into a pipe, leave it undrained,
/// munmap and close the file: the block's offline is EBUSY at once, the
/// pages are tierkit's orphans; once the pipe is closed they are freed and
/// the block goes offline.
pub fn pipe_case(t: &mut T, nid: u32) {
    const WHAT: &str = "pipe";
    const N: usize = 16;
    let Some(Filled { tk, m, blocks }) = filled(t, WHAT, nid, N) else {
        return;
    };
    let mut fds = [0i32; 2];
    // SAFETY: pipe(2) writes two fds.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        t.r.fail(
            &format!("{WHAT}: pipe"),
            std::io::Error::last_os_error().to_string(),
        );
        return;
    }
    let iov = libc::iovec {
        iov_base: m.as_ptr().cast(),
        iov_len: m.len(),
    };
    // SAFETY: one iovec over the live mapping; the pipe takes references
    // to its pages (no SPLICE_F_GIFT).
    let n = unsafe { libc::vmsplice(fds[1], &iov, 1, 0) };
    let spliced = t.r.check_note(
        &format!("{WHAT}: vmsplice {N} pages into a pipe"),
        if n == m.len() as isize {
            Ok(format!("{n} bytes"))
        } else {
            Err(format!("{n} (errno {})", std::io::Error::last_os_error()))
        },
    );
    let base = orphans();
    drop(m);
    drop(tk);
    if spliced {
        orphaned_and_refused(t, WHAT, base, N, &blocks);
    }
    // SAFETY: our own pipe's fds.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    t.r.check_note(
        &format!("{WHAT}: the pipe closed, the orphans are freed"),
        wait_orphans(0, Duration::from_secs(5)).and_then(|n| {
            if n == 0 {
                Ok("orphans 0".to_string())
            } else {
                Err(format!("orphans {n} after 5 s"))
            }
        }),
    );
    goes_offline(t, WHAT, &blocks);
}

/// After munmap and close while another holder keeps `n` pages: `orphans`
/// grew from `base` by at least `n`, and each of `blocks` is refused at
/// once.
fn orphaned_and_refused(
    t: &mut T,
    what: &str,
    base: Result<u64, String>,
    n: usize,
    blocks: &[(u64, usize)],
) {
    t.r.check_note(
        &format!("{what}: after munmap and close the pages are tierkit's orphans"),
        base.and_then(|b| {
            let now = orphans()?;
            if now >= b + n as u64 {
                Ok(format!("orphans {b} -> {now}"))
            } else {
                Err(format!("orphans {b} -> {now}, expected {n} more"))
            }
        }),
    );
    for &(block, pages) in blocks {
        refused_at_once(t, what, block, pages);
    }
}

/// Once nothing holds tierkit's pages: each of `blocks` goes offline
/// (within [`DEADLINE`]), then every block is onlined again.
fn goes_offline(t: &mut T, what: &str, blocks: &[(u64, usize)]) {
    for &(block, pages) in blocks {
        let res = match t.offline_within(what, block, pages, DEADLINE) {
            Some(o) if o.outcome == Outcome::Done => Ok(secs(o.elapsed)),
            Some(o) => Err(format!(
                "{} after {}",
                o.outcome.describe(),
                secs(o.elapsed)
            )),
            None => continue,
        };
        t.r.check_note(&format!("{what}: then memory{block} goes offline"), res);
    }
    t.online_all(what);
}

/// What a window case runs in its child.
#[derive(Clone, Copy, Debug)]
pub enum Window {
    /// A 4 KiB `mmap` of [`WINDOW_PAGES`]: pages inserted before the
    /// mapping is registered.
    Mmap,
    /// `TK_IOC_BULK` of [`WINDOW_PAGES`]: pages taken, then freed.
    Bulk,
}

/// The node's online blocks, those with more pages that look like a tierkit
/// page in flight (order 0, held, not anonymous, per `TK_IOC_PAGE_REFS` on
/// every 128th pfn) first.
fn likely_blocks(tk: &Tierkit, nid: u32, block_bytes: u64) -> Vec<u64> {
    let per_block = block_bytes / 4096;
    let mut scored: Vec<(usize, u64)> = node_blocks(nid)
        .into_iter()
        .filter(|&b| crate::linux::memblock::block_state(b).as_deref() == Some("online"))
        .map(|b| {
            let hits = (0..per_block)
                .step_by(128)
                .filter(|off| {
                    tk.page_refs(b * per_block + off).is_ok_and(|r| {
                        r.flags & (TK_PAGE_BUDDY | TK_PAGE_ANON) == 0
                            && r.refcount > 0
                            && r.order == 0
                    })
                })
                .count();
            (hits, b)
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().map(|(_, b)| b).collect()
}

/// Runs `w` in a child on node `nid` with the window widened to 10 s, and
/// once its pages are taken offlines the node's blocks (likeliest first)
/// until one refuses: it must be EBUSY at once, and no offline may spin.
pub fn window_case(t: &mut T, nid: u32, w: Window) {
    let what = match w {
        Window::Mmap => "mmap window",
        Window::Bulk => "bulk window",
    };
    let allocated = |s: &Option<Vec<crate::abi::tk::NodeStats>>| {
        s.as_ref().map_or(0, |s| {
            s.iter().find(|x| x.nid == nid).map_or(0, |x| x.allocated)
        })
    };
    let before = allocated(&read_stats());
    if let Err(e) = write_file(Path::new(DELAY_PATH), "10000") {
        t.r.fail(&format!("{what}: set {DELAY_PATH}"), errno_name(&e));
        return;
    }
    // SAFETY: fork(2) from the single-threaded test; the child only opens
    // the device, maps or bulk-allocates, and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = match child(nid, w) {
            Ok(()) => 0,
            Err(_) => 1,
        };
        // SAFETY: the child ends here.
        unsafe { libc::_exit(code) };
    }
    // Taking the pages costs what the kernel makes it cost (under KASAN,
    // on emulated CXL memory, on a loaded host: minutes), so wait as long
    // as the child is in its call: the window opens only once they are
    // all taken, and the test's own deadline bounds the wait.
    let t0 = Instant::now();
    let mut taken = false;
    let mut ended = None;
    while ended.is_none() {
        if allocated(&read_stats()) >= before + WINDOW_PAGES as u64 {
            taken = true;
            break;
        }
        let mut st = 0;
        // SAFETY: polls our own child.
        if unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) } == pid {
            ended = Some(st);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let found = t.r.check_note(
        &format!("{what}: the child's {WINDOW_PAGES} pages are taken"),
        if taken {
            Ok(secs(t0.elapsed()))
        } else {
            Err(format!(
                "the child ended after {} and its pages were never seen taken",
                secs(t0.elapsed())
            ))
        },
    );
    let mut refused = None;
    if found {
        let probe = Tierkit::open();
        let order = match &probe {
            Ok(tk) => likely_blocks(tk, nid, t.block_bytes),
            Err(_) => node_blocks(nid),
        };
        for b in order {
            let Some(o) = t.offline_within(what, b, 0, DEADLINE) else {
                break;
            };
            match o.outcome {
                Outcome::Done => continue,
                Outcome::Failed(e) if e == libc::EBUSY => {
                    refused = Some((b, o));
                    break;
                }
                _ => {
                    refused = Some((b, o));
                    break;
                }
            }
        }
    }
    let _ = write_file(Path::new(DELAY_PATH), "0");
    let status = ended.unwrap_or_else(|| {
        let mut st = 0;
        // SAFETY: waits for our own child, not yet reaped.
        unsafe { libc::waitpid(pid, &mut st, 0) };
        st
    });
    if found {
        t.r.check_note(
            &format!("{what}: an offline of a block holding the pages is EBUSY at once"),
            match refused {
                Some((b, o))
                    if o.outcome == Outcome::Failed(libc::EBUSY) && o.elapsed <= PROMPT =>
                {
                    Ok(format!("memory{b}: EBUSY after {}", secs(o.elapsed)))
                }
                Some((b, o)) => Err(format!(
                    "memory{b}: {} after {}",
                    o.outcome.describe(),
                    secs(o.elapsed)
                )),
                None => Err("every block of the node went offline".to_string()),
            },
        );
    }
    t.r.check(
        &format!("{what}: the child's call succeeded"),
        if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
            Ok(())
        } else {
            Err(format!("wait status {status:#x}"))
        },
    );
    t.online_all(what);
}

/// The child of [`window_case`].
fn child(nid: u32, w: Window) -> std::io::Result<()> {
    let tk = Tierkit::open()?;
    match w {
        Window::Mmap => {
            tk.set_policy(crate::abi::tk::TK_MODE_INTERLEAVE, 1u64 << nid)?;
            let m = tk.map(WINDOW_PAGES, 0)?;
            drop(m);
        }
        Window::Bulk => {
            tk.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, 1u64 << nid)?;
            tk.bulk(WINDOW_PAGES as u64)?;
        }
    }
    Ok(())
}

const BIN: &str = "tk-test-offline-held";

/// `tk-test-offline-held`'s `main`.
pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let Some(topo) = tierkit_ready(&mut r) else {
        return r.finish();
    };
    let cases = [
        "pipe",
        "mmap window",
        "bulk window",
        "O_DIRECT in flight",
        "process_vm_readv in flight",
        "io_uring read in flight",
        "io_uring fixed buffer",
    ];
    let movable = topo.cxl_node().filter(|&c| node_kind(c) == Kind::Movable);
    let Some(nid) = movable else {
        for c in cases {
            r.skip(
                c,
                "no memory-only node all in ZONE_MOVABLE (--topology cxl)",
            );
        }
        return r.finish();
    };
    let block_bytes = match memblock::block_size() {
        Ok(b) => b,
        Err(e) => {
            r.fail("memory block size", e.to_string());
            return r.finish();
        }
    };
    let start = read_stats().unwrap_or_default();
    let mut t = T::new(r, topo.clone(), block_bytes, Kmsg::open().ok());
    pipe_case(&mut t, nid);
    window_case(&mut t, nid, Window::Mmap);
    window_case(&mut t, nid, Window::Bulk);
    for h in [Holder::ODirect, Holder::ProcessVm, Holder::IoUring] {
        in_flight_case(&mut t, nid, h);
    }
    fixed_buffer_case(&mut t, nid);
    if !t.to_online.is_empty() {
        t.online_all("restore");
    }
    t.check_put_back(
        "everything put back: blocks online, nothing held",
        &start,
        Ok(()),
    );
    let offlines = std::mem::take(&mut t.offlines);
    t.r.set("offlines", serde_json::Value::Array(offlines));
    t.r.finish()
}
