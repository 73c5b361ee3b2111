//! `/dev/tierkit`: open, the ioctls of `tierkit_core::uapi`, and `mmap`.

use crate::linux::sys::{self, Mapping};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use tierkit_core::uapi::{
    TkBulk, TkClearBench, TkGigantic, TkMappedFile, TkPageRefs, TkPolicy, TkRebalance, TkSnapshot,
    TkSocketWeights, TkTaskNext, TkWalk, TIERKIT_MAX_NODES, TK_GIGANTIC_BYTES, TK_GIGANTIC_F_QUERY,
    TK_IOC_BULK, TK_IOC_CLEAR_BENCH, TK_IOC_MAPPED_FILE, TK_IOC_PAGE_REFS, TK_IOC_REBALANCE,
    TK_IOC_SET_GIGANTIC, TK_IOC_SET_POLICY, TK_IOC_SNAPSHOT, TK_IOC_SOCKET_WEIGHTS,
    TK_IOC_TASK_NEXT, TK_IOC_WALK, TK_PLACE_LOCAL, TK_TASK_NEXT_MAX, TK_THREADS_AUTO, TK_WALK_PUD,
};

pub use tierkit_core::uapi::{TK_MODE_INTERLEAVE, TK_MODE_WEIGHTED_INTERLEAVE};

/// The misc device.
pub const DEV_PATH: &str = "/dev/tierkit";

/// An open `/dev/tierkit` file: each open file has its own policy and task
/// state.
#[derive(Debug)]
pub struct Tierkit {
    file: File,
}

/// A zeroed [`TkPolicy`] with `mode` and `nodemask`.
pub fn policy(mode: u32, nodemask: u64) -> TkPolicy {
    TkPolicy {
        mode,
        flags: 0,
        nodemask,
        weights: [0; TIERKIT_MAX_NODES],
    }
}

impl Tierkit {
    pub fn open() -> io::Result<Tierkit> {
        Ok(Tierkit {
            file: OpenOptions::new().read(true).write(true).open(DEV_PATH)?,
        })
    }

    /// An open `/dev/tierkit` file from its fd (e.g. another process's,
    /// taken with `TK_IOC_MAPPED_FILE`).
    pub fn from_fd(fd: std::os::fd::OwnedFd) -> Tierkit {
        Tierkit {
            file: File::from(fd),
        }
    }

    /// Whether `/dev/tierkit` exists.
    pub fn present() -> bool {
        std::path::Path::new(DEV_PATH).exists()
    }

    pub fn fd(&self) -> i32 {
        self.file.as_raw_fd()
    }

    /// `TK_IOC_SET_POLICY` with a full argument; returns what the module
    /// wrote back (effective mask, weights).
    pub fn set_policy_raw(&self, mut p: TkPolicy) -> io::Result<TkPolicy> {
        // SAFETY: TK_IOC_SET_POLICY is _IOWR(.., TkPolicy).
        unsafe { sys::ioctl(self.fd(), TK_IOC_SET_POLICY, &mut p)? };
        Ok(p)
    }

    /// `TK_IOC_SET_POLICY` with `mode` and `nodemask`.
    pub fn set_policy(&self, mode: u32, nodemask: u64) -> io::Result<TkPolicy> {
        self.set_policy_raw(policy(mode, nodemask))
    }

    /// `TK_IOC_TASK_NEXT`: `count` (1..=256) steps of the task path.
    pub fn task_next(&self, count: usize) -> io::Result<Vec<u8>> {
        let mut a = TkTaskNext {
            count: count as u32,
            _pad: 0,
            nodes: [0; TK_TASK_NEXT_MAX],
        };
        // SAFETY: TK_IOC_TASK_NEXT is _IOWR(.., TkTaskNext).
        unsafe { sys::ioctl(self.fd(), TK_IOC_TASK_NEXT, &mut a)? };
        Ok(a.nodes[..count.min(TK_TASK_NEXT_MAX)].to_vec())
    }

    /// `TK_IOC_BULK` for `nr_pages` pages.
    pub fn bulk(&self, nr_pages: u64) -> io::Result<TkBulk> {
        let mut a = TkBulk {
            nr_pages,
            per_node: [0; TIERKIT_MAX_NODES],
            il_prev: 0,
            il_weight: 0,
        };
        // SAFETY: TK_IOC_BULK is _IOWR(.., TkBulk).
        unsafe { sys::ioctl(self.fd(), TK_IOC_BULK, &mut a)? };
        Ok(a)
    }

    /// `TK_IOC_SOCKET_WEIGHTS` with `a` (op, flags, socket, table); returns
    /// what the module wrote back.
    pub fn socket_weights(&self, mut a: TkSocketWeights) -> io::Result<TkSocketWeights> {
        // SAFETY: TK_IOC_SOCKET_WEIGHTS is _IOWR(.., TkSocketWeights).
        unsafe { sys::ioctl(self.fd(), TK_IOC_SOCKET_WEIGHTS, &mut a)? };
        Ok(a)
    }

    /// `TK_IOC_CLEAR_BENCH` (gigantic clearing benchmark, module/src/clear).
    pub fn clear_bench(&self, mut a: TkClearBench) -> io::Result<TkClearBench> {
        // SAFETY: TK_IOC_CLEAR_BENCH is _IOWR(.., TkClearBench).
        unsafe { sys::ioctl(self.fd(), TK_IOC_CLEAR_BENCH, &mut a)? };
        Ok(a)
    }

    /// `TK_IOC_REBALANCE` with `a` (flags, nodemask, rate, budget); returns
    /// the counters the module wrote back.
    pub fn rebalance(&self, mut a: TkRebalance) -> io::Result<TkRebalance> {
        // SAFETY: TK_IOC_REBALANCE is _IOWR(.., TkRebalance).
        unsafe { sys::ioctl(self.fd(), TK_IOC_REBALANCE, &mut a)? };
        Ok(a)
    }

    /// `TK_IOC_MAPPED_FILE`: the tierkit file process `pid` maps at `addr`
    /// (the same open file as that mapping's), and the argument as the
    /// module filled it (the vma's bounds, the file's id).
    pub fn mapped_file(&self, pid: i32, addr: u64) -> io::Result<(Tierkit, TkMappedFile)> {
        let mut a = TkMappedFile {
            pid,
            addr,
            ..Default::default()
        };
        // SAFETY: TK_IOC_MAPPED_FILE is _IOWR(.., TkMappedFile).
        let fd = unsafe { sys::ioctl(self.fd(), TK_IOC_MAPPED_FILE, &mut a)? };
        // SAFETY: the call returned a new descriptor, ours to close.
        let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        Ok((Tierkit::from_fd(fd), a))
    }

    /// `TK_IOC_SET_GIGANTIC` (gigantic mode for later mmaps, or a query of
    /// the `last_*` fields with `TK_GIGANTIC_F_QUERY`).
    pub fn set_gigantic(&self, mut a: TkGigantic) -> io::Result<TkGigantic> {
        // SAFETY: TK_IOC_SET_GIGANTIC is _IOWR(.., TkGigantic).
        unsafe { sys::ioctl(self.fd(), TK_IOC_SET_GIGANTIC, &mut a)? };
        Ok(a)
    }

    /// `TK_IOC_SNAPSHOT` into this (new) file: a copy-on-write snapshot
    /// of the caller's tierkit mappings at `addr..addr + len`, for a
    /// forked child to map at the same file offsets.
    pub fn snapshot(&self, addr: usize, len: usize) -> io::Result<()> {
        let mut a = TkSnapshot {
            addr: addr as u64,
            len: len as u64,
        };
        // SAFETY: TK_IOC_SNAPSHOT is _IOWR(.., TkSnapshot).
        unsafe { sys::ioctl(self.fd(), TK_IOC_SNAPSHOT, &mut a)? };
        Ok(())
    }

    /// `TK_IOC_SET_GIGANTIC` with `TK_GIGANTIC_F_QUERY`: the `last_*`
    /// fields describe the file's last gigantic clear (or, for a GiB taken
    /// from the pre-cleared pool, `last_workers` 0).
    pub fn gigantic_query(&self) -> io::Result<TkGigantic> {
        self.set_gigantic(TkGigantic {
            flags: TK_GIGANTIC_F_QUERY,
            ..Default::default()
        })
    }

    /// A file in gigantic mode on node `nid` alone (`TK_MODE_INTERLEAVE`
    /// over `{nid}`, workers `TK_THREADS_AUTO`, local placement).
    pub fn gigantic_on(nid: u32) -> io::Result<Tierkit> {
        let tk = Tierkit::open()?;
        tk.set_policy(TK_MODE_INTERLEAVE, 1u64 << nid)?;
        tk.set_gigantic(TkGigantic {
            threads: TK_THREADS_AUTO,
            placement: TK_PLACE_LOCAL,
            ..Default::default()
        })?;
        Ok(tk)
    }

    /// `TK_IOC_WALK` at every 4 KiB page of the gigantic mapping `m`: each
    /// must be mapped by a PUD leaf, the pfns contiguous from a GiB-aligned
    /// first pfn, every page on `nid`. Returns the first pfn and a note.
    /// (`/proc/self/pagemap` cannot show this: reading it splits, i.e.
    /// zaps, the PUD; `move_pages(2)` finds no struct page behind a
    /// special PUD.)
    pub fn check_pud(&self, m: &Mapping, nid: u32) -> Result<(u64, String), String> {
        let pages = (TK_GIGANTIC_BYTES as usize / sys::PAGE_SIZE) as u64;
        let w0 = self
            .walk(m.addr())
            .map_err(|e| format!("TK_IOC_WALK: {}", crate::linux::errno::errno_name(&e)))?;
        if w0.level != TK_WALK_PUD {
            return Err(format!(
                "page 0: level {} is not a PUD leaf ({TK_WALK_PUD})",
                w0.level
            ));
        }
        let first = w0.pfn;
        if !first.is_multiple_of(pages) {
            return Err(format!("first pfn {first:#x} is not 1 GiB aligned"));
        }
        for i in 0..m.nr_pages() {
            let w = self.walk(m.addr() + i * sys::PAGE_SIZE).map_err(|e| {
                format!(
                    "TK_IOC_WALK page {i}: {}",
                    crate::linux::errno::errno_name(&e)
                )
            })?;
            if w.level != TK_WALK_PUD {
                return Err(format!("page {i}: level {} is not a PUD leaf", w.level));
            }
            if w.pfn != first + i as u64 {
                return Err(format!(
                    "page {i} has pfn {:#x}, expected {:#x}",
                    w.pfn,
                    first + i as u64
                ));
            }
            if w.nid != nid as i32 {
                return Err(format!("page {i} on node {}, expected {nid}", w.nid));
            }
        }
        Ok((
            first,
            format!(
                "{} pages, one PUD, pfn {first:#x}.., node {nid}",
                m.nr_pages()
            ),
        ))
    }

    /// `TK_IOC_WALK`: what maps `addr` in this process's page tables
    /// (level `TK_WALK_*`, and for a PUD or PMD leaf the pfn and node of
    /// the 4 KiB page at `addr`). Needs CAP_SYS_ADMIN.
    pub fn walk(&self, addr: usize) -> io::Result<TkWalk> {
        let mut a = TkWalk {
            addr: addr as u64,
            ..Default::default()
        };
        // SAFETY: TK_IOC_WALK is _IOWR(.., TkWalk).
        unsafe { sys::ioctl(self.fd(), TK_IOC_WALK, &mut a)? };
        Ok(a)
    }

    /// `TK_IOC_PAGE_REFS`: the references, mapcount, order and node of the
    /// folio of `pfn` (a snapshot). Needs CAP_SYS_ADMIN.
    pub fn page_refs(&self, pfn: u64) -> io::Result<TkPageRefs> {
        let mut a = TkPageRefs {
            pfn,
            ..Default::default()
        };
        // SAFETY: TK_IOC_PAGE_REFS is _IOWR(.., TkPageRefs).
        unsafe { sys::ioctl(self.fd(), TK_IOC_PAGE_REFS, &mut a)? };
        Ok(a)
    }

    /// `mmap(NULL, nr_pages * 4096, RW, MAP_SHARED, fd, offset_pages * 4096)`:
    /// page `i` gets ilx `offset_pages + i`.
    pub fn map(&self, nr_pages: usize, offset_pages: u64) -> io::Result<Mapping> {
        self.map_flags(nr_pages, offset_pages, libc::MAP_SHARED)
    }

    /// Like [`Tierkit::map`] with explicit `mmap` flags (to check that
    /// `MAP_PRIVATE` is refused).
    pub fn map_flags(&self, nr_pages: usize, offset_pages: u64, flags: i32) -> io::Result<Mapping> {
        Mapping::new(
            nr_pages * sys::PAGE_SIZE,
            flags,
            self.fd(),
            offset_pages << sys::PAGE_SHIFT,
        )
    }
}

/// tierkit's per-node page counters (Documentation/ABI/testing/debugfs-tierkit).
pub const STATS_PATH: &str = "/sys/kernel/debug/tierkit/stats";

/// tierkit's opt-in for gigantic ranges in ZONE_MOVABLE (as the kernel's
/// `vm.movable_gigantic_pages`).
pub const MOVABLE_GIGANTIC_PATH: &str = "/sys/kernel/debug/tierkit/movable_gigantic";

/// `movable_gigantic` set to 1 while alive, restored on drop. Tests and
/// demos that clear a GiB on every memory node need it where a node's
/// memory is all ZONE_MOVABLE (a CXL node onlined `online_movable`).
pub struct MovableGigantic {
    old: Option<String>,
}

impl MovableGigantic {
    /// Sets the opt-in; `Err` if the file cannot be written (no tierkit,
    /// or one without the file).
    pub fn enable() -> std::io::Result<Self> {
        crate::linux::kernel::ensure_debugfs();
        let old = std::fs::read_to_string(MOVABLE_GIGANTIC_PATH).ok();
        std::fs::write(MOVABLE_GIGANTIC_PATH, "1")?;
        Ok(Self { old })
    }
}

impl Drop for MovableGigantic {
    fn drop(&mut self) {
        let old = self.old.as_deref().map_or("0", str::trim);
        let _ = std::fs::write(MOVABLE_GIGANTIC_PATH, old);
    }
}

/// One line of [`STATS_PATH`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeStats {
    pub nid: u32,
    /// 4 KiB pages allocated on the node since load (cumulative).
    pub allocated: u64,
    /// Pages currently owned by open `/dev/tierkit` files.
    pub held: u64,
    /// 1 GiB ranges currently held on the node (the 4th column, `None`
    /// when the module's stats file has only three).
    pub gigantic: Option<u64>,
    /// Pre-cleared 1 GiB ranges ready in the node's pool (the 5th column,
    /// `None` when the module's stats file has no pool column).
    pub pool: Option<u64>,
}

/// Parses the stats file: a header line `node allocated held [gigantic
/// [pool]]`, then one `NID ALLOCATED HELD [GIGANTIC [POOL]]` line per node.
pub fn parse_stats(s: &str) -> anyhow::Result<Vec<NodeStats>> {
    let mut out = Vec::new();
    for l in s.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if l.starts_with("node") {
            continue;
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        anyhow::ensure!(f.len() >= 3, "bad stats line {l:?}");
        out.push(NodeStats {
            nid: f[0].parse()?,
            allocated: f[1].parse()?,
            held: f[2].parse()?,
            gigantic: f.get(3).map(|g| g.parse()).transpose()?,
            pool: f.get(4).map(|g| g.parse()).transpose()?,
        });
    }
    Ok(out)
}

/// Reads [`STATS_PATH`]; `None` if it cannot be read.
pub fn read_stats() -> Option<Vec<NodeStats>> {
    crate::linux::kernel::ensure_debugfs();
    parse_stats(&std::fs::read_to_string(STATS_PATH).ok()?).ok()
}

/// `(allocated, held)` of `nid` in `stats`, zeros if absent.
pub fn stats_of(stats: &[NodeStats], nid: u32) -> (u64, u64) {
    stats
        .iter()
        .find(|s| s.nid == nid)
        .map_or((0, 0), |s| (s.allocated, s.held))
}

/// The 1 GiB ranges held on `nid` in `stats` (0 if absent or the column
/// is missing).
pub fn gigantic_of(stats: &[NodeStats], nid: u32) -> u64 {
    stats
        .iter()
        .find(|s| s.nid == nid)
        .and_then(|s| s.gigantic)
        .unwrap_or(0)
}

/// The ready pool ranges of `nid` in `stats`: `None` if the node has no
/// line or the stats file has no pool column.
pub fn pool_of(stats: &[NodeStats], nid: u32) -> Option<u64> {
    stats.iter().find(|s| s.nid == nid).and_then(|s| s.pool)
}

/// A zeroed [`TkClearBench`] for node `nid`.
pub fn clear_bench_arg(nid: i32, threads: u32, placement: u32, nr_gigantic: u32) -> TkClearBench {
    TkClearBench {
        nid,
        threads,
        placement,
        nr_gigantic,
        chunk_kib: 0,
        workers: 0,
        cpu_node: 0,
        _pad: 0,
        elapsed_ns: 0,
        bytes: 0,
        mbps: 0,
        variant: [0; 16],
    }
}

/// The NUL-terminated `variant` of a [`TkClearBench`] as text.
pub fn variant_str(v: &[u8; 16]) -> String {
    let end = v.iter().position(|&b| b == 0).unwrap_or(v.len());
    String::from_utf8_lossy(&v[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats() {
        let s = parse_stats("node allocated held\n0 1536 1024\n1 512 0\n").unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(stats_of(&s, 0), (1536, 1024));
        assert_eq!(stats_of(&s, 1), (512, 0));
        assert_eq!(stats_of(&s, 7), (0, 0));
        assert!(parse_stats("0 1\n").is_err());
        assert_eq!(s[0].gigantic, None);
        let g = parse_stats("node allocated held gigantic\n0 1536 1024 2\n1 512 0 0\n").unwrap();
        assert_eq!(stats_of(&g, 0), (1536, 1024));
        assert_eq!(g[0].gigantic, Some(2));
        assert_eq!(gigantic_of(&g, 0), 2);
        assert_eq!(gigantic_of(&g, 1), 0);
        assert_eq!(gigantic_of(&s, 0), 0);
        assert!(parse_stats("0 1 2 x\n").is_err());
        assert_eq!(pool_of(&g, 0), None);
        let p = parse_stats("node allocated held gigantic pool\n0 1536 1024 2 1\n1 512 0 0 0\n")
            .unwrap();
        assert_eq!(p[0].gigantic, Some(2));
        assert_eq!(p[0].pool, Some(1));
        assert_eq!(pool_of(&p, 0), Some(1));
        assert_eq!(pool_of(&p, 1), Some(0));
        assert_eq!(pool_of(&p, 7), None);
        assert!(parse_stats("0 1 2 3 x\n").is_err());
    }

    #[test]
    fn variant() {
        let mut v = [0u8; 16];
        v[..4].copy_from_slice(b"erms");
        assert_eq!(variant_str(&v), "erms");
        assert_eq!(variant_str(&[b'x'; 16]), "x".repeat(16));
    }

    #[test]
    fn ioctl_numbers_are_iowr_b9() {
        // dir=3 (read|write), type 0xB9, sizes from the structs.
        for (req, nr, size) in [
            (TK_IOC_SET_POLICY, 1, std::mem::size_of::<TkPolicy>()),
            (TK_IOC_BULK, 2, std::mem::size_of::<TkBulk>()),
            (TK_IOC_TASK_NEXT, 3, std::mem::size_of::<TkTaskNext>()),
        ] {
            assert_eq!(req >> 30, 3);
            assert_eq!((req >> 8) & 0xff, 0xB9);
            assert_eq!(req & 0xff, nr);
            assert_eq!(((req >> 16) & 0x3fff) as usize, size);
        }
        assert_eq!(std::mem::size_of::<TkPolicy>(), 8 + 8 + 64);
        assert_eq!(std::mem::size_of::<TkTaskNext>(), 8 + 256);
        assert_eq!(std::mem::size_of::<TkBulk>(), 8 + 64 * 8 + 8);
    }

    #[test]
    fn open_without_device_fails_cleanly() {
        if !Tierkit::present() {
            assert!(Tierkit::open().is_err());
        }
    }
}
