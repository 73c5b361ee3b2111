//! The logic of `tk-test-mm`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-mm.rs` (its `--help`).

use crate::abi::tk::{self, MovableGigantic, Tierkit, TK_MODE_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::sys::{self, Mapping, PAGE_SIZE};
use crate::linux::vma::{self, check_pattern, fill_pattern, Exit};
use crate::{abi::pool, linux::errno::errno_name, linux::memblock};
use std::fs;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tierkit_core::uapi::{TK_GIGANTIC_BYTES, TK_WALK_PUD};

const BIN: &str = "tk-test-mm";
const GIB: usize = TK_GIGANTIC_BYTES as usize;
const PAGES: usize = 2048;

/// A sysctl or sysfs value, put back on drop.
struct Knob {
    path: String,
    old: String,
}

impl Knob {
    fn set(path: &str, v: &str) -> Option<Knob> {
        let old = fs::read_to_string(path).ok()?;
        fs::write(path, v).ok()?;
        Some(Knob {
            path: path.into(),
            old: old.trim().to_string(),
        })
    }
}

impl Drop for Knob {
    fn drop(&mut self) {
        let _ = fs::write(&self.path, &self.old);
    }
}

fn vmstat(key: &str) -> Option<u64> {
    let s = fs::read_to_string("/proc/vmstat").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The subjects and what they looked like at the start.
struct Subjects {
    small_tk: Tierkit,
    small: Mapping,
    small_nid: u32,
    pfns: Vec<Option<u64>>,
    gig: Option<(Tierkit, Mapping, u64)>,
    held: Option<Vec<tk::NodeStats>>,
}

impl Subjects {
    fn new(r: &mut Report, small_nid: u32, gig_nid: u32) -> Option<Subjects> {
        let small_tk = Tierkit::open().ok()?;
        small_tk
            .set_policy(TK_MODE_INTERLEAVE, 1 << small_nid)
            .ok()?;
        let small = match small_tk.map(PAGES, 0) {
            Ok(m) => m,
            Err(e) => {
                r.fail("the 4 KiB mapping", errno_name(&e));
                return None;
            }
        };
        // SAFETY: our mapping.
        unsafe { fill_pattern(small.as_ptr(), 0, PAGES, 0x3131) };
        let pfns = memblock::pagemap_pfns(small.addr(), PAGES).ok()?;
        let gig = (|| {
            let tk = Tierkit::gigantic_on(gig_nid).ok()?;
            let m = Mapping::new(GIB, libc::MAP_SHARED, tk.fd(), 0).ok()?;
            // SAFETY: our mapping.
            unsafe { vma::make_gigantic(m.as_ptr(), GIB).ok()? };
            // SAFETY: made: maps the PUD here.
            unsafe { fill_pattern(m.as_ptr(), 0, 16, 0x4242) };
            let pfn = tk.walk(m.addr()).ok()?.pfn;
            Some((tk, m, pfn))
        })();
        if gig.is_none() {
            r.note(format!("no gigantic GiB on node {gig_nid} (no free aligned GiB): the checks use the 4 KiB mapping only"));
        }
        Some(Subjects {
            small_tk,
            small,
            small_nid,
            pfns,
            gig,
            held: tk::read_stats(),
        })
    }

    /// Everything where it was.
    fn unchanged(&self) -> Result<String, String> {
        self.unchanged_since(&self.held)
    }

    /// Everything where it was, with tierkit's stats as in `held`.
    fn unchanged_since(&self, held: &Option<Vec<tk::NodeStats>>) -> Result<String, String> {
        let now = memblock::pagemap_pfns(self.small.addr(), PAGES).map_err(|e| e.to_string())?;
        if let Some(i) = (0..PAGES).find(|&i| now[i] != self.pfns[i]) {
            return Err(format!(
                "4 KiB page {i}: pfn {:?} -> {:?}",
                self.pfns[i], now[i]
            ));
        }
        let nodes = self.small.page_nodes().map_err(|e| e.to_string())?;
        if let Some(i) = nodes.iter().position(|&n| n != self.small_nid as i32) {
            return Err(format!("4 KiB page {i} on node {}", nodes[i]));
        }
        // SAFETY: our mapping.
        unsafe { check_pattern(self.small.as_ptr(), 0, PAGES, 0x3131) }?;
        if let Some((tk, m, pfn)) = &self.gig {
            // SAFETY: our mapping.
            unsafe { check_pattern(m.as_ptr(), 0, 16, 0x4242) }?;
            let w = tk.walk(m.addr()).map_err(|e| errno_name(&e))?;
            if w.level != TK_WALK_PUD || w.pfn != *pfn {
                return Err(format!(
                    "the GiB: level {} pfn {:#x}, was a PUD at {pfn:#x}",
                    w.level, w.pfn
                ));
            }
        }
        let now = tk::read_stats();
        if &now != held {
            return Err(format!("tierkit's stats changed: {held:?} -> {now:?}"));
        }
        let _ = &self.small_tk;
        Ok(format!(
            "{PAGES} pages on node {} and {} unchanged",
            self.small_nid,
            if self.gig.is_some() {
                "the GiB"
            } else {
                "no GiB"
            }
        ))
    }

    /// Touches every page of both mappings for `d` from a child.
    /// A child touches the mappings for `d`. With `control`, it first
    /// places 8 MiB of its own anonymous memory on that node and writes it
    /// on every round: pages the NUMA balancing scanner marks (not on the
    /// node the task runs on, default policy). The child's own, since
    /// anonymous pages the parent placed would be copied on the child's
    /// first write to the task's local node, which the scanner skips.
    fn touch_for(&self, d: Duration, control: Option<u32>) -> Result<(), String> {
        let (sp, gp) = (
            self.small.as_ptr() as usize,
            self.gig.as_ref().map(|g| g.1.as_ptr() as usize),
        );
        let e = vma::fork_run(|| {
            // The control pages go to the node by the mapping's own policy
            // (mbind), taken off again once they are in, never by a task
            // policy: under one, the kernel's own allocations during the
            // faults (a new slab page of a cache, which this CPU's
            // allocations from any task then share and keep alive, page
            // tables) land on that node too, and one left in a free
            // naturally aligned GiB of the memory-only node cost
            // tk-test-pool-cxl its only one (debug numa-full).
            let anon = match control {
                Some(nid) => match Mapping::anon(8 << 20) {
                    Ok(a) if a.mbind(sys::MPOL_BIND, 1 << nid, 0).is_ok() => {
                        a.touch_pages();
                        if a.mbind(sys::MPOL_DEFAULT, 0, 0).is_err() {
                            return 3;
                        }
                        Some(a)
                    }
                    _ => return 2,
                },
                None => None,
            };
            let ap = anon.as_ref().map(|a| (a.as_ptr() as usize, a.len()));
            let t0 = Instant::now();
            while t0.elapsed() < d {
                for i in 0..PAGES {
                    // SAFETY: our mappings, readable.
                    unsafe { std::ptr::read_volatile((sp + i * PAGE_SIZE) as *const u8) };
                }
                if let Some(g) = gp {
                    for i in 0..64 {
                        // SAFETY: as above.
                        unsafe { std::ptr::read_volatile((g + i * PAGE_SIZE) as *const u8) };
                    }
                }
                if let Some((a, len)) = ap {
                    for off in (0..len).step_by(PAGE_SIZE) {
                        // SAFETY: as above, writable.
                        unsafe { std::ptr::write_volatile((a + off) as *mut u8, 1) };
                    }
                }
            }
            0
        })
        .map_err(|e| e.to_string())?;
        match e {
            Exit::Code(0) => Ok(()),
            Exit::Code(2 | 3) => Err(format!(
                "the toucher: {e} (could not place its control pages on node {control:?})"
            )),
            e => Err(format!("the toucher: {e}")),
        }
    }
}

fn numa_balancing(r: &mut Report, s: &Subjects) {
    const WHAT: &str = "NUMA balancing on: the scanner skips tierkit's mappings, nothing moves";
    let Some(_on) = Knob::set("/proc/sys/kernel/numa_balancing", "1") else {
        r.skip(WHAT, "no kernel.numa_balancing (CONFIG_NUMA_BALANCING)");
        return;
    };
    let dbg = "/sys/kernel/debug/sched/numa_balancing";
    // A small scan size makes the period short for a small task
    // (task_scan_min(): its floor is 1 s divided by RSS / scan size).
    let _k: Vec<Option<Knob>> = [
        ("scan_delay_ms", "0"),
        ("scan_period_min_ms", "100"),
        ("scan_period_max_ms", "200"),
        ("scan_size_mb", "1"),
    ]
    .iter()
    .map(|(f, v)| Knob::set(&format!("{dbg}/{f}"), v))
    .collect();
    // The control: the toucher's anonymous pages on the memory-only node,
    // which the scanner does mark (it skips pages already on the node a
    // single-threaded task runs on).
    let before = vmstat("numa_pte_updates");
    let res = s
        .touch_for(Duration::from_secs(5), Some(s.small_nid))
        .and_then(|()| s.unchanged());
    let after = vmstat("numa_pte_updates");
    match (res, before, after) {
        (Err(e), _, _) => {
            r.fail(WHAT, e);
        }
        (Ok(n), Some(b), Some(a)) if a > b => {
            r.ok_note(
                WHAT,
                format!("{n}; numa_pte_updates {b} -> {a} (the scanner ran)"),
            );
        }
        // The control pages are the scanner's to mark: if it never ran,
        // the check proved nothing.
        (Ok(n), b, a) => {
            r.fail(
                WHAT,
                format!(
                    "{n}, but the scanner did not mark the control pages in 5 s (numa_pte_updates {b:?} -> {a:?})"
                ),
            );
        }
    }
}

fn thp(r: &mut Report, s: &Subjects) {
    let p = s.small.as_ptr().cast();
    let len = s.small.len();
    // SAFETY: advice on our own mapping that keeps its contents.
    let huge = unsafe { libc::madvise(p, len, libc::MADV_HUGEPAGE) };
    let huge_e = std::io::Error::last_os_error();
    // SAFETY: as above.
    let collapse = unsafe {
        libc::madvise(p, len, 25 /* MADV_COLLAPSE */)
    };
    let collapse_e = std::io::Error::last_os_error().raw_os_error();
    r.check_note(
        "MADV_HUGEPAGE is accepted and MADV_COLLAPSE is EINVAL on a tierkit mapping",
        match (huge, collapse, collapse_e) {
            (0, -1, Some(libc::EINVAL)) => s.unchanged(),
            _ => Err(format!(
                "MADV_HUGEPAGE {huge} ({huge_e}), MADV_COLLAPSE {collapse} ({collapse_e:?})"
            )),
        },
    );
    let kh = "/sys/kernel/mm/transparent_hugepage/khugepaged";
    let Some(_fast) = Knob::set(&format!("{kh}/scan_sleep_millisecs"), "10") else {
        r.skip("khugepaged scanning changes nothing", "no khugepaged knobs");
        return;
    };
    let _many = Knob::set(&format!("{kh}/pages_to_scan"), "65536");
    let _always = Knob::set("/sys/kernel/mm/transparent_hugepage/enabled", "always");
    vma::sleep_ms(2000);
    r.check_note(
        "khugepaged scanning fast for 2 s changes nothing",
        s.unchanged(),
    );
}

fn ksm(r: &mut Report, s: &Subjects) {
    const WHAT: &str =
        "KSM: MADV_MERGEABLE returns 0, ksmd merges none of tierkit's identical pages";
    let Some(_run) = Knob::set("/sys/kernel/mm/ksm/run", "1") else {
        r.skip(WHAT, "no /sys/kernel/mm/ksm (CONFIG_KSM)");
        return;
    };
    let _fast = Knob::set("/sys/kernel/mm/ksm/sleep_millisecs", "10");
    let _many = Knob::set("/sys/kernel/mm/ksm/pages_to_scan", "10000");
    // SAFETY: advice on our own mapping; its contents stay.
    let rc = unsafe { libc::madvise(s.small.as_ptr().cast(), s.small.len(), libc::MADV_MERGEABLE) };
    let e = std::io::Error::last_os_error();
    vma::sleep_ms(2000);
    let flags = vma::smaps_vmflags(s.small.addr()).unwrap_or_default();
    r.check_note(
        WHAT,
        if rc != 0 {
            Err(format!("MADV_MERGEABLE: {e}"))
        } else if flags.iter().any(|f| f == "mg") {
            Err(format!("the vma became mergeable: {}", flags.join(" ")))
        } else {
            s.unchanged()
        },
    );
}

fn userfaultfd(r: &mut Report, s: &Subjects) {
    const WHAT: &str = "userfaultfd: UFFDIO_REGISTER of a tierkit mapping is EINVAL";
    // SAFETY: plain syscall; O_CLOEXEC | UFFD_USER_MODE_ONLY (1).
    let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | 1) } as i32;
    if fd < 0 {
        r.skip(
            WHAT,
            format!(
                "userfaultfd(2): {} (CONFIG_USERFAULTFD)",
                std::io::Error::last_os_error()
            ),
        );
        return;
    }
    let mut api = [0xAAu64, 0, 0];
    // SAFETY: UFFDIO_API is _IOWR(0xAA, 0x3F, struct uffdio_api) (24 bytes).
    let a = unsafe { libc::ioctl(fd, 0xc018_aa3f, api.as_mut_ptr()) };
    let mut res = Vec::new();
    let mut targets = vec![("4 KiB", s.small.addr(), s.small.len())];
    if let Some((_, m, _)) = &s.gig {
        targets.push(("gigantic", m.addr(), GIB));
    }
    for (name, addr, len) in targets {
        // struct uffdio_register { start, len, mode (MISSING), ioctls }.
        let mut reg = [addr as u64, len as u64, 1, 0];
        // SAFETY: UFFDIO_REGISTER is _IOWR(0xAA, 0x00, struct uffdio_register) (32 bytes).
        let rc = unsafe { libc::ioctl(fd, 0xc020_aa00, reg.as_mut_ptr()) };
        res.push((name, rc, std::io::Error::last_os_error().raw_os_error()));
    }
    // SAFETY: our fd.
    unsafe { libc::close(fd) };
    r.check_note(
        WHAT,
        if a != 0 {
            Err(format!("UFFDIO_API: {}", std::io::Error::last_os_error()))
        } else if let Some(bad) = res
            .iter()
            .find(|(_, rc, e)| *rc != -1 || *e != Some(libc::EINVAL))
        {
            Err(format!("{}: {} ({:?})", bad.0, bad.1, bad.2))
        } else {
            s.unchanged()
        },
    );
}

fn compaction(r: &mut Report, s: &Subjects, pool_nid: u32) {
    const WHAT: &str = "compaction (vm.compact_memory, proactive) with a pool range held moves nothing of tierkit's";
    let target = if pool::present() {
        pool::Target::filled(pool_nid, 1).ok()
    } else {
        None
    };
    // The pool's range counts in the stats from here on.
    let held = tk::read_stats();
    if fs::write("/proc/sys/vm/compact_memory", "1").is_err() {
        r.skip(WHAT, "no vm.compact_memory (CONFIG_COMPACTION)");
        return;
    }
    {
        let _pro = Knob::set("/proc/sys/vm/compaction_proactiveness", "100");
        vma::sleep_ms(2000);
    }
    let ready = pool::state(pool_nid).ok();
    r.check_note(
        WHAT,
        match (&target, ready) {
            (Some(_), Some((_, 1))) | (None, _) => s
                .unchanged_since(&held)
                .map(|n| format!("{n}; pool (target, ready) {ready:?}")),
            (Some(_), other) => Err(format!("pool (target, ready) after compaction: {other:?}")),
        },
    );
    drop(target);
}

fn damon(r: &mut Report, s: &Subjects, other: u32) {
    const WHAT: &str =
        "DAMON: vaddr monitoring with a migrate_hot scheme leaves tierkit's pages where they are";
    let k = "/sys/kernel/mm/damon/admin/kdamonds";
    if fs::write(format!("{k}/nr_kdamonds"), "1").is_err() {
        r.skip(WHAT, "no DAMON sysfs (CONFIG_DAMON_SYSFS)");
        return;
    }
    // A distribution kernel may run DAMON_STAT, which starts its kdamond
    // exclusively at boot: every other start is EBUSY. Stop it for the
    // check; the knob puts it back.
    let _stat = match fs::read_to_string("/sys/module/damon_stat/parameters/enabled") {
        Ok(v) if v.trim() == "Y" => Knob::set("/sys/module/damon_stat/parameters/enabled", "N"),
        _ => None,
    };
    let c = format!("{k}/0/contexts");
    let res = (|| -> Result<String, String> {
        let w = |p: &str, v: &str| fs::write(p, v).map_err(|e| format!("{p} = {v}: {e}"));
        w(&format!("{c}/nr_contexts"), "1")?;
        w(&format!("{c}/0/operations"), "vaddr")?;
        w(&format!("{c}/0/targets/nr_targets"), "1")?;
        w(
            &format!("{c}/0/targets/0/pid_target"),
            &std::process::id().to_string(),
        )?;
        let sch = format!("{c}/0/schemes");
        let scheme = w(&format!("{sch}/nr_schemes"), "1")
            .and_then(|()| w(&format!("{sch}/0/action"), "migrate_hot"))
            .and_then(|()| w(&format!("{sch}/0/target_nid"), &other.to_string()));
        w(&format!("{k}/0/state"), "on")?;
        let t = s.touch_for(Duration::from_secs(3), None);
        let _ = w(&format!("{k}/0/state"), "off");
        t?;
        s.unchanged().map(|n| match scheme {
            Ok(()) => format!("{n}; migrate_hot to node {other}"),
            Err(e) => format!("{n}; monitoring only ({e})"),
        })
    })();
    let _ = fs::write(format!("{k}/nr_kdamonds"), "0");
    r.check_note(WHAT, res);
}

fn soft_offline(r: &mut Report, s: &Subjects) {
    const WHAT: &str = "MADV_SOFT_OFFLINE of a tierkit page is refused and the page stays";
    let p = s.small.as_ptr().wrapping_add(5 * PAGE_SIZE);
    // SAFETY: advice on one page of our own mapping; on success the kernel
    // would copy it first (contents kept).
    let rc = unsafe {
        libc::madvise(p.cast(), PAGE_SIZE, 101 /* MADV_SOFT_OFFLINE */)
    };
    let e = std::io::Error::last_os_error().raw_os_error();
    r.check_note(
        WHAT,
        match (rc, e) {
            (-1, Some(libc::EINVAL))
                if !std::path::Path::new("/sys/devices/system/memory/soft_offline_page")
                    .exists() =>
            {
                Err("EINVAL: no CONFIG_MEMORY_FAILURE".into())
            }
            (-1, Some(e)) if [libc::EIO, libc::EBUSY].contains(&e) => s
                .unchanged()
                .map(|n| format!("{}; {n}", errno_name(&std::io::Error::from_raw_os_error(e)))),
            _ => Err(format!("madvise: {rc} ({e:?})")),
        },
    );
}

/// `/proc/kpageflags`' `KPF_HWPOISON` bit of `pfn`.
fn hwpoisoned(pfn: u64) -> Result<bool, String> {
    use std::os::unix::fs::FileExt;
    let f = fs::File::open("/proc/kpageflags").map_err(|e| format!("/proc/kpageflags: {e}"))?;
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, pfn * 8)
        .map_err(|e| format!("/proc/kpageflags at pfn {pfn:#x}: {e}"))?;
    Ok(u64::from_ne_bytes(b) & (1 << 19) != 0)
}

/// `MADV_HWPOISON` of one page of a 4 KiB tierkit mapping (of its own, so
/// the subjects stay clean): the task is not killed, the page is flagged
/// poisoned, every other page keeps its data, the subjects do too, and
/// closing the mapping hands every page back to tierkit's counters (the
/// kernel keeps the poisoned page out of the buddy allocator itself). The
/// poisoned page is lost to the guest for the rest of the boot: this is the
/// last check, 4 KiB only (a poisoned GiB tail would cost later tests their
/// GiB), and on `nid`, a boot-memory node with CPUs, because a memory block
/// with a poisoned page can never be onlined again (`memory_block_online()`
/// is EHWPOISON) and later tests offline and online the memory-only and CXL
/// nodes' blocks.
fn hwpoison(r: &mut Report, s: &Subjects, nid: u32) {
    const WHAT: &str = "MADV_HWPOISON of a 4 KiB tierkit page: the task lives, the rest of the mapping keeps its data";
    const N: usize = 64;
    const VICTIM: usize = 7;
    if !std::path::Path::new("/sys/devices/system/memory/soft_offline_page").exists() {
        r.skip(WHAT, "no CONFIG_MEMORY_FAILURE");
        return;
    }
    let res = (|| -> Result<String, String> {
        let before = tk::read_stats().ok_or("no tierkit stats")?;
        let tk = Tierkit::open().map_err(|e| format!("open: {}", errno_name(&e)))?;
        tk.set_policy(TK_MODE_INTERLEAVE, 1 << nid)
            .map_err(|e| format!("policy: {}", errno_name(&e)))?;
        let m = tk
            .map(N, 0)
            .map_err(|e| format!("map: {}", errno_name(&e)))?;
        // SAFETY: our mapping.
        unsafe { fill_pattern(m.as_ptr(), 0, N, 0x5151) };
        let pfns = memblock::pagemap_pfns(m.addr(), N).map_err(|e| format!("pagemap: {e}"))?;
        let pfn = pfns[VICTIM].ok_or("no pfn for the page")?;
        let victim = m.as_ptr().wrapping_add(VICTIM * PAGE_SIZE);
        // In a child: a kill (SIGBUS, BUS_MCEERR_AR) is an outcome too.
        let adv = vma::fork_run_within(Duration::from_secs(60), || {
            // SAFETY: advice on one page of the inherited shared mapping.
            let rc = unsafe {
                libc::madvise(victim.cast(), PAGE_SIZE, 100 /* MADV_HWPOISON */)
            };
            if rc == 0 {
                0
            } else {
                std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(255)
                    & 0x7f
            }
        })
        .map_err(|e| format!("madvise child: {e}"))?;
        // memory_failure() finds a page off the LRU "unhandlable" and
        // ignores it: EBUSY, nobody killed (the ABI document's outcome).
        let advised = match adv {
            Exit::Code(libc::EBUSY) => "madvise EBUSY".to_string(),
            other => return Err(format!("the advising task: {other:?}, not exit EBUSY")),
        };
        if !hwpoisoned(pfn)? {
            return Err(format!(
                "{advised}, but pfn {pfn:#x} is not flagged HWPOISON"
            ));
        }
        // The other pages, read in this task.
        // SAFETY: our mapping; the poisoned page is not read here.
        unsafe {
            check_pattern(m.as_ptr(), 0, VICTIM, 0x5151)?;
            check_pattern(m.as_ptr(), VICTIM + 1, N - VICTIM - 1, 0x5151)?;
        }
        // The poisoned page itself: its data (poison that was only
        // injected), or SIGBUS if the kernel unmapped it.
        let base = m.as_ptr();
        let touch = vma::fork_run_within(Duration::from_secs(60), || {
            // SAFETY: our mapping.
            match unsafe { check_pattern(base, VICTIM, 1, 0x5151) } {
                Ok(()) => 0,
                Err(_) => 1,
            }
        })
        .map_err(|e| format!("reading child: {e}"))?;
        // Ignored means left mapped: its data reads back.
        let read = match touch {
            Exit::Code(0) => "the page still reads its data",
            other => return Err(format!("reading the poisoned page: {other:?}")),
        };
        drop(m);
        drop(tk);
        // The subjects' pages, and tierkit's counters as at the start but
        // for the N pages this mapping allocated: none held any more.
        let mut expect = before;
        expect
            .iter_mut()
            .find(|n| n.nid == nid)
            .ok_or("no stats of the node")?
            .allocated += N as u64;
        let still = s.unchanged_since(&Some(expect))?;
        Ok(format!(
            "{advised}; pfn {pfn:#x} flagged HWPOISON; {read}; the other {} pages intact; {still}; every page back after close",
            N - 1
        ))
    })();
    r.check_note(WHAT, res);
}

pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let Some(topo) = crate::abi::ready::tierkit_ready(&mut r) else {
        return r.finish();
    };
    let _movable = MovableGigantic::enable();
    let first = topo.memory.first().copied().unwrap_or(0);
    // The first node's boot-time GiB, if any, is handed back while this
    // test makes its GiBs there (`first_use::BootPool`).
    let _boot = crate::abi::first_use::BootPool::release(first);
    let last = topo.memory.last().copied().unwrap_or(0);
    let Some(s) = Subjects::new(&mut r, last, first) else {
        r.fail("the subjects", "could not map them");
        return r.finish();
    };
    numa_balancing(&mut r, &s);
    thp(&mut r, &s);
    ksm(&mut r, &s);
    userfaultfd(&mut r, &s);
    compaction(&mut r, &s, first);
    damon(&mut r, &s, first);
    soft_offline(&mut r, &s);
    // Last: it costs the guest a page for the rest of the boot.
    hwpoison(&mut r, &s, first);
    let _ = sys::PAGE_SIZE;
    r.finish()
}
