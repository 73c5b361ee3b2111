//! The kernel's other users of a page, applied to a region of a mapping:
//! each takes references to the region's pages the way a real caller does
//! and must give every one back. Used by `tk-test-gup`.
//!
//! | caller | kernel path |
//! |---|---|
//! | [`Caller::Vmsplice`] | `vmsplice(2)`: `iov_iter_extract_pages()`, GUP-fast, then slow GUP |
//! | [`Caller::ProcessVm`] | `process_vm_readv/writev(2)`: `pin_user_pages_remote()` |
//! | [`Caller::ProcMem`] | `/proc/self/mem`: `access_remote_vm()`, FOLL_FORCE |
//! | [`Caller::Ptrace`] | `PTRACE_PEEKDATA/POKEDATA` on a traced child: `ptrace_access_vm()` |
//! | [`Caller::ODirect`] | `O_DIRECT` write and read of `/dev/ram0`: FOLL_PIN (`bio_iov_iter_get_pages()`) |
//! | [`Caller::IoUring`] | io_uring registered buffers, `WRITE_FIXED`/`READ_FIXED`: FOLL_LONGTERM pins |
//! | [`Caller::CopyUser`] | `read(2)`/`write(2)` through a pipe: `copy_to/from_user()` |
//!
//! Each leaves the region holding the pattern [`Caller::run`] was given,
//! or says how it differs.

use crate::linux::sys::PAGE_SIZE;
use crate::linux::vma::{self, check_pattern, fill_pattern, Exit, Pipe};
use std::ffi::c_void;
use std::io;
use std::time::{Duration, Instant};

/// Block device for the O_DIRECT and io_uring callers (brd, CONFIG_BLK_DEV_RAM).
pub const RAM_DISK: &str = "/dev/ram0";

/// How long the io_uring caller may take before it counts as hung (a
/// FOLL_LONGTERM pin of a page the kernel cannot migrate out of
/// ZONE_MOVABLE retries forever in `__gup_longterm_locked()`).
pub const IO_URING_TIMEOUT: Duration = Duration::from_secs(60);

/// What [`Caller::run`] gives for io_uring on a tierkit mapping whose pages
/// may be in ZONE_MOVABLE: the kernel refuses the long-term writable pin
/// with `EFAULT` at once (Documentation/ABI/testing/dev-tierkit).
pub const LONGTERM_REFUSED: &str = "IORING_REGISTER_BUFFERS: EFAULT (long-term pin refused)";

/// Whether `pfn` lies in a ZONE_MOVABLE zone, from `/proc/zoneinfo`
/// (`start_pfn` and `spanned` of each `zone Movable`).
pub fn pfn_in_movable(pfn: u64) -> io::Result<bool> {
    let zi = std::fs::read_to_string("/proc/zoneinfo")?;
    Ok(movable_spans(&zi)
        .iter()
        .any(|&(start, n)| pfn >= start && pfn < start + n))
}

/// The `(start_pfn, spanned)` of every `zone Movable` in a zoneinfo text.
pub fn movable_spans(zoneinfo: &str) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let (mut in_movable, mut spanned) = (false, 0u64);
    for line in zoneinfo.lines() {
        let t = line.trim();
        if t.starts_with("Node ") {
            in_movable =
                t.ends_with("zone  Movable") || t.split_whitespace().last() == Some("Movable");
            spanned = 0;
        } else if in_movable {
            let mut w = t.split_whitespace();
            match (w.next(), w.next()) {
                (Some("spanned"), Some(v)) => spanned = v.parse().unwrap_or(0),
                (Some("start_pfn:"), Some(v)) => {
                    if let Ok(start) = v.parse() {
                        out.push((start, spanned));
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// Whether any node has ZONE_MOVABLE memory (a `zone Movable` whose
/// `managed` count is not 0 in `/proc/zoneinfo`): a 4 KiB tierkit mapping
/// made then refuses long-term writable pins, wherever its pages are
/// (a rebalance or an offline may move them there).
pub fn system_has_movable() -> io::Result<bool> {
    let zi = std::fs::read_to_string("/proc/zoneinfo")?;
    Ok(movable_managed(&zi) > 0)
}

/// The `managed` pages of every `zone Movable` of a zoneinfo text, summed.
pub fn movable_managed(zoneinfo: &str) -> u64 {
    let (mut in_movable, mut sum) = (false, 0u64);
    for line in zoneinfo.lines() {
        let t = line.trim();
        if t.starts_with("Node ") {
            in_movable = t.split_whitespace().last() == Some("Movable");
        } else if in_movable {
            let mut w = t.split_whitespace();
            if let (Some("managed"), Some(v)) = (w.next(), w.next()) {
                sum += v.parse::<u64>().unwrap_or(0);
            }
        }
    }
    sum
}

/// One way of taking references to user pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    Vmsplice,
    ProcessVm,
    ProcMem,
    Ptrace,
    ODirect,
    IoUring,
    CopyUser,
}

impl Caller {
    pub const ALL: [Caller; 7] = [
        Caller::Vmsplice,
        Caller::ProcessVm,
        Caller::ProcMem,
        Caller::Ptrace,
        Caller::ODirect,
        Caller::IoUring,
        Caller::CopyUser,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Caller::Vmsplice => "vmsplice",
            Caller::ProcessVm => "process_vm_readv/writev",
            Caller::ProcMem => "/proc/self/mem",
            Caller::Ptrace => "ptrace PEEKDATA/POKEDATA",
            Caller::ODirect => "O_DIRECT",
            Caller::IoUring => "io_uring fixed buffers",
            Caller::CopyUser => "read/write(2)",
        }
    }

    /// Applies the caller to `pages` pages at `base`, filled with the
    /// pattern `seed` first; on success the region holds that pattern
    /// again (callers that write put it back through the kernel path).
    /// `Err` says what went wrong; `Ok(Some(reason))` is a skip (the
    /// kernel lacks the feature).
    ///
    /// # Safety
    ///
    /// `base..base + pages * 4096` is a live, writable `MAP_SHARED`
    /// mapping of this process that nothing else uses meanwhile.
    pub unsafe fn run(
        self,
        base: *mut u8,
        pages: usize,
        seed: u64,
    ) -> Result<Option<String>, String> {
        let len = pages * PAGE_SIZE;
        // SAFETY: the caller's region (see the safety section).
        unsafe { fill_pattern(base, 0, pages, seed) };
        // SAFETY: as above.
        let check = || unsafe { check_pattern(base, 0, pages, seed) };
        // SAFETY: as above; `region` is only read while nothing writes.
        let region = || unsafe { std::slice::from_raw_parts(base, len) }.to_vec();
        let e = |what: &str, err: io::Error| {
            format!("{what}: {}", crate::linux::errno::errno_name(&err))
        };
        match self {
            Caller::Vmsplice => {
                let got = vma::vmsplice_read(base as usize, len).map_err(|x| e("vmsplice", x))?;
                if got != region() {
                    return Err(format!(
                        "vmsplice gave {} bytes that differ from the region",
                        got.len()
                    ));
                }
            }
            Caller::ProcessVm => {
                let got = match vma::process_vm_read_self(base as usize, len) {
                    Err(x) if x.raw_os_error() == Some(libc::ENOSYS) => {
                        return Ok(Some("no CONFIG_CROSS_MEMORY_ATTACH".into()))
                    }
                    r => r.map_err(|x| e("process_vm_readv", x))?,
                };
                if got != region() {
                    return Err("process_vm_readv read other bytes than the region".into());
                }
                // SAFETY: the caller's region.
                unsafe { fill_pattern(base, 0, pages, !seed) };
                process_vm_write_self(base as usize, &got)
                    .map_err(|x| e("process_vm_writev", x))?;
            }
            Caller::ProcMem => {
                let mut buf = vec![0u8; len];
                vma::proc_mem_read(base as usize, &mut buf)
                    .map_err(|x| e("pread /proc/self/mem", x))?;
                if buf != region() {
                    return Err("/proc/self/mem read other bytes than the region".into());
                }
                // SAFETY: the caller's region.
                unsafe { fill_pattern(base, 0, pages, !seed) };
                vma::proc_mem_write(base as usize, &buf)
                    .map_err(|x| e("pwrite /proc/self/mem", x))?;
            }
            Caller::Ptrace => ptrace_words(base, pages)?,
            Caller::ODirect => {
                let f = match open_ram_disk() {
                    Ok(f) => f,
                    Err(x) if x.raw_os_error() == Some(libc::ENOENT) => {
                        return Ok(Some(format!("no {RAM_DISK} (CONFIG_BLK_DEV_RAM)")))
                    }
                    Err(x) => return Err(e(RAM_DISK, x)),
                };
                use std::os::fd::AsRawFd;
                // SAFETY: the region is readable, `len` bytes.
                let n = unsafe { libc::pwrite(f.as_raw_fd(), base as *const c_void, len, 0) };
                if n != len as isize {
                    return Err(e("O_DIRECT pwrite", io::Error::last_os_error()));
                }
                // SAFETY: the caller's region.
                unsafe { fill_pattern(base, 0, pages, !seed) };
                // SAFETY: the region is writable, `len` bytes.
                let n = unsafe { libc::pread(f.as_raw_fd(), base as *mut c_void, len, 0) };
                if n != len as isize {
                    return Err(e("O_DIRECT pread", io::Error::last_os_error()));
                }
            }
            Caller::IoUring => return io_uring_in_child(base, pages, seed),
            Caller::CopyUser => {
                let p = Pipe::new().map_err(|x| e("pipe", x))?;
                let data = region();
                // SAFETY: the region is readable; the pipe holds 64 KiB.
                unsafe { vma::write_all_fd(p.wr, base, len.min(65536)) }
                    .map_err(|x| e("write(2) from the region", x))?;
                // SAFETY: the caller's region.
                unsafe { fill_pattern(base, 0, pages, !seed) };
                // SAFETY: writable region.
                unsafe { vma::read_exact_fd(p.rd, base, len.min(65536)) }
                    .map_err(|x| e("read(2) into the region", x))?;
                if len > 65536 {
                    // SAFETY: the rest of the region, writable.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            data[65536..].as_ptr(),
                            base.add(65536),
                            len - 65536,
                        )
                    };
                }
            }
        }
        check().map(|()| None)
    }
}

/// `process_vm_writev(2)` of `data` into our own `addr..`.
fn process_vm_write_self(addr: usize, data: &[u8]) -> io::Result<()> {
    let local = libc::iovec {
        iov_base: data.as_ptr() as *mut c_void,
        iov_len: data.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut c_void,
        iov_len: data.len(),
    };
    // SAFETY: the kernel reads `data` and writes our own mapping.
    let n = unsafe { libc::process_vm_writev(libc::getpid(), &local, 1, &remote, 1, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != data.len() {
        return Err(io::Error::other(format!(
            "short write: {n} of {}",
            data.len()
        )));
    }
    Ok(())
}

fn open_ram_disk() -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(RAM_DISK)
}

/// A traced child reads one word of every page with `PTRACE_PEEKDATA`
/// and writes it back inverted, then again as it was, with
/// `PTRACE_POKEDATA`: the mapping is shared, so both writes reach the
/// region's pages.
fn ptrace_words(base: *mut u8, pages: usize) -> Result<(), String> {
    vma::flush_stdio();
    // SAFETY: the child only stops itself and exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: plain syscalls in the child; it ends with _exit.
        unsafe {
            libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0);
            libc::raise(libc::SIGSTOP);
            libc::_exit(0);
        }
    }
    let mut status = 0;
    // SAFETY: our child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let res = (|| {
        if !libc::WIFSTOPPED(status) {
            return Err(format!("the child did not stop (status {status:#x})"));
        }
        for i in 0..pages {
            let addr = base as usize + i * PAGE_SIZE + 8 * (i % 512);
            // SAFETY: clear errno, then PEEKDATA of the traced, stopped child.
            let w = unsafe {
                *libc::__errno_location() = 0;
                libc::ptrace(libc::PTRACE_PEEKDATA, pid, addr, 0)
            };
            if w == -1 && io::Error::last_os_error().raw_os_error() != Some(0) {
                return Err(format!("PEEKDATA page {i}: {}", io::Error::last_os_error()));
            }
            // SAFETY: our readable mapping, the same pages the child sees.
            let here = unsafe { (addr as *const i64).read_volatile() };
            if w != here {
                return Err(format!(
                    "PEEKDATA page {i}: {w:#x}, the region has {here:#x}"
                ));
            }
            for v in [!w, w] {
                // SAFETY: POKEDATA into the traced, stopped child.
                if unsafe { libc::ptrace(libc::PTRACE_POKEDATA, pid, addr, v) } != 0 {
                    return Err(format!("POKEDATA page {i}: {}", io::Error::last_os_error()));
                }
                // SAFETY: as above.
                let here = unsafe { (addr as *const i64).read_volatile() };
                if here != v {
                    return Err(format!(
                        "POKEDATA page {i}: wrote {v:#x}, the region has {here:#x}"
                    ));
                }
            }
        }
        Ok(())
    })();
    // SAFETY: our child; SIGKILL ends a traced, stopped process.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let _ = vma::wait_exit(pid);
    res
}

/// io_uring in a child (so that a pin that never returns cannot hang the
/// test): register the region as a fixed buffer (FOLL_LONGTERM),
/// `WRITE_FIXED` it to the RAM disk with O_DIRECT, scribble over it,
/// `READ_FIXED` it back, unregister. The parent waits up to
/// [`IO_URING_TIMEOUT`].
fn io_uring_in_child(base: *mut u8, pages: usize, seed: u64) -> Result<Option<String>, String> {
    let addr = base as usize;
    let mut child = vma::spawn_synced(|ready| {
        ready();
        match io_uring_round_trip(addr as *mut u8, pages, seed) {
            Ok(()) => 0,
            Err((code, msg)) => {
                eprintln!("io_uring child: {msg}");
                code
            }
        }
    })
    .map_err(|e| format!("fork: {e}"))?;
    let t0 = Instant::now();
    loop {
        match child.poll().map_err(|e| e.to_string())? {
            Some(Exit::Code(0)) => return Ok(None),
            Some(Exit::Code(3)) => return Ok(Some(format!("no {RAM_DISK} (CONFIG_BLK_DEV_RAM)"))),
            Some(Exit::Code(4)) => return Ok(Some("no io_uring (CONFIG_IO_URING)".into())),
            Some(Exit::Code(5)) => return Err(LONGTERM_REFUSED.into()),
            Some(e) => {
                return Err(format!(
                    "the io_uring child ended: {e} (its stderr says why)"
                ))
            }
            None if t0.elapsed() > IO_URING_TIMEOUT => {
                let state = child.state();
                let _ = child.kill_and_reap();
                return Err(format!(
                    "no answer in {} s (child state {state:?}): a FOLL_LONGTERM pin that never returns",
                    IO_URING_TIMEOUT.as_secs()
                ));
            }
            None => vma::sleep_ms(20),
        }
    }
}

/// The child's work of [`io_uring_in_child`]: `Err((exit code, message))`.
fn io_uring_round_trip(base: *mut u8, pages: usize, seed: u64) -> Result<(), (i32, String)> {
    use io_uring::{opcode, types, IoUring};
    use std::os::fd::AsRawFd;
    let len = pages * PAGE_SIZE;
    let f = match open_ram_disk() {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Err((3, e.to_string())),
        Err(e) => return Err((1, format!("{RAM_DISK}: {e}"))),
    };
    let mut ring = match IoUring::new(4) {
        Ok(r) => r,
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => return Err((4, e.to_string())),
        Err(e) => return Err((1, format!("io_uring_setup: {e}"))),
    };
    let iov = libc::iovec {
        iov_base: base as *mut c_void,
        iov_len: len,
    };
    // SAFETY: the region stays mapped until the buffers are unregistered
    // (the ring dies with this child at the latest).
    unsafe { ring.submitter().register_buffers(&[iov]) }.map_err(|e| {
        let code = if e.raw_os_error() == Some(libc::EFAULT) {
            5
        } else {
            1
        };
        (code, format!("IORING_REGISTER_BUFFERS: {e}"))
    })?;
    let fd = types::Fd(f.as_raw_fd());
    let mut io = |write: bool| -> Result<(), (i32, String)> {
        let sqe = if write {
            opcode::WriteFixed::new(fd, base, len as u32, 0)
                .offset(0)
                .build()
        } else {
            opcode::ReadFixed::new(fd, base, len as u32, 0)
                .offset(0)
                .build()
        };
        // SAFETY: the buffer is registered and stays valid until the
        // completion, which is awaited right here.
        unsafe { ring.submission().push(&sqe) }.map_err(|e| (1, format!("push: {e}")))?;
        ring.submit_and_wait(1)
            .map_err(|e| (1, format!("io_uring_enter: {e}")))?;
        let cqe = ring
            .completion()
            .next()
            .ok_or((1, "no completion".to_string()))?;
        if cqe.result() != len as i32 {
            return Err((
                1,
                format!(
                    "{} result {}",
                    if write { "WRITE_FIXED" } else { "READ_FIXED" },
                    cqe.result()
                ),
            ));
        }
        Ok(())
    };
    io(true)?;
    // SAFETY: the region is this child's shared mapping, writable.
    unsafe { fill_pattern(base, 0, pages, !seed) };
    io(false)?;
    ring.submitter()
        .unregister_buffers()
        .map_err(|e| (1, format!("IORING_UNREGISTER_BUFFERS: {e}")))?;
    // SAFETY: readable region.
    unsafe { check_pattern(base, 0, pages, seed) }.map_err(|e| (2, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn movable_spans_of_zoneinfo() {
        let zi = "Node 0, zone   Normal\n  pages free     5\n        spanned  262144\n  start_pfn:           1048576\nNode 2, zone  Movable\n  pages free     9\n        spanned  1048576\n        present  1048576\n  start_pfn:           4194304\n";
        assert_eq!(movable_spans(zi), vec![(4194304, 1048576)]);
        assert!(
            movable_spans("Node 0, zone   Normal\n        spanned 5\n  start_pfn: 0\n").is_empty()
        );
    }

    #[test]
    fn movable_managed_of_zoneinfo() {
        let zi = "Node 0, zone   Normal\n        managed  7\nNode 0, zone  Movable\n        managed  0\nNode 2, zone  Movable\n        present  9\n        managed  8\n";
        assert_eq!(movable_managed(zi), 8);
        assert_eq!(
            movable_managed("Node 0, zone   Normal\n        managed  7\n"),
            0
        );
    }
}
