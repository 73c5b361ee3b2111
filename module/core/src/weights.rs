//! A node's interleave weight: the global table as `get_il_weight` reads it
//! (`node_store` and `weighted_interleave_auto_store`'s parsers), and auto
//! weights from bandwidth (`mempolicy_set_node_perf`,
//! `reduce_interleave_weights`), with the semantics of Linux 7.3
//! `mm/mempolicy.c`. The node selection that uses them is in
//! [`crate::interleave`], which re-exports everything here.
//!
//! Compiled into both `tierkit-core` and `tierkit.ko` (via `#[path]`), under
//! the same rules as `interleave.rs`: `core::` only, no allocation, no panic.

use crate::nodemask::{Nodemask, WeightError, MAX_NUMNODES, NODE_IDX};

/// "weightiness" in mm/mempolicy.c: auto weights are scaled into
/// `[1, WEIGHTINESS]` before the GCD reduction.
pub const WEIGHTINESS: u32 = 32;

// ---------------------------------------------------------------------------
// Weights (get_il_weight, node_store, weighted_interleave_auto_store)
// ---------------------------------------------------------------------------

/// The global weight table, `wi_state->iw_table` in the kernel.
///
/// An entry of 0 means "unset" and reads as 1, as `get_il_weight` returns 1
/// while `wi_state` is NULL (and every table the kernel builds starts as all
/// 1s). Valid weights are 1..=255.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Weights {
    table: [u8; MAX_NUMNODES],
}

impl Default for Weights {
    fn default() -> Self {
        Weights::new()
    }
}

impl Weights {
    /// All unset: every node weighs 1 (the kernel's NULL `wi_state`).
    pub const fn new() -> Weights {
        Weights {
            table: [0; MAX_NUMNODES],
        }
    }

    /// A table taken as is; 0 entries read as 1.
    pub const fn from_table(table: [u8; MAX_NUMNODES]) -> Weights {
        Weights { table }
    }

    /// `get_il_weight(nid)`: the weight of `nid`, 1 if unset. A `nid >= 64`
    /// (which the kernel never passes) also reads as 1.
    #[inline]
    pub const fn get(&self, nid: usize) -> u8 {
        if nid >= MAX_NUMNODES {
            return 1;
        }
        match self.table[nid] {
            0 => 1,
            w => w,
        }
    }

    /// Sets one weight, as a successful `node_store` does: `w` must be
    /// 1..=255 and `nid < 64`, else [`WeightError::Invalid`] and the table is
    /// unchanged. (Turning `auto` off is the caller's business.)
    pub fn set(&mut self, nid: usize, w: u8) -> Result<(), WeightError> {
        if w == 0 {
            return Err(WeightError::Invalid);
        }
        match self.table.get_mut(nid) {
            Some(slot) => {
                *slot = w;
                Ok(())
            }
            None => Err(WeightError::Invalid),
        }
    }

    /// The effective table (0 entries replaced by 1), for reporting.
    pub fn effective(&self) -> [u8; MAX_NUMNODES] {
        let mut out = [1u8; MAX_NUMNODES];
        let mut nid = 0usize;
        for slot in out.iter_mut() {
            *slot = self.get(nid);
            nid = nid.wrapping_add(1);
        }
        out
    }

    /// The sum of the weights of the nodes in `mask` (the `weight_total` of
    /// `weighted_interleave_nid`); at most [`MAX_WEIGHT_TOTAL`], 0 iff the
    /// mask is empty.
    pub fn total(&self, mask: Nodemask) -> u32 {
        let mut t = 0u32;
        for nid in mask.iter() {
            // <= 64 * 255: never wraps.
            t = t.wrapping_add(u32::from(self.get(nid)));
        }
        t
    }

    /// The table `weighted_interleave_auto_store(true)` installs: all 1s,
    /// then [`reduce_interleave_weights`] over the nodes with memory.
    pub fn from_bandwidth(bw: &[u32; MAX_NUMNODES], has_memory: Nodemask) -> Weights {
        let mut table = [1u8; MAX_NUMNODES];
        reduce_interleave_weights(bw, has_memory, &mut table);
        Weights { table }
    }
}

/// `_parse_integer_fixup_radix` + `_parse_integer` + `_kstrtoull` +
/// `kstrtou8` (lib/kstrtox.c) on the C string in `s`: the slice ends at its
/// first NUL or at its end, as sysfs NUL-terminates the written bytes.
/// Returns `None` for both of kstrtou8's errors (`-EINVAL`, `-ERANGE`).
fn kstrtou8_base0(s: &[u8]) -> Option<u8> {
    // s[i] reads as the C string would: 0 past the end.
    let at = |i: usize| -> u8 {
        match s.get(i) {
            Some(&c) => c,
            None => 0,
        }
    };
    let mut i = 0usize;
    // kstrtoull: one optional '+'.
    if at(i) == b'+' {
        i = i.wrapping_add(1);
    }
    // _parse_integer_fixup_radix with base 0; `_tolower(c)` is `c | 0x20`.
    let base: u64 = if at(i) == b'0' {
        if at(i + 1) | 0x20 == b'x' && at(i + 2).is_ascii_hexdigit() {
            i = i.wrapping_add(2);
            16
        } else {
            8
        }
    } else {
        10
    };
    // _parse_integer_limit: digits in `base`, value saturating on overflow.
    let start = i;
    let mut val: u64 = 0;
    let mut overflow = false;
    loop {
        let c = at(i);
        let d = match c {
            b'0'..=b'9' => u64::from(c.wrapping_sub(b'0')),
            _ => {
                let lc = c | 0x20;
                if (b'a'..=b'f').contains(&lc) {
                    u64::from(lc.wrapping_sub(b'a')).wrapping_add(10)
                } else {
                    break;
                }
            }
        };
        if d >= base {
            break;
        }
        match val.checked_mul(base).and_then(|v| v.checked_add(d)) {
            Some(v) => val = v,
            None => {
                val = u64::MAX;
                overflow = true;
            }
        }
        i = i.wrapping_add(1); // i <= buf.len()
    }
    if overflow || i == start {
        return None; // -ERANGE / -EINVAL
    }
    // One optional '\n', then the string must end.
    if at(i) == b'\n' {
        i = i.wrapping_add(1);
    }
    if at(i) != 0 {
        return None;
    }
    // kstrtou8: `tmp != (u8)tmp` is -ERANGE.
    u8::try_from(val).ok()
}

/// Parses a write to a weight file, exactly as sysfs
/// `/sys/kernel/mm/mempolicy/weighted_interleave/nodeN` (`node_store`) does:
/// `kstrtou8(buf, 0, ...)`, so an optional `+`, then decimal, `0x`/`0X` hex
/// or `0`-prefixed octal, then at most one `\n`; the bytes end at the first
/// NUL. Empty input, a parse error, a value over 255 (`-ERANGE` in kstrtou8)
/// and 0 are all [`WeightError::Invalid`] (`-EINVAL`).
///
/// Examples: `"3\n"`→3, `"+7"`→7, `"0x1F"`→31, `"010"`→8, `"255"`→255;
/// `"0"`, `"256"`, `"08"`, `" 3"`, `"3 "`, `"3\n\n"`, `"-1"`, `"0x"` fail.
pub fn parse_weight(buf: &[u8]) -> Result<u8, WeightError> {
    // `count == 0 || sysfs_streq(buf, "")`: also covered by kstrtou8 below,
    // kept for a one-to-one reading of node_store.
    let first = buf.first().copied().unwrap_or(0);
    if buf.is_empty() || first == 0 || (first == b'\n' && buf.get(1).copied().unwrap_or(0) == 0) {
        return Err(WeightError::Invalid);
    }
    match kstrtou8_base0(buf) {
        Some(0) | None => Err(WeightError::Invalid),
        Some(w) => Ok(w),
    }
}

/// Parses a write to the `auto` file as `weighted_interleave_auto_store`
/// does with `kstrtobool` (lib/kstrtox.c): only the first one or two bytes
/// count. True: `e E y Y t T 1`, `on`/`oN`/`On`/`ON`; false: `d D n N f F 0`,
/// `of`/`oF`/`Of`/`OF`; anything else (incl. empty) is
/// [`WeightError::Invalid`]. So `"yes"`, `"1\n"`, `"true"`, `"off"` parse,
/// and so does `"1junk"`.
pub fn parse_bool_auto(buf: &[u8]) -> Result<bool, WeightError> {
    let c0 = buf.first().copied().unwrap_or(0);
    // s[1] is only read when s[0] is 'o'/'O', which is not NUL, so the C
    // string has a byte there (possibly its NUL).
    let c1 = buf.get(1).copied().unwrap_or(0);
    match c0 {
        b'e' | b'E' | b'y' | b'Y' | b't' | b'T' | b'1' => Ok(true),
        b'd' | b'D' | b'n' | b'N' | b'f' | b'F' | b'0' => Ok(false),
        b'o' | b'O' => match c1 {
            b'n' | b'N' => Ok(true),
            b'f' | b'F' => Ok(false),
            _ => Err(WeightError::Invalid),
        },
        _ => Err(WeightError::Invalid),
    }
}

// ---------------------------------------------------------------------------
// Auto weights (mempolicy_set_node_perf, reduce_interleave_weights)
// ---------------------------------------------------------------------------

/// A node's bandwidth for auto weights, as `mempolicy_set_node_perf` takes
/// it: `min(read_bandwidth, write_bandwidth)` of the node's access class 1
/// coordinates (MB/s).
pub const fn bw_from_coords(read_bandwidth: u32, write_bandwidth: u32) -> u32 {
    if read_bandwidth < write_bandwidth {
        read_bandwidth
    } else {
        write_bandwidth
    }
}

/// `gcd` (lib/math/gcd.c): `gcd(0, b) = b`, `gcd(a, 0) = a`.
const fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        let r = a % b;
        a = b;
        b = r;
    }
    a
}

/// `reduce_interleave_weights(bw, new_iw)`, exactly: only the nodes in
/// `has_memory` (`for_each_node_state(nid, N_MEMORY)`) are written; the
/// caller pre-fills `out` (the kernel fills the new table with 1s).
///
/// - `sum_bw` = Σ bw over the nodes with memory, in `u64`;
/// - per node: `scaling_factor = 32 * bw` in **wrapping** `unsigned int`
///   arithmetic (as in C); if `bw != 0 && sum_bw < scaling_factor` the weight
///   is `scaling_factor / sum_bw` (so `floor(32·bw/Σbw)`, in `1..=32`),
///   otherwise 1 (no data, or a share below 1/32);
/// - then every such weight is divided by the GCD of them all.
///
/// Example: bandwidths 200000 and 50000 MB/s give 25 and 6.
pub fn reduce_interleave_weights(
    bw: &[u32; MAX_NUMNODES],
    has_memory: Nodemask,
    out: &mut [u8; MAX_NUMNODES],
) {
    let mut sum_bw: u64 = 0;
    for nid in has_memory.iter() {
        // <= 64 * u32::MAX: never wraps.
        sum_bw = sum_bw.wrapping_add(u64::from(bw[nid & NODE_IDX]));
    }
    let mut iw_gcd: u32 = 0;
    for nid in has_memory.iter() {
        let b = bw[nid & NODE_IDX];
        let scaling_factor = WEIGHTINESS.wrapping_mul(b);
        let w: u8 = if b != 0 && sum_bw < u64::from(scaling_factor) {
            // sum_bw < scaling_factor <= u32::MAX, and sum_bw >= b > 0.
            let cast_sum_bw = sum_bw as u32;
            match scaling_factor.checked_div(cast_sum_bw) {
                // <= 32 as sum_bw >= b; `as u8` is the C assignment.
                Some(q) => q as u8,
                None => 1,
            }
        } else {
            1
        };
        out[nid & NODE_IDX] = w;
        if iw_gcd == 0 {
            iw_gcd = u32::from(w);
        }
        iw_gcd = gcd(iw_gcd, u32::from(w));
    }
    for nid in has_memory.iter() {
        let slot = &mut out[nid & NODE_IDX];
        if let Some(q) = u32::from(*slot).checked_div(iw_gcd) {
            *slot = q as u8;
        }
    }
}
