//! The checks of `tk-test-node-offline` (see its doc): a memory node that
//! holds tierkit's pages goes offline whole. Here: the page pattern, the
//! node's blocks and weight files, and putting blocks back; the whole
//! node's offline in `whole_node.rs`, the offline racing a gigantic clear
//! or a registration in `clear.rs`, with a reference held in
//! `reference.rs`, and during a rebalance in `rebalance.rs`.

mod clear;
mod rebalance;
mod reference;
mod whole_node;

pub use clear::*;
pub use rebalance::*;
pub use reference::*;
pub use whole_node::*;

use crate::abi::ready::tierkit_ready;
use crate::abi::tk::{
    clear_bench_arg, read_stats, stats_of, MovableGigantic, Tierkit, TK_MODE_INTERLEAVE,
    TK_MODE_WEIGHTED_INTERLEAVE,
};
use crate::harness::report::Report;
use crate::linux::memblock::{
    block_state, block_zone, node_blocks, set_block_state, Kmsg, Outcome,
};
use crate::linux::sys::{Mapping, PAGE_SIZE};
use crate::topology::node::{mask_of, parse_list, NODE_SYSFS};
use crate::topology::weights::{KERNEL_WI_DIR, TIERKIT_WI_DIRS};
use crate::{linux::errno::errno_name, linux::errno::expect_errno};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;
use tierkit_core::uapi::{
    TkRebalance, TK_POLICY_F_WEIGHTS, TK_REBALANCE_F_DRY_RUN, TK_REBALANCE_F_WEIGHTS,
};

pub const PAGES_A: usize = 64;

pub const PAGES_B: usize = 16;

/// An offline or online that takes longer is killed and counts as hung.
pub const LIMIT: Duration = Duration::from_secs(60);

/// Word `j` of page `i` of file `f`'s pattern: distinct and never zero.
pub fn pattern(f: u64, i: usize, j: usize) -> u64 {
    (f << 56) | ((i as u64) << 24) | (j as u64) | 0x8000_0000_0000_0000
}

pub fn words(m: &Mapping, i: usize) -> &[u64] {
    // SAFETY: page `i` lies inside the live shared mapping `m`, which is
    // page-aligned; nothing writes it while the slice lives.
    unsafe {
        std::slice::from_raw_parts(m.as_ptr().add(i * PAGE_SIZE).cast::<u64>(), PAGE_SIZE / 8)
    }
}

pub fn fill(m: &Mapping, f: u64) {
    let base = m.as_ptr().cast::<u64>();
    for i in 0..m.nr_pages() {
        for j in 0..PAGE_SIZE / 8 {
            // SAFETY: word `j` of page `i` lies inside the live, writable
            // shared mapping `m`.
            unsafe { base.add(i * PAGE_SIZE / 8 + j).write(pattern(f, i, j)) };
        }
    }
}

pub fn verify(m: &Mapping, f: u64) -> Result<(), String> {
    for i in 0..m.nr_pages() {
        if let Some((j, w)) = words(m, i)
            .iter()
            .enumerate()
            .find(|(j, w)| **w != pattern(f, i, *j))
        {
            return Err(format!(
                "page {i} word {j}: {w:#x}, expected {:#x}",
                pattern(f, i, j)
            ));
        }
    }
    Ok(())
}

pub fn has_memory() -> BTreeSet<u32> {
    std::fs::read_to_string(format!("{NODE_SYSFS}/has_memory"))
        .ok()
        .and_then(|s| parse_list(&s).ok())
        .unwrap_or_default()
        .into_iter()
        .collect()
}

/// The weight files of node `nid`: the kernel's and tierkit's.
pub fn weight_files(nid: u32) -> Vec<String> {
    let tierkit = TIERKIT_WI_DIRS
        .iter()
        .find(|d| Path::new(d).is_dir())
        .copied()
        .unwrap_or(TIERKIT_WI_DIRS[0]);
    [KERNEL_WI_DIR, tierkit]
        .iter()
        .map(|d| format!("{d}/node{nid}"))
        .collect()
}

/// The checks that node `c`, offline whole, is gone: out of `has_memory`
/// (N_MEMORY), and its weight files (the kernel's and tierkit's) removed.
pub fn check_node_gone(r: &mut Report, c: u32) {
    r.check(
        &format!("node {c} left N_MEMORY"),
        if has_memory().contains(&c) {
            Err(format!("has_memory still lists {c}"))
        } else {
            Ok(())
        },
    );
    let present: Vec<String> = weight_files(c)
        .into_iter()
        .filter(|f| Path::new(f).exists())
        .collect();
    r.check(
        &format!("node {c}'s weight files are gone (kernel's and tierkit's)"),
        if present.is_empty() {
            Ok(())
        } else {
            Err(format!("still there: {}", present.join(", ")))
        },
    );
}

pub fn held_on(nid: u32) -> u64 {
    read_stats().map_or(u64::MAX, |s| stats_of(&s, nid).1)
}

/// The node's blocks that are online, all in ZONE_MOVABLE; else why not.
pub fn movable_blocks(nid: u32) -> Result<Vec<u64>, String> {
    let blocks = node_blocks(nid);
    if blocks.is_empty() {
        return Err(format!("node {nid} has no memory blocks"));
    }
    for &b in &blocks {
        let z = block_zone(b).unwrap_or_default();
        if z != "Movable" || block_state(b).as_deref() != Some("online") {
            return Err(format!(
                "memory{b} of node {nid} is {:?} in zone {z:?}: the node's memory is not all online ZONE_MOVABLE (--topology cxl --cxl-online movable has such a node)",
                block_state(b)
            ));
        }
    }
    Ok(blocks)
}

/// Writes `value` to every block's state, timed; the blocks that took it.
pub fn set_all(r: &mut Report, what: &str, blocks: &[u64], value: &str) -> Vec<u64> {
    let mut done = Vec::new();
    let mut slowest = (0u64, Duration::ZERO);
    let mut failed = Vec::new();
    for &b in blocks {
        match set_block_state(b, value, LIMIT) {
            Ok(t) => {
                if t.elapsed > slowest.1 {
                    slowest = (b, t.elapsed);
                }
                match t.outcome {
                    Outcome::Done => done.push(b),
                    o => failed.push(format!(
                        "memory{b}: {} after {:.3} s",
                        o.describe(),
                        t.elapsed.as_secs_f64()
                    )),
                }
            }
            Err(e) => failed.push(format!("memory{b}: {e}")),
        }
    }
    r.check_note(
        what,
        if failed.is_empty() {
            Ok(format!(
                "{} blocks, slowest memory{} {:.3} s",
                done.len(),
                slowest.0,
                slowest.1.as_secs_f64()
            ))
        } else {
            Err(failed.join("; "))
        },
    );
    done
}

/// Puts back online every block of `blocks` that is in `left` or not
/// online, whatever failed, as the check `what`.
pub fn put_back(r: &mut Report, blocks: &[u64], left: &[u64], what: &str) {
    let still: Vec<u64> = blocks
        .iter()
        .copied()
        .filter(|&b| left.contains(&b) || block_state(b).as_deref() != Some("online"))
        .collect();
    if !still.is_empty() {
        set_all(r, what, &still, "online_movable");
    }
}

const BIN: &str = "tk-test-node-offline";

/// `tk-test-node-offline`'s `main`.
pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let Some(topo) = tierkit_ready(&mut r) else {
        return r.finish();
    };
    let (Some(dram), Some(c)) = (topo.dram_node(), topo.cxl_node()) else {
        r.skip("node lifecycle", "no DRAM node and memory-only node");
        return r.finish();
    };
    let blocks = match movable_blocks(c) {
        Ok(b) => b,
        Err(why) => {
            r.skip("node lifecycle: offline every block of the CXL node", why);
            return r.finish();
        }
    };
    let start = read_stats().unwrap_or_default();
    let mut left = run(&mut r, dram, c, &blocks);
    if left.is_empty() {
        left = offline_during_clear(&mut r, c, &blocks);
    }
    put_back(
        &mut r,
        &blocks,
        &left,
        "restore: online the blocks left offline",
    );
    let mut left = offline_before_registration(&mut r, c, &blocks);
    left.extend(offline_with_reference(&mut r, c));
    put_back(
        &mut r,
        &blocks,
        &left,
        "restore: online the blocks left offline (registration window)",
    );
    let left = offline_during_rebalance(&mut r, dram, c, &blocks);
    put_back(
        &mut r,
        &blocks,
        &left,
        "restore: online the blocks left offline (rebalance)",
    );
    let end = read_stats().unwrap_or_default();
    r.check(
        "everything put back: held pages as at the start",
        if stats_of(&end, c).1 == stats_of(&start, c).1
            && stats_of(&end, dram).1 == stats_of(&start, dram).1
        {
            Ok(())
        } else {
            Err(format!(
                "held on node {c}: {} -> {}, on node {dram}: {} -> {}",
                stats_of(&start, c).1,
                stats_of(&end, c).1,
                stats_of(&start, dram).1,
                stats_of(&end, dram).1
            ))
        },
    );
    r.finish()
}
