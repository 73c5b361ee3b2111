//! The calls on mappings: `mmap`, `munmap`/`mprotect`/`madvise`/
//! `mremap`/`msync`, reads and writes through the kernel, GUP, `fork` and
//! the GiB calls of worker 0.0.

use super::*;

impl Worker<'_> {
    pub(super) fn op_mmap(&mut self, o: &mut Rng) {
        let f = self.pick_fd(o);
        let len: usize = match o.weighted(&[55, 5, 5, 5, 15, 5, 4, 3, 3]) {
            0 => PAGE * o.range(1, 4) as usize,
            1 => 0,
            2 => 1 + o.below(PAGE as u64 - 1) as usize,
            3 => PAGE * o.range(5, 16) as usize + o.below(PAGE as u64) as usize,
            4 => PAGE * o.range(5, 16) as usize,
            5 => GIB + PAGE,
            6 => 128 * GIB,
            7 => 1 << 47,
            _ => usize::MAX - PAGE + 1,
        };
        let off: u64 = match o.weighted(&[55, 15, 6, 6, 6, 6, 6]) {
            0 => 0,
            1 => o.below(1 << 20) << 12,
            2 => 1 << 50,
            3 => 1 << 63,
            4 => o.next_u64() | 1,
            5 => !0xfff,
            _ => (o.below(64)) << 30,
        };
        let base = match o.weighted(&[70, 10, 10, 10]) {
            0 => libc::MAP_SHARED,
            1 => libc::MAP_PRIVATE,
            2 => libc::MAP_SHARED_VALIDATE,
            _ => (o.next_u64() as i32) & 0x3,
        };
        let mut flags = base;
        for (p, fl) in [
            (10, libc::MAP_POPULATE),
            (10, libc::MAP_NORESERVE),
            (5, libc::MAP_LOCKED),
            (5, libc::MAP_NONBLOCK),
            (3, libc::MAP_32BIT),
            (3, libc::MAP_HUGETLB),
            (3, 0x0800_0000), // an unknown flag (MAP_SHARED_VALIDATE refuses it)
        ] {
            if o.chance(p, 100) {
                flags |= fl;
            }
        }
        let prot = match o.weighted(&[70, 10, 10, 5, 5]) {
            0 => libc::PROT_READ | libc::PROT_WRITE,
            1 => libc::PROT_READ,
            2 => libc::PROT_NONE,
            3 => libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
            _ => o.next_u64() as i32 & 0x0300_000f,
        };
        let slot = o.below(MAP_SLOTS as u64) as usize;
        // SAFETY: never MAP_FIXED: the kernel picks a free address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                flags,
                f.fd,
                off as libc::off_t,
            )
        };
        let r = if p == libc::MAP_FAILED {
            Err(errno())
        } else {
            Ok(0)
        };
        self.record("mmap", r);
        let what = format!(
            "mmap(len {len:#x}, prot {prot:#x}, flags {flags:#x}, {} [{:?}], off {off:#x})",
            f.name, f.kind
        );
        if r.is_ok() {
            let m = Map {
                addr: p as usize,
                len,
            };
            if let Some(old) = self.maps[slot].replace(m) {
                self.unmap(old);
            }
            if base == libc::MAP_PRIVATE && matches!(f.kind, FdKind::Dev | FdKind::DevWo) {
                self.fail(format!("{what} succeeded: MAP_PRIVATE must be EINVAL"));
            }
            if len > GIB {
                self.fail(format!("{what} succeeded with more than 1 GiB"));
            }
        }
        // Length and offset are checked before the fd (mm/mmap.c), so a
        // bad fd is EBADF or one of those; never a mapping.
        if matches!(f.kind, FdKind::Bad | FdKind::DevPath) && r.is_ok() {
            self.fail(format!("{what} succeeded on a bad fd"));
        }
    }

    pub(super) fn unmap(&mut self, m: Map) {
        // SAFETY: a mapping this worker made and tracks.
        let r = sys_res(unsafe { libc::munmap(m.addr as *mut c_void, m.len) } as i64);
        self.record("munmap", r);
    }

    pub(super) fn op_mapop(&mut self, o: &mut Rng) {
        let slot = o.below(MAP_SLOTS as u64) as usize;
        let action = o.below(9);
        let k = o.range(1, 4) as usize;
        let advice = *o.pick(&[
            0, 1, 2, 3, 4, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 25, 102,
            103, 7777,
        ]);
        let prot = *o.pick(&[
            libc::PROT_NONE,
            libc::PROT_READ,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::PROT_READ | libc::PROT_EXEC,
            libc::PROT_WRITE,
            0x10,
        ]);
        let sync_flags = *o.pick(&[libc::MS_SYNC, libc::MS_ASYNC, libc::MS_INVALIDATE, 0, 7]);
        let Some(m) = self.maps[slot] else {
            return;
        };
        let pages = m.len.div_ceil(PAGE);
        // SAFETY (all below): each call is on this worker's own mapping
        // `m`, whose bookkeeping follows the result.
        match action {
            0 => {
                self.maps[slot] = None;
                self.unmap(m);
            }
            1 | 2 if pages > 1 => {
                let (a, keep) = if action == 1 {
                    (
                        m.addr,
                        Map {
                            addr: m.addr + PAGE,
                            len: (pages - 1) * PAGE,
                        },
                    )
                } else {
                    (
                        m.addr + (pages - 1) * PAGE,
                        Map {
                            addr: m.addr,
                            len: (pages - 1) * PAGE,
                        },
                    )
                };
                let r = sys_res(unsafe { libc::munmap(a as *mut c_void, PAGE) } as i64);
                self.record("munmap part", r);
                if r.is_ok() {
                    self.maps[slot] = Some(keep);
                }
            }
            3 => {
                let r =
                    sys_res(unsafe { libc::mprotect(m.addr as *mut c_void, m.len, prot) } as i64);
                self.record("mprotect", r);
            }
            4 | 5 => {
                let r =
                    sys_res(unsafe { libc::madvise(m.addr as *mut c_void, m.len, advice) } as i64);
                self.record(&format!("madvise {advice}"), r);
            }
            6 if pages > k => {
                let nl = (pages - k) * PAGE;
                let p = unsafe { libc::mremap(m.addr as *mut c_void, m.len, nl, 0) };
                let r = if p == libc::MAP_FAILED {
                    Err(errno())
                } else {
                    Ok(0)
                };
                self.record("mremap shrink", r);
                if r.is_ok() {
                    self.maps[slot] = Some(Map {
                        addr: p as usize,
                        len: nl,
                    });
                }
            }
            7 => {
                let nl = (pages + k) * PAGE;
                let p =
                    unsafe { libc::mremap(m.addr as *mut c_void, m.len, nl, libc::MREMAP_MAYMOVE) };
                let r = if p == libc::MAP_FAILED {
                    Err(errno())
                } else {
                    Ok(0)
                };
                self.record("mremap grow", r);
                if r.is_ok() {
                    self.maps[slot] = Some(Map {
                        addr: p as usize,
                        len: nl,
                    });
                }
            }
            _ => {
                let r = sys_res(
                    unsafe { libc::msync(m.addr as *mut c_void, m.len, sync_flags) } as i64,
                );
                self.record("msync", r);
            }
        }
    }

    /// Reads or writes a mapping through the kernel: a fault there is an
    /// error code, not a signal. Half of the calls take the pages the ways
    /// get_user_pages() callers do ([`Self::op_gup`]).
    pub(super) fn op_touch(&mut self, o: &mut Rng) {
        if o.below(2) == 0 {
            return self.op_gup(o);
        }
        let slot = o.below(MAP_SLOTS as u64) as usize;
        let how = o.below(4);
        let off = o.below(1 << 16) as usize;
        let n = o.range(1, 64) as usize;
        let Some(m) = self.maps[slot] else {
            return;
        };
        let addr = m.addr + off % m.len.max(1);
        let n = n.min(m.addr + m.len - addr).max(1);
        let rw = self.arena.rw;
        // SAFETY (all below): the kernel reads or writes `n` bytes at
        // `addr` in our own mapping (checked by the kernel) and at `rw`
        // (our arena, at least a page).
        let r = match how {
            0 => {
                let r = sys_res(
                    unsafe { libc::write(self.arena.pipe[1], addr as *const c_void, n) } as i64,
                );
                unsafe { libc::read(self.arena.pipe[0], rw as *mut c_void, PAGE) };
                r
            }
            1 => sys_res(unsafe {
                libc::pread(self.arena.procmem, rw as *mut c_void, n, addr as i64)
            } as i64),
            2 => sys_res(unsafe {
                libc::pwrite(self.arena.procmem, rw as *const c_void, n, addr as i64)
            } as i64),
            _ => {
                let local = libc::iovec {
                    iov_base: rw as *mut c_void,
                    iov_len: n,
                };
                let remote = libc::iovec {
                    iov_base: addr as *mut c_void,
                    iov_len: n,
                };
                sys_res(
                    unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) }
                        as i64,
                )
            }
        };
        self.record(&format!("touch {how}"), r);
    }

    /// Up to 16 pages of a mapping (page aligned, maybe past its end)
    /// through a caller that takes references to them: vmsplice (FOLL_GET)
    /// and draining the pipe, process_vm_writev, O_DIRECT write and read
    /// of `/dev/ram0` (FOLL_PIN), io_uring buffer registration
    /// (FOLL_LONGTERM); or a new pipe or ring that keeps its references
    /// (kept in the arena, the oldest of [`KEPT_MAX`] let go) while the
    /// mapping and its file may go: the pages then outlive their file as
    /// tierkit's orphans. Every reference must come back: the run's end
    /// checks holdings, orphans and free memory.
    pub(super) fn op_gup(&mut self, o: &mut Rng) {
        let slot = o.below(MAP_SLOTS as u64) as usize;
        let Some(m) = self.maps[slot] else {
            return;
        };
        let how = o.below(7);
        let first = (m.addr + o.below(m.len.max(1) as u64) as usize) & !(PAGE - 1);
        let len = o.range(1, 16) as usize * PAGE;
        let rw = self.arena.rw;
        let iov = libc::iovec {
            iov_base: first as *mut c_void,
            iov_len: len,
        };
        // SAFETY (all below): the kernel reads or writes our own mapping
        // at `first` (checked by the kernel: EFAULT past its end), our
        // arena, or fds we own.
        let (name, r) = match how {
            0 => {
                let r = sys_res(unsafe { libc::vmsplice(self.arena.pipe[1], &iov, 1, 0) } as i64);
                let big = self.arena.big.as_mut_ptr();
                while unsafe { libc::read(self.arena.pipe[0], big as *mut c_void, 65536) } > 0 {}
                ("gup vmsplice", r)
            }
            1 => {
                let local = libc::iovec {
                    iov_base: rw as *mut c_void,
                    iov_len: PAGE,
                };
                let remote = libc::iovec {
                    iov_base: first as *mut c_void,
                    iov_len: PAGE,
                };
                let r =
                    unsafe { libc::process_vm_writev(libc::getpid(), &local, 1, &remote, 1, 0) };
                ("gup process_vm_writev", sys_res(r as i64))
            }
            5 => return self.keep_pipe(&iov),
            6 => return self.keep_ring(iov),
            2 | 3 if self.arena.ramdisk < 0 => return,
            2 => {
                let off = o.below(16) as i64 * PAGE as i64;
                let r =
                    unsafe { libc::pwrite(self.arena.ramdisk, first as *const c_void, len, off) };
                ("gup O_DIRECT write", sys_res(r as i64))
            }
            3 => {
                let off = o.below(16) as i64 * PAGE as i64;
                let r = unsafe { libc::pread(self.arena.ramdisk, first as *mut c_void, len, off) };
                ("gup O_DIRECT read", sys_res(r as i64))
            }
            4 => {
                let Ok(ring) = io_uring::IoUring::new(2) else {
                    return;
                };
                // SAFETY: the buffer is unregistered right after.
                let r = match unsafe { ring.submitter().register_buffers(&[iov]) } {
                    Ok(()) => ring.submitter().unregister_buffers().map(|()| 0),
                    Err(e) => Err(e),
                };
                (
                    "gup io_uring register",
                    r.map_err(|e| e.raw_os_error().unwrap_or(0)),
                )
            }
            _ => return,
        };
        self.record(name, r);
    }

    /// Makes room in the arena's kept pipes and rings, then keeps `k`.
    pub(super) fn keep(&mut self, k: Kept) {
        while self.arena.kept.len() >= KEPT_MAX {
            self.arena.kept.pop_front();
        }
        self.arena.kept.push_back(k);
    }

    /// vmsplice `iov` into a new pipe that is kept undrained.
    fn keep_pipe(&mut self, iov: &libc::iovec) {
        let mut p = [0i32; 2];
        // SAFETY: writes two fds into `p`.
        if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return;
        }
        // SAFETY: the kernel reads our own mapping (EFAULT past its end).
        let r = sys_res(unsafe { libc::vmsplice(p[1], iov, 1, 0) } as i64);
        self.record("gup vmsplice kept", r);
        self.keep(Kept::Pipe(p));
    }

    /// Registers `iov` as a buffer of a new ring that is kept.
    fn keep_ring(&mut self, iov: libc::iovec) {
        let Ok(ring) = io_uring::IoUring::new(2) else {
            return;
        };
        // SAFETY: the ring is kept or dropped with its registration; the
        // kernel holds its own pins, whatever happens to the mapping.
        let r = unsafe { ring.submitter().register_buffers(&[iov]) };
        self.record(
            "gup io_uring register kept",
            r.map(|()| 0).map_err(|e| e.raw_os_error().unwrap_or(0)),
        );
        self.keep(Kept::Ring {
            _ring: Box::new(ring),
        });
    }

    /// fork(): the child inherits every mapping and file (copying the
    /// tierkit VMAs, `MADV_DONTFORK`/`WIPEONFORK` ones too), reads one
    /// mapping through the kernel, and exits, tearing its copies down.
    pub(super) fn op_fork(&mut self, m: Option<Map>) {
        let pipe_w = self.arena.pipe[1];
        // SAFETY: the child makes only async-signal-safe calls (write,
        // _exit), as required after fork in a multithreaded process.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            if let Some(m) = m {
                // SAFETY: a write from the inherited mapping; a fault is
                // EFAULT.
                unsafe { libc::write(pipe_w, m.addr as *const c_void, 8.min(m.len)) };
            }
            // SAFETY: leaving the child at once.
            unsafe { libc::_exit(0) };
        }
        let r = if pid < 0 { Err(errno()) } else { Ok(0) };
        self.record("fork", r);
        if pid > 0 {
            let mut st = 0;
            // SAFETY: waits for our own child.
            unsafe { libc::waitpid(pid, &mut st, 0) };
            // SAFETY: drains the pipe (non-blocking).
            unsafe { libc::read(self.arena.pipe[0], self.arena.rw as *mut c_void, PAGE) };
            if !(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0) {
                self.fail(format!("a forked child ended with status {st:#x}"));
            }
        }
    }

    /// A GiB-sized call (worker 0.0, budgeted): a gigantic mapping kept in
    /// a slot, or one benchmark range.
    pub(super) fn op_big(&mut self, o: &mut Rng) {
        let nid = *o.pick(&self.env.mem_nodes);
        let slot = o.below(MAP_SLOTS as u64) as usize;
        let kind = o.below(3);
        self.big_left -= 1;
        self.res.big_used += 1;
        if kind == 2 {
            return self.op_offline(o);
        }
        let t = match crate::abi::tk::Tierkit::open() {
            Ok(t) => t,
            Err(e) => {
                self.fail(format!("big: open: {e}"));
                return;
            }
        };
        if kind == 0 {
            let r = t
                .set_policy(crate::abi::tk::TK_MODE_INTERLEAVE, 1 << nid)
                .and_then(|_| {
                    t.set_gigantic(TkGigantic {
                        threads: 1,
                        placement: TK_PLACE_ANY,
                        ..Default::default()
                    })
                });
            if let Err(e) = r {
                self.fail(format!("big: gigantic mode on node {nid}: {e}"));
                return;
            }
            // SAFETY: a new shared mapping, no fixed address.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    GIB,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    t.fd(),
                    0,
                )
            };
            let r = if p == libc::MAP_FAILED {
                Err(errno())
            } else {
                Ok(0)
            };
            self.record("big mmap gigantic", r);
            match r {
                Ok(_) => {
                    if let Some(old) = self.maps[slot].replace(Map {
                        addr: p as usize,
                        len: GIB,
                    }) {
                        self.unmap(old);
                    }
                }
                Err(libc::ENOMEM) => {}
                Err(e) => self.fail(format!(
                    "big: gigantic mmap on node {nid} -> {}",
                    errno_str(e)
                )),
            }
        } else {
            let r = t.clear_bench(crate::abi::tk::clear_bench_arg(
                nid as i32,
                1,
                TK_PLACE_ANY,
                1,
            ));
            let r2 = r
                .as_ref()
                .map(|_| 0)
                .map_err(|e| e.raw_os_error().unwrap_or(0));
            self.record("big CLEAR_BENCH", r2);
            match r {
                Ok(b) if b.bytes != 1 << 30 => {
                    self.fail(format!("big: CLEAR_BENCH bytes {}", b.bytes))
                }
                Err(e) if e.raw_os_error() != Some(libc::ENOMEM) => {
                    self.fail(format!("big: CLEAR_BENCH on node {nid} -> {e}"))
                }
                _ => {}
            }
        }
    }

    /// An offline of a random online ZONE_MOVABLE block (worker 0.0,
    /// budgeted), racing the other workers' mmaps, bulk calls, pipes and
    /// rings: it must end within 20 s, done or refused (EBUSY, or EINTR
    /// and ENOMEM as `offline_pages()` answers), never spin; a block that
    /// went offline is onlined again at once.
    pub(super) fn op_offline(&mut self, o: &mut Rng) {
        use crate::linux::memblock::{
            block_state, block_zone, node_blocks, set_block_state, Outcome,
        };
        let blocks: Vec<u64> = self
            .env
            .mem_nodes
            .iter()
            .flat_map(|&n| node_blocks(n))
            .filter(|&b| {
                block_zone(b).as_deref() == Some("Movable")
                    && block_state(b).as_deref() == Some("online")
            })
            .collect();
        if blocks.is_empty() {
            return;
        }
        let b = *o.pick(&blocks);
        let limit = Duration::from_secs(20);
        let Ok(t) = set_block_state(b, "offline", limit) else {
            return;
        };
        let r = match t.outcome {
            Outcome::Done => Ok(0),
            Outcome::Failed(e) => Err(e),
            Outcome::TimedOut { .. } => Err(libc::ETIMEDOUT),
        };
        self.record("offline a movable block", r);
        match t.outcome {
            Outcome::Done => {
                let back = set_block_state(b, "online_movable", limit);
                if !back.is_ok_and(|t| t.outcome == Outcome::Done) {
                    self.fail(format!("offline race: memory{b} did not come online again"));
                }
            }
            Outcome::Failed(e) if [libc::EBUSY, libc::EINTR, libc::ENOMEM].contains(&e) => {}
            _ => self.fail(format!(
                "offline race: offline of memory{b}: {} after {:.1} s",
                t.outcome.describe(),
                t.elapsed.as_secs_f64()
            )),
        }
    }
}
