//! Helpers for the hostile-use regression tests
//! (`tk-test-hostile`, `tk-test-vma`, `tk-test-perm`): raw mappings that
//! can be split, moved and protected; fork, kill and reap with timing;
//! `/proc/self/pagemap`, `/proc/self/smaps`, `/proc/self/mem`; `vmsplice`;
//! per-node `MemFree`; tierkit's `limits` file; identities.
//!
//! Everything is a direct libc call with `io::Error` on failure. Children
//! made by [`fork_run`] and [`spawn_synced`] leave with `_exit`, never
//! returning into the caller's code.

use std::ffi::c_void;
use std::io;
use std::os::fd::RawFd;

use crate::sys::PAGE_SIZE;

/// tierkit's limits file (`KEY VALUE` lines).
pub const LIMITS_PATH: &str = "/sys/kernel/debug/tierkit/limits";

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
fn fork_child(f: impl FnOnce() -> i32) -> io::Result<libc::pid_t> {
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
        let t0 = crate::sys::monotonic_ns();
        // SAFETY: a child of ours that has not been reaped.
        cvt(unsafe { libc::kill(self.pid, libc::SIGKILL) } as libc::c_long)?;
        let e = wait_exit(self.pid)?;
        let dt = crate::sys::monotonic_ns() - t0;
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

/// The pagemap entry of `addr` in this process: `Some(pfn)` if present
/// (the pfn reads 0 without CAP_SYS_ADMIN), `None` if not present.
pub fn pagemap_pfn(addr: usize) -> io::Result<Option<u64>> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open("/proc/self/pagemap")?;
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, (addr / PAGE_SIZE * 8) as u64)?;
    let e = u64::from_le_bytes(b);
    Ok((e >> 63 == 1).then_some(e & ((1 << 55) - 1)))
}

/// The `VmFlags` of the mapping that contains `addr`, from the text of an
/// smaps file.
pub fn parse_smaps_vmflags(smaps: &str, addr: usize) -> Option<Vec<String>> {
    let mut inside = false;
    for l in smaps.lines() {
        let first = l.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                inside = a <= addr && addr < b;
                continue;
            }
        }
        if inside {
            if let Some(f) = l.strip_prefix("VmFlags:") {
                return Some(f.split_whitespace().map(String::from).collect());
            }
        }
    }
    None
}

/// [`parse_smaps_vmflags`] on `/proc/self/smaps`.
pub fn smaps_vmflags(addr: usize) -> Option<Vec<String>> {
    parse_smaps_vmflags(&std::fs::read_to_string("/proc/self/smaps").ok()?, addr)
}

/// `pread` of `/proc/self/mem` at `addr` (the kernel goes through
/// `access_remote_vm()`, i.e. get_user_pages_remote() with FOLL_FORCE).
pub fn proc_mem_read(addr: usize, buf: &mut [u8]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open("/proc/self/mem")?;
    f.read_exact_at(buf, addr as u64)
}

/// `pwrite` of `/proc/self/mem` at `addr` (FOLL_FORCE | FOLL_WRITE).
pub fn proc_mem_write(addr: usize, buf: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/mem")?;
    f.write_all_at(buf, addr as u64)
}

/// `vmsplice(2)` of `[addr, addr + len)` into a pipe (fs/splice.c
/// `vmsplice_to_pipe` takes the pages with `iov_iter_extract_pages()`,
/// i.e. get_user_pages), then reads them back out of the pipe. `len` at
/// most 64 KiB (the default pipe size).
pub fn vmsplice_read(addr: usize, len: usize) -> io::Result<Vec<u8>> {
    let p = Pipe::new()?;
    let iov = libc::iovec {
        iov_base: addr as *mut c_void,
        iov_len: len,
    };
    // SAFETY: the kernel reads `len` bytes at `addr` (the caller's
    // mapping) into the pipe.
    let n = cvt(unsafe { libc::vmsplice(p.wr, &iov, 1, 0) } as libc::c_long)? as usize;
    let mut out = vec![0u8; n];
    let mut got = 0;
    while got < n {
        // SAFETY: writes at most `n - got` bytes into `out`.
        let r = unsafe { libc::read(p.rd, out[got..].as_mut_ptr() as *mut c_void, n - got) };
        got += cvt(r as libc::c_long)? as usize;
    }
    Ok(out)
}

/// `process_vm_readv(2)` of our own `[addr, addr + len)`
/// (mm/process_vm_access.c: pin_user_pages_remote). `ENOSYS` without
/// CONFIG_CROSS_MEMORY_ATTACH.
pub fn process_vm_read_self(addr: usize, len: usize) -> io::Result<Vec<u8>> {
    let mut out = vec![0u8; len];
    let local = libc::iovec {
        iov_base: out.as_mut_ptr() as *mut c_void,
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut c_void,
        iov_len: len,
    };
    // SAFETY: the kernel writes `len` bytes into `out`.
    let n = cvt(
        unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) } as libc::c_long,
    )?;
    out.truncate(n as usize);
    Ok(out)
}

/// Writes all of `[buf, buf + len)` to `fd` with `write(2)`.
///
/// # Safety
/// `buf` must be readable for `len` bytes (or a mapping whose faults the
/// kernel reports as `EFAULT`).
pub unsafe fn write_all_fd(fd: RawFd, buf: *const u8, len: usize) -> io::Result<()> {
    let mut done = 0;
    while done < len {
        // SAFETY: the caller's buffer is readable for `len` bytes.
        let n = unsafe { libc::write(fd, buf.add(done) as *const c_void, len - done) };
        done += cvt(n as libc::c_long)? as usize;
    }
    Ok(())
}

/// Reads exactly `len` bytes from `fd` into `buf` with `read(2)`.
///
/// # Safety
/// `buf` must be writable for `len` bytes and not aliased by a Rust
/// reference.
pub unsafe fn read_exact_fd(fd: RawFd, buf: *mut u8, len: usize) -> io::Result<()> {
    let mut done = 0;
    while done < len {
        // SAFETY: the caller's buffer is writable for `len` bytes.
        let n = unsafe { libc::read(fd, buf.add(done) as *mut c_void, len - done) };
        let n = cvt(n as libc::c_long)? as usize;
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        done += n;
    }
    Ok(())
}

/// `MemFree` of node `nid` in kB (`/sys/devices/system/node/nodeN/meminfo`).
pub fn node_memfree_kb(nid: u32) -> Option<u64> {
    let s =
        std::fs::read_to_string(format!("{}/node{nid}/meminfo", crate::node::NODE_SYSFS)).ok()?;
    parse_node_meminfo(&s, "MemFree")
}

/// Free memory of node `nid` in kB counting the pages on the per-CPU free
/// lists too: `MemFree` plus every `count:` of the node's pagesets in
/// `/proc/zoneinfo`. Freed pages first go to those lists, which in 7.3
/// may grow to 1/8 of a zone per CPU (mm/page_alloc.c `zone_highsize`,
/// MIN_PERCPU_PAGELIST_HIGH_FRACTION), so MemFree alone can stay hundreds
/// of MiB low after a large free until vmstat's decay drains them.
pub fn node_free_kb(nid: u32) -> Option<u64> {
    let free = node_memfree_kb(nid)?;
    let zi = std::fs::read_to_string("/proc/zoneinfo").ok()?;
    Some(free + parse_zoneinfo_pcp_pages(&zi, nid) * (PAGE_SIZE as u64 / 1024))
}

/// Pages on the per-CPU lists of node `nid`'s zones in a zoneinfo text.
pub fn parse_zoneinfo_pcp_pages(s: &str, nid: u32) -> u64 {
    let mut node = None;
    let mut sum = 0;
    for l in s.lines() {
        if let Some(rest) = l.strip_prefix("Node ") {
            node = rest
                .split(',')
                .next()
                .and_then(|n| n.trim().parse::<u32>().ok());
            continue;
        }
        if node != Some(nid) {
            continue;
        }
        if let Some(v) = l.trim_start().strip_prefix("count:") {
            sum += v.trim().parse::<u64>().unwrap_or(0);
        }
    }
    sum
}

/// `MemTotal` of node `nid` in kB.
pub fn node_memtotal_kb(nid: u32) -> Option<u64> {
    let s =
        std::fs::read_to_string(format!("{}/node{nid}/meminfo", crate::node::NODE_SYSFS)).ok()?;
    parse_node_meminfo(&s, "MemTotal")
}

/// The kB figure of `key` in a node meminfo text (`Node 0 MemFree:  123 kB`).
pub fn parse_node_meminfo(s: &str, key: &str) -> Option<u64> {
    s.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (_node, _nid, k, v) = (f.next()?, f.next()?, f.next()?, f.next()?);
        (k.strip_suffix(':')? == key).then(|| v.parse().ok())?
    })
}

/// `MemTotal` of `/proc/meminfo` in kB.
pub fn memtotal_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    s.lines().find_map(|l| {
        let v = l.strip_prefix("MemTotal:")?;
        v.split_whitespace().next()?.parse().ok()
    })
}

/// Parses `KEY VALUE` lines; every value must be an unsigned integer.
pub fn parse_limits(s: &str) -> anyhow::Result<Vec<(String, u64)>> {
    let mut v = Vec::new();
    for l in s.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let f: Vec<&str> = l.split_whitespace().collect();
        anyhow::ensure!(f.len() == 2, "bad limits line {l:?}");
        v.push((f[0].to_string(), f[1].parse()?));
    }
    Ok(v)
}

/// The value of `key` in parsed limits.
pub fn limit(limits: &[(String, u64)], key: &str) -> Option<u64> {
    limits.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
}

/// Reads and parses [`LIMITS_PATH`].
pub fn read_limits() -> anyhow::Result<Vec<(String, u64)>> {
    crate::ensure_debugfs();
    parse_limits(&std::fs::read_to_string(LIMITS_PATH)?)
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

/// Fills page `i` of `[base, base + n pages)` with a pattern of `seed`
/// and `i` (every 8-byte word distinct within the page).
///
/// # Safety
/// The range must be writable.
pub unsafe fn fill_pattern(base: *mut u8, first_page: usize, n: usize, seed: u64) {
    for i in first_page..first_page + n {
        let p = base.wrapping_add(i * PAGE_SIZE) as *mut u64;
        for w in 0..PAGE_SIZE / 8 {
            // SAFETY: inside the caller's writable range.
            unsafe { p.add(w).write_volatile(pattern_word(seed, i, w)) };
        }
    }
}

/// The word [`fill_pattern`] puts at word `w` of page `i`.
pub fn pattern_word(seed: u64, page: usize, w: usize) -> u64 {
    let x = seed ^ ((page as u64) << 20) ^ w as u64;
    x.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1
}

/// Checks pages `first_page .. first_page + n` against [`fill_pattern`];
/// the first mismatch as text.
///
/// # Safety
/// The range must be readable.
pub unsafe fn check_pattern(
    base: *const u8,
    first_page: usize,
    n: usize,
    seed: u64,
) -> Result<(), String> {
    for i in first_page..first_page + n {
        let p = base.wrapping_add(i * PAGE_SIZE) as *const u64;
        for w in 0..PAGE_SIZE / 8 {
            // SAFETY: inside the caller's readable range.
            let got = unsafe { p.add(w).read_volatile() };
            let want = pattern_word(seed, i, w);
            if got != want {
                return Err(format!(
                    "page {i} word {w}: {got:#018x}, expected {want:#018x}"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse() {
        let l = parse_limits(
            "file_pages 262144\nfile_gigantic 64\nglobal_pages 2000000\nheld_pages 0\n",
        )
        .unwrap();
        assert_eq!(limit(&l, "file_pages"), Some(262144));
        assert_eq!(limit(&l, "held_pages"), Some(0));
        assert_eq!(limit(&l, "nope"), None);
        assert!(parse_limits("file_pages\n").is_err());
        assert!(parse_limits("file_pages x\n").is_err());
    }

    #[test]
    fn meminfo_parse() {
        let s = "Node 0 MemTotal:       8169644 kB\nNode 0 MemFree:        7000000 kB\n";
        assert_eq!(parse_node_meminfo(s, "MemFree"), Some(7_000_000));
        assert_eq!(parse_node_meminfo(s, "MemTotal"), Some(8_169_644));
        assert_eq!(parse_node_meminfo(s, "Shmem"), None);
    }

    #[test]
    fn zoneinfo_pcp() {
        let s = "Node 0, zone      DMA\n  pages free     3840\n  pagesets\n    cpu: 0\n              count: 5\n              high:  6\n    cpu: 1\n              count: 7\n\
                 Node 0, zone   Normal\n  pagesets\n    cpu: 0\n              count: 100\n\
                 Node 1, zone   Normal\n  pagesets\n    cpu: 0\n              count: 1000\n";
        assert_eq!(parse_zoneinfo_pcp_pages(s, 0), 112);
        assert_eq!(parse_zoneinfo_pcp_pages(s, 1), 1000);
        assert_eq!(parse_zoneinfo_pcp_pages(s, 2), 0);
        if std::path::Path::new("/sys/devices/system/node/node0/meminfo").exists() {
            assert!(node_free_kb(0).unwrap() >= node_memfree_kb(0).unwrap());
        }
    }

    #[test]
    fn smaps_parse() {
        let s = "7f0000000000-7f0000004000 rw-s 00000000 00:05 12 /dev/tierkit\n\
                 Size:                 16 kB\n\
                 VmFlags: rd wr sh mr mw me ms dd mm \n\
                 7f0000004000-7f0000005000 rw-p 00000000 00:00 0 \n\
                 VmFlags: rd wr mr mw me ac \n";
        let f = parse_smaps_vmflags(s, 0x7f00_0000_1000).unwrap();
        assert!(f.iter().any(|x| x == "dd"));
        let g = parse_smaps_vmflags(s, 0x7f00_0000_4000).unwrap();
        assert!(!g.iter().any(|x| x == "dd"));
        assert_eq!(parse_smaps_vmflags(s, 0x1000), None);
    }

    #[test]
    fn fork_and_signals() {
        assert_eq!(fork_run(|| 7).unwrap(), Exit::Code(7));
        let e = fork_run(|| {
            // SAFETY: deliberately faults in the child.
            unsafe { std::ptr::null_mut::<u8>().write_volatile(1) };
            0
        })
        .unwrap();
        assert_eq!(e, Exit::Signal(libc::SIGSEGV));
    }

    #[test]
    fn fork_within_kills_a_child_that_runs_past_the_bound() {
        let t0 = std::time::Instant::now();
        let e = fork_run_within(std::time::Duration::from_millis(200), || loop {
            sleep_ms(1000);
        })
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(t0.elapsed() < std::time::Duration::from_secs(5));
        let quick = fork_run_within(std::time::Duration::from_secs(30), || 4).unwrap();
        assert_eq!(quick, Exit::Code(4));
    }

    #[test]
    fn synced_kill() {
        let mut s = spawn_synced(|ready| {
            ready();
            loop {
                sleep_ms(1000);
            }
        })
        .unwrap();
        assert_eq!(s.poll().unwrap(), None);
        let (e, dt) = s.kill_and_reap().unwrap();
        assert_eq!(e, Exit::Signal(libc::SIGKILL));
        assert!(dt < 5_000_000_000);
        assert!(spawn_synced(|_| 3).is_err());
    }

    #[test]
    fn pattern_roundtrip_and_proc_mem() {
        let p = mmap_raw(
            2 * PAGE_SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
        .unwrap();
        // SAFETY: our fresh mapping.
        unsafe {
            fill_pattern(p, 0, 2, 5);
            assert!(check_pattern(p, 0, 2, 5).is_ok());
            assert!(check_pattern(p, 0, 2, 6).is_err());
        }
        let mut b = [0u8; 16];
        proc_mem_read(p as usize, &mut b).unwrap();
        assert_eq!(
            u64::from_ne_bytes(b[..8].try_into().unwrap()),
            pattern_word(5, 0, 0)
        );
        proc_mem_write(p as usize, &[0u8; 8]).unwrap();
        // SAFETY: in bounds.
        assert_eq!(unsafe { (p as *const u64).read_volatile() }, 0);
        let v = vmsplice_read(p as usize + PAGE_SIZE, PAGE_SIZE).unwrap();
        assert_eq!(v.len(), PAGE_SIZE);
        assert_eq!(
            u64::from_ne_bytes(v[..8].try_into().unwrap()),
            pattern_word(5, 1, 0)
        );
        assert!(pagemap_pfn(p as usize).unwrap().is_some());
        assert!(smaps_vmflags(p as usize).is_some());
        // SAFETY: ours, not used afterwards.
        unsafe { munmap(p, 2 * PAGE_SIZE).unwrap() };
    }
}
