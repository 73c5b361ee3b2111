//! ZONE_MOVABLE, at scale: the offline of a block holding thousands of
//! tierkit's 4 KiB pages against the kernel's own offline of a block
//! holding as many anonymous pages, measured side by side in one run,
//! while another thread of the process runs (so that each TLB flush of a
//! move is an IPI, as in `tk-test-rebalance-speed`). Checked: every page's
//! contents, and every page that was in the block now off it and off the
//! node; the time per page of the block's tierkit pages at most
//! [`MAX_RATIO`] times the kernel's per anonymous page.

use super::*;
use crate::benches::move_speed::{beside_spinner, fill, wrong, Speed};

/// Pages of each mapping: 64 MiB, half a 128 MiB block.
pub const SPEED_PAGES: usize = 16384;

/// Repetitions of each kind, alternating; the figures are the medians.
const REPS: usize = 3;

/// tierkit's offline time per page may be at most this many times the
/// kernel's.
pub const MAX_RATIO: f64 = 1.5;

/// A block that holds at least this share of a mapping's pages is
/// measured; fewer would let the block's other work weigh too much.
const MIN_SHARE: usize = 4;

/// The block holding most of `m`'s pages, and how many it holds.
fn fullest_block(m: &Mapping, block_bytes: u64) -> Result<(u64, usize), String> {
    let pfns = pagemap_pfns(m.addr(), m.nr_pages()).map_err(|e| format!("pagemap: {e}"))?;
    let (b, n) = blocks_of(&pfns, block_bytes)
        .into_iter()
        .max_by_key(|&(_, n)| n)
        .ok_or("no pfn in pagemap (not root?)")?;
    if n < m.nr_pages() / MIN_SHARE {
        return Err(format!(
            "the fullest block, memory{b}, holds {n} of {} pages",
            m.nr_pages()
        ));
    }
    Ok((b, n))
}

/// After the offline of block `b` of node `c`: the contents of
/// repetition `seed`, and every page of `m` off the block and off the
/// node (mapped again by the reads).
fn check_off(m: &Mapping, seed: u64, c: u32, b: u64, block_bytes: u64) -> Result<(), String> {
    match wrong(m, seed) {
        0 => {}
        n => return Err(format!("{n} of {} pages lost their contents", m.nr_pages())),
    }
    let pfns = pagemap_pfns(m.addr(), m.nr_pages()).map_err(|e| format!("pagemap: {e}"))?;
    let nodes = m.page_nodes().map_err(|e| format!("move_pages: {e}"))?;
    let inside = pfns
        .iter()
        .flatten()
        .filter(|&&p| block_of_pfn(p, block_bytes) == b)
        .count();
    let on_c = nodes.iter().filter(|&&n| n == c as i32).count();
    let absent = pfns.iter().filter(|p| p.is_none()).count();
    if inside != 0 || absent != 0 {
        return Err(format!(
            "{inside} pages still in memory{b}, {absent} not present"
        ));
    }
    if on_c != 0 || nodes.len() != m.nr_pages() {
        return Err(format!("{on_c} of {} pages still on node {c}", nodes.len()));
    }
    Ok(())
}

/// Offlines the fullest block of `m` (filled with repetition `seed`'s
/// pattern on node `c`; `tierkit`: a tierkit mapping), checks the pages,
/// onlines the block again. The offline's ns scaled to [`SPEED_PAGES`]
/// pages in the block.
fn offline_once(
    t: &mut T,
    what: &str,
    m: &Mapping,
    c: u32,
    seed: u64,
    tierkit: bool,
) -> Result<u64, String> {
    let (b, n) = fullest_block(m, t.block_bytes)?;
    let tm = t
        .offline(what, b, if tierkit { n } else { 0 })
        .ok_or_else(|| format!("offline memory{b}: not tried"))?;
    let res = match tm.outcome {
        Outcome::Done => check_off(m, seed, c, b, t.block_bytes),
        o => Err(format!(
            "offline memory{b} holding {n} pages: {}",
            o.describe()
        )),
    };
    t.online_all(what);
    res?;
    Ok((tm.elapsed.as_nanos() as u64).saturating_mul(SPEED_PAGES as u64) / n as u64)
}

/// tierkit: a fresh 4 KiB mapping on `c`, filled, its fullest block offlined.
fn tierkit_once(t: &mut T, c: u32, seed: u64) -> Result<u64, String> {
    let what = "offline speed, tierkit";
    let tk = Tierkit::open().map_err(|e| format!("{what}: open: {}", errno_name(&e)))?;
    tk.set_policy(TK_MODE_INTERLEAVE, 1u64 << c)
        .map_err(|e| format!("{what}: TK_IOC_SET_POLICY: {}", errno_name(&e)))?;
    let m = tk
        .map(SPEED_PAGES, 0)
        .map_err(|e| format!("{what}: mmap: {}", errno_name(&e)))?;
    fill(&m, seed);
    offline_once(t, what, &m, c, seed, true).map_err(|e| format!("{what}: {e}"))
}

/// The kernel: an anonymous mapping of order-0 pages bound to `c`,
/// filled, its fullest block offlined (the kernel migrates the pages).
fn kernel_once(t: &mut T, c: u32, seed: u64) -> Result<u64, String> {
    let what = "offline speed, anonymous";
    let m = Mapping::anon(SPEED_PAGES * PAGE_SIZE).map_err(|e| format!("{what}: mmap: {e}"))?;
    m.no_huge().map_err(|e| format!("{what}: no THP: {e}"))?;
    m.mbind(crate::linux::sys::MPOL_BIND, 1 << c, 0)
        .map_err(|e| format!("{what}: mbind: {e}"))?;
    fill(&m, seed);
    offline_once(t, what, &m, c, seed, false).map_err(|e| format!("{what}: {e}"))
}

/// One warm-up of each (dropped), then [`REPS`] of each, alternating.
fn measure(t: &mut T, c: u32) -> Result<Speed, String> {
    let mut s = Speed {
        pages: SPEED_PAGES,
        tierkit_ns: Vec::new(),
        kernel_ns: Vec::new(),
    };
    tierkit_once(t, c, 0)?;
    kernel_once(t, c, 0)?;
    for rep in 1..=REPS as u64 {
        if rep % 2 == 0 {
            s.kernel_ns.push(kernel_once(t, c, rep)?);
            s.tierkit_ns.push(tierkit_once(t, c, rep)?);
        } else {
            s.tierkit_ns.push(tierkit_once(t, c, rep)?);
            s.kernel_ns.push(kernel_once(t, c, rep)?);
        }
    }
    Ok(s)
}

/// The offline of a block full of tierkit's pages, timed against the
/// kernel's offline of a block full of anonymous pages (see the module
/// docs).
pub fn speed_case(t: &mut T, c: u32) {
    let name = format!(
        "movable node {c}: offline of a block of {SPEED_PAGES}-page mappings: every page kept and \
         moved off, time per page at most {MAX_RATIO}x the kernel's for anonymous pages, a \
         thread running"
    );
    let online = t.topo.online.clone();
    let dist = node_distances(c, &online);
    let Some(to) = first_fallback(c, &t.topo.memory, &dist, &t.topo.cpu) else {
        t.r.fail(&name, "no other node with memory");
        return;
    };
    match beside_spinner(|| measure(t, c)) {
        Ok(s) => {
            let ms = |v: &[u64]| v.iter().map(|n| n / 1_000_000).collect::<Vec<_>>();
            let line = format!(
                "offline of a block of node {c} (its pages to node {to}), per page in the block: \
                 tierkit {:.1} us, anonymous (the kernel's migration) {:.1} us, ratio {:.2} \
                 (medians of {REPS}; ms for {SPEED_PAGES} pages: tierkit {:?}, anonymous {:?})",
                s.tierkit_per_page() / 1e3,
                s.kernel_per_page() / 1e3,
                s.ratio(),
                ms(&s.tierkit_ns),
                ms(&s.kernel_ns)
            );
            let ok = if s.ratio() <= MAX_RATIO {
                Ok(())
            } else {
                Err(format!("ratio {:.2}: {line}", s.ratio()))
            };
            t.r.check(&name, ok);
            t.r.note(line);
        }
        Err(e) => {
            t.r.fail(&name, e);
        }
    }
}
