//! Faults (page_fault2-style) and pages/s delivered.

use super::*;

/// A thread memory policy for `set_mempolicy(2)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskPolicy {
    pub mode: i32,
    pub mask: u64,
}

impl TaskPolicy {
    pub const DEFAULT: TaskPolicy = TaskPolicy {
        mode: sys::MPOL_DEFAULT,
        mask: 0,
    };

    pub fn apply(&self) -> Result<()> {
        sys::set_mempolicy(self.mode, self.mask)
            .with_context(|| format!("set_mempolicy({}, {:#x})", self.mode, self.mask))
    }
}

/// A shared-memory file of `len` bytes, every page present (written by the
/// caller's thread, under its policy).
pub(super) fn filled_memfd(len: usize) -> Result<std::fs::File> {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    // SAFETY: memfd_create with a NUL-terminated name; the fd is ours.
    let fd = unsafe { libc::memfd_create(c"tk-page-fault2".as_ptr(), 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("memfd_create");
    }
    // SAFETY: a fresh fd nobody else owns.
    let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
    let page = vec![0x11u8; PAGE_SIZE];
    for _ in 0..len / PAGE_SIZE {
        f.write_all(&page).context("filling the file")?;
    }
    Ok(f)
}

/// One page_fault2 iteration: map `len` bytes of `fd` private, write a byte
/// per page, optionally query the nodes, unmap. Returns the pages.
pub(super) fn fault_iteration(
    fd: i32,
    len: usize,
    query: bool,
) -> Result<(usize, Vec<(i32, usize)>)> {
    let m = Mapping::new(len, libc::MAP_PRIVATE, fd, 0).context("mmap MAP_PRIVATE")?;
    m.touch_pages();
    let nodes = if query {
        crate::topology::interleave::per_node_counts(&m.page_nodes().unwrap_or_default())
    } else {
        Vec::new()
    };
    Ok((m.nr_pages(), nodes))
}

/// page_fault2 with `threads` threads, each under `policy`, for
/// `duration` seconds: faults/s, and where thread 0's first copy went.
pub fn page_fault2(
    cpus: &[u32],
    threads: usize,
    len: usize,
    duration: f64,
    policy: TaskPolicy,
) -> Result<(f64, Vec<(i32, usize)>)> {
    use std::os::fd::AsRawFd;
    let files: Vec<std::fs::File> = (0..threads.max(1))
        .map(|_| filled_memfd(len))
        .collect::<Result<_>>()?;
    // Untimed first iteration per thread (and the placement check).
    let (_, warm) = run_threads(cpus, threads, |t| -> Result<Vec<(i32, usize)>> {
        policy.apply()?;
        let r = fault_iteration(files[t].as_raw_fd(), len, t == 0);
        TaskPolicy::DEFAULT.apply()?;
        Ok(r?.1)
    });
    let mut nodes = Vec::new();
    for (t, r) in warm.into_iter().enumerate() {
        let n = r?;
        if t == 0 {
            nodes = n;
        }
    }
    let (ns, res) = run_threads(cpus, threads, |t| -> Result<u64> {
        let fd = files[t].as_raw_fd();
        policy.apply()?;
        let deadline = monotonic_ns() + (duration * 1e9) as u64;
        let mut faults = 0u64;
        loop {
            faults += fault_iteration(fd, len, false)?.0 as u64;
            if monotonic_ns() >= deadline {
                break;
            }
        }
        TaskPolicy::DEFAULT.apply()?;
        Ok(faults)
    });
    let mut faults = 0u64;
    for r in res {
        faults += r?;
    }
    Ok((faults as f64 * 1e9 / ns as f64, nodes))
}

/// How pages reach userspace, for the pages/s comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// `mmap` of `/dev/tierkit` (weighted interleave, tierkit's weights):
    /// every page allocated, zeroed and mapped during the call.
    TierkitMmap,
    /// Anonymous private mapping, `mbind(MPOL_WEIGHTED_INTERLEAVE)`, one
    /// fault per page.
    KernelFault,
    /// Anonymous private mapping with `MAP_POPULATE` under the thread's
    /// `MPOL_WEIGHTED_INTERLEAVE`: the kernel's batched path.
    KernelPopulate,
}

impl Delivery {
    pub const ALL: [Delivery; 3] = [
        Delivery::TierkitMmap,
        Delivery::KernelFault,
        Delivery::KernelPopulate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Delivery::TierkitMmap => "tierkit-mmap",
            Delivery::KernelFault => "page-by-page",
            Delivery::KernelPopulate => "map-populate",
        }
    }
}

/// One timed delivery of `pages` pages over `mask`: from `mmap` until one
/// byte of every page is written (`munmap` and freeing not timed).
/// Returns `(ns, pages per node)`.
pub fn deliver(
    d: Delivery,
    pages: usize,
    mask: u64,
    query: bool,
) -> Result<(u64, Vec<(i32, usize)>)> {
    let len = pages * PAGE_SIZE;
    let q = |m: &Mapping| -> Vec<(i32, usize)> {
        if query {
            crate::topology::interleave::per_node_counts(&m.page_nodes().unwrap_or_default())
        } else {
            Vec::new()
        }
    };
    match d {
        Delivery::TierkitMmap => {
            let t = Tierkit::open().context("open /dev/tierkit")?;
            t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, mask)
                .context("TK_IOC_SET_POLICY")?;
            let t0 = monotonic_ns();
            let m = t.map(pages, 0).context("mmap /dev/tierkit")?;
            m.touch_pages();
            let ns = monotonic_ns() - t0;
            Ok((ns, q(&m)))
        }
        Delivery::KernelFault => {
            let t0 = monotonic_ns();
            let m = Mapping::anon(len).context("mmap")?;
            m.no_huge().context("MADV_NOHUGEPAGE")?;
            m.mbind(sys::MPOL_WEIGHTED_INTERLEAVE, mask, 0)
                .context("mbind")?;
            m.touch_pages();
            let ns = monotonic_ns() - t0;
            Ok((ns, q(&m)))
        }
        Delivery::KernelPopulate => {
            let pol = TaskPolicy {
                mode: sys::MPOL_WEIGHTED_INTERLEAVE,
                mask,
            };
            pol.apply()?;
            let t0 = monotonic_ns();
            let m = Mapping::new(
                len,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            );
            let r = m.map(|m| {
                m.touch_pages();
                (monotonic_ns() - t0, m)
            });
            TaskPolicy::DEFAULT.apply()?;
            let (ns, m) = r.context("mmap MAP_POPULATE")?;
            Ok((ns, q(&m)))
        }
    }
}

/// `0:768 1:256`, or `?` when unknown.
pub fn fmt_nodes(p: &[(i32, usize)]) -> String {
    if p.is_empty() {
        "?".into()
    } else {
        fmt_pages(p)
    }
}
