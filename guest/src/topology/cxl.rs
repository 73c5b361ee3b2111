//! CXL regions and their dax devices, from the kernel's CXL and dax buses
//! (Documentation/ABI/testing/sysfs-bus-cxl, sysfs-bus-dax).
//!
//! A RAM region `regionZ` under `/sys/bus/cxl/devices` has a `dax_regionZ`
//! child holding the dax device (`daxZ.Y`); once kmem binds it, its memory
//! is a NUMA node, `/sys/bus/dax/devices/daxZ.Y/target_node`. The node's
//! own sysfs has no `accessN` performance for such a node (the kernel
//! computes it through the CXL stack and keeps it on the region), so
//! `regionZ/accessN/{read,write}_{bandwidth,latency}` is where it is.

use std::fs;
use std::path::{Path, PathBuf};
use tierkit_protocol::param::CXL as CXL_PARAM;

/// Where the CXL bus lists its devices.
pub const CXL_SYSFS: &str = "/sys/bus/cxl/devices";
/// Where the dax bus lists its devices.
pub const DAX_SYSFS: &str = "/sys/bus/dax/devices";

/// Access performance, `accessN/` of a region: MB/s and ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub read_bw: u32,
    pub write_bw: u32,
    pub read_lat: u32,
    pub write_lat: u32,
}

/// A region's dax device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dax {
    /// `dax0.0`.
    pub name: String,
    /// `target_node`: the node its memory went to (-1: none).
    pub target_node: i32,
    /// The bound driver (`kmem`, `device_dax`), if any.
    pub driver: Option<String>,
    /// Bytes.
    pub size: u64,
}

/// A CXL region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    /// `region0`.
    pub name: String,
    /// `commit` reads 1.
    pub committed: bool,
    /// `mode`: `ram` or `pmem`.
    pub mode: String,
    /// `size`, bytes.
    pub size: u64,
    /// `target0`: the first endpoint decoder.
    pub target0: String,
    /// `interleave_ways`: how many devices the region spreads over.
    pub ways: u32,
    /// `interleave_granularity`, bytes.
    pub granularity: u32,
    /// `target0` .. `target<ways-1>`: the endpoint decoders, by position.
    pub targets: Vec<String>,
    /// The root decoder (fixed memory window) it was created from,
    /// `decoder0.N`: the parent of the region's device.
    pub root_decoder: String,
    pub dax: Option<Dax>,
    /// `access0` (nearest initiator) and `access1` (nearest CPU).
    pub access: [Option<Access>; 2],
}

fn read_trim(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// A sysfs number in decimal or `0x` hex.
pub fn parse_num(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn read_num(p: &Path) -> Option<u64> {
    parse_num(&read_trim(p)?)
}

/// The names under `dir` that start with `prefix` and continue with a
/// digit, sorted by their number (`region2` before `region10`).
fn numbered(dir: &Path, prefix: &str) -> Vec<String> {
    let mut v: Vec<(u64, String)> = fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter_map(|n| {
                    let rest = n.strip_prefix(prefix)?;
                    let num: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
                    if num.is_empty() {
                        return None;
                    }
                    Some((num.parse().ok()?, n))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v.into_iter().map(|x| x.1).collect()
}

fn read_access(dir: &Path) -> Option<Access> {
    let n = |f: &str| -> Option<u32> { read_trim(&dir.join(f))?.parse().ok() };
    Some(Access {
        read_bw: n("read_bandwidth")?,
        write_bw: n("write_bandwidth")?,
        read_lat: n("read_latency")?,
        write_lat: n("write_latency")?,
    })
}

/// The CXL bus as seen under two roots (the real ones, or copies in tests).
#[derive(Clone, Debug)]
pub struct CxlBus {
    pub cxl: PathBuf,
    pub dax: PathBuf,
}

impl Default for CxlBus {
    fn default() -> Self {
        CxlBus {
            cxl: CXL_SYSFS.into(),
            dax: DAX_SYSFS.into(),
        }
    }
}

impl CxlBus {
    /// The kernel has a CXL bus.
    pub fn present(&self) -> bool {
        self.cxl.is_dir()
    }

    /// Memory devices (`memN`).
    pub fn memdevs(&self) -> Vec<String> {
        numbered(&self.cxl, "mem")
    }

    /// `memN/ram/size`, bytes.
    pub fn memdev_ram_size(&self, mem: &str) -> Option<u64> {
        read_num(&self.cxl.join(mem).join("ram/size"))
    }

    /// Every region, by number.
    pub fn regions(&self) -> Vec<Region> {
        numbered(&self.cxl, "region")
            .into_iter()
            .map(|n| self.region(&n))
            .collect()
    }

    /// One region's state.
    pub fn region(&self, name: &str) -> Region {
        let dir = self.cxl.join(name);
        let dax = numbered(&dir, "dax_region").into_iter().find_map(|dr| {
            let d = numbered(&dir.join(&dr), "dax")
                .into_iter()
                .find(|n| n.contains('.'))?;
            Some(self.dax(&d))
        });
        let ways = read_num(&dir.join("interleave_ways")).unwrap_or(0) as u32;
        let targets = (0..ways)
            .map(|k| read_trim(&dir.join(format!("target{k}"))).unwrap_or_default())
            .collect();
        let root_decoder = fs::canonicalize(&dir)
            .ok()
            .and_then(|p| Some(p.parent()?.file_name()?.to_string_lossy().into_owned()))
            .unwrap_or_default();
        Region {
            name: name.to_string(),
            committed: read_trim(&dir.join("commit")).as_deref() == Some("1"),
            mode: read_trim(&dir.join("mode")).unwrap_or_default(),
            size: read_num(&dir.join("size")).unwrap_or(0),
            target0: read_trim(&dir.join("target0")).unwrap_or_default(),
            ways,
            granularity: read_num(&dir.join("interleave_granularity")).unwrap_or(0) as u32,
            targets,
            root_decoder,
            dax,
            access: [
                read_access(&dir.join("access0")),
                read_access(&dir.join("access1")),
            ],
        }
    }

    /// A dax device, from the dax bus.
    pub fn dax(&self, name: &str) -> Dax {
        let dir = self.dax.join(name);
        let driver = fs::read_link(dir.join("driver"))
            .ok()
            .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()));
        Dax {
            name: name.to_string(),
            target_node: read_trim(&dir.join("target_node"))
                .and_then(|s| s.parse().ok())
                .unwrap_or(-1),
            driver,
            size: read_num(&dir.join("size")).unwrap_or(0),
        }
    }

    /// The memdev behind an endpoint decoder (`decoderE.D` of
    /// `endpointE`, whose `uport` is the memdev).
    pub fn decoder_memdev(&self, decoder: &str) -> Option<String> {
        let d = fs::canonicalize(self.cxl.join(decoder)).ok()?;
        let uport = fs::canonicalize(d.parent()?.join("uport")).ok()?;
        Some(uport.file_name()?.to_string_lossy().into_owned())
    }

    /// The region whose dax device feeds node `nid`.
    pub fn region_of_node(&self, nid: u32) -> Option<Region> {
        self.regions()
            .into_iter()
            .find(|r| r.dax.as_ref().is_some_and(|d| d.target_node == nid as i32))
    }
}

/// One region as the harness asked for it on the kernel command line
/// (`tierkit.cxl=MIB[:WAYS:GRAN][,...]`, one entry per fixed memory
/// window, in window order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WantedRegion {
    /// Bytes.
    pub size: u64,
    /// Devices it interleaves across (1: not interleaved).
    pub ways: u32,
    /// Granularity in bytes; `None`: the root decoder's (1-way).
    pub granularity: Option<u32>,
}

/// Parses the value of `tierkit.cxl=` ([`tierkit_protocol::cxl::parse`]);
/// `None` if malformed.
pub fn parse_wanted(v: &str) -> Option<Vec<WantedRegion>> {
    let regions = tierkit_protocol::cxl::parse(v)?;
    Some(
        regions
            .iter()
            .map(|r| WantedRegion {
                size: r.bytes(),
                ways: r.ways,
                granularity: r.granularity,
            })
            .collect(),
    )
}

/// The regions the harness asked for (`tierkit.cxl=` in `/proc/cmdline`):
/// `None` without the parameter, `Some(Err)` if it is malformed.
pub fn wanted_regions() -> Option<Result<Vec<WantedRegion>, String>> {
    let v = crate::linux::kernel::kernel_param(CXL_PARAM)?;
    Some(parse_wanted(&v).ok_or_else(|| format!("{CXL_PARAM}={v}: malformed")))
}

/// The nodes backed by CXL regions (through their dax devices), ascending.
pub fn cxl_nodes() -> Vec<u32> {
    let mut v: Vec<u32> = CxlBus::default()
        .regions()
        .iter()
        .filter_map(|r| r.dax.as_ref())
        .filter(|d| d.target_node >= 0)
        .map(|d| d.target_node as u32)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Of `topo`'s memory nodes below 64 without CXL memory, the one with
/// the most free memory (`MemFree` plus the per-CPU lists): where a test
/// that needs several free GiBs, such as a GiB and its copy-on-write
/// spare, has the best chance, and no access is emulated CXL memory's.
pub fn roomiest_non_cxl_node(topo: &super::node::Topology) -> Option<u32> {
    let cxl = cxl_nodes();
    topo.memory
        .iter()
        .copied()
        .filter(|n| *n < 64 && !cxl.contains(n))
        .max_by_key(|&n| crate::linux::vma::node_free_kb(n).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake sysfs with region0 (4 GiB, dax0.0 -> node 2, kmem).
    fn fake(dir: &Path) -> CxlBus {
        let cxl = dir.join("cxl");
        let dax = dir.join("dax");
        let r = cxl.join("region0");
        fs::create_dir_all(r.join("dax_region0/dax0.0")).unwrap();
        fs::create_dir_all(r.join("access1")).unwrap();
        fs::create_dir_all(cxl.join("mem0/ram")).unwrap();
        fs::create_dir_all(cxl.join("region10")).unwrap();
        fs::write(cxl.join("mem0/ram/size"), "0x100000000\n").unwrap();
        fs::write(r.join("commit"), "1\n").unwrap();
        fs::write(r.join("mode"), "ram\n").unwrap();
        fs::write(r.join("size"), "0x100000000\n").unwrap();
        fs::write(r.join("target0"), "decoder2.0\n").unwrap();
        fs::write(r.join("interleave_ways"), "1\n").unwrap();
        fs::write(r.join("interleave_granularity"), "256\n").unwrap();
        for (f, v) in [
            ("read_bandwidth", "10240"),
            ("write_bandwidth", "10240"),
            ("read_latency", "402"),
            ("write_latency", "502"),
        ] {
            fs::write(r.join("access1").join(f), format!("{v}\n")).unwrap();
        }
        let d = dax.join("dax0.0");
        fs::create_dir_all(&d).unwrap();
        fs::create_dir_all(dir.join("drivers/kmem")).unwrap();
        std::os::unix::fs::symlink(dir.join("drivers/kmem"), d.join("driver")).unwrap();
        fs::write(d.join("target_node"), "2\n").unwrap();
        fs::write(d.join("size"), "4294967296\n").unwrap();
        CxlBus { cxl, dax }
    }

    #[test]
    fn regions_from_fake_sysfs() {
        let dir = std::env::temp_dir().join(format!("tk-cxl-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let bus = fake(&dir);
        assert!(bus.present());
        assert_eq!(bus.memdevs(), vec!["mem0"]);
        assert_eq!(bus.memdev_ram_size("mem0"), Some(1 << 32));
        let rs = bus.regions();
        assert_eq!(rs.len(), 2);
        assert_eq!(rs[0].name, "region0");
        assert_eq!(rs[1].name, "region10");
        let r = &rs[0];
        assert!(r.committed);
        assert_eq!((r.mode.as_str(), r.size), ("ram", 1 << 32));
        assert_eq!((r.ways, r.granularity), (1, 256));
        assert_eq!(r.targets, vec!["decoder2.0"]);
        assert_eq!(rs[1].ways, 0);
        assert!(rs[1].targets.is_empty());
        let d = r.dax.as_ref().unwrap();
        assert_eq!(
            (d.name.as_str(), d.target_node, d.driver.as_deref(), d.size),
            ("dax0.0", 2, Some("kmem"), 1 << 32)
        );
        assert_eq!(r.access[0], None);
        assert_eq!(r.access[1].unwrap().read_bw, 10240);
        assert_eq!(r.access[1].unwrap().write_lat, 502);
        assert!(!rs[1].committed && rs[1].dax.is_none());
        assert_eq!(bus.region_of_node(2).unwrap().name, "region0");
        assert!(bus.region_of_node(1).is_none());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn wanted_regions_from_the_command_line() {
        let w = |mib: u64, ways, granularity| WantedRegion {
            size: mib << 20,
            ways,
            granularity,
        };
        assert_eq!(parse_wanted("4096"), Some(vec![w(4096, 1, None)]));
        assert_eq!(
            parse_wanted("4096,2048"),
            Some(vec![w(4096, 1, None), w(2048, 1, None)])
        );
        assert_eq!(
            parse_wanted("4096:2:256"),
            Some(vec![w(4096, 2, Some(256))])
        );
        assert_eq!(
            parse_wanted("8192:2:4096,2048:2:4096"),
            Some(vec![w(8192, 2, Some(4096)), w(2048, 2, Some(4096))])
        );
        for bad in ["", "x", "4096:", "4096:0:256", "4096:2:256:1", "4096:2:x"] {
            assert_eq!(parse_wanted(bad), None, "{bad}");
        }
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_num("0x100000000\n"), Some(1 << 32));
        assert_eq!(parse_num("256"), Some(256));
        assert_eq!(parse_num("x"), None);
    }
}
