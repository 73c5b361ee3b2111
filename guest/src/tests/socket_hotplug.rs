//! `tk-test-socket`'s hotplug of a socket's memory-only node: every memory
//! block of socket 1's memory-only node goes offline, so the node leaves
//! `N_MEMORY`, and comes back (`online_movable`). Meanwhile each socket's
//! pages follow the per-socket rules of Documentation/mm/weighted-interleave.md
//! against tierkit-core's model (`socket_place.rs`'s helpers): a new file
//! places over the nodes with memory now, so the device's tables that still
//! name the node place without it; a file whose policy was set before keeps
//! the node in its mask, and an allocation that picks it fails with
//! `ENOMEM`; socket 0's placement does not change; back online, socket 1's
//! pages follow its whole table again.
//!
//! Needs the node's memory all online in ZONE_MOVABLE, so that it can go
//! offline whole: on `socket2` that is Debian's kernel, whose ACPI memory
//! hotplug driver adds node 3 as a DIMM (`--kernel debian --topology
//! socket2`); on tierkit's kernel node 3 is boot memory and this skips.

use super::node_offline::{check_node_gone, has_memory, movable_blocks, put_back, set_all};
use super::socket_machine::{pin, pinned, Machine, Socket};
use super::socket_place::{arg, file, placed_by, set_device, tables, want, PAGES};
use crate::abi::tk::{Tierkit, TK_MODE_WEIGHTED_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::errno::{errno_name, expect_errno};
use crate::topology::interleave::compare_nodes;
use crate::topology::weights::WeightDir;
use tierkit_core::interleave::{Nodemask, TaskState, Weights, MAX_NUMNODES};
use tierkit_core::socket::{Levels, SocketWeights};
use tierkit_core::uapi::{TK_SOCKET_F_DEVICE, TK_SOCKET_GET, TK_SOCKET_SET};

const NAME: &str = "hotplug of socket 1's memory-only node";

/// The device's tables, set before the offline and kept through it (a
/// table naming a node without memory cannot be set): socket 0's local
/// only 3:1 (the RFC's; it names none of socket 1's nodes), socket 1's the
/// socket2 HMAT figures reduced, 6:2:3:1 (it names every node, its own
/// memory-only node at 2).
fn device_tables(m: &Machine, b: &Socket) -> Vec<(u32, [u8; MAX_NUMNODES])> {
    let local = tables(m, [3, 1, 0, 0]);
    tables(m, [6, 2, 3, 1])
        .into_iter()
        .zip(local)
        .map(|(hmat, local)| if hmat.0 == b.id { hmat } else { local })
        .collect()
}

/// What the test holds across the offline: the two sockets, the node, the
/// device's tables, and the files whose policy was set before it (over
/// every node with memory then), none mapped yet.
struct Plan<'a> {
    m: &'a Machine,
    a: &'a Socket,
    b: &'a Socket,
    /// Socket 1's memory-only node.
    c: u32,
    /// The device's tables ([`device_tables`]) as the model has them.
    dev: SocketWeights,
    global: Weights,
    /// Mapped from socket 1 while the node is offline.
    map1: Tierkit,
    /// Its task path asked from socket 1 while the node is offline.
    task1: Tierkit,
    /// Mapped from socket 0 while the node is offline.
    map0: Tierkit,
    /// Socket 0's pages of a new file before the offline.
    pages0: Vec<i32>,
}

/// No file tables.
const NONE: SocketWeights = SocketWeights::new();

impl Plan<'_> {
    /// The nodes with memory while the node is offline.
    fn memory_now(&self) -> u64 {
        self.m.memory & !(1u64 << self.c)
    }

    /// The model's levels: the device's tables, no file tables.
    fn levels(&self) -> Levels<'_> {
        Levels {
            file: &NONE,
            file_flat: None,
            device: &self.dev,
            global: self.global,
        }
    }
}

pub(super) fn hotplug(r: &mut Report, ctl: &Tierkit, m: &Machine, global: Weights) {
    let (Some(a), Some(b)) = (m.sockets.first(), m.sockets.get(1)) else {
        r.skip(NAME, "one socket");
        return;
    };
    let Some(c) = Nodemask(b.near_mem & m.memory).first() else {
        r.skip(NAME, format!("socket {} has no memory-only node", b.id));
        return;
    };
    let c = c as u32;
    let Ok(blocks) = movable_blocks(c) else {
        r.skip(
            NAME,
            format!(
                "node {c} is not all online ZONE_MOVABLE memory, so it cannot go offline whole \
                 (boot memory: a kernel without ACPI memory hotplug, as tierkit's; Debian's adds it as a DIMM)"
            ),
        );
        return;
    };
    let weight = WeightDir::tierkit().and_then(|d| d.weight(c).ok());
    let Some(plan) = before(r, ctl, m, a, b, c, global) else {
        r.check(
            "clear the device tables after the hotplug checks",
            set_device(ctl, m, None).map(|_| ()),
        );
        return;
    };
    let off = set_all(
        r,
        &format!(
            "offline all {} blocks of socket {}'s memory-only node {c}",
            blocks.len(),
            b.id
        ),
        &blocks,
        "offline",
    );
    if off.len() == blocks.len() {
        while_offline(r, ctl, &plan);
        let back = set_all(
            r,
            &format!("online all blocks of node {c} again (online_movable)"),
            &off,
            "online_movable",
        );
        if back.len() == off.len() {
            after_online(r, &plan, weight);
        }
    }
    put_back(
        r,
        &blocks,
        &[],
        &format!("restore: online node {c}'s blocks left offline"),
    );
    r.check(
        "clear the device tables after the hotplug checks",
        set_device(ctl, m, None).map(|_| ()),
    );
}

/// The device's tables ([`device_tables`]); the files made before the
/// offline, and socket 0's pages of a new file then.
fn before<'a>(
    r: &mut Report,
    ctl: &Tierkit,
    m: &'a Machine,
    a: &'a Socket,
    b: &'a Socket,
    c: u32,
    global: Weights,
) -> Option<Plan<'a>> {
    let res = (|| -> Result<Plan<'a>, String> {
        let dev = set_device(ctl, m, Some(&device_tables(m, b)))?;
        let pages0 = pinned_pages(a, m.memory)?;
        let p = Plan {
            m,
            a,
            b,
            c,
            dev,
            global,
            map1: file(m.memory)?,
            task1: file(m.memory)?,
            map0: file(m.memory)?,
            pages0,
        };
        compare_nodes(&p.pages0, &want(&p.levels(), a.id, m.memory, 0, PAGES))
            .map_err(|e| format!("socket {} before the offline: {e}", a.id))?;
        Ok(p)
    })();
    r.check(
        &format!(
            "{NAME}: device tables (socket {} local only 3:1, socket {} hmat 6:2:3:1), files opened and socket {}'s pages as the model before the offline",
            a.id, b.id, a.id
        ),
        res.as_ref().map(|_| ()).map_err(String::clone),
    );
    res.ok()
}

/// Pinned to `s`: a new file's pages over `mask`.
fn pinned_pages(s: &Socket, mask: u64) -> Result<Vec<i32>, String> {
    std::thread::scope(|sc| {
        sc.spawn(|| {
            pin(s)?;
            let f = file(mask)?;
            let mp = f.map(PAGES, 0).map_err(|e| format!("mmap: {e}"))?;
            mp.page_nodes().map_err(|e| format!("move_pages: {e}"))
        })
        .join()
        .unwrap_or_else(|_| Err("the pinned thread panicked".into()))
    })
}

/// Pinned to `s`: a new file whose policy names every node that had memory
/// before the offline gets the nodes with memory now, and its pages, task
/// steps and bulk split follow the model over them.
fn new_file(s: &Socket, l: &Levels<'_>, p: &Plan<'_>) -> Result<String, String> {
    pin(s)?;
    let f = Tierkit::open().map_err(|e| e.to_string())?;
    let got = f
        .set_policy(TK_MODE_WEIGHTED_INTERLEAVE, p.m.memory)
        .map_err(|e| format!("TK_IOC_SET_POLICY: {}", errno_name(&e)))?;
    if got.nodemask != p.memory_now() {
        return Err(format!(
            "the policy's nodes {:#x}, not the nodes with memory {:#x}",
            got.nodemask,
            p.memory_now()
        ));
    }
    placed_by(s, &f, l, p.memory_now())
}

/// With the node offline: it left `N_MEMORY` and its weight files went;
/// new files place over the nodes with memory by the tables set before; a
/// table naming the node is refused, the device's and a file's; the files
/// made before keep the node.
fn while_offline(r: &mut Report, ctl: &Tierkit, p: &Plan<'_>) {
    let c = p.c;
    check_node_gone(r, c);
    let l = p.levels();
    for s in [p.b, p.a] {
        let res = pinned(|| new_file(s, &l, p));
        r.check_note(
            &format!(
                "node {c} offline, the device's tables naming it: a new file pinned to socket {}, every page, step and bulk page as the model over nodes {:#x}",
                s.id,
                p.memory_now()
            ),
            res,
        );
    }
    refused_tables(r, ctl, p);
    files_from_before(r, p);
}

/// A table naming the offlined node: the device's and a file's are
/// `ENXIO`, and the device's table set before stays as it was.
fn refused_tables(r: &mut Report, ctl: &Tierkit, p: &Plan<'_>) {
    let (b, c) = (p.b, p.c);
    let Some(t) = p.dev.get(b.id as usize).copied() else {
        r.fail(
            "the model's device table",
            format!("socket {} has none", b.id),
        );
        return;
    };
    let nr = p.m.nr_node_ids;
    let res = expect_errno(
        ctl.socket_weights(arg(TK_SOCKET_SET, TK_SOCKET_F_DEVICE, b.id, nr, t)),
        libc::ENXIO,
    )
    .and_then(|()| {
        let g = ctl
            .socket_weights(arg(
                TK_SOCKET_GET,
                TK_SOCKET_F_DEVICE,
                b.id,
                0,
                [0; MAX_NUMNODES],
            ))
            .map_err(|e| format!("GET: {}", errno_name(&e)))?;
        if (g.has_table, g.weights) != (1, t) {
            return Err(format!(
                "the device table now: has_table {}, {:?}",
                g.has_table,
                &g.weights[..nr as usize]
            ));
        }
        Ok(())
    });
    r.check(
        &format!(
            "node {c} offline: socket {}'s device table set again (it names node {c}) is ENXIO, the one in force kept",
            b.id
        ),
        res,
    );
    r.check(
        &format!("node {c} offline: a file table naming it is ENXIO"),
        Tierkit::open().map_err(|e| e.to_string()).and_then(|f| {
            expect_errno(
                f.socket_weights(arg(TK_SOCKET_SET, 0, b.id, nr, t)),
                libc::ENXIO,
            )
        }),
    );
}

/// The files whose policy was set before the offline: socket 1's table
/// picks the node, so its mmap and bulk fail with `ENOMEM` and its task
/// path still returns the node; socket 0's table names none of socket 1's
/// nodes, so its pages are as before the offline.
fn files_from_before(r: &mut Report, p: &Plan<'_>) {
    let (a, b, c) = (p.a, p.b, p.c);
    let l = p.levels();
    let res = pinned(|| {
        pin(b)?;
        expect_errno(p.map1.map(PAGES, 0), libc::ENOMEM).map_err(|e| format!("mmap: {e}"))?;
        expect_errno(p.map1.bulk(100), libc::ENOMEM).map_err(|e| format!("bulk: {e}"))?;
        Ok(format!("{PAGES} pages, bulk 100"))
    });
    r.check_note(
        &format!(
            "node {c} offline: a file whose policy was set before, from socket {}: mmap and bulk picking node {c} are ENOMEM",
            b.id
        ),
        res,
    );
    let res = pinned(|| {
        pin(b)?;
        let (pm, pw) = l.pick(Some(b.id as usize), Nodemask(p.m.memory));
        let mut task = TaskState::new();
        let model: Vec<u8> = (0..20)
            .map(|_| task.next(pm, &pw).unwrap_or(99) as u8)
            .collect();
        if !model.contains(&(c as u8)) {
            return Err(format!("the model's steps {model:?} never pick node {c}"));
        }
        let got = p
            .task1
            .task_next(20)
            .map_err(|e| format!("TK_IOC_TASK_NEXT: {}", errno_name(&e)))?;
        if got != model {
            return Err(format!("task steps {got:?}, model {model:?}"));
        }
        Ok(format!("{got:?}"))
    });
    r.check_note(
        &format!("node {c} offline: the same file's task path from socket {} still returns node {c}, as the model over its mask", b.id),
        res,
    );
    let res = pinned(|| {
        pin(a)?;
        let got = p.map0.map(PAGES, 0).map_err(|e| format!("mmap: {e}"))?;
        let got = got.page_nodes().map_err(|e| e.to_string())?;
        compare_nodes(&got, &want(&l, a.id, p.m.memory, 0, PAGES))?;
        let fresh = pinned_pages(a, p.m.memory)?;
        if fresh != p.pages0 {
            return Err(format!(
                "a new file's pages {fresh:?}, before the offline {:?}",
                p.pages0
            ));
        }
        Ok(format!("{PAGES} pages as before"))
    });
    r.check_note(
        &format!(
            "node {c} offline: socket {}'s placement unchanged (a file from before, and a new file)",
            a.id
        ),
        res,
    );
}

/// Back online: the node has memory and its weight again, and socket 1's
/// pages follow its whole table (the device's, set before the offline):
/// a new file's, and the file from before's.
fn after_online(r: &mut Report, p: &Plan<'_>, weight: Option<u8>) {
    let (b, c) = (p.b, p.c);
    r.check(
        &format!("node {c} is back in N_MEMORY"),
        if has_memory().contains(&c) {
            Ok(())
        } else {
            Err(format!("has_memory lacks {c}"))
        },
    );
    let now = WeightDir::tierkit().and_then(|d| d.weight(c).ok());
    r.check(
        &format!("tierkit's node{c} weight file is back with its weight"),
        if now.is_some() && now == weight {
            Ok(())
        } else {
            Err(format!("{now:?}, before the offline {weight:?}"))
        },
    );
    let l = p.levels();
    let mask = p.m.memory;
    let on_c = want(&l, b.id, mask, 0, PAGES)
        .iter()
        .filter(|&&n| n == c)
        .count();
    let fresh = file(mask);
    for (what, f) in [
        ("a new file", fresh.as_ref()),
        ("the file from before", Ok(&p.map1)),
    ] {
        let res = match f {
            Ok(f) => pinned(|| {
                pin(b)?;
                placed_by(b, f, &l, mask).map(|s| format!("{s}, {on_c} on node {c}"))
            }),
            Err(e) => Err(e.clone()),
        };
        r.check_note(
            &format!(
                "node {c} online again: {what} from socket {}, every page, step and bulk page as its whole table",
                b.id
            ),
            res,
        );
    }
}
