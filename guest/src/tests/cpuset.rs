//! The logic of `tk-test-cpuset`; what it checks and how it is used are the
//! doc of `src/bin/tk-test-cpuset.rs` (its `--help`).

use crate::abi::tk::{Tierkit, TK_MODE_WEIGHTED_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::cgroup::{self, Cg};
use crate::linux::vma::{self, Exit};
use std::process::ExitCode;

const BIN: &str = "tk-test-cpuset";
/// Pages per mapping: many cycles of a two-node table.
const PAGES: usize = 64;

/// What a child in the cpuset saw, as its exit code.
fn why(code: i32) -> &'static str {
    match code {
        2 => "could not join the cgroup",
        3 => "open /dev/tierkit failed",
        4 => "TK_IOC_SET_POLICY failed",
        5 => "the effective nodemask is not the cpuset's part of the request",
        6 => "TK_IOC_SET_POLICY accepted a nodemask the cpuset allows none of",
        7 => "TK_IOC_SET_POLICY failed with an errno other than EINVAL",
        12 => "mmap failed with ENOMEM",
        13 => "mmap failed",
        14 => "move_pages failed",
        15 => "a page on a node the cpuset does not allow",
        16 => "TK_IOC_TASK_NEXT failed or gave a node the cpuset does not allow",
        17 => "TK_IOC_BULK failed or put pages on a node the cpuset does not allow",
        _ => "unexpected exit",
    }
}

fn verdict(name: &str, r: &mut Report, e: std::io::Result<Exit>) {
    let res = match e {
        Ok(Exit::Code(0)) => Ok(()),
        Ok(Exit::Code(c)) => Err(format!("exit {c}: {}", why(c))),
        Ok(other) => Err(format!("{other:?}")),
        Err(e) => Err(format!("fork: {e}")),
    };
    r.check(name, res);
}

/// Maps [`PAGES`] pages of `tk` and checks every one is on a node of
/// `allowed`; then the task path and the bulk split. Exit codes as [`why`].
fn all_allowed(tk: &Tierkit, allowed: u64) -> i32 {
    let m = match tk.map(PAGES, 0) {
        Ok(m) => m,
        Err(e) if e.raw_os_error() == Some(libc::ENOMEM) => return 12,
        Err(_) => return 13,
    };
    let Ok(nodes) = m.page_nodes() else {
        return 14;
    };
    if nodes.iter().any(|&n| n < 0 || allowed >> n & 1 == 0) {
        return 15;
    }
    match tk.task_next(32) {
        Ok(v) if v.iter().all(|&n| allowed >> n & 1 == 1) => {}
        _ => return 16,
    }
    match tk.bulk(PAGES as u64) {
        Ok(b)
            if b.per_node
                .iter()
                .enumerate()
                .all(|(n, &c)| c == 0 || allowed >> n & 1 == 1) => {}
        _ => return 17,
    }
    0
}

/// `f` in a child that has joined `cg` (exit 2 if it could not).
fn in_cpuset(cg: &Cg, f: impl FnOnce() -> i32) -> std::io::Result<Exit> {
    vma::fork_run(|| if cg.join() { f() } else { 2 })
}

fn checks(r: &mut Report, a: u32, b: u32) {
    let cg = match Cg::new("tk-cpuset").and_then(|cg| {
        cg.set("cpuset.mems", &a.to_string())?;
        Ok(cg)
    }) {
        Ok(cg) => cg,
        Err(e) => {
            r.fail(&format!("a cgroup whose cpuset allows only node {a}"), e);
            return;
        }
    };
    let (ma, both) = (1u64 << a, 1u64 << a | 1u64 << b);

    // Outside the cpuset, the same file places on both nodes: the checks
    // below would see a page on `b` if the cpuset were not honoured.
    let res = (|| -> Result<String, String> {
        let tk = Tierkit::open().map_err(|e| e.to_string())?;
        tk.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, both)
            .map_err(|e| e.to_string())?;
        let m = tk.map(PAGES, 0).map_err(|e| format!("mmap: {e}"))?;
        let nodes = m.page_nodes().map_err(|e| e.to_string())?;
        let on = |n: u32| nodes.iter().filter(|&&x| x == n as i32).count();
        if on(a) == 0 || on(b) == 0 {
            return Err(format!("{} on {a}, {} on {b}", on(a), on(b)));
        }
        Ok(format!("{} on {a}, {} on {b}", on(a), on(b)))
    })();
    r.check_note(
        &format!("outside the cpuset: nodes {a} and {b} both used"),
        res,
    );

    // Set inside: the nodemask is cut to the cpuset (mpol_set_nodemask).
    let res = in_cpuset(&cg, || {
        let Ok(tk) = Tierkit::open() else { return 3 };
        match tk.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, both) {
            Ok(p) if p.nodemask == ma => all_allowed(&tk, ma),
            Ok(_) => 5,
            Err(_) => 4,
        }
    });
    verdict(
        &format!("a policy over {{{a},{b}}} set in a cpuset of node {a}: cut to {{{a}}}, every page, task step and bulk page there"),
        r,
        res,
    );

    let res = in_cpuset(&cg, || {
        let Ok(tk) = Tierkit::open() else { return 3 };
        match tk.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, 1 << b) {
            Ok(_) => 6,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => 0,
            Err(_) => 7,
        }
    });
    verdict(
        &format!("a policy over {{{b}}} set in a cpuset of node {a}: EINVAL"),
        r,
        res,
    );

    // Set outside, used inside: the file's nodes the caller's cpuset allows;
    // none of them allowed: the cpuset's nodes.
    for (mask, what) in [(both, format!("{{{a},{b}}}")), (1 << b, format!("{{{b}}}"))] {
        let tk = match Tierkit::open()
            .and_then(|tk| tk.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, mask).map(|_| tk))
        {
            Ok(tk) => tk,
            Err(e) => {
                r.fail(
                    &format!("a policy over {what} outside the cpuset"),
                    e.to_string(),
                );
                continue;
            }
        };
        let res = in_cpuset(&cg, || all_allowed(&tk, ma));
        verdict(
            &format!("a policy over {what} set outside, used in a cpuset of node {a}: every page, task step and bulk page on {a}"),
            r,
            res,
        );
    }
}

pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let Some(topo) = crate::abi::ready::tierkit_ready(&mut r) else {
        return r.finish();
    };
    if !cgroup::ready_for(
        &mut r,
        "cpuset",
        "cpusets",
        "the kernel has no cpuset controller (CONFIG_CPUSETS; tierkit's own kernel leaves it out, Debian's has it)",
    ) {
        return r.finish();
    }
    // The node with the CPUs, and the last other node with memory (the
    // memory-only or CXL node).
    let a = topo.memory.first().copied().unwrap_or(0);
    match topo.memory.iter().rev().find(|&&n| n != a) {
        Some(&b) => checks(&mut r, a, b),
        None => {
            r.skip("a cpuset without a node", "one node with memory");
        }
    }
    r.finish()
}
