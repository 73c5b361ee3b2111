//! `tk-test-socket`'s placing on a socket, shared by its parts: a table
//! per socket, the device's tables set, a weighted-interleave file, and a
//! pinned thread's pages, task steps and bulk split against tierkit-core's
//! model.

use super::socket_machine::{pin, Machine, Socket};
use crate::abi::tk::{Tierkit, TK_MODE_WEIGHTED_INTERLEAVE};
use crate::topology::interleave::compare_nodes;
use tierkit_core::interleave::{bulk_split, Nodemask, Selector, TaskState, MAX_NUMNODES};
use tierkit_core::socket::{Levels, SocketWeights};
use tierkit_core::uapi::{TkSocketWeights, TK_SOCKET_CLEAR, TK_SOCKET_F_DEVICE, TK_SOCKET_SET};

/// Pages per mapping: several interleave cycles of every table used.
pub(super) const PAGES: usize = 96;

/// A table per socket: `local` on its CPU nodes, `near` on its memory-only
/// nodes, `remote_dram`/`remote_mem` on the other sockets' (0: not a
/// candidate from this socket).
pub(super) fn tables(m: &Machine, w: [u8; 4]) -> Vec<(u32, [u8; MAX_NUMNODES])> {
    m.sockets
        .iter()
        .map(|s| {
            let mut t = [0u8; MAX_NUMNODES];
            for o in &m.sockets {
                let (d, c) = if o.id == s.id {
                    (w[0], w[1])
                } else {
                    (w[2], w[3])
                };
                for n in Nodemask(o.cpu_nodes & m.memory).iter() {
                    t[n] = d;
                }
                for n in Nodemask(o.near_mem).iter() {
                    t[n] = c;
                }
            }
            (s.id, t)
        })
        .collect()
}

pub(super) fn arg(
    op: u32,
    flags: u32,
    socket: u32,
    nr_nodes: u32,
    weights: [u8; MAX_NUMNODES],
) -> TkSocketWeights {
    TkSocketWeights {
        op,
        flags,
        socket,
        nr_nodes,
        weights,
        ..Default::default()
    }
}

/// Sets (or with `None` clears) the device table of each socket.
pub(super) fn set_device(
    t: &Tierkit,
    m: &Machine,
    tabs: Option<&[(u32, [u8; MAX_NUMNODES])]>,
) -> Result<SocketWeights, String> {
    let mut model = SocketWeights::new();
    for s in &m.sockets {
        let a = match tabs.and_then(|v| v.iter().find(|(id, _)| *id == s.id)) {
            Some((_, w)) => {
                model.set(s.id as usize, *w).map_err(|e| format!("{e:?}"))?;
                arg(TK_SOCKET_SET, TK_SOCKET_F_DEVICE, s.id, m.nr_node_ids, *w)
            }
            None => arg(
                TK_SOCKET_CLEAR,
                TK_SOCKET_F_DEVICE,
                s.id,
                0,
                [0; MAX_NUMNODES],
            ),
        };
        t.socket_weights(a)
            .map_err(|e| format!("socket {}: {}", s.id, crate::linux::errno::errno_name(&e)))?;
    }
    Ok(model)
}

/// What the model says the pages `ilx0..ilx0+n` of an allocation on
/// `socket` land on.
pub(super) fn want(l: &Levels<'_>, socket: u32, mask: u64, ilx0: u64, n: usize) -> Vec<u32> {
    let (m, w) = l.pick(Some(socket as usize), Nodemask(mask));
    let sel = Selector::new(m, &w).expect("non-empty mask");
    (0..n as u64)
        .map(|i| sel.node_for_ilx(ilx0 + i) as u32)
        .collect()
}

/// A file with a weighted-interleave policy over `mask`.
pub(super) fn file(mask: u64) -> Result<Tierkit, String> {
    let t = Tierkit::open().map_err(|e| e.to_string())?;
    t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, mask)
        .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
    Ok(t)
}

/// Pinned to socket `s`: a mapping's pages, task steps and a bulk split,
/// each against the model.
pub(super) fn placed_on(s: &Socket, l: &Levels<'_>, mask: u64) -> Result<String, String> {
    pin(s)?;
    placed_by(s, &file(mask)?, l, mask)
}

/// [`placed_on`] for a file made before (its policy set elsewhere), on a
/// thread pinned to `s`, against the model over `mask`: the nodes the
/// caller's allocations place over.
pub(super) fn placed_by(
    s: &Socket,
    t: &Tierkit,
    l: &Levels<'_>,
    mask: u64,
) -> Result<String, String> {
    let m = t.map(PAGES, 0).map_err(|e| format!("mmap: {e}"))?;
    let got = m.page_nodes().map_err(|e| format!("move_pages: {e}"))?;
    compare_nodes(&got, &want(l, s.id, mask, 0, PAGES)).map_err(|e| format!("mmap: {e}"))?;
    let (pm, pw) = l.pick(Some(s.id as usize), Nodemask(mask));
    let mut task = TaskState::new();
    let steps = t
        .task_next(40)
        .map_err(|e| format!("TK_IOC_TASK_NEXT: {e}"))?;
    let model: Vec<u8> = (0..40)
        .map(|_| task.next(pm, &pw).unwrap_or(99) as u8)
        .collect();
    if steps != model {
        return Err(format!("task path {steps:?}, model {model:?}"));
    }
    let b = t.bulk(100).map_err(|e| format!("TK_IOC_BULK: {e}"))?;
    let mut split = [0u64; MAX_NUMNODES];
    bulk_split(&mut task, pm, &pw, 100, &mut split);
    if b.per_node != split {
        return Err(format!(
            "bulk {:?}, model {:?}",
            &b.per_node[..8],
            &split[..8]
        ));
    }
    Ok(format!("{} pages, 40 steps, bulk 100 as the model", PAGES))
}
