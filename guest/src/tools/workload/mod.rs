//! What placement does to real work: the shared parts of `tk-calibrate`
//! and `tk-workload` (and `tk-bench-all`, which runs every benchmark in
//! one boot).
//!
//! - this file: placements ([`Placement`], [`Region`]: a working set
//!   allocated and populated under a policy, kernel or tierkit), threads
//!   pinned to a node's nearest CPUs ([`run_threads`]), a small RNG
//!   ([`Rng`], from [`crate::harness::rng`]),
//!   command-line flags ([`Flags`]);
//! - [`calib`]: per-node read, write and triad bandwidth and load latency,
//!   the regime probe, HMAT side by side, and the weights each gives;
//! - [`kernels`]: the XSBench-style lookup kernel, the STREAM-style
//!   bandwidth kernels and the page_fault2-style fault kernel;
//! - [`rows`]: the rows of `cargo xtask bench`'s report (`topology`,
//!   `workload`, `policy`, `unit`, `measured`, `predicted`, `regime`).
//!
//! Everything here also runs on bare metal: the guest-sized defaults apply
//! only when `$TIERKIT_MODE` is set (the guest's `/init` sets it).

pub mod calib;
pub mod cli;
pub mod compare;
pub mod kernels;
pub mod rows;

use crate::abi::tk::{Tierkit, TK_MODE_WEIGHTED_INTERLEAVE};
use crate::linux::sys::{self, Mapping, PAGE_SIZE};
use crate::topology::node::{parse_list, Topology, NODE_SYSFS};
use anyhow::{bail, Context, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;

/// Whether we run in tierkit's QEMU guest (`/init` exports `TIERKIT_MODE`):
/// then the defaults are small enough for TCG.
pub fn in_guest() -> bool {
    std::env::var_os("TIERKIT_MODE").is_some()
}

// ---------------------------------------------------------------------------
// RNG
// ---------------------------------------------------------------------------

pub use crate::harness::rng::SplitMix as Rng;

// ---------------------------------------------------------------------------
// CPUs and threads
// ---------------------------------------------------------------------------

/// The CPUs of node `nid` (`nodeN/cpulist`), empty for a CPU-less node.
pub fn node_cpus(nid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("{NODE_SYSFS}/node{nid}/cpulist"))
        .ok()
        .and_then(|s| parse_list(&s).ok())
        .unwrap_or_default()
}

/// The node with CPUs nearest to `nid` by `nodeN/distance` (itself if it
/// has CPUs; lowest id on ties; `None` if no node has CPUs). The distance
/// file lists one distance per online node, in node order.
pub fn nearest_cpu_node(topo: &Topology, nid: u32) -> Option<u32> {
    if topo.cpu.contains(&nid) {
        return Some(nid);
    }
    let dist: Vec<u32> = std::fs::read_to_string(format!("{NODE_SYSFS}/node{nid}/distance"))
        .map(|s| {
            s.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    nearest_by_distance(&topo.online, &dist, &topo.cpu)
}

/// [`nearest_cpu_node`] on parsed inputs: `dist[k]` is the distance to
/// `online[k]`.
pub fn nearest_by_distance(online: &[u32], dist: &[u32], cpu_nodes: &[u32]) -> Option<u32> {
    let mut best: Option<(u32, u32)> = None;
    for (k, &n) in online.iter().enumerate() {
        if !cpu_nodes.contains(&n) {
            continue;
        }
        let d = dist.get(k).copied().unwrap_or(u32::MAX);
        if best.is_none_or(|(bd, bn)| d < bd || (d == bd && n < bn)) {
            best = Some((d, n));
        }
    }
    best.map(|b| b.1).or_else(|| cpu_nodes.first().copied())
}

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: u32) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes inside it
    // (cpu < CPU_SETSIZE is checked by the macro's implementation).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A raw pointer that may cross threads: the benchmark threads work on
/// disjoint parts of one mapping, which outlives them.
#[derive(Clone, Copy, Debug)]
pub struct SendPtr(pub *mut u8);
impl SendPtr {
    /// The pointer (a method, so that closures capture the whole
    /// `SendPtr`, not its `*mut u8` field).
    pub fn ptr(self) -> *mut u8 {
        self.0
    }
}

// SAFETY: only ever dereferenced within a live mapping, by threads that
// write disjoint ranges (or only read).
unsafe impl Send for SendPtr {}
// SAFETY: as above.
unsafe impl Sync for SendPtr {}

/// Runs `f(i)` on `threads` threads, thread `i` pinned to
/// `cpus[i % cpus.len()]` (unpinned if `cpus` is empty), all released at
/// once. Returns the wall time from the first start to the last end, in
/// ns, and each thread's result.
pub fn run_threads<R, F>(cpus: &[u32], threads: usize, f: F) -> (u64, Vec<R>)
where
    R: Send,
    F: Fn(usize) -> R + Sync,
{
    run_threads_prep(cpus, threads, |_| {}, f)
}

/// [`run_threads`] with `prep(i)` run on each thread, pinned, before the
/// common start (not timed).
pub fn run_threads_prep<R, P, F>(cpus: &[u32], threads: usize, prep: P, f: F) -> (u64, Vec<R>)
where
    R: Send,
    P: Fn(usize) + Sync,
    F: Fn(usize) -> R + Sync,
{
    let threads = threads.max(1);
    let barrier = Barrier::new(threads);
    let out: Vec<(u64, u64, R)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|i| {
                let (f, prep, barrier) = (&f, &prep, &barrier);
                s.spawn(move || {
                    if !cpus.is_empty() {
                        let _ = pin_to_cpu(cpus[i % cpus.len()]);
                    }
                    prep(i);
                    barrier.wait();
                    let t0 = sys::monotonic_ns();
                    let r = f(i);
                    (t0, sys::monotonic_ns(), r)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("benchmark thread panicked"))
            .collect()
    });
    let start = out.iter().map(|o| o.0).min().unwrap_or(0);
    let end = out.iter().map(|o| o.1).max().unwrap_or(0);
    (
        end.saturating_sub(start).max(1),
        out.into_iter().map(|o| o.2).collect(),
    )
}

/// Whether [`settle`] runs (`--no-settle` turns it off).
static SETTLE: AtomicBool = AtomicBool::new(true);

/// Turns [`settle`] on or off for this process.
pub fn set_settle(on: bool) {
    SETTLE.store(on, Ordering::Relaxed);
}

/// A full TLB flush of this CPU: unmapping more than the kernel's
/// `tlb_single_page_flush_ceiling` (33 pages) of a touched mapping makes
/// it flush the whole TLB instead of page by page (a CR3 write on x86).
pub fn flush_tlb() {
    if let Ok(m) = Mapping::anon(64 * PAGE_SIZE) {
        m.touch_pages();
    }
}

/// Gets the calling CPU's TLB ready for `len` bytes at `base`: eight
/// times, a read of one word per page, then a full flush.
///
/// Why: QEMU's TCG keeps a software TLB per vCPU whose size it changes
/// only at a full flush (doubling it when the last window used more than
/// 70% of it). A working set measured without a flush in between can stay
/// stuck with a TLB far smaller than its pages, and runs at about half
/// speed for the whole block: identical placements then differ by 2x.
/// On hardware this costs a few milliseconds and changes nothing.
pub fn settle(base: SendPtr, len: usize) {
    if !SETTLE.load(Ordering::Relaxed) {
        return;
    }
    for _ in 0..8 {
        let mut x = 0u8;
        let mut off = 0;
        while off < len {
            // SAFETY: inside the caller's live mapping.
            x ^= unsafe { std::ptr::read_volatile(base.ptr().add(off)) };
            off += PAGE_SIZE;
        }
        std::hint::black_box(x);
        flush_tlb();
    }
}

/// [`run_threads`], each thread first (before the clock starts) running
/// [`settle`] on `[base, base + len)` on its CPU.
pub fn run_threads_settled<R, F>(
    cpus: &[u32],
    threads: usize,
    base: SendPtr,
    len: usize,
    f: F,
) -> (u64, Vec<R>)
where
    R: Send,
    F: Fn(usize) -> R + Sync,
{
    run_threads_prep(cpus, threads, |_| settle(base, len), f)
}

/// `[lo, hi)` of part `i` of `n` equal parts of `len` items.
pub fn part(len: usize, n: usize, i: usize) -> (usize, usize) {
    let n = n.max(1);
    (len * i / n, len * (i + 1) / n)
}

// ---------------------------------------------------------------------------
// Placements
// ---------------------------------------------------------------------------

/// How a working set is placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// The default policy: the faulting CPU's node.
    Local,
    /// `MPOL_BIND` to one node.
    Bind(u32),
    /// The kernel's `MPOL_INTERLEAVE` over a nodemask.
    KernelInterleave(u64),
    /// The kernel's `MPOL_WEIGHTED_INTERLEAVE` over a nodemask, with the
    /// kernel's current weights.
    KernelWeighted(u64),
    /// Blocks of pages bound with `MPOL_BIND`, repeating: `(node, pages)`
    /// per cycle. The page layout of weighted interleave with those
    /// weights, without touching anybody's weight table (the regime probe
    /// uses it).
    Pattern(Vec<(u32, u32)>),
    /// `/dev/tierkit` in weighted-interleave mode over a nodemask, with
    /// tierkit's weights at the time of the mapping.
    Tierkit(u64),
}

impl Placement {
    pub fn describe(&self) -> String {
        use crate::topology::node::fmt_mask;
        match self {
            Placement::Local => "local".into(),
            Placement::Bind(n) => format!("bind:{n}"),
            Placement::KernelInterleave(m) => format!("MPOL_INTERLEAVE {}", fmt_mask(*m)),
            Placement::KernelWeighted(m) => format!("MPOL_WEIGHTED_INTERLEAVE {}", fmt_mask(*m)),
            Placement::Pattern(p) => {
                let v: Vec<String> = p.iter().map(|(n, w)| format!("{n}:{w}")).collect();
                format!("bind blocks {{{}}}", v.join(","))
            }
            Placement::Tierkit(m) => format!("/dev/tierkit {}", fmt_mask(*m)),
        }
    }
}

/// A working set: `len` bytes, every page present and zeroed, placed as
/// asked. Unmapped (and for tierkit, the file closed) on drop.
#[derive(Debug)]
pub struct Region {
    map: Mapping,
    _tk: Option<Tierkit>,
}

/// Most VMAs a [`Placement::Pattern`] may create (max_map_count is 65530).
const MAX_PATTERN_VMAS: usize = 16384;

impl Region {
    /// Allocates `len` bytes (rounded up to pages) under `placement` and
    /// faults every page in (kernel policies: one write per page, in
    /// address order; tierkit: all pages at mmap).
    pub fn new(placement: &Placement, len: usize) -> Result<Region> {
        let pages = len.div_ceil(PAGE_SIZE).max(1);
        let len = pages * PAGE_SIZE;
        if let Placement::Tierkit(mask) = placement {
            let t = Tierkit::open().context("open /dev/tierkit")?;
            t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, *mask)
                .context("TK_IOC_SET_POLICY")?;
            let map = t
                .map(pages, 0)
                .with_context(|| format!("mmap of {} MiB of /dev/tierkit", len >> 20))?;
            return Ok(Region { map, _tk: Some(t) });
        }
        let map = Mapping::anon(len).context("mmap")?;
        map.no_huge().context("MADV_NOHUGEPAGE")?;
        match placement {
            Placement::Local => {}
            Placement::Bind(n) => map
                .mbind(sys::MPOL_BIND, 1u64 << n, 0)
                .with_context(|| format!("mbind MPOL_BIND node {n}"))?,
            Placement::KernelInterleave(m) => map
                .mbind(sys::MPOL_INTERLEAVE, *m, 0)
                .context("mbind MPOL_INTERLEAVE")?,
            Placement::KernelWeighted(m) => map
                .mbind(sys::MPOL_WEIGHTED_INTERLEAVE, *m, 0)
                .context("mbind MPOL_WEIGHTED_INTERLEAVE")?,
            Placement::Pattern(p) => {
                let cycle: usize = p.iter().map(|x| x.1 as usize).sum();
                if cycle == 0 {
                    bail!("empty pattern");
                }
                // Coarser blocks (same fractions) if the pattern would
                // make too many VMAs.
                let vmas = pages.div_ceil(cycle) * p.len();
                let scale = vmas.div_ceil(MAX_PATTERN_VMAS).max(1);
                let mut page = 0usize;
                'outer: loop {
                    for &(n, w) in p {
                        if w == 0 {
                            continue;
                        }
                        let k = (w as usize * scale).min(pages - page);
                        sys::mbind(
                            map.addr() + page * PAGE_SIZE,
                            k * PAGE_SIZE,
                            sys::MPOL_BIND,
                            1u64 << n,
                            0,
                        )
                        .with_context(|| format!("mbind pages {page}.. to node {n}"))?;
                        page += k;
                        if page >= pages {
                            break 'outer;
                        }
                    }
                }
            }
            Placement::Tierkit(_) => unreachable!(),
        }
        map.touch_pages();
        Ok(Region { map, _tk: None })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.map.as_ptr()
    }

    /// The `/dev/tierkit` file behind a [`Placement::Tierkit`] region.
    pub fn tierkit(&self) -> Option<&Tierkit> {
        self._tk.as_ref()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Pages per node, by move_pages(2): `(node, pages)` ascending
    /// (negative statuses under -1).
    pub fn node_pages(&self) -> Result<Vec<(i32, usize)>> {
        let nodes = self.map.page_nodes().context("move_pages")?;
        Ok(crate::topology::interleave::per_node_counts(&nodes))
    }

    /// The node of each page, by move_pages(2) (negative: a status).
    pub fn page_nodes(&self) -> Result<Vec<i32>> {
        self.map.page_nodes().context("move_pages")
    }

    /// Runs of physically consecutive pages (by `/proc/self/pagemap`;
    /// needs CAP_SYS_ADMIN, else `None`): 1 for a physically contiguous
    /// region, the page count for a fully scattered one. A diagnostic:
    /// under QEMU TCG a guest-physically scattered working set can run
    /// slower than a contiguous one on the same node (host TLB).
    pub fn pfn_runs(&self) -> Option<usize> {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::open("/proc/self/pagemap").ok()?;
        let pages = self.len() / crate::linux::sys::PAGE_SIZE;
        let mut buf = vec![0u8; pages * 8];
        let off = (self.as_ptr() as usize / crate::linux::sys::PAGE_SIZE * 8) as u64;
        f.read_exact_at(&mut buf, off).ok()?;
        let pfns: Vec<u64> = buf
            .chunks_exact(8)
            .map(|b| {
                let e = u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
                if e >> 63 == 1 {
                    e & ((1 << 55) - 1)
                } else {
                    0
                }
            })
            .collect();
        if pfns.is_empty() || pfns.iter().all(|&p| p == 0) {
            return None;
        }
        Some(1 + pfns.windows(2).filter(|w| w[1] != w[0] + 1).count())
    }

    /// Zero-fills nothing, copies `src` to byte offset `off`.
    pub fn write_at<T: Copy>(&self, off: usize, src: &[T]) {
        let bytes = std::mem::size_of_val(src);
        assert!(off + bytes <= self.len(), "write past the region");
        // SAFETY: in bounds (checked), the region is a live RW mapping
        // that does not overlap `src` (a separate allocation).
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr() as *const u8, self.as_ptr().add(off), bytes)
        };
    }
}

/// Per-node page counts as model amounts (node ids < 64).
pub fn amounts_of(pages: &[(i32, usize)]) -> [f64; 64] {
    let mut a = [0.0; 64];
    for &(n, c) in pages {
        if (0..64).contains(&n) {
            a[n as usize] += c as f64;
        }
    }
    a
}

/// `0:768 1:256`.
pub fn fmt_pages(pages: &[(i32, usize)]) -> String {
    pages
        .iter()
        .map(|(n, c)| format!("{n}:{c}"))
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------
// Flags
// ---------------------------------------------------------------------------

/// The `--flag value` / `--flag=value` / `--switch` flags of the
/// benchmark binaries, parsed by clap (the crate's one argument parser, as
/// `tk-fuzz`, `tk-stress` and the positional arguments of the other
/// binaries use it) from the names a binary knows. A flag given twice
/// keeps its last value.
#[derive(Clone, Debug, Default)]
pub struct Flags {
    pairs: Vec<(String, Option<String>)>,
}

impl Flags {
    /// The program's own arguments parsed ([`Flags::parse`]); on bad input
    /// one `BIN: why` message on stderr and the exit code 2 to return from
    /// `main`.
    pub fn from_args(
        bin: &'static str,
        switches: &[&'static str],
        known: &[&'static str],
    ) -> std::result::Result<Flags, std::process::ExitCode> {
        Flags::from_args_or_usage(bin, switches, known, || {})
    }

    /// [`Flags::from_args`], with `usage` run after the `BIN: why` message
    /// on bad input (`tk-calibrate`, `tk-workload`).
    pub fn from_args_or_usage(
        bin: &'static str,
        switches: &[&'static str],
        known: &[&'static str],
        usage: impl FnOnce(),
    ) -> std::result::Result<Flags, std::process::ExitCode> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        Flags::parse(bin, &args, switches, known).map_err(|e| {
            eprintln!("{bin}: {e:#}");
            usage();
            std::process::ExitCode::from(2)
        })
    }

    /// Parses `args` (without the program name) with clap: each name of
    /// `known` is a `--name` flag with one value, but those of `switches`,
    /// which take none. Anything else (an unknown flag, a flag without its
    /// value, a bare word) is an error.
    pub fn parse(
        bin: &'static str,
        args: &[String],
        switches: &[&'static str],
        known: &[&'static str],
    ) -> Result<Flags> {
        use clap::{Arg, ArgAction, Command};
        let cmd = known.iter().fold(
            Command::new(bin)
                .no_binary_name(true)
                .disable_help_flag(true)
                .disable_version_flag(true)
                .args_override_self(true),
            |cmd, &name| {
                let arg = Arg::new(name).long(name);
                cmd.arg(if switches.contains(&name) {
                    arg.action(ArgAction::SetTrue)
                } else {
                    arg.action(ArgAction::Set).allow_hyphen_values(true)
                })
            },
        );
        let m = cmd
            .try_get_matches_from(args)
            .map_err(|e| anyhow::anyhow!("{}", e.render().to_string().trim_end()))?;
        let pairs = known
            .iter()
            .filter_map(|&name| {
                if switches.contains(&name) {
                    m.get_flag(name).then(|| (name.to_string(), None))
                } else {
                    m.get_one::<String>(name)
                        .map(|v| (name.to_string(), Some(v.clone())))
                }
            })
            .collect();
        Ok(Flags { pairs })
    }

    pub fn has(&self, name: &str) -> bool {
        self.pairs.iter().any(|p| p.0 == name)
    }

    /// The last value of `--name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|p| p.0 == name)
            .and_then(|p| p.1.as_deref())
    }

    pub fn parse_or<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T>
    where
        T::Err: std::fmt::Display,
    {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|e| anyhow::anyhow!("--{name} {v:?}: {e}")),
        }
    }

    /// A size such as `16M`, `1G`, `4096` (bytes), `512K`.
    pub fn size_or(&self, name: &str, default: usize) -> Result<usize> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => parse_size(v).with_context(|| format!("--{name} {v:?}")),
        }
    }

    /// A list separated by commas or `+` (the guest's kernel command line
    /// turns commas into spaces, see `tk-bench-all`).
    pub fn list(&self, name: &str) -> Option<Vec<String>> {
        self.get(name).map(|v| {
            v.split([',', '+'])
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
    }
}

/// `16M` -> 16 MiB; suffixes K, M, G (powers of 1024), none = bytes.
pub fn parse_size(s: &str) -> Result<usize> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1usize << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                _ => bail!("unknown size suffix {c:?}"),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    let n: f64 = num.parse().with_context(|| format!("bad size {s:?}"))?;
    if !(n.is_finite() && n > 0.0) {
        bail!("bad size {s:?}");
    }
    Ok((n * mult as f64) as usize)
}

/// `16 MiB`, `1.5 GiB`, `512 KiB`.
pub fn fmt_size(b: usize) -> String {
    if b >= 1 << 30 {
        format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
    } else if b >= 1 << 20 {
        format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64)
    } else {
        format!("{:.0} KiB", b as f64 / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest() {
        // node 2 (CPU-less): distances to online 0, 2 are 20, 10.
        assert_eq!(nearest_by_distance(&[0, 2], &[20, 10], &[0]), Some(0));
        assert_eq!(
            nearest_by_distance(&[0, 1, 2], &[20, 30, 10], &[0, 1]),
            Some(0)
        );
        assert_eq!(
            nearest_by_distance(&[0, 1, 2], &[30, 20, 10], &[0, 1]),
            Some(1)
        );
        assert_eq!(
            nearest_by_distance(&[0, 1, 2], &[20, 20, 10], &[1, 0]),
            Some(0)
        );
        assert_eq!(nearest_by_distance(&[2], &[10], &[]), None);
    }

    #[test]
    fn parts_cover_everything() {
        let mut next = 0;
        for i in 0..3 {
            let (lo, hi) = part(10, 3, i);
            assert_eq!(lo, next);
            next = hi;
        }
        assert_eq!(next, 10);
    }

    #[test]
    fn flags() {
        let a: Vec<String> = ["--size", "16M", "--threads=2", "--quiet", "--x", "a,b"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let known = ["size", "threads", "quiet", "x"];
        let f = Flags::parse("tk-x", &a, &["quiet"], &known).unwrap();
        assert_eq!(f.size_or("size", 0).unwrap(), 16 << 20);
        assert_eq!(f.parse_or("threads", 1usize).unwrap(), 2);
        assert!(f.has("quiet"));
        assert_eq!(f.list("x").unwrap(), vec!["a", "b"]);
        let g = Flags::parse(
            "tk-x",
            &["--x".to_string(), "a+bind:0".to_string()],
            &[],
            &["x"],
        )
        .unwrap();
        assert_eq!(g.list("x").unwrap(), vec!["a", "bind:0"]);
        assert!(!g.has("size"));
        // The last of a repeated flag; a value may start with a dash.
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let h = Flags::parse("tk-x", &args(&["--x", "1", "--x=-2"]), &[], &["x"]).unwrap();
        assert_eq!(h.get("x"), Some("-2"));
        assert!(Flags::parse("tk-x", &a, &["quiet"], &["size"]).is_err());
        assert!(Flags::parse("tk-x", &args(&["--size"]), &[], &["size"]).is_err());
        assert!(Flags::parse("tk-x", &args(&["size"]), &[], &["size"]).is_err());
        assert!(Flags::parse("tk-x", &args(&["--quiet=1"]), &["quiet"], &["quiet"]).is_err());
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("1.5k").unwrap(), 1536);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("1X").is_err());
        assert!(parse_size("-1").is_err());
        assert_eq!(fmt_size(16 << 20), "16 MiB");
    }

    #[test]
    fn regions_on_the_host() {
        // Local and a pattern bound to node 0 work on any Linux host.
        let r = Region::new(&Placement::Local, 3 * PAGE_SIZE + 1).unwrap();
        assert_eq!(r.len(), 4 * PAGE_SIZE);
        r.write_at(8, &[1u64, 2]);
        // SAFETY: in bounds of the region.
        assert_eq!(unsafe { *(r.as_ptr().add(16) as *const u64) }, 2);
        if let Ok(p) = r.node_pages() {
            assert_eq!(p.iter().map(|x| x.1).sum::<usize>(), 4);
        }
        if let Ok(r) = Region::new(&Placement::Pattern(vec![(0, 3), (0, 1)]), 9 * PAGE_SIZE) {
            if let Ok(p) = r.node_pages() {
                assert_eq!(p, vec![(0, 9)]);
            }
        }
        let a = amounts_of(&[(0, 3), (2, 1), (-1, 5)]);
        assert_eq!((a[0], a[1], a[2]), (3.0, 0.0, 1.0));
        assert_eq!(fmt_pages(&[(0, 3), (2, 1)]), "0:3 2:1");
    }

    #[test]
    fn settle_reads_and_flushes() {
        let r = Region::new(&Placement::Local, 8 * PAGE_SIZE).unwrap();
        settle(SendPtr(r.as_ptr()), r.len());
        let (_, v) = run_threads_settled(&[], 2, SendPtr(r.as_ptr()), r.len(), |i| i);
        assert_eq!(v, vec![0, 1]);
    }

    #[test]
    fn threads_run_and_report() {
        let (ns, r) = run_threads(&[], 3, |i| i * 2);
        assert!(ns >= 1);
        assert_eq!(r, vec![0, 2, 4]);
    }
}
