//! The logic of `tk-test-gup`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-gup.rs` (its `--help`).

use crate::abi::tk::{self, MovableGigantic, Tierkit, TK_MODE_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::sys::{self, Mapping, PAGE_SIZE};
use crate::linux::vma::{self, check_pattern, fill_pattern, Exit};
use crate::tests::callers::{self, Caller};
use crate::tests::faults::MemSnapshot;
use crate::{abi::pool, linux::errno::errno_name};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tierkit_core::uapi::{
    TkPageRefs, TK_GIGANTIC_BYTES, TK_PAGE_ANON, TK_PAGE_BUDDY, TK_WALK_PTE, TK_WALK_PUD,
};

const BIN: &str = "tk-test-gup";
const GIB: usize = TK_GIGANTIC_BYTES as usize;
/// Pages of a region, as many as the reproduced vmsplice input.
const REGION: usize = 16;
/// A GiB's region starts 8 pages before its first 2 MiB line.
const GIB_REGION_START: usize = 512 - 8;
const SMALL_PAGES: usize = 64;
const SMALL_REGION_START: usize = 8;
const REUSE_BYTES: usize = 64 << 20;

/// How the subject's mapping was made.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Small,
    Gigantic,
    Pool,
    GiganticPte,
}

/// One mapping and the region under test.
struct Subject {
    name: String,
    nid: u32,
    kind: Kind,
    tk: Tierkit,
    map: Mapping,
    first: usize,
    _pool: Option<pool::Target>,
}

impl Subject {
    fn region(&self) -> *mut u8 {
        self.map.as_ptr().wrapping_add(self.first * PAGE_SIZE)
    }

    /// The pfn of region page `i`: TK_IOC_WALK under a PUD (pagemap
    /// would split it), pagemap for PTEs.
    fn pfn(&self, i: usize) -> Result<u64, String> {
        let addr = self.region() as usize + i * PAGE_SIZE;
        if matches!(self.kind, Kind::Gigantic | Kind::Pool) {
            let w = self
                .tk
                .walk(addr)
                .map_err(|e| format!("TK_IOC_WALK: {}", errno_name(&e)))?;
            if w.level != TK_WALK_PUD {
                return Err(format!(
                    "region page {i}: level {} is not a PUD leaf",
                    w.level
                ));
            }
            return Ok(w.pfn);
        }
        match vma::pagemap_pfn(addr) {
            Ok(Some(p)) if p != 0 => Ok(p),
            Ok(_) => Err(format!("region page {i}: not present in pagemap")),
            Err(e) => Err(format!("pagemap: {e}")),
        }
    }

    fn refs(&self) -> Result<Vec<(u64, TkPageRefs)>, String> {
        (0..REGION)
            .map(|i| {
                let pfn = self.pfn(i)?;
                let r = self
                    .tk
                    .page_refs(pfn)
                    .map_err(|e| format!("TK_IOC_PAGE_REFS: {}", errno_name(&e)))?;
                Ok((pfn, r))
            })
            .collect()
    }

    /// What every page of the region must be: held, not anonymous, on the
    /// subject's node, and for a GiB part of one PUD-order folio.
    fn sane(&self, refs: &[(u64, TkPageRefs)]) -> Result<(), String> {
        for (i, (pfn, r)) in refs.iter().enumerate() {
            let gib = self.kind != Kind::Small;
            if r.flags & (TK_PAGE_BUDDY | TK_PAGE_ANON) != 0 || r.refcount <= 0 {
                return Err(format!("page {i} (pfn {pfn:#x}) left its range: {r:?}"));
            }
            if r.nid != self.nid as i32 || (gib && r.order != 18) || (!gib && r.order != 0) {
                return Err(format!("page {i} (pfn {pfn:#x}): {r:?}"));
            }
        }
        Ok(())
    }
}

fn small(nid: u32) -> Result<Subject, String> {
    let tk = Tierkit::open().map_err(|e| format!("open: {e}"))?;
    tk.set_policy(TK_MODE_INTERLEAVE, 1 << nid)
        .map_err(|e| format!("TK_IOC_SET_POLICY: {}", errno_name(&e)))?;
    let map = tk
        .map(SMALL_PAGES, 0)
        .map_err(|e| format!("mmap: {}", errno_name(&e)))?;
    Ok(Subject {
        name: format!("node {nid} 4 KiB"),
        nid,
        kind: Kind::Small,
        tk,
        map,
        first: SMALL_REGION_START,
        _pool: None,
    })
}

fn gigantic(nid: u32, kind: Kind) -> Result<Subject, String> {
    let target = match kind {
        Kind::Pool => Some(pool::Target::filled(nid, 1)?.0),
        _ => None,
    };
    let tk = Tierkit::gigantic_on(nid).map_err(|e| format!("gigantic mode: {}", errno_name(&e)))?;
    let map = Mapping::new(GIB, libc::MAP_SHARED, tk.fd(), 0)
        .map_err(|e| format!("mmap 1 GiB: {}", errno_name(&e)))?;
    let first = GIB_REGION_START;
    if kind == Kind::GiganticPte {
        map.no_huge().map_err(|e| format!("MADV_NOHUGEPAGE: {e}"))?;
        // The touches fault in a child: a GiB that cannot be made is
        // SIGBUS there. The region's PTEs are the parent's after its own
        // touch below.
        let p = map.as_ptr() as usize;
        match vma::fork_run(|| {
            // SAFETY: our mapping; SIGBUS ends the child only.
            unsafe { std::ptr::read_volatile((p + first * PAGE_SIZE) as *const u8) };
            0
        }) {
            Ok(Exit::Code(0)) => {}
            Ok(e) => return Err(format!("first touch with THP disabled: {e}")),
            Err(e) => return Err(format!("fork: {e}")),
        }
        for i in 0..REGION {
            // SAFETY: our mapping, the GiB is made.
            unsafe { std::ptr::read_volatile(map.as_ptr().add((first + i) * PAGE_SIZE)) };
        }
    } else {
        // SAFETY: our readable mapping.
        unsafe { vma::make_gigantic(map.as_ptr(), GIB)? };
        // SAFETY: as above, made; this maps the PUD in this process.
        unsafe { std::ptr::read_volatile(map.as_ptr()) };
    }
    let name = match kind {
        Kind::Pool => "gigantic from the pool",
        Kind::GiganticPte => "gigantic by 4 KiB PTEs",
        _ => "gigantic",
    };
    Ok(Subject {
        name: format!("node {nid} {name}"),
        nid,
        kind,
        tk,
        map,
        first,
        _pool: target,
    })
}

/// Polls until the region's references are `before` again (io_uring
/// tears its ring down in a workqueue), at most 5 s.
fn refs_back(s: &Subject, before: &[(u64, TkPageRefs)]) -> Result<String, String> {
    let t0 = Instant::now();
    loop {
        let now = s.refs()?;
        s.sane(&now)?;
        let same = now
            .iter()
            .zip(before)
            .all(|((p, a), (q, b))| p == q && a.refcount == b.refcount && a.mapcount == b.mapcount);
        if same {
            let (_, r) = now[0];
            return Ok(format!(
                "refcount {}, mapcount {}, order {}",
                r.refcount, r.mapcount, r.order
            ));
        }
        if t0.elapsed() > Duration::from_secs(5) {
            let diff: Vec<String> = now
                .iter()
                .zip(before)
                .enumerate()
                .filter(|(_, ((p, a), (q, b)))| {
                    p != q || a.refcount != b.refcount || a.mapcount != b.mapcount
                })
                .take(4)
                .map(|(i, ((p, a), (_, b)))| {
                    format!(
                        "page {i} pfn {p:#x}: refcount {} -> {}, mapcount {} -> {}",
                        b.refcount, a.refcount, b.mapcount, a.mapcount
                    )
                })
                .collect();
            return Err(diff.join("; "));
        }
        vma::sleep_ms(20);
    }
}

fn callers(r: &mut Report, s: &Subject) {
    let before = match s.refs().and_then(|v| s.sane(&v).map(|()| v)) {
        Ok(v) => v,
        Err(e) => {
            r.fail(&format!("{}: the region's pages before", s.name), e);
            return;
        }
    };
    // A page in ZONE_MOVABLE, or a 4 KiB mapping made while some node had
    // such memory (a rebalance or an offline may move its pages there):
    // long-term writable pins are refused.
    let movable = before
        .iter()
        .any(|(pfn, _)| callers::pfn_in_movable(*pfn).unwrap_or(false))
        || (s.kind == Kind::Small && callers::system_has_movable().unwrap_or(false));
    for (k, c) in Caller::ALL.into_iter().enumerate() {
        let refused = movable && c == Caller::IoUring;
        let name = if refused {
            format!(
                "{}: {} is refused with EFAULT at once (ZONE_MOVABLE), every reference as it was",
                s.name,
                c.name()
            )
        } else {
            format!(
                "{}: {} leaves the data and every reference as they were",
                s.name,
                c.name()
            )
        };
        // SAFETY: the region lies in the subject's writable shared mapping.
        match unsafe { c.run(s.region(), REGION, 0x5eed_0000 + k as u64) } {
            Ok(Some(why)) => {
                r.skip(&name, why);
            }
            Ok(None) if !refused => {
                r.check_note(&name, refs_back(s, &before));
            }
            Err(e) if refused && e == callers::LONGTERM_REFUSED => {
                r.check_note(&name, refs_back(s, &before));
            }
            Ok(None) => {
                r.fail(&name, "the long-term pin of a ZONE_MOVABLE page succeeded");
            }
            Err(e) => {
                r.fail(&name, e);
            }
        }
    }
    reuse(r, s, &before);
}

/// The reproduced input: vmsplice the region, drain and close the pipe, then
/// a child on the same node allocates and fills 64 MiB.
fn reuse(r: &mut Report, s: &Subject, before: &[(u64, TkPageRefs)]) {
    let name = format!("{}: after vmsplice, a 64 MiB anonymous allocation on the node takes none of the region's pages", s.name);
    let res = (|| -> Result<String, String> {
        // SAFETY: the subject's writable region.
        unsafe { fill_pattern(s.region(), 0, REGION, 0xabad_cafe) };
        let p = vma::Pipe::new().map_err(|e| e.to_string())?;
        let iov = libc::iovec {
            iov_base: s.region() as *mut libc::c_void,
            iov_len: REGION * PAGE_SIZE,
        };
        // SAFETY: the kernel takes references to the region's pages.
        let n = unsafe { libc::vmsplice(p.wr, &iov, 1, 0) };
        if n != (REGION * PAGE_SIZE) as isize {
            return Err(format!(
                "vmsplice: {n} ({})",
                std::io::Error::last_os_error()
            ));
        }
        let held = s.refs()?;
        let extra: i32 = if s.kind == Kind::Small {
            held.iter()
                .zip(before)
                .map(|((_, a), (_, b))| a.refcount - b.refcount)
                .sum()
        } else {
            held[0].1.refcount - before[0].1.refcount
        };
        if extra != REGION as i32 {
            return Err(format!(
                "while the pipe holds {REGION} pages, {extra} more references (want {REGION})"
            ));
        }
        let mut buf = vec![0u8; REGION * PAGE_SIZE];
        // SAFETY: reads into a local buffer.
        unsafe { vma::read_exact_fd(p.rd, buf.as_mut_ptr(), buf.len()) }
            .map_err(|e| e.to_string())?;
        drop(p);
        let nid = s.nid;
        let child = vma::fork_run(move || {
            let Ok(m) = Mapping::anon(REUSE_BYTES) else {
                return 2;
            };
            if m.mbind(sys::MPOL_BIND, 1 << nid, 0).is_err() {
                return 3;
            }
            // SAFETY: our anonymous mapping.
            unsafe { fill_pattern(m.as_ptr(), 0, REUSE_BYTES / PAGE_SIZE, 0x0dd_ba11) };
            // SAFETY: as above.
            match unsafe { check_pattern(m.as_ptr(), 0, REUSE_BYTES / PAGE_SIZE, 0x0dd_ba11) } {
                Ok(()) => 0,
                Err(_) => 1,
            }
        })
        .map_err(|e| format!("fork: {e}"))?;
        // SAFETY: the subject's readable region.
        let ours = unsafe { check_pattern(s.region(), 0, REGION, 0xabad_cafe) };
        match (child, ours) {
            (Exit::Code(0), Ok(())) => {}
            (c, o) => {
                return Err(format!(
                    "the child: {c} (1: its data was overwritten); the region: {o:?}"
                ))
            }
        }
        refs_back(s, before).map(|n| format!("16 references on the folio while held; after: {n}"))
    })();
    r.check_note(&name, res);
}

/// THP disabled, then on again: every touch of a GiB works and stays in
/// the same GiB (the 4 KiB fallback; a PMD table in the PUD slot).
fn thp_toggle(r: &mut Report, s: &Subject) {
    let res = (|| -> Result<String, String> {
        let p = s.map.as_ptr();
        let w = s.tk.walk(s.region() as usize).map_err(|e| errno_name(&e))?;
        if w.level != TK_WALK_PTE {
            return Err(format!(
                "touched with THP disabled: level {}, want PTE",
                w.level
            ));
        }
        // SAFETY: the subject's mapping; THP back on for the vma.
        if unsafe { libc::madvise(p.cast(), GIB, libc::MADV_HUGEPAGE) } != 0 {
            return Err(format!(
                "MADV_HUGEPAGE: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: our mapping.
        unsafe { fill_pattern(p, 1000, 4, 77) };
        // SAFETY: as above; the next touches fault again.
        if unsafe { libc::madvise(p.cast(), GIB, libc::MADV_DONTNEED) } != 0 {
            return Err(format!(
                "MADV_DONTNEED: {}",
                std::io::Error::last_os_error()
            ));
        }
        let exit = vma::fork_run(|| {
            // SAFETY: our mapping; a SIGBUS ends the child only.
            match unsafe { check_pattern(p, 1000, 4, 77) } {
                Ok(()) => 0,
                Err(_) => 1,
            }
        })
        .map_err(|e| e.to_string())?;
        if exit != Exit::Code(0) {
            return Err(format!(
                "a touch after MADV_HUGEPAGE and MADV_DONTNEED: {exit}"
            ));
        }
        // SAFETY: our mapping.
        unsafe { check_pattern(p, 1000, 4, 77) }?;
        Ok(
            "touches after THP was disabled, enabled and the GiB zapped all work; contents kept"
                .into(),
        )
    })();
    r.check_note(
        &format!(
            "{}: every touch after a touch with THP disabled works",
            s.name
        ),
        res,
    );
}

pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let Some(topo) = crate::abi::ready::tierkit_ready(&mut r) else {
        return r.finish();
    };
    let _movable =
        MovableGigantic::enable().map_err(|e| r.fail("enable movable_gigantic", e.to_string()));
    crate::tests::faults::drain_slab();
    let snap0 = MemSnapshot::take().ok();
    let first = topo.memory.first().copied().unwrap_or(0);
    // The first node's boot-time GiB, if any, is handed back while this
    // test makes its GiBs there (`first_use::BootPool`).
    let _boot = crate::abi::first_use::BootPool::release(first);
    for &nid in &topo.memory {
        match small(nid) {
            Ok(s) => callers(&mut r, &s),
            Err(e) => {
                r.fail(&format!("node {nid} 4 KiB: the mapping"), e);
            }
        }
    }
    // One GiB at a time (a small node holds no second one), each closed
    // before the next.
    for kind in [Kind::Gigantic, Kind::Pool, Kind::GiganticPte] {
        match gigantic(first, kind) {
            Ok(s) => {
                callers(&mut r, &s);
                if kind == Kind::GiganticPte {
                    thp_toggle(&mut r, &s);
                }
            }
            Err(e) if ["ENOMEM", "SIGBUS", "ENOSPC"].iter().any(|x| e.contains(x)) => {
                r.skip(
                    &format!("node {first} {kind:?}: the mapping"),
                    format!("no free aligned GiB on the node: {e}"),
                );
            }
            Err(e) => {
                r.fail(&format!("node {first} {kind:?}: the mapping"), e);
            }
        }
    }
    // Everything is closed: nothing held, free memory back.
    let stats = tk::read_stats().unwrap_or_default();
    let held: Vec<String> = topo
        .memory
        .iter()
        .filter_map(|&n| {
            let (_, h) = tk::stats_of(&stats, n);
            let g = tk::gigantic_of(&stats, n);
            (h != 0 || g != 0).then(|| format!("node {n}: {h} pages, {g} GiB"))
        })
        .collect();
    r.check(
        "every mapping closed: tierkit holds nothing",
        if held.is_empty() {
            Ok(())
        } else {
            Err(held.join("; "))
        },
    );
    if let Some(before) = snap0 {
        let t0 = Instant::now();
        let res = loop {
            crate::tests::faults::drain_slab();
            let after = MemSnapshot::take().map_err(|e| e.to_string());
            let lost = after.as_ref().map(|a| before.losses(a, 8192, 64 << 10));
            match lost {
                Ok(l) if l.is_empty() => break Ok(()),
                Ok(l) if t0.elapsed() > Duration::from_secs(10) => break Err(l.join("; ")),
                Err(e) => break Err(e.clone()),
                _ => vma::sleep_ms(100),
            }
        };
        r.check(
            "every node's free memory is back (within 32 MiB; slab within 64 MiB)",
            res,
        );
    }
    r.finish()
}
