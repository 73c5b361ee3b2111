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
//! the same errors; the pure parts (parsing, the auto reduction, node
//! selection) live in `module/core/src/interleave.rs`.
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

/// `struct weighted_interleave_state` (mm/mempolicy.c).
#[derive(Clone, Copy)]
struct State {
    mode_auto: bool,
    iw_table: [u8; MAX_NUMNODES],
}

/// One node's entry of the bandwidth table. The kernel keeps only
/// `min(read, write)`; both are kept here so that `bandwidth` reads back
/// what was written.
#[derive(Clone, Copy, Default)]
struct NodeBw {
    read_mbps: u32,
    write_mbps: u32,
    set: bool,
}

/// `wi_state` and `node_bw_table`, protected together by [`Wi::table`] as
/// the kernel protects both with `wi_state_lock`.
struct Table {
    /// `wi_state`; `None` is the kernel's NULL: auto mode, every weight 1.
    state: Option<State>,
    /// `node_bw_table`; `None` until bandwidth is first written.
    bw: Option<[NodeBw; MAX_NUMNODES]>,
}

impl Table {
    /// `min(read, write)` per node, 0 for nodes never reported: the
    /// kernel's `node_bw_table` (kcalloc'ed, so unreported nodes read 0).
    fn bw_min(bw: &[NodeBw; MAX_NUMNODES]) -> [u32; MAX_NUMNODES] {
        let mut out = [0u32; MAX_NUMNODES];
        for (o, b) in out.iter_mut().zip(bw.iter()) {
            *o = interleave::bw_from_coords(b.read_mbps, b.write_mbps);
        }
        out
    }

    /// A new auto-mode table reduced from `bw` over `has_memory`: the
    /// kernel fills the new `iw_table` with 1s, then
    /// `reduce_interleave_weights()` overwrites the nodes with memory.
    fn reduced(bw: &[NodeBw; MAX_NUMNODES], has_memory: Nodemask) -> State {
        let mut iw_table = [1u8; MAX_NUMNODES];
        interleave::reduce_interleave_weights(&Self::bw_min(bw), has_memory, &mut iw_table);
        State {
            mode_auto: true,
            iw_table,
        }
    }
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
    /// the cumulative number of gigantic faults that ended in SIGBUS.
    pub(crate) fn show_limits(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "file_pages {FILE_PAGES}")?;
        writeln!(f, "file_gigantic {FILE_GIGANTIC}")?;
        writeln!(f, "global_pages {}", self.global_pages)?;
        writeln!(f, "held_pages {}", self.reserved.load(Relaxed))?;
        writeln!(
            f,
            "gigantic_fault_failed {}",
            self.gigantic_fault_failed.load(Relaxed)
        )
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

    /// The `stats` file: a header, then "NID ALLOCATED HELD GIGANTIC" per
    /// node.
    pub(crate) fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "node allocated held gigantic")?;
        for nid in 0..possible_nodes() {
            writeln!(
                f,
                "{} {} {} {}",
                nid,
                self.allocated(nid),
                self.held(nid),
                self.gigantic_held(nid)
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
    table: Mutex<Table>,
    /// Per-node page counts.
    pub(crate) stats: Stats,
    /// The pages of every live mapping, for the memory notifier.
    #[pin]
    pub(crate) mappings: crate::mapping::Registry,
}

impl Wi {
    /// The initial state, as the kernel's at boot before any bandwidth is
    /// reported: `wi_state` NULL (auto mode, every weight 1), no bandwidth.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Wi {
            table <- new_mutex!(Table { state: None, bw: None }, "tierkit_wi_state"),
            stats: Stats::new(),
            mappings <- crate::mapping::Registry::new(),
        })
    }

    /// A snapshot of the weight table (`rcu_dereference(wi_state)` in the
    /// kernel's readers); all unset, i.e. every weight 1, while the table is
    /// in its initial state.
    pub(crate) fn weights(&self) -> Weights {
        match self.table.lock().state {
            Some(s) => Weights::from_table(s.iw_table),
            None => Weights::new(),
        }
    }

    /// `get_il_weight(nid)`.
    pub(crate) fn weight(&self, nid: usize) -> u8 {
        self.weights().get(nid)
    }

    /// The `auto` flag as `weighted_interleave_auto_show()` reads it: true
    /// while the table is in its initial state.
    pub(crate) fn is_auto(&self) -> bool {
        self.table.lock().state.is_none_or(|s| s.mode_auto)
    }

    /// Whether bandwidth was ever reported (the kernel's `node_bw_table`
    /// is non-NULL).
    pub(crate) fn has_bandwidth(&self) -> bool {
        self.table.lock().bw.is_some()
    }

    /// `node_store()` (mm/mempolicy.c): parse `buf` like
    /// `kstrtou8(buf, 0, &weight)`; 0, over 255, empty or not a number is
    /// `EINVAL` and leaves the table alone. Otherwise copy the table (all
    /// 1s if it was in its initial state), set `nid`'s weight and switch to
    /// manual mode.
    pub(crate) fn node_store(&self, nid: usize, buf: &[u8]) -> Result {
        let weight = interleave::parse_weight(buf)?;
        if nid >= MAX_NUMNODES {
            return Err(EINVAL);
        }
        let mut t = self.table.lock();
        let mut iw_table = match t.state {
            Some(s) => s.iw_table,
            None => [1u8; MAX_NUMNODES],
        };
        iw_table[nid] = weight;
        t.state = Some(State {
            mode_auto: false,
            iw_table,
        });
        Ok(())
    }

    /// `weighted_interleave_auto_store()` (mm/mempolicy.c), with the set of
    /// nodes with memory given (the kernel's `for_each_node_state(nid,
    /// N_MEMORY)` inside `reduce_interleave_weights()`):
    /// - not a `kstrtobool()` boolean: `EINVAL`;
    /// - the mode it already is in: nothing changes (in the initial state
    ///   the kernel goes on, as NULL is compared with nothing);
    /// - false: manual mode, weights kept (all 1 from the initial state);
    /// - true without bandwidth: `ENODEV`, nothing changes;
    /// - true: auto mode, weights reduced from the bandwidth table.
    pub(crate) fn auto_store_with(&self, buf: &[u8], has_memory: Nodemask) -> Result {
        let input = interleave::parse_bool_auto(buf)?;
        let mut t = self.table.lock();
        if let Some(s) = t.state {
            if s.mode_auto == input {
                return Ok(());
            }
        }
        if !input {
            let iw_table = match t.state {
                Some(s) => s.iw_table,
                None => [1u8; MAX_NUMNODES],
            };
            t.state = Some(State {
                mode_auto: false,
                iw_table,
            });
            return Ok(());
        }
        let state = match &t.bw {
            Some(bw) => Table::reduced(bw, has_memory),
            None => return Err(ENODEV),
        };
        t.state = Some(state);
        Ok(())
    }

    /// [`Wi::auto_store_with`] over the nodes that have memory now.
    pub(crate) fn auto_store(&self, buf: &[u8]) -> Result {
        self.auto_store_with(buf, memory_nodes())
    }

    /// `mempolicy_set_node_perf()` (mm/mempolicy.c) for one node: the
    /// node's bandwidth becomes `min(read, write)` (stored even in manual
    /// mode, for a later switch to auto); in auto mode, including the
    /// initial state, every weight is then recomputed.
    fn set_node_perf(
        t: &mut Table,
        nid: usize,
        read_mbps: u32,
        write_mbps: u32,
        has_memory: Nodemask,
    ) {
        let bw = t.bw.get_or_insert([NodeBw::default(); MAX_NUMNODES]);
        if let Some(slot) = bw.get_mut(nid) {
            *slot = NodeBw {
                read_mbps,
                write_mbps,
                set: true,
            };
        }
        if let Some(s) = t.state {
            if !s.mode_auto {
                // Manual mode; skip reducing weights.
                return;
            }
        }
        let state = Table::reduced(bw, has_memory);
        t.state = Some(state);
    }

    /// A write to the `bandwidth` file: lines "NID READ_MBPS WRITE_MBPS",
    /// each applied as [`Wi::set_node_perf`] in order. A malformed line, a
    /// NID `>= nodes` or a value over `u32::MAX` fails the whole write with
    /// `EINVAL` before anything is applied.
    pub(crate) fn bandwidth_store_with(
        &self,
        buf: &[u8],
        nodes: usize,
        has_memory: Nodemask,
    ) -> Result {
        // Validate everything first.
        let mut count = 0usize;
        for line in BwLines::new(buf) {
            let (nid, _, _) = line?;
            if nid >= nodes.min(MAX_NUMNODES) {
                return Err(EINVAL);
            }
            count += 1;
        }
        if count == 0 {
            return Err(EINVAL);
        }
        let mut t = self.table.lock();
        for line in BwLines::new(buf) {
            let (nid, r, w) = line?;
            Self::set_node_perf(&mut t, nid, r, w, has_memory);
        }
        Ok(())
    }

    /// [`Wi::bandwidth_store_with`] for the running system.
    pub(crate) fn bandwidth_store(&self, buf: &[u8]) -> Result {
        self.bandwidth_store_with(buf, possible_nodes(), memory_nodes())
    }

    /// The `bandwidth` file: "NID READ_MBPS WRITE_MBPS" per reported node.
    pub(crate) fn bandwidth_show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bw = self.table.lock().bw;
        if let Some(bw) = bw {
            for (nid, b) in bw.iter().enumerate() {
                if b.set {
                    writeln!(f, "{} {} {}", nid, b.read_mbps, b.write_mbps)?;
                }
            }
        }
        Ok(())
    }
}

/// Iterator over the non-blank lines of a `bandwidth` write, each parsed as
/// `(nid, read_mbps, write_mbps)`.
struct BwLines<'a> {
    rest: &'a [u8],
}

impl<'a> BwLines<'a> {
    fn new(buf: &'a [u8]) -> Self {
        // Like sysfs, treat the bytes as a C string: stop at a NUL.
        let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
        BwLines { rest: &buf[..end] }
    }

    /// A decimal `u32`: ASCII digits only, no sign.
    fn number(field: &[u8]) -> Result<u32> {
        if field.is_empty() {
            return Err(EINVAL);
        }
        let mut v: u32 = 0;
        for &c in field {
            if !c.is_ascii_digit() {
                return Err(EINVAL);
            }
            v = v
                .checked_mul(10)
                .and_then(|v| v.checked_add(u32::from(c - b'0')))
                .ok_or(EINVAL)?;
        }
        Ok(v)
    }

    fn parse(line: &[u8]) -> Result<(usize, u32, u32)> {
        let mut fields = line
            .split(|&c| c == b' ' || c == b'\t' || c == b'\r')
            .filter(|f| !f.is_empty());
        let nid = Self::number(fields.next().ok_or(EINVAL)?)?;
        let r = Self::number(fields.next().ok_or(EINVAL)?)?;
        let w = Self::number(fields.next().ok_or(EINVAL)?)?;
        if fields.next().is_some() {
            return Err(EINVAL);
        }
        Ok((nid as usize, r, w))
    }
}

impl Iterator for BwLines<'_> {
    type Item = Result<(usize, u32, u32)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.rest.is_empty() {
                return None;
            }
            let (line, rest) = match self.rest.iter().position(|&c| c == b'\n') {
                Some(i) => (&self.rest[..i], &self.rest[i + 1..]),
                None => (self.rest, &self.rest[self.rest.len()..]),
            };
            self.rest = rest;
            if line.iter().all(|&c| c == b' ' || c == b'\t' || c == b'\r') {
                continue;
            }
            return Some(Self::parse(line));
        }
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

/// The policy of one `/dev/tierkit` file: a mode and an effective nodemask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Policy {
    pub(crate) mode: Mode,
    pub(crate) mask: Nodemask,
}

impl Policy {
    /// A policy from `TK_IOC_SET_POLICY`'s fields, given the nodes with
    /// memory. As `mpol_set_nodemask()` (mm/mempolicy.c) does for
    /// `MPOL_(WEIGHTED_)INTERLEAVE`, the requested mask is intersected with
    /// `N_MEMORY` and only an empty result is an error (`EINVAL`, from
    /// `mpol_new_nodemask()`); the caller reports the effective mask back.
    /// An unknown mode or non-zero flags are `EINVAL` too.
    pub(crate) fn new_with(
        mode: u32,
        flags: u32,
        requested: u64,
        has_memory: Nodemask,
    ) -> Result<Policy> {
        let mode = match mode {
            uapi::TK_MODE_WEIGHTED_INTERLEAVE => Mode::Weighted,
            uapi::TK_MODE_INTERLEAVE => Mode::Interleave,
            _ => return Err(EINVAL),
        };
        if flags != 0 {
            return Err(EINVAL);
        }
        let mask = interleave::effective_nodemask(Nodemask(requested), has_memory)?;
        Ok(Policy { mode, mask })
    }

    /// [`Policy::new_with`] against the nodes with memory now.
    pub(crate) fn new(mode: u32, flags: u32, requested: u64) -> Result<Policy> {
        Self::new_with(mode, flags, requested, memory_nodes())
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
