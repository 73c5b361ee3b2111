//! tk-test-node-offline: the CXL node loses all its memory while tierkit
//! holds pages there, then gets it back (the semantics are in
//! Documentation/ABI/testing/dev-tierkit).
//!
//! On a node whose memory is all ZONE_MOVABLE (the cxl topology's CXL node,
//! `--cxl-online movable`):
//! 1. File A maps 64 pages with weighted interleave over DRAM and the CXL
//!    node and fills a per-page pattern; file B maps 16 pages with the CXL
//!    node alone; file C sets the CXL node alone as its policy and maps
//!    nothing.
//! 2. Every memory block of the node goes offline (each timed; more than
//!    60 s is killed and fails).
//! 3. The node has left N_MEMORY (`has_memory`), and its weight files are
//!    gone: the kernel's and tierkit's.
//! 4. Existing mappings: every byte intact, no page on the node
//!    (`move_pages`), tierkit's `held` is 0 on the node.
//! 5. File C keeps its mask: `TK_IOC_TASK_NEXT` still returns the node; an
//!    mmap and `TK_IOC_BULK` fail with `ENOMEM` and leave nothing held. A
//!    new policy naming only the node is `EINVAL`; one naming DRAM and the
//!    node returns DRAM alone.
//! 6. The blocks come back online (`online_movable`): `has_memory` and the
//!    weight files are back, and file C's old policy maps pages on the node
//!    again, zeroed.
//!
//! 7. Regression (tk-test-stress on cxl found an offline that never
//!    returned): with the `movable_gigantic` opt-in, a child runs
//!    `TK_IOC_CLEAR_BENCH` of 1 GiB on the node; while its range is held,
//!    every block of the node goes offline, each within 30 s: the blocks
//!    of the range with `EBUSY` within 5 s and a kernel message naming
//!    tierkit, the others done. Then the child is killed and the blocks
//!    come back.
//! 8. The same window before a new range is known: with a test delay of
//!    5 s between a movable allocation and its registration
//!    (`test/movable_register_delay_ms`), every offline of the node's
//!    blocks in that window is `EBUSY` at once, none hangs.
//! 9. A page a pipe holds a reference to (`vmsplice`) is not moved: its
//!    block's offline is `EBUSY` until the pipe is drained, then goes
//!    through with the data intact.
//!
//! 10. A rebalance onto the node while it goes away: a file placed with
//!     its own weights 3:1 (DRAM:node) is rebalanced to 1:3 at 100
//!     pages/s; once pages arrive on the node, every block goes offline.
//!     Each block goes offline within 60 s (a page the rebalance put
//!     there is moved away again, none is allocated in a block being
//!     offlined), the call's counts add up (moved + no_memory + busy =
//!     misplaced), no page is left on the node and the data is intact;
//!     with the blocks back, a second call finishes the job.
//!
//! Skipped, with the reason, where no such node exists (numa, or the CXL
//! node onlined as kernel memory). Everything is put back on every path.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;
use tierkit_core::uapi::{
    TkRebalance, TK_POLICY_F_WEIGHTS, TK_REBALANCE_F_DRY_RUN, TK_REBALANCE_F_WEIGHTS,
};
use userspace_tests::memblock::{
    block_state, block_zone, node_blocks, set_block_state, Kmsg, Outcome,
};
use userspace_tests::node::{mask_of, parse_list, NODE_SYSFS};
use userspace_tests::report::Report;
use userspace_tests::sys::{Mapping, PAGE_SIZE};
use userspace_tests::tk::{
    clear_bench_arg, read_stats, stats_of, MovableGigantic, Tierkit, TK_MODE_INTERLEAVE,
    TK_MODE_WEIGHTED_INTERLEAVE,
};
use userspace_tests::weights::{KERNEL_WI_DIR, TIERKIT_WI_DIRS};
use userspace_tests::{errno_name, expect_errno, tierkit_ready};

const BIN: &str = "tk-test-node-offline";
const PAGES_A: usize = 64;
const PAGES_B: usize = 16;
/// An offline or online that takes longer is killed and counts as hung.
const LIMIT: Duration = Duration::from_secs(60);

/// Word `j` of page `i` of file `f`'s pattern: distinct and never zero.
fn pattern(f: u64, i: usize, j: usize) -> u64 {
    (f << 56) | ((i as u64) << 24) | (j as u64) | 0x8000_0000_0000_0000
}

fn words(m: &Mapping, i: usize) -> &[u64] {
    // SAFETY: page `i` lies inside the live shared mapping `m`, which is
    // page-aligned; nothing writes it while the slice lives.
    unsafe {
        std::slice::from_raw_parts(m.as_ptr().add(i * PAGE_SIZE).cast::<u64>(), PAGE_SIZE / 8)
    }
}

fn fill(m: &Mapping, f: u64) {
    let base = m.as_ptr().cast::<u64>();
    for i in 0..m.nr_pages() {
        for j in 0..PAGE_SIZE / 8 {
            // SAFETY: word `j` of page `i` lies inside the live, writable
            // shared mapping `m`.
            unsafe { base.add(i * PAGE_SIZE / 8 + j).write(pattern(f, i, j)) };
        }
    }
}

fn verify(m: &Mapping, f: u64) -> Result<(), String> {
    for i in 0..m.nr_pages() {
        if let Some((j, w)) = words(m, i)
            .iter()
            .enumerate()
            .find(|(j, w)| **w != pattern(f, i, *j))
        {
            return Err(format!(
                "page {i} word {j}: {w:#x}, expected {:#x}",
                pattern(f, i, j)
            ));
        }
    }
    Ok(())
}

fn has_memory() -> BTreeSet<u32> {
    std::fs::read_to_string(format!("{NODE_SYSFS}/has_memory"))
        .ok()
        .and_then(|s| parse_list(&s).ok())
        .unwrap_or_default()
        .into_iter()
        .collect()
}

/// The weight files of node `nid`: the kernel's and tierkit's.
fn weight_files(nid: u32) -> Vec<String> {
    let tierkit = TIERKIT_WI_DIRS
        .iter()
        .find(|d| Path::new(d).is_dir())
        .copied()
        .unwrap_or(TIERKIT_WI_DIRS[0]);
    [KERNEL_WI_DIR, tierkit]
        .iter()
        .map(|d| format!("{d}/node{nid}"))
        .collect()
}

fn held_on(nid: u32) -> u64 {
    read_stats().map_or(u64::MAX, |s| stats_of(&s, nid).1)
}

/// The node's blocks that are online, all in ZONE_MOVABLE; else why not.
fn movable_blocks(nid: u32) -> Result<Vec<u64>, String> {
    let blocks = node_blocks(nid);
    if blocks.is_empty() {
        return Err(format!("node {nid} has no memory blocks"));
    }
    for &b in &blocks {
        let z = block_zone(b).unwrap_or_default();
        if z != "Movable" || block_state(b).as_deref() != Some("online") {
            return Err(format!(
                "memory{b} of node {nid} is {:?} in zone {z:?}: the node's memory is not all online ZONE_MOVABLE (--topology cxl --cxl-online movable has such a node)",
                block_state(b)
            ));
        }
    }
    Ok(blocks)
}

/// Writes `value` to every block's state, timed; the blocks that took it.
fn set_all(r: &mut Report, what: &str, blocks: &[u64], value: &str) -> Vec<u64> {
    let mut done = Vec::new();
    let mut slowest = (0u64, Duration::ZERO);
    let mut failed = Vec::new();
    for &b in blocks {
        match set_block_state(b, value, LIMIT) {
            Ok(t) => {
                if t.elapsed > slowest.1 {
                    slowest = (b, t.elapsed);
                }
                match t.outcome {
                    Outcome::Done => done.push(b),
                    o => failed.push(format!(
                        "memory{b}: {} after {:.3} s",
                        o.describe(),
                        t.elapsed.as_secs_f64()
                    )),
                }
            }
            Err(e) => failed.push(format!("memory{b}: {e}")),
        }
    }
    r.check_note(
        what,
        if failed.is_empty() {
            Ok(format!(
                "{} blocks, slowest memory{} {:.3} s",
                done.len(),
                slowest.0,
                slowest.1.as_secs_f64()
            ))
        } else {
            Err(failed.join("; "))
        },
    );
    done
}

fn run(r: &mut Report, dram: u32, c: u32, blocks: &[u64]) -> Vec<u64> {
    let mut offline: Vec<u64> = Vec::new();
    let held0 = held_on(c);
    let open = |r: &mut Report, name: &str, mask: u64| -> Option<Tierkit> {
        let t = Tierkit::open()
            .map_err(|e| r.fail(&format!("{name}: open"), e.to_string()))
            .ok()?;
        t.set_policy(tierkit_core::uapi::TK_MODE_WEIGHTED_INTERLEAVE, mask)
            .map_err(|e| r.fail(&format!("{name}: SET_POLICY"), errno_name(&e)))
            .ok()?;
        Some(t)
    };
    let both = mask_of(&[dram, c]);
    let only_c = mask_of(&[c]);
    let (Some(a), Some(b), Some(fc)) = (
        open(r, "file A", both),
        open(r, "file B", only_c),
        open(r, "file C", only_c),
    ) else {
        return offline;
    };
    let (ma, mb) = match (a.map(PAGES_A, 0), b.map(PAGES_B, 0)) {
        (Ok(x), Ok(y)) => (x, y),
        (x, y) => {
            r.fail(
                "map files A and B",
                format!(
                    "A: {:?}, B: {:?}",
                    x.err().map(|e| errno_name(&e)),
                    y.err().map(|e| errno_name(&e))
                ),
            );
            return offline;
        }
    };
    fill(&ma, 1);
    fill(&mb, 2);
    let on_c = |m: &Mapping| {
        m.page_nodes()
            .map(|n| n.iter().filter(|&&x| x == c as i32).count())
    };
    r.check_note(
        "before: file B's pages all on the CXL node, file A's partly",
        match (on_c(&ma), on_c(&mb)) {
            (Ok(x), Ok(y)) if y == PAGES_B && x > 0 && x < PAGES_A => {
                Ok(format!("A {x}/{PAGES_A}, B {y}/{PAGES_B} on node {c}"))
            }
            (x, y) => Err(format!("on node {c}: A {x:?}, B {y:?}")),
        },
    );

    offline = set_all(
        r,
        &format!(
            "offline all {} blocks of node {c} while tierkit holds pages there",
            blocks.len()
        ),
        blocks,
        "offline",
    );
    if offline.len() != blocks.len() {
        return offline;
    }
    r.check(
        &format!("node {c} left N_MEMORY"),
        if has_memory().contains(&c) {
            Err(format!("has_memory still lists {c}"))
        } else {
            Ok(())
        },
    );
    let present: Vec<String> = weight_files(c)
        .into_iter()
        .filter(|f| Path::new(f).exists())
        .collect();
    r.check(
        &format!("node {c}'s weight files are gone (kernel's and tierkit's)"),
        if present.is_empty() {
            Ok(())
        } else {
            Err(format!("still there: {}", present.join(", ")))
        },
    );
    for (name, m, f) in [("file A", &ma, 1), ("file B", &mb, 2)] {
        r.check(&format!("{name}: every byte intact"), verify(m, f));
        r.check(
            &format!("{name}: no page left on node {c}"),
            match on_c(m) {
                Ok(0) => Ok(()),
                x => Err(format!("{x:?} pages on node {c}")),
            },
        );
    }
    r.check(
        &format!("stats: nothing held on node {c}"),
        match held_on(c) {
            0 => Ok(()),
            h => Err(format!("held {h} (before the test {held0})")),
        },
    );
    r.check(
        "file C keeps its mask: TASK_NEXT still returns the node",
        match fc.task_next(4) {
            Ok(v) if v.iter().all(|&n| u32::from(n) == c) => Ok(()),
            Ok(v) => Err(format!("got {v:?}")),
            Err(e) => Err(errno_name(&e)),
        },
    );
    let held_before = held_on(c);
    r.check(
        "file C: mmap picking the node is ENOMEM",
        expect_errno(fc.map(8, 0), libc::ENOMEM),
    );
    r.check(
        "file C: BULK picking the node is ENOMEM",
        expect_errno(fc.bulk(8), libc::ENOMEM),
    );
    r.check(
        "the failed calls left nothing held",
        if held_on(c) == held_before {
            Ok(())
        } else {
            Err(format!("held {} then {}", held_before, held_on(c)))
        },
    );
    match Tierkit::open() {
        Ok(d) => {
            r.check(
                "new SET_POLICY naming only the node: EINVAL",
                expect_errno(
                    d.set_policy(tierkit_core::uapi::TK_MODE_WEIGHTED_INTERLEAVE, only_c),
                    libc::EINVAL,
                ),
            );
            r.check(
                "new SET_POLICY naming DRAM and the node: DRAM alone",
                match d.set_policy(tierkit_core::uapi::TK_MODE_WEIGHTED_INTERLEAVE, both) {
                    Ok(p) if p.nodemask == mask_of(&[dram]) => Ok(()),
                    Ok(p) => Err(format!("mask {:#x}", p.nodemask)),
                    Err(e) => Err(errno_name(&e)),
                },
            );
        }
        Err(e) => {
            r.fail("open a fourth file", e.to_string());
        }
    }

    let back = set_all(
        r,
        &format!("online all blocks of node {c} again"),
        &offline,
        "online_movable",
    );
    offline.retain(|b| !back.contains(b));
    if !offline.is_empty() {
        return offline;
    }
    r.check(
        &format!("node {c} is back in N_MEMORY with its weight files"),
        {
            let missing: Vec<String> = weight_files(c)
                .into_iter()
                .filter(|f| !Path::new(f).exists())
                .collect();
            if !has_memory().contains(&c) {
                Err("has_memory does not list it".into())
            } else if !missing.is_empty() {
                Err(format!("missing: {}", missing.join(", ")))
            } else {
                Ok(())
            }
        },
    );
    r.check(
        "file C's old policy maps on the node again, zeroed",
        match fc.map(8, 0) {
            Ok(m) => match (m.first_nonzero(), on_c(&m)) {
                (None, Ok(8)) => Ok(()),
                (nz, n) => Err(format!("first non-zero byte {nz:?}, on node {c}: {n:?}")),
            },
            Err(e) => Err(errno_name(&e)),
        },
    );
    r.check("file A: every byte intact after the online", verify(&ma, 1));
    offline
}

/// Node `nid`'s `MemFree`, kB.
fn mem_free_kb(nid: u32) -> Option<u64> {
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
fn range_taken(c: u32, free0_kb: u64) -> bool {
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
fn offline_each(
    r: &mut Report,
    what: &str,
    blocks: &[u64],
    limit: Duration,
) -> (Vec<u64>, Vec<(u64, userspace_tests::memblock::Timed)>) {
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
fn neither_done_nor_busy(outcomes: &[(u64, userspace_tests::memblock::Timed)]) -> Vec<String> {
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
fn offline_during_clear(r: &mut Report, c: u32, blocks: &[u64]) -> Vec<u64> {
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
fn offline_before_registration(r: &mut Report, c: u32, blocks: &[u64]) -> Vec<u64> {
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
    let mut child = match userspace_tests::vma::spawn_synced(|ready| {
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

/// A page that someone else holds a plain reference to (a pipe after
/// `vmsplice(2)`, which takes its pages with FOLL_GET) is not moved: the
/// offline of its block is EBUSY while the pipe holds it, and goes
/// through once the pipe is drained, with the mapping's data intact.
/// Moving it would leave the other holder on the old page (a write through
/// such a reference would be lost). Returns the blocks it left offline.
fn offline_with_reference(r: &mut Report, c: u32) -> Vec<u64> {
    const WHAT: &str = "offline of a block under a page a pipe holds (vmsplice)";
    let res = (|| -> Result<(String, Vec<u64>), String> {
        let tk = Tierkit::open().map_err(|e| e.to_string())?;
        tk.set_policy(TK_MODE_INTERLEAVE, 1 << c)
            .map_err(|e| e.to_string())?;
        let m = tk.map(1, 0).map_err(|e| e.to_string())?;
        fill(&m, 0x77);
        let pfn = userspace_tests::vma::pagemap_pfn(m.addr())
            .map_err(|e| e.to_string())?
            .ok_or("not present")?;
        let bs = userspace_tests::memblock::block_size().map_err(|e| e.to_string())?;
        let block = userspace_tests::memblock::block_of_pfn(pfn, bs);
        let p = userspace_tests::vma::Pipe::new().map_err(|e| e.to_string())?;
        let iov = libc::iovec {
            iov_base: m.as_ptr() as *mut libc::c_void,
            iov_len: 4096,
        };
        // SAFETY: the pipe takes a reference to our page.
        if unsafe { libc::vmsplice(p.wr, &iov, 1, 0) } != 4096 {
            return Err(format!("vmsplice: {}", std::io::Error::last_os_error()));
        }
        let held = set_block_state(block, "offline", Duration::from_secs(30))
            .map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; 4096];
        // SAFETY: reads into a local buffer.
        unsafe { userspace_tests::vma::read_exact_fd(p.rd, buf.as_mut_ptr(), 4096) }
            .map_err(|e| e.to_string())?;
        drop(p);
        let drained = set_block_state(block, "offline", Duration::from_secs(30))
            .map_err(|e| e.to_string())?;
        let left: Vec<u64> = [block]
            .into_iter()
            .filter(|&b| block_state(b).as_deref() != Some("online"))
            .collect();
        if !held.outcome.describe().contains("EBUSY") {
            return Err(format!(
                "memory{block} with the pipe holding the page: {}",
                held.outcome.describe()
            ));
        }
        if !matches!(drained.outcome, Outcome::Done) {
            return Err(format!(
                "memory{block} after the pipe was drained: {}",
                drained.outcome.describe()
            ));
        }
        verify(&m, 0x77)?;
        let now = userspace_tests::vma::pagemap_pfn(m.addr())
            .ok()
            .flatten()
            .map_or("none".to_string(), |p| format!("{p:#x}"));
        Ok((
            format!("memory{block}: EBUSY in {:.3} s while held, then offline in {:.3} s; pfn {pfn:#x} -> {now}, data intact", held.elapsed.as_secs_f64(), drained.elapsed.as_secs_f64()),
            left,
        ))
    })();
    match res {
        Ok((note, left)) => {
            r.ok_note(WHAT, note);
            left
        }
        Err(e) => {
            r.fail(WHAT, e);
            Vec::new()
        }
    }
}

/// Pages of the file in [`offline_during_rebalance`] (4 MiB).
const PAGES_R: usize = 1024;
/// Its rebalance's pace: slow enough that the offline begins mid-move.
const RATE_R: u32 = 100;

/// A file of [`PAGES_R`] pages under weighted interleave over `dram` and
/// `c` with its own weights `(wd, wc)`, filled with its pattern.
fn weighted_file(dram: u32, c: u32, wd: u8, wc: u8) -> Result<(Tierkit, Mapping), String> {
    let tk = Tierkit::open().map_err(|e| format!("open: {e}"))?;
    let mut p = userspace_tests::tk::policy(TK_MODE_WEIGHTED_INTERLEAVE, mask_of(&[dram, c]));
    p.flags = TK_POLICY_F_WEIGHTS;
    p.weights[dram as usize] = wd;
    p.weights[c as usize] = wc;
    tk.set_policy_raw(p)
        .map_err(|e| format!("TK_IOC_SET_POLICY: {}", errno_name(&e)))?;
    let m = tk
        .map(PAGES_R, 0)
        .map_err(|e| format!("mmap: {}", errno_name(&e)))?;
    fill(&m, 0x52);
    Ok((tk, m))
}

/// How many pages of `m` are on `nid` (`move_pages`).
fn pages_on(m: &Mapping, nid: u32) -> Result<usize, String> {
    let nodes = m.page_nodes().map_err(|e| format!("move_pages: {e}"))?;
    Ok(nodes.iter().filter(|&&n| n == nid as i32).count())
}

/// Part 10 of the module docs: every block of `c` goes offline while a
/// paced `TK_IOC_REBALANCE` moves pages onto it (own weights 3:1 to 1:3).
/// Each block goes offline in time (a page the rebalance put there is
/// moved away again; none is allocated in a block being offlined); the
/// call's counts add up (moved + no_memory + busy = misplaced); no page
/// is on the node and every byte is intact. With the blocks back, a
/// second rebalance leaves no page misplaced. Returns the blocks left
/// offline.
fn offline_during_rebalance(r: &mut Report, dram: u32, c: u32, blocks: &[u64]) -> Vec<u64> {
    const WHAT: &str = "offline of the node while a rebalance moves pages onto it";
    let (tk, m) = match weighted_file(dram, c, 3, 1) {
        Ok(f) => f,
        Err(e) => {
            r.fail(WHAT, e);
            return Vec::new();
        }
    };
    let on_c0 = pages_on(&m, c).unwrap_or(0);
    let mut arg = TkRebalance {
        flags: TK_REBALANCE_F_WEIGHTS,
        rate_pages: RATE_R,
        ..Default::default()
    };
    arg.weights[dram as usize] = 1;
    arg.weights[c as usize] = 3;
    let (res, offline, outcomes) = std::thread::scope(|s| {
        let mover = s.spawn(|| tk.rebalance(arg));
        // The offline starts once the rebalance has put pages on the node.
        let t0 = std::time::Instant::now();
        while pages_on(&m, c).unwrap_or(0) < on_c0 + 16 && t0.elapsed() < LIMIT {
            std::thread::sleep(Duration::from_millis(20));
        }
        let (offline, outcomes) = offline_each(r, WHAT, blocks, LIMIT);
        (mover.join(), offline, outcomes)
    });
    let res = match res {
        Ok(Ok(a)) => Ok(a),
        Ok(Err(e)) => Err(format!("TK_IOC_REBALANCE: {}", errno_name(&e))),
        Err(_) => Err("the rebalance thread panicked".to_string()),
    };
    let hung = neither_done_nor_busy(&outcomes);
    let check = res.and_then(|a| {
        if !hung.is_empty() {
            return Err(format!("offline: {}", hung.join("; ")));
        }
        if offline.len() != blocks.len() {
            return Err(format!(
                "{} of {} blocks went offline; a page the rebalance put there must not keep one",
                offline.len(),
                blocks.len()
            ));
        }
        if a.moved + a.no_memory + a.busy != a.misplaced || a.looked != PAGES_R as u64 {
            return Err(format!(
                "looked {} misplaced {} = moved {} + no_memory {} + busy {}? ({PAGES_R} pages)",
                a.looked, a.misplaced, a.moved, a.no_memory, a.busy
            ));
        }
        let on_c = pages_on(&m, c)?;
        if on_c != 0 || held_on(c) != 0 {
            return Err(format!(
                "after the offline: {on_c} pages on node {c}, held {}",
                held_on(c)
            ));
        }
        verify(&m, 0x52)?;
        Ok(a)
    });
    let mut left = offline.clone();
    let note = check.and_then(|a| {
        // Back online: the rest of the job is done by a second call.
        let back = set_all(r, "offline during a rebalance: the blocks back online", &offline, "online_movable");
        left.retain(|b| !back.contains(b));
        let again = tk
            .rebalance(TkRebalance::default())
            .map_err(|e| format!("the second TK_IOC_REBALANCE: {}", errno_name(&e)))?;
        let check = tk
            .rebalance(TkRebalance {
                flags: TK_REBALANCE_F_DRY_RUN,
                ..Default::default()
            })
            .map_err(|e| format!("the dry run: {}", errno_name(&e)))?;
        if again.no_memory + again.busy != 0 || check.misplaced != 0 {
            return Err(format!(
                "after the blocks came back: moved {}, no_memory {}, busy {}; {} still misplaced",
                again.moved, again.no_memory, again.busy, check.misplaced
            ));
        }
        verify(&m, 0x52)?;
        Ok(format!(
            "during: looked {}, misplaced {}, moved {}, no_memory {}, busy {}; {} blocks offline; after onlining moved {} more, none misplaced, data intact",
            a.looked, a.misplaced, a.moved, a.no_memory, a.busy, offline.len(), again.moved
        ))
    });
    r.check_note(WHAT, note);
    left
}

/// Puts back online every block of `blocks` that is in `left` or not
/// online, whatever failed, as the check `what`.
fn put_back(r: &mut Report, blocks: &[u64], left: &[u64], what: &str) {
    let still: Vec<u64> = blocks
        .iter()
        .copied()
        .filter(|&b| left.contains(&b) || block_state(b).as_deref() != Some("online"))
        .collect();
    if !still.is_empty() {
        set_all(r, what, &still, "online_movable");
    }
}

fn main() -> ExitCode {
    userspace_tests::help!();
    let mut r = Report::new(BIN, "test");
    let Some(topo) = tierkit_ready(&mut r) else {
        return r.finish();
    };
    let (Some(dram), Some(c)) = (topo.dram_node(), topo.cxl_node()) else {
        r.skip("node lifecycle", "no DRAM node and memory-only node");
        return r.finish();
    };
    let blocks = match movable_blocks(c) {
        Ok(b) => b,
        Err(why) => {
            r.skip("node lifecycle: offline every block of the CXL node", why);
            return r.finish();
        }
    };
    let start = read_stats().unwrap_or_default();
    let mut left = run(&mut r, dram, c, &blocks);
    if left.is_empty() {
        left = offline_during_clear(&mut r, c, &blocks);
    }
    put_back(
        &mut r,
        &blocks,
        &left,
        "restore: online the blocks left offline",
    );
    let mut left = offline_before_registration(&mut r, c, &blocks);
    left.extend(offline_with_reference(&mut r, c));
    put_back(
        &mut r,
        &blocks,
        &left,
        "restore: online the blocks left offline (registration window)",
    );
    let left = offline_during_rebalance(&mut r, dram, c, &blocks);
    put_back(
        &mut r,
        &blocks,
        &left,
        "restore: online the blocks left offline (rebalance)",
    );
    let end = read_stats().unwrap_or_default();
    r.check(
        "everything put back: held pages as at the start",
        if stats_of(&end, c).1 == stats_of(&start, c).1
            && stats_of(&end, dram).1 == stats_of(&start, dram).1
        {
            Ok(())
        } else {
            Err(format!(
                "held on node {c}: {} -> {}, on node {dram}: {} -> {}",
                stats_of(&start, c).1,
                stats_of(&end, c).1,
                stats_of(&start, dram).1,
                stats_of(&end, dram).1
            ))
        },
    );
    r.finish()
}
