//! Weighted interleave: the node selection of `MPOL_WEIGHTED_INTERLEAVE` and
//! `MPOL_INTERLEAVE`, with the exact semantics of Linux 7.3 `mm/mempolicy.c`.
//!
//! This file is compiled twice: into the host crate `tierkit-core` (tested
//! there against literal ports of the kernel's C, see `core/tests/`), and into
//! `tierkit.ko` via `#[path]`. Hence: `core::` only, no allocation, no floating
//! point, no crate-level attributes, and no panic on any input (no unchecked
//! indexing, no arithmetic that can overflow, no division by a possible zero).
//!
//! What is mirrored, function by function (all in mm/mempolicy.c unless said):
//!
//! | kernel                                   | here                                   |
//! |------------------------------------------|----------------------------------------|
//! | `get_il_weight`                          | [`Weights::get`]                       |
//! | `node_store` (sysfs `nodeN`)             | [`parse_weight`], [`Weights::set`]     |
//! | `weighted_interleave_auto_store`         | [`parse_bool_auto`]                    |
//! | `mempolicy_set_node_perf`                | [`bw_from_coords`]                     |
//! | `reduce_interleave_weights`              | [`reduce_interleave_weights`]          |
//! | `mpol_set_nodemask` + `mpol_new_nodemask`| [`effective_nodemask`]                 |
//! | `mpol_rebind_nodemask` (static nodes)    | [`cpuset_nodemask`]                    |
//! | `get_vma_policy` (the ilx)               | [`vma_ilx`]                            |
//! | `weighted_interleave_nid`                | [`weighted_interleave_nid_ref`], [`Selector`] |
//! | `interleave_nid`                         | [`interleave_nid_ref`], [`Selector::interleave`] |
//! | `weighted_interleave_nodes`              | [`TaskState::next`]                    |
//! | `interleave_nodes`                       | [`TaskState::next_plain`]              |
//! | `alloc_pages_bulk_weighted_interleave`   | [`bulk_plan`], [`bulk_split`]          |
//! | include/linux/nodemask.h                 | [`Nodemask`]                           |
//!
//! In the module, include it at the crate root as
//! `#[path = "../core/src/interleave.rs"] pub mod interleave;`: `pub` keeps
//! the kernel's `-Wunreachable_pub` quiet and the items it does not use free
//! of dead-code warnings. Checked against the kernel's Rust lint set
//! (`rust_common_flags`, incl. `clippy::cast_lossless`) and, built with
//! `-Coverflow-checks=y -Copt-level=2`, its object references no panic
//! function at all.

use crate::nodemask::NODE_IDX;
pub use crate::nodemask::{Nodemask, WeightError, MAX_NUMNODES};

/// The largest possible sum of weights over a mask: 64 nodes × 255.
pub const MAX_WEIGHT_TOTAL: u32 = MAX_NUMNODES as u32 * 255;

pub use crate::weights::{
    bw_from_coords, parse_bool_auto, parse_weight, reduce_interleave_weights, Weights,
};

/// The effective nodemask of a new policy, as `mpol_set_nodemask` computes
/// it for `MPOL_(WEIGHTED_)INTERLEAVE` without `MPOL_F_RELATIVE_NODES`:
/// `requested ∩ has_memory`, where the caller passes the nodes with memory
/// that the calling task's cpuset allows (`cpuset_current_mems_allowed ∩
/// N_MEMORY`), and `-EINVAL` if that is empty (`mpol_new` for an empty
/// request, `mpol_new_nodemask` for an empty intersection).
pub const fn effective_nodemask(
    requested: Nodemask,
    has_memory: Nodemask,
) -> Result<Nodemask, WeightError> {
    let eff = requested.and(has_memory);
    if eff.is_empty() {
        Err(WeightError::Invalid)
    } else {
        Ok(eff)
    }
}

/// The nodes an allocation places over, for a policy over `mask`, by a
/// task whose cpuset allows `mems` (`cpuset_current_mems_allowed`), with
/// `memory` the nodes that have memory now. A file's policy is set once, by
/// whichever task, and its mask was cut to that task's cpuset then
/// ([`effective_nodemask`]); a task in another cpuset, or one whose cpuset
/// changed since, allocates only on nodes its cpuset allows: the mask
/// without the nodes with memory outside `mems`. A node of the mask that
/// has no memory now (offlined) is not the cpuset's to remove: it stays,
/// and an allocation that picks it fails as without cpusets. If no node of
/// the mask is left, the allowed nodes with memory, as the kernel's
/// `mpol_rebind_nodemask()` does for a static nodemask
/// (`MPOL_F_STATIC_NODES`) with no node left in a new cpuset; and `mask` if
/// there are none either, so that a non-empty mask never gives an empty
/// result. Without cpusets, or in the root cpuset (`mems` ⊇ `memory`), it
/// is `mask`: placement is the kernel's, page by page.
pub const fn cpuset_nodemask(mask: Nodemask, mems: Nodemask, memory: Nodemask) -> Nodemask {
    let refused = Nodemask(memory.0 & !mems.0);
    let kept = Nodemask(mask.0 & !refused.0);
    let fallback = mems.and(memory);
    if !kept.is_empty() {
        kept
    } else if !fallback.is_empty() {
        fallback
    } else {
        mask
    }
}

/// The interleave index of page `page_delta` of a mapping that starts at file
/// page offset `pgoff`, for a folio of `order`: `get_vma_policy` computes
/// `(vma_start_pgoff >> order) + (linear_page_delta >> order)` in `pgoff_t`,
/// i.e. wrapping `u64` arithmetic. Orders `>= 64` give 0 for that part.
pub const fn vma_ilx(pgoff: u64, page_delta: u64, order: u32) -> u64 {
    let a = match pgoff.checked_shr(order) {
        Some(v) => v,
        None => 0,
    };
    let b = match page_delta.checked_shr(order) {
        Some(v) => v,
        None => 0,
    };
    a.wrapping_add(b)
}

// ---------------------------------------------------------------------------
// Address path (weighted_interleave_nid, interleave_nid)
// ---------------------------------------------------------------------------

/// `weighted_interleave_nid(pol, ilx)`, a straight port of the kernel's walk:
/// `total` = Σ weights over `mask`; `target = ilx % total`; from the first
/// node, subtract each node's weight until `target` fits. `None` for an
/// empty mask (where the kernel returns `numa_node_id()`).
///
/// This is the reference; [`Selector`] is the fast equivalent.
pub fn weighted_interleave_nid_ref(mask: Nodemask, weights: &Weights, ilx: u64) -> Option<usize> {
    let mut nid = mask.first()?;
    let weight_total = u64::from(weights.total(mask));
    // weight_total >= 1 for a non-empty mask.
    let mut target = ilx.checked_rem(weight_total)? as u32;
    while target != 0 {
        let weight = u32::from(weights.get(nid));
        if target < weight {
            break;
        }
        target -= weight;
        nid = mask.next_in(nid)?;
    }
    Some(nid)
}

/// `interleave_nid(pol, ilx)`: the `(ilx % nodes_weight)`th node of the mask.
/// `None` for an empty mask (the kernel: `numa_node_id()`).
pub fn interleave_nid_ref(mask: Nodemask, ilx: u64) -> Option<usize> {
    let nnodes = u64::from(mask.weight());
    let target = ilx.checked_rem(nnodes)?;
    let mut nid = mask.first()?;
    for _ in 0..target {
        nid = mask.next_after(nid)?;
    }
    Some(nid)
}

/// Fast `ilx % total` without a division: Lemire, Kaser & Kurz, "Faster
/// remainder by direct computation" (2019), Theorem 1 with F = 64.
///
/// `ilx` is first folded to `x = (ilx >> 32) * (2^32 % d) + (ilx & 0xffff_ffff)`,
/// which is `≡ ilx (mod d)` and `< 2^47` for `d <= 2^14`; the theorem then
/// holds for numerators `< 2^N` with `d <= 2^(64-N)`, here N = 47 and
/// `d <= 16320 < 2^17`. All arithmetic is in `u64`; no `u128` (whose
/// division the kernel lacks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FastMod {
    d: u64,
    /// ceil(2^64 / d), or 0 for d == 1 (then everything is 0).
    m: u64,
    /// 2^32 % d.
    c: u64,
}

impl FastMod {
    /// `d` must be in 1..=MAX_WEIGHT_TOTAL; anything else is clamped to 1.
    const fn new(d: u32) -> FastMod {
        let d = if d == 0 || d > MAX_WEIGHT_TOTAL {
            1
        } else {
            d as u64
        };
        if d == 1 {
            return FastMod { d: 1, m: 0, c: 0 };
        }
        FastMod {
            d,
            // d >= 2: u64::MAX / d + 1 cannot overflow.
            m: u64::MAX / d + 1,
            c: (1u64 << 32) % d,
        }
    }

    /// `n % d`.
    #[inline]
    const fn rem(&self, n: u64) -> u64 {
        if self.d == 1 {
            return 0;
        }
        // (n >> 32) < 2^32, c < 2^14 -> < 2^46; + (n & 0xffff_ffff) -> < 2^47.
        // None of the wrapping ops below ever wraps; they only spare the
        // compiler an overflow check it cannot prove away.
        let x = (n >> 32).wrapping_mul(self.c).wrapping_add(n & 0xffff_ffff);
        let low = self.m.wrapping_mul(x);
        // High 64 bits of the 128-bit product low * d, with d < 2^14:
        // (low_hi * d) < 2^46 and (low_lo * d) >> 32 < 2^14.
        let hi = (low >> 32)
            .wrapping_mul(self.d)
            .wrapping_add((low & 0xffff_ffff).wrapping_mul(self.d) >> 32);
        hi >> 32
    }
}

/// A precomputed node selector for one (mask, weights) pair: the exact
/// result of `weighted_interleave_nid` in O(log nodes) with no division.
///
/// It holds the nodes of the mask in ascending order and the prefix sums of
/// their weights (`cum[i]` = weight of nodes `0..=i`), so node `i` owns the
/// targets `[cum[i-1], cum[i])` of the kernel's walk. Selection computes
/// `target = ilx % total` without a division (`FastMod`) and finds `i` by
/// a branch-free binary search. 224 bytes on 64-bit; fine on a kernel stack.
///
/// Build it again whenever the mask or any weight changes: it is a snapshot,
/// as the kernel's walk reads `wi_state` once per call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Selector {
    nodes: [u8; MAX_NUMNODES],
    cum: [u16; MAX_NUMNODES],
    n: usize,
    modulus: FastMod,
}

impl Selector {
    /// The selector for `MPOL_WEIGHTED_INTERLEAVE` over `mask` with
    /// `weights`; `None` if the mask is empty.
    pub fn new(mask: Nodemask, weights: &Weights) -> Option<Selector> {
        if mask.is_empty() {
            return None;
        }
        let mut s = Selector {
            nodes: [0; MAX_NUMNODES],
            cum: [0; MAX_NUMNODES],
            n: 0,
            modulus: FastMod::new(1),
        };
        let mut total: u32 = 0;
        let mut i = 0usize;
        for nid in mask.iter() {
            // i < 64 and nid < 64 (a u64 mask); total <= 64 * 255 < 2^16:
            // nothing wraps.
            total = total.wrapping_add(u32::from(weights.get(nid)));
            s.nodes[i & NODE_IDX] = nid as u8;
            s.cum[i & NODE_IDX] = total as u16;
            i = i.wrapping_add(1);
        }
        s.n = i;
        s.modulus = FastMod::new(total);
        Some(s)
    }

    /// The selector for `MPOL_INTERLEAVE` over `mask` (`interleave_nid`):
    /// every weight 1. `None` if the mask is empty.
    pub fn interleave(mask: Nodemask) -> Option<Selector> {
        Selector::new(mask, &Weights::new())
    }

    /// Number of nodes in the mask (1..=64).
    pub const fn len(&self) -> usize {
        self.n
    }

    /// Always false: an empty mask has no selector.
    pub const fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Σ weights over the mask (1..=16320): one full interleave cycle.
    pub const fn total(&self) -> u32 {
        self.modulus.d as u32
    }

    /// The `i`th node of the mask (ascending) and its weight.
    pub fn entry(&self, i: usize) -> Option<(usize, u8)> {
        if i >= self.n {
            return None;
        }
        let nid = *self.nodes.get(i)? as usize;
        let hi = *self.cum.get(i)?;
        let lo = if i == 0 { 0 } else { *self.cum.get(i - 1)? };
        Some((nid, hi.wrapping_sub(lo) as u8))
    }

    /// Index into `nodes` of the node owning `target` (< total): the first
    /// `i` with `target < cum[i]`.
    #[inline]
    fn index_of_target(&self, target: u16) -> usize {
        let mut base = 0usize;
        let mut len = self.n;
        // base + len <= n <= 64 throughout, so nothing below wraps.
        while len > 1 {
            let half = len / 2;
            if self.cum[base.wrapping_add(half).wrapping_sub(1) & NODE_IDX] <= target {
                base = base.wrapping_add(half);
            }
            len = len.wrapping_sub(half);
        }
        base
    }

    /// `ilx % total`: the position of `ilx` in the interleave cycle (the
    /// kernel's initial `target`), computed without a division.
    #[inline]
    pub fn target(&self, ilx: u64) -> u32 {
        self.modulus.rem(ilx) as u32
    }

    /// `weighted_interleave_nid(pol, ilx)` (or `interleave_nid` for a
    /// [`Selector::interleave`]): the node for interleave index `ilx`.
    #[inline]
    pub fn node_for_ilx(&self, ilx: u64) -> usize {
        // < total <= 16320 fits u16.
        let target = self.modulus.rem(ilx) as u16;
        self.nodes[self.index_of_target(target) & NODE_IDX] as usize
    }

    /// Fills `out[k]` with the node for ilx `start + k` (wrapping `u64`, as
    /// `pgoff_t`): one remainder for the whole run, then a step per page.
    /// This is what a mapping of consecutive pages needs.
    pub fn fill(&self, start: u64, out: &mut [u8]) {
        let target = self.modulus.rem(start) as u16;
        let mut i = self.index_of_target(target);
        // Pages left on node i in this cycle: cum[i] - target >= 1.
        let mut left = self.cum[i & NODE_IDX].wrapping_sub(target);
        let mut ilx = start;
        for slot in out.iter_mut() {
            if ilx == 0 {
                // pgoff_t wrapped (or started at 0): target 0, node index 0.
                i = 0;
                left = self.cum[0];
            }
            *slot = self.nodes[i & NODE_IDX];
            left = left.saturating_sub(1);
            if left == 0 {
                let prev = self.cum[i & NODE_IDX];
                i = i.wrapping_add(1); // i < n <= 64
                if i >= self.n {
                    i = 0;
                    left = self.cum[0];
                } else {
                    left = self.cum[i & NODE_IDX].wrapping_sub(prev);
                }
            }
            ilx = ilx.wrapping_add(1);
        }
    }
}

/// Σ of the node ids for ilx `start..start+count` by [`Selector`], a
/// checksum that keeps a benchmark loop from being optimized away. Used by
/// the host bench and fit for an in-kernel one.
pub fn bench_sum_selector(sel: &Selector, start: u64, count: u64) -> u64 {
    let mut sum = 0u64;
    let mut ilx = start;
    for _ in 0..count {
        sum = sum.wrapping_add(sel.node_for_ilx(ilx) as u64);
        ilx = ilx.wrapping_add(1);
    }
    sum
}

/// Like [`bench_sum_selector`], with the kernel's walk
/// ([`weighted_interleave_nid_ref`]); the two sums are equal.
pub fn bench_sum_walk(mask: Nodemask, weights: &Weights, start: u64, count: u64) -> u64 {
    let mut sum = 0u64;
    let mut ilx = start;
    for _ in 0..count {
        let nid = weighted_interleave_nid_ref(mask, weights, ilx).unwrap_or(0);
        sum = sum.wrapping_add(nid as u64);
        ilx = ilx.wrapping_add(1);
    }
    sum
}

// ---------------------------------------------------------------------------
// Task path (weighted_interleave_nodes, interleave_nodes)
// ---------------------------------------------------------------------------

/// A task's interleave state: `current->il_prev` and `current->il_weight`
/// (include/linux/sched.h), used by the task path and the bulk path.
///
/// `il_prev == None` is "before the first node": the kernel's fresh
/// `il_prev = MAX_NUMNODES - 1` (do_set_mempolicy). Since `next_node_in`
/// from `MAX_NUMNODES - 1` always wraps to the first node, and a fresh
/// `il_weight` is 0, it behaves exactly like the kernel whatever its
/// `CONFIG_NODES_SHIFT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TaskState {
    il_prev: Option<u8>,
    il_weight: u8,
}

impl TaskState {
    /// A fresh policy: `il_prev = MAX_NUMNODES - 1` ("before the first
    /// node", reported as -1) and `il_weight = 0`, as `do_set_mempolicy`
    /// sets them for `MPOL_INTERLEAVE` and `MPOL_WEIGHTED_INTERLEAVE`.
    pub const fn new() -> TaskState {
        TaskState {
            il_prev: None,
            il_weight: 0,
        }
    }

    /// A state from raw values; an `il_prev` outside `0..64` (e.g. -1, or
    /// the kernel's `MAX_NUMNODES - 1` when that is above 63) is "before the
    /// first node". As in the kernel, an `il_weight` left on a node that is
    /// not in the mask (or on "before the first node") is never used: the
    /// next step moves on and loads a full weight.
    pub const fn from_raw(il_prev: i32, il_weight: u8) -> TaskState {
        let il_prev = if il_prev >= 0 && il_prev < MAX_NUMNODES as i32 {
            Some(il_prev as u8)
        } else {
            None
        };
        TaskState { il_prev, il_weight }
    }

    /// `il_prev` for the uapi: the node last allocated from, -1 before the
    /// first node.
    pub const fn il_prev(&self) -> i32 {
        match self.il_prev {
            Some(n) => n as i32,
            None => -1,
        }
    }

    /// `il_prev` as a node, `None` before the first node.
    pub const fn prev_node(&self) -> Option<usize> {
        match self.il_prev {
            Some(n) => Some(n as usize),
            None => None,
        }
    }

    /// `il_weight`: pages still due on `il_prev` before moving on.
    pub const fn il_weight(&self) -> u8 {
        self.il_weight
    }

    /// `next_node_in(il_prev, mask)`, with "before the first node" wrapping
    /// to the first node as the kernel's `MAX_NUMNODES - 1` does.
    fn next_from_prev(&self, mask: Nodemask) -> Option<usize> {
        match self.il_prev {
            Some(p) => mask.next_in(p as usize),
            None => mask.first(),
        }
    }

    /// `il_prev` is set and in `mask`.
    fn prev_in(&self, mask: Nodemask) -> bool {
        match self.il_prev {
            Some(p) => mask.contains(p as usize),
            None => false,
        }
    }

    /// `weighted_interleave_nodes(pol)`: if `il_weight` is 0 or `il_prev` is
    /// not in the mask, move to `next_node_in(il_prev, mask)` and load its
    /// weight; then spend one unit of weight and return the node. `None`
    /// (state unchanged) for an empty mask, where the kernel returns
    /// `MAX_NUMNODES`.
    pub fn next(&mut self, mask: Nodemask, weights: &Weights) -> Option<usize> {
        let mut node = self.prev_node();
        if self.il_weight == 0 || !self.prev_in(mask) {
            let n = self.next_from_prev(mask)?;
            self.il_prev = Some(n as u8);
            self.il_weight = weights.get(n);
            node = Some(n);
        }
        // il_weight >= 1 here (a weight is never 0); saturating for safety.
        self.il_weight = self.il_weight.saturating_sub(1);
        node
    }

    /// `interleave_nodes(pol)` for `MPOL_INTERLEAVE`: `il_prev` moves to
    /// `next_node_in(il_prev, mask)`, `il_weight` untouched. `None` (state
    /// unchanged) for an empty mask.
    pub fn next_plain(&mut self, mask: Nodemask) -> Option<usize> {
        let n = self.next_from_prev(mask)?;
        self.il_prev = Some(n as u8);
        Some(n)
    }
}

// ---------------------------------------------------------------------------
// Bulk path (alloc_pages_bulk_weighted_interleave)
// ---------------------------------------------------------------------------

/// `alloc_pages_bulk_weighted_interleave` for `nr_pages` pages, all
/// allocations succeeding: calls `alloc(node, count)` once per
/// `__alloc_pages_bulk` call, in the kernel's order, and leaves `state` where
/// the kernel leaves `il_prev`/`il_weight`. Returns the pages placed
/// (`nr_pages`, or 0 for 0 pages or an empty mask, which leave `state`
/// untouched).
///
/// The kernel's steps:
/// 1. If `il_weight > 0` and `il_prev` is in the mask, put
///    `min(nr_pages, il_weight)` pages there; if that is all, `il_weight -=
///    nr_pages` and stop. Otherwise continue from `il_prev`.
/// 2. `rounds = rem / total`, `delta = rem % total`. Visit each node once in
///    mask order after `prev` (wrapping): it gets `weight × rounds`, plus
///    `weight` while `delta > weight`, plus the rest of `delta` at the node
///    where `delta` runs out (`delta == weight` included).
/// 3. Resume state: the node where `delta` ran out with `weight - delta`
///    left; or, with `delta == 0`, `(next_node_in(prev), its full weight)`.
///
/// The per-node counts always equal `nr_pages` steps of [`TaskState::next`].
/// The resume state does too, except when step 2 ends on a whole cycle
/// (`delta == 0`): there the task path would leave `(last node, 0)` and the
/// kernel's bulk path leaves `(the following node, its full weight)`; both
/// lead to the same next nodes while the weights stay unchanged.
pub fn bulk_plan<F: FnMut(usize, u64)>(
    state: &mut TaskState,
    mask: Nodemask,
    weights: &Weights,
    nr_pages: u64,
    mut alloc: F,
) -> u64 {
    if nr_pages == 0 || mask.is_empty() {
        return 0;
    }
    let mut rem_pages = nr_pages;
    let mut total_allocated: u64 = 0;

    // Continue allocating from the most recent node.
    let weight = u64::from(state.il_weight);
    match state.prev_node() {
        Some(node) if weight != 0 && mask.contains(node) => {
            let node_pages = if rem_pages < weight {
                rem_pages
            } else {
                weight
            };
            alloc(node, node_pages);
            total_allocated = node_pages;
            // If that's all the pages, no need to interleave.
            if rem_pages <= weight {
                // rem_pages <= il_weight: fits u8, cannot underflow.
                state.il_weight = weight.wrapping_sub(rem_pages) as u8;
                return total_allocated;
            }
            rem_pages = rem_pages.wrapping_sub(weight); // rem_pages > weight
        }
        _ => {}
    }
    state.il_weight = 0;
    let prev = *state;

    let weight_total = u64::from(weights.total(mask));
    let (rounds, mut delta) = match (
        rem_pages.checked_div(weight_total),
        rem_pages.checked_rem(weight_total),
    ) {
        (Some(r), Some(d)) => (r, d),
        _ => return total_allocated, // unreachable: mask non-empty
    };
    let mut resume_node = match prev.next_from_prev(mask) {
        Some(n) => n,
        None => return total_allocated,
    };
    let mut resume_weight = weights.get(resume_node);
    let mut node = resume_node;
    for _ in 0..mask.weight() {
        let weight = weights.get(node);
        let w = u64::from(weight);
        // weight * rounds + (part of delta) <= rem_pages <= nr_pages: the
        // wrapping ops never wrap.
        let mut node_pages = w.wrapping_mul(rounds);
        if delta > w {
            node_pages = node_pages.wrapping_add(w);
            delta = delta.wrapping_sub(w); // delta > w
        } else if delta != 0 {
            node_pages = node_pages.wrapping_add(delta);
            resume_node = node;
            // delta <= weight here.
            resume_weight = weight.wrapping_sub(delta as u8);
            delta = 0;
        }
        if node_pages == 0 {
            break;
        }
        alloc(node, node_pages);
        // Σ node_pages == nr_pages at most: never wraps.
        total_allocated = total_allocated.wrapping_add(node_pages);
        if total_allocated == nr_pages {
            break;
        }
        node = match mask.next_in(node) {
            Some(n) => n,
            None => break,
        };
    }
    state.il_prev = Some(resume_node as u8);
    state.il_weight = resume_weight;
    total_allocated
}

/// [`bulk_plan`] summed per node: `out` is zeroed, then `out[n]` = pages the
/// kernel's bulk path places on node `n`. Returns the total (0 for 0 pages
/// or an empty mask, with `state` untouched). Example: a fresh state, nodes
/// {0,1}, weights {3,1}, 10 pages → `out[0] = 8`, `out[1] = 2`, state
/// `(il_prev 0, il_weight 1)`, so the next single steps go 0, 1, 0.
pub fn bulk_split(
    state: &mut TaskState,
    mask: Nodemask,
    weights: &Weights,
    nr_pages: u64,
    out: &mut [u64; MAX_NUMNODES],
) -> u64 {
    *out = [0; MAX_NUMNODES];
    bulk_plan(state, mask, weights, nr_pages, |node, count| {
        let slot = &mut out[node & NODE_IDX];
        *slot = slot.saturating_add(count);
    })
}
