//! `tk-test-run`'s pieces: running the unmodified test programs
//! (`tk-stream`, `tkrun-check`, built from `tkrun/*.c`) under `tk-run` or
//! `numactl`, reading what they print, and looking at their pages from
//! outside (`move_pages(2)` on their pid).

use crate::topology::interleave::expected_wi_nid;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// The launcher and the programs, as the initramfs has them.
pub const TK_RUN: &str = "/bin/tk-run";
pub const STREAM: &str = "/usr/bin/tk-stream";
pub const CHECK: &str = "/usr/bin/tkrun-check";
pub const NUMACTL: &str = "/usr/bin/numactl";

/// tierkit and the topology ([`crate::tierkit_ready`]) and every file of
/// `parts` in the initramfs, or the checks failed in `r` and `None`.
pub fn guest_ready(
    r: &mut crate::harness::report::Report,
    parts: &[&str],
) -> Option<crate::topology::node::Topology> {
    let topo = crate::abi::ready::tierkit_ready(r)?;
    match parts.iter().find(|p| !std::path::Path::new(p).exists()) {
        Some(p) => {
            r.fail("tk-run in the guest", format!("no {p} in the initramfs"));
            None
        }
        None => Some(topo),
    }
}

/// A program started with piped stdio, read up to its "waiting" line.
pub struct Held {
    pub child: Child,
    stdin: Option<ChildStdin>,
    /// The rest of its stdout, kept open: a line it prints after
    /// "waiting" must not meet a closed pipe (SIGPIPE).
    stdout: Option<BufReader<ChildStdout>>,
    /// Every stdout line up to "waiting" (or the end).
    pub lines: Vec<String>,
    /// Whether it printed "waiting" (it then holds its memory).
    pub waiting: bool,
}

/// Starts `argv` with its stdout read up to "waiting"; with `thp_off`
/// the child (and what it execs) runs with PR_SET_THP_DISABLE, so the
/// kernel places its anonymous memory page by page.
pub fn start(argv: &[&str], thp_off: bool) -> std::io::Result<Held> {
    let mut c = Command::new(argv[0]);
    c.args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if thp_off {
        // SAFETY: prctl is async-signal-safe; nothing else runs in the child.
        unsafe {
            c.pre_exec(|| {
                if libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = c.spawn()?;
    let stdin = child.stdin.take();
    let mut lines = Vec::new();
    let mut waiting = false;
    let mut stdout = child.stdout.take().map(BufReader::new);
    if let Some(out) = stdout.as_mut() {
        let mut l = String::new();
        while out.read_line(&mut l)? > 0 {
            let t = l.trim_end_matches('\n').to_string();
            l.clear();
            if t == "waiting" {
                waiting = true;
                break;
            }
            lines.push(t);
        }
    }
    Ok(Held {
        child,
        stdin,
        stdout,
        lines,
        waiting,
    })
}

impl Held {
    /// Lets it go on (a line on its stdin), waits; returns its exit code
    /// (-1 killed) and its stderr.
    pub fn finish(self) -> (i32, String) {
        let (code, _, err) = self.finish_all();
        (code, err)
    }

    /// As [`Held::finish`], with the stdout lines it printed after
    /// "waiting": (exit code, those lines, stderr).
    pub fn finish_all(mut self) -> (i32, Vec<String>, String) {
        if let Some(mut s) = self.stdin.take() {
            let _ = s.write_all(b"\n");
        }
        // Read in a thread while stderr is collected, so that neither
        // pipe can fill and stall the program.
        let rest = self.stdout.take().map(|out| {
            std::thread::spawn(move || out.lines().map_while(Result::ok).collect::<Vec<_>>())
        });
        let out = self.child.wait_with_output();
        let lines = rest.and_then(|t| t.join().ok()).unwrap_or_default();
        match out {
            Ok(o) => (
                o.status.code().unwrap_or(-1),
                lines,
                String::from_utf8_lossy(&o.stderr).into_owned(),
            ),
            Err(e) => (-1, lines, e.to_string()),
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

/// Runs `argv` to the end: (exit code, stdout, stderr).
pub fn run(argv: &[&str]) -> std::io::Result<(i32, String, String)> {
    let o = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()?;
    Ok((
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    ))
}

/// `(name, address, bytes)` of lines `KIND NAME 0xADDR BYTES`.
pub fn blocks(lines: &[String], kind: &str) -> Vec<(String, usize, usize)> {
    lines
        .iter()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f.as_slice() {
                [k, name, addr, bytes] if *k == kind => Some((
                    name.to_string(),
                    usize::from_str_radix(addr.trim_start_matches("0x"), 16).ok()?,
                    bytes.parse().ok()?,
                )),
                [k, addr, bytes] if *k == kind => Some((
                    kind.to_string(),
                    usize::from_str_radix(addr.trim_start_matches("0x"), 16).ok()?,
                    bytes.parse().ok()?,
                )),
                _ => None,
            }
        })
        .collect()
}

/// The node of each 4 KiB page of `[addr, addr + bytes)` in process `pid`
/// (`move_pages(2)` without moving; negative: an errno).
pub fn page_nodes(pid: i32, addr: usize, bytes: usize) -> std::io::Result<Vec<i32>> {
    let first = addr & !4095;
    let n = (addr + bytes - first).div_ceil(4096);
    let mut out = Vec::with_capacity(n);
    for chunk in (0..n).collect::<Vec<_>>().chunks(4096) {
        let addrs: Vec<*const libc::c_void> = chunk
            .iter()
            .map(|&i| (first + i * 4096) as *const libc::c_void)
            .collect();
        let mut status = vec![i32::MIN; addrs.len()];
        // SAFETY: both arrays hold addrs.len() elements; nodes NULL = query.
        let r = unsafe {
            libc::syscall(
                libc::SYS_move_pages,
                pid,
                addrs.len() as libc::c_ulong,
                addrs.as_ptr(),
                std::ptr::null::<libc::c_int>(),
                status.as_mut_ptr(),
                0,
            )
        };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        out.extend(status);
    }
    Ok(out)
}

/// How many pages of a block at `addr` sit where the address rule
/// (weighted interleave, ilx = address / 4096) puts them: (agree, total,
/// first disagreement).
pub fn agreement(
    nodes: &[i32],
    addr: usize,
    mask: u64,
    table: &[u8; 64],
) -> (usize, usize, Option<String>) {
    let first = (addr & !4095) as u64 >> 12;
    let mut agree = 0;
    let mut bad = None;
    for (i, &n) in nodes.iter().enumerate() {
        let want = expected_wi_nid(mask, table, first + i as u64) as i32;
        if n == want {
            agree += 1;
        } else if bad.is_none() {
            bad = Some(format!(
                "page {i} at {:#x} on {n}, the rule says {want}",
                (first + i as u64) << 12
            ));
        }
    }
    (agree, nodes.len(), bad)
}

/// `path` of the `backing NAME PATH` line for `name`.
pub fn backing<'a>(lines: &'a [String], name: &str) -> Option<&'a str> {
    let head = format!("backing {name} ");
    lines.iter().find_map(|l| l.strip_prefix(&head))
}

/// Which mapping of `pid` holds `addr` (`/proc/PID/maps`): (start, end,
/// path).
pub fn mapping_of(pid: i32, addr: usize) -> Option<(usize, usize, String)> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    maps.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (s, e) = f.first()?.split_once('-')?;
        let (s, e) = (
            usize::from_str_radix(s, 16).ok()?,
            usize::from_str_radix(e, 16).ok()?,
        );
        (s <= addr && addr < e).then(|| (s, e, f.get(5).unwrap_or(&"").to_string()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing() {
        let lines: Vec<String> = [
            "array a 0x7f0000000000 8192",
            "array b 0x1000 4096",
            "block 0x40000000 1073741824",
            "backing block /dev/tierkit",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let a = blocks(&lines, "array");
        assert_eq!(a[0], ("a".into(), 0x7f00_0000_0000, 8192));
        assert_eq!(a.len(), 2);
        assert_eq!(blocks(&lines, "block")[0].1, 0x4000_0000);
        assert_eq!(backing(&lines, "block"), Some("/dev/tierkit"));
        assert_eq!(backing(&lines, "a"), None);
    }

    #[test]
    fn the_rule() {
        let mut t = [1u8; 64];
        t[0] = 3;
        // Nodes {0,1}, weights 3:1: ilx 0..3 -> 0, ilx 3 -> 1.
        let nodes = [0, 0, 0, 1, 0, 0, 0, 1];
        assert_eq!(agreement(&nodes, 0, 0b11, &t).0, 8);
        let (a, n, bad) = agreement(&[0, 1], 0, 0b11, &t);
        assert_eq!((a, n), (1, 2));
        assert!(bad.unwrap().contains("page 1"));
    }
}

/// tkrun-check's `ok NAME` and `not ok NAME: WHY` lines in `out` as checks
/// named `PREFIX: NAME`; every line of `out`.
pub fn check_lines(r: &mut crate::harness::report::Report, prefix: &str, out: &str) -> Vec<String> {
    let lines: Vec<String> = out.lines().map(String::from).collect();
    for l in &lines {
        if let Some(name) = l.strip_prefix("ok ") {
            r.ok(&format!("{prefix}: {name}"));
        } else if let Some(rest) = l.strip_prefix("not ok ") {
            let (name, why) = rest.split_once(": ").unwrap_or((rest, ""));
            r.fail(&format!("{prefix}: {name}"), why);
        }
    }
    lines
}
