//! Per-node `MemFree` and `MemTotal`, the zones' per-CPU pages, and
//! tierkit's `limits` file.

use super::*;

/// tierkit's limits file (`KEY VALUE` lines).
pub const LIMITS_PATH: &str = "/sys/kernel/debug/tierkit/limits";

/// `MemFree` of node `nid` in kB (`/sys/devices/system/node/nodeN/meminfo`).
pub fn node_memfree_kb(nid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!(
        "{}/node{nid}/meminfo",
        crate::linux::kernel::NODE_SYSFS
    ))
    .ok()?;
    parse_node_meminfo(&s, "MemFree")
}

/// Folds every CPU's pending vmstat deltas into the counters that
/// `MemFree` and `/proc/zoneinfo` print (a write to
/// `/proc/sys/vm/stat_refresh`, root only). Without it those counters lag
/// by up to the stat threshold per CPU, until vmstat's periodic update.
/// A failure (no such file, not root) leaves the lag: nothing to report.
pub fn fold_vmstat() {
    let _ = std::fs::write("/proc/sys/vm/stat_refresh", "1");
}

/// Free memory of node `nid` in kB counting the pages on the per-CPU free
/// lists too: `MemFree` plus every `count:` of the node's pagesets in
/// `/proc/zoneinfo`, after [`fold_vmstat`]. Freed pages first go to those
/// lists, which in 7.3 may grow to 1/8 of a zone per CPU (mm/page_alloc.c
/// `zone_highsize`, MIN_PERCPU_PAGELIST_HIGH_FRACTION), so MemFree alone
/// can stay hundreds of MiB low after a large free until vmstat's decay
/// drains them.
pub fn node_free_kb(nid: u32) -> Option<u64> {
    fold_vmstat();
    let free = node_memfree_kb(nid)?;
    let zi = std::fs::read_to_string("/proc/zoneinfo").ok()?;
    Some(free + parse_zoneinfo_pcp_pages(&zi, nid) * (PAGE_SIZE as u64 / 1024))
}

/// Pages on the per-CPU lists of node `nid`'s zones in a zoneinfo text.
pub fn parse_zoneinfo_pcp_pages(s: &str, nid: u32) -> u64 {
    let mut node = None;
    let mut sum = 0;
    for l in s.lines() {
        if let Some(rest) = l.strip_prefix("Node ") {
            node = rest
                .split(',')
                .next()
                .and_then(|n| n.trim().parse::<u32>().ok());
            continue;
        }
        if node != Some(nid) {
            continue;
        }
        if let Some(v) = l.trim_start().strip_prefix("count:") {
            sum += v.trim().parse::<u64>().unwrap_or(0);
        }
    }
    sum
}

/// `MemTotal` of node `nid` in kB.
pub fn node_memtotal_kb(nid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!(
        "{}/node{nid}/meminfo",
        crate::linux::kernel::NODE_SYSFS
    ))
    .ok()?;
    parse_node_meminfo(&s, "MemTotal")
}

/// The kB figure of `key` in a node meminfo text (`Node 0 MemFree:  123 kB`).
pub fn parse_node_meminfo(s: &str, key: &str) -> Option<u64> {
    s.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (_node, _nid, k, v) = (f.next()?, f.next()?, f.next()?, f.next()?);
        (k.strip_suffix(':')? == key).then(|| v.parse().ok())?
    })
}

/// `MemTotal` of `/proc/meminfo` in kB.
pub fn memtotal_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    s.lines().find_map(|l| {
        let v = l.strip_prefix("MemTotal:")?;
        v.split_whitespace().next()?.parse().ok()
    })
}

/// Parses `KEY VALUE` lines; every value must be an unsigned integer.
pub fn parse_limits(s: &str) -> anyhow::Result<Vec<(String, u64)>> {
    let mut v = Vec::new();
    for l in s.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let f: Vec<&str> = l.split_whitespace().collect();
        anyhow::ensure!(f.len() == 2, "bad limits line {l:?}");
        v.push((f[0].to_string(), f[1].parse()?));
    }
    Ok(v)
}

/// The value of `key` in parsed limits.
pub fn limit(limits: &[(String, u64)], key: &str) -> Option<u64> {
    limits.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
}

/// Reads and parses [`LIMITS_PATH`].
pub fn read_limits() -> anyhow::Result<Vec<(String, u64)>> {
    crate::linux::kernel::ensure_debugfs();
    parse_limits(&std::fs::read_to_string(LIMITS_PATH)?)
}
