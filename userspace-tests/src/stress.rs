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

use crate::faults::{self, Kmsg, MemSnapshot};
use crate::memblock::{self, Outcome};
use crate::node::{fmt_mask, mask_of, Topology};
use crate::report::Report;
use crate::sys::PAGE_SIZE;
use crate::tk::{self, Tierkit, TK_MODE_INTERLEAVE, TK_MODE_WEIGHTED_INTERLEAVE};
use crate::weights::{RestoreOnDrop, WeightDir};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tierkit_core::uapi::TK_PLACE_ANY;

/// `MADV_POPULATE_READ` (Linux 5.14, include/uapi/asm-generic/mman-common.h).
const MADV_POPULATE_READ: i32 = 22;

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

/// xorshift64*.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
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

/// `mmap(NULL, nr pages, RW, MAP_SHARED, fd, off pages)` without a
/// [`crate::sys::Mapping`]: the racing rounds unmap parts themselves, and
/// an unmap on drop could hit whatever was mapped into the hole since.
fn map_raw(fd: i32, nr: usize, off: u64) -> std::io::Result<usize> {
    // SAFETY: a new mapping, no MAP_FIXED: nothing existing is replaced.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            nr * PAGE_SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            (off * PAGE_SIZE as u64) as libc::off_t,
        )
    };
    if p == libc::MAP_FAILED {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(p as usize)
    }
}

/// Unmaps pages `first..first + nr` of the mapping at `base`.
fn unmap(base: usize, first: usize, nr: usize) {
    if nr > 0 {
        // SAFETY: a range of a mapping this process made with map_raw and
        // has not unmapped yet.
        unsafe {
            libc::munmap(
                (base + first * PAGE_SIZE) as *mut libc::c_void,
                nr * PAGE_SIZE,
            )
        };
    }
}

/// Page `i` of the mapping at `base`.
///
/// # Safety
/// Page `i` must be mapped, and stay mapped while the slice lives.
unsafe fn page<'a>(base: usize, i: usize) -> &'a mut [u8] {
    // SAFETY: by the caller.
    unsafe { std::slice::from_raw_parts_mut((base + i * PAGE_SIZE) as *mut u8, PAGE_SIZE) }
}

/// Checks pages `r` of `base` read zero, then fills them with `pat`.
///
/// # Safety
/// The pages must be mapped for the duration of the call.
unsafe fn zero_then_fill(base: usize, r: std::ops::Range<usize>, pat: u8) -> Result<(), String> {
    for i in r {
        // SAFETY: by the caller.
        let pg = unsafe { page(base, i) };
        if let Some(b) = pg.iter().position(|&b| b != 0) {
            return Err(format!(
                "page {i} not zero before its first write (byte {b} = {:#x})",
                pg[b]
            ));
        }
        pg.fill(pat);
    }
    Ok(())
}

/// Checks pages `r` of `base` hold `pat`.
///
/// # Safety
/// The pages must be mapped for the duration of the call.
unsafe fn verify(
    base: usize,
    r: std::ops::Range<usize>,
    pat: u8,
    when: &str,
) -> Result<(), String> {
    for i in r {
        // SAFETY: by the caller.
        let pg = unsafe { page(base, i) };
        if let Some(b) = pg.iter().position(|&b| b != pat) {
            return Err(format!(
                "page {i} lost its pattern {pat:#x} {when} (byte {b} = {:#x})",
                pg[b]
            ));
        }
    }
    Ok(())
}

/// One mapper's counts.
#[derive(Default)]
struct MapCounts {
    maps: u64,
    pages: u64,
    dontneed: u64,
    close_first: u64,
    partial_munmap: u64,
    race_close: u64,
    race_close_ebadf: u64,
    race_munmap: u64,
    populate_calls: u64,
    populate_failed: u64,
}

/// Maps `nr` pages of `tk` at page offset `off`, checks they read zero
/// and fills them with `pat`; counts the mapping. Returns its address.
fn map_filled(
    tk: &Tierkit,
    nr: usize,
    off: u64,
    pat: u8,
    c: &mut MapCounts,
) -> Result<usize, String> {
    let base = map_raw(tk.fd(), nr, off).map_err(|e| format!("mmap {nr} pages: {e}"))?;
    c.maps += 1;
    c.pages += nr as u64;
    // SAFETY: base..base+nr pages is our mapping; the caller unmaps it
    // only after this returns.
    if let Err(e) = unsafe { zero_then_fill(base, 0..nr, pat) } {
        unmap(base, 0, nr);
        return Err(e);
    }
    Ok(base)
}

/// `MADV_DONTNEED` on the `nr` pages at `base`: the PTEs go, the pages
/// stay with the file (a shared file mapping).
fn dontneed(base: usize, nr: usize, c: &mut MapCounts) {
    // SAFETY: madvise on our own mapping.
    unsafe {
        libc::madvise(
            base as *mut libc::c_void,
            nr * PAGE_SIZE,
            libc::MADV_DONTNEED,
        )
    };
    c.dontneed += 1;
}

/// A plain round: map, zero check and fill, maybe `MADV_DONTNEED` and
/// check, maybe unmap a tail, close and unmap in a random order.
fn round_plain(
    tk: Tierkit,
    nr: usize,
    off: u64,
    pat: u8,
    rng: &mut Rng,
    c: &mut MapCounts,
) -> Result<(), String> {
    let base = map_filled(&tk, nr, off, pat, c)?;
    if rng.below(3) == 0 {
        dontneed(base, nr, c);
        // Shared file mapping: the pages stay with the file.
        // SAFETY: still mapped.
        unsafe { verify(base, 0..nr, pat, "after MADV_DONTNEED") }?;
    }
    let mut keep = nr;
    if rng.below(3) == 0 {
        keep = 1 + rng.below(nr as u64 - 1) as usize;
        unmap(base, keep, nr - keep);
        c.partial_munmap += 1;
    }
    // SAFETY: the head is still mapped.
    unsafe { verify(base, 0..keep, pat, "before the unmap") }?;
    if rng.below(2) == 0 {
        drop(tk);
        c.close_first += 1;
        unmap(base, 0, keep);
    } else {
        unmap(base, 0, keep);
        drop(tk);
    }
    Ok(())
}

/// `close()` racing `mmap()`s of the same file: one thread maps up to four
/// parts one after the other, another closes the file after a random
/// delay. The mappings made check zero, fill, verify and unmap after both.
fn round_race_close(
    tk: Tierkit,
    nr: usize,
    off: u64,
    pat: u8,
    rng: &mut Rng,
    c: &mut MapCounts,
) -> Result<(), String> {
    let fd = tk.fd();
    let part = (nr / 4).max(1);
    let delay = Duration::from_micros(rng.below(3000));
    let maps: Vec<Result<usize, i32>> = std::thread::scope(|s| {
        let a = s.spawn(move || {
            (0..4u64)
                .map(|k| {
                    map_raw(fd, part, off + k * part as u64)
                        .map_err(|e| e.raw_os_error().unwrap_or(0))
                })
                .collect::<Vec<_>>()
        });
        s.spawn(move || {
            std::thread::sleep(delay);
            drop(tk);
        });
        a.join().unwrap_or_default()
    });
    c.race_close += 1;
    let mut res = Ok(());
    for m in &maps {
        match *m {
            Ok(base) => {
                c.maps += 1;
                c.pages += part as u64;
                // SAFETY: our mapping until the unmap below.
                let r = unsafe { zero_then_fill(base, 0..part, pat) }
                    // SAFETY: as above.
                    .and_then(|_| unsafe { verify(base, 0..part, pat, "after the close") });
                if res.is_ok() {
                    res = r;
                }
                unmap(base, 0, part);
            }
            Err(libc::EBADF) => c.race_close_ebadf += 1,
            Err(e) if res.is_ok() => {
                res = Err(format!(
                    "mmap racing close: {}",
                    crate::errno_name(&std::io::Error::from_raw_os_error(e))
                ))
            }
            Err(_) => {}
        }
    }
    res
}

/// `munmap()` and `close()` racing population: map, zero check and fill,
/// `MADV_DONTNEED` (the PTEs go, the pages stay with the file); then one
/// thread populates the range again with `MADV_POPULATE_READ`, 16 pages a
/// call, while another unmaps its tail and closes the file after a random
/// delay. Calls wholly inside the head must succeed, and the head keeps
/// its pattern.
fn round_race_munmap(
    tk: Tierkit,
    nr: usize,
    off: u64,
    pat: u8,
    rng: &mut Rng,
    c: &mut MapCounts,
) -> Result<(), String> {
    let base = map_filled(&tk, nr, off, pat, c)?;
    dontneed(base, nr, c);
    let keep = rng.below(nr as u64) as usize;
    let delay = Duration::from_micros(rng.below(2000));
    const CHUNK: usize = 16;
    let (calls, fails) = std::thread::scope(|s| {
        let a = s.spawn(move || {
            let (mut calls, mut fails) = (0u64, Vec::new());
            for first in (0..nr).step_by(CHUNK) {
                let n = CHUNK.min(nr - first);
                // SAFETY: madvise on our address range; an unmapped part
                // fails with ENOMEM, nothing else happens.
                let r = unsafe {
                    libc::madvise(
                        (base + first * PAGE_SIZE) as *mut libc::c_void,
                        n * PAGE_SIZE,
                        MADV_POPULATE_READ,
                    )
                };
                calls += 1;
                if r != 0 {
                    fails.push((first, n, std::io::Error::last_os_error()));
                }
            }
            (calls, fails)
        });
        s.spawn(move || {
            std::thread::sleep(delay);
            unmap(base, keep, nr - keep);
            drop(tk);
        });
        a.join().unwrap_or_default()
    });
    c.race_munmap += 1;
    c.populate_calls += calls;
    c.populate_failed += fails.len() as u64;
    let bad: Vec<String> = fails
        .iter()
        .filter(|(first, n, _)| first + n <= keep)
        .map(|(first, n, e)| format!("pages {first}..{}: {}", first + n, crate::errno_name(e)))
        .collect();
    // SAFETY: the head 0..keep is still mapped.
    let r = unsafe { verify(base, 0..keep, pat, "after the racing munmap/close") };
    unmap(base, 0, keep);
    if !bad.is_empty() {
        return Err(format!(
            "MADV_POPULATE_READ inside the head (0..{keep} of {nr}) failed: {}",
            bad.join(", ")
        ));
    }
    r
}

/// A mapper child: rounds until `deadline`; sends `mapperI key value ...`.
fn mapper(
    i: usize,
    mode: u32,
    mask: u64,
    max_pages: usize,
    cfg: &Config,
    deadline: Instant,
    seed: u64,
) -> i32 {
    let mut rng = Rng(seed | 1);
    let start = Instant::now();
    let mut c = MapCounts::default();
    let mut code = 0;
    for round in 0..cfg.map_rounds {
        if Instant::now() >= deadline {
            break;
        }
        let tk = match Tierkit::open().and_then(|t| t.set_policy(mode, mask).map(|_| t)) {
            Ok(t) => t,
            Err(e) => {
                println!("# mapper {i}: round {round}: open/set_policy: {e}");
                code = 1;
                break;
            }
        };
        let nr = 16 + rng.below((max_pages - 16 + 1) as u64) as usize;
        let off = rng.below(1 << 20);
        let pat = (round as u8) | 1;
        let r = match rng.below(4) {
            2 => round_race_close(tk, nr, off, pat, &mut rng, &mut c),
            3 => round_race_munmap(tk, nr, off, pat, &mut rng, &mut c),
            _ => round_plain(tk, nr, off, pat, &mut rng, &mut c),
        };
        if let Err(e) = r {
            println!(
                "# mapper {i} (mode {mode}, mask {}): round {round}: {e}",
                fmt_mask(mask)
            );
            code = 1;
            break;
        }
    }
    println!(
        "# mapper {i} (mode {mode}, mask {}): {} maps, {} pages, {} rounds racing close ({} mmaps EBADF), {} racing munmap ({} populate calls, {} failed) in {:.1}s",
        fmt_mask(mask),
        c.maps,
        c.pages,
        c.race_close,
        c.race_close_ebadf,
        c.race_munmap,
        c.populate_calls,
        c.populate_failed,
        start.elapsed().as_secs_f64()
    );
    send(&format!(
        "mapper{i} maps {} pages {} dontneed {} close_first {} partial_munmap {} race_close {} race_close_ebadf {} race_munmap {} populate_calls {} populate_failed {}",
        c.maps, c.pages, c.dontneed, c.close_first, c.partial_munmap, c.race_close,
        c.race_close_ebadf, c.race_munmap, c.populate_calls, c.populate_failed
    ));
    code
}

/// The weights child: random weight, `auto` and `bandwidth` writes, then
/// the firmware bandwidth back.
fn weights_child(wd: &WeightDir, mem: &[u32], cfg: &Config, deadline: Instant, seed: u64) -> i32 {
    let mut rng = Rng(seed ^ 0x5555);
    let (mut w, mut a, mut b) = (0u64, 0u64, 0u64);
    for _ in 0..cfg.weight_rounds {
        if Instant::now() >= deadline {
            break;
        }
        let nid = mem[rng.below(mem.len() as u64) as usize];
        match rng.below(4) {
            0 => {
                let _ = wd.write_auto_str(if rng.below(2) == 0 { "true" } else { "false" });
                a += 1;
            }
            1 => {
                let e: Vec<(u32, u32, u32)> = mem
                    .iter()
                    .map(|&n| {
                        (
                            n,
                            1000 + rng.below(50000) as u32,
                            1000 + rng.below(50000) as u32,
                        )
                    })
                    .collect();
                let _ = wd.write_bandwidth(&e);
                b += 1;
            }
            _ => {
                let _ = wd.set_weight(nid, 1 + rng.below(100) as u8);
                w += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The firmware bandwidth back, so that restoring auto=true recomputes
    // the original weights.
    let orig: Vec<(u32, u32, u32)> = mem
        .iter()
        .filter_map(|&n| crate::node::access1_bandwidth(n).map(|(r, w)| (n, r, w)))
        .collect();
    if !orig.is_empty() {
        if let Err(e) = wd.write_bandwidth(&orig) {
            println!("# weights: restoring bandwidth {orig:?}: {e}");
        }
    }
    println!("# weights: weight writes={w} auto toggles={a} bandwidth writes={b}");
    send(&format!(
        "weights weight_writes {w} auto_toggles {a} bandwidth_writes {b}"
    ));
    0
}

/// A clear child: up to `clear_rounds` clears of one GiB on `nid`; sends
/// `clear key 1` after each, so a SIGKILL at the deadline loses nothing.
fn clear_child(nid: u32, cfg: &Config, deadline: Instant) -> i32 {
    let tk = match Tierkit::open() {
        Ok(t) => t,
        Err(e) => {
            println!("# clear node {nid}: open: {e}");
            return 1;
        }
    };
    for _ in 0..cfg.clear_rounds {
        if Instant::now() >= deadline {
            break;
        }
        let t0 = Instant::now();
        match tk.clear_bench(tk::clear_bench_arg(nid as i32, 1, TK_PLACE_ANY, 1)) {
            Ok(_) => {
                println!(
                    "# clear node {nid}: 1 GiB in {:.1}s",
                    t0.elapsed().as_secs_f64()
                );
                send("clear clears 1");
            }
            // No free GiB now (memory in use, a block going offline).
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOMEM) | Some(libc::EBUSY)) => {
                println!(
                    "# clear node {nid}: no free GiB ({})",
                    crate::errno_name(&e)
                );
                send("clear clears_no_gib 1");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => {
                println!("# clear node {nid}: {}", crate::errno_name(&e));
                return 1;
            }
        }
    }
    0
}

/// The offline child: offline a random block of `blocks`, online it again,
/// until `deadline`. Sends `@offline BLOCK OUTCOME MS` and `@online ...`
/// per write. Fails (1) if a block cannot be onlined again.
fn offline_child(blocks: &[u64], cfg: &Config, deadline: Instant, seed: u64) -> i32 {
    let mut rng = Rng(seed ^ 0xa5a5);
    while Instant::now() < deadline {
        let b = blocks[rng.below(blocks.len() as u64) as usize];
        let t = match memblock::set_block_state(b, "offline", cfg.offline_limit) {
            Ok(t) => t,
            Err(e) => {
                println!("# offline memory{b}: {e}");
                return 1;
            }
        };
        let what = match t.outcome {
            Outcome::Done => "done".to_string(),
            Outcome::Failed(e) => crate::errno_name(&std::io::Error::from_raw_os_error(e)),
            Outcome::TimedOut { .. } => "timeout".to_string(),
        };
        println!(
            "# offline memory{b}: {what} in {} ms",
            t.elapsed.as_millis()
        );
        send(&format!("@offline {b} {what} {}", t.elapsed.as_millis()));
        if matches!(t.outcome, Outcome::TimedOut { reaped: false }) {
            return 1;
        }
        if memblock::block_state(b).as_deref() != Some("online") {
            std::thread::sleep(Duration::from_millis(100 + rng.below(200)));
            let t = match memblock::set_block_state(b, "online_movable", cfg.offline_limit) {
                Ok(t) => t,
                Err(e) => {
                    println!("# online memory{b}: {e}");
                    return 1;
                }
            };
            println!(
                "# online memory{b}: {} in {} ms",
                t.outcome.describe(),
                t.elapsed.as_millis()
            );
            send(&format!(
                "@online {b} {} {}",
                t.outcome == Outcome::Done,
                t.elapsed.as_millis()
            ));
            if t.outcome != Outcome::Done {
                return 1;
            }
        }
        std::thread::sleep(Duration::from_millis(50 + rng.below(100)));
    }
    0
}

/// The online memory blocks of `nid` if every online block of it is in
/// ZONE_MOVABLE; the reason if not.
pub fn movable_blocks(nid: u32) -> Result<Vec<u64>, String> {
    let blocks: Vec<u64> = memblock::node_blocks(nid)
        .into_iter()
        .filter(|&b| memblock::block_state(b).as_deref() == Some("online"))
        .collect();
    if blocks.is_empty() {
        return Err(format!("node {nid} has no online memory block"));
    }
    let zones: std::collections::BTreeSet<String> = blocks
        .iter()
        .map(|&b| memblock::block_zone(b).unwrap_or_else(|| "?".into()))
        .collect();
    if zones.len() == 1 && zones.contains("Movable") {
        Ok(blocks)
    } else {
        Err(format!(
            "node {nid}'s blocks are in {zones:?}, not all ZONE_MOVABLE"
        ))
    }
}

/// A child of the run.
struct Kid {
    pid: i32,
    what: String,
    clear: bool,
    status: Option<i32>,
    killed_at_deadline: bool,
}

/// Runs the stress run on `topo` and records its checks in `r`.
pub fn run(r: &mut Report, topo: &Topology, cfg: &Config) {
    crate::ensure_debugfs();
    if !Tierkit::present() {
        r.fail(
            "open /dev/tierkit",
            "no /dev/tierkit (is tierkit.ko loaded?)",
        );
        return;
    }
    let kmsg = Kmsg::open_at_end().ok();
    let Some(wd) = crate::tierkit_weight_dir(r) else {
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
    let seed = cfg.seed.unwrap_or_else(crate::sys::monotonic_ns);
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
    let one = memory_only.map_or(1u64 << mem[mem.len() - 1], |n| 1u64 << n);
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
        spawn(|| weights_child(&wd, &mem, cfg, deadline, seed)),
        "weights".into(),
        false,
    );
    for &nid in &mem {
        add(
            spawn(|| clear_child(nid, cfg, deadline)),
            format!("clear node {nid}"),
            true,
        );
    }
    match &blocks {
        Ok(b) => add(
            spawn(|| offline_child(b, cfg, deadline, seed)),
            format!("offline/online node {}", memory_only.unwrap_or(0)),
            false,
        ),
        Err(why) => {
            r.skip("stress: memory blocks offline and online meanwhile", why);
        }
    }

    // Wait; clears past the deadline get SIGKILL (they must honour it),
    // anything past the hard limit too (and fails).
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
    let dur = start.elapsed().as_secs_f64();
    // SAFETY: our pipe's write end; every child has exited.
    unsafe { libc::close(pfd[1]) };
    let mut text = String::new();
    // SAFETY: the read end is ours; the File takes it over.
    let mut f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(pfd[0]) };
    let _ = std::io::Read::read_to_string(&mut f, &mut text);

    let mut per: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    let mut offlines: Vec<Value> = Vec::new();
    let mut onlines: Vec<Value> = Vec::new();
    for l in text.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        match w.as_slice() {
            ["@offline", b, what, ms] => offlines.push(json!({
                "block": b.parse::<u64>().unwrap_or(0), "outcome": what, "ms": ms.parse::<u64>().unwrap_or(0)
            })),
            ["@online", b, ok, ms] => onlines.push(json!({
                "block": b.parse::<u64>().unwrap_or(0), "ok": *ok == "true", "ms": ms.parse::<u64>().unwrap_or(0)
            })),
            [tag, rest @ ..] => {
                for kv in rest.chunks(2) {
                    if let [k, v] = kv {
                        let v = v.parse::<u64>().unwrap_or(0);
                        *per.entry(tag.to_string()).or_default().entry(k.to_string()).or_default() += v;
                        *totals.entry(k.to_string()).or_default() += v;
                    }
                }
            }
            [] => {}
        }
    }

    for k in &kids {
        let name = format!("stress: {}", k.what);
        let tag = if k.what.starts_with("mapper ") {
            k.what
                .split_whitespace()
                .nth(1)
                .map(|i| format!("mapper{i}"))
        } else {
            None
        };
        let note = tag
            .and_then(|t| per.get(&t))
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        match k.status {
            _ if k.pid < 0 => {
                r.fail(&name, "fork failed");
            }
            Some(st)
                if libc::WIFSIGNALED(st)
                    && k.clear
                    && k.killed_at_deadline
                    && libc::WTERMSIG(st) == libc::SIGKILL =>
            {
                *totals
                    .entry("clears_killed_at_deadline".into())
                    .or_default() += 1;
                r.ok_note(&name, "still clearing at the deadline: ended by SIGKILL");
            }
            Some(st) if libc::WIFSIGNALED(st) => {
                r.fail(
                    &name,
                    format!(
                        "killed by signal {}{}",
                        libc::WTERMSIG(st),
                        if k.killed_at_deadline {
                            " (ours: it did not stop)"
                        } else {
                            ""
                        }
                    ),
                );
            }
            Some(st) if libc::WEXITSTATUS(st) != 0 => {
                r.fail(&name, format!("exit {} ({note})", libc::WEXITSTATUS(st)));
            }
            _ => {
                r.ok_note(
                    &name,
                    if note.is_empty() {
                        "exited 0".to_string()
                    } else {
                        note
                    },
                );
            }
        }
    }
    r.set(
        "mappers",
        json!(per
            .iter()
            .filter(|(t, _)| t.starts_with("mapper"))
            .map(|(t, m)| (t.clone(), json!(m)))
            .collect::<serde_json::Map<_, _>>()),
    );
    r.set("ops", json!(totals));
    r.set("duration_s", json!(dur));
    r.set("children", json!(kids.len()));
    r.set("offlines", Value::Array(offlines.clone()));
    r.set("onlines", Value::Array(onlines.clone()));
    println!("# stress totals: {totals:?}");
    r.ok_note(
        "stress: operations",
        format!(
            "{}; {dur:.1} s",
            totals
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    r.check_note("stress: the mappers mapped and raced", {
        let g = |k: &str| totals.get(k).copied().unwrap_or(0);
        if g("maps") > 0 && g("race_close") > 0 && g("race_munmap") > 0 {
            Ok(format!("{} maps, {} pages", g("maps"), g("pages")))
        } else {
            Err(format!(
                "maps {}, race_close {}, race_munmap {}",
                g("maps"),
                g("race_close"),
                g("race_munmap")
            ))
        }
    });

    // Offline/online: at least one block went offline; none timed out or
    // failed other than EBUSY (a block holding a gigantic range, or
    // pages someone pinned); every block online again.
    if let (Ok(bl), Some(n)) = (&blocks, memory_only) {
        let outcome = |v: &Value| v["outcome"].as_str().unwrap_or("").to_string();
        let ms: Vec<u64> = offlines
            .iter()
            .map(|v| v["ms"].as_u64().unwrap_or(0))
            .collect();
        let done = offlines.iter().filter(|v| outcome(v) == "done").count();
        let busy = offlines.iter().filter(|v| outcome(v) == "EBUSY").count();
        let bad: Vec<String> = offlines
            .iter()
            .filter(|v| !matches!(outcome(v).as_str(), "done" | "EBUSY"))
            .map(|v| format!("memory{} {} after {} ms", v["block"], outcome(v), v["ms"]))
            .collect();
        let times = offlines
            .iter()
            .map(|v| format!("memory{} {} {} ms", v["block"], outcome(v), v["ms"]))
            .collect::<Vec<_>>()
            .join(", ");
        r.check_note(
            &format!(
                "stress: memory blocks of node {n} offline and online meanwhile, each within {} s",
                cfg.offline_limit.as_secs()
            ),
            if !bad.is_empty() {
                Err(format!("{}; all: {times}", bad.join(", ")))
            } else if done == 0 {
                Err(format!("no block went offline: {times}"))
            } else {
                Ok(format!(
                    "{} offlines ({done} done, {busy} EBUSY), {} onlines, longest {} ms: {times}",
                    offlines.len(),
                    onlines.len(),
                    ms.iter().max().copied().unwrap_or(0)
                ))
            },
        );
        let mut left = Vec::new();
        for &b in bl {
            if memblock::block_state(b).as_deref() != Some("online") {
                left.push(b);
                let _ = memblock::set_block_state(b, "online_movable", cfg.offline_limit);
            }
        }
        r.check(
            "stress: every block online again",
            if left.is_empty() {
                Ok(())
            } else {
                Err(format!("left offline: {left:?}"))
            },
        );
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

    // Holdings: every file is closed, every range freed.
    let t0 = Instant::now();
    let hold = loop {
        let h = faults::holdings();
        let same = matches!((&hold0, &h), (Ok(a), Ok(b)) if a == b);
        if same || t0.elapsed() > Duration::from_secs(3) {
            break h;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    r.check_note(
        "stress: stats held/gigantic and limits held_pages back to the baseline",
        match (&hold0, &hold) {
            (Ok(a), Ok(b)) if !a.contains_key("held_pages") => {
                Err(format!("no held_pages in {}: {b:?}", faults::LIMITS_PATH))
            }
            (Ok(a), Ok(b)) => {
                let d = faults::holdings_diff(a, b);
                if d.is_empty() {
                    Ok(b.iter()
                        .map(|(k, v)| format!("{k} {v}"))
                        .collect::<Vec<_>>()
                        .join(", "))
                } else {
                    Err(d.join(", "))
                }
            }
            (a, b) => Err(format!(
                "cannot read: before {:?}, after {:?}",
                a.as_ref().err(),
                b.as_ref().err()
            )),
        },
    );

    // Free memory per node: back within 1% of the node's free pages at
    // the start (at least 1024 pages), after the offline/online cycles.
    r.check_note(
        "stress: free pages of every node back within 1%",
        match &mem0 {
            Err(e) => Err(format!("{e:#}")),
            Ok(m0) => {
                let tol = m0
                    .free_pages
                    .values()
                    .filter(|&&p| p > 0)
                    .min()
                    .copied()
                    .unwrap_or(0)
                    / 100;
                let tol = tol.max(1024);
                match m0.settled(tol, u64::MAX / 4, 5000) {
                    Err(e) => Err(format!("{e:#}")),
                    Ok((m1, waited)) => {
                        let l = m0.losses(&m1, tol, u64::MAX / 4);
                        if l.is_empty() {
                            Ok(format!(
                                "tolerance {tol} pages, waited {waited} ms: {} -> {}",
                                m0.describe(),
                                m1.describe()
                            ))
                        } else {
                            Err(l.join("; "))
                        }
                    }
                }
            }
        },
    );

    r.check(
        "stress: a final open+mmap works",
        Tierkit::open()
            .and_then(|t| {
                t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, all)?;
                let m = t.map(16, 0)?;
                m.touch_pages();
                Ok(())
            })
            .map_err(|e| e.to_string()),
    );
    match kmsg {
        None => {
            r.fail("stress: no kernel report", "cannot open /dev/kmsg");
        }
        Some(k) => {
            let lines = k.drain();
            let crash = faults::crash_lines(&lines);
            r.check_note(
                "stress: no kernel report",
                if crash.is_empty() {
                    Ok(format!("{} kernel log lines", lines.len()))
                } else {
                    Err(crash.join(" | "))
                },
            );
        }
    }
    println!("# stress duration {dur:.1}s");
}
