//! Offlining the node while `TK_IOC_REBALANCE` moves pages onto it.

use super::*;

/// Pages of the file in [`offline_during_rebalance`] (4 MiB).
pub const PAGES_R: usize = 1024;

/// Its rebalance's pace: slow enough that the offline begins mid-move.
pub const RATE_R: u32 = 100;

/// A file of [`PAGES_R`] pages under weighted interleave over `dram` and
/// `c` with its own weights `(wd, wc)`, filled with its pattern.
pub fn weighted_file(dram: u32, c: u32, wd: u8, wc: u8) -> Result<(Tierkit, Mapping), String> {
    let tk = Tierkit::open().map_err(|e| format!("open: {e}"))?;
    let mut p = crate::abi::tk::policy(TK_MODE_WEIGHTED_INTERLEAVE, mask_of(&[dram, c]));
    p.flags = TK_POLICY_F_WEIGHTS;
    p.weights[dram as usize] = wd;
    p.weights[c as usize] = wc;
    tk.set_policy_raw(p)
        .map_err(|e| format!("TK_IOC_SET_POLICY: {}", errno_name(&e)))?;
    let m = tk
        .map(PAGES_R, 0)
        .map_err(|e| format!("mmap: {}", errno_name(&e)))?;
    fill(&m, 0x52);
    Ok((tk, m))
}

/// How many pages of `m` are on `nid` (`move_pages`).
pub fn pages_on(m: &Mapping, nid: u32) -> Result<usize, String> {
    let nodes = m.page_nodes().map_err(|e| format!("move_pages: {e}"))?;
    Ok(nodes.iter().filter(|&&n| n == nid as i32).count())
}

/// Part 10 of the module docs: every block of `c` goes offline while a
/// paced `TK_IOC_REBALANCE` moves pages onto it (own weights 3:1 to 1:3).
/// Each block goes offline in time (a page the rebalance put there is
/// moved away again; none is allocated in a block being offlined); the
/// call's counts add up (moved + no_memory + busy = misplaced); no page
/// is on the node and every byte is intact. With the blocks back, a
/// second rebalance leaves no page misplaced. Returns the blocks left
/// offline.
pub fn offline_during_rebalance(r: &mut Report, dram: u32, c: u32, blocks: &[u64]) -> Vec<u64> {
    const WHAT: &str = "offline of the node while a rebalance moves pages onto it";
    let (tk, m) = match weighted_file(dram, c, 3, 1) {
        Ok(f) => f,
        Err(e) => {
            r.fail(WHAT, e);
            return Vec::new();
        }
    };
    let on_c0 = pages_on(&m, c).unwrap_or(0);
    let mut arg = TkRebalance {
        flags: TK_REBALANCE_F_WEIGHTS,
        rate_pages: RATE_R,
        ..Default::default()
    };
    arg.weights[dram as usize] = 1;
    arg.weights[c as usize] = 3;
    let (res, offline, outcomes) = std::thread::scope(|s| {
        let mover = s.spawn(|| tk.rebalance(arg));
        // The offline starts once the rebalance has put pages on the node.
        let t0 = std::time::Instant::now();
        while pages_on(&m, c).unwrap_or(0) < on_c0 + 16 && t0.elapsed() < LIMIT {
            std::thread::sleep(Duration::from_millis(20));
        }
        let (offline, outcomes) = offline_each(r, WHAT, blocks, LIMIT);
        (mover.join(), offline, outcomes)
    });
    let res = match res {
        Ok(Ok(a)) => Ok(a),
        Ok(Err(e)) => Err(format!("TK_IOC_REBALANCE: {}", errno_name(&e))),
        Err(_) => Err("the rebalance thread panicked".to_string()),
    };
    let hung = neither_done_nor_busy(&outcomes);
    let check = res.and_then(|a| {
        if !hung.is_empty() {
            return Err(format!("offline: {}", hung.join("; ")));
        }
        if offline.len() != blocks.len() {
            return Err(format!(
                "{} of {} blocks went offline; a page the rebalance put there must not keep one",
                offline.len(),
                blocks.len()
            ));
        }
        if a.moved + a.no_memory + a.busy != a.misplaced || a.looked != PAGES_R as u64 {
            return Err(format!(
                "looked {} misplaced {} = moved {} + no_memory {} + busy {}? ({PAGES_R} pages)",
                a.looked, a.misplaced, a.moved, a.no_memory, a.busy
            ));
        }
        let on_c = pages_on(&m, c)?;
        if on_c != 0 || held_on(c) != 0 {
            return Err(format!(
                "after the offline: {on_c} pages on node {c}, held {}",
                held_on(c)
            ));
        }
        verify(&m, 0x52)?;
        Ok(a)
    });
    let mut left = offline.clone();
    let note = check.and_then(|a| {
        // Back online: the rest of the job is done by a second call.
        let back = set_all(r, "offline during a rebalance: the blocks back online", &offline, "online_movable");
        left.retain(|b| !back.contains(b));
        let again = tk
            .rebalance(TkRebalance::default())
            .map_err(|e| format!("the second TK_IOC_REBALANCE: {}", errno_name(&e)))?;
        let check = tk
            .rebalance(TkRebalance {
                flags: TK_REBALANCE_F_DRY_RUN,
                ..Default::default()
            })
            .map_err(|e| format!("the dry run: {}", errno_name(&e)))?;
        if again.no_memory + again.busy != 0 || check.misplaced != 0 {
            return Err(format!(
                "after the blocks came back: moved {}, no_memory {}, busy {}; {} still misplaced",
                again.moved, again.no_memory, again.busy, check.misplaced
            ));
        }
        verify(&m, 0x52)?;
        Ok(format!(
            "during: looked {}, misplaced {}, moved {}, no_memory {}, busy {}; {} blocks offline; after onlining moved {} more, none misplaced, data intact",
            a.looked, a.misplaced, a.moved, a.no_memory, a.busy, offline.len(), again.moved
        ))
    });
    r.check_note(WHAT, note);
    left
}
