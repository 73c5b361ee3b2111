//! Helpers for the hostile-use regression tests
//! (`tk-test-hostile`, `tk-test-vma`, `tk-test-perm`): raw mappings that
//! can be split, moved and protected; fork, kill and reap with timing;
//! `/proc/self/pagemap`, `/proc/self/smaps`, `/proc/self/mem`; `vmsplice`;
//! per-node `MemFree`; tierkit's `limits` file; identities.
//!
//! Everything is a direct libc call with `io::Error` on failure. Children
//! made by [`fork_run`] and [`spawn_synced`] leave with `_exit`, never
//! returning into the caller's code.
//!
//! Here: raw mappings, fork/wait, pipes and synced children, identities;
//! the kernel-side views of a mapping in `vma/kernel_io.rs`, per-node
//! memory and `limits` in `vma/meminfo.rs`, the page pattern in
//! `vma/pattern.rs`.

use std::ffi::c_void;
use std::io;
use std::os::fd::RawFd;

use crate::linux::sys::PAGE_SIZE;

mod kernel_io;
mod meminfo;
mod pattern;

pub use kernel_io::*;
pub use meminfo::*;
pub use pattern::*;

#[cfg(test)]
mod tests;

fn cvt(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// `mmap(NULL, len, prot, flags, fd, offset)`; the caller owns the result
/// (nothing unmaps it on drop).
pub fn mmap_raw(len: usize, prot: i32, flags: i32, fd: RawFd, offset: u64) -> io::Result<*mut u8> {
    // SAFETY: no MAP_FIXED from the callers here (checked): the kernel
    // picks a free range and replaces nothing.
    if flags & libc::MAP_FIXED != 0 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: see above.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            prot,
            flags,
            fd,
            offset as libc::off_t,
        )
    };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p as *mut u8)
    }
}

/// `munmap(2)`.
///
/// # Safety
/// Nothing may use `[addr, addr + len)` afterwards.
pub unsafe fn munmap(addr: *mut u8, len: usize) -> io::Result<()> {
    // SAFETY: per the caller's contract.
    cvt(unsafe { libc::munmap(addr as *mut c_void, len) } as libc::c_long).map(|_| ())
}

/// `mprotect(2)`.
///
/// # Safety
/// The caller owns the range and does not access it against `prot`.
pub unsafe fn mprotect(addr: *mut u8, len: usize, prot: i32) -> io::Result<()> {
    // SAFETY: per the caller's contract.
    cvt(unsafe { libc::mprotect(addr as *mut c_void, len, prot) } as libc::c_long).map(|_| ())
}

/// `mremap(2)` with an optional new address (`MREMAP_FIXED`).
///
/// # Safety
/// The caller owns `[old, old + old_len)` and, with `MREMAP_FIXED`,
/// `[new_addr, new_addr + new_len)`, whose old contents are replaced.
pub unsafe fn mremap(
    old: *mut u8,
    old_len: usize,
    new_len: usize,
    flags: i32,
    new_addr: *mut u8,
) -> io::Result<*mut u8> {
    // SAFETY: per the caller's contract.
    let p = unsafe {
        libc::mremap(
            old as *mut c_void,
            old_len,
            new_len,
            flags,
            new_addr as *mut c_void,
        )
    };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p as *mut u8)
    }
}

/// How a child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl Exit {
    fn from_status(st: i32) -> Exit {
        if libc::WIFSIGNALED(st) {
            Exit::Signal(libc::WTERMSIG(st))
        } else {
            Exit::Code(libc::WEXITSTATUS(st))
        }
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exit {c}"),
            Exit::Signal(s) => write!(f, "killed by {}", signal_name(*s)),
        }
    }
}

/// `SIGSEGV`, `SIGBUS`, ... for messages.
pub fn signal_name(s: i32) -> String {
    match s {
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGBUS => "SIGBUS".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGABRT => "SIGABRT".into(),
        n => format!("signal {n}"),
    }
}

/// `waitpid(pid, 0)`, retried on `EINTR`.
pub fn wait_exit(pid: libc::pid_t) -> io::Result<Exit> {
    let mut st = 0;
    loop {
        // SAFETY: writes one int.
        let r = unsafe { libc::waitpid(pid, &mut st, 0) };
        if r == pid {
            return Ok(Exit::from_status(st));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// `waitpid(pid, WNOHANG)`: `None` while the child runs.
pub fn try_wait(pid: libc::pid_t) -> io::Result<Option<Exit>> {
    let mut st = 0;
    // SAFETY: writes one int.
    let r = unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) };
    match r {
        0 => Ok(None),
        r if r == pid => Ok(Some(Exit::from_status(st))),
        _ => Err(io::Error::last_os_error()),
    }
}

pub fn flush_stdio() {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
}

/// Forks; the child runs `f` and leaves with `_exit(f())`, so a signal it
/// takes (SIGSEGV, SIGBUS) ends only the child. Returns how it ended.
pub fn fork_run(f: impl FnOnce() -> i32) -> io::Result<Exit> {
    wait_exit(fork_child(f)?)
}

/// Forks a child that runs `f` and `_exit(f())`s; returns its pid.
pub fn fork_child(f: impl FnOnce() -> i32) -> io::Result<libc::pid_t> {
    flush_stdio();
    // SAFETY: the test binaries are single-threaded; the child only runs
    // `f` and `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        let code = f();
        // SAFETY: leaves the child without running the parent's cleanup.
        unsafe { libc::_exit(code) };
    }
    Ok(pid)
}

/// [`fork_run`] with a bound: a child still running after `limit` is
/// killed (SIGKILL) and reaped, and the answer is an error of kind
/// `TimedOut` that says so. For a child whose fault could retry without
/// end (a handler answering `VM_FAULT_OOM` to a shortage that lasts), so
/// that the test fails with a reason instead of hanging.
pub fn fork_run_within(limit: std::time::Duration, f: impl FnOnce() -> i32) -> io::Result<Exit> {
    let pid = fork_child(f)?;
    let t0 = std::time::Instant::now();
    while t0.elapsed() < limit {
        if let Some(e) = try_wait(pid)? {
            return Ok(e);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: our own child, not yet reaped.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    wait_exit(pid)?;
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        format!("the child still ran after {} s: killed", limit.as_secs()),
    ))
}

/// Makes every GiB of a gigantic `/dev/tierkit` mapping (`len` bytes at
/// `addr`, GiB-aligned) by its first touch, one read per GiB, in a forked
/// child: a GiB that cannot be made (no free naturally aligned GiB on its
/// node, a killed clear) is `SIGBUS` for the toucher, and this way it ends
/// only the child. The child's GiBs are the file's, so the caller's own
/// touches then map the same ranges. Returns the time the child took;
/// `Err` names the GiB and how the child ended.
///
/// # Safety
///
/// `addr..addr + len` is a live readable mapping of this process.
pub unsafe fn make_gigantic(addr: *mut u8, len: usize) -> Result<std::time::Duration, String> {
    const GIB: usize = 1 << 30;
    let t0 = std::time::Instant::now();
    let exit = fork_run(|| {
        for off in (0..len).step_by(GIB) {
            // SAFETY: inside the caller's readable mapping (see the
            // function's safety section); a SIGBUS ends this child only.
            unsafe { std::ptr::read_volatile(addr.add(off)) };
        }
        0
    })
    .map_err(|e| format!("fork: {e}"))?;
    match exit {
        Exit::Code(0) => Ok(t0.elapsed()),
        e => Err(format!(
            "the first touch of the mapping ended the child: {e} (no free naturally aligned GiB on the node? the kernel log says)"
        )),
    }
}

/// A pipe, both ends closed on drop.
#[derive(Debug)]
pub struct Pipe {
    pub rd: RawFd,
    pub wr: RawFd,
}

impl Pipe {
    pub fn new() -> io::Result<Pipe> {
        let mut fds = [0; 2];
        // SAFETY: writes two fds.
        cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } as libc::c_long)?;
        Ok(Pipe {
            rd: fds[0],
            wr: fds[1],
        })
    }

    /// Writes one byte to the write end.
    pub fn signal(&self) -> io::Result<()> {
        // SAFETY: reads one byte from a local.
        let n = unsafe { libc::write(self.wr, b"x".as_ptr() as *const c_void, 1) };
        cvt(n as libc::c_long).map(|_| ())
    }

    /// Reads one byte from the read end; `Ok(false)` at end of file.
    pub fn wait(&self) -> io::Result<bool> {
        let mut b = [0u8; 1];
        loop {
            // SAFETY: writes at most one byte to a local.
            let n = unsafe { libc::read(self.rd, b.as_mut_ptr() as *mut c_void, 1) };
            if n >= 0 {
                return Ok(n == 1);
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
        }
    }

    /// Closes the write end (so the reader sees end of file once every
    /// process closed it).
    pub fn close_wr(&mut self) {
        if self.wr >= 0 {
            // SAFETY: our fd.
            unsafe { libc::close(self.wr) };
            self.wr = -1;
        }
    }

    /// Closes the read end.
    pub fn close_rd(&mut self) {
        if self.rd >= 0 {
            // SAFETY: our fd.
            unsafe { libc::close(self.rd) };
            self.rd = -1;
        }
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        self.close_rd();
        self.close_wr();
    }
}

/// A child that told its parent it is about to start its operation.
#[derive(Debug)]
pub struct Spawned {
    pub pid: libc::pid_t,
    /// Whether it is still running (reaped children are not killed again).
    reaped: Option<Exit>,
}

impl Spawned {
    /// Whether it ended already (and how).
    pub fn poll(&mut self) -> io::Result<Option<Exit>> {
        if self.reaped.is_none() {
            self.reaped = try_wait(self.pid)?;
        }
        Ok(self.reaped)
    }

    /// Waits for it to end by itself.
    pub fn wait(&mut self) -> io::Result<Exit> {
        if let Some(e) = self.reaped {
            return Ok(e);
        }
        let e = wait_exit(self.pid)?;
        self.reaped = Some(e);
        Ok(e)
    }

    /// SIGKILL, then `waitpid`; returns how it ended and the nanoseconds
    /// from just before `kill(2)` to `waitpid` returning (CLOCK_MONOTONIC).
    pub fn kill_and_reap(&mut self) -> io::Result<(Exit, u64)> {
        if let Some(e) = self.reaped {
            return Ok((e, 0));
        }
        let t0 = crate::linux::sys::monotonic_ns();
        // SAFETY: a child of ours that has not been reaped.
        cvt(unsafe { libc::kill(self.pid, libc::SIGKILL) } as libc::c_long)?;
        let e = wait_exit(self.pid)?;
        let dt = crate::linux::sys::monotonic_ns() - t0;
        self.reaped = Some(e);
        Ok((e, dt))
    }

    /// The state letter of `/proc/PID/stat` (`R`, `S`, `D`, ...).
    pub fn state(&self) -> Option<char> {
        proc_state(self.pid)
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if self.reaped.is_none() {
            // Never leave a process behind.
            // SAFETY: our unreaped child.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            let _ = wait_exit(self.pid);
        }
    }
}

/// Forks a child that runs `f(ready)`, where `ready()` tells the parent it
/// is about to start the operation under test; returns once it was
/// called (or the child ended without calling it: `Err`). The child leaves
/// with `_exit(f(..))`.
pub fn spawn_synced(f: impl FnOnce(&dyn Fn()) -> i32) -> io::Result<Spawned> {
    let mut p = Pipe::new()?;
    flush_stdio();
    // SAFETY: single-threaded caller; the child runs `f` and `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        p.close_rd();
        let ready = || {
            let _ = p.signal();
        };
        let code = f(&ready);
        // SAFETY: leaves the child without the parent's cleanup.
        unsafe { libc::_exit(code) };
    }
    p.close_wr();
    let mut s = Spawned { pid, reaped: None };
    if !p.wait()? {
        let e = wait_exit(pid)?;
        s.reaped = Some(e);
        return Err(io::Error::other(format!(
            "the child ended ({e}) before starting its operation"
        )));
    }
    Ok(s)
}

/// The state letter of `/proc/PID/stat`.
pub fn proc_state(pid: libc::pid_t) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Sleeps `ms` milliseconds.
pub fn sleep_ms(ms: u64) {
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

/// Drops to `uid`/`gid` for good (no supplementary groups). For a forked
/// child.
pub fn become_user(uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: plain syscalls with integer arguments.
    unsafe {
        cvt(libc::setgroups(0, std::ptr::null()) as libc::c_long)?;
        cvt(libc::setgid(gid) as libc::c_long)?;
        cvt(libc::setuid(uid) as libc::c_long)?;
    }
    Ok(())
}
