//! tk-test-block-offline: memory blocks that hold tierkit's pages go offline
//! (module/src/mapping.rs has the design).
//!
//! - **ZONE_MOVABLE** (the CXL node onlined `online_movable`): map 8 MiB
//!   of 4 KiB pages on the node, fill a per-page pattern, find every
//!   memory block holding them (`/proc/self/pagemap`), offline each (timed;
//!   a write that takes more than 60 s is killed and fails the check),
//!   then check every byte, every page's node (`move_pages`: the first
//!   fallback node of the CXL node, node 0 in the cxl guest), the pfns
//!   (none in an offlined block), tierkit's `held` statistics (moved from
//!   the CXL node to the fallback, totals equal), a forked child that
//!   shares the mapping (no PTE of its own left on an offlined block; it
//!   reads the moved contents), and `MADV_DONTNEED` + touch (the moved
//!   contents). Then the blocks go online again and a new mapping on the
//!   node works.
//! - **Gigantic ranges on ZONE_MOVABLE**: without the `movable_gigantic`
//!   opt-in a 1 GiB mmap on the node fails with `ENOMEM` and a kernel
//!   message naming the opt-in; with it the mmap works, and offlining a
//!   block inside the range fails within 2 s with `EBUSY` and a kernel
//!   message naming tierkit and the range, which stays intact. The opt-in
//!   is put back to 0.
//! - **Kernel memory** (ZONE_NORMAL: numa's node 1, or the CXL node
//!   onlined `online_kernel`, else the DRAM node): offlining a block that
//!   holds tierkit pages fails within 2 s with `EBUSY`; pages, nodes and
//!   statistics unchanged.
//!
//! Parts that do not apply to the running topology print `# SKIP` with the
//! reason. Everything is put back: blocks online, opt-in 0, nothing mapped.

use serde_json::Value;
use std::process::ExitCode;
use userspace_tests::block_offline::{
    gigantic_case, kernel_case, movable_case, node_kind, read_opt_in, Kind, T,
};
use userspace_tests::memblock::{self, Kmsg};
use userspace_tests::report::Report;
use userspace_tests::tierkit_ready;
use userspace_tests::tk::read_stats;

const BIN: &str = "tk-test-block-offline";

fn main() -> ExitCode {
    userspace_tests::help!();
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
            gigantic_case(&mut t, c);
        }
        (_, Some(why)) => {
            for n in [
                "movable: offline every block holding tierkit pages",
                "movable: contents, nodes and stats after the offline",
                "movable: MADV_DONTNEED + touch after the move",
                "movable: online again and map again",
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
