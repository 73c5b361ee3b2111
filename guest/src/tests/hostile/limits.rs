//! limits: tierkit's `limits` file, the 4th stats column, and an mmap
//! past `global_pages`.

use super::*;

/// The limits file, the 4th stats column, and the global limit.
pub fn limits(r: &mut Report, topo: &Topology) {
    let lim = match vma::read_limits() {
        Ok(l) => l,
        Err(e) => {
            r.fail(
                "limits: /sys/kernel/debug/tierkit/limits reads KEY VALUE lines",
                format!("{e:#}"),
            );
            return;
        }
    };
    r.ok_note(
        "limits: /sys/kernel/debug/tierkit/limits reads KEY VALUE lines",
        lim.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
    );
    let get = |k: &str| vma::limit(&lim, k);
    r.check(
        "limits: file_pages is 262144 and file_gigantic 64",
        match (get("file_pages"), get("file_gigantic")) {
            (Some(262144), Some(64)) => Ok(()),
            (a, b) => Err(format!("file_pages {a:?}, file_gigantic {b:?}")),
        },
    );
    let total_pages = vma::memtotal_kb().unwrap_or(0) / 4;
    r.check_note(
        "limits: global_pages is 3/4 of RAM",
        match get("global_pages") {
            Some(g) if g.abs_diff(total_pages * 3 / 4) <= total_pages / 100 => {
                Ok(format!("{g} pages, MemTotal {total_pages} pages"))
            }
            g => Err(format!(
                "global_pages {g:?}, 3/4 of MemTotal is {}",
                total_pages * 3 / 4
            )),
        },
    );
    let stats = tk::read_stats();
    r.check(
        "limits: stats has the 4th column gigantic",
        match &stats {
            Some(s) if !s.is_empty() && s.iter().all(|n| n.gigantic.is_some()) => Ok(()),
            _ => Err(format!(
                "stats: {:?}",
                std::fs::read_to_string(tk::STATS_PATH).unwrap_or_default()
            )),
        },
    );
    let expect_held = |s: &Option<Vec<tk::NodeStats>>| -> Option<u64> {
        let s = s.as_ref()?;
        Some(
            s.iter()
                .map(|n| n.held + GIB_PAGES as u64 * n.gigantic.unwrap_or(0))
                .sum(),
        )
    };
    r.check(
        "limits: held_pages is stats' held plus 262144 per gigantic range",
        match (get("held_pages"), expect_held(&stats)) {
            (Some(h), Some(e)) if h == e => Ok(()),
            (h, e) => Err(format!("held_pages {h:?}, stats say {e:?}")),
        },
    );
    // held_pages follows a 4 KiB mapping.
    let res = (|| -> Result<(), String> {
        let base = vma::read_limits()
            .ok()
            .and_then(|l| vma::limit(&l, "held_pages"))
            .ok_or("no held_pages")?;
        let tk = Tierkit::open().map_err(|e| e.to_string())?;
        tk.set_policy(TK_MODE_INTERLEAVE, topo.memory_mask())
            .map_err(|e| errno_name(&e))?;
        let m = tk
            .map(1000, 0)
            .map_err(|e| format!("mmap: {}", errno_name(&e)))?;
        let now = vma::read_limits()
            .ok()
            .and_then(|l| vma::limit(&l, "held_pages"))
            .ok_or("no held_pages")?;
        drop(m);
        drop(tk);
        let after = vma::read_limits()
            .ok()
            .and_then(|l| vma::limit(&l, "held_pages"))
            .ok_or("no held_pages")?;
        if now != base + 1000 || after != base {
            return Err(format!(
                "held_pages {base} -> {now} with 1000 pages mapped -> {after} after close"
            ));
        }
        Ok(())
    })();
    r.check("limits: held_pages follows a 1000-page mapping", res);

    global_limit(r, topo, &lim);
}

/// Fills tierkit up to `global_pages` with 1 GiB 4 KiB-mode files on the
/// non-CXL nodes with the most free memory, then checks that an mmap one
/// page past the limit is ENOMEM at once and takes nothing, and that one
/// up to it succeeds.
pub(super) fn global_limit(r: &mut Report, topo: &Topology, lim: &[(String, u64)]) {
    let name = "limits: an mmap past global_pages fails with ENOMEM at once and takes nothing";
    let (Some(global), Some(held)) = (
        vma::limit(lim, "global_pages"),
        vma::limit(lim, "held_pages"),
    ) else {
        r.fail(name, "no global_pages/held_pages in limits");
        return;
    };
    let room = global.saturating_sub(held);
    let files = room / GIB_PAGES as u64;
    let rest = room % GIB_PAGES as u64;
    let nodes: Vec<u32> = topo
        .memory
        .iter()
        .copied()
        .filter(|&n| !is_cxl_node(n))
        .collect();
    let free: u64 = nodes.iter().filter_map(|&n| vma::node_free_kb(n)).sum();
    let fits = fill_fits(&nodes, files, rest);
    if !fits {
        r.skip(
            name,
            format!(
                "reaching global_pages {global} needs {files} GiB + {rest} pages held (those interleaved); \
                 the non-CXL nodes {:?} have {} MiB free, too little for that (CXL memory costs ~45 s per GiB under QEMU)",
                nodes,
                free / MIB_KB
            ),
        );
        return;
    }
    let base_held = Held::now();
    let free0: Vec<(u32, Option<u64>)> = nodes.iter().map(|&n| (n, vma::node_free_kb(n))).collect();
    let t0 = monotonic_ns();
    let (kept, fill_err) = fill_gib_files(&nodes, files);
    let fill_s = (monotonic_ns() - t0) as f64 / 1e9;
    let res = past_the_limit(&nodes, global, fill_err, kept.len(), fill_s);
    r.check_note(name, res);
    drop(kept);
    r.check_note(
        "limits: after the global-limit test, stats and MemFree back",
        held_back(&base_held).and_then(|h| {
            let mut v = vec![h];
            for (n, f) in &free0 {
                v.push(memfree_back(*n, *f)?);
            }
            Ok(v.join("; "))
        }),
    );
}

/// Whether `files` 1 GiB files, each on the node with the most free
/// memory in turn, and `rest` pages interleaved over `nodes` fit today.
fn fill_fits(nodes: &[u32], files: u64, rest: u64) -> bool {
    // The files go to the node with the most free memory in turn, and the
    // last mapping (`rest` pages, under 1 GiB) is interleaved over all of
    // them: play the fill out on today's free memory; every step must
    // leave each node it uses 256 MiB over its watermarks.
    const SPARE_KB: u64 = 256 * MIB_KB;
    let mut left_kb: Vec<u64> = nodes
        .iter()
        .map(|&n| vma::node_free_kb(n).unwrap_or(0))
        .collect();
    let mut fits = !left_kb.is_empty();
    for _ in 0..files {
        if let Some(m) = left_kb.iter_mut().max() {
            fits &= *m >= (1 << 20) + SPARE_KB;
            *m = m.saturating_sub(1 << 20);
        }
    }
    let share_kb = (rest * (PAGE_SIZE as u64 / 1024)).div_ceil(left_kb.len().max(1) as u64);
    fits &= left_kb.iter().all(|&m| m >= share_kb + SPARE_KB);
    fits
}

/// Fills toward the limit: `files` 1 GiB files, each on the node with the
/// most free memory; the files kept, and why the fill stopped early.
fn fill_gib_files(
    nodes: &[u32],
    files: u64,
) -> (
    Vec<(Tierkit, crate::linux::sys::Mapping, u32)>,
    Option<String>,
) {
    let mut kept = Vec::new();
    let mut fill_err = None;
    for _ in 0..files {
        let Some(&nid) = nodes
            .iter()
            .max_by_key(|&&n| vma::node_free_kb(n).unwrap_or(0))
        else {
            break;
        };
        let res = Tierkit::open().and_then(|tk| {
            tk.set_policy(TK_MODE_INTERLEAVE, 1 << nid)?;
            let m = tk.map(GIB_PAGES, 0)?;
            Ok((tk, m, nid))
        });
        match res {
            Ok(x) => kept.push(x),
            Err(e) => {
                fill_err = Some(format!(
                    "filling: 1 GiB file {} on node {nid}: {}",
                    kept.len() + 1,
                    errno_name(&e)
                ));
                break;
            }
        }
    }
    (kept, fill_err)
}

/// The mapping one page past `global_pages` (ENOMEM at once, nothing
/// taken), then exactly up to it.
fn past_the_limit(
    nodes: &[u32],
    global: u64,
    fill_err: Option<String>,
    nr_kept: usize,
    fill_s: f64,
) -> Result<String, String> {
    if let Some(e) = fill_err {
        return Err(e);
    }
    let lim = vma::read_limits().map_err(|e| format!("{e:#}"))?;
    let held_now = vma::limit(&lim, "held_pages").ok_or("no held_pages")?;
    let left = global.checked_sub(held_now).ok_or(format!(
        "held_pages {held_now} is past global_pages {global}"
    ))?;
    if left >= GIB_PAGES as u64 {
        return Err(format!("{left} pages left below the limit after filling"));
    }
    // The last pages interleaved over every fill node: what is left
    // below the limit may not fit on any one of them.
    let mask = nodes.iter().fold(0u64, |m, &n| m | 1 << n);
    let node_free = || -> u64 { nodes.iter().filter_map(|&n| vma::node_free_kb(n)).sum() };
    let tk = Tierkit::open().map_err(|e| e.to_string())?;
    tk.set_policy(TK_MODE_INTERLEAVE, mask)
        .map_err(|e| errno_name(&e))?;
    let free_b = node_free();
    let held_b = Held::now();
    let t1 = monotonic_ns();
    let over = tk.map(left as usize + 1, 0);
    let dt = monotonic_ns() - t1;
    let free_a = node_free();
    let held_a = Held::now();
    let mut errs = Vec::new();
    match &over {
        Ok(_) => errs.push(format!(
            "mmap of {} pages (one past the limit) succeeded",
            left + 1
        )),
        Err(e) if e.raw_os_error() == Some(libc::ENOMEM) => {}
        Err(e) => errs.push(format!(
            "mmap of {} pages: {}, expected ENOMEM",
            left + 1,
            errno_name(e)
        )),
    }
    drop(over);
    if dt > 50_000_000 {
        errs.push(format!(
            "the refusal took {:.1} ms (work before the check?)",
            dt as f64 / 1e6
        ));
    }
    if free_a + TOL_KB < free_b {
        errs.push(format!(
            "nodes {nodes:?} MemFree {} -> {} MiB",
            free_b / MIB_KB,
            free_a / MIB_KB
        ));
    }
    if held_a != held_b {
        errs.push("stats changed".into());
    }
    if !errs.is_empty() {
        return Err(errs.join("; "));
    }
    let mut note = format!(
        "filled {} GiB in {fill_s:.1} s; {} pages past the limit: ENOMEM in {:.3} ms",
        nr_kept,
        left + 1,
        dt as f64 / 1e6
    );
    if left > 0 {
        match tk.map(left as usize, 0) {
            Ok(m) => {
                note += &format!("; {left} pages up to the limit: mapped");
                drop(m);
            }
            Err(e) => {
                return Err(format!(
                    "{note}; but {left} pages, exactly up to the limit, failed with {}",
                    errno_name(&e)
                ))
            }
        }
    }
    Ok(note)
}
