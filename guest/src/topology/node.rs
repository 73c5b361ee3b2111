//! NUMA topology from `/sys/devices/system/node`, and nodemask helpers.

use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};

pub use crate::linux::kernel::NODE_SYSFS;

/// Parses a kernel cpu/node list such as `0-2,5` (`bitmap_parselist`
/// format, as in `has_memory`). An empty string is the empty list.
pub fn parse_list(s: &str) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let a: u32 = a
                    .trim()
                    .parse()
                    .with_context(|| format!("bad list range {part:?}"))?;
                let b: u32 = b
                    .trim()
                    .parse()
                    .with_context(|| format!("bad list range {part:?}"))?;
                if b < a {
                    bail!("bad list range {part:?}");
                }
                out.extend(a..=b);
            }
            None => out.push(
                part.trim()
                    .parse()
                    .with_context(|| format!("bad list item {part:?}"))?,
            ),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Bit N set for each node N (< 64).
pub fn mask_of(nodes: &[u32]) -> u64 {
    nodes
        .iter()
        .filter(|&&n| n < 64)
        .fold(0, |m, &n| m | 1u64 << n)
}

/// The nodes of a mask, ascending.
pub fn nodes_of(mask: u64) -> Vec<u32> {
    (0..64).filter(|n| mask & (1u64 << n) != 0).collect()
}

/// Formats a mask as a node list: `{0,1}`.
pub fn fmt_mask(mask: u64) -> String {
    let v: Vec<String> = nodes_of(mask).iter().map(|n| n.to_string()).collect();
    format!("{{{}}}", v.join(","))
}

/// The guest's nodes as the kernel's node states show them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    /// `online` (N_ONLINE).
    pub online: Vec<u32>,
    /// `has_memory` (N_MEMORY).
    pub memory: Vec<u32>,
    /// `has_cpu` (N_CPU).
    pub cpu: Vec<u32>,
}

impl Topology {
    /// Reads the live system.
    pub fn read() -> Result<Topology> {
        Self::read_from(Path::new(NODE_SYSFS))
    }

    /// Reads the state files under `root` (a copy of `/sys/devices/system/node`).
    /// A missing `has_cpu` or `has_memory` reads as empty.
    pub fn read_from(root: &Path) -> Result<Topology> {
        let get = |name: &str| -> Result<Vec<u32>> {
            let p: PathBuf = root.join(name);
            match fs::read_to_string(&p) {
                Ok(s) => parse_list(&s).with_context(|| format!("parsing {}", p.display())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
                Err(e) => Err(e).with_context(|| format!("reading {}", p.display())),
            }
        };
        Ok(Topology {
            online: get("online")?,
            memory: get("has_memory")?,
            cpu: get("has_cpu")?,
        })
    }

    /// The first node with memory and CPUs: "DRAM".
    pub fn dram_node(&self) -> Option<u32> {
        self.memory.iter().copied().find(|n| self.cpu.contains(n))
    }

    /// Nodes with memory and no CPUs: CXL-like memory-only nodes.
    pub fn memory_only(&self) -> Vec<u32> {
        self.memory
            .iter()
            .copied()
            .filter(|n| !self.cpu.contains(n))
            .collect()
    }

    /// The first memory-only node: "CXL".
    pub fn cxl_node(&self) -> Option<u32> {
        self.memory_only().first().copied()
    }

    /// Mask of N_MEMORY.
    pub fn memory_mask(&self) -> u64 {
        mask_of(&self.memory)
    }

    /// One line for logs: `online 0-1, memory {0,1}, cpu {0}, dram 0, cxl 1`.
    pub fn describe(&self) -> String {
        format!(
            "online {}, memory {}, cpu {}, dram {}, cxl {}",
            fmt_mask(mask_of(&self.online)),
            fmt_mask(mask_of(&self.memory)),
            fmt_mask(mask_of(&self.cpu)),
            self.dram_node().map_or("-".into(), |n| n.to_string()),
            self.cxl_node().map_or("-".into(), |n| n.to_string()),
        )
    }
}

/// Node `nid`'s access class 1 bandwidth (nearest CPU initiator,
/// `ACCESS_COORDINATE_CPU`, drivers/base/node.c) as `(read, write)` MB/s from
/// `accessN/initiators/{read,write}_bandwidth`, which the kernel fills from
/// HMAT or CDAT. A node made of a CXL region has no such files; its figures
/// are the region's `access1` (the same numbers the kernel's weighted
/// interleave uses, see [`crate::topology::cxl`]). `None` if neither exists (no HMAT).
pub fn access1_bandwidth(nid: u32) -> Option<(u32, u32)> {
    access_bandwidth_from(Path::new(NODE_SYSFS), nid).or_else(|| {
        let a = crate::topology::cxl::CxlBus::default()
            .region_of_node(nid)?
            .access[1]?;
        Some((a.read_bw, a.write_bw))
    })
}

/// [`access1_bandwidth`] under another root.
pub fn access_bandwidth_from(root: &Path, nid: u32) -> Option<(u32, u32)> {
    let dir = root.join(format!("node{nid}/access1/initiators"));
    let rd = |f: &str| -> Option<u32> { fs::read_to_string(dir.join(f)).ok()?.trim().parse().ok() };
    Some((rd("read_bandwidth")?, rd("write_bandwidth")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists() {
        assert_eq!(parse_list("0\n").unwrap(), vec![0]);
        assert_eq!(parse_list("0-2,5\n").unwrap(), vec![0, 1, 2, 5]);
        assert_eq!(parse_list("\n").unwrap(), Vec::<u32>::new());
        assert_eq!(parse_list("3,1-1,3").unwrap(), vec![1, 3]);
        assert!(parse_list("2-1").is_err());
        assert!(parse_list("x").is_err());
    }

    #[test]
    fn masks() {
        assert_eq!(mask_of(&[0, 1, 3]), 0b1011);
        assert_eq!(nodes_of(0b1011), vec![0, 1, 3]);
        assert_eq!(fmt_mask(0b1010), "{1,3}");
        assert_eq!(fmt_mask(0), "{}");
        assert_eq!(mask_of(&[63]), 1 << 63);
    }

    #[test]
    fn topology_from_fake_sysfs() {
        let dir = std::env::temp_dir().join(format!("tk-topo-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("online"), "0-2\n").unwrap();
        fs::write(dir.join("has_memory"), "0-2\n").unwrap();
        fs::write(dir.join("has_cpu"), "0\n").unwrap();
        let t = Topology::read_from(&dir).unwrap();
        assert_eq!(t.dram_node(), Some(0));
        assert_eq!(t.cxl_node(), Some(1));
        assert_eq!(t.memory_only(), vec![1, 2]);
        assert_eq!(t.memory_mask(), 0b111);
        let ini = dir.join("node1/access1/initiators");
        fs::create_dir_all(&ini).unwrap();
        fs::write(ini.join("read_bandwidth"), "50000\n").unwrap();
        fs::write(ini.join("write_bandwidth"), "40000\n").unwrap();
        assert_eq!(access_bandwidth_from(&dir, 1), Some((50000, 40000)));
        assert_eq!(access_bandwidth_from(&dir, 0), None);
        assert!(t.describe().contains("cxl 1"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn topology_single_node() {
        let t = Topology {
            online: vec![0],
            memory: vec![0],
            cpu: vec![0],
        };
        assert_eq!(t.dram_node(), Some(0));
        assert_eq!(t.cxl_node(), None);
    }
}
