//! The checks of `tk-test-hostile` (see its doc), by what they guard:
//! `arguments.rs` (arguments checked before any work), `out_of_memory.rs`
//! (a failed call leaves nothing pinned), `kill.rs` (SIGKILL is honoured)
//! and `limits.rs` (the limits on what userspace can make tierkit hold). Here: what they share
//! (what tierkit holds, and MemFree, back to a baseline).

mod arguments;
mod kill;
mod limits;
mod out_of_memory;

pub use arguments::*;
pub use kill::*;
pub use limits::*;
pub use out_of_memory::*;

use crate::abi::tk::{self, Tierkit, TK_MODE_INTERLEAVE, TK_MODE_WEIGHTED_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::sys::{monotonic_ns, PAGE_SIZE};
use crate::linux::vma::{self, sleep_ms, Spawned};
use crate::topology::node::Topology;
use crate::{linux::errno::errno_name, linux::errno::expect_errno, topology::cxl};
use std::process::ExitCode;
use tierkit_core::uapi::{
    TkGigantic, TK_GIGANTIC_BYTES, TK_GIGANTIC_F_QUERY, TK_PLACE_LOCAL, TK_PLACE_REMOTE,
};

const GIB: usize = TK_GIGANTIC_BYTES as usize;
const GIB_PAGES: usize = GIB / PAGE_SIZE;
const MIB_KB: u64 = 1024;
/// How far a node's free memory (MemFree plus the per-CPU free lists, see
/// `vma::node_free_kb`) may be below its baseline and count as "back"
/// (slab and page-table churn): 32 MiB.
const TOL_KB: u64 = 32 * MIB_KB;
/// How long "back" may take after the failing call or the reap.
const SETTLE_MS: u64 = 2000;

fn online_cpus() -> u32 {
    // SAFETY: sysconf has no memory effects.
    unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) as u32 }
}

fn gigantic_arg(threads: u32, placement: u32) -> TkGigantic {
    TkGigantic {
        threads,
        placement,
        ..Default::default()
    }
}

fn query(tk: &Tierkit) -> std::io::Result<TkGigantic> {
    tk.set_gigantic(TkGigantic {
        flags: TK_GIGANTIC_F_QUERY,
        ..Default::default()
    })
}

/// What tierkit holds, for "back to baseline" checks.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Held {
    /// `(nid, held, gigantic)` per node.
    per_node: Vec<(u32, u64, u64)>,
}

impl Held {
    fn now() -> Option<Held> {
        let s = tk::read_stats()?;
        Some(Held {
            per_node: s
                .iter()
                .map(|n| (n.nid, n.held, n.gigantic.unwrap_or(0)))
                .collect(),
        })
    }

    fn gigantic(&self, nid: u32) -> u64 {
        self.per_node.iter().find(|n| n.0 == nid).map_or(0, |n| n.2)
    }

    fn describe(&self) -> String {
        self.per_node
            .iter()
            .filter(|n| n.1 != 0 || n.2 != 0)
            .map(|n| format!("node {}: held {} gigantic {}", n.0, n.1, n.2))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Waits up to [`SETTLE_MS`] for stats to equal `base`.
fn held_back(base: &Option<Held>) -> Result<String, String> {
    let Some(base) = base else {
        return Err("cannot read /sys/kernel/debug/tierkit/stats".into());
    };
    let t0 = monotonic_ns();
    loop {
        let now = Held::now().ok_or("cannot read stats")?;
        if &now == base {
            let ms = (monotonic_ns() - t0) / 1_000_000;
            return Ok(if ms > 0 {
                format!("stats back after {ms} ms")
            } else {
                String::new()
            });
        }
        if monotonic_ns() - t0 > SETTLE_MS * 1_000_000 {
            return Err(format!(
                "stats now [{}], baseline [{}]",
                now.describe(),
                base.describe()
            ));
        }
        sleep_ms(20);
    }
}

/// Joins the notes of [`memfree_back`] and [`held_back`].
fn both(free: String, held: String) -> String {
    if held.is_empty() {
        free
    } else {
        format!("{free}; {held}")
    }
}

/// Waits up to [`SETTLE_MS`] for node `nid`'s MemFree to be within
/// [`TOL_KB`] below `base_kb` (or above it).
fn memfree_back(nid: u32, base_kb: Option<u64>) -> Result<String, String> {
    let Some(base) = base_kb else {
        return Err(format!("cannot read node {nid}'s meminfo"));
    };
    let t0 = monotonic_ns();
    loop {
        let now = vma::node_free_kb(nid).ok_or("cannot read meminfo")?;
        if now + TOL_KB >= base {
            let ms = (monotonic_ns() - t0) / 1_000_000;
            return Ok(format!(
                "node {nid} free {} MiB, baseline {} MiB{}",
                now / MIB_KB,
                base / MIB_KB,
                if ms > 0 {
                    format!(", after {ms} ms")
                } else {
                    String::new()
                }
            ));
        }
        if monotonic_ns() - t0 > SETTLE_MS * 1_000_000 {
            return Err(format!(
                "node {nid} free (MemFree + per-CPU lists) {} MiB, {} MiB below the baseline {} MiB (tolerance {} MiB)",
                now / MIB_KB,
                (base - now) / MIB_KB,
                base / MIB_KB,
                TOL_KB / MIB_KB
            ));
        }
        sleep_ms(20);
    }
}

/// Whether `nid` is a CXL region's node (QEMU's CXL memory costs about
/// 45 s per GiB written, see Documentation/dev-tools/topologies.md, "Slow memory").
pub fn is_cxl_node(nid: u32) -> bool {
    cxl::CxlBus::default().region_of_node(nid).is_some()
}

const BIN: &str = "tk-test-hostile";

/// `tk-test-hostile`'s `main`.
pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let Some(topo) = crate::abi::ready::tierkit_ready(&mut r) else {
        return r.finish();
    };
    let Some(dram) = topo.dram_node() else {
        r.fail("topology", "no node with CPUs and memory");
        return r.finish();
    };

    arguments_checked_first(&mut r, &topo, dram);
    gigantic_map_past_memory(&mut r, dram, 8);
    if let Some(m) = topo.memory_only().first().copied() {
        if is_cxl_node(m) {
            r.skip(
                &format!("out of memory: gigantic mmap past node {m}'s memory"),
                "CXL node: clearing its GiBs under QEMU costs ~45 s each (Documentation/dev-tools/topologies.md, Slow memory); node 0 covers it",
            );
        } else {
            let gib = vma::node_memtotal_kb(m).map_or(3, |kb| kb / (1 << 20) + 1);
            gigantic_map_past_memory(&mut r, m, gib as usize);
        }
    }
    small_pages_past_memory(&mut r, &topo);
    sigkill_honoured(&mut r, dram);
    limits(&mut r, &topo);
    r.finish()
}
