//! The checks of `tk-test-pool-hostile` (see its doc): the pre-cleared
//! gigantic pool against a hostile root user. Here: the pool's state and
//! write checks shared by the steps; odd writes and an open fd in
//! `writes.rs` (steps 1 and 2), the storm in `storm.rs` (step 3), `rmmod`
//! and a memory offline during a refill in `refill.rs` (steps 4 and 5),
//! a GiB of the pool held by a pipe in `held.rs` (step 5's end).

mod held;
mod refill;
mod storm;
mod writes;

pub use refill::*;
pub use storm::*;
pub use writes::*;

use crate::abi::first_use::BootPool;
use crate::abi::pool::{self, POOL_PATH};
use crate::abi::tk::MovableGigantic;
use crate::abi::tk::Tierkit;
use crate::harness::report::Report;
use crate::linux::memblock::{self, Outcome};
use crate::tests::faults::Kmsg;
use crate::tests::faults::{self, KunitFilter, TierkitWeights};
use crate::tests::fuzz::Rng;
use crate::tests::pool::memory_back;
use crate::topology::node::Topology;
use crate::{linux::errno::errno_name, linux::errno::expect_errno, linux::vma};
use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierkit_core::uapi::TK_GIGANTIC_BYTES;

/// How long offlining one block may take in step 5.
pub const OFFLINE_LIMIT: Duration = Duration::from_secs(45);

/// Onlines (`online_movable`) each of `blocks`, each within
/// [`OFFLINE_LIMIT`]; the blocks that did not come back, with why.
fn online_movable(blocks: &[u64]) -> Result<(), Vec<String>> {
    let mut not_back = Vec::new();
    for &b in blocks {
        match memblock::set_block_state(b, "online_movable", OFFLINE_LIMIT) {
            Ok(t) if t.outcome == Outcome::Done => {}
            Ok(t) => not_back.push(format!("memory{b}: {}", t.outcome.describe())),
            Err(e) => not_back.push(format!("memory{b}: {e}")),
        }
    }
    if not_back.is_empty() {
        Ok(())
    } else {
        Err(not_back)
    }
}

/// A KUnit filter no suite matches (the reloads run no suite).
pub const NO_SUITES: &str = "tk-test-pool-hostile-runs-no-kunit-suite";

/// `(target, ready)` of `nid`.
pub fn state(nid: u32) -> Result<(u64, u64), String> {
    pool::state(nid).map_err(|e| format!("{e:#}"))
}

/// Checks that a write of `b` fails with `errno` and changes nothing.
pub fn refused(r: &mut Report, what: &str, b: &[u8], errno: i32) {
    r.check(
        &format!("{what}: refused, nothing changes"),
        pool::refused_unchanged(b, errno),
    );
}

/// Checks that writing `b` (whole) leaves `nid` at target `want`, then
/// empties the node's pool again.
pub fn taken(r: &mut Report, what: &str, nid: u32, b: &[u8], want: u64, pwrite_at: Option<u64>) {
    let res = (|| {
        let n = match pwrite_at {
            None => pool::write_bytes(b),
            Some(off) => OpenOptions::new()
                .write(true)
                .open(POOL_PATH)
                .and_then(|f| f.write_at(b, off)),
        }
        .map_err(|e| format!("write: {}", errno_name(&e)))?;
        if n != b.len() {
            return Err(format!("wrote {n} of {} bytes", b.len()));
        }
        match state(nid)? {
            (t, _) if t == want => Ok(()),
            (t, rd) => Err(format!("reads `{nid} {t} {rd}`, expected target {want}")),
        }
    })();
    let _ = pool::set_target(nid, 0);
    r.check(what, res);
}

/// `tk-test-pool-hostile`'s `main`.
pub fn main() -> ExitCode {
    let mut r = Report::new("tk-test-pool-hostile", "test");
    let Some(topo) = crate::abi::ready::tierkit_ready(&mut r) else {
        return r.finish();
    };
    let Some(nid) = topo.dram_node() else {
        r.skip(
            "the pool against a hostile user",
            "no node with memory and CPUs",
        );
        return r.finish();
    };
    if !pool::present() {
        r.fail("the pool file exists", format!("no {POOL_PATH}"));
        return r.finish();
    }
    let kmsg = Kmsg::open_at_end();
    let boot = BootPool::release(nid);
    if let Some(n) = boot.restore {
        r.note(format!(
            "node {nid}: {n} boot-time 1 GiB hugetlb page(s) handed back for the test"
        ));
    }
    let start_kb = match pool::quiet_free_kb(nid) {
        Ok(kb) => kb,
        Err(e) => {
            r.fail("free memory", e);
            return r.finish();
        }
    };
    odd_writes(&mut r, &topo, nid);
    open_fd_pins(&mut r, nid);
    storm(&mut r, nid, start_kb);
    let loaded = rmmod_mid_refill(&mut r, &topo, nid, start_kb);
    if loaded {
        r.check_note(
            "at the end the node's free memory is back",
            memory_back(nid, start_kb),
        );
        offline_mid_refill(&mut r, &topo);
    }
    match kmsg {
        Ok(k) => {
            let crashes = faults::crash_lines(&k.drain());
            r.check(
                "the kernel printed no oops, BUG or WARNING meanwhile",
                if crashes.is_empty() {
                    Ok(())
                } else {
                    Err(format!("{crashes:?}"))
                },
            );
        }
        Err(e) => {
            r.fail("open /dev/kmsg", e.to_string());
        }
    }
    drop(boot);
    r.finish()
}
