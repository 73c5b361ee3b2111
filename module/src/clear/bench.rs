// SPDX-License-Identifier: GPL-2.0

//! `TK_IOC_CLEAR_BENCH`: clear P gigantic ranges on node N with T workers
//! placed per X, and report the time.

use super::{clear, clear_pages_variant, CpuSet, GiganticRange, Threads};
use super::{range::check_memory_node, ClearParams};
use crate::chunks;
use crate::uapi::{TkClearBench, TK_CLEAR_BENCH_MAX};
use kernel::prelude::*;

/// Runs the benchmark that `a` describes and fills in its results.
///
/// Each range is allocated, cleared and freed before the next, so at most
/// 1 GiB is held at a time and nothing is left behind. Only the clear is
/// timed. With `auto`, the probe runs on the first range (untimed) and its
/// choice is used for every range.
///
/// Errors: see [`TkClearBench`].
pub(crate) fn bench(a: &mut TkClearBench) -> Result {
    if a.nr_gigantic == 0 || a.nr_gigantic > TK_CLEAR_BENCH_MAX {
        return Err(EINVAL);
    }
    let mut params = ClearParams::from_uapi(a.threads, a.placement, a.chunk_kib)?;
    let nid = check_memory_node(i64::from(a.nid))?;
    // Check the placement and a fixed thread count before allocating.
    let set = CpuSet::for_memory(nid, params.placement)?;
    if let Threads::Fixed(n) = params.threads {
        if n > set.len() {
            pr_debug!(
                "clear: bench: {} threads, but {} placement for node {} has {} CPUs\n",
                n,
                params.placement.name(),
                nid,
                set.len()
            );
            return Err(EINVAL);
        }
    }

    let mut elapsed_ns = 0u64;
    let mut bytes = 0u64;
    let mut workers = 0u32;
    for _ in 0..a.nr_gigantic {
        let mut range = GiganticRange::alloc(nid)?;
        let r = clear(&mut range, &params)?;
        // `auto` is resolved once, on the first range.
        params.threads = Threads::Fixed(r.workers);
        elapsed_ns += r.elapsed_ns;
        bytes += r.bytes;
        workers = r.workers;
        a.cpu_node = r.cpu_node;
    }
    a.workers = workers;
    a.elapsed_ns = elapsed_ns;
    a.bytes = bytes;
    a.mbps = chunks::mbps(bytes, elapsed_ns);
    a.variant = [0; 16];
    let v = clear_pages_variant().to_bytes();
    let n = v.len().min(a.variant.len() - 1);
    a.variant[..n].copy_from_slice(&v[..n]);
    Ok(())
}
