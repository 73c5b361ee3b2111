//! Kernel memory (ZONE_NORMAL): offlining a block that holds tierkit pages
//! fails within 2 s with `EBUSY`, and nothing changes.

use super::*;

/// Offlining a block of kernel memory that holds tierkit pages: `EBUSY`
/// at once, nothing changes.
pub fn kernel_case(t: &mut T, k: u32) {
    let what = format!("kernel memory node {k}");
    let zones: Vec<String> = node_zones(k).into_iter().map(|z| z.zone).collect();
    t.r.note(format!("{what}: zones {}", zones.join(" ")));
    let Some(s0) = read_stats() else {
        t.r.fail(&format!("{what}: read {}", tk::STATS_PATH), "unreadable");
        return;
    };
    let Some((_tk, m)) = map_filled(t, &what, k, PAGES) else {
        return;
    };
    t.r.check_note(
        &format!("{what}: every page on node {k}"),
        check_nodes(&m, k),
    );
    let Some(pfns) = all_pfns(&mut t.r, &what, &m) else {
        return;
    };
    let blocks = blocks_of(
        &pfns.iter().copied().map(Some).collect::<Vec<_>>(),
        t.block_bytes,
    );
    t.r.note(format!(
        "{what}: the pages are in {}",
        blocks
            .iter()
            .map(|(b, n)| format!(
                "memory{b} ({n} pages, zone {})",
                block_zone(*b).unwrap_or_else(|| "?".into())
            ))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    t.skip_log();
    for &(b, n) in &blocks {
        let name = format!("{what}: offline memory{b} holding {n} tierkit pages is EBUSY at once");
        let Some(tm) = t.offline(&what, b, n) else {
            continue;
        };
        let res = match tm.outcome {
            Outcome::Failed(e) if e == libc::EBUSY && tm.elapsed < PROMPT => {
                Ok(format!("EBUSY in {}", secs(tm.elapsed)))
            }
            Outcome::Failed(e) if e == libc::EBUSY => Err(format!(
                "EBUSY, but after {} (limit {})",
                secs(tm.elapsed),
                secs(PROMPT)
            )),
            o => Err(format!("{} after {}", o.describe(), secs(tm.elapsed))),
        };
        t.r.check_note(&name, res);
        let st = block_state(b);
        t.r.check(
            &format!("{what}: memory{b} still online"),
            if st.as_deref() == Some("online") {
                Ok(())
            } else {
                Err(format!("state {st:?}"))
            },
        );
    }
    let log: Vec<String> = t
        .log()
        .into_iter()
        .filter(|l| l.contains("offlin"))
        .collect();
    if !log.is_empty() {
        t.r.note(format!("{what}: kernel log: {}", log.join(" | ")));
    }
    t.online_all(&what);
    t.r.check_note(
        &format!("{what}: contents intact"),
        verify_pages(&m, 0..PAGES),
    );
    t.r.check_note(
        &format!("{what}: every page still on node {k}"),
        check_nodes(&m, k),
    );
    let after = pagemap_pfns(m.addr(), PAGES).unwrap_or_default();
    t.r.check(
        &format!("{what}: the pages did not move"),
        if after.iter().copied().eq(pfns.iter().copied().map(Some)) {
            Ok(())
        } else {
            Err("pfns changed".to_string())
        },
    );
    let s1 = read_stats().unwrap_or_default();
    t.r.check(
        &format!("{what}: stats unchanged"),
        if held(&s1, k) == held(&s0, k) + PAGES as u64
            && total_held(&s1) == total_held(&s0) + PAGES as u64
        {
            Ok(())
        } else {
            Err(format!(
                "held {} before the mmap, {} now (expected +{PAGES} on node {k} and in total)",
                fmt_held(&s0, &t.topo.memory),
                fmt_held(&s1, &t.topo.memory)
            ))
        },
    );
}
