//! The cases of `tk-test-offline-held` where a kernel caller holds tierkit
//! pages in flight: an `O_DIRECT` read, `process_vm_readv(2)` and an
//! io_uring read, each kept in flight for as long as the test wants by a
//! page of its buffer whose first touch waits in userfaultfd; and
//! io_uring fixed buffers, which cannot hold a page in ZONE_MOVABLE (the
//! long-term pin is refused).
//!
//! The buffer is [`N`] pages of a 4 KiB tierkit mapping followed, at the
//! next address, by one anonymous page registered with userfaultfd
//! (`UFFDIO_REGISTER_MODE_MISSING`). The caller pins the tierkit pages
//! first (GUP-fast, or slow GUP in address order), then touches the
//! anonymous page and waits in `handle_userfault()` with the pins held,
//! until the test resolves the fault (`UFFDIO_ZEROPAGE`).

use super::{filled, goes_offline, orphaned_and_refused, orphans, wait_orphans, Filled};
use crate::linux::errno::errno_name;
use crate::linux::memblock::{blocks_of, pagemap_pfns};
use crate::linux::sys::{Mapping, PAGE_SIZE};
use crate::tests::block_offline::{fill_page, open_on, T};
use crate::tests::callers::RAM_DISK;
use std::ffi::c_void;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// Tierkit pages each caller holds.
pub const N: usize = 16;

/// `UFFDIO_API`: `_IOWR(0xAA, 0x3F, struct uffdio_api)` (24 bytes).
const UFFDIO_API: u64 = 0xc018_aa3f;
/// `UFFDIO_REGISTER`: `_IOWR(0xAA, 0x00, struct uffdio_register)` (32 bytes).
const UFFDIO_REGISTER: u64 = 0xc020_aa00;
/// `UFFDIO_ZEROPAGE`: `_IOWR(0xAA, 0x04, struct uffdio_zeropage)` (32 bytes).
const UFFDIO_ZEROPAGE: u64 = 0xc020_aa04;

/// Who holds the pages.
#[derive(Clone, Copy, Debug)]
pub enum Holder {
    /// `pread(2)` of `/dev/ram0` opened `O_DIRECT`: FOLL_PIN by
    /// `bio_iov_iter_get_pages()`.
    ODirect,
    /// `process_vm_readv(2)` of our own tierkit pages into the stalling
    /// page: FOLL_PIN by `pin_user_pages_remote()` across the copy.
    ProcessVm,
    /// An io_uring `IORING_OP_READ` of `/dev/ram0` opened `O_DIRECT`
    /// (not a fixed buffer): FOLL_PIN for the I/O.
    IoUring,
}

impl Holder {
    fn name(self) -> &'static str {
        match self {
            Holder::ODirect => "O_DIRECT in flight",
            Holder::ProcessVm => "process_vm_readv in flight",
            Holder::IoUring => "io_uring read in flight",
        }
    }
}

/// An ioctl on a userfaultfd with a `u64` array argument.
fn uffd_ioctl(fd: i32, req: u64, arg: &mut [u64]) -> io::Result<()> {
    // SAFETY: `arg` is the ioctl's struct, as many u64 as its size.
    if unsafe { libc::ioctl(fd, req as _, arg.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The buffer: [`N`] tierkit pages of a file, then at the next address
/// the stalling anonymous page, registered with a userfaultfd.
struct Buffer {
    /// The tierkit part, until [`Buffer::unmap_tierkit`].
    tierkit: Option<Mapping>,
    stall: Mapping,
    uffd: OwnedFd,
}

impl Buffer {
    fn new(tk_fd: i32) -> io::Result<Buffer> {
        // A free range of N + 1 pages (single-threaded: it stays free).
        let base = Mapping::anon((N + 1) * PAGE_SIZE)?.addr();
        let fixed = libc::MAP_FIXED_NOREPLACE;
        let tierkit = Mapping::new_at(base, N * PAGE_SIZE, libc::MAP_SHARED | fixed, tk_fd, 0)?;
        let stall = Mapping::new_at(
            base + N * PAGE_SIZE,
            PAGE_SIZE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | fixed,
            -1,
            0,
        )?;
        // SAFETY: plain syscall; O_CLOEXEC, kernel faults handled too (no
        // UFFD_USER_MODE_ONLY: the callers fault the page from the kernel).
        let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC) } as i32;
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh fd of ours.
        let uffd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut api = [0xAAu64, 0, 0];
        uffd_ioctl(fd, UFFDIO_API, &mut api)?;
        // struct uffdio_register { start, len, mode (MISSING), ioctls }.
        let mut reg = [stall.addr() as u64, PAGE_SIZE as u64, 1, 0];
        uffd_ioctl(fd, UFFDIO_REGISTER, &mut reg)?;
        Ok(Buffer {
            tierkit: Some(tierkit),
            stall,
            uffd,
        })
    }

    fn stall_page(&self) -> usize {
        self.stall.addr()
    }

    /// Waits up to `limit` for the caller's fault on the stalling page
    /// (a `uffd_msg` to read): from then on it holds its pins.
    fn wait_stalled(&self, limit: Duration) -> io::Result<bool> {
        let mut p = libc::pollfd {
            fd: self.uffd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd.
        let n = unsafe { libc::poll(&mut p, 1, limit.as_millis() as i32) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Ok(false);
        }
        let mut msg = [0u8; 32];
        // SAFETY: reads one uffd_msg (32 bytes) into `msg`.
        let r = unsafe { libc::read(self.uffd.as_raw_fd(), msg.as_mut_ptr().cast(), 32) };
        Ok(r == 32)
    }

    /// Maps the zero page at the stalling page and wakes the caller.
    fn resolve(&self) -> io::Result<()> {
        // struct uffdio_zeropage { start, len, mode, zeropage }.
        let mut z = [self.stall_page() as u64, PAGE_SIZE as u64, 0, 0];
        uffd_ioctl(self.uffd.as_raw_fd(), UFFDIO_ZEROPAGE, &mut z)
    }

    /// Unmaps the tierkit part (the caller's pins stay).
    fn unmap_tierkit(&mut self) {
        self.tierkit = None;
    }
}

/// `/dev/ram0` for reading with `O_DIRECT`.
fn ram_disk() -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(RAM_DISK)
}

/// The holder's call over `base..base + (N + 1) pages`; `Ok(bytes)`.
fn hold(h: Holder, base: usize) -> Result<usize, String> {
    let len = (N + 1) * PAGE_SIZE;
    match h {
        Holder::ODirect => {
            let f = ram_disk().map_err(|e| format!("{RAM_DISK}: {e}"))?;
            // SAFETY: `base` is our buffer of `len` bytes, writable.
            let n = unsafe { libc::pread(f.as_raw_fd(), base as *mut c_void, len, 0) };
            usize::try_from(n).map_err(|_| format!("pread: {}", io::Error::last_os_error()))
        }
        Holder::ProcessVm => {
            // Read the tierkit pages (remote, pinned) into the stalling
            // page first, then the rest of nothing: one page's copy.
            let local = libc::iovec {
                iov_base: (base + N * PAGE_SIZE) as *mut c_void,
                iov_len: PAGE_SIZE,
            };
            let remote = libc::iovec {
                iov_base: base as *mut c_void,
                iov_len: N * PAGE_SIZE,
            };
            // SAFETY: our own mappings.
            let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
            usize::try_from(n)
                .map_err(|_| format!("process_vm_readv: {}", io::Error::last_os_error()))
        }
        Holder::IoUring => {
            use io_uring::{opcode, types, IoUring};
            let f = ram_disk().map_err(|e| format!("{RAM_DISK}: {e}"))?;
            let mut ring = IoUring::new(2).map_err(|e| format!("io_uring_setup: {e}"))?;
            let sqe = opcode::Read::new(types::Fd(f.as_raw_fd()), base as *mut u8, len as u32)
                .offset(0)
                .build();
            // SAFETY: the buffer lives until the completion, awaited here.
            unsafe { ring.submission().push(&sqe) }.map_err(|e| format!("push: {e}"))?;
            ring.submit_and_wait(1)
                .map_err(|e| format!("io_uring_enter: {e}"))?;
            let res = ring.completion().next().ok_or("no completion")?.result();
            usize::try_from(res).map_err(|_| format!("IORING_OP_READ: errno {}", -res))
        }
    }
}

/// The bytes the holder's call must return.
fn expected(h: Holder) -> usize {
    match h {
        Holder::ProcessVm => PAGE_SIZE,
        _ => (N + 1) * PAGE_SIZE,
    }
}

/// `h` holds [`N`] tierkit pages on node `nid` in flight; the file is
/// unmapped and closed: the pages are orphans, an offline of their blocks
/// is EBUSY at once; once the call completes they are freed and the
/// blocks go offline.
pub fn in_flight_case(t: &mut T, nid: u32, h: Holder) {
    let what = h.name();
    let Some(tk) = open_on(&mut t.r, what, nid) else {
        return;
    };
    let mut buf = match Buffer::new(tk.fd()) {
        Ok(b) => b,
        Err(e) => {
            t.r.fail(
                &format!("{what}: {N} tierkit pages, then a userfaultfd page"),
                errno_name(&e),
            );
            return;
        }
    };
    let Some(base) = buf.tierkit.as_ref().map(|m| {
        for i in 0..N {
            fill_page(m, i);
        }
        m.addr()
    }) else {
        return;
    };
    let pfns = match pagemap_pfns(base, N) {
        Ok(p) if p.iter().all(Option::is_some) => p,
        other => {
            t.r.fail(&format!("{what}: pfns of the buffer"), format!("{other:?}"));
            return;
        }
    };
    let blocks = blocks_of(&pfns, t.block_bytes);
    let caller = std::thread::spawn(move || hold(h, base));
    let stalled = buf.wait_stalled(Duration::from_secs(10));
    let held = t.r.check_note(
        &format!("{what}: the call pins the {N} tierkit pages and waits in userfaultfd"),
        match stalled {
            Ok(true) => Ok("fault on the stalling page".to_string()),
            Ok(false) => Err("no fault within 10 s".to_string()),
            Err(e) => Err(e.to_string()),
        },
    );
    let before = orphans();
    buf.unmap_tierkit();
    drop(tk);
    if held {
        orphaned_and_refused(t, what, before, N, &blocks);
    }
    let resolved = buf.resolve();
    let done = caller
        .join()
        .map_err(|_| "the caller thread panicked".to_string())
        .and_then(|r| r);
    t.r.check_note(
        &format!("{what}: resolved, the call completes"),
        resolved
            .map_err(|e| format!("UFFDIO_ZEROPAGE: {e}"))
            .and(done)
            .and_then(|n| {
                if n == expected(h) {
                    Ok(format!("{n} bytes"))
                } else {
                    Err(format!("{n} bytes, expected {}", expected(h)))
                }
            }),
    );
    drop(buf);
    t.r.check_note(
        &format!("{what}: the call done, the orphans are freed"),
        wait_orphans(0, Duration::from_secs(5)).and_then(|n| {
            if n == 0 {
                Ok("orphans 0".to_string())
            } else {
                Err(format!("orphans {n} after 5 s"))
            }
        }),
    );
    goes_offline(t, what, &blocks);
}

/// io_uring fixed buffers over [`N`] tierkit pages on node `nid` (in
/// ZONE_MOVABLE): `IORING_REGISTER_BUFFERS` takes a long-term writable
/// pin, which tierkit's vmas refuse there (`EFAULT` at once), so no
/// registered buffer ever holds such a page; after `munmap` and close no
/// orphan is left and the blocks go offline.
pub fn fixed_buffer_case(t: &mut T, nid: u32) {
    const WHAT: &str = "io_uring fixed buffer";
    let Some(Filled { tk, m, blocks }) = filled(t, WHAT, nid, N) else {
        return;
    };
    let before = orphans();
    let reg = (|| -> Result<(), io::Error> {
        let ring = io_uring::IoUring::new(2)?;
        let iov = libc::iovec {
            iov_base: m.as_ptr().cast(),
            iov_len: m.len(),
        };
        // SAFETY: the mapping outlives the ring (dropped first, below).
        unsafe { ring.submitter().register_buffers(&[iov]) }?;
        drop(ring);
        Ok(())
    })();
    t.r.check_note(
        &format!("{WHAT}: IORING_REGISTER_BUFFERS over pages in ZONE_MOVABLE is EFAULT"),
        match reg {
            Err(e) if e.raw_os_error() == Some(libc::EFAULT) => Ok("EFAULT".to_string()),
            Err(e) => Err(errno_name(&e)),
            Ok(()) => Err("registered: a long-term pin of pages in ZONE_MOVABLE".to_string()),
        },
    );
    drop(m);
    drop(tk);
    t.r.check_note(
        &format!("{WHAT}: after munmap and close no page is left held"),
        before.and_then(|b| {
            let now = wait_orphans(b, Duration::from_secs(5))?;
            if now == b {
                Ok(format!("orphans {now}"))
            } else {
                Err(format!("orphans {b} -> {now}"))
            }
        }),
    );
    goes_offline(t, WHAT, &blocks);
}
