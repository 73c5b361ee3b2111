//! `tk-test-run`'s gigantic checks: `tk-run --gigantic` gives a 1 GiB
//! malloc one gigantic range, and fork shares its GiB copy-on-write
//! (Documentation/dev-tools/tk-run.md, "Semantics").
//!
//! Each runs under `--weights N:1`, N the node without CXL memory that has
//! the most free memory: a copy-on-write snapshot of a GiB takes a spare
//! GiB on its node at fork, and where the node has no second free aligned
//! GiB (node 0 under the debug profile, or on `--topology cxl`) libtkrun
//! copies the range for the child instead. Both outcomes are checked for
//! what they promise; which one ran is in the check's note.

use crate::abi::tk;
use crate::harness::report::Report;
use crate::linux::vma;
use crate::tools::run::check::{
    backing, blocks, check_lines, mapping_of, run, start, CHECK, TK_RUN,
};
use crate::topology::node::Topology;

/// What libtkrun says under `tk-run --verbose` for a gigantic range at a
/// fork: shared copy-on-write, or copied for the child (no spare GiB).
const SHARED: &str = "tk-run: fork: a gigantic range shared copy-on-write";
const COPIED: &str = "tk-run: fork: a gigantic range copied for the child";
/// The child's own line when it could not map the shared range and copied
/// it after all: that fork did not share.
const CHILD_COPIED: &str =
    "tk-run: fork: a shared gigantic range could not be mapped in the child, which copied it";

/// Each fork's path for the one gigantic range, in order: `true` where it
/// was shared copy-on-write.
fn fork_paths(err: &str) -> Vec<bool> {
    let mut paths = Vec::new();
    for l in err.lines() {
        match l {
            SHARED => paths.push(true),
            COPIED => paths.push(false),
            CHILD_COPIED => {
                if let Some(last) = paths.last_mut() {
                    *last = false;
                }
            }
            _ => {}
        }
    }
    paths
}

fn describe(paths: &[bool]) -> String {
    let each: Vec<&str> = paths
        .iter()
        .map(|&p| if p { "shared" } else { "copied by libtkrun" })
        .collect();
    format!("forks {}", each.join(", "))
}

fn gigantic_total() -> u64 {
    tk::read_stats().map_or(0, |s| s.iter().filter_map(|n| n.gigantic).sum())
}

/// `gigantic_cow_copies` and `gigantic_cow_spares` from tierkit's limits.
fn cow_counts() -> Result<(u64, u64), String> {
    let l = vma::read_limits().map_err(|e| format!("{}: {e:#}", vma::LIMITS_PATH))?;
    match (
        vma::limit(&l, "gigantic_cow_copies"),
        vma::limit(&l, "gigantic_cow_spares"),
    ) {
        (Some(c), Some(s)) => Ok((c, s)),
        _ => Err(format!("no gigantic_cow_* in {}", vma::LIMITS_PATH)),
    }
}

/// `tk-run --gigantic --verbose --weights W -- tkrun-check FLAG 1024`.
fn check_argv<'a>(w: &'a str, flag: &'a str) -> [&'a str; 9] {
    [
        TK_RUN,
        "--gigantic",
        "--verbose",
        "--weights",
        w,
        "--",
        CHECK,
        flag,
        "1024",
    ]
}

/// The copies of a run whose forks took `paths`: within `want(paths)`
/// (the bounds, both inclusive), the spares held back where they were;
/// `forks` lines expected from libtkrun.
fn check_copies(
    r: &mut Report,
    name: &str,
    before: Result<(u64, u64), String>,
    err: &str,
    forks: usize,
    want: impl Fn(&[bool]) -> (u64, u64),
) {
    let paths = fork_paths(err);
    r.check_note(
        name,
        match (before, cow_counts()) {
            _ if paths.len() != forks => Err(format!(
                "{} fork line(s) from libtkrun, expected {forks}: stderr {err:?}",
                paths.len()
            )),
            (Ok((c0, s0)), Ok((c1, s1))) => {
                let copies = c1 - c0.min(c1);
                let (lo, hi) = want(&paths);
                let note = format!(
                    "{}: GiBs copied {copies} (expected {lo}..={hi}), spares {s0} -> {s1}",
                    describe(&paths)
                );
                if (lo..=hi).contains(&copies) && s1 == s0 {
                    Ok(note)
                } else {
                    Err(note)
                }
            }
            (Err(e), _) | (_, Err(e)) => Err(e),
        },
    );
}

/// --gigantic: a 1 GiB malloc is one gigantic range of tierkit's, GiB
/// aligned, every byte zero. Then `tkrun-check -G`'s forks: a child that
/// exits at once copies nothing; with a child that keeps the block, the
/// parent's write copies the GiB once (`gigantic_cow_copies` grows by
/// exactly one over the run) and the child's later write copies nothing;
/// each side keeps its own contents; the spares and the range are given
/// back at exit. Node 0's boot-time 1 GiB hugetlb pages are handed back
/// for the check, as the other gigantic tests do. With `thp_off` the
/// program runs with THP disabled (`PR_SET_THP_DISABLE`): its GiB is
/// mapped by 4 KiB PTEs of the GiB's folio, and a write to a shared GiB
/// goes through the copy-on-write vma's `page_mkwrite` instead of the PUD
/// fault.
pub fn gigantic(r: &mut Report, topo: &Topology, thp_off: bool) {
    let label = if thp_off {
        "gigantic, THP off"
    } else {
        "gigantic"
    };
    let _boot = crate::abi::first_use::BootPool::release(0);
    let Some(nid) = crate::topology::cxl::roomiest_non_cxl_node(topo) else {
        r.fail(
            &format!("{label}: a node for the GiB"),
            "no memory node without CXL memory",
        );
        return;
    };
    let w = format!("{nid}:1");
    let before = gigantic_total();
    let counts = cow_counts();
    let argv = check_argv(&w, "-G");
    let h = match start(&argv, thp_off) {
        Ok(h) => h,
        Err(e) => {
            r.fail(&format!("{label}: start"), e.to_string());
            return;
        }
    };
    let block = blocks(&h.lines, "block");
    let held = gigantic_total();
    let res = match block.first() {
        Some((_, addr, bytes)) if h.waiting => {
            let m = mapping_of(h.pid(), *addr);
            match m {
                Some((s, e, p))
                    if p == tk::DEV_PATH
                        && s % (1 << 30) == 0
                        && e - s >= *bytes
                        && held == before + 1 =>
                {
                    Ok(format!(
                        "{addr:#x} on node {nid}, one 1 GiB range held (stats gigantic {before} -> {held})"
                    ))
                }
                _ => Err(format!("mapping {m:?}, stats gigantic {before} -> {held}")),
            }
        }
        _ => Err(format!("no block: {:?}", h.lines)),
    };
    r.check_note(
        &format!("{label}: a 1 GiB malloc is one GiB-aligned gigantic range"),
        res,
    );
    let zero = h.lines.iter().any(|l| l == "ok big block: every byte zero");
    let (code, after_waiting, err) = h.finish_all();
    r.check(
        &format!("{label}: every byte zero, then written and read back"),
        if zero && code == 0 {
            Ok(())
        } else {
            Err(format!("exit {code}, stderr {err:?}"))
        },
    );
    for what in [
        "the child sees it as at fork, not the parent's later writes",
        "the parent does not see the child's writes",
    ] {
        let name = format!("fork with the block: {what}");
        let ok = format!("ok {name}");
        r.check(
            &format!("{label}: {name}"),
            if after_waiting.iter().any(|l| *l == ok) {
                Ok(())
            } else {
                Err(format!("got {after_waiting:?}"))
            },
        );
    }
    // The first child exits at once: its fork copies nothing either way.
    // The parent's write while the second child shares the GiB copies it
    // once; the child's later write then copies nothing.
    check_copies(
        r,
        &format!(
            "{label}: fork copies no GiB, the parent's write while the child shares it copies one"
        ),
        counts,
        &err,
        2,
        |p| {
            let n = u64::from(p.get(1) == Some(&true));
            (n, n)
        },
    );
    let after = gigantic_total();
    r.check(
        &format!("{label}: the range is given back at exit"),
        if after == before {
            Ok(())
        } else {
            Err(format!("stats gigantic {before} -> {after}"))
        },
    );
}

/// `tkrun-check -W 1024` under `tk-run --gigantic`: three forks while a
/// thread keeps writing the first and last word of the gigantic block;
/// each child sees both words from one moment, none written after
/// `fork()` returned, and unchanged 20 ms later (the writer's next write
/// copies the GiB: at least one copy over the run when shared). Skipped,
/// with its reason, where the node had no spare GiB and libtkrun copied
/// the range at fork, which tk-run.md does not promise to be a snapshot
/// under a writer thread.
pub fn writer(r: &mut Report, topo: &Topology) {
    let _boot = crate::abi::first_use::BootPool::release(0);
    let Some(nid) = crate::topology::cxl::roomiest_non_cxl_node(topo) else {
        r.fail(
            "gigantic writer: a node for the GiB",
            "no memory node without CXL memory",
        );
        return;
    };
    let w = format!("{nid}:1");
    let counts = cow_counts();
    let argv = check_argv(&w, "-W");
    let (code, out, err) = match run(&argv) {
        Ok(x) => x,
        Err(e) => {
            r.fail("gigantic writer: start", e.to_string());
            return;
        }
    };
    let paths = fork_paths(&err);
    let shared = paths.len() == 3 && paths.iter().all(|&p| p);
    let lines = if shared {
        check_lines(r, "gigantic writer", &out)
    } else {
        // libtkrun's copy at fork is not a snapshot under a writer thread
        // (tk-run.md says so): its checks of one would fail by chance.
        r.skip(
            "gigantic writer: forks under a writer thread",
            format!(
                "no spare GiB on node {nid} at some fork ({}): libtkrun copied the range there",
                describe(&paths)
            ),
        );
        out.lines().map(String::from).collect()
    };
    let backing = backing(&lines, "cow-snapshot").unwrap_or("(no line)");
    r.check(
        "gigantic writer: the block is tierkit's",
        if backing == tk::DEV_PATH {
            Ok(())
        } else {
            Err(format!("backed by {backing}"))
        },
    );
    r.check(
        "gigantic writer: exit 0, PASSED",
        if !shared || (code == 0 && out.contains("PASSED")) {
            Ok(())
        } else {
            Err(format!("exit {code}, stderr {err:?}"))
        },
    );
    // Each shared fork's GiB is copied by the writer's next write, unless
    // the child has already let go of it: at least one copy when any fork
    // shared, never more than the forks that did.
    check_copies(
        r,
        "gigantic writer: the writer's writes after the forks copy the GiB",
        counts,
        &err,
        3,
        |p| {
            let n = p.iter().filter(|&&s| s).count() as u64;
            (n.min(1), n)
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_forks_path_in_order_the_childs_fallback_included() {
        let err = format!(
            "tk-run: weights 0:1 (given)\n{SHARED}\n{COPIED}\ntk-run: fork: tierkit could not share a gigantic range\n{SHARED}\n{CHILD_COPIED}\n"
        );
        assert_eq!(fork_paths(&err), [true, false, false]);
        assert_eq!(describe(&[true, false]), "forks shared, copied by libtkrun");
        assert!(fork_paths("").is_empty());
    }
}
