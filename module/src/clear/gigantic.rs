// SPDX-License-Identifier: GPL-2.0

//! The gigantic mode of a `/dev/tierkit` file: `TK_IOC_SET_GIGANTIC` sets
//! the clearing parameters, then each 1 GiB of `mmap` is a
//! [`GiganticRange`] on the node the file's policy picks, cleared in
//! parallel, and kept alive by the file until release.
//!
//! The device (`dev.rs`) owns the file state, the policy, the VMA and the
//! ranges of each mapping; this module owns the parameters and the
//! clearing. Use, in `mmap`:
//!
//! ```ignore
//! for nid in nodes_of_the_mapping { gigantic.check_node(nid)?; } // before any work
//! let range = gigantic.populate(nid)?;       // allocate + clear, owned by the caller
//! // ... all ranges taken and inserted: hand them to the file
//! gigantic.note_mapped(nr_ranges);
//! ```
//!
//! A failed `mmap` drops the ranges it took; `nr_cleared` counts only the
//! ranges of successful calls.

use super::{clear, placement, ClearParams, CpuSet, GiganticRange, Placement, Threads};
use crate::chunks::GIGANTIC_PAGES;
use crate::uapi::{self, TkGigantic, TK_GIGANTIC_F_QUERY};
use kernel::prelude::*;

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
    /// 1 GiB ranges handed out by successful `mmap` calls of the file.
    nr_cleared: u32,
    last: Option<LastClear>,
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
            last: None,
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

    /// Allocates a gigantic range on `nid` and clears it in parallel. The
    /// caller owns the range: a failed `mmap` drops (frees) it.
    ///
    /// Errors: as [`GiganticRange::alloc`] and [`clear`] (`EINTR` when a
    /// fatal signal stops the clear).
    pub(crate) fn populate(&mut self, nid: usize) -> Result<GiganticRange> {
        self.populate_pages(nid, GIGANTIC_PAGES)
    }

    /// [`populate`](Self::populate) with a smaller range, for tests.
    pub(crate) fn populate_pages(&mut self, nid: usize, nr_pages: u64) -> Result<GiganticRange> {
        let mut range = GiganticRange::alloc_pages(nid, nr_pages)?;
        let r = clear(&mut range, &self.params)?;
        self.last = Some(LastClear {
            elapsed_ns: r.elapsed_ns,
            workers: r.workers,
            nid: nid as i32,
            cpu_node: r.cpu_node,
        });
        Ok(range)
    }

    /// Counts `n` ranges handed out by a successful `mmap`.
    pub(crate) fn note_mapped(&mut self, n: usize) {
        self.nr_cleared = self.nr_cleared.saturating_add(n as u32);
    }

    /// Ranges handed out by successful `mmap` calls.
    pub(crate) fn nr_cleared(&self) -> u32 {
        self.nr_cleared
    }

    /// The most recent clear, if any.
    pub(crate) fn last(&self) -> Option<LastClear> {
        self.last
    }

    /// Writes the parameters and the `last_*` fields into `arg`.
    pub(crate) fn write_back(&self, arg: &mut TkGigantic) {
        arg.threads = match self.params.threads {
            Threads::Auto => uapi::TK_THREADS_AUTO,
            Threads::Fixed(n) => n,
        };
        arg.placement = self.params.placement.to_uapi();
        arg.chunk_kib = self.params.chunk_pages * 4;
        write_last(self.last, self.nr_cleared, arg);
    }
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
