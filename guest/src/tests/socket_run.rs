//! `tk-test-socket`'s checks of per-socket weights from the firmware and
//! through `tk-run`: HMAT as parsed against the kernel's own reduction of
//! it (sysfs `access0`), and an unmodified program (`tkrun-check -g`) run
//! under `tk-run --weights per-socket` and `--socket-weights`, pinned to
//! each socket, every page of its block against the model; and the same
//! under `--weights per-socket:measured`, on the tables a short
//! `tk-calibrate --per-socket` measured here.

use super::socket_machine::{pin, pinned, Machine, Socket};
use super::socket_place::arg;
use crate::abi::tk::Tierkit;
use crate::harness::report::Report;
use crate::tools::run::check::{backing, blocks, page_nodes, start, CHECK, TK_RUN};
use crate::tools::run::socket::{env as socket_env, table_pairs};
use crate::tools::run::{resolve, Args};
use crate::tools::workload::calib::{table_from_bandwidth, Calibration};
use crate::topology::sockets::{hmat_tables, read_firmware};
use crate::topology::weights::{RestoreOnDrop, WeightDir};
use std::path::Path;
use tierkit_core::interleave::{Nodemask, Selector, Weights, MAX_NUMNODES};
use tierkit_core::socket::{Levels, SocketWeights};
use tierkit_core::uapi::{TK_SOCKET_CLEAR, TK_SOCKET_F_DEVICE, TK_SOCKET_GET, TK_SOCKET_SET};

/// MiB of the program's block: 1024 pages, many cycles of every table.
const BLOCK_MIB: &str = "4";
/// `tk-calibrate`, and where this test has it save.
const CALIBRATE: &str = "/bin/tk-calibrate";
const CAL: &str = "/tmp/tk-test-socket-calibration.json";

/// HMAT's figure from the best initiator to each memory node, as parsed
/// here, against the kernel's reduction of the same table (`access0`,
/// which names the best initiator's bandwidth).
fn hmat_against_access0(r: &mut Report, m: &Machine) {
    let (hmat, domains) = match read_firmware() {
        Ok(f) => f,
        Err(e) => {
            r.fail("HMAT and SRAT parsed", e);
            return;
        }
    };
    let hmat = &hmat;
    for n in Nodemask(m.memory).iter() {
        let name = format!("HMAT: node {n}'s best initiator as access0");
        let sysfs = access0(Path::new(crate::topology::node::NODE_SYSFS), n as u32);
        let pxms: Vec<u32> = domains
            .iter()
            .filter(|&(_, &nid)| nid as usize == n)
            .map(|(&p, _)| p)
            .collect();
        let best = hmat
            .initiators()
            .iter()
            .flat_map(|&i| pxms.iter().filter_map(move |&t| hmat.bandwidth(i, t)))
            .max_by_key(|&(rd, wr)| rd.min(wr));
        let res = match (best, sysfs) {
            // Memory the firmware did not describe at boot (a CXL region
            // onlined by dax/kmem): no figure on either side.
            (None, None) => Ok(format!(
                "neither HMAT nor access0 describes node {n} (domains {pxms:?})"
            )),
            // The kernel's figures came from elsewhere (a CXL region's CDAT).
            (None, Some(s)) => {
                r.skip(&name, format!("access0 {s:?} MB/s, not from HMAT"));
                continue;
            }
            (Some(b), None) => Err(format!("HMAT gives {b:?} MB/s, sysfs no access0")),
            (Some(b), Some(s)) if b != s => Err(format!("parsed best {b:?}, access0 {s:?}")),
            (Some(_), Some(s)) => Ok(format!("{s:?} MB/s, domains {pxms:?}")),
        };
        r.check_note(&name, res);
    }
}

fn access0(root: &Path, nid: u32) -> Option<(u32, u32)> {
    let dir = root.join(format!("node{nid}/access0/initiators"));
    let rd = |f: &str| -> Option<u32> {
        std::fs::read_to_string(dir.join(f))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    Some((rd("read_bandwidth")?, rd("write_bandwidth")?))
}

/// `tk-run ARGS -- tkrun-check -g 4` on a thread pinned to `s` (the program
/// inherits the affinity): the block's pages against the socket's table in
/// `l` over `mask`, ilx = address / 4096.
fn run_pinned(s: &Socket, args: &[&str], l: &Levels<'_>, mask: u64) -> Result<Vec<i32>, String> {
    pinned(|| {
        pin(s)?;
        let mut argv = vec![TK_RUN];
        argv.extend_from_slice(args);
        argv.extend_from_slice(&["--", CHECK, "-g", BLOCK_MIB]);
        let h = start(&argv, true).map_err(|e| format!("start: {e}"))?;
        let placed = (|| {
            if !h.waiting {
                return Err(format!("no \"waiting\": {:?}", h.lines));
            }
            if backing(&h.lines, "block") != Some("/dev/tierkit") {
                return Err(format!("the block is not tierkit's: {:?}", h.lines));
            }
            let Some(&(_, addr, bytes)) = blocks(&h.lines, "block").first() else {
                return Err(format!("no block line: {:?}", h.lines));
            };
            let got = page_nodes(h.pid(), addr, bytes).map_err(|e| format!("move_pages: {e}"))?;
            let (cand, w) = l.pick(Some(s.id as usize), Nodemask(mask));
            let sel = Selector::new(cand, &w).ok_or("empty candidates")?;
            let first = (addr & !4095) as u64 >> 12;
            for (i, &n) in got.iter().enumerate() {
                let want = sel.node_for_ilx(first + i as u64) as i32;
                if n != want {
                    return Err(format!(
                        "page {i} at {:#x} on node {n}, the model says {want} (of {} pages)",
                        (first + i as u64) << 12,
                        got.len()
                    ));
                }
            }
            Ok(got)
        })();
        let (code, err) = h.finish();
        let got = placed.map_err(|e| format!("{e}; exit {code}, stderr {:?}", err.trim()))?;
        if code != 0 {
            return Err(format!("exit {code}: {}", err.trim()));
        }
        Ok(got
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(","))
    })
    .map(|s| s.split(',').filter_map(|n| n.parse().ok()).collect())
}

/// Pages per node of a run, for the notes.
fn counts(nodes: &[i32]) -> String {
    let mut c = [0usize; MAX_NUMNODES];
    for &n in nodes {
        if let Ok(i) = usize::try_from(n) {
            if let Some(x) = c.get_mut(i) {
                *x += 1;
            }
        }
    }
    (0..MAX_NUMNODES)
        .filter(|&i| c[i] > 0)
        .map(|i| format!("{i}:{}", c[i]))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The file-level tables `tk-run` sets, as the model holds them.
fn model_tables(tables: &[(u32, [u8; 64])]) -> SocketWeights {
    let mut sw = SocketWeights::new();
    for (s, t) in tables {
        let _ = sw.set(*s as usize, *t);
    }
    sw
}

/// `--weights per-socket`, then tables by hand, each pinned to each
/// socket; and the refusals.
pub(super) fn tk_run_per_socket(r: &mut Report, m: &Machine) {
    hmat_against_access0(r, m);
    if !Path::new(TK_RUN).exists() || !Path::new(CHECK).exists() {
        r.skip(
            "tk-run --weights per-socket",
            "no tk-run or tkrun-check in the guest",
        );
        return;
    }
    // The flat weights tk-run gives the file (auto): its nodemask, and the
    // fallback of a socket without a table.
    let (mask, global) = match flat_weights(&["--weights", "auto"]) {
        Ok(f) => f,
        Err(e) => {
            r.fail("tk-run's flat weights (auto)", e);
            return;
        }
    };
    let mut refused = Vec::new();
    match hmat_tables() {
        Ok(tables) => {
            let named: Vec<_> = tables.iter().map(|(s, t)| (*s, table_pairs(t))).collect();
            r.note(format!("HMAT tables: {}", socket_env(&named)));
            let args = ["--weights", "per-socket"];
            each_socket(r, m, &args, &tables, (global, mask), "table");
        }
        // A memory node HMAT has no figure for (hotplugged CXL memory):
        // `--weights per-socket` is refused, naming the pair.
        Err(e) if e.contains("HMAT gives no bandwidth") => {
            r.note(format!("HMAT tables: none ({e})"));
            refused.push((vec!["--weights".into(), "per-socket".into()], e));
        }
        Err(e) => {
            r.fail("per-socket tables from HMAT", e);
        }
    }
    by_hand(r, m, mask, global);
    refused.extend(measured(r, m));
    refusals(r, m, refused);
}

/// The flat weights `tk-run ARGS` gives the file: their nodemask and
/// table.
fn flat_weights(args: &[&str]) -> Result<(u64, Weights), String> {
    let mut argv: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    argv.extend(["--".into(), "x".into()]);
    let a = Args::parse(argv).map_err(|e| e.to_string())?;
    let topo = crate::topology::node::Topology::read().map_err(|e| format!("{e:#}"))?;
    let f = resolve(&a, &topo, 0).map_err(|e| e.to_string())?;
    let mut fw = [0u8; MAX_NUMNODES];
    for &(n, w) in &f.weights {
        fw[n as usize] = w;
    }
    let mask = f.weights.iter().fold(0u64, |m, &(n, _)| m | 1 << n);
    Ok((mask, Weights::from_table(fw)))
}

/// A short `tk-calibrate --per-socket` (its tables checked against the
/// machine and its own figures), then `tk-run --weights per-socket:measured`
/// pinned to each socket, every page as the socket's measured table read
/// back from the file gives. Gives the refusals of files that lack tables
/// or name a socket or node the machine lacks, for [`refusals`].
fn measured(r: &mut Report, m: &Machine) -> Vec<(Vec<String>, String)> {
    if !Path::new(CALIBRATE).exists() {
        r.skip("tk-calibrate --per-socket", "no tk-calibrate in the guest");
        return Vec::new();
    }
    let res = calibrate(CAL, true).and_then(|cal| socket_tables_checked(&cal, m).map(|t| (cal, t)));
    let (cal, tables) = match res {
        Ok(x) => x,
        Err(e) => {
            r.fail(
                "tk-calibrate --per-socket: one measured table per socket",
                e,
            );
            return Vec::new();
        }
    };
    let named: Vec<_> = tables.iter().map(|(s, t)| (*s, table_pairs(t))).collect();
    r.ok_note(
        "tk-calibrate --per-socket: one measured table per socket",
        format!(
            "{} (each node measured from the socket's own CPUs, the kernel's formula)",
            socket_env(&named)
        ),
    );
    let args = ["--weights", "per-socket:measured", "--calibration", CAL];
    let (mask, flat) = match flat_weights(&args) {
        Ok(f) => f,
        Err(e) => {
            r.fail("tk-run's flat weights (measured)", e);
            return Vec::new();
        }
    };
    each_socket(r, m, &args, &tables, (flat, mask), "measured table");
    flat_file(r, m, &cal, flat, mask);
    device_wide(r, m);
    bad_files(r, m, &cal)
}

/// A short `tk-calibrate --per-socket` saving to `out`, with `--no-write`
/// or without: its calibration, or why it failed (a `not ok` line too).
fn calibrate(out: &str, no_write: bool) -> Result<Calibration, String> {
    let mut argv = vec![
        CALIBRATE,
        "--per-socket",
        "--size",
        "2M",
        "--duration",
        "0.02",
        "--rounds",
        "1",
        "--regime",
        "parallel",
        "--out",
        out,
    ];
    if no_write {
        argv.push("--no-write");
    }
    let (code, stdout, err) =
        crate::tools::run::check::run(&argv).map_err(|e| format!("{CALIBRATE}: {e}"))?;
    let bad: Vec<&str> = stdout.lines().filter(|l| l.starts_with("not ok")).collect();
    if code != 0 || !bad.is_empty() {
        return Err(format!("exit {code}: {bad:?}, stderr {:?}", err.trim()));
    }
    Calibration::load(out).map_err(|e| format!("{e:#}"))
}

/// `tk-calibrate --per-socket` without `--no-write`: each socket's
/// device-wide table, read back from the module (`TK_SOCKET_GET` with
/// `TK_SOCKET_F_DEVICE`), is the measured table it saved. tierkit's
/// global weights, which the same run writes, and the device tables are
/// put back as they were.
fn device_wide(r: &mut Report, m: &Machine) {
    let name = "tk-calibrate --per-socket: each measured table set device-wide";
    let (Some(wd), Ok(tk)) = (WeightDir::tierkit(), Tierkit::open()) else {
        r.fail(name, "no tierkit weight files or /dev/tierkit");
        return;
    };
    let get = |s: u32| {
        tk.socket_weights(arg(
            TK_SOCKET_GET,
            TK_SOCKET_F_DEVICE,
            s,
            m.nr_node_ids,
            [0; MAX_NUMNODES],
        ))
        .map_err(|e| format!("socket {s}: {}", crate::linux::errno::errno_name(&e)))
    };
    let before: Result<Vec<_>, String> = m.sockets.iter().map(|s| get(s.id)).collect();
    let (before, mut saved, table) = match (before, wd.snapshot(), wd.table()) {
        (Ok(b), Ok(w), Ok(t)) => (b, RestoreOnDrop::new(w), t),
        (b, w, t) => {
            r.fail(
                name,
                format!(
                    "the state before: {:?} / {:?} / {:?}",
                    b.err(),
                    w.err(),
                    t.err()
                ),
            );
            return;
        }
    };
    let path = format!("{CAL}.device");
    let res = calibrate(&path, false)
        .and_then(|cal| socket_tables_checked(&cal, m))
        .and_then(|tables| {
            for (s, want) in &tables {
                let got = get(*s)?;
                if got.has_table != 1 || got.weights != *want {
                    return Err(format!(
                        "socket {s}: the device's table {} (has_table {}), the saved one {}",
                        socket_env(&[(*s, table_pairs(&got.weights))]),
                        got.has_table,
                        socket_env(&[(*s, table_pairs(want))])
                    ));
                }
            }
            let named: Vec<_> = tables.iter().map(|(s, t)| (*s, table_pairs(t))).collect();
            Ok(socket_env(&named))
        });
    r.check_note(name, res);
    let back: Result<(), String> = before.iter().try_for_each(|b| {
        let op = if b.has_table == 1 {
            TK_SOCKET_SET
        } else {
            TK_SOCKET_CLEAR
        };
        tk.socket_weights(arg(
            op,
            TK_SOCKET_F_DEVICE,
            b.socket,
            m.nr_node_ids,
            b.weights,
        ))
        .map(|_| ())
        .map_err(|e| {
            format!(
                "socket {}: {}",
                b.socket,
                crate::linux::errno::errno_name(&e)
            )
        })
    });
    // The weights as they were, not only written back: in auto mode they
    // follow the bandwidth table, which the calibration rewrote.
    let weights_back = saved
        .done()
        .map_err(|e| format!("{e:#}"))
        .and_then(|()| wd.table().map_err(|e| format!("{e:#}")))
        .and_then(|now| {
            if now == table {
                Ok(())
            } else {
                Err(format!(
                    "tierkit's weights {:?}, were {:?}",
                    &now[..8],
                    &table[..8]
                ))
            }
        });
    r.check(
        "the device tables and tierkit's weights put back after tk-calibrate",
        back.and(weights_back),
    );
}

/// The same calibration without its tables, as an older tk-calibrate
/// wrote it: `--weights measured` places by its flat weights alone.
fn flat_file(r: &mut Report, m: &Machine, cal: &Calibration, flat: Weights, mask: u64) {
    let name = "tk-run --weights measured: a file without socket tables, the flat measured weights";
    let path = format!("{CAL}.flat");
    let mut c = cal.clone();
    c.sockets.clear();
    if let Err(e) = c.save(&path) {
        r.fail(name, format!("{e:#}"));
        return;
    }
    let none = SocketWeights::new();
    let l = Levels {
        file: &none,
        file_flat: Some(flat),
        device: &none,
        global: flat,
    };
    let Some(s) = m.sockets.first() else {
        return;
    };
    let res = run_pinned(
        s,
        &["--weights", "measured", "--calibration", &path],
        &l,
        mask,
    );
    r.check_note(
        name,
        res.map(|g| format!("{} pages: {}", g.len(), counts(&g))),
    );
}

/// `tk-run ARGS` pinned to each socket (`args` also name the checks), every
/// page as `tables` give for that socket (the file's tables over its flat
/// weights `flat` on `mask`); and, if the tables differ, the sockets'
/// pages differing.
fn each_socket(
    r: &mut Report,
    m: &Machine,
    args: &[&str],
    tables: &[(u32, [u8; 64])],
    (flat, mask): (Weights, u64),
    what: &str,
) {
    let file = model_tables(tables);
    let none = SocketWeights::new();
    let l = Levels {
        file: &file,
        file_flat: Some(flat),
        device: &none,
        global: flat,
    };
    let name = args[..2].join(" ");
    let mut seen = Vec::new();
    for s in &m.sockets {
        let res = run_pinned(s, args, &l, mask);
        if let Ok(got) = &res {
            seen.push(got.clone());
        }
        r.check_note(
            &format!(
                "tk-run {name}: pinned to socket {}, every page as its {what}",
                s.id
            ),
            res.map(|g| format!("{} pages: {}", g.len(), counts(&g))),
        );
    }
    let differ = tables.windows(2).any(|w| w[0].1 != w[1].1);
    if differ && seen.len() == m.sockets.len() && seen.len() > 1 {
        r.check(
            &format!("tk-run {name}: the sockets' pages differ"),
            if seen.windows(2).any(|w| w[0] != w[1]) {
                Ok(())
            } else {
                Err("every socket placed alike")
            },
        );
    }
}

/// The file's tables: one per socket of the machine, each node measured
/// from that socket's CPUs, each table the kernel's formula on the
/// socket's own figures.
fn socket_tables_checked(cal: &Calibration, m: &Machine) -> Result<Vec<(u32, [u8; 64])>, String> {
    let sockets = crate::topology::sockets::read_sockets()?;
    let ids: Vec<u32> = cal.sockets.iter().map(|s| s.socket).collect();
    let want: Vec<u32> = m.sockets.iter().map(|s| s.id).collect();
    if ids != want {
        return Err(format!(
            "tables for sockets {ids:?}, the machine has {want:?}"
        ));
    }
    for sc in &cal.sockets {
        let cpus = sockets
            .iter()
            .find(|s| s.id == sc.socket)
            .map(|s| s.cpus.clone())
            .unwrap_or_default();
        if sc.cpus != cpus || sc.nodes.iter().any(|n| n.cpus != cpus) {
            return Err(format!(
                "socket {}: measured from CPUs {:?} (nodes: {:?}), its CPUs are {cpus:?}",
                sc.socket,
                sc.cpus,
                sc.nodes
                    .iter()
                    .map(|n| (n.nid, &n.cpus))
                    .collect::<Vec<_>>()
            ));
        }
        if sc.mask() != m.memory || sc.nodes.iter().any(|n| n.read_mbps <= 0.0) {
            return Err(format!(
                "socket {}: figures {:?}",
                sc.socket,
                sc.measured_entries()
            ));
        }
        let want = table_from_bandwidth(&sc.measured_entries(), sc.mask());
        let got = sc.table().map_err(|e| format!("{e:#}"))?;
        if got != want {
            return Err(format!(
                "socket {}: table {:?}, its figures {:?} give {:?}",
                sc.socket,
                sc.weights,
                sc.measured_entries(),
                table_pairs(&want)
            ));
        }
    }
    cal.socket_tables().map_err(|e| format!("{e:#}"))
}

/// Files `--weights per-socket:measured` must refuse, written beside the
/// test's calibration: without tables, with a socket the machine lacks,
/// with a node without memory. `(args, words of the refusal)` each.
fn bad_files(r: &mut Report, m: &Machine, cal: &Calibration) -> Vec<(Vec<String>, String)> {
    let mut cases: Vec<(&str, Calibration, String)> = Vec::new();
    let mut flat = cal.clone();
    flat.sockets.clear();
    cases.push(("no-tables", flat, "has no per-socket tables".into()));
    if let Some(f) = (0..8u32).find(|i| m.sockets.iter().all(|s| s.id != *i)) {
        let mut c = cal.clone();
        c.sockets[0].socket = f;
        let want = format!("socket {f}, which has no online CPU here");
        cases.push(("unknown-socket", c, want));
    }
    if let Some(n) = (0..64u32).find(|n| m.memory >> n & 1 == 0) {
        let mut c = cal.clone();
        c.sockets[0].weights.push((n, 1));
        let s = c.sockets[0].socket;
        let want = format!("socket {s}'s table weighs node {n}, which has no memory");
        cases.push(("memoryless-node", c, want));
    }
    let mut out = Vec::new();
    for (what, c, want) in cases {
        let path = format!("{CAL}.{what}");
        if let Err(e) = c.save(&path) {
            r.fail("a calibration file to refuse", format!("{e:#}"));
            continue;
        }
        let args = ["--weights", "per-socket:measured", "--calibration", &path];
        out.push((args.map(String::from).to_vec(), want));
    }
    out
}

/// `--socket-weights`: each socket's own nodes 3:1 (CPU node, nearest
/// memory-only node), so every page of a run stays on its socket.
fn by_hand(r: &mut Report, m: &Machine, mask: u64, global: Weights) {
    let mut spec = Vec::new();
    let mut tables = Vec::new();
    for s in &m.sockets {
        let mut t = [0u8; 64];
        let mut items = Vec::new();
        for n in Nodemask(s.cpu_nodes & m.memory).iter() {
            t[n] = 3;
            items.push(format!("{n}:3"));
        }
        for n in Nodemask(s.near_mem).iter() {
            t[n] = 1;
            items.push(format!("{n}:1"));
        }
        if items.is_empty() {
            continue;
        }
        spec.push(format!("{}={}", s.id, items.join(",")));
        tables.push((s.id, t));
    }
    let spec = spec.join(";");
    let file = model_tables(&tables);
    let none = SocketWeights::new();
    let l = Levels {
        file: &file,
        file_flat: Some(global),
        device: &none,
        global,
    };
    for s in &m.sockets {
        let own = (s.cpu_nodes | s.near_mem) & m.memory;
        let res = run_pinned(s, &["--socket-weights", &spec], &l, mask).and_then(|g| {
            if g.iter().any(|&n| n < 0 || own >> n & 1 == 0) {
                return Err(format!(
                    "a page off socket {}'s nodes: {}",
                    s.id,
                    counts(&g)
                ));
            }
            Ok(format!("{} pages: {}", g.len(), counts(&g)))
        });
        r.check_note(
            &format!("tk-run --socket-weights {spec}: pinned to socket {}", s.id),
            res,
        );
    }
}

/// Each bad input: exit 2, one `tk-run: ` line, the program not started.
/// `more`: the machine's own refusals, each with the words its line holds.
fn refusals(r: &mut Report, m: &Machine, more: Vec<(Vec<String>, String)>) {
    let free_socket = (0..8u32).find(|i| m.sockets.iter().all(|s| s.id != *i));
    let no_memory = (0..64u32).find(|n| m.memory >> n & 1 == 0).unwrap_or(63);
    let some = m.memory.trailing_zeros();
    let other = Nodemask(m.memory & !(1 << some))
        .first()
        .map_or(some, |n| n as u32);
    let mut cases: Vec<(Vec<String>, String)> = vec![
        (
            vec!["--socket-weights".into(), "8=0:1".into()],
            "bad table".into(),
        ),
        (
            vec!["--socket-weights".into(), "0=0:1;0=0:2".into()],
            "appears twice".into(),
        ),
        (
            vec!["--socket-weights".into(), "0=0:0".into()],
            "bad weight".into(),
        ),
        (
            vec!["--socket-weights".into(), "0".into()],
            "bad table".into(),
        ),
        (
            vec!["--socket-weights".into(), format!("0={no_memory}:1")],
            format!("node {no_memory} has no memory"),
        ),
        (
            vec![
                "--weights".into(),
                format!("{some}:1"),
                "--socket-weights".into(),
                format!("0={other}:1"),
            ],
            "is not one of --weights' nodes".into(),
        ),
        (
            vec!["--weights".into(), "per-socket".into(), "--gigantic".into()],
            "--gigantic".into(),
        ),
    ];
    cases.extend(more);
    if let Some(f) = free_socket {
        cases.push((
            vec!["--socket-weights".into(), format!("{f}={some}:1")],
            format!("socket {f} has no online CPU"),
        ));
    }
    for (args, want) in cases {
        let mut argv: Vec<&str> = vec![TK_RUN];
        argv.extend(args.iter().map(String::as_str));
        argv.extend_from_slice(&["--", CHECK, "-g", "1"]);
        let res = crate::tools::run::check::run(&argv)
            .map_err(|e| e.to_string())
            .and_then(|(code, out, err)| {
                let lines: Vec<&str> = err.lines().collect();
                let one = lines.len() == 1
                    && lines[0].starts_with("tk-run: ")
                    && lines[0].contains(&want);
                if code == 2 && one && out.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "exit {code}, stdout {out:?}, stderr {err:?} (want one line with {want:?})"
                    ))
                }
            });
        r.check(&format!("tk-run {}: refused", args.join(" ")), res);
    }
}
