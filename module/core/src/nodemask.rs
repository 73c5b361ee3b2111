//! Node ids and node masks (include/linux/nodemask.h), and the error of a
//! rejected weight or mask: what the weight table ([`crate::weights`]) and
//! the selector ([`crate::interleave`], which re-exports everything here)
//! share. Compiled into `tierkit.ko` too, under the same rules as
//! `interleave.rs`: `core::` only, no allocation, no panic on any input.

/// Highest node id + 1 that tierkit can name; equals
/// `uapi::TIERKIT_MAX_NODES`. Node masks are one `u64`.
///
/// The kernel's own `MAX_NUMNODES` is `1 << CONFIG_NODES_SHIFT` and may be
/// larger; every place where that matters is noted (only "before the first
/// node" of a fresh task state, see [`crate::interleave::TaskState::new`]).
pub const MAX_NUMNODES: usize = 64;

/// Index mask for arrays of [`MAX_NUMNODES`] entries: `i & NODE_IDX` is always
/// in bounds, so the compiler drops the bounds check and nothing can panic.
pub(crate) const NODE_IDX: usize = MAX_NUMNODES - 1;

/// Rejected input. The module maps it to `-EINVAL`, as the kernel's
/// `node_store`, `weighted_interleave_auto_store` and `mpol_set_nodemask`
/// return `-EINVAL` for each of these cases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightError {
    /// Not a number, 0, over 255, a node id out of range, or an empty
    /// effective nodemask.
    Invalid,
}

// ---------------------------------------------------------------------------
// Nodemask (include/linux/nodemask.h)
// ---------------------------------------------------------------------------

/// A set of node ids `0..64`, bit N = node N (the layout of the uapi's
/// `nodemask` fields). The methods mirror include/linux/nodemask.h, with
/// `Option` in place of the kernel's `MAX_NUMNODES` "none" result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Nodemask(pub u64);

impl Nodemask {
    /// The empty mask.
    pub const EMPTY: Nodemask = Nodemask(0);

    /// A mask with only node `nid` (`nodemask_of_node`); empty if `nid >= 64`.
    pub const fn single(nid: usize) -> Nodemask {
        if nid < MAX_NUMNODES {
            Nodemask(1u64 << nid)
        } else {
            Nodemask(0)
        }
    }

    /// `nodes_empty`.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// `node_isset`; false for `nid >= 64`.
    pub const fn contains(self, nid: usize) -> bool {
        nid < MAX_NUMNODES && (self.0 >> nid) & 1 == 1
    }

    /// `nodes_weight`: the number of nodes in the mask.
    pub const fn weight(self) -> u32 {
        self.0.count_ones()
    }

    /// `nodes_and`.
    pub const fn and(self, other: Nodemask) -> Nodemask {
        Nodemask(self.0 & other.0)
    }

    /// The mask with node `nid` added (`node_set`); unchanged if `nid >= 64`.
    pub const fn with(self, nid: usize) -> Nodemask {
        Nodemask(self.0 | Nodemask::single(nid).0)
    }

    /// `first_node`: the lowest node, `None` if empty.
    pub const fn first(self) -> Option<usize> {
        if self.0 == 0 {
            None
        } else {
            Some(self.0.trailing_zeros() as usize)
        }
    }

    /// `next_node(nid, mask)`: the lowest node above `nid`, no wrapping.
    pub const fn next_after(self, nid: usize) -> Option<usize> {
        if nid >= MAX_NUMNODES - 1 {
            return None;
        }
        // nid + 1 <= 63: the shift cannot overflow.
        Nodemask(self.0 & (u64::MAX << (nid + 1))).first()
    }

    /// `next_node_in(nid, mask)`: the lowest node above `nid`, wrapping to
    /// the first node; `None` only if the mask is empty. Like the kernel's, a
    /// `nid` at or past the last possible node (63) wraps straight to the
    /// first node, even if node 63 is in the mask.
    pub const fn next_in(self, nid: usize) -> Option<usize> {
        match self.next_after(nid) {
            Some(n) => Some(n),
            None => self.first(),
        }
    }

    /// The `n`th node (0-based) in ascending order, `None` if `n >= weight()`.
    pub fn nth(self, n: u32) -> Option<usize> {
        self.iter().nth(n as usize)
    }

    /// `for_each_node_mask`: the nodes in ascending order.
    pub const fn iter(self) -> NodemaskIter {
        NodemaskIter(self.0)
    }
}

impl IntoIterator for Nodemask {
    type Item = usize;
    type IntoIter = NodemaskIter;
    fn into_iter(self) -> NodemaskIter {
        self.iter()
    }
}

/// Iterator over the nodes of a [`Nodemask`], ascending.
#[derive(Clone, Copy, Debug)]
pub struct NodemaskIter(u64);

impl Iterator for NodemaskIter {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let n = self.0.trailing_zeros() as usize;
        // Clear the lowest set bit; cannot underflow since self.0 != 0.
        self.0 &= self.0 - 1;
        Some(n)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.0.count_ones() as usize;
        (n, Some(n))
    }
}

impl ExactSizeIterator for NodemaskIter {}
