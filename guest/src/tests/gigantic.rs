//! The logic of `tk-test-gigantic`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-gigantic.rs` (its `--help`).

use crate::abi::tk::{MovableGigantic, Tierkit, TK_MODE_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::sys::{self, monotonic_ns, Mapping, PAGE_SIZE};
use crate::linux::vma::{self, Exit};
use crate::topology::node::Topology;
use crate::{linux::errno::errno_name, linux::errno::expect_errno};
use std::process::ExitCode;
use tierkit_core::uapi::{
    TkGigantic, TK_GIGANTIC_BYTES, TK_PLACE_LOCAL, TK_THREADS_AUTO, TK_WALK_NONE, TK_WALK_PTE,
    TK_WALK_PUD,
};

const BIN: &str = "tk-test-gigantic";
const GIB: usize = TK_GIGANTIC_BYTES as usize;
const PAGES: usize = GIB / PAGE_SIZE;
const PATTERN: u8 = 0xA5;
/// How long a child that makes one GiB at a 4 KiB fault may take: the
/// allocation and clear of 1 GiB take up to some 15 s under TCG with KASAN.
const CHILD_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// What one mapping looked like.
struct Seen {
    first_pfn: u64,
}

/// One round on node `nid`: map, check, optionally fill with the pattern.
fn round(r: &mut Report, nid: u32, tag: &str, fill: bool) -> Option<Seen> {
    let name = |what: &str| format!("node {nid} {tag}: {what}");
    let tk = match Tierkit::open() {
        Ok(t) => t,
        Err(e) => {
            r.fail(&name("open /dev/tierkit"), e.to_string());
            return None;
        }
    };
    if let Err(e) = tk.set_policy(TK_MODE_INTERLEAVE, 1u64 << nid) {
        r.fail(&name("TK_IOC_SET_POLICY"), errno_name(&e));
        return None;
    }
    let set = TkGigantic {
        threads: TK_THREADS_AUTO,
        placement: TK_PLACE_LOCAL,
        ..Default::default()
    };
    if let Err(e) = tk.set_gigantic(set) {
        r.fail(&name("TK_IOC_SET_GIGANTIC"), errno_name(&e));
        return None;
    }
    let t0 = monotonic_ns();
    let m = match tk.map(PAGES, 0) {
        Ok(m) => m,
        Err(e) => {
            r.fail(
                &name("mmap 1 GiB"),
                format!(
                    "{} (ENOMEM: no free naturally aligned GiB on node {nid}; \
                     on q35 a DRAM node needs 5 GiB, 6 GiB after the other tests)",
                    errno_name(&e)
                ),
            );
            return None;
        }
    };
    let map_ns = monotonic_ns() - t0;
    r.ok_note(&name("mmap 1 GiB"), format!("{:.3} s", map_ns as f64 / 1e9));
    r.check(
        &name("mmap returns a GiB-aligned address"),
        if m.addr().is_multiple_of(GIB) {
            Ok(())
        } else {
            Err(format!("{:#x}", m.addr()))
        },
    );
    r.check(
        &name("nothing is mapped or cleared before the first touch"),
        match (tk.walk(m.addr()), tk.gigantic_query()) {
            (Ok(w), Ok(q)) if w.level == TK_WALK_NONE && q.last_nid == -1 && q.nr_cleared == 1 => {
                Ok(())
            }
            (Ok(w), Ok(q)) => Err(format!(
                "walk level {}, last_nid {}, nr_cleared {}",
                w.level, q.last_nid, q.nr_cleared
            )),
            (Err(e), _) | (_, Err(e)) => Err(errno_name(&e)),
        },
    );

    let t0 = monotonic_ns();
    // In a child: a GiB that cannot be made is SIGBUS for the toucher.
    // SAFETY: `m` is a live mapping of ours.
    if let Err(e) = unsafe { crate::linux::vma::make_gigantic(m.as_ptr(), m.len()) } {
        r.fail(&name("the first touch makes the GiB"), e);
        return None;
    }
    let nonzero = m.first_nonzero();
    let touch_ns = monotonic_ns() - t0;
    r.check(
        &name("every byte zero"),
        match nonzero {
            None => Ok(()),
            Some(off) => Err(format!("byte {off:#x} is not zero")),
        },
    );
    r.note(format!(
        "node {nid} {tag}: first touch (in a child) and scan of 1 GiB: {:.2} s",
        touch_ns as f64 / 1e9
    ));

    let q = tk.gigantic_query();
    // With init_on_alloc on, the allocator's zeroing is the clear: no
    // workers, no CPU node (Documentation/ABI/testing/dev-tierkit).
    let by_allocator = |q: &TkGigantic| {
        q.last_workers == 0
            && q.last_cpu_node == -1
            && crate::linux::kernel::init_on_alloc() == Some(true)
    };
    r.check_note(
        &name("TK_GIGANTIC_F_QUERY reports the clear"),
        match q {
            Ok(q) if q.last_nid == nid as i32 && q.nr_cleared == 1 && by_allocator(&q) => {
                Ok(format!(
                    "zeroed by the allocator (init_on_alloc on), {:.3} s",
                    q.last_elapsed_ns as f64 / 1e9
                ))
            }
            Ok(q) if q.last_nid == nid as i32 && q.nr_cleared == 1 && q.last_workers >= 1 => {
                Ok(format!(
                    "{} workers on node {}'s CPUs, {:.3} s, {:.2} GB/s",
                    q.last_workers,
                    q.last_cpu_node,
                    q.last_elapsed_ns as f64 / 1e9,
                    TK_GIGANTIC_BYTES as f64 / q.last_elapsed_ns.max(1) as f64
                ))
            }
            Ok(q) => Err(format!(
                "last_nid {} nr_cleared {} last_workers {}",
                q.last_nid, q.nr_cleared, q.last_workers
            )),
            Err(e) => Err(errno_name(&e)),
        },
    );
    r.check(
        &name("set after mmap is EBUSY"),
        expect_errno(tk.set_gigantic(set), libc::EBUSY),
    );

    let pud = tk.check_pud(&m, nid);
    let first_pfn = pud.as_ref().map_or(0, |p| p.0);
    r.check_note(
        &name("one PUD maps one contiguous aligned GiB on the node"),
        pud.map(|p| p.1),
    );

    if fill {
        // SAFETY: the mapping is readable and writable for its length.
        unsafe { std::ptr::write_bytes(m.as_ptr(), PATTERN, m.len()) };
    }
    Some(Seen { first_pfn })
}

/// The walk at `addr`: (level, pfn), or the errno name.
fn walk(tk: &Tierkit, addr: usize) -> Result<(u32, u64), String> {
    tk.walk(addr)
        .map(|w| (w.level, w.pfn))
        .map_err(|e| format!("TK_IOC_WALK: {}", errno_name(&e)))
}

/// `gigantic_fault_failed` from the limits file.
fn fault_failed() -> Option<u64> {
    vma::read_limits()
        .ok()
        .and_then(|l| vma::limit(&l, "gigantic_fault_failed"))
}

/// The VMA semantics of a gigantic mapping (Documentation/ABI/testing/
/// dev-tierkit), with one GiB on `nid`.
fn semantics(r: &mut Report, nid: u32) {
    let name = |what: &str| semantics_name(nid, what);
    let tk = match Tierkit::gigantic_on(nid) {
        Ok(t) => t,
        Err(e) => {
            r.fail(&name("open a gigantic file"), errno_name(&e));
            return;
        }
    };
    // MAP_POPULATE: the kernel faults the GiB in after mmap drops the
    // write lock; it is a PUD before any touch.
    let m = match Mapping::new(GIB, libc::MAP_SHARED | libc::MAP_POPULATE, tk.fd(), 0) {
        Ok(m) => m,
        Err(e) => {
            r.fail(&name("mmap 1 GiB MAP_POPULATE"), errno_name(&e));
            return;
        }
    };
    let a = m.as_ptr();
    let Some(pfn0) = populated_pud(r, nid, &tk, &m) else {
        return;
    };
    // SAFETY: our writable mapping.
    unsafe { vma::fill_pattern(a, 0, 4, 7) };
    // SAFETY: as above; page PAGES-1 is the last page.
    unsafe { vma::fill_pattern(a, PAGES - 1, 1, 8) };
    let g = Gib { tk: &tk, pfn0 };
    refused_splits(r, nid, &g, &m);
    mprotect_whole(r, nid, &g, &m);
    fork_shares(r, nid, &g, &m);
    dontneed(r, nid, &g, &m);
    if !mremap_moves(r, nid, &g, m) {
        return;
    }
    // The file's GiB goes back with the file: what follows needs one fresh
    // GiB on the node, never two at once (a node with one free aligned GiB
    // left, as under KASAN, must not fail it).
    drop(tk);
    let tk = match Tierkit::gigantic_on(nid) {
        Ok(t) => t,
        Err(e) => {
            r.fail(&name("open a second gigantic file"), errno_name(&e));
            return;
        }
    };
    dontdump_and_4k_fault(r, nid, &tk);
    drop(tk);
    prctl_race(r, nid);
}

/// On a fresh file: a thread's `prctl(PR_SET_THP_DISABLE)` and 4 KiB
/// touch during another thread's first touch of the GiB
/// (`races::prctl_during_first_touch`).
fn prctl_race(r: &mut Report, nid: u32) {
    let name = semantics_name(
        nid,
        "prctl(PR_SET_THP_DISABLE) and a touch by one thread during another's first touch: both writes in one GiB, mapped once",
    );
    let res = Tierkit::gigantic_on(nid)
        .map_err(|e| format!("open: {}", errno_name(&e)))
        .and_then(|tk| {
            let m = Mapping::new(GIB, libc::MAP_SHARED, tk.fd(), 0)
                .map_err(|e| format!("mmap: {}", errno_name(&e)))?;
            crate::tests::races::prctl_during_first_touch(&tk, &m, CHILD_LIMIT)
        });
    r.check_note(&name, res);
}

/// The name of a check of [`semantics`] on node `nid`.
fn semantics_name(nid: u32, what: &str) -> String {
    format!("node {nid} semantics: {what}")
}

/// The file of [`semantics`] and the first pfn of its GiB.
struct Gib<'a> {
    tk: &'a Tierkit,
    pfn0: u64,
}

impl Gib<'_> {
    /// One PUD at `addr` maps the GiB.
    fn same_pud(&self, addr: usize) -> Result<(), String> {
        let pfn0 = self.pfn0;
        match walk(self.tk, addr)? {
            (l, p) if l == TK_WALK_PUD && p == pfn0 => Ok(()),
            (l, p) => Err(format!("level {l} pfn {p:#x}, expected a PUD at {pfn0:#x}")),
        }
    }
}

/// The pattern of [`semantics`] (pages 0..4 and the last page) is intact.
fn pattern_kept(base: *mut u8) -> Result<(), String> {
    // SAFETY: readable mapping of 1 GiB at `base`.
    unsafe { vma::check_pattern(base, 0, 4, 7) }?;
    // SAFETY: as above.
    unsafe { vma::check_pattern(base, PAGES - 1, 1, 8) }
}

/// MAP_POPULATE maps the GiB by one PUD before any touch; gives its pfn.
fn populated_pud(r: &mut Report, nid: u32, tk: &Tierkit, m: &Mapping) -> Option<u64> {
    let name = |what: &str| semantics_name(nid, what);
    let pfn0 = match walk(tk, m.addr()) {
        Ok((l, p)) if l == TK_WALK_PUD => {
            r.ok_note(
                &name("MAP_POPULATE maps the GiB by one PUD before any touch"),
                format!("pfn {p:#x}"),
            );
            p
        }
        Ok((l, _)) => {
            r.fail(
                &name("MAP_POPULATE maps the GiB by one PUD before any touch"),
                format!("level {l}"),
            );
            return None;
        }
        Err(e) => {
            r.fail(
                &name("MAP_POPULATE maps the GiB by one PUD before any touch"),
                e,
            );
            return None;
        }
    };
    Some(pfn0)
}

/// Splits only at GiB boundaries (may_split), as device-dax: partial
/// munmap, mprotect and mremap are EINVAL, and nothing changes.
fn refused_splits(r: &mut Report, nid: u32, g: &Gib, m: &Mapping) {
    let name = |what: &str| semantics_name(nid, what);
    let a = m.as_ptr();
    for (what, res) in [
        // SAFETY: refused; nothing is unmapped.
        ("munmap of the first 4 KiB", unsafe {
            vma::munmap(a, PAGE_SIZE)
        }),
        // SAFETY: refused; nothing is unmapped.
        ("munmap of the last 2 MiB", unsafe {
            vma::munmap(a.wrapping_add(GIB - (2 << 20)), 2 << 20)
        }),
        // SAFETY: refused; the protection stays.
        ("mprotect of 4 KiB", unsafe {
            vma::mprotect(a, PAGE_SIZE, libc::PROT_READ)
        }),
        // SAFETY: refused; the mapping stays.
        (
            "mremap shrinking to 2 MiB",
            unsafe { vma::mremap(a, GIB, 2 << 20, 0, std::ptr::null_mut()) }.map(|_| ()),
        ),
    ] {
        r.check(
            &name(&format!("{what} is EINVAL")),
            expect_errno(res, libc::EINVAL),
        );
    }
    r.check(
        &name("after the refused splits the same PUD maps the GiB, contents kept"),
        g.same_pud(m.addr()).and_then(|_| pattern_kept(a)),
    );
}

/// mprotect of the whole GiB: read-only (a write is SIGSEGV), then
/// read-write again.
fn mprotect_whole(r: &mut Report, nid: u32, g: &Gib, m: &Mapping) {
    let name = |what: &str| semantics_name(nid, what);
    let a = m.as_ptr();
    // SAFETY: our mapping; only read while read-only.
    let res = unsafe { vma::mprotect(a, GIB, libc::PROT_READ) }
        .map_err(|e| format!("mprotect PROT_READ: {}", errno_name(&e)))
        .and_then(|_| {
            match vma::fork_run(|| {
                // SAFETY: the child writes to a read-only mapping: SIGSEGV.
                unsafe { std::ptr::write_volatile(a, 1) };
                0
            }) {
                Ok(Exit::Signal(libc::SIGSEGV)) => Ok(()),
                Ok(e) => Err(format!(
                    "a write to the read-only GiB: {e}, expected SIGSEGV"
                )),
                Err(e) => Err(format!("fork: {e}")),
            }
        })
        .and_then(|_| pattern_kept(a))
        // SAFETY: as above.
        .and_then(|_| {
            unsafe { vma::mprotect(a, GIB, libc::PROT_READ | libc::PROT_WRITE) }
                .map_err(|e| format!("mprotect RW: {}", errno_name(&e)))
        })
        .and_then(|_| {
            // SAFETY: writable again; page 4 is not part of the pattern.
            unsafe { std::ptr::write_volatile(a.wrapping_add(4 * PAGE_SIZE), 0x5a) };
            g.same_pud(m.addr())
        });
    r.check(
        &name("mprotect PROT_READ of the GiB: writes SIGSEGV; back to RW: writable, same PUD"),
        res,
    );
}

/// fork: the child shares the GiB (same pfn, its writes seen here).
fn fork_shares(r: &mut Report, nid: u32, g: &Gib, m: &Mapping) {
    let name = |what: &str| semantics_name(nid, what);
    let a = m.as_ptr();
    let res = match vma::fork_run(|| {
        let ok = matches!(walk(g.tk, a as usize), Ok((l, p)) if l == TK_WALK_PUD && p == g.pfn0)
            // SAFETY: the shared mapping, inherited.
            && unsafe { vma::check_pattern(a, 0, 4, 7) }.is_ok();
        // SAFETY: as above; page 5 is not part of the pattern.
        unsafe { std::ptr::write_volatile(a.wrapping_add(5 * PAGE_SIZE), 0xc3) };
        if ok {
            0
        } else {
            1
        }
    }) {
        Ok(Exit::Code(0)) => {
            // SAFETY: our mapping.
            let b = unsafe { std::ptr::read_volatile(a.wrapping_add(5 * PAGE_SIZE)) };
            if b == 0xc3 {
                Ok(())
            } else {
                Err(format!("the child's write is not seen: {b:#x}"))
            }
        }
        Ok(e) => Err(format!(
            "the child: {e} (exit 1: not the same PUD or contents)"
        )),
        Err(e) => Err(format!("fork: {e}")),
    };
    r.check(
        &name("fork shares the GiB: same PUD pfn and contents in the child, its writes seen"),
        res,
    );
}

/// MADV_DONTNEED: the PUD goes, the GiB stays with the file; the next
/// touch maps the same range, contents kept (nothing re-cleared).
fn dontneed(r: &mut Report, nid: u32, g: &Gib, m: &Mapping) {
    let name = |what: &str| semantics_name(nid, what);
    let a = m.as_ptr();
    for (what, off, len) in [("4 KiB", 4096usize, PAGE_SIZE), ("the whole GiB", 0, GIB)] {
        // SAFETY: ours; contents are checked afterwards.
        let res = unsafe { sys::madvise(a.wrapping_add(off) as *mut _, len, libc::MADV_DONTNEED) }
            .map_err(|e| format!("madvise: {}", errno_name(&e)))
            .and_then(|_| match walk(g.tk, m.addr())? {
                (l, _) if l == TK_WALK_NONE => Ok(()),
                (l, _) => Err(format!(
                    "after MADV_DONTNEED level {l}, expected nothing mapped"
                )),
            })
            .and_then(|_| pattern_kept(a))
            .and_then(|_| g.same_pud(m.addr()));
        r.check(&name(&format!("MADV_DONTNEED of {what} unmaps the PUD; the next touch maps the same GiB, contents kept")), res);
    }
}

/// mremap of the whole GiB to a new address: into a GiB-aligned hole of a
/// PROT_NONE placeholder (MREMAP_FIXED replaces it). Off by 4 KiB it is
/// EINVAL (vm_ops->mremap) and the GiB stays where it was; at the aligned
/// address the PUD and the contents move with it. `false` if no
/// placeholder could be had (the test stops).
fn mremap_moves(r: &mut Report, nid: u32, g: &Gib, m: Mapping) -> bool {
    let name = |what: &str| semantics_name(nid, what);
    let a = m.as_ptr();
    let name_move = name("mremap MREMAP_FIXED to an unaligned address is EINVAL; to a GiB-aligned one moves the PUD (same pfn) and contents");
    let hole = match Mapping::new(
        3 * GIB,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
        -1,
        0,
    ) {
        Ok(h) => h,
        Err(e) => {
            r.fail(&name_move, format!("placeholder: {}", errno_name(&e)));
            return false;
        }
    };
    let target = (hole.addr() + GIB - 1) & !(GIB - 1);
    // SAFETY: the target lies in our placeholder; refused, nothing moves.
    let bad = unsafe {
        vma::mremap(
            a,
            GIB,
            GIB,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            (target + PAGE_SIZE) as *mut u8,
        )
    };
    let res = expect_errno(bad.map(|_| ()), libc::EINVAL)
        .and_then(|_| pattern_kept(a))
        .and_then(|_| g.same_pud(m.addr()))
        .and_then(|_| {
            // SAFETY: the target lies in our placeholder; `m` is not used
            // at its old address afterwards (forgotten below).
            unsafe {
                vma::mremap(
                    a,
                    GIB,
                    GIB,
                    libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                    target as *mut u8,
                )
            }
            .map_err(|e| format!("mremap to {target:#x}: {}", errno_name(&e)))
        });
    match res {
        Ok(n) => {
            std::mem::forget(m);
            r.check(
                &name_move,
                pattern_kept(n).and_then(|_| g.same_pud(n as usize)),
            );
            // SAFETY: the moved GiB, not used again.
            let _ = unsafe { vma::munmap(n, GIB) };
        }
        Err(e) => {
            r.fail(&name_move, e);
            drop(m);
        }
    }
    drop(hole);
    true
}

/// On a second file: VM_DONTDUMP (a gigantic mapping is not in core
/// dumps), and a 4 KiB fault with THP disabled maps the GiB's page by a
/// PTE in a child, which the parent sees in its PUD-mapped GiB.
fn dontdump_and_4k_fault(r: &mut Report, nid: u32, tk: &Tierkit) {
    let name = |what: &str| semantics_name(nid, what);
    match Mapping::new(GIB, libc::MAP_SHARED, tk.fd(), 0) {
        Ok(m2) => {
            r.check_note(
                &name("VM_DONTDUMP (dd in smaps VmFlags): never in a core dump"),
                match vma::smaps_vmflags(m2.addr()) {
                    Some(f) if f.iter().any(|x| x == "dd") => Ok(f.join(" ")),
                    Some(f) => Err(format!("VmFlags: {}", f.join(" "))),
                    None => Err("no smaps entry".to_string()),
                },
            );
            // A 4 KiB fault (the kernel skips the PUD when THP is disabled
            // for the task): the GiB is made, and its 4 KiB page mapped by
            // a PTE in the child; nothing counts as failed. Bounded: a GiB
            // that cannot be made must be SIGBUS, never a fault retried
            // without end (tk-test-faults injects that failure).
            let before = fault_failed();
            let p = m2.as_ptr();
            let res = match vma::fork_run_within(CHILD_LIMIT, || {
                if sys::disable_thp().is_err() {
                    return 2;
                }
                // SAFETY: our mapping; a SIGBUS would end this child.
                unsafe { std::ptr::write_volatile(p.add(4096 * 3 + 5), 0x5a) };
                let w = tk.walk(p as usize + 4096 * 3).map(|w| w.level);
                if w.ok() != Some(TK_WALK_PTE) {
                    return 3;
                }
                0
            }) {
                Ok(Exit::Code(0)) => match (before, fault_failed()) {
                    (Some(b), Some(a)) if a == b => Ok(format!("gigantic_fault_failed stays {b}")),
                    (b, a) => Err(format!("gigantic_fault_failed {b:?} -> {a:?}")),
                },
                Ok(Exit::Code(3)) => Err("the child's touch was not mapped by a PTE".to_string()),
                Ok(e) => Err(format!("the child: {e}, expected exit 0")),
                Err(e) => Err(format!(
                    "the child (fork, or its touch bounded by {} s): {e}",
                    CHILD_LIMIT.as_secs()
                )),
            };
            r.check_note(
                &name("a touch with THP disabled maps the GiB's 4 KiB page by a PTE"),
                res,
            );
            // The child's write is in the same GiB, which the parent (THP
            // on) maps by one PUD.
            // SAFETY: our mapping.
            let seen = unsafe { std::ptr::read_volatile(p.add(4096 * 3 + 5)) };
            // SAFETY: as above; put the byte back to zero for the scan.
            unsafe { std::ptr::write_volatile(p.add(4096 * 3 + 5), 0) };
            r.check(
                &name("the child's write through its PTE is in the parent's GiB"),
                if seen == 0x5a {
                    Ok(())
                } else {
                    Err(format!("read {seen:#x}"))
                },
            );
            // The parent (THP on) still gets the GiB by one PUD.
            let res = match m2.first_nonzero() {
                Some(off) => Err(format!("byte {off:#x} not zero")),
                None => match walk(tk, m2.addr()) {
                    Ok((l, _)) if l == TK_WALK_PUD => Ok(()),
                    Ok((l, _)) => Err(format!("level {l}")),
                    Err(e) => Err(e),
                },
            };
            r.check(
                &name("the same GiB touched by the parent: zero, one PUD"),
                res,
            );
        }
        Err(e) => {
            r.skip(
                &name("VM_DONTDUMP and the 4 KiB fault"),
                format!("a second GiB: {}", errno_name(&e)),
            );
        }
    }
}

/// A GiB that cannot be made, on node `nid` with every free aligned GiB
/// taken, touched by a 4 KiB fault (THP disabled in a child): SIGBUS at
/// once, counted in `gigantic_fault_failed`, never a fault retried without
/// end. The file maps one GiB more than the node has free; its GiBs are
/// made one by one (PUD faults, each in a child) until one fails, and the
/// 4 KiB touch is of that GiB. Everything goes back when the file closes.
fn no_gib_left(r: &mut Report, nid: u32) {
    let name = format!(
        "node {nid}: with no GiB left, a 4 KiB fault (THP disabled) of a GiB that cannot be made is SIGBUS at once"
    );
    let Some(free_kb) = vma::node_free_kb(nid) else {
        r.fail(&name, "no meminfo for the node");
        return;
    };
    let gibs = (free_kb >> 20) as usize + 1;
    let res = Tierkit::gigantic_on(nid)
        .map_err(|e| format!("open: {}", errno_name(&e)))
        .and_then(|tk| {
            let m = Mapping::new(gibs * GIB, libc::MAP_SHARED, tk.fd(), 0)
                .map_err(|e| format!("mmap {gibs} GiB: {}", errno_name(&e)))?;
            // SAFETY (each): GiB `k` of `m`, a live mapping of ours.
            let Some(k) = (0..gibs).find(|&k| unsafe {
                vma::make_gigantic(m.as_ptr().add(k * GIB), GIB).is_err()
            }) else {
                return Err(format!(
                    "all {gibs} GiBs were made, with {free_kb} kB free before"
                ));
            };
            let before = fault_failed();
            let p = m.as_ptr().wrapping_add(k * GIB + 3 * PAGE_SIZE);
            let t0 = std::time::Instant::now();
            let exit = vma::fork_run_within(CHILD_LIMIT, || {
                if sys::disable_thp().is_err() {
                    return 2;
                }
                // SAFETY: our mapping; the SIGBUS expected ends this child.
                unsafe { std::ptr::write_volatile(p, 1) };
                0
            });
            let ms = t0.elapsed().as_millis();
            match (exit, before, fault_failed()) {
                (Ok(Exit::Signal(libc::SIGBUS)), Some(b), Some(a)) if a > b => Ok(format!(
                    "{k} GiBs made, GiB {k} SIGBUS in {ms} ms, gigantic_fault_failed {b} -> {a}"
                )),
                (Ok(e), b, a) => Err(format!(
                    "{k} GiBs made; the 4 KiB touch of GiB {k}: {e}, gigantic_fault_failed {b:?} -> {a:?}; expected SIGBUS and a count"
                )),
                (Err(e), _, _) => Err(format!(
                    "{k} GiBs made; the 4 KiB touch of GiB {k}: {e} (a fault retried without end?)"
                )),
            }
        });
    r.check_note(&name, res);
}

pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    if !Tierkit::present() {
        r.fail(
            "/dev/tierkit exists",
            "no /dev/tierkit: is tierkit.ko loaded?",
        );
        return r.finish();
    }
    let topo = match Topology::read() {
        Ok(t) => t,
        Err(e) => {
            r.fail("read the topology", e.to_string());
            return r.finish();
        }
    };
    r.note(format!("topology: {}", topo.describe()));
    // A CXL node onlined `online_movable` has only ZONE_MOVABLE memory:
    // gigantic ranges may come from there only with the opt-in
    // (tk-test-block-offline checks the refusal without it).
    let _movable = match MovableGigantic::enable() {
        Ok(m) => Some(m),
        Err(e) => {
            r.fail("enable movable_gigantic", e.to_string());
            None
        }
    };
    let mut pfn_reused = Vec::new();
    let mut semantics_done = false;
    let cxl = crate::topology::cxl::cxl_nodes();
    for &nid in &topo.memory {
        if nid >= 64 {
            continue;
        }
        // The node's boot-time GiB (debug numa-full reserves one on node
        // 0) is handed back for this node's rounds: earlier tests can leave
        // unmovable pages in every other aligned GiB of a small DRAM node.
        let _boot = crate::abi::first_use::BootPool::release(nid);
        // On emulated CXL memory QEMU serves each access of a clear, a
        // fill and a scan on its own: a GiB costs minutes. One round there
        // proves the GiB is made on the node, zero, by one PUD; that a
        // range holding a pattern comes back zero only by tierkit's clear
        // is proven by round 2 on the other nodes, and on CXL memory by
        // the KUnit `tierkit_clear` matrices (pattern, clear, every byte
        // checked on 8 MiB ranges of CPU-less nodes).
        if cxl.contains(&nid) {
            round(&mut r, nid, "round 1", false);
            r.note(format!(
                "node {nid}: emulated CXL memory, one round (no pattern, no round 2)"
            ));
            continue;
        }
        let Some(first) = round(&mut r, nid, "round 1", true) else {
            continue;
        };
        // The file is closed and the range freed; the next clear most
        // likely gets the same GiB back, still holding the pattern.
        if let Some(second) = round(&mut r, nid, "round 2", false) {
            let same = first.first_pfn != 0 && first.first_pfn == second.first_pfn;
            r.note(format!(
                "node {nid}: round 2 {} the range round 1 filled with {PATTERN:#x}",
                if same { "got back" } else { "did not get back" }
            ));
            pfn_reused.push(serde_json::json!({"nid": nid, "same_range": same}));
        }
        if !semantics_done {
            semantics_done = true;
            semantics(&mut r, nid);
        }
    }
    super::gigantic_cow::refault_race(&mut r, &topo);
    // A memory-only node: taking all its memory leaves the kernel's own
    // allocations alone; with the least free memory, it has the fewest
    // GiBs to take. Not an emulated CXL node, where QEMU serves each
    // access of a clear on its own (a GiB takes minutes there).
    match topo
        .memory_only()
        .into_iter()
        .filter(|&n| n < 64 && !cxl.contains(&n))
        .min_by_key(|&n| vma::node_free_kb(n).unwrap_or(u64::MAX))
    {
        Some(nid) => no_gib_left(&mut r, nid),
        None => {
            r.skip(
                "with no GiB left, a 4 KiB fault of a GiB that cannot be made is SIGBUS at once",
                "no memory-only node that is not emulated CXL memory (the numa topology has one)",
            );
        }
    }
    r.set("pattern_ranges", serde_json::Value::Array(pfn_reused));
    r.finish()
}
