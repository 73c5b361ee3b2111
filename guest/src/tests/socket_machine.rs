//! `tk-test-socket`'s machine: the sockets and nodes as sysfs shows them,
//! and pinning a thread to a socket. Shared by its two parts (`socket`,
//! the ABI against the model; `socket_run`, the firmware's tables and
//! tk-run).

use crate::tools::workload::pin_to_cpu;
use std::collections::BTreeMap;
use std::fs;

const NODE_SYSFS: &str = "/sys/devices/system/node";

/// One socket as sysfs shows it.
#[derive(Clone, Debug)]
pub(super) struct Socket {
    pub(super) id: u32,
    /// A CPU of the socket, to pin to.
    pub(super) cpu: u32,
    /// Its CPU nodes.
    pub(super) cpu_nodes: u64,
    /// Memory-only nodes nearest to one of its CPU nodes (SLIT distance).
    pub(super) near_mem: u64,
}

/// The machine: sockets, nodes with memory, `nr_node_ids`.
pub(super) struct Machine {
    pub(super) sockets: Vec<Socket>,
    pub(super) memory: u64,
    pub(super) nr_node_ids: u32,
}

fn read(path: &str) -> Result<String, String> {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("{path}: {e}"))
}

fn list(path: &str) -> Result<Vec<u32>, String> {
    crate::topology::node::parse_list(&read(path)?).map_err(|e| format!("{path}: {e:#}"))
}

/// Sockets as [`crate::topology::sockets::read_sockets`] reads them (each CPU
/// node's `cpulist`, each CPU's `physical_package_id`); each memory-only
/// node goes to the socket of its nearest CPU node by `distance`.
pub(super) fn machine() -> Result<Machine, String> {
    let cpu_nodes = list(&format!("{NODE_SYSFS}/has_cpu"))?;
    let memory = list(&format!("{NODE_SYSFS}/has_memory"))?;
    let possible = list(&format!("{NODE_SYSFS}/possible"))?;
    let online = list(&format!("{NODE_SYSFS}/online"))?;
    let mut by_id: BTreeMap<u32, Socket> = BTreeMap::new();
    let mut node_socket = BTreeMap::new();
    for s in crate::topology::sockets::read_sockets()? {
        for n in crate::topology::node::nodes_of(s.cpu_nodes) {
            node_socket.insert(n, s.id);
        }
        by_id.insert(
            s.id,
            Socket {
                id: s.id,
                cpu: s.cpu,
                cpu_nodes: s.cpu_nodes,
                near_mem: 0,
            },
        );
    }
    for &m in memory.iter().filter(|m| !cpu_nodes.contains(m)) {
        let d: Vec<u32> = read(&format!("{NODE_SYSFS}/node{m}/distance"))?
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        // `distance` lists the online nodes in order.
        let nearest = cpu_nodes
            .iter()
            .filter_map(|c| online.iter().position(|o| o == c).map(|i| (d.get(i), c)))
            .min_by_key(|(d, _)| *d)
            .and_then(|(_, c)| node_socket.get(c));
        if let Some(s) = nearest.and_then(|id| by_id.get_mut(id)) {
            s.near_mem |= 1 << m;
        }
    }
    Ok(Machine {
        sockets: by_id.into_values().collect(),
        memory: crate::topology::node::mask_of(&memory),
        nr_node_ids: possible.iter().max().map_or(0, |m| m + 1),
    })
}

pub(super) fn pin(s: &Socket) -> Result<(), String> {
    pin_to_cpu(s.cpu).map_err(|e| format!("pin to CPU {}: {e}", s.cpu))
}

/// Runs `f` on a thread of its own, so that pinning it leaves the
/// caller's affinity alone.
pub(super) fn pinned(f: impl FnOnce() -> Result<String, String> + Send) -> Result<String, String> {
    std::thread::scope(|sc| {
        sc.spawn(f)
            .join()
            .unwrap_or_else(|_| Err("the pinned thread panicked".into()))
    })
}
