//! `tk-test-socket`'s checks in a cpuset: per-socket tables for a task
//! whose cgroup v2 `cpuset.mems` leaves out socket 0's nearest memory-only
//! node (its local CXL-like node). Each socket's pages follow its table over
//! the file's nodes its cpuset allows (`cpuset_nodemask`); a table that
//! weighs only refused nodes is passed over. Needs the cpuset controller:
//! Debian's kernel (`--kernel debian --topology socket2`); it skips on
//! tierkit's own kernel, which is built without `CONFIG_CPUSETS`.

use super::socket_machine::{pin, pinned, Machine};
use super::socket_place::{file, placed_by, set_device, tables};
use crate::abi::tk::Tierkit;
use crate::harness::report::Report;
use crate::linux::cgroup::{self, Cg, CGROUP};
use tierkit_core::interleave::{cpuset_nodemask, Nodemask, Weights, MAX_NUMNODES};
use tierkit_core::socket::{Levels, SocketWeights};

const NAME: &str = "per-socket tables in a cpuset";

pub(super) fn in_a_cpuset(r: &mut Report, ctl: &Tierkit, m: &Machine, global: Weights) {
    if !cgroup::ready_for(
        r,
        "cpuset",
        NAME,
        "the kernel has no cpuset controller (CONFIG_CPUSETS; Debian's kernel has it)",
    ) {
        return;
    }
    let Some(s0) = m.sockets.first() else {
        r.skip(NAME, "no socket");
        return;
    };
    let Some(near) = Nodemask(s0.near_mem & m.memory).first() else {
        r.skip(NAME, "socket 0 has no memory-only node");
        return;
    };
    let mems = m.memory & !(1u64 << near);
    let list = Nodemask(mems)
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let cg = match Cg::new("tk-socket-cpuset").and_then(|cg| {
        cg.set("cpuset.mems", &list)?;
        Ok(cg)
    }) {
        Ok(cg) => cg,
        Err(e) => {
            r.fail(&format!("a cpuset of nodes {list}"), e);
            return;
        }
    };
    let none = SocketWeights::new();
    // The model's nodes: the file's (every node with memory, set outside
    // the cpuset) cut to the cpuset.
    let cut = cpuset_nodemask(Nodemask(m.memory), Nodemask(mems), Nodemask(m.memory)).0;
    if cut != mems {
        r.fail(NAME, format!("the model cuts to {cut:#x}, not {mems:#x}"));
        return;
    }
    // The socket2 HMAT figures reduced (6:2:3:1); then socket 0's table
    // with only the refused node.
    let mut only = [0u8; MAX_NUMNODES];
    only[near] = 1;
    let hmat = tables(m, [6, 2, 3, 1]);
    let mut refused_only = hmat.clone();
    if let Some(t) = refused_only.iter_mut().find(|(id, _)| *id == s0.id) {
        t.1 = only;
    }
    for (what, tabs) in [
        ("hmat 6:2:3:1", &hmat),
        ("socket 0's table only the refused node", &refused_only),
    ] {
        let dev = match set_device(ctl, m, Some(tabs)) {
            Ok(d) => d,
            Err(e) => {
                r.fail(&format!("{what}: set the device tables"), e);
                continue;
            }
        };
        let l = Levels {
            file: &none,
            file_flat: None,
            device: &dev,
            global,
        };
        // The files are made outside the cpuset (their masks keep every
        // node), then used from inside it.
        let files: Vec<_> = m.sockets.iter().map(|_| file(m.memory)).collect();
        if !cg.join() {
            r.fail(&format!("{what}: join the cpuset"), "cgroup.procs");
            continue;
        }
        for (s, f) in m.sockets.iter().zip(&files) {
            let res = match f {
                Ok(t) => pinned(|| {
                    pin(s)?;
                    placed_by(s, t, &l, cut)
                }),
                Err(e) => Err(e.clone()),
            };
            r.check_note(
                &format!(
                    "{what}, in a cpuset without node {near}: pinned to socket {}, every page, step and bulk page as the model over nodes {list}",
                    s.id
                ),
                res,
            );
        }
        // Back to the root cgroup, so that the cgroup can go.
        if let Err(e) = std::fs::write(format!("{CGROUP}/cgroup.procs"), "0") {
            r.fail(&format!("{what}: leave the cpuset"), e.to_string());
            return;
        }
    }
    r.check(
        "clear the device tables after the cpuset checks",
        set_device(ctl, m, None).map(|_| ()),
    );
}
