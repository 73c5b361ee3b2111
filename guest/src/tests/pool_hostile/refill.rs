//! Steps 4 and 5: `rmmod`, and the node's memory going offline, while the
//! refill thread allocates or clears a range.

use super::*;

/// Pids of the `tierkit_pool` threads.
pub fn pool_threads() -> Vec<u32> {
    let Ok(d) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    d.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim_end() == "tierkit_pool")
        })
        .collect()
}

/// Step 4. Returns false if tierkit could not be loaded again.
pub fn rmmod_mid_refill(r: &mut Report, topo: &Topology, nid: u32, start_kb: u64) -> bool {
    let Some(wd) = crate::abi::ready::tierkit_weight_dir(r) else {
        return true;
    };
    let table = match TierkitWeights::save(&wd) {
        Ok(t) => t,
        Err(e) => {
            r.fail("save the weight table", e);
            return true;
        }
    };
    let mut kf = match KunitFilter::set(NO_SUITES) {
        Ok(k) => k,
        Err(e) => {
            r.fail("KUnit suites off for the reloads", e.to_string());
            return true;
        }
    };
    for delay_ms in [0, 20, 60, 150] {
        let name = |what: &str| format!("rmmod {delay_ms} ms after `{nid} 1`: {what}");
        if let Err(e) = pool::set_target(nid, 1) {
            r.fail(&name("write `NID 1`"), errno_name(&e));
            return true;
        }
        vma::sleep_ms(delay_ms);
        let seen = state(nid)
            .map(|(t, rd)| format!("`{nid} {t} {rd}`"))
            .unwrap_or_default();
        let t0 = Instant::now();
        let res = faults::unload_tierkit();
        let took = t0.elapsed();
        if let Err(e) = res {
            r.fail(&name("rmmod succeeds"), errno_name(&e));
            let _ = pool::set_target(nid, 0);
            return true;
        }
        r.ok_note(
            &name("rmmod succeeds"),
            format!(
                "the file read {seen} before; rmmod took {:.2} s",
                took.as_secs_f64()
            ),
        );
        let left = pool_threads();
        r.check(
            &name("no tierkit_pool thread is left"),
            if left.is_empty() {
                Ok(())
            } else {
                Err(format!("pids {left:?}"))
            },
        );
        r.check_note(
            &name("the node's memory is back"),
            memory_back(nid, start_kb),
        );
        if !r.check(
            &name("tierkit loads again"),
            faults::load_tierkit().map_err(|e| errno_name(&e)),
        ) {
            return false;
        }
        r.check("weight table as /init set it", table.restore());
        r.check_note(
            &name("after the reload the pool is empty"),
            pool::snapshot().and_then(|lines| {
                let nids: Vec<u32> = lines.iter().map(|l| l.nid).collect();
                match lines.iter().find(|l| l.target != 0 || l.ready != 0) {
                    _ if nids != topo.memory => {
                        Err(format!("nodes {nids:?}, expected {:?}", topo.memory))
                    }
                    Some(l) => Err(format!("`{} {} {}`", l.nid, l.target, l.ready)),
                    None => Ok(format!("{} nodes, all `NID 0 0`", lines.len())),
                }
            }),
        );
        let threads = pool_threads();
        r.check(
            &name("after the reload one tierkit_pool thread runs"),
            if threads.len() == 1 {
                Ok(())
            } else {
                Err(format!("pids {threads:?}"))
            },
        );
    }
    r.check_note(
        "KUnit filter_glob restored",
        kf.restore()
            .map(|v| v.unwrap_or_default())
            .map_err(|e| e.to_string()),
    );
    true
}

/// Step 5.
pub fn offline_mid_refill(r: &mut Report, topo: &Topology) {
    let what = "memory offline while the refill clears a range";
    let Some(c) = topo.cxl_node() else {
        r.skip(what, "no memory-only node");
        return;
    };
    let blocks = memblock::node_blocks(c);
    if blocks.is_empty()
        || blocks
            .iter()
            .any(|&b| memblock::block_zone(b).as_deref() != Some("Movable"))
    {
        r.skip(
            what,
            format!("node {c}'s blocks are not all online in ZONE_MOVABLE (--topology cxl)"),
        );
        return;
    }
    if vma::node_memtotal_kb(c).unwrap_or(0) < 2 << 20 {
        r.skip(
            what,
            format!("node {c} is under 2 GiB: no room for a ready range"),
        );
        return;
    }
    let _movable = match MovableGigantic::enable() {
        Ok(m) => m,
        Err(e) => {
            r.fail("enable movable_gigantic", errno_name(&e));
            return;
        }
    };
    let start_kb = match pool::quiet_free_kb(c) {
        Ok(kb) => kb,
        Err(e) => {
            r.fail(&format!("node {c}: free memory"), e);
            return;
        }
    };
    // A target lowered during the clear: the range is freed within a step.
    if let Err(e) = pool::set_target(c, 1) {
        r.fail(&format!("node {c}: write `NID 1`"), errno_name(&e));
        return;
    }
    vma::sleep_ms(3000);
    match state(c) {
        Ok((1, 0)) => {
            let t0 = Instant::now();
            let res = pool::set_target(c, 0)
                .map_err(|e| errno_name(&e))
                .and_then(|_| memory_back(c, start_kb))
                .map(|m| format!("{m} after {:.1} s", t0.elapsed().as_secs_f64()));
            r.check_note(
                &format!("node {c}: `NID 0` during the refill's clear frees the range being cleared at once"),
                res,
            );
        }
        other => {
            let _ = pool::set_target(c, 0);
            r.skip(
                &format!("node {c}: `NID 0` during the refill's clear frees the range being cleared at once"),
                format!("3 s after `{c} 1` the pool read {other:?}, not `{c} 1 0` (filled already, or no range)"),
            );
            let _ = memory_back(c, start_kb);
        }
    }
    if let Err(e) = pool::set_target(c, 1) {
        r.fail(&format!("node {c}: write `NID 1`"), errno_name(&e));
        return;
    }
    // Past the allocation, inside the clear (tens of seconds).
    vma::sleep_ms(3000);
    let before = state(c)
        .map(|(t, rd)| format!("`{c} {t} {rd}`"))
        .unwrap_or_default();
    let (mut done, mut refused, mut hung) = (Vec::new(), Vec::new(), Vec::new());
    let mut busy = Vec::new();
    for &b in &blocks {
        match memblock::set_block_state(b, "offline", OFFLINE_LIMIT) {
            Ok(t) => match t.outcome {
                Outcome::Done => done.push(b),
                Outcome::Failed(_) => {
                    busy.push(b);
                    refused.push(format!("memory{b}: {}", t.outcome.describe()))
                }
                Outcome::TimedOut { .. } => hung.push(format!(
                    "memory{b}: {} after {:.0} s",
                    t.outcome.describe(),
                    t.elapsed.as_secs_f64()
                )),
            },
            Err(e) => refused.push(format!("memory{b}: fork: {e}")),
        }
    }
    r.check_note(
        &format!(
            "node {c}: every offline of its blocks during the refill ends within {} s",
            OFFLINE_LIMIT.as_secs()
        ),
        if hung.is_empty() {
            Ok(format!(
                "pool read {before} before; {} of {} blocks offlined, refused: {refused:?}",
                done.len(),
                blocks.len()
            ))
        } else {
            Err(format!(
                "pool read {before} before; stuck: {hung:?}; refused: {refused:?}"
            ))
        },
    );
    retry_refused(r, c, &busy, &mut done);
    let back = online_movable(&done);
    r.check(
        &format!("node {c}: the offlined blocks online again (online_movable)"),
        back.as_ref()
            .map(|_| ())
            .map_err(|not_back| format!("{not_back:?}")),
    );
    if back.is_ok() {
        refill_resumes(r, c, &blocks);
    }
    let res = pool::set_target(c, 0)
        .map_err(|e| errno_name(&e))
        .and_then(|_| pool::wait_for(c, 0, 0, Duration::from_secs(5)).map(|_| ()))
        .and_then(|_| memory_back(c, start_kb));
    r.check_note(
        &format!("node {c}: `NID 0` empties the pool, the node's memory is back"),
        res,
    );
}

/// The offline paused the refill of node `c` and made it give its range
/// up: each block of `busy` (refused during the refill) goes offline when
/// tried again, within [`RETRIES`] tries 1 s apart, and joins `done`.
fn retry_refused(r: &mut Report, c: u32, busy: &[u64], done: &mut Vec<u64>) {
    let mut still = Vec::new();
    for &b in busy {
        let mut last = String::new();
        let ok = (0..RETRIES).any(|_| {
            vma::sleep_ms(1000);
            match memblock::set_block_state(b, "offline", OFFLINE_LIMIT) {
                Ok(t) if t.outcome == Outcome::Done => true,
                Ok(t) => {
                    last = t.outcome.describe();
                    false
                }
                Err(e) => {
                    last = e.to_string();
                    false
                }
            }
        });
        if ok {
            done.push(b);
        } else {
            still.push(format!("memory{b}: {last}"));
        }
    }
    r.check_note(
        &format!("node {c}: a block refused during the refill goes offline when tried again (within {RETRIES} tries, 1 s apart)"),
        if still.is_empty() {
            Ok(format!("{} blocks tried again", busy.len()))
        } else {
            Err(format!("still refused: {still:?}"))
        },
    );
}

/// Tries of a block's offline refused while the refill held a range.
const RETRIES: usize = 5;

/// Step 5's end: with a target of one range on node `c` and that range
/// ready, every block of the node goes offline in ascending order, as a
/// memory device's do (the ready range in ZONE_MOVABLE waits as order-0
/// pages, so each block's isolation succeeds, and the memory notifier
/// gives the range up), and the pool reads `c 1 0`; the refill thread finds
/// no memory there and looks again every 10 s. Once the blocks are online
/// again it must fill the pool to its target within [`REFILL_BACK`] (a GiB
/// takes about 50 s to clear on emulated CXL memory).
fn refill_resumes(r: &mut Report, c: u32, blocks: &[u64]) {
    let what = format!(
        "node {c}: the refill resumes once its memory is back online: `{c} 1 1` within {} s",
        REFILL_BACK.as_secs()
    );
    match pool::wait_for(c, 1, 1, REFILL_BACK) {
        Ok(t) => r.note(format!(
            "node {c}: `{c} 1 1` before the offline after {:.1} s",
            t.as_secs_f64()
        )),
        Err(e) => {
            r.fail(&what, format!("before the offline: {e}; {}", filling()));
            return;
        }
    }
    let mut off = Vec::new();
    let mut not_off = Vec::new();
    for &b in blocks {
        match memblock::set_block_state(b, "offline", OFFLINE_LIMIT) {
            Ok(t) if t.outcome == Outcome::Done => off.push(b),
            Ok(t) => not_off.push(format!("memory{b}: {}", t.outcome.describe())),
            Err(e) => not_off.push(format!("memory{b}: {e}")),
        }
    }
    let gone = if not_off.is_empty() {
        state(c).and_then(|st| {
            if st == (1, 0) {
                Ok(())
            } else {
                Err(format!(
                    "with every block offline the pool reads {st:?}, not `{c} 1 0`"
                ))
            }
        })
    } else {
        Err(format!(
            "blocks not offlined under a ready range: {not_off:?}"
        ))
    };
    let mut not_back = Vec::new();
    for &b in &off {
        match memblock::set_block_state(b, "online_movable", OFFLINE_LIMIT) {
            Ok(t) if t.outcome == Outcome::Done => {}
            Ok(t) => not_back.push(format!("memory{b}: {}", t.outcome.describe())),
            Err(e) => not_back.push(format!("memory{b}: {e}")),
        }
    }
    let res = gone
        .and_then(|()| {
            if not_back.is_empty() {
                Ok(())
            } else {
                Err(format!("blocks not online again: {not_back:?}"))
            }
        })
        .and_then(|()| {
            pool::wait_for(c, 1, 1, REFILL_BACK).map_err(|e| format!("{e}; {}", filling()))
        })
        .map(|t| format!("filled {:.1} s after the blocks came back", t.as_secs_f64()));
    if r.check_note(&what, res) {
        super::held::pipe_holds_gib(r, c);
    }
}

/// How long the pool may take to fill one range once its node has memory:
/// the refill's 10 s retry, the allocation and the clear (about 50 s on
/// emulated CXL memory, three times that on a loaded host).
const REFILL_BACK: Duration = Duration::from_secs(360);

/// `gigantic_pool_filling` now: whether a refill holds a range (being
/// allocated or cleared) or none was started.
fn filling() -> String {
    let n = crate::linux::vma::read_limits()
        .ok()
        .and_then(|l| crate::linux::vma::limit(&l, "gigantic_pool_filling"));
    format!("gigantic_pool_filling {n:?}")
}
