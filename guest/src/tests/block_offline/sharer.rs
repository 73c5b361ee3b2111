//! A forked child that shares a mapping across the offline ([`Sharer`]).

use super::*;

/// A forked child that shares the mapping: fork copies the PTEs of a
/// `VM_MIXEDMAP` mapping, so the child maps the very pages the parent
/// does, and a move must zap its PTEs too (else it would keep a freed
/// page mapped). It reports how many of its PTEs are present, waits for
/// the offline, then checks in its own address space: no PTE left on an
/// offlined block, every byte, every page's node.
pub struct Sharer {
    pub pid: libc::pid_t,
    pub go: std::fs::File,
    pub result: std::io::BufReader<std::fs::File>,
}

pub fn pipe() -> std::io::Result<(std::fs::File, std::fs::File)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are ours.
    Ok(unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    })
}

/// The child's side of [`Sharer`]: one line on `out` when ready, then,
/// after reading `TARGET BLOCK...` from `go`, one result line.
pub fn sharer_child(m: &Mapping, block_bytes: u64, go: std::fs::File, mut out: std::fs::File) -> ! {
    use std::io::{BufRead, Write};
    let present = pagemap_pfns(m.addr(), m.nr_pages())
        .map(|p| p.iter().flatten().count())
        .unwrap_or(0);
    let _ = writeln!(out, "ready {present}");
    let mut line = String::new();
    let _ = std::io::BufReader::new(go).read_line(&mut line);
    let nums: Vec<u64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let res = (|| -> Result<String, String> {
        let (&target, offlined) = nums.split_first().ok_or("no target from the parent")?;
        let pfns = pagemap_pfns(m.addr(), m.nr_pages()).map_err(|e| e.to_string())?;
        let still = pfns.iter().flatten().count();
        let stale: Vec<u64> = pfns
            .iter()
            .flatten()
            .copied()
            .filter(|&p| offlined.contains(&block_of_pfn(p, block_bytes)))
            .collect();
        if !stale.is_empty() {
            return Err(format!(
                "{} of its PTEs still map pfns in offlined blocks (first {:#x})",
                stale.len(),
                stale[0]
            ));
        }
        let v = verify_pages(m, 0..m.nr_pages())?;
        let n = check_nodes(m, target as u32)?;
        Ok(format!(
            "{present} PTEs present before the offline, {still} after; {v}; {n}"
        ))
    })();
    let _ = match res {
        Ok(s) => writeln!(out, "ok {s}"),
        Err(e) => writeln!(out, "err {e}"),
    };
    // SAFETY: ends the forked child without running the parent's exit
    // handlers.
    unsafe { libc::_exit(0) }
}

impl Sharer {
    /// Forks the child; returns it once it has looked at its PTEs, with
    /// how many were present.
    pub fn spawn(m: &Mapping, block_bytes: u64) -> Result<(Sharer, usize), String> {
        use std::io::BufRead;
        let (go_r, go_w) = pipe().map_err(|e| format!("pipe: {e}"))?;
        let (res_r, res_w) = pipe().map_err(|e| format!("pipe: {e}"))?;
        // SAFETY: the test is single-threaded; the child runs Rust code on
        // its copy of the address space and ends with _exit.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(format!("fork: {}", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            drop(go_w);
            drop(res_r);
            sharer_child(m, block_bytes, go_r, res_w);
        }
        drop(go_r);
        drop(res_w);
        let mut s = Sharer {
            pid,
            go: go_w,
            result: std::io::BufReader::new(res_r),
        };
        let mut line = String::new();
        let _ = s.result.read_line(&mut line);
        match line.trim().strip_prefix("ready ") {
            Some(n) => Ok((s, n.parse().unwrap_or(0))),
            None => Err(format!("child said {line:?}")),
        }
    }

    /// Tells the child the target node and the offlined blocks, and
    /// returns its verdict (waiting at most `limit`).
    pub fn check(
        mut self,
        target: u32,
        offlined: &[u64],
        limit: Duration,
    ) -> Result<String, String> {
        use std::io::{BufRead, Write};
        use std::os::fd::AsRawFd;
        let mut msg = target.to_string();
        for b in offlined {
            msg.push_str(&format!(" {b}"));
        }
        writeln!(self.go, "{msg}").map_err(|e| format!("pipe: {e}"))?;
        let mut pfd = libc::pollfd {
            fd: self.result.get_ref().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, limit.as_millis() as i32) };
        let mut line = String::new();
        if ready > 0 {
            let _ = self.result.read_line(&mut line);
        }
        if line.is_empty() {
            // SAFETY: our own child.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
        let mut status = 0;
        // SAFETY: reaps our own child.
        unsafe { libc::waitpid(self.pid, &mut status, 0) };
        let line = line.trim();
        if let Some(ok) = line.strip_prefix("ok ") {
            Ok(ok.to_string())
        } else if let Some(e) = line.strip_prefix("err ") {
            Err(e.to_string())
        } else if line.is_empty() {
            Err(format!(
                "no answer within {} (status {status:#x}: killed by a signal = it faulted)",
                secs(limit)
            ))
        } else {
            Err(format!("child said {line:?}"))
        }
    }
}
