//! The checks of `tk-test-pool` (the DRAM node) and `tk-test-pool-cxl`
//! (the first memory-only node: the emulated CXL node of `--topology cxl`,
//! or numa's memory-only node): tierkit's pre-cleared gigantic pool
//! ([`crate::abi::pool`]) keeps its promises.
//!
//! On the node, in this order:
//!
//! 1. the pool file lists every node with memory, all `NID 0 0`;
//! 2. `NID 1` fills one range within [`pool::fill_timeout`] (`NID 1 1`);
//!    the node's free memory (MemFree plus the per-CPU lists,
//!    [`vma::node_free_kb`]) dropped by 1 GiB (± [`DROP_TOLERANCE_KB`]),
//!    and the stats file's `pool` column is 1;
//! 3. bad writes are refused and change nothing: an unknown node, `x`, a
//!    lone NID, only blank lines, three fields, a negative count (`EINVAL`), more ranges than
//!    the node's memory and a huge count (`ENOSPC`), and two-line writes
//!    whose second line is bad (the first is not applied either);
//! 4. a gigantic mapping bound to the node: its first touch (in a child,
//!    [`vma::make_gigantic`]) takes the ready range: `TK_GIGANTIC_F_QUERY`
//!    reports 0 workers, 0 ns, the node and CPU node -1, `limits`
//!    `gigantic_pool_taken` grows by 1; every byte reads zero and
//!    `TK_IOC_WALK` finds one aligned GiB on the node under one PUD;
//! 5. the pool refills to `NID 1 1` behind it;
//! 6. (DRAM node) `echo 2 > /proc/sys/vm/drop_caches` runs the shrinker:
//!    the range is given back (`NID 1 0`, `gigantic_pool_shrunk` grows,
//!    the memory is free again), the refill waits for the 10 s pause and
//!    then fills the range again;
//! 7. `NID 0` empties the pool at once and the memory is free again
//!    (within 1% or 64 MiB of the start);
//! 8. (DRAM node) with a ready range, `rmmod` gives the memory back; the
//!    module is loaded again (KUnit's suites off for that load, the weight
//!    table put back as /init set it, as `tk-test-lifecycle` does) and its
//!    pool starts empty.
//!
//! Every step fails with what it saw (a fill that does not come names what
//! holds each naturally aligned GiB of the node,
//! [`crate::linux::pageflags`], as the note before it does); steps that
//! need a ready range are not run once filling failed. The node needs two free naturally aligned
//! GiBs (the refill happens while the mapping holds the first); on a small
//! guest reserve them at boot (`--append 'hugepagesz=1G hugepages=0:2'`
//! for node 0; a memory-only node of N GiB holds at most N-1): the node's boot-time 1 GiB hugetlb pages are
//! handed back to the buddy allocator for the test and reserved again
//! after.

use crate::abi::first_use::BootPool;
use crate::abi::pool::{self, Target, POOL_PATH};
use crate::abi::tk::{self, MovableGigantic, Tierkit};
use crate::harness::report::Report;
use crate::linux::vma;
use crate::tests::faults::{self, KunitFilter, TierkitWeights};
use crate::topology::node::Topology;
use crate::{linux::errno::errno_name, linux::errno::expect_errno};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tierkit_core::uapi::TK_GIGANTIC_BYTES;

/// 1 GiB in kB.
const GIB_KB: u64 = TK_GIGANTIC_BYTES >> 10;
/// How far a node's free memory may be from exactly 1 GiB lower once a
/// range is ready (the kernel's own allocations meanwhile, migration out
/// of the range): 96 MiB.
pub const DROP_TOLERANCE_KB: u64 = 96 << 10;
/// Memory given back: within 1% of the start or this much (64 MiB),
/// whichever is more.
pub const BACK_TOLERANCE_KB: u64 = 64 << 10;
/// How long freed memory may take to show up as free.
const SETTLE: Duration = Duration::from_secs(5);
/// The refill pause after a shrink (the kernel's contract: 10 s).
const SHRINK_PAUSE: Duration = Duration::from_secs(10);
/// A KUnit filter no suite matches (the reload runs no suite).
const NO_SUITES: &str = "tk-test-pool-runs-no-kunit-suite";

/// Which node a binary tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// The first node with memory and CPUs; every step.
    Dram,
    /// The first memory-only node; the steps without the shrinker and the
    /// reload (those are the DRAM run's).
    MemoryOnly,
}

/// The tolerance of "given back" for a node that had `start_kb` free.
pub fn back_tolerance_kb(start_kb: u64) -> u64 {
    (start_kb / 100).max(BACK_TOLERANCE_KB)
}

/// Whether `now_kb` free is 1 GiB below `start_kb` within
/// [`DROP_TOLERANCE_KB`]; `Err` describes the drop.
pub fn check_drop(start_kb: u64, now_kb: u64) -> Result<String, String> {
    let drop = start_kb as i64 - now_kb as i64;
    let msg = format!(
        "free {start_kb} -> {now_kb} kB: {:.0} MiB less",
        drop as f64 / 1024.0
    );
    if (drop - GIB_KB as i64).unsigned_abs() <= DROP_TOLERANCE_KB {
        Ok(msg)
    } else {
        Err(format!(
            "{msg}, expected 1024 MiB ± {} MiB",
            DROP_TOLERANCE_KB >> 10
        ))
    }
}

/// Waits up to [`SETTLE`] for `nid`'s free memory to be back within
/// [`back_tolerance_kb`] of `start_kb`. Halfway, the slab caches are
/// drained once ([`faults::drain_slab`]): on the debug kernel KASAN's
/// quarantine holds freed objects' slabs (up to 1/32 of RAM) for a while;
/// what is still allocated stays counted.
pub fn memory_back(nid: u32, start_kb: u64) -> Result<String, String> {
    pool::quiet()?;
    let tol = back_tolerance_kb(start_kb);
    let t0 = Instant::now();
    let mut drained = false;
    loop {
        let now = vma::node_free_kb(nid).ok_or("no node meminfo")?;
        let msg = format!(
            "free {start_kb} -> {now} kB ({:+.0} MiB, tolerance {} MiB)",
            (now as f64 - start_kb as f64) / 1024.0,
            tol >> 10
        );
        if now + tol >= start_kb {
            return Ok(msg);
        }
        if t0.elapsed() >= SETTLE {
            return Err(msg);
        }
        if !drained && t0.elapsed() >= SETTLE / 2 {
            drained = true;
            faults::drain_slab();
        }
        vma::sleep_ms(50);
    }
}

/// A `limits` counter.
fn limit(key: &str) -> Result<u64, String> {
    let l = vma::read_limits().map_err(|e| format!("{}: {e:#}", vma::LIMITS_PATH))?;
    vma::limit(&l, key).ok_or_else(|| format!("no {key} in {}", vma::LIMITS_PATH))
}

/// The stats file's `pool` column for `nid`.
fn stats_pool(nid: u32) -> Result<u64, String> {
    let s = tk::read_stats().ok_or_else(|| format!("cannot read {}", tk::STATS_PATH))?;
    tk::pool_of(&s, nid).ok_or_else(|| format!("no pool column for node {nid} in the stats"))
}

/// Step 1: every node with memory listed, nothing targeted or ready.
fn starts_empty(topo: &Topology) -> Result<String, String> {
    let lines = pool::snapshot()?;
    let nids: Vec<u32> = lines.iter().map(|l| l.nid).collect();
    if nids != topo.memory {
        return Err(format!(
            "lines for nodes {nids:?}, expected the nodes with memory {:?}",
            topo.memory
        ));
    }
    match lines.iter().find(|l| l.target != 0 || l.ready != 0) {
        Some(l) => Err(format!("`{} {} {}`", l.nid, l.target, l.ready)),
        None => Ok(format!("{} nodes, all `NID 0 0`", lines.len())),
    }
}

/// Step 3: each bad write fails with its errno and leaves the file as it
/// was.
fn bad_writes(r: &mut Report, topo: &Topology, nid: u32) {
    let gib = vma::node_memtotal_kb(nid).unwrap_or(0) / GIB_KB;
    let mut cases: Vec<(String, String, i32)> = vec![
        ("an unknown node".into(), "9999 1\n".into(), libc::EINVAL),
        ("no number".into(), "x\n".into(), libc::EINVAL),
        ("only blank lines".into(), "\n\n".into(), libc::EINVAL),
        ("a NID alone".into(), format!("{nid}\n"), libc::EINVAL),
        ("three fields".into(), format!("{nid} 1 2\n"), libc::EINVAL),
        (
            "a negative count".into(),
            format!("{nid} -1\n"),
            libc::EINVAL,
        ),
        (
            format!("more ranges than the node's {gib} GiB"),
            format!("{nid} {}\n", gib + 1),
            libc::ENOSPC,
        ),
        (
            "a huge count".into(),
            format!("{nid} 1000000\n"),
            libc::ENOSPC,
        ),
        (
            "a good line, then an unknown node".into(),
            format!("{nid} 1\n9999 1\n"),
            libc::EINVAL,
        ),
        (
            "a good line emptying the pool, then a count too large".into(),
            format!("{nid} 0\n{nid} 1000000\n"),
            libc::ENOSPC,
        ),
    ];
    if let Some(&m) = topo.online.iter().find(|n| !topo.memory.contains(n)) {
        cases.push(("a memoryless node".into(), format!("{m} 1\n"), libc::EINVAL));
    }
    for (what, text, errno) in cases {
        let name = format!(
            "write {:?} ({what}): {}, nothing changes",
            text.trim_end(),
            if errno == libc::EINVAL {
                "EINVAL"
            } else {
                "ENOSPC"
            }
        );
        r.check(&name, pool::refused_unchanged(text.as_bytes(), errno));
    }
}

/// Step 4: a first touch served from the pool. Returns whether it passed.
fn fault_from_pool(r: &mut Report, nid: u32) -> bool {
    let name = |what: &str| format!("node {nid}: {what}");
    let taken0 = match limit("gigantic_pool_taken") {
        Ok(v) => v,
        Err(e) => return r.fail(&name("limits has gigantic_pool_taken"), e),
    };
    let tk = match Tierkit::gigantic_on(nid) {
        Ok(t) => t,
        Err(e) => return r.fail(&name("open a gigantic file"), errno_name(&e)),
    };
    let m = match tk.map(TK_GIGANTIC_BYTES as usize / crate::linux::sys::PAGE_SIZE, 0) {
        Ok(m) => m,
        Err(e) => return r.fail(&name("mmap 1 GiB"), errno_name(&e)),
    };
    // SAFETY: `m` is a live mapping of ours.
    let took = match unsafe { vma::make_gigantic(m.as_ptr(), m.len()) } {
        Ok(d) => d,
        Err(e) => return r.fail(&name("the first touch makes the GiB"), e),
    };
    let mut ok = r.check_note(
        &name("the first touch takes the ready range: query shows 0 workers, 0 ns, CPU node -1"),
        match tk.gigantic_query() {
            Ok(q)
                if q.last_workers == 0
                    && q.last_elapsed_ns == 0
                    && q.last_nid == nid as i32
                    && q.last_cpu_node == -1 =>
            {
                Ok(format!(
                    "first touch in a child {:.3} s",
                    took.as_secs_f64()
                ))
            }
            Ok(q) => Err(format!(
                "last_workers {} last_elapsed_ns {} last_nid {} last_cpu_node {}: cleared at fault time",
                q.last_workers, q.last_elapsed_ns, q.last_nid, q.last_cpu_node
            )),
            Err(e) => Err(errno_name(&e)),
        },
    );
    ok &= r.check_note(
        &name("limits gigantic_pool_taken grew by 1"),
        match limit("gigantic_pool_taken") {
            Ok(v) if v == taken0 + 1 => Ok(format!("{taken0} -> {v}")),
            Ok(v) => Err(format!("{taken0} -> {v}")),
            Err(e) => Err(e),
        },
    );
    ok &= r.check(
        &name("every byte of the GiB from the pool reads zero"),
        match m.first_nonzero() {
            None => Ok(()),
            Some(off) => Err(format!("byte {off:#x} is not zero")),
        },
    );
    ok &= r.check_note(
        &name("one PUD maps one contiguous aligned GiB on the node"),
        tk.check_pud(&m, nid).map(|p| p.1),
    );
    ok
}

/// Step 6: the shrinker gives the ready range back, and the refill waits
/// out its pause. The pool is at `NID 1 1` before.
fn shrink(r: &mut Report, nid: u32, start_kb: u64) {
    let name = |what: &str| format!("node {nid}: {what}");
    let shrunk0 = match limit("gigantic_pool_shrunk") {
        Ok(v) => v,
        Err(e) => {
            r.fail(&name("limits has gigantic_pool_shrunk"), e);
            return;
        }
    };
    // Before the write: the pause starts during it (the shrinker runs
    // inside drop_caches, which itself takes a while, over a second on the
    // debug kernel), so no refill may come earlier than 10 s from here.
    let t0 = Instant::now();
    if let Err(e) = std::fs::write("/proc/sys/vm/drop_caches", "2\n") {
        r.fail(&name("echo 2 > /proc/sys/vm/drop_caches"), e.to_string());
        return;
    }
    let dropped = t0.elapsed();
    r.check(
        &name("echo 2 > drop_caches gives the ready range back (`NID 1 0`)"),
        match pool::state(nid) {
            Ok((1, 0)) => Ok(()),
            Ok((t, rd)) => Err(format!("reads `{nid} {t} {rd}`")),
            Err(e) => Err(format!("{e:#}")),
        },
    );
    r.check_note(
        &name("limits gigantic_pool_shrunk grew"),
        match limit("gigantic_pool_shrunk") {
            Ok(v) if v > shrunk0 => Ok(format!("{shrunk0} -> {v}")),
            Ok(v) => Err(format!("{shrunk0} -> {v}")),
            Err(e) => Err(e),
        },
    );
    r.check_note(
        &name("the shrunk range is free memory again"),
        memory_back(nid, start_kb),
    );
    let res = pool::wait_for(nid, 1, 1, SHRINK_PAUSE + pool::fill_timeout(nid)).and_then(|_| {
        let d = t0.elapsed();
        if d + Duration::from_millis(500) < SHRINK_PAUSE {
            Err(format!(
                "refilled {:.1} s after the drop_caches write began, within the {} s pause",
                d.as_secs_f64(),
                SHRINK_PAUSE.as_secs()
            ))
        } else {
            Ok(format!(
                "ready again {:.1} s after the drop_caches write began ({:.1} s to write)",
                d.as_secs_f64(),
                dropped.as_secs_f64()
            ))
        }
    });
    r.check_note(
        &name("the refill pauses 10 s after a shrink, then fills the range again"),
        res,
    );
}

/// Step 8: `rmmod` with a ready range gives the memory back; load again.
fn reload(r: &mut Report, topo: &Topology, nid: u32, start_kb: u64) {
    let name = |what: &str| format!("node {nid}: {what}");
    let Some(wd) = crate::abi::ready::tierkit_weight_dir(r) else {
        return;
    };
    let table = match TierkitWeights::save(&wd) {
        Ok(t) => t,
        Err(e) => {
            r.fail("save the weight table", e);
            return;
        }
    };
    let mut kf = match KunitFilter::set(NO_SUITES) {
        Ok(k) => k,
        Err(e) => {
            r.fail(
                "KUnit suites off for the reload",
                format!("writing {}: {e}", faults::KUNIT_FILTER_GLOB),
            );
            return;
        }
    };
    let filled = match Target::filled(nid, 1) {
        Ok((t, _)) => t,
        Err(e) => {
            r.fail(&name("a ready range before rmmod"), e);
            return;
        }
    };
    // The module is gone with its pool; nothing to put back.
    std::mem::forget(filled);
    if let Err(e) = faults::unload_tierkit() {
        r.fail(
            &name("rmmod with a ready range"),
            format!(
                "{} (refcnt {:?})",
                errno_name(&e),
                faults::module_line(faults::TIERKIT_MODULE).map(|m| m.refcnt)
            ),
        );
        let _ = pool::set_target(nid, 0);
        return;
    }
    r.check_note(
        &name("rmmod with a ready range gives the memory back"),
        memory_back(nid, start_kb),
    );
    if !r.check(
        "tierkit loaded again",
        faults::load_tierkit().map_err(|e| errno_name(&e)),
    ) {
        return;
    }
    r.check("weight table as /init set it", table.restore());
    r.check_note(
        "KUnit filter_glob restored",
        kf.restore()
            .map(|v| v.unwrap_or_default())
            .map_err(|e| e.to_string()),
    );
    r.check_note("after the reload the pool starts empty", starts_empty(topo));
}

/// Runs the checks of `which` as binary `bin`.
pub fn main(bin: &str, which: Which) -> ExitCode {
    let mut r = Report::new(bin, "test");
    let Some(topo) = crate::abi::ready::tierkit_ready(&mut r) else {
        return r.finish();
    };
    let nid = match which {
        Which::Dram => topo.dram_node(),
        Which::MemoryOnly => topo.cxl_node(),
    };
    let Some(nid) = nid else {
        r.skip(
            "the pre-cleared pool on a memory-only node",
            "no memory-only node in this topology",
        );
        return r.finish();
    };
    r.note(format!(
        "node {nid}{}; a range takes up to {} s to fill",
        if crate::topology::cxl::cxl_nodes().contains(&nid) {
            " (emulated CXL memory)"
        } else {
            ""
        },
        pool::fill_timeout(nid).as_secs()
    ));
    if !pool::present() {
        r.fail(
            "the pool file exists",
            format!("no {POOL_PATH}: a tierkit.ko without the pre-cleared pool"),
        );
        return r.finish();
    }
    // On a small guest the boot allocations may leave no free aligned GiB:
    // 1 GiB hugetlb pages reserved at boot (`hugepagesz=1G
    // hugepages=0:2`) are handed back for the test, as the bench does.
    let boot = BootPool::release(nid);
    if let Some(n) = boot.restore {
        r.note(format!(
            "node {nid}: {n} boot-time 1 GiB hugetlb page(s) handed back for the test"
        ));
    }
    // A CXL node onlined `online_movable` has only ZONE_MOVABLE memory:
    // gigantic ranges come from there only with the opt-in.
    let _movable = match MovableGigantic::enable() {
        Ok(m) => Some(m),
        Err(e) => {
            r.fail("enable movable_gigantic", e.to_string());
            None
        }
    };
    run(&mut r, &topo, nid, which == Which::Dram);
    r.finish()
}

fn run(r: &mut Report, topo: &Topology, nid: u32, all_steps: bool) {
    let name = |what: &str| format!("node {nid}: {what}");
    r.check_note(
        "the pool file lists every node with memory, all empty",
        starts_empty(topo),
    );
    let start_kb = match pool::quiet_free_kb(nid) {
        Ok(kb) => kb,
        Err(e) => {
            r.fail(&name("free memory"), e);
            return;
        }
    };
    // A node holds at most its memory less 1 GiB in ready ranges: one
    // under 2 GiB holds none (its write is ENOSPC, checked below).
    let total_kb = vma::node_memtotal_kb(nid).unwrap_or(0);
    if total_kb < 2 * GIB_KB {
        r.check(
            &name("`NID 1` on a node under 2 GiB is ENOSPC"),
            expect_errno(pool::set_target(nid, 1), libc::ENOSPC),
        );
        r.skip(
            &name("the pool's steps"),
            format!(
                "the node has {} MiB: less 1 GiB, no room for a ready range (use 3 GiB or more)",
                total_kb >> 10
            ),
        );
        return;
    }
    r.note(format!(
        "node {nid} before the fill: {}",
        crate::linux::pageflags::describe_node_gibs(nid)
    ));
    let target = match Target::filled(nid, 1) {
        Ok((t, d)) => {
            r.ok_note(
                &name("`NID 1` fills one range"),
                format!("`{nid} 1 1` after {:.1} s", d.as_secs_f64()),
            );
            t
        }
        Err(e) => {
            // What holds each aligned GiB of the node: what an earlier
            // test left there.
            let held = crate::linux::pageflags::describe_node_gibs(nid);
            r.fail(&name("`NID 1` fills one range"), format!("{e}; {held}"));
            let _ = pool::set_target(nid, 0);
            return;
        }
    };
    r.check_note(
        &name("the ready range is taken from the node's free memory (1 GiB)"),
        vma::node_free_kb(nid)
            .ok_or_else(|| "no node meminfo".to_string())
            .and_then(|now| check_drop(start_kb, now)),
    );
    r.check(
        &name("the stats pool column is 1"),
        match stats_pool(nid) {
            Ok(1) => Ok(()),
            Ok(n) => Err(format!("{n}")),
            Err(e) => Err(e),
        },
    );
    bad_writes(r, topo, nid);
    if fault_from_pool(r, nid) {
        r.check_note(
            &name("the pool refills to 1 behind the fault"),
            pool::wait_for(nid, 1, 1, pool::fill_timeout(nid))
                .map(|d| format!("after {:.1} s", d.as_secs_f64())),
        );
    }
    if all_steps {
        match pool::state(nid) {
            Ok((1, 1)) => shrink(r, nid, start_kb),
            other => {
                r.skip(
                    &name("the shrinker gives the ready range back"),
                    format!("no ready range to shrink: {other:?}"),
                );
            }
        }
    }
    let res = pool::set_target(nid, 0)
        .map_err(|e| format!("write `{nid} 0`: {}", errno_name(&e)))
        .and_then(|_| match pool::state(nid) {
            Ok((0, 0)) => Ok(()),
            Ok((t, rd)) => Err(format!("reads `{nid} {t} {rd}` right after the write")),
            Err(e) => Err(format!("{e:#}")),
        })
        .and_then(|_| memory_back(nid, start_kb));
    r.check_note(
        &name("`NID 0` empties the pool at once, memory given back"),
        res,
    );
    drop(target);
    if all_steps {
        reload(r, topo, nid, start_kb);
    }
    r.check_note(
        &name("at the end the node's free memory is back"),
        memory_back(nid, start_kb),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_and_tolerances() {
        let start = 8 << 20; // 8 GiB in kB
        assert!(check_drop(start, start - GIB_KB).is_ok());
        assert!(check_drop(start, start - GIB_KB + (64 << 10)).is_ok());
        assert!(check_drop(start, start - GIB_KB - (64 << 10)).is_ok());
        assert!(check_drop(start, start).is_err());
        assert!(check_drop(start, start - 2 * GIB_KB).is_err());
        assert!(check_drop(start, start + GIB_KB).is_err());
        assert_eq!(back_tolerance_kb(start), 83886);
        assert_eq!(back_tolerance_kb(1 << 20), BACK_TOLERANCE_KB);
    }
}
