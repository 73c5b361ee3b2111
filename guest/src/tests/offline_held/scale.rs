//! The offline rows of `tk-test-close-scale`: how long an offline of a
//! ZONE_MOVABLE block takes against the number of mappings the device
//! has. The memory notifier looks at every registered mapping (and each of
//! its pages) once per offline, so the time must grow at most linearly
//! with them, never per mapping times mappings.

use super::{orphans, wait_orphans, DEADLINE};
use crate::abi::tk::{Tierkit, TK_MODE_INTERLEAVE};
use crate::linux::errno::errno_name;
use crate::linux::memblock::{block_of_pfn, block_size, pagemap_pfns, set_block_state, Outcome};
use crate::linux::sys::Mapping;
use std::time::Duration;

/// One count's offline times: the best of the rounds.
#[derive(Clone, Copy, Debug)]
pub struct OfflineRow {
    pub mappings: usize,
    /// An offline of the block holding one page a pipe keeps after its
    /// file let go: `EBUSY`, after the notifier looked at every mapping.
    pub refused: Duration,
    /// The same block's offline once the pipe let go: done.
    pub offline: Duration,
}

/// Rounds per count; each time is the best of them.
const ROUNDS: usize = 3;

/// A page of a fresh file on `cxl`, put in a pipe by `vmsplice()`, its
/// mapping and file gone: tierkit's orphan. Returns the pipe's fds and the
/// page's block.
fn orphan_on(cxl: u32, block_bytes: u64) -> Result<([i32; 2], u64), String> {
    let tk = Tierkit::open().map_err(|e| format!("open: {}", errno_name(&e)))?;
    tk.set_policy(TK_MODE_INTERLEAVE, 1u64 << cxl)
        .map_err(|e| format!("TK_IOC_SET_POLICY: {}", errno_name(&e)))?;
    let m = tk
        .map(1, 0)
        .map_err(|e| format!("mmap: {}", errno_name(&e)))?;
    // SAFETY: one writable page.
    unsafe { m.as_ptr().write(1) };
    let pfn = pagemap_pfns(m.addr(), 1)
        .map_err(|e| format!("pagemap: {e}"))?
        .first()
        .copied()
        .flatten()
        .ok_or("no pfn in pagemap (not root?)")?;
    let mut fds = [0i32; 2];
    // SAFETY: pipe(2) writes two fds.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    let iov = libc::iovec {
        iov_base: m.as_ptr().cast(),
        iov_len: m.len(),
    };
    // SAFETY: one iovec over the live mapping; the pipe takes a reference.
    let n = unsafe { libc::vmsplice(fds[1], &iov, 1, 0) };
    if n != m.len() as isize {
        close_pipe(fds);
        return Err(format!("vmsplice: {}", std::io::Error::last_os_error()));
    }
    Ok((fds, block_of_pfn(pfn, block_bytes)))
}

fn close_pipe(fds: [i32; 2]) {
    // SAFETY: our own pipe's fds.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
}

/// One round: the refused offline, then (pipe closed) the done one, and
/// the block online again. `(refused, offline)`.
fn round(cxl: u32, block_bytes: u64) -> Result<(Duration, Duration), String> {
    let base = orphans()?;
    let (fds, block) = orphan_on(cxl, block_bytes)?;
    let refused = set_block_state(block, "offline", DEADLINE).map_err(|e| e.to_string());
    close_pipe(fds);
    let refused = refused.and_then(|t| match t.outcome {
        Outcome::Failed(e) if e == libc::EBUSY => Ok(t.elapsed),
        o => Err(format!("memory{block} held: {}", o.describe())),
    })?;
    let left = wait_orphans(base, Duration::from_secs(5))?;
    if left != base {
        return Err(format!(
            "orphans {left} 5 s after the pipe closed, not {base}"
        ));
    }
    let t = set_block_state(block, "offline", DEADLINE).map_err(|e| e.to_string())?;
    if t.outcome != Outcome::Done {
        return Err(format!("memory{block} freed: {}", t.outcome.describe()));
    }
    let back = set_block_state(block, "online_movable", DEADLINE).map_err(|e| e.to_string())?;
    if back.outcome != Outcome::Done {
        return Err(format!(
            "memory{block} online again: {}",
            back.outcome.describe()
        ));
    }
    Ok((refused, t.elapsed))
}

/// A fresh file with its policy on `nid` and `n` one-page mappings of
/// it, each page touched.
pub fn one_page_mappings(nid: u32, n: usize) -> Result<(Tierkit, Vec<Mapping>), String> {
    let tk = Tierkit::open().map_err(|e| format!("open: {}", errno_name(&e)))?;
    tk.set_policy(TK_MODE_INTERLEAVE, 1u64 << nid)
        .map_err(|e| format!("TK_IOC_SET_POLICY: {}", errno_name(&e)))?;
    let mut maps = Vec::with_capacity(n);
    for i in 0..n {
        let m = tk
            .map(1, i as u64)
            .map_err(|e| format!("mmap {i} of {n}: {}", errno_name(&e)))?;
        // SAFETY: one writable page.
        unsafe { m.as_ptr().write(1) };
        maps.push(m);
    }
    Ok((tk, maps))
}

/// With `n` one-page mappings of one file on `dram` (registered, none in
/// the block), the offline times of a block of `cxl` (all ZONE_MOVABLE),
/// best of [`ROUNDS`].
pub fn offline_row(dram: u32, cxl: u32, n: usize) -> Result<OfflineRow, String> {
    let block_bytes = block_size().map_err(|e| format!("memory block size: {e}"))?;
    let (_tk, _maps) = one_page_mappings(dram, n)?;
    let mut row = OfflineRow {
        mappings: n,
        refused: Duration::MAX,
        offline: Duration::MAX,
    };
    for _ in 0..ROUNDS {
        let (r, o) = round(cxl, block_bytes)?;
        row.refused = row.refused.min(r);
        row.offline = row.offline.min(o);
    }
    Ok(row)
}
