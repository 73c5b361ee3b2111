//! The checks of `tk-test-block-offline` (see its doc): memory blocks that hold
//! tierkit's pages go offline. Here: the test's state ([`T`]: what it must
//! put back), the page pattern and its checks, and a node's kind of
//! memory; the cases by zone in `kernel.rs` (ZONE_NORMAL: the offline
//! fails), `movable.rs` (ZONE_MOVABLE: the pages move), `speed.rs` (the
//! same at scale, timed against the kernel's offline) and `gigantic.rs`
//! (gigantic ranges on ZONE_MOVABLE and their opt-in); the forked child
//! that shares a mapping in `sharer.rs`.

mod gigantic;
mod kernel;
mod movable;
mod sharer;
mod speed;

pub use gigantic::*;
pub use kernel::*;
pub use movable::*;
pub use sharer::*;
pub use speed::*;

use crate::abi::ready::tierkit_ready;
use crate::abi::tk::{self, read_stats, stats_of, NodeStats, Tierkit, TK_MODE_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::memblock::{
    self, block_node, block_of_pfn, block_state, block_zone, blocks_of, first_fallback,
    node_blocks, node_distances, node_zones, online_value, pagemap_pfns, set_block_state, Kmsg,
    Outcome, Timed,
};
use crate::linux::sys::{monotonic_ns, Mapping, PAGE_SIZE};
use crate::topology::node::{fmt_mask, Topology};
use crate::topology::weights::write_file;
use crate::{linux::errno::errno_name, topology::interleave::status_str};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;
use tierkit_core::uapi::{TkGigantic, TK_GIGANTIC_BYTES, TK_PLACE_LOCAL, TK_WALK_PUD};

/// 4 KiB pages mapped for the offline checks: 8 MiB (CXL memory is slow
/// under QEMU: keep the pattern small).
pub const PAGES: usize = 2048;

/// Pages of the second mapping, after onlining.
pub const PAGES_AGAIN: usize = 256;

/// An offline that takes longer is killed and counts as hung.
pub const OFFLINE_LIMIT: Duration = Duration::from_secs(60);

/// A refused offline must come back within this.
pub const PROMPT: Duration = Duration::from_secs(2);

pub const GIB_PAGES: usize = (TK_GIGANTIC_BYTES as usize) / PAGE_SIZE;

/// Word `j` of page `i` of the pattern: distinct for every word of every
/// page, and never zero for the pages used here.
pub fn pattern(i: usize, j: usize) -> u64 {
    ((i as u64) << 32 | j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xC3A5_C85C_97CB_3127
}

pub const WORDS: usize = PAGE_SIZE / 8;

/// The words of page `i` of `m`.
pub fn page_words(m: &Mapping, i: usize) -> &[u64] {
    assert!(i < m.nr_pages());
    // SAFETY: page `i` lies inside the live, page-aligned, readable
    // mapping; the test is single-threaded, nothing writes it meanwhile.
    unsafe { std::slice::from_raw_parts(m.as_ptr().add(i * PAGE_SIZE).cast::<u64>(), WORDS) }
}

/// Writes the pattern into page `i` of `m`.
pub fn fill_page(m: &Mapping, i: usize) {
    assert!(i < m.nr_pages());
    // SAFETY: page `i` lies inside the live, page-aligned, writable
    // mapping, and no reference to it is alive.
    let p = unsafe { m.as_ptr().add(i * PAGE_SIZE).cast::<u64>() };
    for j in 0..WORDS {
        // SAFETY: in bounds of the page, see above.
        unsafe { p.add(j).write(pattern(i, j)) };
    }
}

/// Checks pages `pages` of `m` against the pattern; the error names how
/// many pages differ and the first word that does.
pub fn verify_pages(m: &Mapping, pages: impl Iterator<Item = usize>) -> Result<String, String> {
    let (mut bad, mut n, mut first) = (0usize, 0usize, None);
    for i in pages {
        n += 1;
        let w = page_words(m, i);
        if let Some(j) = (0..WORDS).find(|&j| w[j] != pattern(i, j)) {
            bad += 1;
            first.get_or_insert(format!(
                "page {i} word {j}: {:#018x}, expected {:#018x}",
                w[j],
                pattern(i, j)
            ));
        }
    }
    match first {
        None => Ok(format!("{n} pages, {} KiB", n * PAGE_SIZE / 1024)),
        Some(f) => Err(format!("{bad} of {n} pages differ; first: {f}")),
    }
}

/// Every page of `m` is on `nid` (`move_pages`).
pub fn check_nodes(m: &Mapping, nid: u32) -> Result<String, String> {
    let nodes = m.page_nodes().map_err(|e| format!("move_pages: {e}"))?;
    let bad: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i] != nid as i32)
        .collect();
    if bad.is_empty() {
        return Ok(format!("{} pages on node {nid}", nodes.len()));
    }
    Err(format!(
        "{} of {} pages not on node {nid}: {}",
        bad.len(),
        nodes.len(),
        bad.iter()
            .take(4)
            .map(|&i| format!("page {i} on {}", status_str(nodes[i])))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

pub fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

/// The kind of memory a node has, from its zones in `/proc/zoneinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// All of it in ZONE_MOVABLE.
    Movable,
    /// None of it in ZONE_MOVABLE (Normal, DMA32, ...).
    Kernel(Vec<String>),
    /// Both.
    Mixed(Vec<String>),
    None,
}

pub fn node_kind(nid: u32) -> Kind {
    let zones: Vec<String> = node_zones(nid).into_iter().map(|z| z.zone).collect();
    let movable = zones.iter().any(|z| z == "Movable");
    match (zones.is_empty(), movable, zones.len()) {
        (true, _, _) => Kind::None,
        (false, true, 1) => Kind::Movable,
        (false, true, _) => Kind::Mixed(zones),
        (false, false, _) => Kind::Kernel(zones),
    }
}

/// The test's state: the report, and what it must put back.
pub struct T {
    pub r: Report,
    pub topo: Topology,
    pub block_bytes: u64,
    /// Blocks this test took offline and has not yet onlined: block ->
    /// the zone to put it back into.
    pub to_online: BTreeMap<u64, String>,
    /// The opt-in was set to 1 and must go back to 0.
    pub opt_in_set: bool,
    /// A state write did not return even after SIGKILL: no more hotplug.
    pub stuck: bool,
    /// Every offline attempt, for the JSON line.
    pub offlines: Vec<Value>,
    pub kmsg: Option<Kmsg>,
}

impl T {
    /// A test's state with nothing to put back yet.
    pub fn new(r: Report, topo: Topology, block_bytes: u64, kmsg: Option<Kmsg>) -> T {
        T {
            r,
            topo,
            block_bytes,
            to_online: BTreeMap::new(),
            opt_in_set: false,
            stuck: false,
            offlines: Vec::new(),
            kmsg,
        }
    }

    /// Kernel log lines since the last call.
    pub fn log(&self) -> Vec<String> {
        self.kmsg.as_ref().map(Kmsg::read_new).unwrap_or_default()
    }

    pub fn skip_log(&self) {
        let _ = self.log();
    }

    /// Offlines `block` with the time limit and records the attempt.
    pub fn offline(&mut self, what: &str, block: u64, pages: usize) -> Option<Timed> {
        self.offline_within(what, block, pages, OFFLINE_LIMIT)
    }

    /// Offlines `block`, killing the writer after `limit`, and records the
    /// attempt.
    pub fn offline_within(
        &mut self,
        what: &str,
        block: u64,
        pages: usize,
        limit: Duration,
    ) -> Option<Timed> {
        if self.stuck {
            self.r.fail(
                &format!("{what}: offline memory{block}"),
                "not tried: an earlier state write is stuck in the kernel",
            );
            return None;
        }
        let zone = block_zone(block).unwrap_or_else(|| "?".into());
        let t = match set_block_state(block, "offline", limit) {
            Ok(t) => t,
            Err(e) => {
                self.r.fail(
                    &format!("{what}: offline memory{block}"),
                    format!("fork: {e}"),
                );
                return None;
            }
        };
        if t.outcome == Outcome::Done {
            self.to_online.insert(block, zone.clone());
        }
        if let Outcome::TimedOut { reaped } = t.outcome {
            self.stuck |= !reaped;
            // A killed offline backs out (EINTR), but look.
            if block_state(block).as_deref() == Some("offline") {
                self.to_online.insert(block, zone.clone());
            }
        }
        self.r.note(format!(
            "{what}: offline memory{block} (zone {zone}, {pages} tierkit pages): {} after {}",
            t.outcome.describe(),
            secs(t.elapsed)
        ));
        self.offlines.push(json!({
            "case": what,
            "block": block,
            "zone": zone,
            "tierkit_pages": pages,
            "outcome": t.outcome.describe(),
            "seconds": t.elapsed.as_secs_f64(),
        }));
        Some(t)
    }

    /// Onlines every block this test took offline, into its old zone.
    pub fn online_all(&mut self, what: &str) {
        let blocks: Vec<(u64, String)> = std::mem::take(&mut self.to_online).into_iter().collect();
        for (b, zone) in blocks {
            let name = format!("{what}: online memory{b} again ({})", online_value(&zone));
            if self.stuck {
                self.r.fail(
                    &name,
                    "not tried: an earlier state write is stuck in the kernel",
                );
                continue;
            }
            let res = match set_block_state(b, online_value(&zone), OFFLINE_LIMIT) {
                Err(e) => Err(format!("fork: {e}")),
                Ok(t) if t.outcome != Outcome::Done => {
                    if let Outcome::TimedOut { reaped: false } = t.outcome {
                        self.stuck = true;
                    }
                    Err(format!(
                        "{} after {}",
                        t.outcome.describe(),
                        secs(t.elapsed)
                    ))
                }
                Ok(t) => {
                    let (st, z) = (block_state(b), block_zone(b));
                    if st.as_deref() != Some("online") || z.as_deref() != Some(zone.as_str()) {
                        Err(format!(
                            "state {st:?}, zone {z:?} (expected online, {zone})"
                        ))
                    } else {
                        Ok(format!("{}, zone {zone}", secs(t.elapsed)))
                    }
                }
            };
            if res.is_err() {
                // Keep it on the list for the final restore attempt.
                self.to_online.insert(b, zone);
            }
            self.r.check_note(&name, res);
        }
    }

    /// The last check of a hotplug test: every block it took offline is
    /// online again, `also` (another thing to put back) holds, and tierkit
    /// holds what it held at `start`.
    pub fn check_put_back(&mut self, name: &str, start: &[NodeStats], also: Result<(), String>) {
        let end = read_stats().unwrap_or_default();
        let res = if !self.to_online.is_empty() {
            Err(format!(
                "blocks still offline: {:?}",
                self.to_online.keys().collect::<Vec<_>>()
            ))
        } else if also.is_err() {
            also
        } else if total_held(&end) != total_held(start) {
            Err(format!(
                "held {} at the start, {} at the end",
                fmt_held(start, &self.topo.memory),
                fmt_held(&end, &self.topo.memory)
            ))
        } else {
            Ok(())
        };
        self.r.check(name, res);
    }

    /// Sets the `movable_gigantic` opt-in.
    pub fn set_opt_in(&mut self, on: bool) -> Result<(), String> {
        let v = if on { "1" } else { "0" };
        write_file(Path::new(MOVABLE_GIGANTIC), v)
            .map_err(|e| format!("writing {v} to {MOVABLE_GIGANTIC}: {}", errno_name(&e)))?;
        self.opt_in_set = on;
        let now = read_opt_in();
        if now.as_deref() != Some(v) {
            return Err(format!(
                "{MOVABLE_GIGANTIC} reads {now:?} after writing {v}"
            ));
        }
        Ok(())
    }
}

pub fn held(stats: &[NodeStats], nid: u32) -> u64 {
    stats_of(stats, nid).1
}

pub fn total_held(stats: &[NodeStats]) -> u64 {
    stats.iter().map(|s| s.held).sum()
}

/// `held` of every node that has some, for messages: `0:2048 2:0`.
pub fn fmt_held(stats: &[NodeStats], nodes: &[u32]) -> String {
    nodes
        .iter()
        .map(|&n| format!("{n}:{}", held(stats, n)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Opens `/dev/tierkit` with an interleave policy on `nid` alone.
pub fn open_on(r: &mut Report, what: &str, nid: u32) -> Option<Tierkit> {
    let tk = match Tierkit::open() {
        Ok(t) => t,
        Err(e) => {
            r.fail(&format!("{what}: open /dev/tierkit"), errno_name(&e));
            return None;
        }
    };
    match tk.set_policy(TK_MODE_INTERLEAVE, 1u64 << nid) {
        Ok(p) if p.nodemask == 1u64 << nid => Some(tk),
        Ok(p) => {
            r.fail(
                &format!("{what}: TK_IOC_SET_POLICY on node {nid}"),
                format!("effective mask {}", fmt_mask(p.nodemask)),
            );
            None
        }
        Err(e) => {
            r.fail(
                &format!("{what}: TK_IOC_SET_POLICY on node {nid}"),
                errno_name(&e),
            );
            None
        }
    }
}

/// Maps `pages` 4 KiB pages on `nid` and fills them with the pattern.
pub fn map_filled(t: &mut T, what: &str, nid: u32, pages: usize) -> Option<(Tierkit, Mapping)> {
    let tk = open_on(&mut t.r, what, nid)?;
    let t0 = monotonic_ns();
    let m = match tk.map(pages, 0) {
        Ok(m) => m,
        Err(e) => {
            let log = t.log().join(" | ");
            t.r.fail(
                &format!("{what}: mmap {} KiB on node {nid}", pages * 4),
                format!("{} (kernel log: {log})", errno_name(&e)),
            );
            return None;
        }
    };
    let map_s = (monotonic_ns() - t0) as f64 / 1e9;
    let t1 = monotonic_ns();
    for i in 0..pages {
        fill_page(&m, i);
    }
    t.r.ok_note(
        &format!(
            "{what}: mmap {} KiB on node {nid} and fill a pattern",
            pages * 4
        ),
        format!(
            "mmap {map_s:.3} s, fill {:.3} s",
            (monotonic_ns() - t1) as f64 / 1e9
        ),
    );
    Some((tk, m))
}

/// The pfn of every page of `m`, all present; else a failed check.
pub fn all_pfns(r: &mut Report, what: &str, m: &Mapping) -> Option<Vec<u64>> {
    match pagemap_pfns(m.addr(), m.nr_pages()) {
        Ok(p) if p.iter().all(Option::is_some) => Some(p.into_iter().flatten().collect()),
        Ok(p) => {
            r.fail(
                &format!("{what}: pfns from /proc/self/pagemap"),
                format!(
                    "{} of {} pages show no pfn (not root?)",
                    p.iter().filter(|x| x.is_none()).count(),
                    p.len()
                ),
            );
            None
        }
        Err(e) => {
            r.fail(
                &format!("{what}: pfns from /proc/self/pagemap"),
                e.to_string(),
            );
            None
        }
    }
}

const BIN: &str = "tk-test-block-offline";

/// `tk-test-block-offline`'s `main`.
pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let Some(topo) = tierkit_ready(&mut r) else {
        return r.finish();
    };
    let block_bytes = match memblock::block_size() {
        Ok(b) => b,
        Err(e) => {
            r.fail("memory block size", e.to_string());
            return r.finish();
        }
    };
    r.note(format!("memory block size {} MiB", block_bytes >> 20));
    let kmsg = match Kmsg::open() {
        Ok(k) => Some(k),
        Err(e) => {
            r.fail("open /dev/kmsg", e.to_string());
            None
        }
    };
    let start = read_stats().unwrap_or_default();
    let mut t = T::new(r, topo.clone(), block_bytes, kmsg);

    let cxl = topo.cxl_node();
    let kinds: Vec<(u32, Kind)> = topo.memory.iter().map(|&n| (n, node_kind(n))).collect();
    for (n, k) in &kinds {
        t.r.note(format!("node {n}: {k:?}"));
    }
    let kind_of = |n: u32| kinds.iter().find(|x| x.0 == n).map(|x| x.1.clone());

    // Kernel memory: the memory-only node if it is kernel memory, else
    // the DRAM node.
    let kernel_node = cxl
        .filter(|&c| matches!(kind_of(c), Some(Kind::Kernel(_))))
        .or_else(|| {
            topo.dram_node()
                .filter(|&d| matches!(kind_of(d), Some(Kind::Kernel(_))))
        });
    match kernel_node {
        Some(k) => kernel_case(&mut t, k),
        None => {
            t.r.skip(
                "kernel memory: offline a block holding tierkit pages is EBUSY at once",
                "no node whose memory is all kernel zones",
            );
        }
    }

    let why_not_movable = match cxl {
        None => Some("no memory-only node (numa, numa2 or cxl topology needed)".to_string()),
        Some(c) => match kind_of(c) {
            Some(Kind::Movable) => None,
            Some(Kind::Kernel(z)) => Some(format!(
                "node {c}'s memory is in ZONE_{}, not ZONE_MOVABLE (boot memory or onlined as kernel memory; --topology cxl --cxl-online movable has a movable node)",
                z.join("/").to_uppercase()
            )),
            Some(Kind::Mixed(z)) => Some(format!(
                "node {c}'s memory is in several zones ({}), not all in ZONE_MOVABLE (a block onlined online_kernel?): tierkit's pages would go to the kernel zone",
                z.join(", ")
            )),
            _ => Some(format!("node {c} has no zone with memory")),
        },
    };
    match (cxl, why_not_movable) {
        (Some(c), None) => {
            movable_case(&mut t, c);
            speed_case(&mut t, c);
            gigantic_case(&mut t, c);
        }
        (_, Some(why)) => {
            for n in [
                "movable: offline every block holding tierkit pages",
                "movable: contents, nodes and stats after the offline",
                "movable: MADV_DONTNEED + touch after the move",
                "movable: online again and map again",
                "movable: offline of a block of 16384-page mappings, time against the kernel's",
                "gigantic on movable: without opt-in, ENOMEM naming movable_gigantic",
                "gigantic on movable: with opt-in, offline inside the range is EBUSY at once",
            ] {
                t.r.skip(n, &why);
            }
        }
        _ => {}
    }

    // Put everything back.
    if !t.to_online.is_empty() {
        t.online_all("restore");
    }
    if t.opt_in_set {
        if let Err(e) = t.set_opt_in(false) {
            t.r.fail("restore: movable_gigantic back to 0", e);
        }
    }
    let opt = read_opt_in();
    let opt_ok = if opt.is_some() && opt.as_deref() != Some("0") {
        Err(format!("movable_gigantic reads {opt:?}"))
    } else {
        Ok(())
    };
    t.check_put_back(
        "everything put back: blocks online, opt-in 0, nothing held",
        &start,
        opt_ok,
    );
    let offlines = std::mem::take(&mut t.offlines);
    t.r.set("offlines", Value::Array(offlines));
    t.r.finish()
}
