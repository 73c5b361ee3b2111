//! HMAT performance figures ([`Perf`]): one initiator -> target pair's
//! latency and bandwidth, and the figures the topologies use.

use std::fmt;

/// HMAT performance of one initiator -> target pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Perf {
    pub latency_ns: u32,
    /// GB/s as QEMU's `bandwidth=NG` takes it (the guest sees N*1024 MB/s).
    pub bandwidth_gbs: u32,
}

impl Perf {
    /// Parses `LATENCY:BANDWIDTH`, e.g. `100:20G` or `250ns:10G` (ns, GB/s).
    pub fn parse(s: &str) -> std::result::Result<Perf, String> {
        let (l, b) = s.split_once(':').ok_or_else(|| {
            format!("`{s}`: expected LATENCY_NS:BANDWIDTH_GBS, e.g. 100:20G or 250ns:10G")
        })?;
        let lat = l.trim().trim_end_matches("ns");
        let bw = b.trim().to_ascii_lowercase();
        let bw = bw
            .strip_suffix("gb/s")
            .or_else(|| bw.strip_suffix("gbs"))
            .or_else(|| bw.strip_suffix("gb"))
            .or_else(|| bw.strip_suffix('g'))
            .unwrap_or(&bw);
        let latency_ns: u32 = lat
            .parse()
            .map_err(|_| format!("`{s}`: latency `{l}` is not a whole number of ns"))?;
        let bandwidth_gbs: u32 = bw
            .parse()
            .map_err(|_| format!("`{s}`: bandwidth `{b}` is not a whole number of GB/s"))?;
        if latency_ns == 0 || bandwidth_gbs == 0 {
            return Err(format!("`{s}`: latency and bandwidth must be positive"));
        }
        Ok(Perf {
            latency_ns,
            bandwidth_gbs,
        })
    }
}

impl fmt::Display for Perf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ns, {} GB/s", self.latency_ns, self.bandwidth_gbs)
    }
}

/// DRAM next to the CPUs (numa, numa2).
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
/// DRAM in the cxl topology: the figures of a DDR5 channel or two. With
/// [`CXL_DEV`] the kernel's auto weights read node0=21 for 10 on the CXL
/// node (one device).
pub const CXL_TOPO_DRAM: Perf = Perf {
    latency_ns: 100,
    bandwidth_gbs: 20,
};
/// A CXL device as its generic port's HMAT entry (CPU node -> host bridge).
/// The kernel adds the device's CDAT latency and the link's, and takes the
/// smallest bandwidth on the path (QEMU's CDAT and link are faster than
/// this), so the node reads 10240 MB/s and about 400 ns.
pub const CXL_DEV: Perf = Perf {
    latency_ns: 250,
    bandwidth_gbs: 10,
};
/// socket2: DRAM of the CPU's own socket (the per-socket weights RFC's
/// figures: local DRAM 300 GB/s, local CXL 100, remote 150 and 50).
pub const SOCKET_DRAM: Perf = Perf {
    latency_ns: 100,
    bandwidth_gbs: 300,
};
/// socket2: DRAM of the other socket.
pub const SOCKET_DRAM_REMOTE: Perf = Perf {
    latency_ns: 150,
    bandwidth_gbs: 150,
};
/// socket2: the memory-only node of the CPU's own socket.
pub const SOCKET_MEM: Perf = Perf {
    latency_ns: 250,
    bandwidth_gbs: 100,
};
/// socket2: the memory-only node of the other socket.
pub const SOCKET_MEM_REMOTE: Perf = Perf {
    latency_ns: 300,
    bandwidth_gbs: 50,
};
