//! The node goes offline under two files' pages: they move, the weights
//! and `held` follow, and the node comes back.

use super::*;

/// The three files of the run: A weighted over DRAM and the node, B and C
/// on the node alone; A and B mapped and filled.
pub struct Files {
    pub a: Tierkit,
    pub b: Tierkit,
    pub fc: Tierkit,
    pub ma: Mapping,
    pub mb: Mapping,
}

/// How many of `m`'s pages are on node `c`.
fn on_node(m: &Mapping, c: u32) -> std::io::Result<usize> {
    m.page_nodes()
        .map(|n| n.iter().filter(|&&x| x == c as i32).count())
}

pub fn run(r: &mut Report, dram: u32, c: u32, blocks: &[u64]) -> Vec<u64> {
    let mut offline: Vec<u64> = Vec::new();
    let held0 = held_on(c);
    let Some(files) = open_files(r, dram, c) else {
        return offline;
    };
    offline = set_all(
        r,
        &format!(
            "offline all {} blocks of node {c} while tierkit holds pages there",
            blocks.len()
        ),
        blocks,
        "offline",
    );
    if offline.len() != blocks.len() {
        return offline;
    }
    while_offline(r, dram, c, &files, held0);
    let back = set_all(
        r,
        &format!("online all blocks of node {c} again"),
        &offline,
        "online_movable",
    );
    offline.retain(|b| !back.contains(b));
    if !offline.is_empty() {
        return offline;
    }
    after_online(r, c, &files);
    offline
}

/// Files A, B and C opened, A and B mapped and filled, and where their
/// pages are before the offline checked.
fn open_files(r: &mut Report, dram: u32, c: u32) -> Option<Files> {
    let open = |r: &mut Report, name: &str, mask: u64| -> Option<Tierkit> {
        let t = Tierkit::open()
            .map_err(|e| r.fail(&format!("{name}: open"), e.to_string()))
            .ok()?;
        t.set_policy(tierkit_core::uapi::TK_MODE_WEIGHTED_INTERLEAVE, mask)
            .map_err(|e| r.fail(&format!("{name}: SET_POLICY"), errno_name(&e)))
            .ok()?;
        Some(t)
    };
    let both = mask_of(&[dram, c]);
    let only_c = mask_of(&[c]);
    let (Some(a), Some(b), Some(fc)) = (
        open(r, "file A", both),
        open(r, "file B", only_c),
        open(r, "file C", only_c),
    ) else {
        return None;
    };
    let (ma, mb) = match (a.map(PAGES_A, 0), b.map(PAGES_B, 0)) {
        (Ok(x), Ok(y)) => (x, y),
        (x, y) => {
            r.fail(
                "map files A and B",
                format!(
                    "A: {:?}, B: {:?}",
                    x.err().map(|e| errno_name(&e)),
                    y.err().map(|e| errno_name(&e))
                ),
            );
            return None;
        }
    };
    fill(&ma, 1);
    fill(&mb, 2);
    let on_c = |m: &Mapping| on_node(m, c);
    r.check_note(
        "before: file B's pages all on the CXL node, file A's partly",
        match (on_c(&ma), on_c(&mb)) {
            (Ok(x), Ok(y)) if y == PAGES_B && x > 0 && x < PAGES_A => {
                Ok(format!("A {x}/{PAGES_A}, B {y}/{PAGES_B} on node {c}"))
            }
            (x, y) => Err(format!("on node {c}: A {x:?}, B {y:?}")),
        },
    );
    Some(Files { a, b, fc, ma, mb })
}

/// With every block of the node offline: the node and its weight files
/// gone, the files' pages moved intact, nothing held there, and what the
/// files and a new one can still do.
fn while_offline(r: &mut Report, dram: u32, c: u32, files: &Files, held0: u64) {
    let Files { fc, ma, mb, .. } = files;
    let on_c = |m: &Mapping| on_node(m, c);
    let both = mask_of(&[dram, c]);
    let only_c = mask_of(&[c]);
    check_node_gone(r, c);
    for (name, m, f) in [("file A", ma, 1), ("file B", mb, 2)] {
        r.check(&format!("{name}: every byte intact"), verify(m, f));
        r.check(
            &format!("{name}: no page left on node {c}"),
            match on_c(m) {
                Ok(0) => Ok(()),
                x => Err(format!("{x:?} pages on node {c}")),
            },
        );
    }
    r.check(
        &format!("stats: nothing held on node {c}"),
        match held_on(c) {
            0 => Ok(()),
            h => Err(format!("held {h} (before the test {held0})")),
        },
    );
    r.check(
        "file C keeps its mask: TASK_NEXT still returns the node",
        match fc.task_next(4) {
            Ok(v) if v.iter().all(|&n| u32::from(n) == c) => Ok(()),
            Ok(v) => Err(format!("got {v:?}")),
            Err(e) => Err(errno_name(&e)),
        },
    );
    let held_before = held_on(c);
    r.check(
        "file C: mmap picking the node is ENOMEM",
        expect_errno(fc.map(8, 0), libc::ENOMEM),
    );
    r.check(
        "file C: BULK picking the node is ENOMEM",
        expect_errno(fc.bulk(8), libc::ENOMEM),
    );
    r.check(
        "the failed calls left nothing held",
        if held_on(c) == held_before {
            Ok(())
        } else {
            Err(format!("held {} then {}", held_before, held_on(c)))
        },
    );
    match Tierkit::open() {
        Ok(d) => {
            r.check(
                "new SET_POLICY naming only the node: EINVAL",
                expect_errno(
                    d.set_policy(tierkit_core::uapi::TK_MODE_WEIGHTED_INTERLEAVE, only_c),
                    libc::EINVAL,
                ),
            );
            r.check(
                "new SET_POLICY naming DRAM and the node: DRAM alone",
                match d.set_policy(tierkit_core::uapi::TK_MODE_WEIGHTED_INTERLEAVE, both) {
                    Ok(p) if p.nodemask == mask_of(&[dram]) => Ok(()),
                    Ok(p) => Err(format!("mask {:#x}", p.nodemask)),
                    Err(e) => Err(errno_name(&e)),
                },
            );
        }
        Err(e) => {
            r.fail("open a fourth file", e.to_string());
        }
    }
}

/// With the blocks online again: the node and its weight files back, file
/// C maps there again, file A still intact.
fn after_online(r: &mut Report, c: u32, files: &Files) {
    let Files { fc, ma, .. } = files;
    let on_c = |m: &Mapping| on_node(m, c);
    r.check(
        &format!("node {c} is back in N_MEMORY with its weight files"),
        {
            let missing: Vec<String> = weight_files(c)
                .into_iter()
                .filter(|f| !Path::new(f).exists())
                .collect();
            if !has_memory().contains(&c) {
                Err("has_memory does not list it".into())
            } else if !missing.is_empty() {
                Err(format!("missing: {}", missing.join(", ")))
            } else {
                Ok(())
            }
        },
    );
    r.check(
        "file C's old policy maps on the node again, zeroed",
        match fc.map(8, 0) {
            Ok(m) => match (m.first_nonzero(), on_c(&m)) {
                (None, Ok(8)) => Ok(()),
                (nz, n) => Err(format!("first non-zero byte {nz:?}, on node {c}: {n:?}")),
            },
            Err(e) => Err(errno_name(&e)),
        },
    );
    r.check("file A: every byte intact after the online", verify(ma, 1));
}
