//! The stress run (concurrent mappers, weight writes, clears and memory
//! blocks going offline), shared by `tk-test-stress` (bounded, in the
//! suite) and `tk-stress` (configurable).
//!
//! Concurrently, in forked processes until a deadline:
//! - three mappers (weighted interleave over every memory node, plain
//!   interleave over every memory node, one memory-only node) open
//!   `/dev/tierkit`, map 4 KiB-mode regions and check that every page reads
//!   zero before its first write and keeps its pattern; some rounds race
//!   threads of the same process: a `close()` against `mmap()`s of the
//!   same file from another thread, and a `munmap()` (and `close()`)
//!   against the re-population (`MADV_POPULATE_READ` after
//!   `MADV_DONTNEED`) of the same range from another thread;
//! - one process rewrites tierkit's weights, toggles `auto` and writes
//!   `bandwidth`;
//! - one process per memory node runs `TK_IOC_CLEAR_BENCH` (one 1 GiB
//!   range), all nodes at once; a clear still running at the deadline (a
//!   GiB of emulated CXL memory takes ~45 s) is ended with SIGKILL, which
//!   the clear must honour;
//! - where the memory-only node is all ZONE_MOVABLE (the cxl topology), one
//!   process offlines and onlines its memory blocks in turn, each write
//!   with a time limit (a SIGKILL interrupts an offline that does not end).
//!
//! Afterwards: every child exited 0 (or was a clear ended at the
//! deadline), the weight table is restored, every block is online again,
//! tierkit's holdings (`stats` held and gigantic per node, `limits`
//! held_pages) are back to the baseline, the free pages of every node are
//! back within a tolerance, the kernel logged no report, and a final
//! open+mmap works. The counts go to `ok` lines and the TIERKIT-JSON.
//!
//! Here: the configuration and [`run`] (its children forked and waited
//! for); the mappers in `mappers.rs`, the other children in
//! `children.rs`, the checks after the run in `checks.rs`.

use crate::abi::tk::{self, Tierkit, TK_MODE_INTERLEAVE, TK_MODE_WEIGHTED_INTERLEAVE};
use crate::harness::report::Report;
use crate::harness::rng::XorShift;
use crate::linux::memblock::{self, Outcome};
use crate::linux::sys::PAGE_SIZE;
use crate::tests::faults::{self, Kmsg, MemSnapshot};
use crate::topology::node::{fmt_mask, mask_of, Topology};
use crate::topology::weights::{RestoreOnDrop, WeightDir};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tierkit_core::uapi::TK_PLACE_ANY;

mod checks;
mod children;
mod mappers;

use crate::abi::ready::read_topology;
use checks::*;
pub use children::*;
use clap::Parser;
use mappers::*;
use std::process::ExitCode;

/// What a run does and how long.
#[derive(Clone, Debug)]
pub struct Config {
    /// Wall time of the concurrent phase (every child stops starting new
    /// work at this deadline).
    pub seconds: u64,
    /// Rounds per mapper at most.
    pub map_rounds: u32,
    /// Largest mapping in pages (4 KiB); the smallest is 16.
    pub max_pages: usize,
    /// Largest mapping in pages of the mapper bound to the memory-only
    /// node (emulated CXL memory is slow: ~0.02-0.05 GB/s).
    pub max_pages_memory_only: usize,
    /// Weight/auto/bandwidth writes at most.
    pub weight_rounds: u32,
    /// Clears per node at most.
    pub clear_rounds: u32,
    /// How long a clear may go on past the deadline before it gets SIGKILL
    /// (the mappers have stopped by then, so a DRAM clear usually ends).
    pub clear_grace: Duration,
    /// Offline/online memory blocks of a ZONE_MOVABLE memory-only node.
    pub offline: bool,
    /// Time limit of each block offline and online write.
    pub offline_limit: Duration,
    /// The seed; `None`: from the clock.
    pub seed: Option<u64>,
}

impl Config {
    /// The bounded run of `tk-test-stress`: 15 s of concurrent work, and
    /// up to 12 s more for clears still running.
    pub fn suite() -> Config {
        Config {
            seconds: 15,
            map_rounds: 200,
            max_pages: 1024,
            max_pages_memory_only: 256,
            weight_rounds: 300,
            clear_rounds: 3,
            clear_grace: Duration::from_secs(12),
            offline: true,
            offline_limit: Duration::from_secs(20),
            seed: None,
        }
    }
}

/// Write end of the pipe the children send their `TAG key value ...`
/// lines on (set in the parent before any fork).
static COUNT_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// Sends `line` to the parent (one write, below PIPE_BUF, so lines of
/// several children never interleave).
fn send(line: &str) {
    let l = format!("{line}\n");
    let fd = COUNT_FD.load(std::sync::atomic::Ordering::Relaxed);
    // SAFETY: a local buffer on our pipe's write end.
    unsafe { libc::write(fd, l.as_ptr().cast(), l.len()) };
}

/// Forks; the child runs `f` and `_exit`s with its code. Returns the pid
/// (negative if the fork failed).
fn spawn(f: impl FnOnce() -> i32) -> i32 {
    let _ = std::io::Write::flush(&mut std::io::stdout());
    // SAFETY: the parent is single-threaded; the child runs `f` and
    // `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let c = f();
        let _ = std::io::Write::flush(&mut std::io::stdout());
        // SAFETY: ends the child.
        unsafe { libc::_exit(c) };
    }
    pid
}
/// Runs the stress run on `topo` and records its checks in `r`.
pub fn run(r: &mut Report, topo: &Topology, cfg: &Config) {
    crate::linux::kernel::ensure_debugfs();
    if !Tierkit::present() {
        r.fail(
            "open /dev/tierkit",
            "no /dev/tierkit (is tierkit.ko loaded?)",
        );
        return;
    }
    let kmsg = Kmsg::open_at_end().ok();
    let Some(wd) = crate::abi::ready::tierkit_weight_dir(r) else {
        return;
    };
    let snap = match wd.snapshot() {
        Ok(s) => s,
        Err(e) => {
            r.fail("weights snapshot", format!("{e:#}"));
            return;
        }
    };
    let mut guard = RestoreOnDrop::new(snap.clone());
    let table0 = wd.table().ok();
    let mem = topo.memory.clone();
    let all = mask_of(&mem);
    let seed = cfg.seed.unwrap_or_else(crate::linux::sys::monotonic_ns);
    let memory_only = topo.cxl_node();
    println!("# stress: seed {seed:#x}, memory nodes {mem:?}, memory-only {memory_only:?}, {} s, config {cfg:?}", cfg.seconds);
    r.set("seed", json!(format!("{seed:#x}")));

    // Offlining: the blocks of a ZONE_MOVABLE memory-only node.
    let blocks = match memory_only {
        None => Err("no memory-only node".to_string()),
        Some(_) if !cfg.offline => Err("offlining not asked for".to_string()),
        Some(n) => movable_blocks(n),
    };
    // A GiB clear on a ZONE_MOVABLE node needs tierkit's opt-in.
    let opt_in = match &blocks {
        Ok(_) => match tk::MovableGigantic::enable() {
            Ok(g) => Some(g),
            Err(e) => {
                r.fail("stress: echo 1 > movable_gigantic", e.to_string());
                None
            }
        },
        Err(_) => None,
    };
    let hold0 = faults::holdings();
    let mem0 = MemSnapshot::take();

    let mut pfd = [-1i32; 2];
    // SAFETY: a two-int array for pipe2(2).
    if unsafe { libc::pipe2(pfd.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        r.fail("pipe", std::io::Error::last_os_error().to_string());
        return;
    }
    COUNT_FD.store(pfd[1], std::sync::atomic::Ordering::Relaxed);
    let start = Instant::now();
    let deadline = start + Duration::from_secs(cfg.seconds);
    let plan = Plan {
        cfg,
        wd: &wd,
        mem: &mem,
        all,
        memory_only,
        blocks: &blocks,
        seed,
        deadline,
    };
    let mut kids = spawn_kids(r, &plan);
    wait_kids(&mut kids, cfg, start, deadline);
    let dur = start.elapsed().as_secs_f64();
    // SAFETY: our pipe's write end; every child has exited.
    unsafe { libc::close(pfd[1]) };
    let mut text = String::new();
    // SAFETY: the read end is ours; the File takes it over.
    let mut f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(pfd[0]) };
    let _ = std::io::Read::read_to_string(&mut f, &mut text);

    let mut counts = Counts::parse(&text);
    check_kids(r, &kids, &mut counts);
    report_counts(r, &counts, dur, kids.len());
    if let (Ok(bl), Some(n)) = (&blocks, memory_only) {
        check_offline(r, cfg, bl, n, &counts);
    }
    drop(opt_in);

    r.check_note(
        "stress: weight table restored",
        guard.done().map_err(|e| format!("{e:#}")).and_then(|_| {
            let t = wd.table().ok();
            if t == table0 {
                Ok(snap.describe())
            } else {
                Err(format!("table {t:?} != {table0:?}"))
            }
        }),
    );
    check_holdings(r, &hold0);
    check_free_pages(r, &mem0);
    check_final(r, all, kmsg);
    println!("# stress duration {dur:.1}s");
}

/// What the children of a run share.
struct Plan<'a> {
    cfg: &'a Config,
    wd: &'a WeightDir,
    mem: &'a [u32],
    all: u64,
    memory_only: Option<u32>,
    blocks: &'a Result<Vec<u64>, String>,
    seed: u64,
    deadline: Instant,
}

/// Forks the mappers, the weights child, a clear per memory node and (if
/// there are blocks to offline) the offline child.
fn spawn_kids(r: &mut Report, p: &Plan) -> Vec<Kid> {
    let (cfg, deadline, seed, mem) = (p.cfg, p.deadline, p.seed, p.mem);
    let mut kids: Vec<Kid> = Vec::new();
    let mut add = |pid: i32, what: String, clear: bool| {
        kids.push(Kid {
            pid,
            what,
            clear,
            status: None,
            killed_at_deadline: false,
        })
    };
    let all = p.all;
    let one = p
        .memory_only
        .map_or(1u64 << mem[mem.len() - 1], |n| 1u64 << n);
    let mappers = [
        (TK_MODE_WEIGHTED_INTERLEAVE, all, cfg.max_pages),
        (TK_MODE_INTERLEAVE, all, cfg.max_pages),
        (TK_MODE_INTERLEAVE, one, cfg.max_pages_memory_only),
    ];
    for (i, &(mode, mask, maxp)) in mappers.iter().enumerate() {
        let s = seed.wrapping_add(i as u64 * 0x9e37_79b9);
        add(
            spawn(|| mapper(i, mode, mask, maxp.max(17), cfg, deadline, s)),
            format!("mapper {i} (mode {mode}, nodes {})", fmt_mask(mask)),
            false,
        );
    }
    add(
        spawn(|| weights_child(p.wd, mem, cfg, deadline, seed)),
        "weights".into(),
        false,
    );
    for &nid in mem {
        add(
            spawn(|| clear_child(nid, cfg, deadline)),
            format!("clear node {nid}"),
            true,
        );
    }
    match p.blocks {
        Ok(b) => add(
            spawn(|| offline_child(b, cfg, deadline, seed)),
            format!("offline/online node {}", p.memory_only.unwrap_or(0)),
            false,
        ),
        Err(why) => {
            r.skip("stress: memory blocks offline and online meanwhile", why);
        }
    }
    kids
}

/// Waits for every child; clears past the deadline get SIGKILL (they must
/// honour it), anything past the hard limit too (and fails).
fn wait_kids(kids: &mut [Kid], cfg: &Config, start: Instant, deadline: Instant) {
    let hard = deadline + cfg.offline_limit + Duration::from_secs(60);
    loop {
        let mut alive = 0;
        for k in kids.iter_mut().filter(|k| k.pid > 0 && k.status.is_none()) {
            let mut st = 0;
            // SAFETY: waits for our own child, writes one int.
            if unsafe { libc::waitpid(k.pid, &mut st, libc::WNOHANG) } == k.pid {
                k.status = Some(st);
                continue;
            }
            alive += 1;
            let now = Instant::now();
            if (k.clear && now >= deadline + cfg.clear_grace && !k.killed_at_deadline)
                || now >= hard
            {
                println!(
                    "# stress: SIGKILL to {} at {:.1}s",
                    k.what,
                    start.elapsed().as_secs_f64()
                );
                // SAFETY: signals our own child.
                unsafe { libc::kill(k.pid, libc::SIGKILL) };
                k.killed_at_deadline = true;
            }
        }
        if alive == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The stress run: concurrent mappers, weight writes, clears and memory
/// blocks going offline.
#[derive(Parser)]
struct Args {
    /// Wall time of the concurrent phase, in seconds.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// The seed (decimal or 0x hex); default from the clock.
    #[arg(long, value_parser = parse_u64)]
    seed: Option<u64>,
    /// Rounds per mapper at most.
    #[arg(long, default_value_t = 200)]
    map_rounds: u32,
    /// Clears per node at most.
    #[arg(long, default_value_t = 3)]
    clear_rounds: u32,
    /// Largest mapping, in 4 KiB pages (at least 17).
    #[arg(long, default_value_t = 1024)]
    max_pages: usize,
    /// Do not offline memory blocks.
    #[arg(long)]
    no_offline: bool,
    /// Time limit of each block offline/online, in seconds.
    #[arg(long, default_value_t = 20)]
    offline_limit: u64,
}

fn parse_u64(s: &str) -> Result<u64, String> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    }
    .map_err(|e| e.to_string())
}

/// `tk-stress`'s `main`.
pub fn main() -> ExitCode {
    let a = Args::parse();
    let mut r = Report::new("tk-stress", "test");
    let Some(topo) = read_topology(&mut r) else {
        return r.finish();
    };
    let cfg = Config {
        seconds: a.seconds,
        map_rounds: a.map_rounds,
        clear_rounds: a.clear_rounds,
        max_pages: a.max_pages.max(17),
        offline: !a.no_offline,
        offline_limit: Duration::from_secs(a.offline_limit),
        seed: a.seed,
        weight_rounds: u32::MAX,
        ..Config::suite()
    };
    run(&mut r, &topo, &cfg);
    r.finish()
}
