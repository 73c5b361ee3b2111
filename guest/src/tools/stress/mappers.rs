//! The mappers: map, fill and check 4 KiB-mode regions, plainly and racing
//! a `close()` or a `munmap()` from another thread.

use super::*;

/// `MADV_POPULATE_READ` (Linux 5.14, include/uapi/asm-generic/mman-common.h).
pub(super) const MADV_POPULATE_READ: i32 = 22;

/// `mmap(NULL, nr pages, RW, MAP_SHARED, fd, off pages)` without a
/// [`crate::linux::sys::Mapping`]: the racing rounds unmap parts themselves, and
/// an unmap on drop could hit whatever was mapped into the hole since.
pub(super) fn map_raw(fd: i32, nr: usize, off: u64) -> std::io::Result<usize> {
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
pub(super) fn unmap(base: usize, first: usize, nr: usize) {
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
pub(super) unsafe fn page<'a>(base: usize, i: usize) -> &'a mut [u8] {
    // SAFETY: by the caller.
    unsafe { std::slice::from_raw_parts_mut((base + i * PAGE_SIZE) as *mut u8, PAGE_SIZE) }
}

/// Checks pages `r` of `base` read zero, then fills them with `pat`.
///
/// # Safety
/// The pages must be mapped for the duration of the call.
pub(super) unsafe fn zero_then_fill(
    base: usize,
    r: std::ops::Range<usize>,
    pat: u8,
) -> Result<(), String> {
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
pub(super) unsafe fn verify(
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
pub(super) struct MapCounts {
    pub(super) maps: u64,
    pub(super) pages: u64,
    pub(super) dontneed: u64,
    pub(super) close_first: u64,
    pub(super) partial_munmap: u64,
    pub(super) race_close: u64,
    pub(super) race_close_ebadf: u64,
    pub(super) race_munmap: u64,
    pub(super) populate_calls: u64,
    pub(super) populate_failed: u64,
}

/// Maps `nr` pages of `tk` at page offset `off`, checks they read zero
/// and fills them with `pat`; counts the mapping. Returns its address.
pub(super) fn map_filled(
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
pub(super) fn dontneed(base: usize, nr: usize, c: &mut MapCounts) {
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
pub(super) fn round_plain(
    tk: Tierkit,
    nr: usize,
    off: u64,
    pat: u8,
    rng: &mut XorShift,
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
pub(super) fn round_race_close(
    tk: Tierkit,
    nr: usize,
    off: u64,
    pat: u8,
    rng: &mut XorShift,
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
                    crate::linux::errno::errno_name(&std::io::Error::from_raw_os_error(e))
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
pub(super) fn round_race_munmap(
    tk: Tierkit,
    nr: usize,
    off: u64,
    pat: u8,
    rng: &mut XorShift,
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
        .map(|(first, n, e)| {
            format!(
                "pages {first}..{}: {}",
                first + n,
                crate::linux::errno::errno_name(e)
            )
        })
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
pub(super) fn mapper(
    i: usize,
    mode: u32,
    mask: u64,
    max_pages: usize,
    cfg: &Config,
    deadline: Instant,
    seed: u64,
) -> i32 {
    let mut rng = XorShift(seed | 1);
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
