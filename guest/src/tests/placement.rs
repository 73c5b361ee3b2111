//! The logic of `tk-test-placement`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-placement.rs` (its `--help`).

use crate::abi::ready::topology_and_weights;
use crate::abi::tk::{self, Tierkit, TK_MODE_INTERLEAVE, TK_MODE_WEIGHTED_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::errno::expect_errno;
use crate::linux::sys;
use crate::topology::interleave::{
    compare_nodes, expected_seq, per_node_counts, picture, weight_sets, WeightSet,
};
use crate::topology::node::fmt_mask;
use crate::topology::weights::WeightDir;
use std::process::ExitCode;

const BIN: &str = "tk-test-placement";

/// Page offsets the mappings are placed at, in turn: 0, small, odd, and a
/// typical anonymous-mapping address (vm_pgoff up to 2^35).
const OFFSETS: [u64; 4] = [0, 5, 12_345, 0x0007_f123_4567];

pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let Some((topo, wd)) = topology_and_weights(&mut r) else {
        return r.finish();
    };
    let saved = wd.snapshot();
    r.note(format!(
        "tierkit weights before: {}",
        saved.as_ref().map_or("?".into(), |s| s.describe())
    ));

    let sets = weight_sets(&topo);
    if topo.cxl_node().is_none() {
        r.skip(
            "placement on DRAM+CXL",
            "no memory-only node in this topology",
        );
    }
    for (i, set) in sets.iter().enumerate() {
        placement(&mut r, &wd, set, OFFSETS[i % OFFSETS.len()], i == 0);
    }
    if let Some(set) = sets.first() {
        interleave_mode(&mut r, set);
        effective_mask(&mut r, &wd, set);
        refusals(&mut r, &wd, set);
    }

    match saved {
        Ok(s) => r.check("restore tierkit weights", s.restore()),
        Err(e) => r.fail("restore tierkit weights", format!("no snapshot: {e:#}")),
    };
    r.set(
        "topology",
        serde_json::json!({"memory": topo.memory, "cpu": topo.cpu}),
    );
    r.finish()
}

/// One weight set: map, query, compare, zero check (and stats on `stats`).
fn placement(r: &mut Report, wd: &WeightDir, set: &WeightSet, off: u64, stats: bool) {
    let n = set.pages(256);
    let name = format!("placement {} off {off} pages {n}", set.name());
    // Stats checks run inside, and are printed after the placement line.
    let mut sub = Report::silent(BIN, "test");
    let r2 = &mut sub;
    let res = (|| -> Result<String, String> {
        wd.set_weights(&set.weights)
            .map_err(|e| format!("setting weights: {e:#}"))?;
        let t = Tierkit::open().map_err(|e| format!("open: {e}"))?;
        let pol = t
            .set_policy(TK_MODE_WEIGHTED_INTERLEAVE, set.nodemask)
            .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
        if pol.nodemask != set.nodemask {
            return Err(format!(
                "effective mask {} for {}",
                fmt_mask(pol.nodemask),
                fmt_mask(set.nodemask)
            ));
        }
        for &(nid, w) in &set.weights {
            if pol.weights[nid as usize] != w {
                return Err(format!(
                    "TK_IOC_SET_POLICY reports weight {} for node {nid}, wrote {w}",
                    pol.weights[nid as usize]
                ));
            }
        }
        let before = tk::read_stats();
        let m = t.map(n, off).map_err(|e| format!("mmap: {e}"))?;
        let got = m.page_nodes().map_err(|e| format!("move_pages: {e}"))?;
        let want = expected_seq(true, set.nodemask, &set.table(), off, n);
        compare_nodes(&got, &want)?;
        let counts = per_node_counts(&got);
        if stats {
            check_stats(r2, &before, &counts, n);
        }
        match m.first_nonzero() {
            None => {}
            Some(o) => {
                return Err(format!(
                    "byte {o} (page {}) is not zero",
                    o / sys::PAGE_SIZE
                ))
            }
        }
        drop(m);
        drop(t);
        if stats {
            // The file is released now: its pages are given back.
            let after = tk::read_stats();
            match (&before, &after) {
                (Some(b), Some(a)) => {
                    let ok = b.iter().all(|s| tk::stats_of(a, s.nid).1 == s.held);
                    r2.check(
                        "stats: held pages given back after munmap + close",
                        if ok {
                            Ok(())
                        } else {
                            Err(format!("held before {b:?}, after {a:?}"))
                        },
                    );
                }
                _ => {
                    r2.skip(
                        "stats: held pages given back after munmap + close",
                        "stats file not readable",
                    );
                }
            }
        }
        let c: Vec<String> = counts.iter().map(|(n, c)| format!("node{n}={c}")).collect();
        Ok(format!(
            "{}; {}",
            c.join(" "),
            &picture(&got)[..got.len().min(32)]
        ))
    })();
    r.check_note(&name, res);
    r.absorb(sub);
}

fn check_stats(
    r: &mut Report,
    before: &Option<Vec<tk::NodeStats>>,
    counts: &[(i32, usize)],
    n: usize,
) {
    let name = "stats: allocated and held count the mapped pages per node";
    let Some(before) = before else {
        r.skip(name, "stats file not readable");
        return;
    };
    let Some(now) = tk::read_stats() else {
        r.fail(name, "stats file vanished");
        return;
    };
    let mut errs = Vec::new();
    for &(nid, c) in counts {
        let (a0, h0) = tk::stats_of(before, nid as u32);
        let (a1, h1) = tk::stats_of(&now, nid as u32);
        if a1 - a0 != c as u64 || h1 - h0 != c as u64 {
            errs.push(format!(
                "node {nid}: {c} pages mapped, allocated +{}, held +{}",
                a1 - a0,
                h1 - h0
            ));
        }
    }
    r.check(
        name,
        if errs.is_empty() {
            Ok(())
        } else {
            Err(format!("{} ({n} pages)", errs.join("; ")))
        },
    );
}

/// TK_MODE_INTERLEAVE: `interleave_nid`, weights ignored.
fn interleave_mode(r: &mut Report, set: &WeightSet) {
    let n = 64;
    let off = 7;
    let res = (|| -> Result<(), String> {
        let t = Tierkit::open().map_err(|e| e.to_string())?;
        t.set_policy(TK_MODE_INTERLEAVE, set.nodemask)
            .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
        let m = t.map(n, off).map_err(|e| format!("mmap: {e}"))?;
        let got = m.page_nodes().map_err(|e| format!("move_pages: {e}"))?;
        compare_nodes(
            &got,
            &expected_seq(false, set.nodemask, &set.table(), off, n),
        )?;
        // The task path is for weighted interleave only.
        expect_errno(t.task_next(1), libc::EINVAL)
            .map_err(|e| format!("TK_IOC_TASK_NEXT on interleave: {e}"))?;
        if m.first_nonzero().is_some() {
            return Err("non-zero byte".into());
        }
        Ok(())
    })();
    r.check(
        &format!("interleave mode {} off {off}", fmt_mask(set.nodemask)),
        res,
    );
}

/// The requested mask is intersected with N_MEMORY and the result
/// reported back; pages follow the effective mask.
fn effective_mask(r: &mut Report, wd: &WeightDir, set: &WeightSet) {
    // Node 63 does not exist in any guest tierkit is run on.
    let requested = set.nodemask | 1u64 << 63;
    let res = (|| -> Result<(), String> {
        wd.set_weights(&set.weights).map_err(|e| format!("{e:#}"))?;
        let t = Tierkit::open().map_err(|e| e.to_string())?;
        let pol = t
            .set_policy(TK_MODE_WEIGHTED_INTERLEAVE, requested)
            .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
        if pol.nodemask != set.nodemask {
            return Err(format!(
                "effective mask {}, expected {}",
                fmt_mask(pol.nodemask),
                fmt_mask(set.nodemask)
            ));
        }
        let m = t.map(32, 0).map_err(|e| format!("mmap: {e}"))?;
        let got = m.page_nodes().map_err(|e| format!("move_pages: {e}"))?;
        compare_nodes(&got, &expected_seq(true, set.nodemask, &set.table(), 0, 32))
    })();
    r.check(
        &format!(
            "effective mask: {} -> {}",
            fmt_mask(requested),
            fmt_mask(set.nodemask)
        ),
        res,
    );
}

fn refusals(r: &mut Report, wd: &WeightDir, set: &WeightSet) {
    let open = || Tierkit::open().map_err(|e| format!("open: {e}"));

    r.check(
        "refuse: empty nodemask -> EINVAL",
        open()
            .and_then(|t| expect_errno(t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, 0), libc::EINVAL)),
    );
    r.check(
        "refuse: nodemask without memory {63} -> EINVAL",
        open().and_then(|t| {
            expect_errno(
                t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, 1 << 63),
                libc::EINVAL,
            )
        }),
    );
    r.check(
        "refuse: unknown mode 7 -> EINVAL",
        open().and_then(|t| expect_errno(t.set_policy(7, set.nodemask), libc::EINVAL)),
    );
    r.check(
        "refuse: unknown flag -> EINVAL",
        open().and_then(|t| {
            let mut p = tk::policy(TK_MODE_WEIGHTED_INTERLEAVE, set.nodemask);
            p.flags = 2;
            expect_errno(t.set_policy_raw(p), libc::EINVAL)
        }),
    );
    r.check(
        "refuse: mmap before TK_IOC_SET_POLICY -> EINVAL",
        open().and_then(|t| expect_errno(t.map(1, 0), libc::EINVAL)),
    );
    r.check(
        "refuse: MAP_PRIVATE -> EINVAL",
        open().and_then(|t| {
            t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, set.nodemask)
                .map_err(|e| e.to_string())?;
            expect_errno(t.map_flags(4, 0, libc::MAP_PRIVATE), libc::EINVAL)
        }),
    );
    r.check(
        "refuse: TK_IOC_SET_POLICY after mmap -> EBUSY",
        open().and_then(|t| {
            t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, set.nodemask)
                .map_err(|e| e.to_string())?;
            let _m = t.map(1, 0).map_err(|e| format!("mmap: {e}"))?;
            expect_errno(
                t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, set.nodemask),
                libc::EBUSY,
            )
        }),
    );

    // Weight files: bad values are refused and keep the old weight; a good
    // one turns auto off.
    let nid = set.weights[0].0;
    let res = wd.set_weight(nid, 7).map_err(|e| format!("{e:#}"));
    r.check(&format!("weight: node{nid} <- 7"), res);
    for bad in ["0", "256", "abc", "\n", "-1", "3 4"] {
        let res = expect_errno(wd.write_weight_str(nid, bad), libc::EINVAL).and_then(|()| match wd
            .weight(nid)
        {
            Ok(7) => Ok(()),
            Ok(w) => Err(format!("weight changed to {w}")),
            Err(e) => Err(format!("{e:#}")),
        });
        r.check(
            &format!("weight: node{nid} <- {bad:?} -> EINVAL, weight stays 7"),
            res,
        );
    }
    let res = wd
        .write_weight_str(nid, "255\n")
        .map_err(|e| e.to_string())
        .and_then(|()| match (wd.weight(nid), wd.auto()) {
            (Ok(255), Ok(Some(false))) => Ok(()),
            (w, a) => Err(format!("weight {w:?}, auto {a:?}; expected 255, false")),
        });
    r.check(
        &format!("weight: node{nid} <- \"255\\n\" accepted, auto reads false"),
        res,
    );
    r.check(
        "auto: \"maybe\" -> EINVAL",
        expect_errno(wd.write_auto_str("maybe"), libc::EINVAL),
    );
}
