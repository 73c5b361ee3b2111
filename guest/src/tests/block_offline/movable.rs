//! ZONE_MOVABLE: offlining the blocks that hold tierkit's pages moves
//! them (contents, nodes, pfns, `held`, a sharing child, `MADV_DONTNEED`),
//! and the blocks come back online.

use super::*;

/// Memory blocks, each with how many of the mapping's pages it holds.
type Blocks = Vec<(u64, usize)>;

/// The 4 KiB pages on ZONE_MOVABLE move when their blocks go offline.
pub fn movable_case(t: &mut T, c: u32) {
    let what = format!("movable node {c}");
    let online = t.topo.online.clone();
    let target = first_fallback(c, &t.topo.memory, &node_distances(c, &online), &t.topo.cpu);
    let Some(target) = target else {
        t.r.fail(
            &format!("{what}: a node to move to"),
            "no other node with memory",
        );
        return;
    };
    t.r.note(format!(
        "{what}: offlined pages should move to node {target} (first fallback in node {c}'s zonelist, distances {:?})",
        node_distances(c, &online)
    ));
    let Some(s0) = read_stats() else {
        t.r.fail(&format!("{what}: read {}", tk::STATS_PATH), "unreadable");
        return;
    };
    let Some((tk, m)) = map_filled(t, &what, c, PAGES) else {
        return;
    };
    let Some((blocks, s1)) = pages_and_blocks(t, &what, c, &m, &s0) else {
        return;
    };
    let sharer = match Sharer::spawn(&m, t.block_bytes) {
        Ok((sh, present)) => {
            t.r.note(format!(
                "{what}: a forked child shares the mapping ({present} of {PAGES} PTEs present in it)"
            ));
            Some(sh)
        }
        Err(e) => {
            t.r.fail(&format!("{what}: fork a child sharing the mapping"), e);
            None
        }
    };
    let offlined = offline_blocks(t, &what, &blocks);
    check_moved(t, &what, (c, target), &m, &offlined, (&s0, &s1));
    if let Some(sh) = sharer {
        t.r.check_note(
            &format!("{what}: the forked child sees the moved pages"),
            sh.check(target, &offlined, OFFLINE_LIMIT),
        );
    }
    // SAFETY: the mapping is ours; MADV_DONTNEED drops the PTEs, the
    // file keeps the pages (dev-tierkit).
    let dn = unsafe { crate::linux::sys::madvise(m.as_ptr().cast(), m.len(), libc::MADV_DONTNEED) };
    t.r.check_note(
        &format!("{what}: MADV_DONTNEED + touch after the move: the moved contents"),
        match dn {
            Err(e) => Err(format!("madvise: {}", errno_name(&e))),
            Ok(()) => verify_pages(&m, 0..PAGES)
                .and_then(|v| check_nodes(&m, target).map(|n| format!("{v}, {n}"))),
        },
    );
    t.online_all(&what);
    drop(m);
    drop(tk);
    after_onlining(t, &what, c, &s0);
}

/// Before the offline: every page of `m` on node `c`, counted in the stats
/// (`s0` before the mmap), in blocks of node `c` in ZONE_MOVABLE. Gives
/// the blocks and the stats after the mmap.
fn pages_and_blocks(
    t: &mut T,
    what: &str,
    c: u32,
    m: &Mapping,
    s0: &[NodeStats],
) -> Option<(Blocks, Vec<NodeStats>)> {
    t.r.check_note(
        &format!("{what}: every page on node {c}"),
        check_nodes(m, c),
    );
    let s1 = read_stats().unwrap_or_default();
    t.r.check(
        &format!("{what}: stats count the pages on node {c}"),
        if held(&s1, c) == held(s0, c) + PAGES as u64 {
            Ok(())
        } else {
            Err(format!(
                "held {} before, {} after the mmap",
                fmt_held(s0, &t.topo.memory),
                fmt_held(&s1, &t.topo.memory)
            ))
        },
    );
    let pfns = all_pfns(&mut t.r, what, m)?;
    let blocks = blocks_of(
        &pfns.iter().copied().map(Some).collect::<Vec<_>>(),
        t.block_bytes,
    );
    let desc: Vec<String> = blocks
        .iter()
        .map(|(b, n)| {
            format!(
                "memory{b} ({n} pages, node {}, zone {})",
                block_node(*b).map_or("?".into(), |x| x.to_string()),
                block_zone(*b).unwrap_or_else(|| "?".into())
            )
        })
        .collect();
    t.r.check_note(
        &format!("{what}: the pages' blocks are node {c}'s, in ZONE_MOVABLE"),
        if blocks
            .iter()
            .all(|(b, _)| block_node(*b) == Some(c) && block_zone(*b).as_deref() == Some("Movable"))
        {
            Ok(desc.join(", "))
        } else {
            Err(desc.join(", "))
        },
    );
    Some((blocks, s1))
}

/// Each block offlined (one check each); gives those that went offline.
/// Notes what the kernel logged about it.
fn offline_blocks(t: &mut T, what: &str, blocks: &[(u64, usize)]) -> Vec<u64> {
    t.skip_log();
    let mut offlined = Vec::new();
    for &(b, n) in blocks {
        let name = format!("{what}: offline memory{b} holding {n} tierkit pages");
        let Some(tm) = t.offline(what, b, n) else {
            continue;
        };
        let res = match tm.outcome {
            Outcome::Done => {
                let st = block_state(b);
                if st.as_deref() == Some("offline") {
                    offlined.push(b);
                    Ok(secs(tm.elapsed))
                } else {
                    Err(format!("the write succeeded but state reads {st:?}"))
                }
            }
            Outcome::TimedOut { .. } => Err(format!(
                "hung: {} (limit {})",
                tm.outcome.describe(),
                secs(OFFLINE_LIMIT)
            )),
            o => Err(format!("{} after {}", o.describe(), secs(tm.elapsed))),
        };
        t.r.check_note(&name, res);
    }
    let log: Vec<String> = t
        .log()
        .into_iter()
        .filter(|l| l.contains("tierkit") || l.contains("offlin"))
        .collect();
    if !log.is_empty() {
        t.r.note(format!("{what}: kernel log: {}", log.join(" | ")));
    }
    offlined
}

/// After the offline, before anything else touches the mapping: contents,
/// nodes (now `target`), no pfn in an offlined block, and `held` moved
/// from `c` to `target` (`s0`, `s1`: stats before and after the mmap).
fn check_moved(
    t: &mut T,
    what: &str,
    (c, target): (u32, u32),
    m: &Mapping,
    offlined: &[u64],
    (s0, s1): (&[NodeStats], &[NodeStats]),
) {
    // Before anything touches the mapping: the moved pages' PTEs are gone.
    let pm = pagemap_pfns(m.addr(), PAGES).unwrap_or_default();
    let unmapped = pm.iter().filter(|p| p.is_none()).count();
    t.r.note(format!(
        "{what}: after the offline, before the next touch, {unmapped} of {PAGES} pages are unmapped"
    ));
    t.r.check_note(
        &format!("{what}: every byte intact after the offline"),
        verify_pages(m, 0..PAGES),
    );
    t.r.check_note(
        &format!("{what}: every page now on node {target}"),
        check_nodes(m, target),
    );
    let after = pagemap_pfns(m.addr(), PAGES).unwrap_or_default();
    let inside: Vec<u64> = after
        .iter()
        .flatten()
        .copied()
        .filter(|&p| offlined.contains(&block_of_pfn(p, t.block_bytes)))
        .collect();
    t.r.check(
        &format!("{what}: no page left in an offlined block"),
        if after.len() != PAGES || after.iter().any(Option::is_none) {
            Err(format!(
                "{} of {PAGES} pages show no pfn",
                PAGES - after.iter().flatten().count()
            ))
        } else if inside.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} pages still in offlined blocks, first pfn {:#x}",
                inside.len(),
                inside[0]
            ))
        },
    );
    let s2 = read_stats().unwrap_or_default();
    t.r.check_note(
        &format!("{what}: stats: held moved from node {c} to node {target}"),
        if held(&s2, c) == held(s0, c)
            && held(&s2, target) == held(s1, target) + PAGES as u64
            && total_held(&s2) == total_held(s1)
        {
            Ok(format!(
                "held {} -> {}",
                fmt_held(s1, &t.topo.memory),
                fmt_held(&s2, &t.topo.memory)
            ))
        } else {
            Err(format!(
                "held before the mmap {}, after it {}, after the offline {} (expected node {c} back to {}, node {target} +{PAGES}, same total)",
                fmt_held(s0, &t.topo.memory),
                fmt_held(s1, &t.topo.memory),
                fmt_held(&s2, &t.topo.memory),
                held(s0, c)
            ))
        },
    );
}

/// With the blocks online again: a new mapping on node `c` works, and
/// once the files are closed the stats are back to `s0`.
fn after_onlining(t: &mut T, what: &str, c: u32, s0: &[NodeStats]) {
    // A new mapping on the node, with the blocks back.
    if let Some((_tk2, m2)) = map_filled(t, &format!("{what} after onlining"), c, PAGES_AGAIN) {
        t.r.check_note(
            &format!("{what} after onlining: every page on node {c}"),
            check_nodes(&m2, c),
        );
        t.r.check_note(
            &format!("{what} after onlining: contents"),
            verify_pages(&m2, 0..PAGES_AGAIN),
        );
    }
    let s3 = read_stats().unwrap_or_default();
    t.r.check(
        &format!("{what}: stats back to the start once the files are closed"),
        if t.topo.memory.iter().all(|&n| held(&s3, n) == held(s0, n)) {
            Ok(())
        } else {
            Err(format!(
                "held {} at the start, {} now",
                fmt_held(s0, &t.topo.memory),
                fmt_held(&s3, &t.topo.memory)
            ))
        },
    );
}
