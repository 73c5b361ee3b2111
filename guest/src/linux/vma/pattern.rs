//! A per-page word pattern written into a range and checked.

use super::*;

/// Fills page `i` of `[base, base + n pages)` with a pattern of `seed`
/// and `i` (every 8-byte word distinct within the page).
///
/// # Safety
/// The range must be writable.
pub unsafe fn fill_pattern(base: *mut u8, first_page: usize, n: usize, seed: u64) {
    for i in first_page..first_page + n {
        let p = base.wrapping_add(i * PAGE_SIZE) as *mut u64;
        for w in 0..PAGE_SIZE / 8 {
            // SAFETY: inside the caller's writable range.
            unsafe { p.add(w).write_volatile(pattern_word(seed, i, w)) };
        }
    }
}

/// The word [`fill_pattern`] puts at word `w` of page `i`.
pub fn pattern_word(seed: u64, page: usize, w: usize) -> u64 {
    let x = seed ^ ((page as u64) << 20) ^ w as u64;
    x.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1
}

/// Checks pages `first_page .. first_page + n` against [`fill_pattern`];
/// the first mismatch as text.
///
/// # Safety
/// The range must be readable.
pub unsafe fn check_pattern(
    base: *const u8,
    first_page: usize,
    n: usize,
    seed: u64,
) -> Result<(), String> {
    for i in first_page..first_page + n {
        let p = base.wrapping_add(i * PAGE_SIZE) as *const u64;
        for w in 0..PAGE_SIZE / 8 {
            // SAFETY: inside the caller's readable range.
            let got = unsafe { p.add(w).read_volatile() };
            let want = pattern_word(seed, i, w);
            if got != want {
                return Err(format!(
                    "page {i} word {w}: {got:#018x}, expected {want:#018x}"
                ));
            }
        }
    }
    Ok(())
}
