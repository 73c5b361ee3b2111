//! Processes and threads: the status board shared across `fork`, a
//! process's workers, and [`run`], which forks them and gathers the
//! outcome.

use super::*;

pub(super) const MAX_WORKERS: usize = 64;

#[repr(C)]
pub(super) struct Slot {
    pub(super) ops: AtomicU64,
    pub(super) op_seed: AtomicU64,
    pub(super) kind: AtomicU64,
    pub(super) since_ns: AtomicU64,
    /// Nanoseconds the worker's scheduled races took so far: its calls'
    /// deadline, and the bound past which it counts as hung, move out by
    /// as much.
    pub(super) race_ns: AtomicU64,
    /// 0 not started, 1 inside an op, 2 between ops, 3 done.
    pub(super) state: AtomicU64,
}

pub(super) struct Board {
    pub(super) slots: *mut Slot,
}

// SAFETY: the board is plain atomics in a shared anonymous mapping.
unsafe impl Send for Board {}
// SAFETY: as above: every access is through an atomic.
unsafe impl Sync for Board {}

impl Board {
    pub(super) fn new() -> io::Result<Board> {
        let len = MAX_WORKERS * std::mem::size_of::<Slot>();
        // SAFETY: a fresh anonymous shared mapping, zeroed by the kernel;
        // zero is a valid `AtomicU64`.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Board {
            slots: p as *mut Slot,
        })
    }

    pub(super) fn slot(&self, i: usize) -> &Slot {
        assert!(i < MAX_WORKERS);
        // SAFETY: `i` is in bounds of the mapping, which lives as long as
        // `self` (never unmapped: the process ends first).
        unsafe { &*self.slots.add(i) }
    }
}

/// Runs workers `p.0 .. p.(threads-1)` in this process.
#[allow(clippy::too_many_arguments)]
pub(super) fn proc_main(
    cfg: &Config,
    env: &Env,
    board: &Board,
    global: &SharedFds,
    p: u32,
    threads: &[u32],
    quota: u64,
    deadline: Instant,
) -> Vec<WorkerResult> {
    let mut shared = global.fds.clone();
    let proc_dev = open_c(crate::abi::tk::DEV_PATH, libc::O_RDWR).ok();
    if let Some(fd) = proc_dev {
        shared.push(Fd {
            fd,
            kind: FdKind::Dev,
            name: "process dev",
        });
    }
    let results: Vec<WorkerResult> = std::thread::scope(|s| {
        let handles: Vec<_> = threads
            .iter()
            .map(|&t| {
                let shared = shared.clone();
                s.spawn(move || {
                    let id = format!("{p}.{t}");
                    let arena = match Arena::new(env) {
                        Ok(a) => a,
                        Err(e) => {
                            return WorkerResult {
                                worker: id.clone(),
                                failures: vec![format!("worker {id}: arena: {e}")],
                                nr_failures: 1,
                                ..Default::default()
                            }
                        }
                    };
                    let index = if cfg.only.is_some() {
                        0
                    } else {
                        (p * cfg.threads + t) as usize % MAX_WORKERS
                    };
                    let mut w = Worker {
                        id: id.clone(),
                        index,
                        env,
                        cfg,
                        shared,
                        own: [None; OWN_FDS],
                        maps: [None; MAP_SLOTS],
                        arena,
                        res: WorkerResult {
                            worker: id,
                            ..Default::default()
                        },
                        op_no: 0,
                        op_seed: 0,
                        big_left: if p == 0 && t == 0 { cfg.big } else { 0 },
                        board,
                        races: Race::dealt(
                            env,
                            (p * cfg.threads + t) as usize,
                            (cfg.procs * cfg.threads) as usize,
                        ),
                        next_race: 100,
                        race_no: 0,
                    };
                    w.run(Rng::new(worker_seed(cfg.seed, p, t)), quota, deadline);
                    w.res
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| WorkerResult {
                    worker: format!("{p}.?"),
                    failures: vec![format!("a worker thread of process {p} panicked")],
                    nr_failures: 1,
                    ..Default::default()
                })
            })
            .collect()
    });
    if let Some(fd) = proc_dev {
        // SAFETY: opened above.
        unsafe { libc::close(fd) };
    }
    results
}

/// Runs the fuzzer: forks `procs` processes of `threads` workers (or runs
/// the one worker of `only` in this process) and collects their results.
/// Returns when every worker is done, or at the deadline plus a grace
/// period, when it reports the workers still busy and kills them.
pub fn run(cfg: &Config, env: &Env) -> io::Result<Outcome> {
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(cfg.seconds);
    let board = Board::new()?;
    let global = open_global(env)?;
    // A write to a pipe whose reader is gone is EPIPE, not death.
    // SAFETY: setting a signal disposition.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let mut out = Outcome::default();
    // Each worker's share of the calls; with --only, the share it has in
    // the full run, so that it makes the same calls.
    let quota = cfg
        .calls
        .div_ceil(u64::from(cfg.procs * cfg.threads).max(1));
    if let Some((p, t)) = cfg.only {
        let mut res = proc_main(cfg, env, &board, &global, p, &[t], quota, deadline);
        out.workers.append(&mut res);
        close_all(&global);
        out.seconds = t0.elapsed().as_secs_f64();
        return Ok(out);
    }
    if (cfg.procs * cfg.threads) as usize > MAX_WORKERS {
        close_all(&global);
        return Err(io::Error::other(format!("at most {MAX_WORKERS} workers")));
    }
    let kids = spawn_procs(cfg, env, &board, &global, quota, deadline, &mut out)?;
    let (bufs, status, killed) = wait_procs(cfg, &board, &kids, deadline, &mut out);
    collect_results(&kids, &bufs, &status, killed, &mut out);
    close_all(&global);
    out.seconds = t0.elapsed().as_secs_f64();
    Ok(out)
}

/// A forked worker process: its number, pid and the read end of the pipe
/// it sends its results on.
type Kid = (u32, i32, i32);

/// Forks the `procs` processes, each running its `threads` workers and
/// sending their results on a pipe; a failed fork is counted as a crash.
fn spawn_procs(
    cfg: &Config,
    env: &Env,
    board: &Board,
    global: &SharedFds,
    quota: u64,
    deadline: Instant,
    out: &mut Outcome,
) -> io::Result<Vec<Kid>> {
    let threads: Vec<u32> = (0..cfg.threads).collect();
    let mut kids: Vec<Kid> = Vec::new(); // (p, pid, read end)
    for p in 0..cfg.procs {
        let mut pipe = [0i32; 2];
        // SAFETY: writes two fds.
        if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: this process is single-threaded here (no worker thread
        // runs in the parent), so the child may run Rust code.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: the child's copy of the read end.
            unsafe { libc::close(pipe[0]) };
            let res = proc_main(cfg, env, board, global, p, &threads, quota, deadline);
            let text = serde_json::to_vec(&res).unwrap_or_default();
            let mut off = 0;
            while off < text.len() {
                // SAFETY: writes from a live buffer.
                let n = unsafe {
                    libc::write(
                        pipe[1],
                        text[off..].as_ptr() as *const c_void,
                        text.len() - off,
                    )
                };
                if n <= 0 {
                    break;
                }
                off += n as usize;
            }
            // SAFETY: leaving the child without running the parent's
            // destructors.
            unsafe { libc::_exit(0) };
        }
        // SAFETY: the parent's copy of the write end.
        unsafe { libc::close(pipe[1]) };
        if pid < 0 {
            let e = io::Error::last_os_error();
            // SAFETY: our read end.
            unsafe { libc::close(pipe[0]) };
            out.crashed.push(format!("fork of process {p}: {e}"));
            continue;
        }
        // Read without blocking, so that a large result cannot stall us.
        // SAFETY: fcntl on our fd.
        unsafe { libc::fcntl(pipe[0], libc::F_SETFL, libc::O_NONBLOCK) };
        kids.push((p, pid, pipe[0]));
    }
    Ok(kids)
}

/// The processes' results read and their ends waited for, until all have
/// ended; past the deadline and a grace period the workers still busy are
/// reported hung and their processes killed, and those that do not die
/// within 30 s are reported. Gives what each sent, how each ended, and
/// whether they were killed.
fn wait_procs(
    cfg: &Config,
    board: &Board,
    kids: &[Kid],
    deadline: Instant,
    out: &mut Outcome,
) -> (BTreeMap<u32, Vec<u8>>, BTreeMap<u32, i32>, bool) {
    let grace = Duration::from_secs(60);
    let mut bufs: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
    let mut status: BTreeMap<u32, i32> = BTreeMap::new();
    let mut killed = false;
    loop {
        for &(p, pid, fd) in kids {
            let b = bufs.entry(p).or_default();
            let mut chunk = [0u8; 65536];
            loop {
                // SAFETY: reads into a live buffer.
                let n = unsafe { libc::read(fd, chunk.as_mut_ptr() as *mut c_void, chunk.len()) };
                if n <= 0 {
                    break;
                }
                b.extend_from_slice(&chunk[..n as usize]);
            }
            if let std::collections::btree_map::Entry::Vacant(e) = status.entry(p) {
                let mut st = 0;
                // SAFETY: waits for our own child without blocking.
                if unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) } == pid {
                    e.insert(st);
                }
            }
        }
        if status.len() == kids.len() {
            break;
        }
        // The races' time is added to the calls' (Worker::run); the
        // slowest worker's sets the bound.
        let races = Duration::from_nanos(
            (0..(cfg.procs * cfg.threads) as usize)
                .map(|i| board.slot(i).race_ns.load(Ordering::Relaxed))
                .max()
                .unwrap_or(0),
        );
        let deadline = deadline + races;
        if !killed && Instant::now() > deadline + grace {
            report_hung(cfg, board, out);
            for &(p, pid, _) in kids {
                if !status.contains_key(&p) {
                    // SAFETY: killing our own child.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            killed = true;
        }
        if killed && Instant::now() > deadline + grace + Duration::from_secs(30) {
            for &(p, pid, _) in kids {
                if !status.contains_key(&p) {
                    out.crashed.push(format!(
                        "process {p} (pid {pid}) did not die within 30 s of SIGKILL (stuck in the kernel?)"
                    ));
                }
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (bufs, status, killed)
}

/// Every worker still in an op, with the op and how long it has run.
fn report_hung(cfg: &Config, board: &Board, out: &mut Outcome) {
    for i in 0..(cfg.procs * cfg.threads) as usize {
        let s = board.slot(i);
        if s.state.load(Ordering::Acquire) == 1 {
            let since = crate::linux::sys::monotonic_ns()
                .saturating_sub(s.since_ns.load(Ordering::Relaxed));
            out.hung.push(format!(
                "worker {}.{} in its op #{} ({}, op seed {:#x}) for {:.1} s",
                i as u32 / cfg.threads,
                i as u32 % cfg.threads,
                s.ops.load(Ordering::Relaxed),
                OPS[s.kind.load(Ordering::Relaxed) as usize % OPS.len()],
                s.op_seed.load(Ordering::Relaxed),
                since as f64 / 1e9
            ));
        }
    }
}

/// How each process ended (crashes counted) and the results it sent.
fn collect_results(
    kids: &[Kid],
    bufs: &BTreeMap<u32, Vec<u8>>,
    status: &BTreeMap<u32, i32>,
    killed: bool,
    out: &mut Outcome,
) {
    for &(p, _, fd) in kids {
        // SAFETY: our read end.
        unsafe { libc::close(fd) };
        let st = status.get(&p).copied();
        match st {
            Some(st) if libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0 => {}
            Some(st) if libc::WIFSIGNALED(st) => out.crashed.push(format!(
                "process {p} killed by signal {}{}",
                libc::WTERMSIG(st),
                if killed { " (after the deadline)" } else { "" }
            )),
            Some(st) => out
                .crashed
                .push(format!("process {p} exited with {}", libc::WEXITSTATUS(st))),
            None => {}
        }
        match serde_json::from_slice::<Vec<WorkerResult>>(bufs.get(&p).map_or(&[][..], |v| v)) {
            Ok(mut v) => out.workers.append(&mut v),
            Err(_) if st.is_some() => out.crashed.push(format!("process {p} sent no result")),
            Err(_) => {}
        }
    }
}
