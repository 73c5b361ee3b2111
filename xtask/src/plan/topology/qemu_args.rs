//! A [`Topology`] as QEMU arguments: `-machine`, `-smp`, `-m`, memory
//! backends, `-numa` nodes, distances and HMAT figures, and the CXL host
//! bridges, root ports, type-3 devices and fixed memory windows.

use super::cxl::{CXL_BUS_STRIDE, CXL_FIRST_BUS};
use super::Topology;

/// Appends the QEMU argument `flag` and its `value`.
fn push(a: &mut Vec<String>, flag: &str, value: String) {
    a.push(flag.to_string());
    a.push(value);
}

impl Topology {
    /// `-machine`, `-smp`, `-m`, memory backends, `-numa` node, dist and
    /// hmat-lb arguments, and the CXL devices.
    pub fn qemu_args(&self) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        self.machine_args(&mut a);
        self.node_args(&mut a);
        self.cxl_args(&mut a);
        self.distance_and_hmat_args(&mut a);
        a
    }

    /// `-machine`, `-smp` (one socket per CPU node) and `-m`.
    fn machine_args(&self, a: &mut Vec<String>) {
        let mut machine = String::from("q35,hmat=on");
        if !self.cxl.is_empty() {
            machine.push_str(",cxl=on");
        }
        push(a, "-machine", machine);
        // One socket per CPU node: CPUs that share a last-level cache but not
        // a node make the kernel WARN (topology_sane).
        let per = self.cpu_nodes[0].cpus;
        if self.cpu_nodes.iter().all(|n| n.cpus == per) {
            push(
                a,
                "-smp",
                format!(
                    "{},sockets={},cores={per},threads=1",
                    self.total_cpus(),
                    self.cpu_nodes.len()
                ),
            );
        } else {
            push(a, "-smp", self.total_cpus().to_string());
        }
        if self.cxl.is_empty() && self.dimm_gib() == 0 {
            push(a, "-m", format!("{}G", self.total_mem_gib()));
        } else {
            // Room for hot-added memory: the DIMMs, and what the CXL checks
            // add.
            push(
                a,
                "-m",
                format!(
                    "{}G,maxmem={}G,slots=4",
                    self.boot_mem_gib(),
                    self.total_mem_gib() + self.cxl_gib()
                ),
            );
        }
    }

    /// The memory backends and `-numa node` of the CPU nodes, then of the
    /// memory-only nodes.
    fn node_args(&self, a: &mut Vec<String>) {
        let mut first_cpu = 0;
        for (i, n) in self.cpu_nodes.iter().enumerate() {
            push(
                a,
                "-object",
                format!("memory-backend-ram,id=m{i},size={}G", n.dram_gib),
            );
            let last = first_cpu + n.cpus - 1;
            let cpus = if last == first_cpu {
                format!("{first_cpu}")
            } else {
                format!("{first_cpu}-{last}")
            };
            push(
                a,
                "-numa",
                format!("node,nodeid={i},cpus={cpus},memdev=m{i}"),
            );
            first_cpu = last + 1;
        }
        let k = self.cpu_nodes.len();
        for (j, m) in self.mem_nodes.iter().enumerate() {
            let id = k + j;
            push(
                a,
                "-object",
                format!("memory-backend-ram,id=m{id},size={}G", m.size_gib),
            );
            if m.dimm {
                // A node without boot memory, and a DIMM of it present at
                // boot: SRAT marks its range hot-pluggable, the kernel's
                // ACPI memory hotplug driver adds it.
                push(
                    a,
                    "-numa",
                    format!("node,nodeid={id},initiator={}", m.initiator),
                );
                push(
                    a,
                    "-device",
                    format!("pc-dimm,id=dimm{id},memdev=m{id},node={id}"),
                );
            } else {
                push(
                    a,
                    "-numa",
                    format!("node,nodeid={id},memdev=m{id},initiator={}", m.initiator),
                );
            }
        }
    }

    /// The CXL host bridges, generic ports, root ports, type-3 devices and
    /// fixed memory windows.
    fn cxl_args(&self, a: &mut Vec<String>) {
        // CXL: per host bridge (one per device, or one per WAYS devices with
        // --cxl-interleave) its generic port (a memory-less proximity domain
        // that carries the HMAT figures) and a fixed memory window that
        // targets it; per device a root port of that bridge and the type-3
        // device with its volatile backend. An interleaved window gets the
        // region's granularity (the root decoder is 1-way: the host bridge's
        // decoder does the interleave).
        let il = self.cxl_interleave;
        let mut fmw = Vec::new();
        let mut i = 0;
        for (g, grp) in self.cxl_groups().enumerate() {
            let gp = self.cxl_gp_node(g);
            let hb = format!("cxl.{}", g + 1);
            push(a, "-numa", format!("node,nodeid={gp}"));
            push(
                a,
                "-device",
                format!(
                    "pxb-cxl,bus_nr={},bus=pcie.0,id={hb}",
                    CXL_FIRST_BUS + CXL_BUS_STRIDE * g as u32
                ),
            );
            push(
                a,
                "-object",
                format!("acpi-generic-port,id=cxl-gp{g},pci-bus={hb},node={gp}"),
            );
            for (port, d) in grp.iter().enumerate() {
                let rp = format!("cxl_rp{i}");
                push(
                    a,
                    "-object",
                    format!(
                        "memory-backend-ram,id=cxl-mem{i},share=on,size={}G",
                        d.size_gib
                    ),
                );
                push(
                    a,
                    "-device",
                    format!(
                        "cxl-rp,port={port},bus={hb},id={rp},chassis=0,slot={}",
                        i + 2
                    ),
                );
                push(
                    a,
                    "-device",
                    format!(
                        "cxl-type3,bus={rp},volatile-memdev=cxl-mem{i},id=cxl-vmem{i},sn={}",
                        i + 1
                    ),
                );
                i += 1;
            }
            let mut w = format!(
                "cxl-fmw.{g}.targets.0={hb},cxl-fmw.{g}.size={}",
                mib_size(self.cxl_window_mib(g))
            );
            if il.ways > 1 {
                w.push_str(&format!(
                    ",cxl-fmw.{g}.interleave-granularity={}",
                    il.granularity
                ));
            }
            fmw.push(w);
        }
        if !fmw.is_empty() {
            push(a, "-M", fmw.join(","));
        }
    }

    /// `-numa dist` (without CXL) and the `-numa hmat-lb` latency and
    /// bandwidth of every CPU node to every node.
    fn distance_and_hmat_args(&self, a: &mut Vec<String>) {
        let k = self.cpu_nodes.len();
        let n = self.nr_nodes();
        if self.cxl.is_empty() {
            for s in 0..n {
                for d in s + 1..n {
                    push(
                        a,
                        "-numa",
                        format!("dist,src={s},dst={d},val={}", self.distance(s, d)),
                    );
                }
            }
        }
        for i in 0..k {
            for t in 0..n {
                let p = self.perf(i, t);
                push(
                    a,
                    "-numa",
                    format!("hmat-lb,initiator={i},target={t},hierarchy=memory,data-type=access-latency,latency={}", p.latency_ns),
                );
                push(
                    a,
                    "-numa",
                    format!("hmat-lb,initiator={i},target={t},hierarchy=memory,data-type=access-bandwidth,bandwidth={}G", p.bandwidth_gbs),
                );
            }
        }
    }
}

/// A size in MiB for QEMU: `4G` when whole GiB, else `768M`.
pub(super) fn mib_size(mib: u64) -> String {
    if mib.is_multiple_of(1024) {
        format!("{}G", mib / 1024)
    } else {
        format!("{mib}M")
    }
}
