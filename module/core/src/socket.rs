//! Per-socket weights: a weight table per source socket, and the choice of
//! the nodes and weights an allocation places by given the socket it runs
//! on.
//!
//! A socket is a CPU package (`topology_physical_package_id()` of a CPU,
//! `/sys/devices/system/cpu/cpuN/topology/physical_package_id`); its CPU
//! nodes are the nodes whose CPUs sit in that package. A socket's table
//! gives every memory node a weight of 0..=255, where 0 takes the node out
//! of that socket's candidates. Which table an allocation uses, and what
//! happens without one, is [`SocketWeights::pick`]; the rules are written
//! out for users in Documentation/mm/weighted-interleave.md.
//!
//! Compiled into `tierkit.ko` as well (see `interleave.rs` for the rules
//! that implies: `core::` only, no allocation, no panic on any input).

use crate::nodemask::{Nodemask, MAX_NUMNODES};
use crate::weights::Weights;

/// Most sockets a table can be set for: socket ids `0..MAX_SOCKETS`.
pub const MAX_SOCKETS: usize = crate::uapi::TK_MAX_SOCKETS as usize;

/// Why a socket table is refused (each is one errno of the ABI).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocketError {
    /// The socket id has no online CPU, or is `>= MAX_SOCKETS`: `ENOENT`.
    UnknownSocket,
    /// The table's length is not the number of possible node ids
    /// (`nr_node_ids`), or it has a non-zero weight past it: `EINVAL`.
    SizeMismatch,
    /// A non-zero weight for a node without memory: `ENXIO`.
    NoMemory,
    /// Every weight is 0: `EINVAL`.
    ZeroSum,
}

/// Checks a socket's table as the ABI receives it: `nr_nodes` entries
/// (must be `nr_node_ids`), weights 0..=255, non-zero only on nodes of
/// `has_memory`, and not all 0. The checks run in this order, so an input
/// with several faults gets the first one's error.
pub fn check_table(
    table: &[u8; MAX_NUMNODES],
    nr_nodes: u32,
    nr_node_ids: usize,
    has_memory: Nodemask,
) -> Result<(), SocketError> {
    if nr_nodes as usize != nr_node_ids || nr_node_ids > MAX_NUMNODES {
        return Err(SocketError::SizeMismatch);
    }
    let mut sum = 0u32;
    for (nid, &w) in table.iter().enumerate() {
        if w == 0 {
            continue;
        }
        if nid >= nr_node_ids {
            return Err(SocketError::SizeMismatch);
        }
        if !has_memory.contains(nid) {
            return Err(SocketError::NoMemory);
        }
        sum = sum.saturating_add(u32::from(w));
    }
    if sum == 0 {
        return Err(SocketError::ZeroSum);
    }
    Ok(())
}

/// Per-socket weight tables, one optional table per socket id. Used twice:
/// device-wide, and per `/dev/tierkit` file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketWeights {
    /// Bit `s`: socket `s` has a table.
    set: u8,
    tables: [[u8; MAX_NUMNODES]; MAX_SOCKETS],
}

impl Default for SocketWeights {
    fn default() -> Self {
        SocketWeights::new()
    }
}

impl SocketWeights {
    /// No socket has a table.
    pub const fn new() -> SocketWeights {
        SocketWeights {
            set: 0,
            tables: [[0; MAX_NUMNODES]; MAX_SOCKETS],
        }
    }

    /// Whether no socket has a table.
    pub const fn is_empty(&self) -> bool {
        self.set == 0
    }

    /// Socket `socket`'s table, if it has one.
    pub fn get(&self, socket: usize) -> Option<&[u8; MAX_NUMNODES]> {
        if socket >= MAX_SOCKETS || self.set & (1 << socket) == 0 {
            return None;
        }
        self.tables.get(socket)
    }

    /// Sets socket `socket`'s table (checked by the caller with
    /// [`check_table`]). `UnknownSocket` for `socket >= MAX_SOCKETS`.
    pub fn set(&mut self, socket: usize, table: [u8; MAX_NUMNODES]) -> Result<(), SocketError> {
        let slot = self
            .tables
            .get_mut(socket)
            .ok_or(SocketError::UnknownSocket)?;
        *slot = table;
        self.set |= 1 << socket;
        Ok(())
    }

    /// Removes socket `socket`'s table: it falls back again.
    pub fn clear(&mut self, socket: usize) {
        if socket < MAX_SOCKETS {
            self.set &= !(1 << socket);
        }
    }

    /// The nodes and weights an allocation on `socket` places by, for a
    /// weighted-interleave policy over `mask` whose weights are otherwise
    /// `base` (the file's own, or tierkit's table):
    ///
    /// - no table for `socket`: `(mask, base)`, exactly today's placement;
    /// - a table: the candidates are `mask ∩ {nodes the table weighs > 0}`,
    ///   weighted by the table (a node in several sockets' tables is a
    ///   candidate for each, with each table's weight);
    /// - a table none of whose nodes is in `mask` (a nodemask or cpuset
    ///   without the socket's nodes): `(mask, base)` again, so that an
    ///   allocation never fails for want of a candidate.
    ///
    /// The result's mask is never empty for a non-empty `mask`.
    pub fn pick(
        &self,
        socket: Option<usize>,
        mask: Nodemask,
        base: Weights,
    ) -> (Nodemask, Weights) {
        let table = match socket.and_then(|s| self.get(s)) {
            Some(t) => t,
            None => return (mask, base),
        };
        let mut cand = Nodemask::EMPTY;
        for nid in mask.iter() {
            if table.get(nid).is_some_and(|&w| w != 0) {
                cand = cand.with(nid);
            }
        }
        if cand.is_empty() {
            (mask, base)
        } else {
            (cand, Weights::from_table(*table))
        }
    }
}

/// The two levels of per-socket tables a file places by: its own, then the
/// device's. [`Levels::pick`] is the whole rule.
#[derive(Clone, Copy, Debug)]
pub struct Levels<'a> {
    /// The file's own per-socket tables.
    pub file: &'a SocketWeights,
    /// The file's own flat weights (`TK_POLICY_F_WEIGHTS`), if any.
    pub file_flat: Option<Weights>,
    /// The device-wide per-socket tables.
    pub device: &'a SocketWeights,
    /// tierkit's global weight table, read now.
    pub global: Weights,
}

impl Levels<'_> {
    /// The nodes and weights for an allocation on `socket` under a
    /// weighted-interleave policy over `mask`. The file's settings beat the
    /// device's, and at each level a socket's table beats the flat weights:
    /// the file's table for `socket`, else the file's own flat weights, else
    /// the device's table for `socket`, else tierkit's global table. A table
    /// with no candidate in `mask` is passed over, as if it were not set.
    pub fn pick(&self, socket: Option<usize>, mask: Nodemask) -> (Nodemask, Weights) {
        if self.file.get_for(socket, mask) {
            return self.file.pick(socket, mask, Weights::new());
        }
        if let Some(flat) = self.file_flat {
            return (mask, flat);
        }
        self.device.pick(socket, mask, self.global)
    }
}

impl SocketWeights {
    /// Whether `socket` has a table with at least one candidate in `mask`.
    pub fn get_for(&self, socket: Option<usize>, mask: Nodemask) -> bool {
        match socket.and_then(|s| self.get(s)) {
            Some(t) => mask.iter().any(|nid| t.get(nid).is_some_and(|&w| w != 0)),
            None => false,
        }
    }
}
