// SPDX-License-Identifier: GPL-2.0

//! Worker placement: which CPUs clear the memory of a node.

use crate::shim::{self, node};
use crate::uapi;
use kernel::{bindings, prelude::*};

/// Where the workers run, relative to the memory they clear.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// CPUs of the memory's node, or of the nearest node with CPUs when the
    /// memory's node has none (a CXL node): `numa_nearest_node(nid, N_CPU)`.
    Local,
    /// CPUs of another node with CPUs: of those, the nearest to the memory
    /// by `node_distance()`, lowest id on ties.
    Remote,
    /// Any online CPU.
    Any,
}

impl Placement {
    /// The placement of a `TK_PLACE_*` value; `EINVAL` for others.
    pub(crate) fn from_uapi(v: u32) -> Result<Self> {
        match v {
            uapi::TK_PLACE_LOCAL => Ok(Self::Local),
            uapi::TK_PLACE_REMOTE => Ok(Self::Remote),
            uapi::TK_PLACE_ANY => Ok(Self::Any),
            _ => Err(EINVAL),
        }
    }

    /// The `TK_PLACE_*` value.
    pub(crate) fn to_uapi(self) -> u32 {
        match self {
            Self::Local => uapi::TK_PLACE_LOCAL,
            Self::Remote => uapi::TK_PLACE_REMOTE,
            Self::Any => uapi::TK_PLACE_ANY,
        }
    }

    /// The name used in messages and by the benchmark.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Remote => "remote",
            Self::Any => "any",
        }
    }
}

/// The node whose CPUs are local to the memory of `nid`: `nid` itself if
/// it has online CPUs, else `numa_nearest_node(nid, N_CPU)`.
pub(crate) fn local_cpu_node(nid: usize) -> Option<usize> {
    if !node::online(nid) {
        return None;
    }
    if node::nr_cpus(nid) > 0 {
        return Some(nid);
    }
    // SAFETY: `nid` is an online node.
    let near = unsafe { bindings::numa_nearest_node(nid as c_int, bindings::node_states_N_CPU) };
    // numa_nearest_node() returns `nid` itself when no node has CPUs.
    if near < 0 || node::nr_cpus(near as usize) == 0 {
        return None;
    }
    Some(near as usize)
}

/// The node whose CPUs are remote to the memory of `nid`: the nearest node
/// with online CPUs other than [`local_cpu_node`].
pub(crate) fn remote_cpu_node(nid: usize) -> Option<usize> {
    let local = local_cpu_node(nid)?;
    let mut best: Option<(c_int, usize)> = None;
    for m in 0..node::nr_node_ids() {
        if m == local || node::nr_cpus(m) == 0 {
            continue;
        }
        // SAFETY: both nodes are online (`nid` by `local_cpu_node`, `m`
        // because it has online CPUs); `__node_distance` is exported.
        let d = unsafe { bindings::__node_distance(nid as c_int, m as c_int) };
        if best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, m));
        }
    }
    best.map(|(_, m)| m)
}

/// The CPUs workers may run on, in ascending order, and the node they
/// belong to (-1 for [`Placement::Any`]).
/// Online CPUs (`num_online_cpus()`): the most workers any clear can use.
pub(crate) fn nr_online_cpus() -> u32 {
    let ids = kernel::cpu::nr_cpu_ids();
    // SAFETY: the shim range-checks `cpu`.
    (0..ids)
        .filter(|&cpu| unsafe { shim::tk_cpu_online(cpu as c_int) })
        .count() as u32
}

pub(crate) struct CpuSet {
    cpus: KVec<u32>,
    node: i32,
}

impl CpuSet {
    /// The eligible CPUs to clear memory of node `nid` with `placement`.
    ///
    /// Errors: `EINVAL` when no node qualifies (`remote` on a machine with
    /// one node with CPUs) or it has no online CPU; `ENOMEM`.
    pub(crate) fn for_memory(nid: usize, placement: Placement) -> Result<Self> {
        let node = match placement {
            Placement::Local => Some(local_cpu_node(nid).ok_or(EINVAL)?),
            Placement::Remote => match remote_cpu_node(nid) {
                Some(m) => Some(m),
                None => {
                    pr_debug!("clear: no node with CPUs is remote to node {}\n", nid);
                    return Err(EINVAL);
                }
            },
            Placement::Any => None,
        };
        let mut cpus = KVec::new();
        match node {
            Some(n) => {
                let mut cpu: c_int = -1;
                loop {
                    // SAFETY: `n` is an online node.
                    cpu = unsafe { shim::tk_node_next_cpu(n as c_int, cpu) };
                    if cpu < 0 || cpu as u32 >= kernel::cpu::nr_cpu_ids() {
                        break;
                    }
                    cpus.push(cpu as u32, GFP_KERNEL)?;
                }
            }
            None => {
                let ids = kernel::cpu::nr_cpu_ids();
                for cpu in 0..ids {
                    // SAFETY: the shim range-checks `cpu`.
                    if unsafe { shim::tk_cpu_online(cpu as c_int) } {
                        cpus.push(cpu, GFP_KERNEL)?;
                    }
                }
            }
        }
        if cpus.is_empty() {
            return Err(EINVAL);
        }
        Ok(Self {
            cpus,
            node: node.map_or(-1, |n| n as i32),
        })
    }

    /// The CPUs, ascending.
    pub(crate) fn cpus(&self) -> &[u32] {
        &self.cpus
    }

    /// Number of eligible CPUs: the largest valid thread count.
    pub(crate) fn len(&self) -> u32 {
        self.cpus.len() as u32
    }

    /// The node of the CPUs, -1 for `any`.
    pub(crate) fn node(&self) -> i32 {
        self.node
    }

    /// Whether `cpu` is eligible.
    pub(crate) fn contains(&self, cpu: u32) -> bool {
        self.cpus.contains(&cpu)
    }
}
