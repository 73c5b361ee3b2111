//! The logic of `tk-test-diff`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-diff.rs` (its `--help`).

use crate::abi::ready::{read_topology, tierkit_weight_dir};
use crate::abi::tk::{Tierkit, TK_MODE_INTERLEAVE, TK_MODE_WEIGHTED_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::kernel::thp_note;
use crate::linux::sys::{
    self, Mapping, MPOL_INTERLEAVE, MPOL_WEIGHTED_INTERLEAVE, PAGE_SHIFT, PAGE_SIZE,
};
use crate::topology::interleave::{
    compare_nodes, compare_seqs, expected_seq, picture, weight_sets, WeightSet,
};
use crate::topology::node::{access1_bandwidth, fmt_mask, Topology};
use crate::topology::weights;
use crate::topology::weights::WeightDir;
use std::process::ExitCode;

const BIN: &str = "tk-test-diff";

pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let Some(topo) = read_topology(&mut r) else {
        return r.finish();
    };
    let Some(kw) = WeightDir::kernel() else {
        r.fail(
            "kernel weight files",
            format!(
                "no {} (kernel without weighted interleave?)",
                weights::KERNEL_WI_DIR
            ),
        );
        return r.finish();
    };
    let Some(tw) = tierkit_weight_dir(&mut r) else {
        return r.finish();
    };
    let ksaved = match kw.snapshot() {
        Ok(s) => s,
        Err(e) => {
            r.fail("read kernel weights", format!("{e:#}"));
            return r.finish();
        }
    };
    let tsaved = tw.snapshot();
    r.note(format!("kernel weights before: {}", ksaved.describe()));
    // Puts the kernel's weights back even if something below panics.
    let mut kguard = weights::RestoreOnDrop::new(ksaved.clone());
    r.note(thp_note());

    auto_weights(&mut r, &kw, &tw, &topo, &ksaved);

    let sets = weight_sets(&topo);
    if topo.cxl_node().is_none() {
        r.skip("diff on DRAM+CXL", "no memory-only node in this topology");
    }
    let mut compared = 0usize;
    for set in &sets {
        compared += anon_diff(&mut r, &kw, &tw, set, true);
    }
    if let Some(set) = sets.first() {
        compared += anon_diff(&mut r, &kw, &tw, set, false);
        shmem_diff(&mut r, &kw, &tw, set);
    }
    if let Some(set) = sets.iter().find(|s| s.weights.len() >= 3) {
        compared += anon_diff(&mut r, &kw, &tw, set, false);
    }

    r.check(
        "restore kernel weights",
        kguard.done().map_err(|e| format!("{e:#}")),
    );
    let after = kw.snapshot().map(|s| s.describe()).unwrap_or_default();
    r.note(format!("kernel weights after: {after}"));
    if after != ksaved.describe() {
        r.fail(
            "kernel weights restored",
            format!("before {}, after {after}", ksaved.describe()),
        );
    }
    match tsaved {
        Ok(s) => r.check("restore tierkit weights", s.restore()),
        Err(e) => r.fail("restore tierkit weights", format!("no snapshot: {e:#}")),
    };
    r.set("pages_compared", serde_json::json!(compared));
    r.finish()
}

/// One weight set: kernel anonymous mapping against tierkit at the same
/// ilx. Returns the pages compared (0 on failure).
fn anon_diff(
    r: &mut Report,
    kw: &WeightDir,
    tw: &WeightDir,
    set: &WeightSet,
    weighted: bool,
) -> usize {
    let n = set.pages(256);
    let (kmode, tmode, what) = if weighted {
        (
            MPOL_WEIGHTED_INTERLEAVE,
            TK_MODE_WEIGHTED_INTERLEAVE,
            "weighted interleave",
        )
    } else {
        (MPOL_INTERLEAVE, TK_MODE_INTERLEAVE, "interleave")
    };
    let name = if weighted {
        format!("diff {what} {} pages {n}", set.name())
    } else {
        format!("diff {what} {} pages {n}", fmt_mask(set.nodemask))
    };
    let res = (|| -> Result<String, String> {
        kw.set_weights(&set.weights)
            .map_err(|e| format!("kernel weights: {e:#}"))?;
        tw.set_weights(&set.weights)
            .map_err(|e| format!("tierkit weights: {e:#}"))?;

        let anon = Mapping::anon(n * PAGE_SIZE).map_err(|e| format!("mmap anon: {e}"))?;
        anon.no_huge()
            .map_err(|e| format!("MADV_NOHUGEPAGE: {e}"))?;
        anon.mbind(kmode, set.nodemask, 0)
            .map_err(|e| format!("mbind: {e}"))?;
        anon.touch_pages();
        let kseq = anon
            .page_nodes()
            .map_err(|e| format!("move_pages (kernel side): {e}"))?;
        let ilx0 = (anon.addr() >> PAGE_SHIFT) as u64;

        let t = Tierkit::open().map_err(|e| format!("open: {e}"))?;
        t.set_policy(tmode, set.nodemask)
            .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
        let tm = t
            .map(n, ilx0)
            .map_err(|e| format!("mmap /dev/tierkit at offset {:#x}: {e}", ilx0 << PAGE_SHIFT))?;
        let tseq = tm
            .page_nodes()
            .map_err(|e| format!("move_pages (tierkit side): {e}"))?;

        compare_seqs("kernel", &kseq, "tierkit", &tseq)?;
        let want = expected_seq(weighted, set.nodemask, &set.table(), ilx0, n);
        compare_nodes(&kseq, &want)
            .map_err(|e| format!("kernel and tierkit agree, but not with the reference: {e}"))?;
        Ok(format!("ilx {ilx0:#x}.., {}", &picture(&kseq)[..n.min(24)]))
    })();
    let ok = r.check_note(&name, res);
    if ok {
        n
    } else {
        0
    }
}

/// A shared anonymous mapping is shmem: ilx = i_ino + page index.
fn shmem_diff(r: &mut Report, kw: &WeightDir, tw: &WeightDir, set: &WeightSet) {
    let n = 64;
    let name = format!("diff shmem (ilx = i_ino + index) {} pages {n}", set.name());
    let res = (|| -> Result<String, String> {
        kw.set_weights(&set.weights)
            .map_err(|e| format!("kernel weights: {e:#}"))?;
        tw.set_weights(&set.weights)
            .map_err(|e| format!("tierkit weights: {e:#}"))?;
        let shm = Mapping::new(n * PAGE_SIZE, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0)
            .map_err(|e| format!("mmap shared anon: {e}"))?;
        shm.no_huge().map_err(|e| format!("MADV_NOHUGEPAGE: {e}"))?;
        shm.mbind(MPOL_WEIGHTED_INTERLEAVE, set.nodemask, 0)
            .map_err(|e| format!("mbind: {e}"))?;
        shm.touch_pages();
        let kseq = shm.page_nodes().map_err(|e| format!("move_pages: {e}"))?;
        let ino = sys::maps_inode(shm.addr()).ok_or("no /proc/self/maps line for the mapping")?;

        let t = Tierkit::open().map_err(|e| format!("open: {e}"))?;
        t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, set.nodemask)
            .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
        let tm = t
            .map(n, ino)
            .map_err(|e| format!("mmap /dev/tierkit: {e}"))?;
        let tseq = tm.page_nodes().map_err(|e| format!("move_pages: {e}"))?;
        compare_seqs("kernel", &kseq, "tierkit", &tseq)?;
        compare_nodes(
            &kseq,
            &expected_seq(true, set.nodemask, &set.table(), ino, n),
        )?;
        Ok(format!("i_ino {ino}"))
    })();
    r.check_note(&name, res);
}

/// Feeds tierkit the bandwidth the kernel took from HMAT and checks that
/// `auto=true` gives the kernel's auto weights.
fn auto_weights(
    r: &mut Report,
    kw: &WeightDir,
    tw: &WeightDir,
    topo: &Topology,
    ksaved: &weights::WeightSnapshot,
) {
    let name = "auto weights: tierkit from access1 bandwidth == kernel's";
    if ksaved.auto != Some(true) {
        r.skip(name, "kernel's auto is not true");
        return;
    }
    let mut bw = Vec::new();
    for &nid in topo.memory.iter().filter(|&&n| n < 64) {
        match access1_bandwidth(nid) {
            Some((rd, wr)) => bw.push((nid, rd, wr)),
            None => {
                r.skip(
                    name,
                    format!("no access1 bandwidth for node {nid} (no HMAT?)"),
                );
                return;
            }
        }
    }
    let res = (|| -> Result<String, String> {
        // Manual mode first, so that writing true recomputes.
        tw.write_auto_str("false")
            .map_err(|e| format!("auto <- false: {e}"))?;
        tw.write_bandwidth(&bw)
            .map_err(|e| format!("writing bandwidth: {e}"))?;
        tw.write_auto_str("true")
            .map_err(|e| format!("auto <- true: {e}"))?;
        let kt = kw.table().map_err(|e| format!("{e:#}"))?;
        let tt = tw.table().map_err(|e| format!("{e:#}"))?;
        let mut s = Vec::new();
        for &(nid, rd, wr) in &bw {
            let (k, t) = (kt[nid as usize], tt[nid as usize]);
            if k != t {
                return Err(format!(
                    "node {nid} (bw {rd}/{wr}): kernel {k}, tierkit {t}"
                ));
            }
            s.push(format!("node{nid}={k}"));
        }
        match tw.auto() {
            Ok(Some(true)) => {}
            a => return Err(format!("tierkit auto reads {a:?} after writing true")),
        }
        Ok(s.join(" "))
    })();
    r.check_note(name, res);
}
