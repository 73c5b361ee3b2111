//! Out of memory: a failed call leaves nothing behind (it once left GiBs
//! pinned): gigantic, then 4 KiB and `TK_IOC_BULK`.

use super::*;

/// A gigantic mmap of `gib` GiB on `nid`, more than it can supply, leaves
/// nothing behind.
pub fn gigantic_map_past_memory(r: &mut Report, nid: u32, gib: usize) {
    let pre = format!("out of memory: gigantic mmap of {gib} GiB on node {nid}");
    // The node's boot-time GiB (debug profile) is handed back first, as
    // every test that makes a GiB on it does: without it the tests before
    // this one can leave no free aligned GiB there, and the following
    // 1 GiB mmap below would die of SIGBUS.
    let _boot = crate::abi::first_use::BootPool::release(nid);
    let tk = match Tierkit::open() {
        Ok(t) => t,
        Err(e) => {
            r.fail(&pre, format!("open: {e}"));
            return;
        }
    };
    if let Err(e) = tk.set_policy(TK_MODE_INTERLEAVE, 1 << nid) {
        r.fail(&pre, format!("TK_IOC_SET_POLICY: {}", errno_name(&e)));
        return;
    }
    if let Err(e) = tk.set_gigantic(gigantic_arg(online_cpus(), TK_PLACE_LOCAL)) {
        r.fail(&pre, format!("TK_IOC_SET_GIGANTIC: {}", errno_name(&e)));
        return;
    }
    let base_free = vma::node_free_kb(nid);
    let base_held = Held::now();
    let base_limits = vma::read_limits().ok();
    gigantic_map_past(r, &tk, &pre, nid, gib);
    // Closing the file gives back whatever the touches made.
    drop(tk);
    let tk = match Tierkit::open() {
        Ok(t) => t,
        Err(e) => {
            r.fail(&pre, format!("open: {e}"));
            return;
        }
    };
    if let Err(e) = tk
        .set_policy(TK_MODE_INTERLEAVE, 1 << nid)
        .and_then(|_| tk.set_gigantic(gigantic_arg(online_cpus(), TK_PLACE_LOCAL)))
    {
        r.fail(&pre, format!("reopen: {}", errno_name(&e)));
        return;
    }
    back_to_baseline(r, &pre, nid, &base_held, base_free, &base_limits);
    following_gib(r, tk, &pre, nid, &base_held, &base_limits);
}

/// The `gib` GiB mmap on `nid`: ENOMEM at once (and nothing cleared), or
/// SIGBUS at the first GiB the node cannot supply when a child touches
/// every GiB.
fn gigantic_map_past(r: &mut Report, tk: &Tierkit, pre: &str, nid: u32, gib: usize) {
    let failed = || {
        vma::read_limits()
            .ok()
            .and_then(|l| vma::limit(&l, "gigantic_fault_failed"))
    };
    let t0 = monotonic_ns();
    let m = tk.map(gib * GIB_PAGES, 0);
    let dt = monotonic_ns() - t0;
    match m {
        Ok(m) => {
            // Reserved only; each GiB is made at its first touch. A child
            // touches one byte per GiB: SIGBUS at the first one the node
            // cannot supply.
            let before = failed();
            let p = m.as_ptr();
            let t0 = monotonic_ns();
            let res = vma::fork_run(|| {
                for g in 0..gib {
                    // SAFETY: inside our writable mapping of `gib` GiB.
                    unsafe { std::ptr::write_volatile(p.wrapping_add(g * GIB_PAGES * 4096), 1) };
                }
                0
            });
            let dt = monotonic_ns() - t0;
            r.check_note(
                &format!("{pre}: touching every GiB is SIGBUS, counted in gigantic_fault_failed"),
                match (res, before, failed()) {
                    (Ok(vma::Exit::Signal(libc::SIGBUS)), Some(b), Some(a)) if a > b => Ok(format!(
                        "after {:.2} s; gigantic_fault_failed {b} -> {a}",
                        dt as f64 / 1e9
                    )),
                    (Ok(e), b, a) => Err(format!(
                        "child: {e}; gigantic_fault_failed {b:?} -> {a:?} (node {nid} had {gib} free aligned GiBs?)"
                    )),
                    (Err(e), _, _) => Err(format!("fork: {e}")),
                },
            );
            drop(m);
        }
        Err(e) => {
            r.check_note(
                &format!("{pre} fails with ENOMEM"),
                expect_errno::<()>(Err(e), libc::ENOMEM)
                    .map(|_| format!("after {:.2} s", dt as f64 / 1e9)),
            );
            r.check(
                &format!("{pre}: nr_cleared is 0 after the failure"),
                match query(tk) {
                    Ok(q) if q.nr_cleared == 0 => Ok(()),
                    Ok(q) => Err(format!(
                        "nr_cleared {} (last_nid {})",
                        q.nr_cleared, q.last_nid
                    )),
                    Err(e) => Err(format!("QUERY: {}", errno_name(&e))),
                },
            );
        }
    }
}

/// After the file is closed: stats, the node's MemFree and `held_pages`
/// back to the baseline.
fn back_to_baseline(
    r: &mut Report,
    pre: &str,
    nid: u32,
    base_held: &Option<Held>,
    base_free: Option<u64>,
    base_limits: &Option<Vec<(String, u64)>>,
) {
    r.check_note(
        &format!("{pre}: stats held/gigantic back to baseline"),
        held_back(base_held),
    );
    r.check_note(
        &format!("{pre}: node {nid} MemFree back"),
        memfree_back(nid, base_free),
    );
    if let Some(bl) = base_limits {
        let now = vma::read_limits().ok();
        r.check(
            &format!("{pre}: limits held_pages back to baseline"),
            match (
                vma::limit(bl, "held_pages"),
                now.as_deref().and_then(|l| vma::limit(l, "held_pages")),
            ) {
                (Some(a), Some(b)) if a == b => Ok(()),
                (a, b) => Err(format!("held_pages {b:?}, baseline {a:?}")),
            },
        );
    }
}

/// A following 1 GiB mmap on the node succeeds, and the range it holds is
/// counted in stats and `held_pages` until the file is closed.
fn following_gib(
    r: &mut Report,
    tk: Tierkit,
    pre: &str,
    nid: u32,
    base_held: &Option<Held>,
    base_limits: &Option<Vec<(String, u64)>>,
) {
    // A file maps 1 GiB on the node now (made at its first touch).
    let t0 = monotonic_ns();
    match tk.map(GIB_PAGES, 0) {
        Ok(m) => {
            m.touch_pages();
            r.ok_note(
                &format!("{pre}: a following 1 GiB mmap on node {nid} succeeds"),
                format!("{:.2} s", (monotonic_ns() - t0) as f64 / 1e9),
            );
            // limits: a held range is visible in stats and held_pages.
            let now = Held::now();
            let want = base_held.as_ref().map(|b| b.gigantic(nid) + 1);
            r.check(
                &format!("limits: stats gigantic column counts the range held on node {nid}"),
                match (now.as_ref().map(|h| h.gigantic(nid)), want) {
                    (Some(g), Some(w)) if g == w => Ok(()),
                    (g, w) => Err(format!(
                        "gigantic {g:?}, expected {w:?} (stats: {})",
                        std::fs::read_to_string(tk::STATS_PATH)
                            .unwrap_or_default()
                            .replace('\n', "; ")
                    )),
                },
            );
            let lim = vma::read_limits().ok();
            r.check(
                &format!(
                    "limits: held_pages counts the gigantic range on node {nid} as 262144 pages"
                ),
                match (
                    base_limits
                        .as_deref()
                        .and_then(|l| vma::limit(l, "held_pages")),
                    lim.as_deref().and_then(|l| vma::limit(l, "held_pages")),
                ) {
                    (Some(a), Some(b)) if b == a + GIB_PAGES as u64 => Ok(()),
                    (a, b) => Err(format!("held_pages {a:?} -> {b:?}")),
                },
            );
            drop(m);
            drop(tk);
            r.check_note(
                &format!("{pre}: after close, stats back to baseline"),
                held_back(base_held),
            );
        }
        Err(e) => {
            r.fail(
                &format!("{pre}: a following 1 GiB mmap on node {nid} succeeds"),
                format!(
                    "{} (after {:.2} s)",
                    errno_name(&e),
                    (monotonic_ns() - t0) as f64 / 1e9
                ),
            );
        }
    }
}

/// The same for 4 KiB pages: an mmap and a TK_IOC_BULK that run out of a
/// node's memory part-way leave nothing behind.
pub fn small_pages_past_memory(r: &mut Report, topo: &Topology) {
    let Some(m) = topo.memory_only().first().copied() else {
        r.skip(
            "out of memory: 4 KiB mmap failing part-way",
            "no memory-only node",
        );
        return;
    };
    // BULK: 2^20 pages (4 GiB) on the memory-only node alone. Bulk pages
    // are not written, so this is cheap on CXL too.
    let name = format!("out of memory: TK_IOC_BULK of 2^20 pages on node {m} fails part-way with ENOMEM and frees everything");
    // GFP_KERNEL stops at the node's min watermark, so less than 4 GiB free
    // (plus a margin for the watermark) cannot serve 2^20 pages.
    let free = vma::node_free_kb(m).unwrap_or(0);
    if free >= (4 << 20) + 64 * MIB_KB {
        r.skip(
            &name,
            format!(
                "node {m} has {} MiB free: 4 GiB fit, cannot provoke",
                free / MIB_KB
            ),
        );
        return;
    }
    let res = (|| -> Result<String, String> {
        let tk = Tierkit::open().map_err(|e| e.to_string())?;
        tk.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, 1 << m)
            .map_err(|e| format!("TK_IOC_SET_POLICY: {}", errno_name(&e)))?;
        let base_free = vma::node_free_kb(m);
        let base_held = Held::now();
        let t0 = monotonic_ns();
        let b = tk.bulk(1 << 20);
        let dt = monotonic_ns() - t0;
        expect_errno(b, libc::ENOMEM)?;
        let h = held_back(&base_held)?;
        let f = memfree_back(m, base_free)?;
        Ok(format!(
            "ENOMEM after {:.2} s; {}",
            dt as f64 / 1e9,
            both(f, h)
        ))
    })();
    r.check_note(&name, res);

    let name = format!(
        "out of memory: 4 KiB mmap of 1 GiB on node {m} failing part-way with ENOMEM leaves nothing"
    );
    if is_cxl_node(m) {
        r.skip(
            &name,
            "CXL node: zeroing 3 GiB of it under QEMU costs minutes (Documentation/dev-tools/topologies.md, Slow memory)",
        );
        return;
    }
    let base_free = vma::node_free_kb(m);
    let base_held = Held::now();
    let mut kept: Vec<(Tierkit, crate::linux::sys::Mapping)> = Vec::new();
    let mut outcome: Option<Result<String, String>> = None;
    for i in 0..4 {
        let tk = match Tierkit::open() {
            Ok(t) => t,
            Err(e) => {
                outcome = Some(Err(format!("open: {e}")));
                break;
            }
        };
        if let Err(e) = tk.set_policy(TK_MODE_INTERLEAVE, 1 << m) {
            outcome = Some(Err(format!("TK_IOC_SET_POLICY: {}", errno_name(&e))));
            break;
        }
        let before_held = Held::now();
        let before_free = vma::node_free_kb(m);
        let t0 = monotonic_ns();
        match tk.map(GIB_PAGES, 0) {
            Ok(map) => kept.push((tk, map)),
            Err(e) if e.raw_os_error() == Some(libc::ENOMEM) => {
                let dt = monotonic_ns() - t0;
                let mut errs = Vec::new();
                let bf = before_free.unwrap_or(0);
                if let Err(x) = held_back(&before_held) {
                    errs.push(x);
                }
                if let Err(x) = memfree_back(m, before_free) {
                    errs.push(x);
                }
                outcome = Some(if errs.is_empty() {
                    Ok(format!(
                        "mmap {} failed after {:.2} s with {} MiB free on node {m} before it (part-way); held and MemFree back",
                        i + 1,
                        dt as f64 / 1e9,
                        bf / MIB_KB
                    ))
                } else {
                    Err(errs.join("; "))
                });
                break;
            }
            Err(e) => {
                outcome = Some(Err(format!("mmap {}: {}", i + 1, errno_name(&e))));
                break;
            }
        }
    }
    let n = kept.len();
    drop(kept);
    match outcome {
        Some(res) => {
            r.check_note(&name, res);
        }
        None => {
            r.skip(&name, format!("{n} GiB fit on node {m}: could not provoke"));
        }
    }
    r.check_note(
        &format!(
            "out of memory: after closing the {n} full files, held back and node {m} MemFree back"
        ),
        held_back(&base_held).and_then(|h| memfree_back(m, base_free).map(|f| both(f, h))),
    );
}
