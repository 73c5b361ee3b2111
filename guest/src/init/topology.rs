//! `TIERKIT-TOPO` lines: the nodes, their memory and performance, the CXL
//! regions, the preemption model and the kernel's weighted interleave;
//! and tierkit's `bandwidth` file, filled from what the kernel knows.

use super::cxl_setup::NODES;
use super::{names_with_prefix, read_text, Init};
use crate::topology::weights::{bandwidth_text, write_file};

/// tierkit's debugfs directory of weights (Documentation/ABI/testing/
/// debugfs-tierkit).
pub const TIERKIT_WI: &str = "/sys/kernel/debug/tierkit/weighted_interleave";
/// The kernel's weighted interleave weights.
pub const KERNEL_WI: &str = "/sys/kernel/mm/mempolicy/weighted_interleave";
/// The preemption model (`none voluntary (full) lazy`).
pub const SCHED_PREEMPT: &str = "/sys/kernel/debug/sched/preempt";

/// The numbered `nodeN` directories, by number.
fn node_ids(init: &Init) -> Vec<u32> {
    let mut v: Vec<u32> = names_with_prefix(&init.root.at(NODES), "node")
        .iter()
        .filter_map(|n| n["node".len()..].parse().ok())
        .collect();
    v.sort_unstable();
    v
}

fn node_lines(init: &mut Init) {
    let r = |init: &Init, f: &str| init.root.read(&format!("{NODES}/{f}")).unwrap_or_default();
    let l = format!(
        "nodes online={} has_memory={} has_cpu={}",
        r(init, "online"),
        r(init, "has_memory"),
        r(init, "has_cpu")
    );
    init.topo(&l);
    for id in node_ids(init) {
        let n = init.root.at(&format!("{NODES}/node{id}"));
        let cpus = read_text(&n.join("cpulist")).filter(|c| !c.is_empty());
        let mem = read_text(&n.join("meminfo"))
            .and_then(|m| {
                let l = m.lines().find(|l| l.contains("MemTotal"))?.to_string();
                let f: Vec<&str> = l.split_whitespace().collect();
                Some(format!("{} {}", f.get(3)?, f.get(4).unwrap_or(&"")))
            })
            .unwrap_or_default();
        let huge = read_text(&n.join("hugepages/hugepages-1048576kB/nr_hugepages"))
            .filter(|h| !h.is_empty());
        let l = format!(
            "node{id} cpus={} mem_total={mem} hugepages_1g={}",
            cpus.as_deref().unwrap_or("none"),
            huge.as_deref().unwrap_or("0")
        );
        init.topo(&l);
        for a in ["access0", "access1"] {
            let d = n.join(a).join("initiators");
            if !d.is_dir() {
                continue;
            }
            let inits = names_with_prefix(&d, "node").join(",");
            let v = |f: &str| read_text(&d.join(f)).unwrap_or_default();
            let l = format!(
                "node{id} {a} initiators={} read_bw={}MB/s write_bw={}MB/s read_lat={}ns write_lat={}ns",
                if inits.is_empty() { "none" } else { &inits },
                v("read_bandwidth"),
                v("write_bandwidth"),
                v("read_latency"),
                v("write_latency")
            );
            init.topo(&l);
        }
    }
}

fn cxl_lines(init: &mut Init) {
    for r in init.root.cxl_bus().regions() {
        let mut tg = format!("target0={}", r.target0);
        if r.ways > 1 {
            tg = format!("ways={} granularity={}", r.ways, r.granularity);
            for (k, t) in r.targets.iter().enumerate() {
                tg += &format!(" target{k}={t}");
            }
        }
        let (dax, driver, node) = match &r.dax {
            Some(d) => (
                d.name.clone(),
                d.driver.clone().unwrap_or_default(),
                d.target_node.to_string(),
            ),
            None => Default::default(),
        };
        let l = format!(
            "cxl {} commit={} mode={} size={}MiB {tg} dax={dax} driver={driver} node={node}",
            r.name,
            u8::from(r.committed),
            r.mode,
            r.size >> 20
        );
        init.topo(&l);
        for (i, a) in r.access.iter().enumerate() {
            let Some(a) = a else { continue };
            let l = format!(
                "cxl {} access{i} read_bw={}MB/s write_bw={}MB/s read_lat={}ns write_lat={}ns",
                r.name, a.read_bw, a.write_bw, a.read_lat, a.write_lat
            );
            init.topo(&l);
        }
    }
}

/// The model in force: the word in parentheses.
pub fn preempt_model(s: &str) -> Option<&str> {
    let (_, rest) = s.split_once('(')?;
    let (m, _) = rest.split_once(')')?;
    (!m.is_empty() && m.chars().all(|c| c.is_ascii_lowercase())).then_some(m)
}

/// Prints the `TIERKIT-TOPO` lines.
pub fn print_topology(init: &mut Init) {
    node_lines(init);
    cxl_lines(init);
    let offered = init.root.read(SCHED_PREEMPT).unwrap_or_default();
    let pm = preempt_model(&offered).map(str::to_string);
    match (&init.params.preempt, &pm) {
        (Some(asked), pm) if pm.as_deref() != Some(asked.as_str()) => {
            let l = format!(
                "preempt: {} (the command line asks for preempt={asked}; this kernel offers: {offered})",
                pm.as_deref().unwrap_or("unknown")
            );
            init.topo(&l);
        }
        (_, Some(pm)) => init.topo(&format!("preempt: {pm}")),
        _ => {}
    }
    let wi = init.root.at(KERNEL_WI);
    if wi.is_dir() {
        let mut s = String::from("weighted_interleave");
        for f in names_with_prefix(&wi, "") {
            s += &format!(" {f}={}", read_text(&wi.join(&f)).unwrap_or_default());
        }
        init.topo(&s);
    } else {
        let l = format!("weighted_interleave: {} does not exist", wi.display());
        init.topo(&l);
    }
}

/// Gives tierkit the bandwidth the kernel knows: per node with memory,
/// access1 (nearest CPU) from the node's sysfs, or for a CXL node, whose
/// node directory has none, from its region's access1.
pub fn tierkit_bandwidth(init: &mut Init) {
    let w = init.root.at(TIERKIT_WI);
    if !w.join("bandwidth").exists() {
        let l = format!(
            "no {}/bandwidth: tierkit's auto weights stay 1",
            w.display()
        );
        init.note(&l);
        return;
    }
    let has_memory = init
        .root
        .read(&format!("{NODES}/has_memory"))
        .unwrap_or_default();
    let nids = crate::topology::node::parse_list(&has_memory).unwrap_or_default();
    let bus = init.root.cxl_bus();
    let mut entries = Vec::new();
    let mut from = String::new();
    for nid in nids {
        let src = match crate::topology::node::access_bandwidth_from(&init.root.at(NODES), nid) {
            Some((r, w)) => Some(((r, w), format!("node{nid}"))),
            None => bus.region_of_node(nid).and_then(|reg| {
                let a = reg.access[1]?;
                Some(((a.read_bw, a.write_bw), reg.name))
            }),
        };
        let Some(((r, wb), name)) = src else { continue };
        entries.push((nid, r, wb));
        from += &format!(" {name}");
    }
    if entries.is_empty() {
        init.note("no access1 bandwidth for any node (no HMAT): tierkit's auto weights stay 1");
        return;
    }
    let text = bandwidth_text(&entries);
    if let Err(e) = write_file(&w.join("bandwidth"), &text) {
        let what = format!(
            "writing tierkit's bandwidth file: write error: {}",
            super::errno_text(&e)
        );
        init.error(&what);
        return;
    }
    let mut weights = String::new();
    for f in names_with_prefix(&w, "node") {
        weights += &format!(" {f}={}", read_text(&w.join(&f)).unwrap_or_default());
    }
    let shown: Vec<&str> = text.lines().collect();
    let l = format!(
        "tierkit bandwidth: {} (MB/s, from{from}) -> auto={}{weights}",
        shown.join("; "),
        read_text(&w.join("auto")).unwrap_or_default()
    );
    init.topo(&l);
}
