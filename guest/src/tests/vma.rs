//! The logic of `tk-test-vma`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-vma.rs` (its `--help`).

use crate::abi::tk::{self, Tierkit, TK_MODE_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::sys::{self, PAGE_SIZE};
use crate::linux::vma::{self, check_pattern, fill_pattern, Exit};
use crate::topology::node::Topology;
use crate::{linux::errno::errno_name, linux::errno::expect_errno, topology::cxl};
use std::process::ExitCode;
use tierkit_core::uapi::{TkGigantic, TK_GIGANTIC_BYTES, TK_PLACE_LOCAL, TK_WALK_PUD};

const BIN: &str = "tk-test-vma";
const PAGES: usize = 64;
const LEN: usize = PAGES * PAGE_SIZE;
const GIB: usize = TK_GIGANTIC_BYTES as usize;

/// A 4 KiB-mode mapping of `/dev/tierkit`, raw so that it can be split,
/// moved and protected; unmapped (whatever is left of it) by the tests.
struct Map {
    tk: Option<Tierkit>,
    addr: *mut u8,
    len: usize,
}

impl Map {
    fn new(mask: u64, pages: usize) -> Result<Map, String> {
        let tk = Tierkit::open().map_err(|e| format!("open: {e}"))?;
        tk.set_policy(TK_MODE_INTERLEAVE, mask)
            .map_err(|e| format!("TK_IOC_SET_POLICY: {}", errno_name(&e)))?;
        let len = pages * PAGE_SIZE;
        let addr = vma::mmap_raw(
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            tk.fd(),
            0,
        )
        .map_err(|e| format!("mmap: {}", errno_name(&e)))?;
        Ok(Map {
            tk: Some(tk),
            addr,
            len,
        })
    }

    fn page(&self, i: usize) -> *mut u8 {
        self.addr.wrapping_add(i * PAGE_SIZE)
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: the mapping this value owns; nothing uses it after.
            let _ = unsafe { vma::munmap(self.addr, self.len) };
        }
    }
}

fn nodes(addr: *mut u8, n: usize) -> Vec<i32> {
    sys::query_page_nodes(addr, n).unwrap_or_default()
}

fn pfns(addr: *mut u8, n: usize) -> Vec<Option<u64>> {
    (0..n)
        .map(|i| {
            vma::pagemap_pfn(addr as usize + i * PAGE_SIZE)
                .ok()
                .flatten()
        })
        .collect()
}

/// Reads one byte of every page in `[addr, addr + n pages)` in a child:
/// how the child ended (SIGBUS, SIGSEGV, exit 0).
fn touch_in_child(addr: *mut u8, n: usize, write: bool) -> Exit {
    vma::fork_run(|| {
        for i in 0..n {
            let p = addr.wrapping_add(i * PAGE_SIZE);
            // SAFETY: probing the mapping; a fault ends only this child.
            unsafe {
                if write {
                    let v = p.read_volatile();
                    p.write_volatile(v);
                } else {
                    p.read_volatile();
                }
            }
        }
        0
    })
    .unwrap_or(Exit::Code(-1))
}

fn held_total() -> Option<u64> {
    tk::read_stats().map(|s| s.iter().map(|n| n.held).sum())
}

pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let Some(topo) = crate::abi::ready::tierkit_ready(&mut r) else {
        return r.finish();
    };
    // Pages on every memory node, interleaved.
    let mask = topo.memory_mask();

    private_and_zero(&mut r, mask);
    dontneed(&mut r, mask);
    refused_madvise(&mut r, mask);
    dontfork(&mut r, mask);
    fork_shares(&mut r, mask);
    partial_munmap(&mut r, mask);
    mremap(&mut r, mask);
    mprotect(&mut r, mask);
    dontdump_and_proc_mem(&mut r, mask);
    gup(&mut r, mask);
    gigantic(&mut r, &topo);
    r.finish()
}

fn private_and_zero(r: &mut Report, mask: u64) {
    r.check(
        "MAP_PRIVATE is EINVAL",
        (|| -> Result<(), String> {
            let tk = Tierkit::open().map_err(|e| e.to_string())?;
            tk.set_policy(TK_MODE_INTERLEAVE, mask)
                .map_err(|e| errno_name(&e))?;
            expect_errno(tk.map_flags(PAGES, 0, libc::MAP_PRIVATE), libc::EINVAL)
        })(),
    );
    // Dirty 4096 pages, give them back, and map as many again: every page
    // must read zero before its first write.
    r.check(
        "every page of a new mapping reads zero before its first write",
        (|| -> Result<(), String> {
            let n = 4096;
            {
                let m = Map::new(mask, n)?;
                // SAFETY: our writable mapping.
                unsafe { std::ptr::write_bytes(m.addr, 0xA5, m.len) };
            }
            let m = Map::new(mask, n)?;
            // SAFETY: readable for its length.
            let s = unsafe { std::slice::from_raw_parts(m.addr, m.len) };
            match s.iter().position(|&b| b != 0) {
                None => Ok(()),
                Some(off) => Err(format!("byte {off:#x} reads {:#x}", s[off])),
            }
        })(),
    );
}

/// MADV_DONTNEED, then touch: the same page is mapped again (it was SIGBUS
/// once).
fn dontneed(r: &mut Report, mask: u64) {
    for write in [false, true] {
        let how = if write { "write" } else { "read" };
        let name = format!(
            "MADV_DONTNEED returns 0 and the next {how} maps the same page (contents, node, pfn)"
        );
        let res = (|| -> Result<String, String> {
            let m = Map::new(mask, PAGES)?;
            // SAFETY: our writable mapping.
            unsafe { fill_pattern(m.addr, 0, PAGES, 1) };
            let n0 = nodes(m.addr, PAGES);
            let p0 = pfns(m.addr, PAGES);
            let (a, n) = (8, 16);
            // SAFETY: our mapping; the test checks what the contents are
            // afterwards.
            unsafe { sys::madvise(m.page(a) as *mut _, n * PAGE_SIZE, libc::MADV_DONTNEED) }
                .map_err(|e| format!("madvise: {}", errno_name(&e)))?;
            let gone = pfns(m.addr, PAGES)[a..a + n]
                .iter()
                .filter(|p| p.is_none())
                .count();
            // First in a child: a SIGBUS must not take the test down.
            match touch_in_child(m.page(a), n, write) {
                Exit::Code(0) => {}
                e => {
                    // Leave the parent's pages untouched.
                    return Err(format!(
                        "a child touching the pages after MADV_DONTNEED: {e}"
                    ));
                }
            }
            // Now in the parent.
            for i in a..a + n {
                // SAFETY: the child showed these fault in.
                unsafe {
                    let p = m.page(i);
                    if write {
                        let v = p.read_volatile();
                        p.write_volatile(v);
                    } else {
                        p.read_volatile();
                    }
                }
            }
            // SAFETY: readable.
            unsafe { check_pattern(m.addr, 0, PAGES, 1) }?;
            let n1 = nodes(m.addr, PAGES);
            let p1 = pfns(m.addr, PAGES);
            if n1 != n0 {
                return Err(format!("nodes changed: {n0:?} -> {n1:?}"));
            }
            if p1 != p0 {
                let i = (0..PAGES).find(|&i| p1[i] != p0[i]).unwrap_or(0);
                return Err(format!("page {i}: pfn {:?} -> {:?}", p0[i], p1[i]));
            }
            if p0.iter().any(|p| p.is_none() || *p == Some(0)) {
                return Err("pagemap shows no pfns (not root?)".into());
            }
            Ok(format!("{gone} of {n} PTEs dropped by the advice"))
        })();
        r.check_note(&name, res);
    }
}

/// MADV_FREE, MADV_WIPEONFORK, MADV_REMOVE are refused and change nothing.
fn refused_madvise(r: &mut Report, mask: u64) {
    for (advice, aname, errno) in [
        (libc::MADV_FREE, "MADV_FREE", libc::EINVAL),
        (libc::MADV_WIPEONFORK, "MADV_WIPEONFORK", libc::EINVAL),
        (libc::MADV_REMOVE, "MADV_REMOVE", libc::ENODEV),
    ] {
        let en = errno_name(&std::io::Error::from_raw_os_error(errno));
        let name = format!("{aname} is {en} and the mapping is unchanged");
        let res = (|| -> Result<(), String> {
            let m = Map::new(mask, PAGES)?;
            // SAFETY: our writable mapping.
            unsafe { fill_pattern(m.addr, 0, PAGES, 2) };
            let p0 = pfns(m.addr, PAGES);
            // SAFETY: the advice is expected to be refused; the test checks
            // the contents afterwards.
            let res = unsafe { sys::madvise(m.addr as *mut _, m.len, advice) };
            expect_errno(res, errno)?;
            let p1 = pfns(m.addr, PAGES);
            if p1 != p0 {
                return Err("pfns or presence changed".into());
            }
            // SAFETY: readable.
            unsafe { check_pattern(m.addr, 0, PAGES, 2) }?;
            if vma::smaps_vmflags(m.addr as usize).is_some_and(|f| f.iter().any(|x| x == "wf")) {
                return Err("VmFlags has wf".into());
            }
            Ok(())
        })();
        r.check(&name, res);
    }
}

fn dontfork(r: &mut Report, mask: u64) {
    let res = (|| -> Result<(), String> {
        let m = Map::new(mask, PAGES)?;
        // SAFETY: our writable mapping.
        unsafe { fill_pattern(m.addr, 0, PAGES, 3) };
        // SAFETY: MADV_DONTFORK keeps the contents.
        unsafe { sys::madvise(m.addr as *mut _, m.len, libc::MADV_DONTFORK) }
            .map_err(|e| format!("madvise(MADV_DONTFORK): {}", errno_name(&e)))?;
        match touch_in_child(m.addr, 1, false) {
            Exit::Signal(libc::SIGSEGV) => {}
            e => return Err(format!("the child touching it: {e}, expected SIGSEGV")),
        }
        // SAFETY: readable in the parent.
        unsafe { check_pattern(m.addr, 0, PAGES, 3) }
    })();
    r.check(
        "MADV_DONTFORK is 0; a child gets SIGSEGV touching it, the parent keeps its data",
        res,
    );
}

fn fork_shares(r: &mut Report, mask: u64) {
    let res = (|| -> Result<(), String> {
        let m = Map::new(mask, PAGES)?;
        // SAFETY: our writable mapping.
        unsafe { fill_pattern(m.addr, 0, PAGES, 4) };
        let to_child = vma::Pipe::new().map_err(|e| e.to_string())?;
        let addr = m.addr;
        let mut child = vma::spawn_synced(|ready| {
            // SAFETY (whole child): the mapping is inherited, shared.
            unsafe {
                if check_pattern(addr, 0, PAGES, 4).is_err() {
                    return 2;
                }
                fill_pattern(addr, 1, 1, 40);
            }
            ready();
            if !matches!(to_child.wait(), Ok(true)) {
                return 3;
            }
            // SAFETY: as above.
            if unsafe { check_pattern(addr, 2, 1, 41) }.is_err() {
                return 4;
            }
            0
        })
        .map_err(|e| e.to_string())?;
        // SAFETY: readable.
        let seen = unsafe { check_pattern(addr, 1, 1, 40) };
        // SAFETY: writable.
        unsafe { fill_pattern(addr, 2, 1, 41) };
        to_child.signal().map_err(|e| e.to_string())?;
        let e = child.wait().map_err(|e| e.to_string())?;
        seen.map_err(|e| format!("the parent does not see the child's write: {e}"))?;
        match e {
            Exit::Code(0) => Ok(()),
            Exit::Code(2) => Err("the child does not see the parent's data".into()),
            Exit::Code(4) => Err("the child does not see the parent's later write".into()),
            e => Err(format!("child: {e}")),
        }
    })();
    r.check(
        "fork shares the pages (child's write seen by the parent and vice versa)",
        res,
    );
}

fn partial_munmap(r: &mut Report, mask: u64) {
    let res = (|| -> Result<String, String> {
        let h0 = held_total().ok_or("no stats")?;
        let mut m = Map::new(mask, PAGES)?;
        // SAFETY: our writable mapping.
        unsafe { fill_pattern(m.addr, 0, PAGES, 5) };
        let h1 = held_total().ok_or("no stats")?;
        if h1 != h0 + PAGES as u64 {
            return Err(format!("held {h0} -> {h1} after mapping {PAGES} pages"));
        }
        // SAFETY: the middle is never used again.
        unsafe { vma::munmap(m.page(16), 16 * PAGE_SIZE) }
            .map_err(|e| format!("munmap of the middle: {}", errno_name(&e)))?;
        // SAFETY: the rest stays mapped.
        unsafe {
            check_pattern(m.addr, 0, 16, 5)?;
            check_pattern(m.addr, 32, 32, 5)?;
        }
        match touch_in_child(m.page(20), 1, false) {
            Exit::Signal(libc::SIGSEGV) => {}
            e => return Err(format!("touching the hole: {e}, expected SIGSEGV")),
        }
        let h2 = held_total().ok_or("no stats")?;
        if h2 != h1 {
            return Err(format!("held {h1} -> {h2} after the partial munmap"));
        }
        // Close the file with both pieces still mapped.
        drop(m.tk.take());
        let h3 = held_total().ok_or("no stats")?;
        // SAFETY: the mapping outlives the fd.
        unsafe { check_pattern(m.addr, 32, 32, 5)? };
        // SAFETY: the first piece is not used again.
        unsafe { vma::munmap(m.addr, 16 * PAGE_SIZE) }.map_err(|e| e.to_string())?;
        let h4 = held_total().ok_or("no stats")?;
        // SAFETY: the last piece is not used again.
        unsafe { vma::munmap(m.page(32), 32 * PAGE_SIZE) }.map_err(|e| e.to_string())?;
        m.len = 0;
        let h5 = held_total().ok_or("no stats")?;
        if h3 != h1 || h4 != h1 {
            return Err(format!(
                "held {h1} while mapped, {h3} after close, {h4} with one piece left: the file's pages went early"
            ));
        }
        if h5 != h0 {
            return Err(format!("held {h5} after everything is gone, baseline {h0}"));
        }
        Ok(format!("held {h0} -> {h1} -> {h5}"))
    })();
    r.check_note(
        "munmap of the middle keeps the rest mapped and intact, pages held until close and last unmap",
        res,
    );
}

fn mremap(r: &mut Report, mask: u64) {
    let res = (|| -> Result<String, String> {
        let mut m = Map::new(mask, PAGES)?;
        // SAFETY: our writable mapping.
        unsafe { fill_pattern(m.addr, 0, PAGES, 6) };
        let n0 = nodes(m.addr, PAGES);
        let p0 = pfns(m.addr, PAGES);
        // A place to move to.
        let target = vma::mmap_raw(
            LEN,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
        .map_err(|e| e.to_string())?;
        // SAFETY: `target` is ours and replaced; the old range is not used
        // again.
        let moved = unsafe {
            vma::mremap(
                m.addr,
                LEN,
                LEN,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                target,
            )
        };
        let moved = match moved {
            Ok(p) => p,
            Err(e) => {
                // SAFETY: ours.
                let _ = unsafe { vma::munmap(target, LEN) };
                return Err(format!("move: {}", errno_name(&e)));
            }
        };
        m.addr = moved;
        // SAFETY: the moved mapping.
        unsafe { check_pattern(m.addr, 0, PAGES, 6) }
            .map_err(|e| format!("after the move: {e}"))?;
        if nodes(m.addr, PAGES) != n0 {
            return Err("nodes changed by the move".into());
        }
        if pfns(m.addr, PAGES) != p0 {
            return Err("pfns changed by the move".into());
        }
        // Shrink to half.
        // SAFETY: the second half is not used again.
        let s = unsafe { vma::mremap(m.addr, LEN, LEN / 2, 0, std::ptr::null_mut()) }
            .map_err(|e| format!("shrink: {}", errno_name(&e)))?;
        if s != m.addr {
            return Err("shrink moved the mapping".into());
        }
        m.len = LEN / 2;
        // SAFETY: the first half stays.
        unsafe { check_pattern(m.addr, 0, PAGES / 2, 6) }
            .map_err(|e| format!("after the shrink: {e}"))?;
        // Grow back: refused.
        // SAFETY: on failure nothing changes; on success (a bug) the
        // result is the mapping.
        let g = unsafe {
            vma::mremap(
                m.addr,
                LEN / 2,
                LEN,
                libc::MREMAP_MAYMOVE,
                std::ptr::null_mut(),
            )
        };
        if let Ok(p) = g {
            m.addr = p;
            m.len = LEN;
        }
        expect_errno(g, libc::EFAULT).map_err(|e| format!("grow: {e}"))?;
        // SAFETY: unchanged.
        unsafe { check_pattern(m.addr, 0, PAGES / 2, 6) }?;
        Ok("moved, shrunk; grow EFAULT".into())
    })();
    r.check_note(
        "mremap: a move keeps contents, nodes and pfns; shrinking works; growing is EFAULT",
        res,
    );
}

fn mprotect(r: &mut Report, mask: u64) {
    let res = (|| -> Result<(), String> {
        let m = Map::new(mask, PAGES)?;
        // SAFETY: our writable mapping.
        unsafe { fill_pattern(m.addr, 0, PAGES, 7) };
        // SAFETY: only read until it is writable again.
        unsafe { vma::mprotect(m.addr, m.len, libc::PROT_READ) }
            .map_err(|e| format!("mprotect(PROT_READ): {}", errno_name(&e)))?;
        match touch_in_child(m.addr, 1, true) {
            Exit::Signal(libc::SIGSEGV) => {}
            e => return Err(format!("a write after PROT_READ: {e}, expected SIGSEGV")),
        }
        // SAFETY: readable.
        unsafe { check_pattern(m.addr, 0, PAGES, 7) }?;
        // SAFETY: ours.
        unsafe { vma::mprotect(m.addr, m.len, libc::PROT_READ | libc::PROT_WRITE) }
            .map_err(|e| format!("mprotect(RW): {}", errno_name(&e)))?;
        match touch_in_child(m.addr, PAGES, true) {
            Exit::Code(0) => {}
            e => return Err(format!("a write after RW again (child): {e}")),
        }
        // SAFETY: writable again.
        unsafe { fill_pattern(m.addr, 3, 1, 70) };
        // SAFETY: readable.
        unsafe {
            check_pattern(m.addr, 0, 3, 7)?;
            check_pattern(m.addr, 3, 1, 70)?;
            check_pattern(m.addr, 4, PAGES - 4, 7)
        }
    })();
    r.check(
        "mprotect(PROT_READ): a write is SIGSEGV; back to RW it works, contents intact",
        res,
    );
}

fn dontdump_and_proc_mem(r: &mut Report, mask: u64) {
    let m = match Map::new(mask, PAGES) {
        Ok(m) => m,
        Err(e) => {
            r.fail("VM_DONTDUMP", e);
            return;
        }
    };
    r.check_note(
        "the mapping has VM_DONTDUMP (dd in smaps VmFlags)",
        match vma::smaps_vmflags(m.addr as usize) {
            Some(f) if f.iter().any(|x| x == "dd") => Ok(f.join(" ")),
            Some(f) => Err(format!("VmFlags: {}", f.join(" "))),
            None => Err("no smaps entry".into()),
        },
    );
    let res = (|| -> Result<(), String> {
        // SAFETY: our writable mapping.
        unsafe { fill_pattern(m.addr, 0, PAGES, 8) };
        // Across a page boundary.
        let off = 3 * PAGE_SIZE - 100;
        let mut buf = vec![0u8; 2 * PAGE_SIZE];
        vma::proc_mem_read(m.addr as usize + off, &mut buf)
            .map_err(|e| format!("pread /proc/self/mem: {}", errno_name(&e)))?;
        // SAFETY: readable.
        let direct = unsafe { std::slice::from_raw_parts(m.addr.add(off), buf.len()) };
        if buf != direct {
            return Err("pread of /proc/self/mem differs from the mapping".into());
        }
        let new: Vec<u8> = (0..2 * PAGE_SIZE).map(|i| (i * 7 + 3) as u8).collect();
        vma::proc_mem_write(m.addr as usize + off, &new)
            .map_err(|e| format!("pwrite /proc/self/mem: {}", errno_name(&e)))?;
        // SAFETY: readable.
        let direct = unsafe { std::slice::from_raw_parts(m.addr.add(off), new.len()) };
        if direct != new.as_slice() {
            return Err("pwrite through /proc/self/mem not seen in the mapping".into());
        }
        Ok(())
    })();
    r.check("/proc/self/mem reads and writes the mapping", res);
}

fn gup(r: &mut Report, mask: u64) {
    let m = match Map::new(mask, PAGES) {
        Ok(m) => m,
        Err(e) => {
            r.fail("get_user_pages", e);
            return;
        }
    };
    // SAFETY: our writable mapping.
    unsafe { fill_pattern(m.addr, 0, PAGES, 9) };
    let res = (|| -> Result<(), String> {
        let got = vma::vmsplice_read(m.page(1) as usize, 8 * PAGE_SIZE)
            .map_err(|e| format!("vmsplice: {}", errno_name(&e)))?;
        // SAFETY: readable.
        let direct = unsafe { std::slice::from_raw_parts(m.page(1), 8 * PAGE_SIZE) };
        if got != direct {
            return Err(format!(
                "vmsplice gave {} bytes that differ from the mapping",
                got.len()
            ));
        }
        Ok(())
    })();
    r.check(
        "get_user_pages: vmsplice(2) of the mapping into a pipe reads its contents",
        res,
    );

    match vma::process_vm_read_self(m.page(2) as usize, 4 * PAGE_SIZE) {
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
            r.note("process_vm_readv: ENOSYS (no CONFIG_CROSS_MEMORY_ATTACH in this kernel); vmsplice and /proc/self/mem cover get_user_pages");
        }
        res => {
            r.check(
                "get_user_pages: process_vm_readv(2) reads the mapping",
                res.map_err(|e| errno_name(&e)).and_then(|v| {
                    // SAFETY: readable.
                    let direct = unsafe { std::slice::from_raw_parts(m.page(2), 4 * PAGE_SIZE) };
                    if v == direct {
                        Ok(())
                    } else {
                        Err("differs from the mapping".into())
                    }
                }),
            );
        }
    }

    // read(2) from a pipe into the mapping, write(2) from it into a pipe.
    let res = (|| -> Result<(), String> {
        let p = vma::Pipe::new().map_err(|e| e.to_string())?;
        let src: Vec<u8> = (0..4 * PAGE_SIZE).map(|i| (i * 13 + 1) as u8).collect();
        // SAFETY: a local buffer.
        unsafe { vma::write_all_fd(p.wr, src.as_ptr(), src.len()) }.map_err(|e| e.to_string())?;
        let dst = m.page(10);
        // SAFETY: 4 pages of our writable mapping, no reference to them.
        unsafe { vma::read_exact_fd(p.rd, dst, src.len()) }
            .map_err(|e| format!("read into the mapping: {}", errno_name(&e)))?;
        // SAFETY: readable.
        if unsafe { std::slice::from_raw_parts(dst, src.len()) } != src.as_slice() {
            return Err("read(2) into the mapping: wrong contents".into());
        }
        // SAFETY: 4 pages of our readable mapping.
        unsafe { vma::write_all_fd(p.wr, m.page(20), 4 * PAGE_SIZE) }
            .map_err(|e| format!("write from the mapping: {}", errno_name(&e)))?;
        let mut back = vec![0u8; 4 * PAGE_SIZE];
        // SAFETY: a local buffer.
        unsafe { vma::read_exact_fd(p.rd, back.as_mut_ptr(), back.len()) }
            .map_err(|e| e.to_string())?;
        // SAFETY: readable.
        if back != unsafe { std::slice::from_raw_parts(m.page(20), 4 * PAGE_SIZE) } {
            return Err("write(2) from the mapping: wrong contents".into());
        }
        Ok(())
    })();
    r.check(
        "read(2) from a pipe into the mapping and write(2) from it work",
        res,
    );
}

/// MADV_DONTNEED on a few pages inside a gigantic mapping; VM_DONTDUMP.
fn gigantic(r: &mut Report, topo: &Topology) {
    let name =
        "gigantic mapping: MADV_DONTNEED then touch maps the same pages (contents, node, pfn)";
    // The DRAM node first; a CXL node costs ~45 s per GiB cleared under
    // QEMU (Documentation/dev-tools/topologies.md, Slow memory).
    let mut candidates: Vec<u32> = topo.dram_node().into_iter().collect();
    candidates.extend(
        topo.memory_only()
            .into_iter()
            .filter(|&n| cxl::CxlBus::default().region_of_node(n).is_none()),
    );
    let mut got = None;
    let mut why = Vec::new();
    for nid in candidates {
        let res = (|| -> std::io::Result<(Tierkit, *mut u8)> {
            let tk = Tierkit::open()?;
            tk.set_policy(TK_MODE_INTERLEAVE, 1 << nid)?;
            // SAFETY: online CPUs from sysconf.
            let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } as u32;
            tk.set_gigantic(TkGigantic {
                threads: cpus,
                placement: TK_PLACE_LOCAL,
                ..Default::default()
            })?;
            let a = vma::mmap_raw(
                GIB,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                tk.fd(),
                0,
            )?;
            Ok((tk, a))
        })();
        match res {
            // SAFETY: `a` is the GiB just mapped.
            Ok((tk, a)) => match unsafe { vma::make_gigantic(a, GIB) } {
                Ok(_) => {
                    got = Some((nid, (tk, a)));
                    break;
                }
                Err(e) => {
                    why.push(format!("node {nid}: {e}"));
                    // SAFETY: ours, not used again.
                    let _ = unsafe { vma::munmap(a, GIB) };
                }
            },
            Err(e) => why.push(format!("node {nid}: {}", errno_name(&e))),
        }
    }
    let Some((nid, (tk, addr))) = got else {
        r.skip(name, format!("no gigantic mapping: {}", why.join(", ")));
        return;
    };
    let res = (|| -> Result<String, String> {
        let pages = [0usize, 1, 131072, 131073, 262143];
        let at = |i: usize| addr.wrapping_add(i * PAGE_SIZE);
        for &i in &pages {
            // SAFETY: inside our writable mapping.
            unsafe { fill_pattern(at(i), 0, 1, 10 + i as u64) };
        }
        // A gigantic GiB is one special PUD: move_pages(2) finds no page
        // behind it and /proc/self/pagemap zaps it, so node and pfn come
        // from TK_IOC_WALK (level, pfn, node).
        let walk = |i: usize| -> Result<(u32, u64, i32), String> {
            tk.walk(at(i) as usize)
                .map(|w| (w.level, w.pfn, w.nid))
                .map_err(|e| format!("TK_IOC_WALK page {i}: {}", errno_name(&e)))
        };
        let before: Vec<(u32, u64, i32)> =
            pages.iter().map(|&i| walk(i)).collect::<Result<_, _>>()?;
        for &i in &pages {
            // SAFETY: ours; contents checked afterwards.
            unsafe { sys::madvise(at(i) as *mut _, PAGE_SIZE, libc::MADV_DONTNEED) }
                .map_err(|e| format!("madvise page {i}: {}", errno_name(&e)))?;
        }
        for &i in &pages {
            match touch_in_child(at(i), 1, false) {
                Exit::Code(0) => {}
                e => {
                    return Err(format!(
                        "a child touching page {i} after MADV_DONTNEED: {e}"
                    ))
                }
            }
        }
        for (k, &i) in pages.iter().enumerate() {
            // SAFETY: the child showed it faults in.
            unsafe { check_pattern(at(i), 0, 1, 10 + i as u64) }
                .map_err(|e| format!("page {i}: {e}"))?;
            let now = walk(i)?;
            if now != before[k] {
                return Err(format!(
                    "page {i}: level/pfn/node {:?} -> {now:?}",
                    before[k]
                ));
            }
            if now.0 != TK_WALK_PUD || now.2 != nid as i32 {
                return Err(format!(
                    "page {i}: level {} on node {}, expected a PUD on {nid}",
                    now.0, now.2
                ));
            }
        }
        Ok(format!("node {nid}, pages {pages:?}"))
    })();
    r.check_note(name, res);
    r.check_note(
        "a gigantic mapping has VM_DONTDUMP (dd in smaps VmFlags)",
        match vma::smaps_vmflags(addr as usize) {
            Some(f) if f.iter().any(|x| x == "dd") => Ok(f.join(" ")),
            Some(f) => Err(format!("VmFlags: {}", f.join(" "))),
            None => Err("no smaps entry".into()),
        },
    );
    // SAFETY: ours, not used again.
    let _ = unsafe { vma::munmap(addr, GIB) };
    drop(tk);
}
