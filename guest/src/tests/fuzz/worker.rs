//! A fuzz worker: its mappings' arena, its state and results, the
//! bookkeeping of each call, the argument pointers it draws, and its loop
//! ([`Worker`]'s `run`); the calls themselves are in the sibling files.

use super::*;

pub(super) const OWN_FDS: usize = 4;
pub(super) const MAP_SLOTS: usize = 8;
pub(super) const PAGE: usize = 4096;
pub(super) const GIB: usize = 1 << 30;

/// Where an argument pointer points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ArgKind {
    /// Readable and writable, the struct in it.
    Valid,
    /// Readable only: the call may take effect, the write-back fails.
    ReadOnly,
    /// Nothing readable: the call must fail with EFAULT.
    Fault,
}

/// A worker's memory for arguments: `rw` (two pages, then a PROT_NONE
/// guard page), `ro` (read-only, holding plausible structs), `none`
/// (PROT_NONE), and a large buffer for long writes.
pub(super) struct Arena {
    pub(super) rw: *mut u8,
    pub(super) ro: *mut u8,
    pub(super) none: *mut u8,
    pub(super) big: Vec<u8>,
    pub(super) pipe: [i32; 2],
    pub(super) procmem: i32,
    /// `/dev/ram0` opened `O_DIRECT` (-1 where the kernel has no brd).
    pub(super) ramdisk: i32,
    /// References to mapped pages kept past the calls that made them (a
    /// pipe left undrained, an io_uring with registered buffers), so that
    /// they may outlive their mappings and files; at most [`KEPT_MAX`].
    pub(super) kept: std::collections::VecDeque<Kept>,
}

/// What [`Arena::kept`] keeps.
pub(super) enum Kept {
    /// A pipe's read and write ends, with vmspliced pages in it.
    Pipe([i32; 2]),
    /// A ring with registered buffers.
    Ring { _ring: Box<io_uring::IoUring> },
}

/// Pipes and rings a worker keeps at once (the oldest goes first).
pub(super) const KEPT_MAX: usize = 4;

impl Drop for Kept {
    fn drop(&mut self) {
        if let Kept::Pipe(p) = self {
            // SAFETY: our own pipe's fds.
            unsafe {
                libc::close(p[0]);
                libc::close(p[1]);
            }
        }
    }
}

impl Arena {
    pub(super) fn new(env: &Env) -> io::Result<Arena> {
        let map = |len: usize| -> io::Result<*mut u8> {
            // SAFETY: a fresh private anonymous mapping.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                Err(io::Error::last_os_error())
            } else {
                Ok(p as *mut u8)
            }
        };
        let rw = map(3 * PAGE)?;
        let ro = map(PAGE)?;
        let none = map(PAGE)?;
        // The ro page: a valid policy at 0, a task-next at 1024, a bulk at
        // 1536 (ends before 2048+...), a gigantic query at 2560, an invalid
        // bench at 3072; the rest random.
        // SAFETY: `ro` is a fresh writable page.
        unsafe {
            std::ptr::write_bytes(ro, 0x5a, PAGE);
            let p = TkPolicy {
                mode: 0,
                flags: 0,
                nodemask: env.mem_mask,
                weights: [0; 64],
            };
            std::ptr::write_unaligned(ro as *mut TkPolicy, p);
            let mut t: TkTaskNext = std::mem::zeroed();
            t.count = 8;
            std::ptr::write_unaligned(ro.add(1024) as *mut TkTaskNext, t);
            let mut b: TkBulk = std::mem::zeroed();
            b.nr_pages = 4;
            std::ptr::write_unaligned(ro.add(1536) as *mut TkBulk, b);
            let g = TkGigantic {
                flags: 1,
                ..Default::default()
            };
            std::ptr::write_unaligned(ro.add(2560) as *mut TkGigantic, g);
            let c = TkClearBench {
                nid: -1,
                nr_gigantic: 0,
                ..Default::default()
            };
            std::ptr::write_unaligned(ro.add(3072) as *mut TkClearBench, c);
        }
        let prot = |p: *mut u8, len: usize, prot: i32| -> io::Result<()> {
            // SAFETY: pages of our own fresh mappings.
            if unsafe { libc::mprotect(p as *mut c_void, len, prot) } != 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        // SAFETY: `rw` spans three pages.
        prot(unsafe { rw.add(2 * PAGE) }, PAGE, libc::PROT_NONE)?;
        prot(ro, PAGE, libc::PROT_READ)?;
        prot(none, PAGE, libc::PROT_NONE)?;
        let mut pipe = [0i32; 2];
        // SAFETY: writes two fds into `pipe`.
        if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let procmem = open_c("/proc/self/mem", libc::O_RDWR)?;
        let ramdisk = open_c(
            crate::tests::callers::RAM_DISK,
            libc::O_RDWR | libc::O_DIRECT,
        )
        .unwrap_or(-1);
        Ok(Arena {
            rw,
            ro,
            none,
            big: vec![0; 65536 + 16],
            pipe,
            procmem,
            ramdisk,
            kept: std::collections::VecDeque::new(),
        })
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: our own mappings and fds.
        unsafe {
            libc::munmap(self.rw as *mut c_void, 3 * PAGE);
            libc::munmap(self.ro as *mut c_void, PAGE);
            libc::munmap(self.none as *mut c_void, PAGE);
            libc::close(self.pipe[0]);
            libc::close(self.pipe[1]);
            libc::close(self.procmem);
            if self.ramdisk >= 0 {
                libc::close(self.ramdisk);
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Map {
    pub(super) addr: usize,
    pub(super) len: usize,
}

/// Op kinds, for the status board and the counts.
pub(super) const OPS: [&str; 8] = [
    "ioctl",
    "mmap",
    "mapop",
    "touch",
    "debugfs",
    "openclose",
    "misc",
    "big",
];

pub(super) struct Worker<'a> {
    pub(super) id: String,
    pub(super) index: usize,
    pub(super) env: &'a Env,
    pub(super) cfg: &'a Config,
    pub(super) shared: Vec<Fd>,
    pub(super) own: [Option<Fd>; OWN_FDS],
    pub(super) maps: [Option<Map>; MAP_SLOTS],
    pub(super) arena: Arena,
    pub(super) res: WorkerResult,
    pub(super) op_no: u64,
    pub(super) op_seed: u64,
    pub(super) big_left: u32,
    pub(super) board: &'a Board,
    /// The scheduled races this worker makes ([`Race::dealt`]), the
    /// calls after which the next is due, and how many it made.
    pub(super) races: Vec<Race>,
    pub(super) next_race: u64,
    pub(super) race_no: u32,
}

pub(super) fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

pub(super) fn res_str(r: Result<i64, i32>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => errno_str(e),
    }
}

pub(super) fn sys_res(r: i64) -> Result<i64, i32> {
    if r < 0 {
        Err(errno())
    } else {
        Ok(r)
    }
}

impl Worker<'_> {
    pub(super) fn record(&mut self, what: &str, r: Result<i64, i32>) {
        self.res.calls += 1;
        *self
            .res
            .results
            .entry(format!("{what} {}", res_str(r)))
            .or_default() += 1;
    }

    pub(super) fn fail(&mut self, what: String) {
        self.res.nr_failures += 1;
        if self.res.failures.len() < 20 {
            self.res.failures.push(format!(
                "worker {} op #{} (op seed {:#x}): {what}",
                self.id, self.op_no, self.op_seed
            ));
        }
    }

    pub(super) fn expect(&mut self, what: &str, r: Result<i64, i32>, want: i32) {
        if r != Err(want) {
            self.fail(format!(
                "{what} -> {}, expected {}",
                res_str(r),
                errno_str(want)
            ));
        }
    }

    pub(super) fn pick_fd(&mut self, o: &mut Rng) -> Fd {
        match o.weighted(&[30, 50, 10, 10]) {
            0 => {
                let k = o.below(OWN_FDS as u64) as usize;
                self.own[k].unwrap_or(Fd {
                    fd: -1,
                    kind: FdKind::Bad,
                    name: "empty own slot",
                })
            }
            1 => {
                // Shared device files (global and per process).
                let devs: Vec<Fd> = self
                    .shared
                    .iter()
                    .copied()
                    .filter(|f| matches!(f.kind, FdKind::Dev))
                    .collect();
                *o.pick(&devs)
            }
            2 => {
                let dbg: Vec<Fd> = self
                    .shared
                    .iter()
                    .copied()
                    .filter(|f| matches!(f.kind, FdKind::Debugfs(_)))
                    .collect();
                *o.pick(&dbg)
            }
            _ => Fd {
                fd: *o.pick(&[-1, 1 << 20, i32::MAX]),
                kind: FdKind::Bad,
                name: "bad fd",
            },
        }
    }

    /// An argument pointer for a call of `size` bytes; for `Valid` the
    /// caller writes the struct at the returned pointer.
    pub(super) fn gen_arg(
        &mut self,
        o: &mut Rng,
        known: Option<usize>,
        size: usize,
    ) -> (ArgKind, usize) {
        let rw = self.arena.rw as usize;
        match o.weighted(&[70, 8, 22]) {
            0 => {
                // Anywhere in the first page such that `size` bytes fit
                // before the guard page.
                let room = (2 * PAGE).saturating_sub(size.max(1));
                let off = (o.below(room as u64 / 8 + 1) * 8) as usize;
                (ArgKind::Valid, rw + off.min(room))
            }
            1 => {
                let off = match known {
                    Some(0) => 0,
                    Some(1) => 1536,
                    Some(2) => 1024,
                    Some(3) => 2560,
                    Some(4) => 3072,
                    _ => o.below(PAGE as u64 - 64) as usize,
                };
                let off = off.min(PAGE - size.min(PAGE));
                (ArgKind::ReadOnly, self.arena.ro as usize + off)
            }
            _ => {
                let p = match o.below(9) {
                    0 => 0,
                    1 => 0x800,
                    2 => 0xffff_8880_0000_0000 + (o.below(1 << 20) as usize) * PAGE,
                    3 => 0xffff_ffff_8100_0000,
                    4 => 0x8000_0000_0000_0000 | (o.next_u64() as usize & 0x7fff_ffff_fff8),
                    5 => 0x0000_8000_0000_0000 - size.max(8) / 2,
                    6 => self.arena.none as usize + o.below(PAGE as u64 / 2) as usize,
                    7 => usize::MAX - 7,
                    // Straddles the end of `rw` into its guard page.
                    _ => rw + 2 * PAGE - o.range(1, size.max(2) as u64 - 1) as usize,
                };
                (ArgKind::Fault, p)
            }
        }
    }

    /// Makes calls until `quota` or `deadline`; the deadline moves out by
    /// the time each scheduled race takes (a GiB's first touch, a paced
    /// rebalance, an offline: minutes on emulated CXL memory under the
    /// debug kernel), so that the races never eat the calls' time.
    pub(super) fn run(&mut self, mut stream: Rng, quota: u64, mut deadline: Instant) {
        let t0 = Instant::now();
        let slot = self.board.slot(self.index);
        while self.res.calls < quota && Instant::now() < deadline {
            self.op_seed = stream.next_u64();
            // A race draws from its own stream, so that the random ops'
            // draws are the same with races or without.
            let raced = self.race_if_due(&mut Rng::new(self.op_seed ^ 0x7261_6365), quota);
            if !raced.is_zero() {
                deadline += raced;
                slot.race_ns
                    .fetch_add(raced.as_nanos() as u64, Ordering::Relaxed);
            }
            let mut o = Rng::new(self.op_seed);
            let mut kind = o.weighted(&[330, 150, 120, 50, 150, 120, 80]);
            if self.big_left > 0 && o.chance(1, 2000) {
                kind = 7;
            }
            slot.op_seed.store(self.op_seed, Ordering::Relaxed);
            slot.kind.store(kind as u64, Ordering::Relaxed);
            slot.since_ns
                .store(crate::linux::sys::monotonic_ns(), Ordering::Relaxed);
            slot.state.store(1, Ordering::Release);
            match kind {
                0 => self.op_ioctl(&mut o),
                1 => self.op_mmap(&mut o),
                2 => self.op_mapop(&mut o),
                3 => self.op_touch(&mut o),
                4 => self.op_debugfs(&mut o),
                5 => self.op_openclose(&mut o),
                6 => self.op_misc(&mut o),
                _ => self.op_big(&mut o),
            }
            slot.state.store(2, Ordering::Release);
            *self.res.by_op.entry(OPS[kind].to_string()).or_default() += 1;
            self.res.ops += 1;
            self.op_no += 1;
            slot.ops.store(self.op_no, Ordering::Relaxed);
        }
        // Leave nothing behind.
        for i in 0..MAP_SLOTS {
            if let Some(m) = self.maps[i].take() {
                self.unmap(m);
            }
        }
        for i in 0..OWN_FDS {
            if let Some(f) = self.own[i].take() {
                // SAFETY: an fd this worker opened.
                unsafe { libc::close(f.fd) };
            }
        }
        slot.state.store(3, Ordering::Release);
        self.res.seconds = t0.elapsed().as_secs_f64();
    }
}
