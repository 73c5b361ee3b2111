//! Sockets and their weight tables from the firmware: which CPU nodes form
//! each socket (a CPU package, `physical_package_id`, as tierkit's
//! `module/src/wi/socket.rs` counts it), which node each ACPI proximity
//! domain became, and one weight table per socket from HMAT's bandwidth
//! from that socket's CPUs ([`crate::topology::hmat`]).

use crate::topology::hmat::{Hmat, Srat};
use crate::topology::node::{self, NODE_SYSFS};
use crate::topology::weights::table_from_bandwidth;
use std::collections::BTreeMap;
use std::fs;

/// The firmware's tables, as Linux exports them.
pub const HMAT_PATH: &str = "/sys/firmware/acpi/tables/HMAT";
pub const SRAT_PATH: &str = "/sys/firmware/acpi/tables/SRAT";
const MEMORY_SYSFS: &str = "/sys/devices/system/memory";

/// One socket: its package id, its CPU nodes, one of its CPUs, all its
/// online CPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Socket {
    pub id: u32,
    pub cpu_nodes: u64,
    pub cpu: u32,
    pub cpus: Vec<u32>,
}

fn read(path: &str) -> Result<String, String> {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("{path}: {e}"))
}

fn list(path: &str) -> Result<Vec<u32>, String> {
    node::parse_list(&read(path)?).map_err(|e| format!("{path}: {e:#}"))
}

/// The sockets with online CPUs, by package id: each CPU node's `cpulist`
/// and each CPU's `topology/physical_package_id`.
pub fn read_sockets() -> Result<Vec<Socket>, String> {
    let mut by_id: BTreeMap<u32, Socket> = BTreeMap::new();
    for n in list(&format!("{NODE_SYSFS}/has_cpu"))? {
        for cpu in list(&format!("{NODE_SYSFS}/node{n}/cpulist"))? {
            let p = format!("/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id");
            let pkg = read(&p)?;
            let id: u32 = pkg.parse().map_err(|_| format!("{p}: {pkg:?}"))?;
            let s = by_id.entry(id).or_insert(Socket {
                id,
                cpu_nodes: 0,
                cpu,
                cpus: Vec::new(),
            });
            s.cpu_nodes |= 1 << n;
            s.cpus.push(cpu);
        }
    }
    Ok(by_id.into_values().collect())
}

/// Which node each proximity domain of `srat` is: a memory range's domain
/// is the node of a memory block inside it (`block_node(block id)`,
/// `block_size` bytes each), a CPU's domain the node of that CPU
/// (`apic_node(APIC id)`). Domains neither finds are left out.
pub fn domain_nodes(
    srat: &Srat,
    block_size: u64,
    block_node: impl Fn(u64) -> Option<u32>,
    apic_node: impl Fn(u32) -> Option<u32>,
) -> BTreeMap<u32, u32> {
    let mut out = BTreeMap::new();
    for &(pxm, base, len) in &srat.memory {
        if block_size == 0 || out.contains_key(&pxm) {
            continue;
        }
        let last = base.saturating_add(len - 1) / block_size;
        if let Some(n) = (base / block_size..=last).find_map(&block_node) {
            out.insert(pxm, n);
        }
    }
    for &(pxm, apic) in &srat.cpus {
        if let (false, Some(n)) = (out.contains_key(&pxm), apic_node(apic)) {
            out.insert(pxm, n);
        }
    }
    out
}

/// One weight table per socket from HMAT: for each memory node, the best
/// bandwidth (`min(read, write)` as the kernel's auto weights take it)
/// from any of the socket's CPU nodes, reduced to weights as the kernel's
/// `reduce_interleave_weights()` does ([`table_from_bandwidth`]). Every
/// (socket, memory node) pair must have a figure.
pub fn tables_from_hmat(
    hmat: &Hmat,
    domains: &BTreeMap<u32, u32>,
    sockets: &[Socket],
    memory: u64,
) -> Result<Vec<(u32, [u8; 64])>, String> {
    let pxms_of = |mask: u64| -> Vec<u32> {
        domains
            .iter()
            .filter(|&(_, &n)| n < 64 && mask >> n & 1 == 1)
            .map(|(&p, _)| p)
            .collect()
    };
    let mut out = Vec::new();
    for s in sockets {
        let inits = pxms_of(s.cpu_nodes);
        let mut entries = Vec::new();
        for target in node::nodes_of(memory) {
            let best = pxms_of(1 << target)
                .iter()
                .flat_map(|&t| inits.iter().filter_map(move |&i| hmat.bandwidth(i, t)))
                .max_by_key(|&(r, w)| r.min(w));
            let Some((r, w)) = best else {
                return Err(format!(
                    "HMAT gives no bandwidth from socket {} (nodes {}) to node {target}",
                    s.id,
                    node::fmt_mask(s.cpu_nodes)
                ));
            };
            entries.push((target, r, w));
        }
        out.push((s.id, table_from_bandwidth(&entries, memory)));
    }
    Ok(out)
}

/// The node of memory block `id` (its `nodeN` link), if it is online.
fn block_node(id: u64) -> Option<u32> {
    let dir = fs::read_dir(format!("{MEMORY_SYSFS}/memory{id}")).ok()?;
    dir.filter_map(|e| e.ok())
        .find_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
}

/// APIC id to node, from `/proc/cpuinfo` and each CPU's `nodeN` link.
fn apic_nodes() -> BTreeMap<u32, u32> {
    let mut out = BTreeMap::new();
    let info = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let mut cpu = None;
    for l in info.lines() {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        match k.trim() {
            "processor" => cpu = v.trim().parse::<u32>().ok(),
            "apicid" => {
                let (Some(c), Ok(apic)) = (cpu, v.trim().parse::<u32>()) else {
                    continue;
                };
                let n = fs::read_dir(format!("/sys/devices/system/cpu/cpu{c}"))
                    .ok()
                    .and_then(|d| {
                        d.filter_map(|e| e.ok()).find_map(|e| {
                            e.file_name().to_str()?.strip_prefix("node")?.parse().ok()
                        })
                    });
                if let Some(n) = n {
                    out.insert(apic, n);
                }
            }
            _ => {}
        }
    }
    out
}

/// The live machine's HMAT, and which node each proximity domain is (from
/// its SRAT, memory blocks and CPUs).
pub fn read_firmware() -> Result<(Hmat, BTreeMap<u32, u32>), String> {
    let raw = |p: &str| fs::read(p).map_err(|e| format!("{p}: {e}"));
    let hmat = Hmat::parse(&raw(HMAT_PATH)?).map_err(|e| format!("{HMAT_PATH}: {e}"))?;
    let srat = Srat::parse(&raw(SRAT_PATH)?).map_err(|e| format!("{SRAT_PATH}: {e}"))?;
    let bs = read(&format!("{MEMORY_SYSFS}/block_size_bytes"))?;
    let bs = u64::from_str_radix(&bs, 16).map_err(|_| format!("block_size_bytes {bs:?}"))?;
    let apics = apic_nodes();
    let domains = domain_nodes(&srat, bs, block_node, |a| apics.get(&a).copied());
    Ok((hmat, domains))
}

/// The live machine's per-socket tables from its HMAT and SRAT, over the
/// nodes with memory.
pub fn hmat_tables() -> Result<Vec<(u32, [u8; 64])>, String> {
    let (hmat, domains) = read_firmware()?;
    let memory = node::mask_of(&list(&format!("{NODE_SYSFS}/has_memory"))?);
    tables_from_hmat(&hmat, &domains, &read_sockets()?, memory)
}

/// `socket2`'s sockets: node 0's CPU 0 and node 1's CPU 1 (host tests).
#[cfg(test)]
pub fn socket2_sockets() -> Vec<Socket> {
    vec![
        Socket {
            id: 0,
            cpu_nodes: 0b01,
            cpu: 0,
            cpus: vec![0],
        },
        Socket {
            id: 1,
            cpu_nodes: 0b10,
            cpu: 1,
            cpus: vec![1],
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::hmat::{Locality, ACCESS_BANDWIDTH};
    use crate::topology::weights::weights_from_bandwidth;

    /// The `socket2` machine: sockets {0}, {1}; memory-only nodes 2 (near
    /// socket 0) and 3 (near socket 1); bandwidth in MB/s.
    fn socket2() -> (Hmat, Vec<Socket>) {
        let h = Hmat {
            revision: 2,
            domains: Vec::new(),
            localities: vec![Locality {
                hierarchy: 0,
                data_type: ACCESS_BANDWIDTH,
                initiators: vec![0, 1],
                targets: vec![0, 1, 2, 3],
                base_unit: 1000,
                entries: vec![300, 150, 100, 50, 150, 300, 50, 100],
            }],
        };
        (h, socket2_sockets())
    }

    #[test]
    fn a_table_per_socket() {
        let (h, s) = socket2();
        let dom: BTreeMap<u32, u32> = (0..4).map(|p| (p, p)).collect();
        let t = tables_from_hmat(&h, &dom, &s, 0xf).unwrap();
        // The kernel's reduction of 300:150:100:50 (nodes 0, 1, 2, 3): 16:8:5:2.
        let want0 = weights_from_bandwidth(
            &[
                (0, 300_000, 300_000),
                (1, 150_000, 150_000),
                (2, 100_000, 100_000),
                (3, 50_000, 50_000),
            ],
            0xf,
        );
        assert_eq!(&t[0].1[..4], &want0[..4]);
        // Nodes without memory weigh 0: the ABI refuses a weight there.
        assert!(t.iter().all(|(_, w)| w[4..].iter().all(|&x| x == 0)));
        assert_eq!(&t[0].1[..4], &[16, 8, 5, 2]);
        // Socket 1 sees the mirror image.
        assert_eq!(&t[1].1[..4], &[8, 16, 2, 5]);
        // Domains renumbered: the tables follow the nodes, not the domains.
        let dom: BTreeMap<u32, u32> = [(0, 0), (1, 1), (2, 3), (3, 2)].into();
        let t = tables_from_hmat(&h, &dom, &s, 0xf).unwrap();
        assert_eq!(&t[0].1[..4], &[16, 8, 2, 5]);
        // A memory node without a figure from a socket is refused.
        let dom: BTreeMap<u32, u32> = (0..3).map(|p| (p, p)).collect();
        let e = tables_from_hmat(&h, &dom, &s, 0xf).unwrap_err();
        assert!(e.contains("socket 0") && e.contains("node 3"), "{e}");
    }

    #[test]
    fn domains_to_nodes() {
        let srat = Srat {
            cpus: vec![(0, 0), (1, 1), (4, 9)],
            memory: vec![
                (0, 0, 1 << 30),
                (1, 1 << 30, 1 << 30),
                (2, 3 << 30, 1 << 27),
            ],
        };
        // 128 MiB blocks; block 8..16 are node 1's, 24 node 2's, the rest 0.
        let block = |b: u64| match b {
            0..=7 => Some(0),
            8..=15 => Some(1),
            24 => Some(2),
            _ => None,
        };
        let apic = |a: u32| (a == 9).then_some(5);
        let m = domain_nodes(&srat, 1 << 27, block, apic);
        assert_eq!(m, [(0, 0), (1, 1), (2, 2), (4, 5)].into());
    }
}
