//! The logic of `tk-test-socket`; what it checks and how it is used are the
//! doc of `src/bin/tk-test-socket.rs` (its `--help`).

use super::socket_machine::{machine, pin, pinned, Machine, Socket};
use super::socket_place::{arg, file, placed_on, set_device, tables, want, PAGES};
use crate::abi::ready::topology_and_weights;
use crate::abi::tk::Tierkit;
use crate::harness::report::Report;
use crate::linux::errno::{errno_name, expect_errno};
use crate::tools::rebalance::to_weights;
use crate::topology::interleave::compare_nodes;
use std::process::ExitCode;
use tierkit_core::interleave::weighted_interleave_nid_ref;
use tierkit_core::interleave::{Nodemask, TaskState, Weights, MAX_NUMNODES};
use tierkit_core::socket::{Levels, SocketWeights};
use tierkit_core::uapi::{
    TkSocketWeights, TK_MAX_SOCKETS, TK_SOCKET_CLEAR, TK_SOCKET_F_DEVICE, TK_SOCKET_GET,
    TK_SOCKET_SET,
};

const BIN: &str = "tk-test-socket";
/// Pinned to `a`, the first half of a file's pages and 20 task steps; then
/// moved to `b`, the second half at the following file offset and 20 more
/// steps. Each page by its socket's table at its ilx; the first half stays.
fn moved_mid_mapping(a: &Socket, b: &Socket, l: &Levels<'_>, mask: u64) -> Result<String, String> {
    let half = PAGES / 2;
    pin(a)?;
    let t = file(mask)?;
    let m1 = t.map(half, 0).map_err(|e| format!("mmap 1: {e}"))?;
    let s1 = t
        .task_next(20)
        .map_err(|e| format!("TK_IOC_TASK_NEXT: {e}"))?;
    let before = m1.page_nodes().map_err(|e| e.to_string())?;
    pin(b)?;
    let m2 = t
        .map(half, half as u64)
        .map_err(|e| format!("mmap 2: {e}"))?;
    let s2 = t
        .task_next(20)
        .map_err(|e| format!("TK_IOC_TASK_NEXT: {e}"))?;
    compare_nodes(&before, &want(l, a.id, mask, 0, half))
        .map_err(|e| format!("first half: {e}"))?;
    let after = m1.page_nodes().map_err(|e| e.to_string())?;
    if after != before {
        return Err("the first half's pages moved".into());
    }
    let got2 = m2.page_nodes().map_err(|e| e.to_string())?;
    compare_nodes(&got2, &want(l, b.id, mask, half as u64, half))
        .map_err(|e| format!("second half: {e}"))?;
    let mut task = TaskState::new();
    for (s, got) in [(a, &s1), (b, &s2)] {
        let (pm, pw) = l.pick(Some(s.id as usize), Nodemask(mask));
        let model: Vec<u8> = (0..20)
            .map(|_| task.next(pm, &pw).unwrap_or(99) as u8)
            .collect();
        if *got != model {
            return Err(format!(
                "task steps on socket {}: {got:?}, model {model:?}",
                s.id
            ));
        }
    }
    Ok(format!("socket {} then {}", a.id, b.id))
}

pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let Some((_topo, wd)) = topology_and_weights(&mut r) else {
        return r.finish();
    };
    let m = match machine() {
        Ok(m) => m,
        Err(e) => {
            r.fail("sockets from sysfs", e);
            return r.finish();
        }
    };
    r.note(format!(
        "sockets: {}",
        m.sockets
            .iter()
            .map(|s| format!(
                "{} (cpu {}, nodes {:#x}, near {:#x})",
                s.id, s.cpu, s.cpu_nodes, s.near_mem
            ))
            .collect::<Vec<_>>()
            .join("; ")
    ));
    let global = match wd.table() {
        Ok(t) => Weights::from_table(t),
        Err(e) => {
            r.fail("global weights", format!("{e:#}"));
            return r.finish();
        }
    };
    let ctl = match Tierkit::open() {
        Ok(t) => t,
        Err(e) => {
            r.fail("open /dev/tierkit", e.to_string());
            return r.finish();
        }
    };
    what_the_module_sees(&mut r, &ctl, &m);
    placement(&mut r, &ctl, &m, global);
    equal_tables(&mut r, &ctl, &m, global);
    r.check(
        "clear the device tables",
        set_device(&ctl, &m, None).map(|_| ()),
    );
    bad_inputs(&mut r, &ctl, &m);
    rebalance_replaces_tables(&mut r, &m, global);
    super::socket_cpuset::in_a_cpuset(&mut r, &ctl, &m, global);
    super::socket_run::tk_run_per_socket(&mut r, &m);
    super::socket_hotplug::hotplug(&mut r, &ctl, &m, global);
    r.set("sockets", serde_json::json!(m.sockets.len()));
    r.finish()
}

/// `TK_SOCKET_GET` for each socket: its CPU nodes as sysfs, the caller's
/// socket while pinned there, `nr_node_ids`.
fn what_the_module_sees(r: &mut Report, ctl: &Tierkit, m: &Machine) {
    for s in &m.sockets {
        let res = pinned(|| {
            pin(s)?;
            let a = ctl
                .socket_weights(arg(
                    TK_SOCKET_GET,
                    TK_SOCKET_F_DEVICE,
                    s.id,
                    0,
                    [0; MAX_NUMNODES],
                ))
                .map_err(|e| crate::linux::errno::errno_name(&e))?;
            let got = (a.cpu_nodes, a.this_socket, a.nr_nodes);
            if got != (s.cpu_nodes, s.id as i32, m.nr_node_ids) {
                return Err(format!(
                    "cpu_nodes {:#x}, this_socket {}, nr_nodes {}; sysfs: {:#x}, {}, {}",
                    a.cpu_nodes, a.this_socket, a.nr_nodes, s.cpu_nodes, s.id, m.nr_node_ids
                ));
            }
            Ok(format!("cpu nodes {:#x}", a.cpu_nodes))
        });
        r.check_note(&format!("socket {}: as sysfs shows it", s.id), res);
    }
}

/// Every page's node, task steps and bulk splits against the model, for
/// each socket and two table sets; a move between sockets mid-mapping; a
/// file's table over the device's; a nodemask without the local nodes.
fn placement(r: &mut Report, ctl: &Tierkit, m: &Machine, global: Weights) {
    let none = SocketWeights::new();
    let mask = m.memory;
    // The RFC's local-only weights, and the socket2 HMAT figures
    // 300/100/150/50 GB/s reduced (6:2:3:1).
    for (name, w) in [
        ("local only 3:1", [3, 1, 0, 0]),
        ("hmat 6:2:3:1", [6, 2, 3, 1]),
    ] {
        let dev = match set_device(ctl, m, Some(&tables(m, w))) {
            Ok(d) => d,
            Err(e) => {
                r.fail(&format!("{name}: set the device tables"), e);
                continue;
            }
        };
        let l = Levels {
            file: &none,
            file_flat: None,
            device: &dev,
            global,
        };
        for s in &m.sockets {
            let res = pinned(|| placed_on(s, &l, mask));
            r.check_note(&format!("{name}: pinned to socket {}", s.id), res);
        }
        let (Some(a), Some(b)) = (m.sockets.first(), m.sockets.get(1)) else {
            r.skip(&format!("{name}: moved between sockets"), "one socket");
            continue;
        };
        let res = pinned(|| moved_mid_mapping(a, b, &l, mask));
        r.check_note(
            &format!("{name}: moved mid-mapping {} -> {}", a.id, b.id),
            res,
        );
        let res = pinned(|| moved_mid_mapping(b, a, &l, mask));
        r.check_note(
            &format!("{name}: moved mid-mapping {} -> {}", b.id, a.id),
            res,
        );
        if w[2] == 0 {
            file_table(r, m, &dev, global, a, b);
            fallback(r, m, global, a, b);
        }
    }
}

/// `TK_IOC_REBALANCE` with new weights on a mapped file whose own table
/// for the caller's socket names only the socket's CPU node: the weights
/// asked for become the file's whole placement, so its tables go
/// (`TK_SOCKET_GET` finds none) and every page moves where the model puts
/// it without a table. Were the file's table kept, it would still beat the
/// new weights, and the call would move nothing and succeed.
fn rebalance_replaces_tables(r: &mut Report, m: &Machine, global: Weights) {
    let Some(s) = m.sockets.first() else {
        return;
    };
    let mask = m.memory;
    let (mut one, mut flat) = ([0u8; MAX_NUMNODES], [0u8; MAX_NUMNODES]);
    let pairs: Vec<(u32, u8)> = Nodemask(mask).iter().map(|n| (n as u32, 1)).collect();
    for &(n, w) in &pairs {
        flat[n as usize] = w;
    }
    let none = SocketWeights::new();
    let l = Levels {
        file: &none,
        file_flat: Some(Weights::from_table(flat)),
        device: &none,
        global,
    };
    let res = pinned(|| {
        pin(s)?;
        let local = Nodemask(s.cpu_nodes & mask)
            .iter()
            .next()
            .ok_or("no memory on the socket's CPU nodes")?;
        one[local] = 1;
        let f = file(mask)?;
        f.socket_weights(arg(TK_SOCKET_SET, 0, s.id, m.nr_node_ids, one))
            .map_err(|e| format!("SET: {}", errno_name(&e)))?;
        let mp = f.map(PAGES, 0).map_err(|e| format!("mmap: {e}"))?;
        let before = mp.page_nodes().map_err(|e| e.to_string())?;
        if before.iter().any(|&n| n != local as i32) {
            return Err(format!("before: {before:?}, not all on node {local}"));
        }
        let got = f
            .rebalance(to_weights(&pairs))
            .map_err(|e| format!("TK_IOC_REBALANCE: {}", errno_name(&e)))?;
        // A moved page is faulted back in by a read (the move zapped it).
        if let Some(at) = mp.first_nonzero() {
            return Err(format!("a non-zero byte at {at} after the moves"));
        }
        let after = mp.page_nodes().map_err(|e| e.to_string())?;
        let table = f
            .socket_weights(arg(
                TK_SOCKET_GET,
                0,
                s.id,
                m.nr_node_ids,
                [0; MAX_NUMNODES],
            ))
            .map_err(|e| format!("GET: {}", errno_name(&e)))?;
        if got.misplaced == 0 || got.moved != got.misplaced {
            return Err(format!(
                "misplaced {}, moved {} (the file's table kept beating the new weights?)",
                got.misplaced, got.moved
            ));
        }
        compare_nodes(&after, &want(&l, s.id, mask, 0, PAGES))
            .map_err(|e| format!("after: {e}"))?;
        if table.has_table != 0 {
            return Err("the file's table for the socket is still there".into());
        }
        Ok(format!(
            "socket {}: {} of {PAGES} pages moved off node {local}, the file's table gone",
            s.id, got.moved
        ))
    });
    r.check_note(
        "a rebalance to new weights replaces the file's own per-socket tables",
        res,
    );
}

/// A file's table for socket `b` naming only socket `a`'s nodes beats the
/// device's; the same file's next mapping, from `a` (no file table there),
/// places by the device's table.
fn file_table(
    r: &mut Report,
    m: &Machine,
    dev: &SocketWeights,
    global: Weights,
    a: &Socket,
    b: &Socket,
) {
    let mask = m.memory;
    let a_nodes = (a.cpu_nodes | a.near_mem) & m.memory;
    let mut t = [0u8; MAX_NUMNODES];
    for n in Nodemask(a_nodes).iter() {
        t[n] = 2;
    }
    let mut ft = SocketWeights::new();
    let _ = ft.set(b.id as usize, t);
    let l = Levels {
        file: &ft,
        file_flat: None,
        device: dev,
        global,
    };
    let res = pinned(|| {
        let f = file(mask)?;
        let set = arg(TK_SOCKET_SET, 0, b.id, m.nr_node_ids, t);
        let back = f
            .socket_weights(set)
            .map_err(|e| format!("SET: {}", crate::linux::errno::errno_name(&e)))?;
        if (back.has_table, back.weights) != (1, t) {
            return Err(format!("SET wrote back has_table {}", back.has_table));
        }
        pin(b)?;
        let m1 = f.map(PAGES, 0).map_err(|e| format!("mmap: {e}"))?;
        let got = m1.page_nodes().map_err(|e| e.to_string())?;
        compare_nodes(&got, &want(&l, b.id, mask, 0, PAGES))
            .map_err(|e| format!("socket {}: {e}", b.id))?;
        if got.iter().any(|&n| n < 0 || a_nodes & (1 << n) == 0) {
            return Err(format!("a page off socket {}'s nodes", a.id));
        }
        pin(a)?;
        let m2 = f
            .map(PAGES, PAGES as u64)
            .map_err(|e| format!("mmap 2: {e}"))?;
        let got = m2.page_nodes().map_err(|e| e.to_string())?;
        compare_nodes(&got, &want(&l, a.id, mask, PAGES as u64, PAGES))
            .map_err(|e| format!("socket {}: {e}", a.id))?;
        Ok(format!("socket {}: only {:#x}", b.id, a_nodes))
    });
    r.check_note("a file's table beats the device's", res);
}

/// A nodemask of only the other socket's nodes: the local socket's
/// table (local only) has no candidate, and the allocation places as
/// today, by the global weights over the mask.
fn fallback(r: &mut Report, m: &Machine, global: Weights, a: &Socket, b: &Socket) {
    let mask = (b.cpu_nodes | b.near_mem) & m.memory;
    let res = pinned(|| {
        pin(a)?;
        let f = file(mask)?;
        let mp = f.map(PAGES, 0).map_err(|e| format!("mmap: {e}"))?;
        let got = mp.page_nodes().map_err(|e| e.to_string())?;
        let today: Vec<u32> = (0..PAGES as u64)
            .map(|i| weighted_interleave_nid_ref(Nodemask(mask), &global, i).unwrap_or(99) as u32)
            .collect();
        compare_nodes(&got, &today)?;
        Ok(format!("mask {mask:#x} from socket {}", a.id))
    });
    r.check_note("no local candidate in the nodemask: today's placement", res);
}

/// Every socket's table equal to the global weights (on the nodes with
/// memory): each socket's pages exactly as with no table at all, and as
/// today's weighted interleave.
fn equal_tables(r: &mut Report, ctl: &Tierkit, m: &Machine, global: Weights) {
    let mask = m.memory;
    let mut t = [0u8; MAX_NUMNODES];
    for n in Nodemask(mask).iter() {
        t[n] = global.get(n);
    }
    let all: Vec<(u32, [u8; MAX_NUMNODES])> = m.sockets.iter().map(|s| (s.id, t)).collect();
    let today: Vec<u32> = (0..PAGES as u64)
        .map(|i| weighted_interleave_nid_ref(Nodemask(mask), &global, i).unwrap_or(99) as u32)
        .collect();
    for s in &m.sockets {
        let res = (|| -> Result<String, String> {
            let map_here = || {
                pinned(|| {
                    pin(s)?;
                    let f = file(mask)?;
                    let mp = f.map(PAGES, 0).map_err(|e| format!("mmap: {e}"))?;
                    let got = mp.page_nodes().map_err(|e| e.to_string())?;
                    Ok(got
                        .iter()
                        .map(|n| n.to_string())
                        .collect::<Vec<_>>()
                        .join(","))
                })
            };
            set_device(ctl, m, None)?;
            let without = map_here()?;
            set_device(ctl, m, Some(&all))?;
            let with = map_here()?;
            if with != without {
                return Err(format!("with tables {with}, without {without}"));
            }
            let want = today
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(",");
            if with != want {
                return Err(format!("{with}, today's {want}"));
            }
            Ok(format!("{PAGES} pages"))
        })();
        r.check_note(
            &format!("equal tables: socket {} places as today", s.id),
            res,
        );
    }
}

/// Each refused input with its errno, the table left as it was.
fn bad_inputs(r: &mut Report, ctl: &Tierkit, m: &Machine) {
    let Some(s0) = m.sockets.first() else { return };
    let nr = m.nr_node_ids;
    let mut good = [0u8; MAX_NUMNODES];
    if let Some(n) = Nodemask(m.memory).first() {
        good[n] = 1;
    }
    let dev = |op, socket, nr_nodes, w| arg(op, TK_SOCKET_F_DEVICE, socket, nr_nodes, w);
    let mut cases: Vec<(String, TkSocketWeights, i32)> = vec![
        (
            "socket TK_MAX_SOCKETS".into(),
            dev(TK_SOCKET_GET, TK_MAX_SOCKETS, nr, good),
            libc::ENOENT,
        ),
        (
            "socket 1000".into(),
            dev(TK_SOCKET_SET, 1000, nr, good),
            libc::ENOENT,
        ),
        (
            "nr_nodes nr_node_ids + 1".into(),
            dev(TK_SOCKET_SET, s0.id, nr + 1, good),
            libc::EINVAL,
        ),
        (
            "nr_nodes 0".into(),
            dev(TK_SOCKET_SET, s0.id, 0, good),
            libc::EINVAL,
        ),
        (
            "every weight 0".into(),
            dev(TK_SOCKET_SET, s0.id, nr, [0; MAX_NUMNODES]),
            libc::EINVAL,
        ),
        ("op 3".into(), dev(3, s0.id, nr, good), libc::EINVAL),
        (
            "flags 2".into(),
            arg(TK_SOCKET_SET, 2, s0.id, nr, good),
            libc::EINVAL,
        ),
    ];
    if let Some(free) = (0..TK_MAX_SOCKETS).find(|i| m.sockets.iter().all(|s| s.id != *i)) {
        cases.push((
            format!("socket {free} (no CPU)"),
            dev(TK_SOCKET_SET, free, nr, good),
            libc::ENOENT,
        ));
    }
    if (nr as usize) < MAX_NUMNODES {
        let mut w = good;
        w[nr as usize] = 1;
        cases.push((
            "a weight past nr_node_ids".into(),
            dev(TK_SOCKET_SET, s0.id, nr, w),
            libc::EINVAL,
        ));
    }
    match (0..nr).find(|n| m.memory & (1 << n) == 0) {
        Some(n) => {
            let mut w = good;
            w[n as usize] = 4;
            cases.push((
                format!("a weight on node {n} (no memory)"),
                dev(TK_SOCKET_SET, s0.id, nr, w),
                libc::ENXIO,
            ));
        }
        None => {
            r.skip(
                "a weight on a node without memory: ENXIO",
                "every node has memory",
            );
        }
    }
    for (name, a, errno) in cases {
        let res = expect_errno(ctl.socket_weights(a), errno).and_then(|()| {
            let g = ctl
                .socket_weights(dev(TK_SOCKET_GET, s0.id, 0, [0; MAX_NUMNODES]))
                .map_err(|e| crate::linux::errno::errno_name(&e))?;
            if g.has_table != 0 {
                return Err("the device table changed".into());
            }
            Ok(())
        });
        r.check(
            &format!("{name}: {}", crate::linux::errno::errno_str(errno)),
            res,
        );
    }
    let res = (|| -> Result<(), String> {
        let f = file(m.memory)?;
        let _mp = f.map(1, 0).map_err(|e| format!("mmap: {e}"))?;
        expect_errno(
            f.socket_weights(arg(TK_SOCKET_SET, 0, s0.id, nr, good)),
            libc::EBUSY,
        )?;
        expect_errno(
            f.socket_weights(arg(TK_SOCKET_CLEAR, 0, s0.id, nr, good)),
            libc::EBUSY,
        )?;
        f.socket_weights(arg(TK_SOCKET_GET, 0, s0.id, 0, good))
            .map(|_| ())
            .map_err(|e| format!("GET: {}", crate::linux::errno::errno_name(&e)))
    })();
    r.check(
        "a mapped file's table: EBUSY to set or clear, GET works",
        res,
    );
}
