//! A guest program under supervision: its own process group, a deadline,
//! and no process left behind.
//!
//! The program starts as the leader of a new process group. Its output
//! pipe is read as it comes (poll, not a blocking read, so that a child
//! holding the pipe cannot hold /init). At its deadline the whole group is
//! killed. When the program has exited, whatever it left running after a
//! short grace ([`GRACE`]) is killed and counted: members of its group,
//! and, when /init reaps orphans (PID 1, or a `PR_SET_CHILD_SUBREAPER`),
//! its own children it did not start, which is where a process that left
//! the group with setsid() ends up once its parent died. A process named
//! [`KEEP_COMM`] is counted but not killed: a test parks there a file
//! whose close would crash the kernel (`lifecycle::quarantine`).

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tierkit_protocol::marker::Ending;

/// How long a program's children may take to exit after it did.
pub const GRACE: Duration = Duration::from_secs(1);
/// How long killed processes may take to go away.
pub const KILL_WAIT: Duration = Duration::from_secs(5);
/// How long the output pipe may stay open once every process is gone.
const DRAIN: Duration = Duration::from_secs(2);
/// The `comm` of a process a test leaves running on purpose
/// (`lifecycle::quarantine` sets it with `PR_SET_NAME`).
pub const KEEP_COMM: &std::ffi::CStr = c"tk-keep-alive";

/// A process as `/proc/PID/stat` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proc {
    pub pid: i32,
    pub comm: String,
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
}

/// `/proc/PID/stat`'s first fields (`comm` may hold spaces and parens).
pub fn parse_stat(s: &str) -> Option<Proc> {
    let (head, rest) = s.rsplit_once(')')?;
    let (pid, comm) = head.split_once(" (")?;
    let mut f = rest.split_whitespace();
    Some(Proc {
        pid: pid.trim().parse().ok()?,
        comm: comm.to_string(),
        state: f.next()?.chars().next()?,
        ppid: f.next()?.parse().ok()?,
        pgrp: f.next()?.parse().ok()?,
    })
}

/// Every process of the system.
pub fn procs() -> Vec<Proc> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter_map(|e| parse_stat(&std::fs::read_to_string(e.path().join("stat")).ok()?))
        .collect()
}

/// The live processes a program whose group is `pgid` left: members of
/// the group, and with `orphans`, children of `me` but `main` (alive or
/// not yet reaped). Zombies are not counted: they are gone but for their
/// exit status.
pub fn leftovers(all: &[Proc], pgid: i32, me: i32, main: i32, orphans: bool) -> Vec<Proc> {
    all.iter()
        .filter(|p| p.pid != main && p.pid != me && !matches!(p.state, 'Z' | 'X'))
        .filter(|p| p.pgrp == pgid || (orphans && p.ppid == me))
        .cloned()
        .collect()
}

/// How a supervised program ended.
#[derive(Debug)]
pub struct Supervised {
    /// Its pid, which is also its process group's id.
    pub pid: i32,
    /// The processes it left behind that /init killed.
    pub killed: BTreeSet<i32>,
    /// Its exit status; `None` if it never went away (killed, and stuck).
    pub status: Option<ExitStatus>,
    pub ending: Ending,
    /// What /init says about it, in its output: the deadline, the
    /// processes left behind, a process that would not die.
    pub notes: Vec<String>,
}

/// Runs `cmd` in a new process group with stdout and stderr into one pipe,
/// handing what comes to `sink`; kills it at `deadline`, and what it
/// leaves behind. `orphans`: /init reaps every child (PID 1 or a
/// subreaper), so that escaped orphans show up as its children. `Err`:
/// it could not start.
pub fn run(
    mut cmd: Command,
    deadline: Option<Duration>,
    orphans: bool,
    sink: &mut dyn FnMut(&[u8]),
) -> std::io::Result<Supervised> {
    // /init's children before this program: not its leftovers (a process
    // an earlier test parked, named KEEP_COMM).
    let me = std::process::id() as i32;
    let before: BTreeSet<i32> = procs()
        .into_iter()
        .filter(|p| orphans && p.ppid == me)
        .map(|p| p.pid)
        .collect();
    let (r, w) = pipe()?;
    let w2 = w.try_clone()?;
    cmd.stdout(Stdio::from(w)).stderr(Stdio::from(w2));
    cmd.process_group(0);
    let child = cmd.spawn();
    // Our copies of the write end go, so that EOF comes when the program
    // (and whatever it left running) closes its own.
    drop(cmd);
    let main = child?.id() as i32;
    let mut s = Sup {
        pipe: Pipe::new(r),
        main,
        orphans,
        before,
        status: None,
    };
    let start = Instant::now();
    let mut timeout = None;
    while s.status.is_none() {
        s.pump(Duration::from_millis(100), sink);
        s.reap();
        if let Some(d) = deadline.filter(|d| start.elapsed() >= *d) {
            if s.status.is_none() {
                timeout = Some(d.as_secs() as u32);
                kill(-main);
                s.wait_main(sink);
            }
            break;
        }
    }
    let mut notes = Vec::new();
    if let Some(t) = timeout {
        notes.push(format!(
            "timed out after {t} s: killed its process group {main}"
        ));
        if s.status.is_none() {
            notes.push(format!(
                "pid {main} did not die within {} s of SIGKILL ({})",
                KILL_WAIT.as_secs(),
                describe(main)
            ));
        }
    }
    let grace = if timeout.is_some() {
        Duration::ZERO
    } else {
        GRACE
    };
    let (left, killed) = s.kill_leftovers(grace, sink, &mut notes);
    s.drain(sink, &mut notes);
    Ok(Supervised {
        pid: main,
        killed,
        status: s.status,
        ending: Ending {
            timeout,
            left,
            ..Ending::default()
        },
        notes,
    })
}

/// Reaps every child of /init that ended (`orphans`), or only `pid`.
pub fn reap_ended(pid: i32, orphans: bool) {
    let which = if orphans { -1 } else { pid };
    loop {
        let mut st = 0;
        // SAFETY: waitpid writes the status into our local.
        let r = unsafe { libc::waitpid(which, &mut st, libc::WNOHANG) };
        if r <= 0 || !orphans {
            return;
        }
    }
}

/// `kill(pid, SIGKILL)` (a negative `pid`: a process group).
fn kill(pid: i32) {
    // SAFETY: kill(2) with a plain signal number.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// `pid (comm) state S` for a note, from /proc.
fn describe(pid: i32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
    let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
    match stat.as_deref().and_then(parse_stat) {
        Some(p) if wchan.is_empty() || wchan == "0" => format!("{} state {}", p.comm, p.state),
        Some(p) => format!("{} state {} in {wchan}", p.comm, p.state),
        None => "gone".into(),
    }
}

/// The read end of the output pipe, non-blocking.
struct Pipe {
    f: Option<File>,
}

impl Pipe {
    fn new(r: OwnedFd) -> Pipe {
        // SAFETY: fcntl on a descriptor we own.
        unsafe {
            let fl = libc::fcntl(r.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(r.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        Pipe {
            f: Some(File::from(r)),
        }
    }

    /// Waits up to `wait` for output and hands what there is to `sink`;
    /// false once the pipe is at EOF.
    fn pump(&mut self, wait: Duration, sink: &mut dyn FnMut(&[u8])) -> bool {
        let Some(f) = &mut self.f else {
            std::thread::sleep(wait);
            return false;
        };
        let mut pfd = libc::pollfd {
            fd: f.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd of ours.
        unsafe { libc::poll(&mut pfd, 1, wait.as_millis() as i32) };
        let mut buf = [0u8; 8192];
        loop {
            match f.read(&mut buf) {
                Ok(0) => {
                    self.f = None;
                    return false;
                }
                Ok(n) => sink(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return true,
            }
        }
    }
}

/// The state of one supervised program.
struct Sup {
    pipe: Pipe,
    main: i32,
    orphans: bool,
    /// /init's children when the program started.
    before: BTreeSet<i32>,
    status: Option<ExitStatus>,
}

impl Sup {
    fn pump(&mut self, wait: Duration, sink: &mut dyn FnMut(&[u8])) {
        if !self.pipe.pump(wait, sink) && self.pipe.f.is_none() {
            // EOF: poll returns at once from now on.
            std::thread::sleep(wait.min(Duration::from_millis(20)));
        }
    }

    /// Reaps the program, and with `orphans` every other child that ended.
    fn reap(&mut self) {
        let which = if self.orphans { -1 } else { self.main };
        loop {
            let mut st = 0;
            // SAFETY: waitpid writes the status into our local.
            let r = unsafe { libc::waitpid(which, &mut st, libc::WNOHANG) };
            if r <= 0 {
                return;
            }
            if r == self.main {
                self.status = Some(ExitStatus::from_raw(st));
            }
            if !self.orphans {
                return;
            }
        }
    }

    /// After SIGKILL to its group: waits up to [`KILL_WAIT`] for the
    /// program to be reaped.
    fn wait_main(&mut self, sink: &mut dyn FnMut(&[u8])) {
        let t = Instant::now();
        while self.status.is_none() && t.elapsed() < KILL_WAIT {
            self.pump(Duration::from_millis(20), sink);
            self.reap();
        }
    }

    /// Kills what the program left running once `grace` has passed; how
    /// many processes that was, and the pids it killed.
    fn kill_leftovers(
        &mut self,
        grace: Duration,
        sink: &mut dyn FnMut(&[u8]),
        notes: &mut Vec<String>,
    ) -> (usize, BTreeSet<i32>) {
        let me = std::process::id() as i32;
        let t = Instant::now();
        let mut left: BTreeSet<i32> = BTreeSet::new();
        let mut kept = BTreeSet::new();
        let mut named = Vec::new();
        loop {
            self.pump(Duration::from_millis(20), sink);
            self.reap();
            let now: Vec<Proc> = leftovers(&procs(), self.main, me, self.main, self.orphans)
                .into_iter()
                .filter(|p| !kept.contains(&p.pid) && !self.before.contains(&p.pid))
                .collect();
            if now.is_empty() {
                break;
            }
            if t.elapsed() < grace {
                continue;
            }
            if t.elapsed() >= grace + KILL_WAIT {
                for p in &now {
                    notes.push(format!(
                        "pid {} did not die within {} s of SIGKILL ({})",
                        p.pid,
                        KILL_WAIT.as_secs(),
                        describe(p.pid)
                    ));
                }
                break;
            }
            // One by one, not the group: a kept process may be in it; a
            // child forked meanwhile is found on the next round.
            for p in &now {
                if left.insert(p.pid) {
                    named.push(format!("{} ({})", p.pid, p.comm));
                }
                if p.comm.as_bytes() == KEEP_COMM.to_bytes() {
                    kept.insert(p.pid);
                } else {
                    kill(p.pid);
                }
            }
        }
        if !left.is_empty() {
            notes.push(format!(
                "left {} process(es) running after it exited: {}; killed{}",
                left.len(),
                named.join(", "),
                if kept.is_empty() {
                    String::new()
                } else {
                    format!(" but for the {} named {KEEP_COMM:?}", kept.len())
                }
            ));
        }
        let killed = left.difference(&kept).copied().collect();
        (left.len(), killed)
    }

    /// Reads the pipe to its end, for at most [`DRAIN`]: a process /init
    /// could not find or kill may hold it open.
    fn drain(&mut self, sink: &mut dyn FnMut(&[u8]), notes: &mut Vec<String>) {
        let t = Instant::now();
        while self.pipe.f.is_some() && t.elapsed() < DRAIN {
            self.pipe.pump(Duration::from_millis(50), sink);
        }
        if self.pipe.f.is_some() {
            notes.push(format!(
                "its output pipe was still open {} s after every process /init knows of ended",
                DRAIN.as_secs()
            ));
        }
    }
}

/// A pipe (read end, write end), close-on-exec.
pub fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 fills in.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both are fresh descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_with_odd_names() {
        let p = parse_stat("42 (a) b (c)) S 1 42 42 0 -1 4194560 0").unwrap();
        assert_eq!(
            p,
            Proc {
                pid: 42,
                comm: "a) b (c)".into(),
                state: 'S',
                ppid: 1,
                pgrp: 42
            }
        );
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn leftovers_are_the_group_and_with_orphans_other_children() {
        let p = |pid, state, ppid, pgrp| Proc {
            pid,
            comm: "x".into(),
            state,
            ppid,
            pgrp,
        };
        let all = [
            p(1, 'S', 0, 1),
            p(10, 'S', 1, 10),  // the program
            p(11, 'S', 10, 10), // its child
            p(12, 'Z', 1, 10),  // a zombie
            p(13, 'D', 1, 13),  // escaped with setsid, reparented to /init
            p(14, 'S', 13, 13), // its child: found once 13 is gone
            p(2, 'S', 0, 0),    // kthreadd
        ];
        let pids = |v: Vec<Proc>| v.iter().map(|p| p.pid).collect::<Vec<_>>();
        assert_eq!(pids(leftovers(&all, 10, 1, 10, false)), [11]);
        assert_eq!(pids(leftovers(&all, 10, 1, 10, true)), [11, 13]);
    }
}
