// SPDX-License-Identifier: GPL-2.0

//! tierkit's weight table as a pure state machine: a mirror of the kernel's
//! own in mm/mempolicy.c (Linux 7.3), `struct weighted_interleave_state
//! *wi_state` (a `mode_auto` flag and `iw_table[]`, where NULL reads as
//! "auto, every weight 1") and `unsigned int *node_bw_table` (NULL until
//! bandwidth is first reported). Every operation is a port of the kernel
//! function named in its doc comment, with the same results and errors.
//!
//! The module keeps one [`WeightTable`] under a mutex (the kernel's
//! `wi_state_lock`) and passes it the nodes with memory; everything here is
//! tested on the host (`module/core/tests/wi_table.rs`) against a plain
//! model of the same functions.

use crate::interleave::{self, Nodemask, WeightError, Weights, MAX_NUMNODES};

/// Why a write to a weight file was refused; the module maps these to the
/// kernel's error codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableError {
    /// `-EINVAL`: malformed input, a weight of 0 or over 255, a node id out
    /// of range.
    Invalid,
    /// `-ENODEV`: auto mode asked for before any bandwidth was reported
    /// (`weighted_interleave_auto_store()`).
    NoBandwidth,
}

impl From<WeightError> for TableError {
    fn from(_: WeightError) -> TableError {
        TableError::Invalid
    }
}

/// `struct weighted_interleave_state` (mm/mempolicy.c).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WiState {
    pub mode_auto: bool,
    pub iw_table: [u8; MAX_NUMNODES],
}

/// One node's entry of the bandwidth table, MB/s. The kernel keeps only
/// `min(read, write)`; both are kept here so that `bandwidth` reads back
/// what was written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeBw {
    pub read_mbps: u32,
    pub write_mbps: u32,
    pub set: bool,
}

/// `wi_state` and `node_bw_table` together (the kernel protects both with
/// `wi_state_lock`; so must the owner of a `WeightTable`).
///
/// # Invariants
///
/// `state` is `None` (the kernel's NULL `wi_state`) until the first write
/// to a weight, to `auto`, or to `bandwidth` in auto mode; `bw` is `None`
/// until the first bandwidth is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WeightTable {
    state: Option<WiState>,
    bw: Option<[NodeBw; MAX_NUMNODES]>,
}

impl Default for WeightTable {
    fn default() -> Self {
        Self::new()
    }
}

impl WeightTable {
    /// The state at boot, before any bandwidth is reported: `wi_state`
    /// NULL (auto mode, every weight 1), no bandwidth.
    pub const fn new() -> WeightTable {
        WeightTable {
            state: None,
            bw: None,
        }
    }

    /// The weights (`rcu_dereference(wi_state)` in the kernel's readers):
    /// all unset, i.e. every weight 1, in the initial state.
    pub fn weights(&self) -> Weights {
        match self.state {
            Some(s) => Weights::from_table(s.iw_table),
            None => Weights::new(),
        }
    }

    /// The `auto` flag as `weighted_interleave_auto_show()` reads it: true
    /// in the initial state.
    pub fn is_auto(&self) -> bool {
        self.state.is_none_or(|s| s.mode_auto)
    }

    /// Whether bandwidth was ever reported (`node_bw_table` non-NULL).
    pub fn has_bandwidth(&self) -> bool {
        self.bw.is_some()
    }

    /// The current `wi_state`; `None` is the kernel's NULL.
    pub fn state(&self) -> Option<WiState> {
        self.state
    }

    /// The table the next manual change starts from: the current one, or
    /// all 1s from the initial state.
    fn manual_base(&self) -> [u8; MAX_NUMNODES] {
        self.state.map_or([1u8; MAX_NUMNODES], |s| s.iw_table)
    }

    /// A new auto-mode state reduced from `bw` over `has_memory`: the
    /// kernel fills the new `iw_table` with 1s, then
    /// `reduce_interleave_weights()` overwrites the nodes with memory.
    fn reduced(bw: &[NodeBw; MAX_NUMNODES], has_memory: Nodemask) -> WiState {
        let mut min = [0u32; MAX_NUMNODES];
        for (m, b) in min.iter_mut().zip(bw.iter()) {
            // Unreported nodes read 0 (the kernel's table is kcalloc'ed).
            *m = interleave::bw_from_coords(b.read_mbps, b.write_mbps);
        }
        let mut iw_table = [1u8; MAX_NUMNODES];
        interleave::reduce_interleave_weights(&min, has_memory, &mut iw_table);
        WiState {
            mode_auto: true,
            iw_table,
        }
    }

    /// `node_store()` (mm/mempolicy.c): `buf` parsed as `kstrtou8(buf, 0,
    /// &weight)`; 0, over 255, empty or not a number is
    /// [`TableError::Invalid`] and leaves the table alone, as is a `nid` of
    /// `MAX_NUMNODES` or more. Otherwise copy the table (all 1s from the
    /// initial state), set `nid`'s weight and switch to manual mode.
    pub fn node_store(&mut self, nid: usize, buf: &[u8]) -> Result<(), TableError> {
        let weight = interleave::parse_weight(buf)?;
        if nid >= MAX_NUMNODES {
            return Err(TableError::Invalid);
        }
        let mut iw_table = self.manual_base();
        iw_table[nid] = weight;
        self.state = Some(WiState {
            mode_auto: false,
            iw_table,
        });
        Ok(())
    }

    /// `weighted_interleave_auto_store()` (mm/mempolicy.c), with the nodes
    /// that have memory (`for_each_node_state(nid, N_MEMORY)` inside
    /// `reduce_interleave_weights()`):
    /// - not a `kstrtobool()` boolean: [`TableError::Invalid`];
    /// - the mode it already is in: nothing changes (from the initial
    ///   state the kernel goes on, as NULL is compared with nothing);
    /// - false: manual mode, weights kept (all 1 from the initial state);
    /// - true without bandwidth: [`TableError::NoBandwidth`], no change;
    /// - true: auto mode, weights reduced from the bandwidth table.
    pub fn auto_store(&mut self, buf: &[u8], has_memory: Nodemask) -> Result<(), TableError> {
        let input = interleave::parse_bool_auto(buf)?;
        if self.state.is_some_and(|s| s.mode_auto == input) {
            return Ok(());
        }
        if !input {
            self.state = Some(WiState {
                mode_auto: false,
                iw_table: self.manual_base(),
            });
            return Ok(());
        }
        let bw = self.bw.as_ref().ok_or(TableError::NoBandwidth)?;
        self.state = Some(Self::reduced(bw, has_memory));
        Ok(())
    }

    /// `mempolicy_set_node_perf()` (mm/mempolicy.c) for one node: its
    /// bandwidth becomes `(read, write)` MB/s (stored even in manual mode,
    /// for a later switch to auto); in auto mode, including the initial
    /// state, every weight is then recomputed. A `nid` of `MAX_NUMNODES`
    /// or more is ignored.
    pub fn set_node_perf(
        &mut self,
        nid: usize,
        read_mbps: u32,
        write_mbps: u32,
        has_memory: Nodemask,
    ) {
        let bw = self.bw.get_or_insert([NodeBw::default(); MAX_NUMNODES]);
        if let Some(slot) = bw.get_mut(nid) {
            *slot = NodeBw {
                read_mbps,
                write_mbps,
                set: true,
            };
        }
        if self.state.is_some_and(|s| !s.mode_auto) {
            // Manual mode: the kernel skips reducing weights.
            return;
        }
        let state = Self::reduced(bw, has_memory);
        self.state = Some(state);
    }

    /// A write to the `bandwidth` file: lines `NID READ_MBPS WRITE_MBPS`
    /// ([`BwLines`]), each applied as [`set_node_perf`](Self::set_node_perf)
    /// in order. A malformed line, a NID of `nodes` (`nr_node_ids`) or more,
    /// a value over `u32::MAX` or no line at all fails the whole write with
    /// [`TableError::Invalid`] before anything is applied.
    pub fn bandwidth_store(
        &mut self,
        buf: &[u8],
        nodes: usize,
        has_memory: Nodemask,
    ) -> Result<(), TableError> {
        let mut count = 0usize;
        for line in BwLines::new(buf) {
            let (nid, _, _) = line?;
            if nid >= nodes.min(MAX_NUMNODES) {
                return Err(TableError::Invalid);
            }
            count += 1;
        }
        if count == 0 {
            return Err(TableError::Invalid);
        }
        for line in BwLines::new(buf) {
            let (nid, r, w) = line?;
            self.set_node_perf(nid, r, w, has_memory);
        }
        Ok(())
    }

    /// What the `bandwidth` file reads: `(nid, read_mbps, write_mbps)` of
    /// every reported node, by node id.
    pub fn bandwidth(&self) -> impl Iterator<Item = (usize, u32, u32)> + '_ {
        self.bw
            .iter()
            .flat_map(|bw| bw.iter().enumerate())
            .filter(|(_, b)| b.set)
            .map(|(nid, b)| (nid, b.read_mbps, b.write_mbps))
    }
}

/// The non-blank lines of a `bandwidth` write, each parsed as `(nid,
/// read_mbps, write_mbps)`: three decimal fields (ASCII digits only, no
/// sign, at most `u32::MAX`) separated by spaces, tabs or `\r`. Like sysfs,
/// the bytes end at the first NUL.
pub struct BwLines<'a> {
    rest: &'a [u8],
}

impl<'a> BwLines<'a> {
    /// The lines of `buf`, up to its first NUL.
    pub fn new(buf: &'a [u8]) -> Self {
        let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
        BwLines { rest: &buf[..end] }
    }

    /// A decimal `u32`: ASCII digits only, no sign, no overflow.
    pub fn number(field: &[u8]) -> Result<u32, TableError> {
        if field.is_empty() {
            return Err(TableError::Invalid);
        }
        let mut v: u32 = 0;
        for &c in field {
            if !c.is_ascii_digit() {
                return Err(TableError::Invalid);
            }
            v = v
                .checked_mul(10)
                .and_then(|v| v.checked_add(u32::from(c - b'0')))
                .ok_or(TableError::Invalid)?;
        }
        Ok(v)
    }

    /// One line: exactly three fields.
    pub fn parse(line: &[u8]) -> Result<(usize, u32, u32), TableError> {
        let mut fields = line
            .split(|&c| c == b' ' || c == b'\t' || c == b'\r')
            .filter(|f| !f.is_empty());
        let nid = Self::number(fields.next().ok_or(TableError::Invalid)?)?;
        let r = Self::number(fields.next().ok_or(TableError::Invalid)?)?;
        let w = Self::number(fields.next().ok_or(TableError::Invalid)?)?;
        if fields.next().is_some() {
            return Err(TableError::Invalid);
        }
        Ok((nid as usize, r, w))
    }
}

impl Iterator for BwLines<'_> {
    type Item = Result<(usize, u32, u32), TableError>;

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
