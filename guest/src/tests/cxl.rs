//! The logic of `tk-test-cxl`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-cxl.rs` (its `--help`).

use crate::harness::report::Report;
use crate::linux::memblock;
use crate::topology::cxl::{parse_num, wanted_regions, CxlBus, Region};
use crate::topology::node::{access1_bandwidth, Topology, NODE_SYSFS};
use crate::topology::weights::WeightDir;
use std::fs;
use std::path::Path;
use std::process::ExitCode;
use tierkit_core::interleave::{Nodemask, Weights, MAX_NUMNODES};

const BIN: &str = "tk-test-cxl";
const MEMORY_SYSFS: &str = "/sys/devices/system/memory";

pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let bus = CxlBus::default();
    let regions = bus.regions();
    let memdevs = if bus.present() { bus.memdevs() } else { vec![] };
    if regions.is_empty() && memdevs.is_empty() {
        let why = if bus.present() {
            "no CXL memory devices (not --topology cxl)"
        } else {
            "no CXL bus in this kernel"
        };
        for name in [
            "cxl regions: as asked, every memdev in exactly one",
            "dax devices: bound to kmem, CPU-less memory nodes",
            "nodes hold exactly their region",
            "region performance and the kernel's auto weights",
            "offline and online a memory block of a CXL node",
        ] {
            r.skip(name, why);
        }
        return r.finish();
    }
    let topo = match Topology::read() {
        Ok(t) => t,
        Err(e) => {
            r.fail("topology", format!("{e:#}"));
            return r.finish();
        }
    };
    r.note(format!("topology: {}", topo.describe()));
    r.note(format!(
        "memdevs: {} ({})",
        memdevs.join(" "),
        memdevs
            .iter()
            .map(|m| format!("{} MiB", bus.memdev_ram_size(m).unwrap_or(0) >> 20))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    r.check_note(
        "every memdev in exactly one region",
        memdevs_in_regions(&bus, &regions, &memdevs),
    );
    match wanted_regions() {
        Some(Ok(want)) => {
            let name = format!("regions as asked ({} window(s))", want.len());
            r.check_note(&name, regions_as_asked(&bus, &regions, &want));
        }
        Some(Err(e)) => {
            r.fail("regions as asked", e);
        }
        None => {
            r.skip("regions as asked", "no tierkit.cxl= on the command line");
        }
    }
    let mut nodes = Vec::new();
    for reg in &regions {
        if let Some(nid) = region_checks(&mut r, reg, &topo) {
            if nodes.contains(&nid) {
                r.fail(
                    &format!("{}: its own node", reg.name),
                    format!("node {nid} is fed by another region too"),
                );
            }
            nodes.push(nid);
        }
    }
    if !nodes.is_empty() {
        auto_weights(&mut r, &topo, &nodes);
    }
    match nodes.first() {
        Some(&nid) => offline_online(&mut r, nid),
        None => {
            r.fail(
                "offline and online a memory block of a CXL node",
                "no region has a node",
            );
        }
    }
    r.set("cxl_nodes", serde_json::json!(nodes));
    r.finish()
}

/// Every region's targets are endpoint decoders of distinct memdevs, one
/// per interleave way, and together they are all the memdevs.
fn memdevs_in_regions(
    bus: &CxlBus,
    regions: &[Region],
    memdevs: &[String],
) -> Result<String, String> {
    let mut seen: Vec<String> = Vec::new();
    let mut s = Vec::new();
    for reg in regions {
        if reg.ways == 0 || reg.targets.len() != reg.ways as usize {
            return Err(format!(
                "{}: interleave_ways {}, {} target(s)",
                reg.name,
                reg.ways,
                reg.targets.len()
            ));
        }
        let mut ms = Vec::new();
        for (k, t) in reg.targets.iter().enumerate() {
            let m = bus.decoder_memdev(t).ok_or_else(|| {
                format!(
                    "{}: target{k} `{t}` is no endpoint decoder with a memdev",
                    reg.name
                )
            })?;
            if seen.contains(&m) {
                return Err(format!(
                    "{m} is a target of more than one region (or twice of {})",
                    reg.name
                ));
            }
            seen.push(m.clone());
            ms.push(format!("{t}/{m}"));
        }
        s.push(format!("{}: {}", reg.name, ms.join(" ")));
    }
    let missing: Vec<&String> = memdevs.iter().filter(|m| !seen.contains(m)).collect();
    if !missing.is_empty() {
        return Err(format!(
            "memdev(s) {missing:?} in no region ({})",
            s.join("; ")
        ));
    }
    Ok(s.join("; "))
}

/// The regions are those of `tierkit.cxl=`: one per window (`decoder0.<i>`
/// for entry i), with its size, ways and granularity, and each device
/// holding size/ways of it.
fn regions_as_asked(
    bus: &CxlBus,
    regions: &[Region],
    want: &[crate::topology::cxl::WantedRegion],
) -> Result<String, String> {
    if regions.len() != want.len() {
        return Err(format!(
            "{} region(s), tierkit.cxl= asks for {}",
            regions.len(),
            want.len()
        ));
    }
    let mut s = Vec::new();
    for (i, w) in want.iter().enumerate() {
        let rd = format!("decoder0.{i}");
        let reg = regions
            .iter()
            .find(|r| r.root_decoder == rd)
            .ok_or_else(|| {
                format!(
                    "no region under {rd} (regions under {:?})",
                    regions.iter().map(|r| &r.root_decoder).collect::<Vec<_>>()
                )
            })?;
        if reg.size != w.size || reg.ways != w.ways {
            return Err(format!(
                "{} under {rd}: {} MiB over {} way(s), asked {} MiB over {}",
                reg.name,
                reg.size >> 20,
                reg.ways,
                w.size >> 20,
                w.ways
            ));
        }
        if let Some(g) = w.granularity {
            if reg.granularity != g {
                return Err(format!(
                    "{}: granularity {}, asked {g}",
                    reg.name, reg.granularity
                ));
            }
        }
        for t in &reg.targets {
            let m = bus.decoder_memdev(t).unwrap_or_default();
            let size = bus.memdev_ram_size(&m).unwrap_or(0);
            if size * u64::from(w.ways) != w.size {
                return Err(format!(
                    "{}: {m} holds {size:#x} bytes, not 1/{} of {:#x}",
                    reg.name, w.ways, w.size
                ));
            }
        }
        s.push(format!(
            "{} = {rd}: {} MiB, {}-way, granularity {}",
            reg.name,
            reg.size >> 20,
            reg.ways,
            reg.granularity
        ));
    }
    Ok(s.join("; "))
}

/// The checks of one region; its node if it has one.
fn region_checks(r: &mut Report, reg: &Region, topo: &Topology) -> Option<u32> {
    let n = &reg.name;
    r.check(
        &format!("{n}: committed ram region"),
        if !reg.committed {
            Err("commit does not read 1".to_string())
        } else if reg.mode != "ram" {
            Err(format!("mode {}, expected ram", reg.mode))
        } else if reg.size == 0 {
            Err("size 0".to_string())
        } else {
            Ok(())
        },
    );
    let Some(dax) = &reg.dax else {
        r.fail(
            &format!("{n}: dax device"),
            "no dax_region*/dax*.* under it",
        );
        return None;
    };
    r.check_note(
        &format!("{n}: {} bound to kmem", dax.name),
        if dax.driver.as_deref() != Some("kmem") {
            Err(format!("driver {:?}, expected kmem", dax.driver))
        } else if dax.size != reg.size {
            Err(format!("dax size {}, region size {}", dax.size, reg.size))
        } else {
            Ok(format!("{} MiB", dax.size >> 20))
        },
    );
    if dax.target_node < 0 {
        r.fail(
            &format!("{n}: target node"),
            format!("{} has target_node {}", dax.name, dax.target_node),
        );
        return None;
    }
    let nid = dax.target_node as u32;
    let cpulist = fs::read_to_string(format!("{NODE_SYSFS}/node{nid}/cpulist"))
        .unwrap_or_default()
        .trim()
        .to_string();
    r.check(
        &format!("{n}: node {nid} has memory and no CPUs"),
        if !topo.memory.contains(&nid) {
            Err(format!("node {nid} is not in has_memory {:?}", topo.memory))
        } else if topo.cpu.contains(&nid) || !cpulist.is_empty() {
            Err(format!("node {nid} has CPUs ({cpulist})"))
        } else {
            Ok(())
        },
    );
    r.check_note(
        &format!("{n}: node {nid} holds exactly the region"),
        node_holds_region(nid, reg),
    );
    r.check_note(
        &format!("{n}: access1 performance"),
        match reg.access[1] {
            Some(a) if a.read_bw > 0 && a.write_bw > 0 => Ok(format!(
                "{}/{} MB/s, {}/{} ns",
                a.read_bw, a.write_bw, a.read_lat, a.write_lat
            )),
            Some(a) => Err(format!("zero bandwidth: {a:?}")),
            None => Err("no access1/ (no generic port or HMAT for its host bridge?)".into()),
        },
    );
    Some(nid)
}

/// The node's memory blocks are the region's host physical range, and its
/// MemTotal is the region's size (less a memmap, should it sit there).
fn node_holds_region(nid: u32, reg: &Region) -> Result<String, String> {
    let start = fs::read_to_string(format!("/sys/bus/cxl/devices/{}/resource", reg.name))
        .ok()
        .and_then(|s| parse_num(&s))
        .ok_or("no region resource")?;
    let end = start + reg.size;
    let block = fs::read_to_string(format!("{MEMORY_SYSFS}/block_size_bytes"))
        .ok()
        .and_then(|s| u64::from_str_radix(s.trim(), 16).ok())
        .ok_or("no memory block size")?;
    let blocks = memblock::node_blocks(nid);
    let outside: Vec<u64> = blocks
        .iter()
        .copied()
        .filter(|&b| b * block < start || (b + 1) * block > end)
        .collect();
    if !outside.is_empty() {
        return Err(format!(
            "memory block(s) {outside:?} of node {nid} lie outside the region [{start:#x}, {end:#x})"
        ));
    }
    if blocks.len() as u64 * block != reg.size {
        return Err(format!(
            "{} memory block(s) of {block:#x} bytes, the region is {:#x}",
            blocks.len(),
            reg.size
        ));
    }
    let total = node_mem_total(nid).ok_or("no meminfo")?;
    if total > reg.size || total < reg.size - reg.size / 64 {
        return Err(format!(
            "MemTotal {} kB, region {} kB",
            total >> 10,
            reg.size >> 10
        ));
    }
    Ok(format!(
        "{} blocks in [{start:#x}, {end:#x}), MemTotal {} kB",
        blocks.len(),
        total >> 10
    ))
}

/// A node's MemTotal in bytes.
fn node_mem_total(nid: u32) -> Option<u64> {
    let s = fs::read_to_string(format!("{NODE_SYSFS}/node{nid}/meminfo")).ok()?;
    let l = s.lines().find(|l| l.contains("MemTotal:"))?;
    let kb: u64 = l.split_whitespace().rev().nth(1)?.parse().ok()?;
    Some(kb << 10)
}

/// The kernel's auto weights cover the CXL nodes and are
/// `reduce_interleave_weights` of the access1 bandwidth of every memory
/// node (a CXL node's from its region).
fn auto_weights(r: &mut Report, topo: &Topology, cxl_nodes: &[u32]) {
    let name = "kernel auto weights from the CXL bandwidth";
    let Some(kw) = WeightDir::kernel() else {
        r.fail(name, "no /sys/kernel/mm/mempolicy/weighted_interleave");
        return;
    };
    let res = (|| -> Result<String, String> {
        match kw.auto() {
            Ok(Some(true)) => {}
            a => return Err(format!("kernel auto reads {a:?}, expected true")),
        }
        let table = kw.table().map_err(|e| format!("{e:#}"))?;
        for &nid in cxl_nodes {
            if !kw.node_path(nid).exists() {
                return Err(format!("no weighted_interleave/node{nid}"));
            }
        }
        let mut bw = [0u32; MAX_NUMNODES];
        let mut mask = Nodemask(0);
        for &nid in topo.memory.iter().filter(|&&n| (n as usize) < MAX_NUMNODES) {
            let (rd, wr) = access1_bandwidth(nid)
                .ok_or_else(|| format!("no access1 bandwidth for node {nid}"))?;
            bw[nid as usize] = rd.min(wr);
            mask = mask.with(nid as usize);
        }
        let want = Weights::from_bandwidth(&bw, mask).effective();
        let mut s = Vec::new();
        for &nid in &topo.memory {
            let (k, w) = (table[nid as usize], want[nid as usize]);
            if k != w {
                return Err(format!(
                    "node {nid} (bw {} MB/s): kernel weight {k}, reduce_interleave_weights gives {w}",
                    bw[nid as usize]
                ));
            }
            s.push(format!("node{nid}={k}"));
        }
        if let Some(d) = topo.dram_node() {
            for &c in cxl_nodes {
                if bw[c as usize] < bw[d as usize] && table[c as usize] >= table[d as usize] {
                    return Err(format!(
                        "CXL node {c} is slower than DRAM node {d} but weighs {} >= {}",
                        table[c as usize], table[d as usize]
                    ));
                }
            }
        }
        Ok(s.join(" "))
    })();
    r.check_note(name, res);
}

/// Offlines the highest memory block of `nid` and onlines it again into
/// the zone it was in (`online_movable` for ZONE_MOVABLE, else
/// `online_kernel`), so that the node is as the later tests expect it:
/// hot-remove and hot-add on the CXL node.
fn offline_online(r: &mut Report, nid: u32) {
    let blocks = memblock::node_blocks(nid);
    let Some(&b) = blocks.last() else {
        r.fail(
            "offline and online a memory block of a CXL node",
            format!("node {nid} has no memory blocks"),
        );
        return;
    };
    let name = format!("offline and online memory{b} of node {nid}");
    let state = Path::new(MEMORY_SYSFS).join(format!("memory{b}/state"));
    let read_state = || {
        fs::read_to_string(&state)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let res = (|| -> Result<String, String> {
        let before = node_mem_total(nid).unwrap_or(0);
        let zone = memblock::block_zone(b).unwrap_or_default();
        fs::write(&state, "offline")
            .map_err(|e| format!("offlining failed: {e} (unmovable pages in the block?)"))?;
        let st = read_state();
        let during = node_mem_total(nid).unwrap_or(0);
        let back = fs::write(&state, memblock::online_value(&zone));
        back.map_err(|e| format!("onlining again failed: {e}"))?;
        if st != "offline" {
            return Err(format!("state reads {st} after offline"));
        }
        if during >= before {
            return Err(format!(
                "MemTotal {} kB while offline, {} kB before",
                during >> 10,
                before >> 10
            ));
        }
        let after = node_mem_total(nid).unwrap_or(0);
        let zone_after = memblock::block_zone(b).unwrap_or_default();
        if read_state() != "online" || after != before || zone_after != zone {
            return Err(format!(
                "after onlining: state {}, zone {zone_after}, MemTotal {} kB (was zone {zone}, {} kB)",
                read_state(),
                after >> 10,
                before >> 10
            ));
        }
        Ok(format!(
            "zone {zone}, MemTotal {} -> {} -> {} kB",
            before >> 10,
            during >> 10,
            after >> 10
        ))
    })();
    r.check_note(&name, res);
}
