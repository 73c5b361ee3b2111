//! Gigantic ranges on ZONE_MOVABLE: refused without the
//! `movable_gigantic` opt-in; with it, a block inside a range cannot go
//! offline (`EBUSY` within 2 s) and the range stays intact.

use super::*;

pub const MOVABLE_GIGANTIC: &str = "/sys/kernel/debug/tierkit/movable_gigantic";

pub fn read_opt_in() -> Option<String> {
    std::fs::read_to_string(MOVABLE_GIGANTIC)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Whether node `c` has a naturally aligned GiB of online blocks of its
/// own and a GiB free; the reason if not.
pub fn aligned_gib(c: u32, block_bytes: u64) -> Result<String, String> {
    let per = (TK_GIGANTIC_BYTES / block_bytes).max(1);
    let blocks: Vec<u64> = node_blocks(c)
        .into_iter()
        .filter(|&b| block_state(b).as_deref() == Some("online"))
        .collect();
    let gibs: Vec<u64> = blocks
        .iter()
        .filter(|&&b| b % per == 0 && (b..b + per).all(|x| blocks.contains(&x)))
        .map(|&b| b / per)
        .collect();
    let free: u64 = node_zones(c).iter().map(|z| z.free).sum();
    if gibs.is_empty() {
        return Err(format!(
            "node {c} has no naturally aligned GiB of online memory blocks ({} blocks of {} MiB)",
            blocks.len(),
            block_bytes >> 20
        ));
    }
    if free < GIB_PAGES as u64 {
        return Err(format!(
            "node {c} has {} MiB free, less than 1 GiB",
            (free * PAGE_SIZE as u64) >> 20
        ));
    }
    Ok(format!(
        "{} aligned GiB(s) of blocks, {} MiB free",
        gibs.len(),
        (free * PAGE_SIZE as u64) >> 20
    ))
}

pub fn gigantic_file(r: &mut Report, what: &str, c: u32) -> Option<Tierkit> {
    let tk = open_on(r, what, c)?;
    let g = TkGigantic {
        threads: 1,
        placement: TK_PLACE_LOCAL,
        ..Default::default()
    };
    if let Err(e) = tk.set_gigantic(g) {
        r.fail(&format!("{what}: TK_IOC_SET_GIGANTIC"), errno_name(&e));
        return None;
    }
    Some(tk)
}

/// Gigantic ranges on the movable node `c`, without and with the opt-in.
pub fn gigantic_case(t: &mut T, c: u32) {
    let what = format!("gigantic on movable node {c}");
    let v = read_opt_in();
    t.r.check(
        &format!("{what}: movable_gigantic is 0 by default"),
        match v.as_deref() {
            Some("0") => Ok(()),
            None => Err(format!("cannot read {MOVABLE_GIGANTIC}")),
            Some(x) => Err(format!("reads {x:?}")),
        },
    );
    if v.is_none() {
        return;
    }
    if v.as_deref() != Some("0") {
        t.opt_in_set = true;
        if let Err(e) = t.set_opt_in(false) {
            t.r.fail(&format!("{what}: set movable_gigantic to 0"), e);
            return;
        }
    }

    // Without the opt-in. Gigantic mmap only reserves; the GiB is made at
    // its first touch, which fails: SIGBUS (in a child).
    if let Some(tk) = gigantic_file(&mut t.r, &format!("{what} without opt-in"), c) {
        t.skip_log();
        let t0 = monotonic_ns();
        let res = tk.map(GIB_PAGES, 0).and_then(|m| {
            let p = m.as_ptr();
            crate::linux::vma::fork_run(|| {
                // SAFETY: our writable mapping; the fault is expected to SIGBUS.
                unsafe { std::ptr::write_volatile(p, 1) };
                0
            })
        });
        let el = (monotonic_ns() - t0) as f64 / 1e9;
        let log = t.log();
        t.r.check_note(
            &format!("{what} without opt-in: the first touch of a 1 GiB mapping is SIGBUS"),
            match &res {
                Ok(crate::linux::vma::Exit::Signal(libc::SIGBUS)) => Ok(format!("{el:.3} s")),
                Ok(e) => Err(format!("the child: {e} after {el:.3} s, expected SIGBUS")),
                Err(e) => Err(format!("mmap or fork: {} after {el:.3} s", errno_name(e))),
            },
        );
        drop(res);
        let hit = log.iter().find(|l| l.contains("movable_gigantic"));
        t.r.check_note(
            &format!("{what} without opt-in: the kernel log names movable_gigantic"),
            match hit {
                Some(l) => Ok(l.clone()),
                None => Err(format!("kernel log: {}", log.join(" | "))),
            },
        );
    }

    // With the opt-in.
    let name = format!("{what} with opt-in");
    if let Err(why) = aligned_gib(c, t.block_bytes) {
        for n in [
            "mmap 1 GiB",
            "offline a block inside the range is EBUSY at once",
            "the kernel log names tierkit and the range",
            "the range is intact",
        ] {
            t.r.skip(&format!("{name}: {n}"), &why);
        }
        return;
    }
    if let Err(e) = t.set_opt_in(true) {
        t.r.fail(&format!("{name}: echo 1 > movable_gigantic"), e);
        return;
    }
    t.r.ok(&format!("{name}: echo 1 > movable_gigantic"));
    gigantic_opt_in(t, &name, c);
    let res = t.set_opt_in(false);
    t.r.check(&format!("{what}: movable_gigantic back to 0"), res);
}

pub fn gigantic_opt_in(t: &mut T, name: &str, c: u32) {
    let Some(tk) = gigantic_file(&mut t.r, name, c) else {
        return;
    };
    let Some(m) = map_gib(t, name, &tk) else {
        return;
    };
    let p0 = one_aligned_gib(t, name, c, &tk, &m);
    if p0 == 0 {
        return;
    }
    let Some(spots) = offline_inside(t, name, &m, p0) else {
        return;
    };
    t.online_all(name);
    range_intact(t, name, c, (&tk, &m), p0, &spots);
}

/// A 1 GiB mmap of `tk` (timed), its first touch making the GiB.
fn map_gib(t: &mut T, name: &str, tk: &Tierkit) -> Option<Mapping> {
    t.skip_log();
    let t0 = monotonic_ns();
    let m = match tk.map(GIB_PAGES, 0) {
        Ok(m) => m,
        Err(e) => {
            let log = t.log().join(" | ");
            t.r.fail(
                &format!("{name}: mmap 1 GiB"),
                format!("{} (kernel log: {log})", errno_name(&e)),
            );
            return None;
        }
    };
    t.r.ok_note(
        &format!("{name}: mmap 1 GiB"),
        format!("{:.1} s", (monotonic_ns() - t0) as f64 / 1e9),
    );
    // The first touch makes the GiB (in a child: a GiB that cannot be made
    // is SIGBUS for the toucher); one PUD leaf maps it (TK_IOC_WALK:
    // pagemap would zap the PUD and show nothing).
    // SAFETY: `m` is a live mapping of ours.
    if let Err(e) = unsafe { crate::linux::vma::make_gigantic(m.as_ptr(), m.len()) } {
        let log = t.log().join(" | ");
        t.r.fail(
            &format!("{name}: the first touch makes the GiB"),
            format!("{e} (kernel log: {log})"),
        );
        return None;
    }
    Some(m)
}

/// The GiB is one naturally aligned PUD leaf on node `c`; gives its first
/// pfn (0 if there is none).
fn one_aligned_gib(t: &mut T, name: &str, c: u32, tk: &Tierkit, m: &Mapping) -> u64 {
    fill_page(m, 0);
    let w = tk.walk(m.addr()).ok();
    let p0 = w.map_or(0, |w| w.pfn);
    let contiguous =
        w.is_some_and(|w| w.level == TK_WALK_PUD) && p0 != 0 && p0.is_multiple_of(GIB_PAGES as u64);
    let node = block_of_pfn(p0, t.block_bytes);
    t.r.check_note(
        &format!("{name}: one aligned GiB on node {c}"),
        if !contiguous {
            Err(format!(
                "pfns not one aligned contiguous GiB (first {p0:#x})"
            ))
        } else if block_node(node) != Some(c) {
            Err(format!("memory{node} is on node {:?}", block_node(node)))
        } else {
            Ok(format!(
                "pfn {p0:#x}.., zone {}",
                block_zone(node).unwrap_or_else(|| "?".into())
            ))
        },
    );
    p0
}

/// A block inside the range, and the range's last block, cannot go
/// offline (`EBUSY` at once, the kernel log names tierkit and the range),
/// and the block stays online. Gives the pages holding the pattern.
fn offline_inside(t: &mut T, name: &str, m: &Mapping, p0: u64) -> Option<Vec<usize>> {
    let mid = GIB_PAGES / 2;
    let b = block_of_pfn(p0 + mid as u64, t.block_bytes);
    let (bfirst, _) = memblock::block_pfns(b, t.block_bytes);
    let in_block = (bfirst - p0) as usize;
    let mut spots = vec![0, in_block, mid, GIB_PAGES - 1];
    spots.sort_unstable();
    spots.dedup();
    for &i in &spots {
        fill_page(m, i);
    }
    t.skip_log();
    let tm = t.offline(name, b, GIB_PAGES)?;
    let log = t.log();
    t.r.check_note(
        &format!("{name}: offline memory{b} inside the range is EBUSY at once"),
        match tm.outcome {
            Outcome::Failed(e) if e == libc::EBUSY && tm.elapsed < PROMPT => {
                Ok(format!("EBUSY in {}", secs(tm.elapsed)))
            }
            o => Err(format!(
                "{} after {} (expected EBUSY within {})",
                o.describe(),
                secs(tm.elapsed),
                secs(PROMPT)
            )),
        },
    );
    // A block strictly inside the GiB is refused by the kernel's own
    // isolation (the GiB's folio straddles both its edges) before any
    // notifier runs, so nothing is logged for it. The GiB's last block
    // ends where the folio ends: the kernel gets to tierkit's notifier,
    // which refuses it and names the range.
    let last = block_of_pfn(p0 + GIB_PAGES as u64 - 1, t.block_bytes);
    t.skip_log();
    let log = match t.offline(name, last, GIB_PAGES) {
        Some(tl) => {
            t.r.check_note(
                &format!("{name}: offline memory{last}, the range's last block, is EBUSY at once"),
                match tl.outcome {
                    Outcome::Failed(e) if e == libc::EBUSY && tl.elapsed < PROMPT => {
                        Ok(format!("EBUSY in {}", secs(tl.elapsed)))
                    }
                    o => Err(format!("{} after {}", o.describe(), secs(tl.elapsed))),
                },
            );
            t.log()
        }
        None => log,
    };
    let range = format!("{p0:#x}");
    let hit = log
        .iter()
        .find(|l| l.contains("tierkit") && l.contains(&range));
    t.r.check_note(
        &format!("{name}: the kernel log names tierkit and the range"),
        match hit {
            Some(l) => Ok(l.clone()),
            None => Err(format!(
                "no line with 'tierkit' and {range}; kernel log: {}",
                log.join(" | ")
            )),
        },
    );
    let st = block_state(b);
    t.r.check(
        &format!("{name}: memory{b} still online"),
        if st.as_deref() == Some("online") {
            Ok(())
        } else {
            Err(format!("state {st:?}"))
        },
    );
    Some(spots)
}

/// After the blocks are back: the pattern and the zero pages of the range
/// intact, and the range still one PUD on node `c`.
fn range_intact(
    t: &mut T,
    name: &str,
    c: u32,
    (tk, m): (&Tierkit, &Mapping),
    p0: u64,
    spots: &[usize],
) {
    let zeros = [1usize, GIB_PAGES - 2];
    let zero_ok = zeros
        .iter()
        .all(|&i| page_words(m, i).iter().all(|&w| w == 0));
    t.r.check_note(
        &format!("{name}: the range is intact"),
        verify_pages(m, spots.iter().copied()).and_then(|v| {
            if zero_ok {
                Ok(format!(
                    "{v} of pattern at pages {spots:?}, pages {zeros:?} zero"
                ))
            } else {
                Err(format!("a page of {zeros:?} is no longer zero"))
            }
        }),
    );
    t.r.check_note(
        &format!("{name}: every page on node {c}"),
        match tk.walk(m.addr() + (GIB_PAGES - 1) * PAGE_SIZE) {
            Ok(w)
                if w.level == TK_WALK_PUD
                    && w.nid == c as i32
                    && w.pfn == p0 + GIB_PAGES as u64 - 1 =>
            {
                Ok(format!("one PUD at pfn {p0:#x} on node {c}"))
            }
            Ok(w) => Err(format!("walk: {w:?}")),
            Err(e) => Err(format!("TK_IOC_WALK: {}", errno_name(&e))),
        },
    );
}
