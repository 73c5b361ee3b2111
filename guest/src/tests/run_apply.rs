//! The logic of `tk-test-run-apply`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-run-apply.rs` (its `--help`).

use crate::harness::report::Report;
use crate::tools::run::check::{
    agreement, blocks, guest_ready, page_nodes, start, Held, STREAM, TK_RUN,
};
use crate::tools::run::LIB_PATH;
use crate::topology::interleave::weight_table;
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};
use tierkit_protocol::marker;

const CALIBRATE: &str = "/bin/tk-calibrate";
/// `CAP_SYS_ADMIN` (include/uapi/linux/capability.h).
const CAP_SYS_ADMIN: libc::c_ulong = 21;
/// Elements per array: 4 MiB each, 1024 pages (3072 in all).
const ELEMENTS: &str = "524288";

fn arg(w: &[(u32, u8)]) -> String {
    w.iter()
        .map(|(n, w)| format!("{n}:{w}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn mask(w: &[(u32, u8)]) -> u64 {
    w.iter().fold(0, |m, (n, _)| m | 1 << n)
}

/// `tk-calibrate --apply PID --weights W`: (exit code, its JSON line's
/// `rebalance` object, its `not ok` lines). `no_admin`: without
/// CAP_SYS_ADMIN.
fn apply(pid: i32, w: &str, no_admin: bool) -> Result<(i32, Value, String), String> {
    let mut c = Command::new(CALIBRATE);
    c.args(["--apply", &pid.to_string(), "--weights", w]);
    if no_admin {
        // SAFETY: prctl is async-signal-safe; nothing else runs in the child.
        unsafe {
            c.pre_exec(|| {
                if libc::prctl(libc::PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let o = c.output().map_err(|e| format!("{CALIBRATE}: {e}"))?;
    let out = String::from_utf8_lossy(&o.stdout);
    let json = out
        .lines()
        .find_map(|l| marker::split(l).filter(|(t, _)| *t == marker::JSON))
        .map(|(_, j)| j)
        .and_then(|j| serde_json::from_str::<Value>(j).ok())
        .map(|v| v["rebalance"].clone())
        .unwrap_or(Value::Null);
    let why = out
        .lines()
        .filter_map(|l| l.strip_prefix("not ok - "))
        .collect::<Vec<_>>()
        .join(" | ");
    Ok((o.status.code().unwrap_or(-1), json, why))
}

/// A refusal: non-zero exit, and a `not ok` line saying `reason`.
fn refused(r: &mut Report, name: &str, pid: i32, reason: &str, no_admin: bool, w: &str) {
    r.check_note(
        name,
        match apply(pid, w, no_admin) {
            Ok((c, _, why)) if c != 0 && why.contains(reason) => Ok(format!("exit {c}: {why}")),
            Ok((c, _, why)) => Err(format!("exit {c}, {why:?}; wanted non-zero and {reason:?}")),
            Err(e) => Err(e),
        },
    );
}

/// Reads one byte of every 4 KiB page of `[addr, addr + bytes)` in
/// process `pid` (`process_vm_readv(2)`), which maps again the pages a
/// rebalance moved (it zaps their PTEs; the next touch faults them in),
/// as the program's own next touch would: `move_pages(2)` and `numa_maps`
/// see only mapped pages.
fn touch(pid: i32, addr: usize, bytes: usize) -> Result<(), String> {
    let first = addr & !4095;
    let pages: Vec<usize> = (first..addr + bytes).step_by(4096).collect();
    let mut buf = vec![0u8; pages.len()];
    for (chunk, out) in pages.chunks(1024).zip(buf.chunks_mut(1024)) {
        let local = libc::iovec {
            iov_base: out.as_mut_ptr().cast(),
            iov_len: out.len(),
        };
        let remote: Vec<libc::iovec> = chunk
            .iter()
            .map(|&a| libc::iovec {
                iov_base: a as *mut libc::c_void,
                iov_len: 1,
            })
            .collect();
        // SAFETY: `local` covers `out`, `remote` is `chunk.len()` iovecs of
        // the other process (never dereferenced here).
        let n = unsafe {
            libc::process_vm_readv(pid, &local, 1, remote.as_ptr(), remote.len() as _, 0)
        };
        if n != chunk.len() as isize {
            return Err(format!(
                "process_vm_readv: {n} of {} bytes: {}",
                chunk.len(),
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// Every page of the arrays of `h` where the rule for `w` puts it, and
/// where the rule for the swapped weights does not: (agree, total,
/// agree with the control, first disagreement).
fn pages_agree(h: &Held, w: &[(u32, u8)]) -> Result<(usize, usize, usize, Option<String>), String> {
    let arrays = blocks(&h.lines, "array");
    if arrays.len() != 3 {
        return Err(format!("tk-stream printed {:?}", h.lines));
    }
    let swapped: Vec<(u32, u8)> = w
        .iter()
        .zip(w.iter().rev())
        .map(|(a, b)| (a.0, b.1))
        .collect();
    let (t, ct) = (weight_table(w), weight_table(&swapped));
    let (mut agree, mut total, mut control, mut bad) = (0, 0, 0, None);
    for (name, addr, bytes) in &arrays {
        touch(h.pid(), *addr, *bytes)?;
        let nodes = page_nodes(h.pid(), *addr, *bytes).map_err(|e| format!("move_pages: {e}"))?;
        let (a, n, b) = agreement(&nodes, *addr, mask(w), &t);
        control += agreement(&nodes, *addr, mask(w), &ct).0;
        agree += a;
        total += n;
        bad = bad.or(b.map(|b| format!("array {name}: {b}")));
    }
    Ok((agree, total, control, bad))
}

fn run(r: &mut Report, d: u32, s: u32) {
    let before = [(d, 1u8)];
    let after = [(d, 1u8), (s, 2u8)];
    let h = match start(
        &[
            TK_RUN,
            "--weights",
            &arg(&before),
            "--",
            STREAM,
            "-n",
            ELEMENTS,
            "-r",
            "1",
            "-w",
        ],
        false,
    ) {
        Ok(h) if h.waiting => h,
        Ok(h) => {
            let (c, err) = h.finish();
            r.fail(
                "tk-stream under tk-run holds its arrays",
                format!("exit {c}: {err}"),
            );
            return;
        }
        Err(e) => {
            r.fail("tk-stream under tk-run holds its arrays", e.to_string());
            return;
        }
    };
    let pid = h.pid();
    r.check_note(
        &format!(
            "before: every page on node {d} (tk-run --weights {})",
            arg(&before)
        ),
        pages_agree(&h, &before).and_then(|(a, n, _, bad)| match bad {
            None if n > 0 => Ok(format!("{a}/{n} pages")),
            _ => Err(format!("{a}/{n}; first: {}", bad.unwrap_or_default())),
        }),
    );
    let w = arg(&after);
    let (moved, looked) = match apply(pid, &w, false) {
        Ok((0, j, _)) => {
            let n = |k: &str| j[k].as_u64().unwrap_or(u64::MAX);
            let ok = n("files") == 3
                && n("moved") == n("misplaced")
                && n("moved") > 0
                && n("no_memory") == 0
                && n("busy") == 0;
            r.check_note(
                &format!(
                    "tk-calibrate --apply {pid} --weights {w}: 3 files, every misplaced page moved"
                ),
                if ok {
                    Ok(j.to_string())
                } else {
                    Err(j.to_string())
                },
            );
            (n("moved"), n("looked"))
        }
        Ok((c, j, why)) => {
            r.fail(
                &format!("tk-calibrate --apply {pid} --weights {w}"),
                format!("exit {c}: {why}; {j}"),
            );
            (0, 0)
        }
        Err(e) => {
            r.fail("tk-calibrate --apply", e);
            (0, 0)
        }
    };
    r.check_note(
        &format!("after: every page where the weights {w} put it (move_pages)"),
        pages_agree(&h, &after).and_then(|(a, n, c, bad)| match bad {
            None if n > 0 && c < n => Ok(format!("{a}/{n} pages; control (swapped) {c}/{n}")),
            None => Err(format!("{a}/{n}, but the control agrees too ({c}/{n})")),
            Some(b) => Err(format!("{a}/{n}; first: {b}")),
        }),
    );
    r.check_note(
        &format!("numa_maps: the moved pages on node {s}, the rest where they were"),
        match crate::tools::rebalance::placement(pid) {
            // Every page mapped again by `touch` above: all of them count.
            Ok(p) if p.get(&s).copied() == Some(moved) && p.values().sum::<u64>() == looked => {
                Ok(crate::tools::rebalance::fmt_placement(&p))
            }
            Ok(p) => Err(format!(
                "{} (node {s}), moved {moved} of {looked}",
                crate::tools::rebalance::fmt_placement(&p)
            )),
            Err(e) => Err(e.to_string()),
        },
    );
    r.check_note(
        "a second apply with the same weights moves nothing",
        match apply(pid, &w, false) {
            Ok((0, j, _))
                if j["moved"].as_u64() == Some(0) && j["misplaced"].as_u64() == Some(0) =>
            {
                Ok(format!("looked at {}", j["looked"]))
            }
            Ok((c, j, why)) => Err(format!("exit {c}: {why}; {j}")),
            Err(e) => Err(e),
        },
    );
    refused(
        r,
        "refused without CAP_SYS_ADMIN",
        pid,
        "CAP_SYS_ADMIN",
        true,
        &w,
    );
    let (code, out, _) = h.finish_all();
    r.check_note(
        "tk-stream's own check of every element after the moves",
        match (code, out.iter().find(|l| l.starts_with("held check"))) {
            (0, Some(l)) if l.starts_with("held check ok") => Ok(l.clone()),
            (c, l) => Err(format!("exit {c}, {l:?}")),
        },
    );
}

pub fn main() -> ExitCode {
    let mut r = Report::new("tk-test-run-apply", "test");
    let Some(topo) = guest_ready(&mut r, &[TK_RUN, STREAM, LIB_PATH, CALIBRATE]) else {
        return r.finish();
    };
    let Some(d) = topo.dram_node().or_else(|| topo.memory.first().copied()) else {
        r.fail("nodes", "no node with memory");
        return r.finish();
    };
    let Some(s) = topo.memory.iter().copied().find(|&n| n != d) else {
        r.skip("rebalance a tk-run program", "one node with memory");
        return r.finish();
    };
    let w = arg(&[(d, 1), (s, 2)]);
    refused(
        &mut r,
        "refused for a process without tierkit memory",
        std::process::id() as i32,
        "maps no /dev/tierkit",
        false,
        &w,
    );
    // Pid numbers stop at pid_max (4194304 at most).
    refused(
        &mut r,
        "refused for a process that does not exist",
        4_194_305,
        "does not exist",
        false,
        &w,
    );
    run(&mut r, d, s);
    r.finish()
}
