//! Guest NUMA topologies and their QEMU arguments.
//!
//! Node ids: CPU+DRAM nodes first (0..k), then memory-only nodes. Every
//! memory-only node names a CPU node as its initiator (HMAT needs one), and
//! `-numa hmat-lb` entries give every (initiator, target) pair a latency and
//! a bandwidth, so the kernel's weighted-interleave auto weights follow them.
//!
//! `--topology cxl` (issue 5) adds [`CxlDevice`]s: QEMU `cxl-type3` devices
//! whose memory the kernel's CXL stack turns into a node at run time.

use anyhow::{bail, Result};
use std::fmt;

/// HMAT performance of one initiator -> target pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Perf {
    pub latency_ns: u32,
    pub bandwidth_gbs: u32,
}

/// DRAM next to the CPUs.
pub const LOCAL_DRAM: Perf = Perf {
    latency_ns: 100,
    bandwidth_gbs: 200,
};
/// DRAM of another CPU node (numa2).
pub const REMOTE_DRAM: Perf = Perf {
    latency_ns: 150,
    bandwidth_gbs: 100,
};
/// A memory-only node (emulated CXL) seen from its initiator.
/// With LOCAL_DRAM, the kernel's auto weights read node0=25, node1=6.
pub const SLOW_MEM: Perf = Perf {
    latency_ns: 250,
    bandwidth_gbs: 50,
};
/// A memory-only node seen from a CPU node that is not its initiator.
pub const SLOW_MEM_REMOTE: Perf = Perf {
    latency_ns: 300,
    bandwidth_gbs: 40,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TopologyKind {
    /// node0: CPUs + DRAM; node1: memory only, slower (HMAT), like CXL.
    Numa,
    /// node0: CPU0 + DRAM; node1: CPU1 + DRAM; node2: memory only. For
    /// local-versus-remote placement (benchmarks).
    Numa2,
    /// node0: CPUs + DRAM; a QEMU cxl-type3 device assembled into a region
    /// by the kernel's CXL drivers (issue 5; not implemented yet).
    Cxl,
}

impl fmt::Display for TopologyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TopologyKind::Numa => "numa",
            TopologyKind::Numa2 => "numa2",
            TopologyKind::Cxl => "cxl",
        })
    }
}

/// A node with CPUs and DRAM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuNode {
    pub cpus: u32,
    pub dram_gib: u32,
}

/// A node with memory and no CPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemNode {
    pub size_gib: u32,
    /// Index of the CPU node that is its HMAT initiator (and nearest node).
    pub initiator: usize,
    /// Performance from its initiator.
    pub perf: Perf,
}

/// An emulated CXL type-3 memory device (issue 5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CxlDevice {
    pub size_gib: u32,
    pub perf: Perf,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pub kind: TopologyKind,
    pub cpu_nodes: Vec<CpuNode>,
    pub mem_nodes: Vec<MemNode>,
    pub cxl: Vec<CxlDevice>,
}

/// What the user asked for on the command line.
#[derive(Clone, Debug)]
pub struct TopologyOpts {
    pub kind: TopologyKind,
    /// Total guest CPUs.
    pub cpus: u32,
    /// DRAM per CPU node, GiB.
    pub dram_gib: u32,
    /// Size of the memory-only (or CXL) node, GiB.
    pub slow_gib: u32,
}

impl Topology {
    pub fn new(o: &TopologyOpts) -> Result<Topology> {
        if o.cpus == 0 {
            bail!("--cpus must be at least 1");
        }
        Ok(match o.kind {
            TopologyKind::Numa => Topology {
                kind: o.kind,
                cpu_nodes: vec![CpuNode { cpus: o.cpus, dram_gib: o.dram_gib }],
                mem_nodes: vec![MemNode { size_gib: o.slow_gib, initiator: 0, perf: SLOW_MEM }],
                cxl: vec![],
            },
            TopologyKind::Numa2 => {
                if o.cpus < 2 || !o.cpus.is_multiple_of(2) {
                    bail!("--topology numa2 splits --cpus evenly over two nodes: give an even number >= 2 (got {})", o.cpus);
                }
                let per = CpuNode { cpus: o.cpus / 2, dram_gib: o.dram_gib };
                Topology {
                    kind: o.kind,
                    cpu_nodes: vec![per.clone(), per],
                    mem_nodes: vec![MemNode { size_gib: o.slow_gib, initiator: 0, perf: SLOW_MEM }],
                    cxl: vec![],
                }
            }
            TopologyKind::Cxl => bail!(
                "--topology cxl is not implemented yet (issue 5); the Topology type has a `cxl` list for it"
            ),
        })
    }

    pub fn total_cpus(&self) -> u32 {
        self.cpu_nodes.iter().map(|n| n.cpus).sum()
    }

    pub fn total_mem_gib(&self) -> u32 {
        self.cpu_nodes.iter().map(|n| n.dram_gib).sum::<u32>()
            + self.mem_nodes.iter().map(|n| n.size_gib).sum::<u32>()
    }

    pub fn nr_nodes(&self) -> usize {
        self.cpu_nodes.len() + self.mem_nodes.len()
    }

    /// SLIT distance between two nodes.
    pub fn distance(&self, a: usize, b: usize) -> u32 {
        if a == b {
            return 10;
        }
        let k = self.cpu_nodes.len();
        match (a < k, b < k) {
            (true, true) => 20,
            (true, false) => {
                if self.mem_nodes[b - k].initiator == a {
                    25
                } else {
                    30
                }
            }
            (false, true) => self.distance(b, a),
            (false, false) => 30,
        }
    }

    /// HMAT performance from CPU node `init` to node `target`.
    pub fn perf(&self, init: usize, target: usize) -> Perf {
        let k = self.cpu_nodes.len();
        if target < k {
            if target == init {
                LOCAL_DRAM
            } else {
                REMOTE_DRAM
            }
        } else {
            let m = &self.mem_nodes[target - k];
            if m.initiator == init {
                m.perf
            } else {
                SLOW_MEM_REMOTE
            }
        }
    }

    /// `-machine`, `-smp`, `-m`, memory backends, `-numa` node, dist and
    /// hmat-lb arguments.
    pub fn qemu_args(&self) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        let mut push = |x: &str, y: String| {
            a.push(x.to_string());
            a.push(y);
        };
        let mut machine = String::from("q35,hmat=on");
        if !self.cxl.is_empty() {
            machine.push_str(",cxl=on");
        }
        push("-machine", machine);
        // One socket per CPU node: CPUs that share a last-level cache but not
        // a node make the kernel WARN (topology_sane).
        let per = self.cpu_nodes[0].cpus;
        if self.cpu_nodes.iter().all(|n| n.cpus == per) {
            push(
                "-smp",
                format!(
                    "{},sockets={},cores={per},threads=1",
                    self.total_cpus(),
                    self.cpu_nodes.len()
                ),
            );
        } else {
            push("-smp", self.total_cpus().to_string());
        }
        push("-m", format!("{}G", self.total_mem_gib()));
        let mut first_cpu = 0;
        for (i, n) in self.cpu_nodes.iter().enumerate() {
            push(
                "-object",
                format!("memory-backend-ram,id=m{i},size={}G", n.dram_gib),
            );
            let last = first_cpu + n.cpus - 1;
            let cpus = if last == first_cpu {
                format!("{first_cpu}")
            } else {
                format!("{first_cpu}-{last}")
            };
            push("-numa", format!("node,nodeid={i},cpus={cpus},memdev=m{i}"));
            first_cpu = last + 1;
        }
        let k = self.cpu_nodes.len();
        for (j, m) in self.mem_nodes.iter().enumerate() {
            let id = k + j;
            push(
                "-object",
                format!("memory-backend-ram,id=m{id},size={}G", m.size_gib),
            );
            push(
                "-numa",
                format!("node,nodeid={id},memdev=m{id},initiator={}", m.initiator),
            );
        }
        let n = self.nr_nodes();
        for s in 0..n {
            for d in s + 1..n {
                push(
                    "-numa",
                    format!("dist,src={s},dst={d},val={}", self.distance(s, d)),
                );
            }
        }
        for i in 0..k {
            for t in 0..n {
                let p = self.perf(i, t);
                push(
                    "-numa",
                    format!("hmat-lb,initiator={i},target={t},hierarchy=memory,data-type=access-latency,latency={}", p.latency_ns),
                );
                push(
                    "-numa",
                    format!("hmat-lb,initiator={i},target={t},hierarchy=memory,data-type=access-bandwidth,bandwidth={}G", p.bandwidth_gbs),
                );
            }
        }
        a
    }

    /// One line per node, for the harness output.
    pub fn describe(&self) -> String {
        let mut s = Vec::new();
        let mut cpu = 0;
        for (i, n) in self.cpu_nodes.iter().enumerate() {
            s.push(format!(
                "node{i}: CPUs {}-{} + {} GiB DRAM",
                cpu,
                cpu + n.cpus - 1,
                n.dram_gib
            ));
            cpu += n.cpus;
        }
        let k = self.cpu_nodes.len();
        for (j, m) in self.mem_nodes.iter().enumerate() {
            s.push(format!(
                "node{}: {} GiB memory only ({} ns, {} GB/s from node{})",
                k + j,
                m.size_gib,
                m.perf.latency_ns,
                m.perf.bandwidth_gbs,
                m.initiator
            ));
        }
        s.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(kind: TopologyKind, cpus: u32) -> TopologyOpts {
        TopologyOpts {
            kind,
            cpus,
            dram_gib: 4,
            slow_gib: 3,
        }
    }

    fn has(args: &[String], flag: &str, val: &str) -> bool {
        args.windows(2).any(|w| w[0] == flag && w[1] == val)
    }

    #[test]
    fn default_numa_topology() {
        let t = Topology::new(&opts(TopologyKind::Numa, 2)).unwrap();
        let a = t.qemu_args();
        assert!(has(&a, "-machine", "q35,hmat=on"));
        assert!(has(&a, "-smp", "2,sockets=1,cores=2,threads=1"));
        assert!(has(&a, "-m", "7G"));
        assert!(has(&a, "-object", "memory-backend-ram,id=m0,size=4G"));
        assert!(has(&a, "-object", "memory-backend-ram,id=m1,size=3G"));
        assert!(has(&a, "-numa", "node,nodeid=0,cpus=0-1,memdev=m0"));
        assert!(has(&a, "-numa", "node,nodeid=1,memdev=m1,initiator=0"));
        assert!(has(&a, "-numa", "dist,src=0,dst=1,val=25"));
        assert!(has(
            &a,
            "-numa",
            "hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-latency,latency=100"
        ));
        assert!(has(&a, "-numa", "hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-bandwidth,bandwidth=200G"));
        assert!(has(
            &a,
            "-numa",
            "hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-latency,latency=250"
        ));
        assert!(has(&a, "-numa", "hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-bandwidth,bandwidth=50G"));
        // 2 backends, 2 nodes, 1 distance, 2x2 hmat-lb entries.
        assert_eq!(a.iter().filter(|x| *x == "-numa").count(), 2 + 1 + 4);
    }

    #[test]
    fn one_cpu() {
        let t = Topology::new(&opts(TopologyKind::Numa, 1)).unwrap();
        assert!(has(
            &t.qemu_args(),
            "-numa",
            "node,nodeid=0,cpus=0,memdev=m0"
        ));
    }

    #[test]
    fn numa2_has_two_cpu_nodes_and_a_memory_node() {
        let t = Topology::new(&opts(TopologyKind::Numa2, 2)).unwrap();
        let a = t.qemu_args();
        assert!(has(&a, "-m", "11G"));
        assert!(has(&a, "-smp", "2,sockets=2,cores=1,threads=1"));
        assert!(has(&a, "-numa", "node,nodeid=0,cpus=0,memdev=m0"));
        assert!(has(&a, "-numa", "node,nodeid=1,cpus=1,memdev=m1"));
        assert!(has(&a, "-numa", "node,nodeid=2,memdev=m2,initiator=0"));
        assert!(has(&a, "-numa", "dist,src=0,dst=1,val=20"));
        assert!(has(&a, "-numa", "dist,src=0,dst=2,val=25"));
        assert!(has(&a, "-numa", "dist,src=1,dst=2,val=30"));
        assert!(has(
            &a,
            "-numa",
            "hmat-lb,initiator=1,target=0,hierarchy=memory,data-type=access-latency,latency=150"
        ));
        assert!(has(&a, "-numa", "hmat-lb,initiator=1,target=2,hierarchy=memory,data-type=access-bandwidth,bandwidth=40G"));
        assert_eq!(t.distance(2, 0), 25);
        assert!(Topology::new(&opts(TopologyKind::Numa2, 3)).is_err());
    }

    #[test]
    fn cxl_is_not_there_yet() {
        assert!(Topology::new(&opts(TopologyKind::Cxl, 2)).is_err());
    }
}
