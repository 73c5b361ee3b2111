// SPDX-License-Identifier: GPL-2.0

//! The gigantic mode of a `/dev/tierkit` file: `TK_IOC_SET_GIGANTIC` sets
//! the clearing parameters; `mmap` only checks and reserves; the first
//! touch of each GiB of the mapping makes it a [`GiganticRange`] on the
//! node the file's policy picked, cleared in parallel, mapped by one PUD
//! and kept alive by the file until release.
//!
//! The device (`dev.rs`) owns the file state, the policy and the VMA; the
//! mapping (`mapping.rs`) owns the ranges and the fault handler; this
//! module owns the parameters and the clearing. Use:
//!
//! ```ignore
//! // mmap:
//! for nid in nodes_of_the_mapping { gigantic.check_node(nid)?; } // before any work
//! gigantic.note_mapped(nr_ranges);                // on success only
//! // fault, per GiB (no file lock held):
//! let range = populate_with(&params, nid, GIGANTIC_PAGES, &last)?;
//! ```
//!
//! `nr_cleared` counts the ranges successful `mmap` calls reserved.

use super::{clear, placement, ClearParams, CpuSet, GiganticRange, Placement, Threads};
use crate::shim;
use crate::uapi::{self, TkGigantic, TK_GIGANTIC_F_QUERY};
use kernel::{
    new_spinlock,
    prelude::*,
    sync::{Arc, SpinLock},
};

/// Where the faults of a file's mappings record the most recent clear; the
/// file's `TK_GIGANTIC_F_QUERY` reads it.
pub(crate) type LastSlot = Arc<SpinLock<Option<LastClear>>>;

/// The most recent clear of a file in gigantic mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LastClear {
    pub(crate) elapsed_ns: u64,
    pub(crate) workers: u32,
    pub(crate) nid: i32,
    pub(crate) cpu_node: i32,
}

/// A `/dev/tierkit` file in gigantic mode: its parameters, the number of
/// ranges its mappings hold, and its most recent clear.
///
/// Some methods are only for the device's `mmap` (dev.rs).
pub(crate) struct GiganticMode {
    params: ClearParams,
    /// 1 GiB ranges reserved by successful `mmap` calls of the file.
    nr_cleared: u32,
    /// Written by the faults of the file's mappings.
    last: LastSlot,
}

impl GiganticMode {
    /// Gigantic mode with the parameters of `arg` (its `flags` must be 0).
    ///
    /// Errors: `EINVAL` for bad parameters, including a fixed thread count
    /// above the online CPUs (which no node can satisfy).
    pub(crate) fn new(arg: &TkGigantic) -> Result<Self> {
        if arg.flags != 0 {
            return Err(EINVAL);
        }
        let params = ClearParams::from_uapi(arg.threads, arg.placement, arg.chunk_kib)?;
        if let Threads::Fixed(n) = params.threads {
            if n > placement::nr_online_cpus() {
                return Err(EINVAL);
            }
        }
        Ok(Self {
            params,
            nr_cleared: 0,
            last: Arc::pin_init(new_spinlock!(None, "tierkit_last_clear"), GFP_KERNEL)?,
        })
    }

    /// Checks, before anything is allocated, that a range on `nid` can be
    /// cleared with these parameters: the placement has CPUs for the node
    /// and a fixed thread count fits them.
    ///
    /// Errors: `EINVAL`, as [`clear`] would give after the allocation.
    pub(crate) fn check_node(&self, nid: usize) -> Result {
        let set = CpuSet::for_memory(nid, self.params.placement)?;
        match self.params.threads {
            Threads::Fixed(n) if n > set.len() => Err(EINVAL),
            _ => Ok(()),
        }
    }

    /// The clearing parameters.
    pub(crate) fn params(&self) -> &ClearParams {
        &self.params
    }

    /// Where the faults of this file's mappings record their clears.
    pub(crate) fn last_slot(&self) -> LastSlot {
        self.last.clone()
    }

    /// [`populate_with`] with this file's parameters and a range of
    /// `nr_pages`, for tests.
    pub(crate) fn populate_pages(&mut self, nid: usize, nr_pages: u64) -> Result<GiganticRange> {
        populate_with(&self.params, nid, nr_pages, true, &self.last)
    }

    /// Counts `n` ranges reserved by a successful `mmap`.
    pub(crate) fn note_mapped(&mut self, n: usize) {
        self.nr_cleared = self.nr_cleared.saturating_add(n as u32);
    }

    /// Ranges reserved by successful `mmap` calls.
    pub(crate) fn nr_cleared(&self) -> u32 {
        self.nr_cleared
    }

    /// The most recent clear, if any.
    pub(crate) fn last(&self) -> Option<LastClear> {
        *self.last.lock()
    }

    /// Writes the parameters and the `last_*` fields into `arg`.
    pub(crate) fn write_back(&self, arg: &mut TkGigantic) {
        arg.threads = match self.params.threads {
            Threads::Auto => uapi::TK_THREADS_AUTO,
            Threads::Fixed(n) => n,
        };
        arg.placement = self.params.placement.to_uapi();
        arg.chunk_kib = self.params.chunk_pages * 4;
        write_last(self.last(), self.nr_cleared, arg);
    }
}

/// Allocates a range of `nr_pages` (2^18 for 1 GiB) on `nid` and clears it
/// in parallel with `params` (unless `init_on_alloc` had the allocator
/// zero it already), then records the clear in `last`. From ZONE_MOVABLE
/// only if `may_be_movable` (see [`GiganticRange::alloc_for_mapping`]).
/// The caller
/// owns the range; nothing stays allocated on failure.
///
/// Errors: as [`GiganticRange::alloc_pages`] and [`clear`] (`EINTR` when a
/// fatal signal stops the clear).
pub(crate) fn populate_with(
    params: &ClearParams,
    nid: usize,
    nr_pages: u64,
    may_be_movable: bool,
    last: &LastSlot,
) -> Result<GiganticRange> {
    // SAFETY: no precondition.
    let t0 = unsafe { shim::tk_ktime_get_ns() };
    let mut range = GiganticRange::alloc_for_mapping(nid, nr_pages, may_be_movable)?;
    // With init_on_alloc on, the allocator zeroed the range inside
    // alloc_contig_frozen_pages(): clearing it again would only double
    // the time. `last` then says 0 workers and the allocation's time.
    let done = if range.zeroed_by_allocator() {
        LastClear {
            // SAFETY: no precondition.
            elapsed_ns: unsafe { shim::tk_ktime_get_ns() }.saturating_sub(t0),
            workers: 0,
            nid: nid as i32,
            cpu_node: -1,
        }
    } else {
        let r = clear(&mut range, params)?;
        LastClear {
            elapsed_ns: r.elapsed_ns,
            workers: r.workers,
            nid: nid as i32,
            cpu_node: r.cpu_node,
        }
    };
    *last.lock() = Some(done);
    Ok(range)
}

fn write_last(last: Option<LastClear>, nr_cleared: u32, arg: &mut TkGigantic) {
    let l = last.unwrap_or(LastClear {
        elapsed_ns: 0,
        workers: 0,
        nid: -1,
        cpu_node: -1,
    });
    arg.last_elapsed_ns = l.elapsed_ns;
    arg.last_workers = l.workers;
    arg.last_nid = l.nid;
    arg.last_cpu_node = l.cpu_node;
    arg.nr_cleared = nr_cleared;
}

/// `TK_IOC_SET_GIGANTIC` for a file whose gigantic state is `mode`
/// (`None`: not in gigantic mode) and that has (`mapped`) or has not been
/// mapped yet. `arg` is the user's argument, written back on success.
///
/// - `flags == TK_GIGANTIC_F_QUERY`: change nothing, write back the current
///   parameters and `last_*` fields (defaults if not in gigantic mode).
/// - `flags == 0`: enter gigantic mode, or change its parameters; `EBUSY`
///   once the file has been mapped.
/// - other flags, bad parameters: `EINVAL`.
pub(crate) fn set_gigantic_ioctl(
    mode: &mut Option<GiganticMode>,
    mapped: bool,
    arg: &mut TkGigantic,
) -> Result {
    match arg.flags {
        TK_GIGANTIC_F_QUERY => {
            match mode {
                Some(m) => m.write_back(arg),
                None => {
                    let d = ClearParams::new(Threads::Auto, Placement::Local);
                    arg.threads = uapi::TK_THREADS_AUTO;
                    arg.placement = d.placement.to_uapi();
                    arg.chunk_kib = d.chunk_pages * 4;
                    write_last(None, 0, arg);
                }
            }
            Ok(())
        }
        0 => {
            let new = GiganticMode::new(arg)?;
            if mapped {
                return Err(EBUSY);
            }
            // Ranges are only counted by a successful mmap, so an unmapped
            // file has none to carry over.
            new.write_back(arg);
            *mode = Some(new);
            Ok(())
        }
        _ => Err(EINVAL),
    }
}
