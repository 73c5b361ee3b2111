// SPDX-License-Identifier: GPL-2.0

//! Weighted interleave: tierkit's weight table and the per-file policy.
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
//!
//! The module has one global [`Wi`], part of the device's state
//! ([`crate::state::DeviceState`]); KUnit tests build their own, so they
//! never disturb the table userspace sees.

pub(crate) mod debugfs;
pub(crate) mod socket;
mod tests;

pub(crate) use crate::shim::node::possible_nodes;

use crate::interleave::{self, Nodemask, Selector, WeightError, Weights, MAX_NUMNODES};
use crate::shim::node;
use crate::uapi;
use crate::socket::SocketWeights;
use crate::wi_table::{TableError, WeightTable};
use kernel::{fmt, new_mutex, prelude::*, sync::Mutex};

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

/// The nodes the calling task's cpuset allows (`cpuset_current_mems_allowed`,
/// ids `< 64`), read once: `N_MEMORY` without cpusets, or in the root
/// cpuset.
pub(crate) fn cpuset_mems() -> Nodemask {
    // SAFETY: process context (every caller is a file operation or a
    // fault, or KUnit's thread).
    Nodemask(unsafe { crate::shim::tk_current_mems_allowed() })
}

/// The nodes with memory that the calling task's cpuset allows
/// (`cpuset_current_mems_allowed ∩ N_MEMORY`), as `mpol_set_nodemask()`
/// cuts a new policy's nodes.
pub(crate) fn allowed_memory_nodes() -> Nodemask {
    cpuset_mems().and(memory_nodes())
}

/// tierkit's weight table: a mirror of mm/mempolicy.c's `wi_state` +
/// `node_bw_table`.
#[pin_data]
pub(crate) struct Wi {
    /// `wi_state_lock` with what it protects.
    #[pin]
    table: Mutex<WeightTable>,
    /// The device-wide per-socket tables (`TK_IOC_SOCKET_WEIGHTS` with
    /// `TK_SOCKET_F_DEVICE`); see [`socket`].
    #[pin]
    sockets: Mutex<SocketWeights>,
}

impl Wi {
    /// The initial state, as the kernel's at boot before any bandwidth is
    /// reported: `wi_state` NULL (auto mode, every weight 1), no bandwidth.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Wi {
            table <- new_mutex!(WeightTable::new(), "tierkit_wi_state"),
            sockets <- new_mutex!(SocketWeights::new(), "tierkit_wi_sockets"),
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

    /// [`Policy::new_with`] against the nodes with memory the calling
    /// task's cpuset allows now, as `mpol_set_nodemask()` cuts a new
    /// policy's nodes.
    pub(crate) fn new(
        mode: u32,
        flags: u32,
        requested: u64,
        weights: &[u8; MAX_NUMNODES],
    ) -> Result<Policy> {
        Self::new_with(mode, flags, requested, weights, allowed_memory_nodes())
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
