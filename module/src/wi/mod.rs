// SPDX-License-Identifier: GPL-2.0

//! Weighted interleave: tierkit's weight table, the per-file policy, and the
//! per-node statistics.
//!
//! The weight table [`Wi`] is a mirror of the kernel's own in mm/mempolicy.c
//! (Linux 7.3): `struct weighted_interleave_state *wi_state` (a `mode_auto`
//! flag and `iw_table[]`, where NULL reads as "auto, every weight 1") and
//! `unsigned int *node_bw_table` (NULL until bandwidth is first reported),
//! both under `wi_state_lock`. Every operation that changes it is a port of
//! the kernel function named in its doc comment, with the same results and
//! the same errors; the pure parts (the table's state machine in
//! `module/core/src/wi_table.rs`; parsing, the auto reduction and node
//! selection in `module/core/src/interleave.rs`) are host-tested there.
//!
//! - [`debugfs`]: the files that expose the table to userspace
//!   (`/sys/kernel/debug/tierkit/weighted_interleave/`), and the node
//!   hotplug notifier that adds and removes `nodeN` files.
//! - [`pages`]: allocation of pages on the nodes the selector picks, for
//!   `/dev/tierkit` (`mmap` and `TK_IOC_BULK`).
//!
//! The module has one global [`Wi`]; KUnit tests build their own, so they
//! never disturb the table userspace sees.

pub(crate) mod debugfs;
pub(crate) mod pages;
mod tests;

use crate::interleave::{self, Nodemask, Selector, WeightError, Weights, MAX_NUMNODES};
use crate::shim::node;
use crate::uapi;
use crate::wi_table::{TableError, WeightTable};
use kernel::{
    fmt, new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
};

impl From<WeightError> for Error {
    fn from(_: WeightError) -> Error {
        EINVAL
    }
}

impl From<TableError> for Error {
    fn from(e: TableError) -> Error {
        match e {
            TableError::Invalid => EINVAL,
            TableError::NoBandwidth => ENODEV,
        }
    }
}

/// The nodes that have memory (`node_states[N_MEMORY]`), restricted to the
/// ids tierkit can name (`< 64`).
pub(crate) fn memory_nodes() -> Nodemask {
    let mut mask = Nodemask::EMPTY;
    for nid in 0..possible_nodes() {
        if node::has_memory(nid) {
            mask = mask.with(nid);
        }
    }
    mask
}

/// `min(nr_node_ids, 64)`: the node ids tierkit deals with.
pub(crate) fn possible_nodes() -> usize {
    node::nr_node_ids().min(MAX_NUMNODES)
}

/// Pages allocated per node: cumulative, and currently owned by open files;
/// and the global limit on what open files may hold.
pub(crate) struct Stats {
    allocated: [Atomic<u64>; MAX_NUMNODES],
    held: [Atomic<u64>; MAX_NUMNODES],
    /// 1 GiB ranges held by files in gigantic mode, per node.
    gigantic: [Atomic<u64>; MAX_NUMNODES],
    /// 4 KiB pages reserved by open files (a gigantic range counts
    /// 2^18), against `global_pages`.
    reserved: Atomic<u64>,
    /// Gigantic faults that failed (SIGBUS for that GiB), cumulative.
    gigantic_fault_failed: Atomic<u64>,
    /// The most 4 KiB pages all files together may hold: 3/4 of RAM.
    global_pages: u64,
}

/// Pages one file holds at most in 4 KiB mode (`MAX_FILE_PAGES`, dev.rs).
pub(crate) const FILE_PAGES: u64 = 1 << 18;
/// 1 GiB ranges one file holds at most in gigantic mode.
pub(crate) const FILE_GIGANTIC: u64 = 64;

/// A share of the global limit, taken by [`Stats::reserve`] before a
/// mapping allocates and given back on drop (when the file lets go of its
/// pages, or when the mapping fails).
pub(crate) struct Reservation {
    wi: Arc<Wi>,
    pages: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.wi.stats.reserved.fetch_sub(self.pages, Relaxed);
    }
}

impl Stats {
    fn new() -> Self {
        // SAFETY: no precondition.
        let total = unsafe { crate::shim::tk_totalram_pages() } as u64;
        Stats {
            allocated: core::array::from_fn(|_| Atomic::new(0)),
            held: core::array::from_fn(|_| Atomic::new(0)),
            gigantic: core::array::from_fn(|_| Atomic::new(0)),
            reserved: Atomic::new(0),
            gigantic_fault_failed: Atomic::new(0),
            global_pages: total / 4 * 3,
        }
    }

    /// Reserves `pages` 4 KiB pages of the global limit for `wi`'s files.
    ///
    /// Errors: `ENOMEM` if all files together would hold more than the
    /// limit (nothing is reserved then).
    pub(crate) fn reserve(wi: &Arc<Wi>, pages: u64) -> Result<Reservation> {
        let s = &wi.stats;
        let mut cur = s.reserved.load(Relaxed);
        loop {
            let new = cur.checked_add(pages).ok_or(ENOMEM)?;
            if new > s.global_pages {
                return Err(ENOMEM);
            }
            match s.reserved.cmpxchg(cur, new, Relaxed) {
                Ok(_) => {
                    return Ok(Reservation {
                        wi: wi.clone(),
                        pages,
                    })
                }
                Err(seen) => cur = seen,
            }
        }
    }

    /// Counts a 1 GiB range on `nid` held (`true`) or given back.
    pub(crate) fn gigantic(&self, nid: usize, held: bool) {
        if let Some(g) = self.gigantic.get(nid) {
            if held {
                g.add(1, Relaxed);
            } else {
                g.fetch_sub(1, Relaxed);
            }
        }
    }

    /// Counts a gigantic fault that failed (the task got SIGBUS).
    pub(crate) fn gigantic_fault_failed(&self) {
        self.gigantic_fault_failed.add(1, Relaxed);
    }

    /// The `limits` file: `KEY VALUE` lines; `gigantic_fault_failed` is
    /// the cumulative number of gigantic faults that ended in SIGBUS,
    /// `gigantic_pool_taken` of faults served from `pool`'s ready ranges,
    /// `gigantic_pool_shrunk` of ranges its shrinker gave back.
    pub(crate) fn show_limits(
        &self,
        f: &mut fmt::Formatter<'_>,
        pool: &crate::clear::ready::GiganticPool,
    ) -> fmt::Result {
        writeln!(f, "file_pages {FILE_PAGES}")?;
        writeln!(f, "file_gigantic {FILE_GIGANTIC}")?;
        writeln!(f, "global_pages {}", self.global_pages)?;
        writeln!(f, "held_pages {}", self.reserved.load(Relaxed))?;
        writeln!(
            f,
            "gigantic_fault_failed {}",
            self.gigantic_fault_failed.load(Relaxed)
        )?;
        writeln!(f, "gigantic_pool_taken {}", pool.taken())?;
        writeln!(f, "gigantic_pool_shrunk {}", pool.shrunk())
    }

    /// Counts `n` pages allocated on `nid`; `held` if a file keeps them.
    pub(crate) fn add(&self, nid: usize, n: u64, held: bool) {
        if let Some(a) = self.allocated.get(nid) {
            a.add(n, Relaxed);
        }
        if held {
            if let Some(h) = self.held.get(nid) {
                h.add(n, Relaxed);
            }
        }
    }

    /// Counts `n` held pages of `nid` given back.
    pub(crate) fn release(&self, nid: usize, n: u64) {
        if let Some(h) = self.held.get(nid) {
            h.fetch_sub(n, Relaxed);
        }
    }

    /// Cumulative pages allocated on `nid`.
    pub(crate) fn allocated(&self, nid: usize) -> u64 {
        self.allocated.get(nid).map_or(0, |a| a.load(Relaxed))
    }

    /// Pages of `nid` currently held by open files.
    pub(crate) fn held(&self, nid: usize) -> u64 {
        self.held.get(nid).map_or(0, |h| h.load(Relaxed))
    }

    /// 1 GiB ranges of `nid` currently held by files in gigantic mode.
    pub(crate) fn gigantic_held(&self, nid: usize) -> u64 {
        self.gigantic.get(nid).map_or(0, |g| g.load(Relaxed))
    }

    /// The `stats` file: a header, then "NID ALLOCATED HELD GIGANTIC POOL"
    /// per node (POOL: `pool`'s ready 1 GiB ranges of the node).
    pub(crate) fn show(
        &self,
        f: &mut fmt::Formatter<'_>,
        pool: &crate::clear::ready::GiganticPool,
    ) -> fmt::Result {
        writeln!(f, "node allocated held gigantic pool")?;
        for nid in 0..possible_nodes() {
            writeln!(
                f,
                "{} {} {} {} {}",
                nid,
                self.allocated(nid),
                self.held(nid),
                self.gigantic_held(nid),
                pool.ready(nid)
            )?;
        }
        Ok(())
    }
}

/// tierkit's weighted-interleave state: the weight table (a mirror of
/// mm/mempolicy.c's `wi_state` + `node_bw_table`) and the page statistics.
#[pin_data]
pub(crate) struct Wi {
    /// `wi_state_lock` with what it protects.
    #[pin]
    table: Mutex<WeightTable>,
    /// Per-node page counts.
    pub(crate) stats: Stats,
    /// The pages of every live mapping, for the memory notifier.
    #[pin]
    pub(crate) mappings: crate::mapping::Registry,
    /// The pre-cleared 1 GiB ranges gigantic faults take from.
    #[pin]
    pub(crate) pool: crate::clear::ready::GiganticPool,
}

impl Wi {
    /// The initial state, as the kernel's at boot before any bandwidth is
    /// reported: `wi_state` NULL (auto mode, every weight 1), no bandwidth.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Wi {
            table <- new_mutex!(WeightTable::new(), "tierkit_wi_state"),
            stats: Stats::new(),
            mappings <- crate::mapping::Registry::new(),
            pool <- crate::clear::ready::GiganticPool::new(crate::chunks::GIGANTIC_PAGES, false),
        })
    }

    /// A snapshot of the weight table (`rcu_dereference(wi_state)` in the
    /// kernel's readers); every weight 1 in the initial state.
    pub(crate) fn weights(&self) -> Weights {
        self.table.lock().weights()
    }

    /// `get_il_weight(nid)`.
    pub(crate) fn weight(&self, nid: usize) -> u8 {
        self.weights().get(nid)
    }

    /// The `auto` flag as `weighted_interleave_auto_show()` reads it.
    pub(crate) fn is_auto(&self) -> bool {
        self.table.lock().is_auto()
    }

    /// Whether bandwidth was ever reported.
    pub(crate) fn has_bandwidth(&self) -> bool {
        self.table.lock().has_bandwidth()
    }

    /// A write to `nodeN`: [`WeightTable::node_store`] (`node_store()`,
    /// mm/mempolicy.c). `EINVAL` for a bad weight or node id.
    pub(crate) fn node_store(&self, nid: usize, buf: &[u8]) -> Result {
        Ok(self.table.lock().node_store(nid, buf)?)
    }

    /// A write to `auto` with the nodes with memory given:
    /// [`WeightTable::auto_store`] (`weighted_interleave_auto_store()`).
    /// `EINVAL` for a bad boolean, `ENODEV` for auto without bandwidth.
    pub(crate) fn auto_store_with(&self, buf: &[u8], has_memory: Nodemask) -> Result {
        Ok(self.table.lock().auto_store(buf, has_memory)?)
    }

    /// [`Wi::auto_store_with`] over the nodes that have memory now.
    pub(crate) fn auto_store(&self, buf: &[u8]) -> Result {
        self.auto_store_with(buf, memory_nodes())
    }

    /// A write to `bandwidth` with `nodes` (`nr_node_ids`) and the nodes
    /// with memory given: [`WeightTable::bandwidth_store`] (lines `NID
    /// READ_MBPS WRITE_MBPS`, each `mempolicy_set_node_perf()`). `EINVAL`
    /// for any bad line, before anything is applied.
    pub(crate) fn bandwidth_store_with(
        &self,
        buf: &[u8],
        nodes: usize,
        has_memory: Nodemask,
    ) -> Result {
        Ok(self.table.lock().bandwidth_store(buf, nodes, has_memory)?)
    }

    /// [`Wi::bandwidth_store_with`] for the running system.
    pub(crate) fn bandwidth_store(&self, buf: &[u8]) -> Result {
        self.bandwidth_store_with(buf, possible_nodes(), memory_nodes())
    }

    /// The `bandwidth` file: "NID READ_MBPS WRITE_MBPS" per reported node.
    pub(crate) fn bandwidth_show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let table = *self.table.lock();
        for (nid, r, w) in table.bandwidth() {
            writeln!(f, "{nid} {r} {w}")?;
        }
        Ok(())
    }
}

/// The placement mode of a `/dev/tierkit` file (`TkPolicy::mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `MPOL_WEIGHTED_INTERLEAVE`, with tierkit's weight table.
    Weighted,
    /// `MPOL_INTERLEAVE`: every node weighs 1.
    Interleave,
}

/// The policy of one `/dev/tierkit` file: a mode, an effective nodemask
/// and, with `TK_POLICY_F_WEIGHTS`, the file's own weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Policy {
    pub(crate) mode: Mode,
    pub(crate) mask: Nodemask,
    /// The file's own weight table (`TK_POLICY_F_WEIGHTS`); `None`: the
    /// global table, read when it is used.
    pub(crate) own: Option<Weights>,
}

impl Policy {
    /// A policy from `TK_IOC_SET_POLICY`'s fields, given the nodes with
    /// memory. As `mpol_set_nodemask()` (mm/mempolicy.c) does for
    /// `MPOL_(WEIGHTED_)INTERLEAVE`, the requested mask is intersected with
    /// `N_MEMORY` and only an empty result is an error (`EINVAL`, from
    /// `mpol_new_nodemask()`); the caller reports the effective mask back.
    /// An unknown mode or flag is `EINVAL` too. With `TK_POLICY_F_WEIGHTS`
    /// (weighted mode only) `weights` becomes the file's own table: every
    /// node of the effective mask needs a weight of 1..=255 (`EINVAL`
    /// otherwise); the other entries are ignored.
    pub(crate) fn new_with(
        mode: u32,
        flags: u32,
        requested: u64,
        weights: &[u8; MAX_NUMNODES],
        has_memory: Nodemask,
    ) -> Result<Policy> {
        let mode = match mode {
            uapi::TK_MODE_WEIGHTED_INTERLEAVE => Mode::Weighted,
            uapi::TK_MODE_INTERLEAVE => Mode::Interleave,
            _ => return Err(EINVAL),
        };
        if flags & !uapi::TK_POLICY_F_WEIGHTS != 0 {
            return Err(EINVAL);
        }
        let mask = interleave::effective_nodemask(Nodemask(requested), has_memory)?;
        let p = Policy {
            mode,
            mask,
            own: None,
        };
        if flags & uapi::TK_POLICY_F_WEIGHTS != 0 {
            p.with_own_weights(weights)
        } else {
            Ok(p)
        }
    }

    /// This policy with `weights` as its own table (`TK_POLICY_F_WEIGHTS`,
    /// `TK_REBALANCE_F_WEIGHTS`): weighted mode only, and every node of
    /// the mask needs a weight of 1..=255 (`EINVAL` otherwise); the other
    /// entries are ignored.
    pub(crate) fn with_own_weights(self, weights: &[u8; MAX_NUMNODES]) -> Result<Policy> {
        if self.mode != Mode::Weighted {
            return Err(EINVAL);
        }
        let mut table = [0u8; MAX_NUMNODES];
        for nid in self.mask.iter() {
            match (weights.get(nid), table.get_mut(nid)) {
                (Some(&w), Some(slot)) if w != 0 => *slot = w,
                _ => return Err(EINVAL),
            }
        }
        Ok(Policy {
            own: Some(Weights::from_table(table)),
            ..self
        })
    }

    /// [`Policy::new_with`] against the nodes with memory now.
    pub(crate) fn new(
        mode: u32,
        flags: u32,
        requested: u64,
        weights: &[u8; MAX_NUMNODES],
    ) -> Result<Policy> {
        Self::new_with(mode, flags, requested, weights, memory_nodes())
    }

    /// The weights this policy places by: its own, or `global` (tierkit's
    /// table, read now).
    pub(crate) fn weights(&self, global: impl FnOnce() -> Weights) -> Weights {
        self.own.unwrap_or_else(global)
    }

    /// The address-path selector of this policy with `weights`
    /// (`weighted_interleave_nid()` or `interleave_nid()`).
    pub(crate) fn selector(&self, weights: &Weights) -> Result<Selector> {
        let sel = match self.mode {
            Mode::Weighted => Selector::new(self.mask, weights),
            Mode::Interleave => Selector::interleave(self.mask),
        };
        // The mask is never empty by construction.
        sel.ok_or(EINVAL)
    }
}
