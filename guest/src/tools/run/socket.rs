//! `tk-run`'s per-socket weights: `--weights per-socket` (one table per
//! socket from HMAT's bandwidth from that socket's CPUs),
//! `--weights per-socket:measured` (the tables `tk-calibrate --per-socket`
//! measured) and `--socket-weights S=N:W,...;S=...` (tables by hand),
//! checked against
//! the machine and handed to `libtkrun.so` as `TKRUN_SOCKET_WEIGHTS`; the
//! library sets them on each file it opens (`TK_IOC_SOCKET_WEIGHTS`).

use super::{parse_weights, refuse, Refused};
use crate::abi::tk::Tierkit;
use crate::tools::workload::calib::Calibration;
use crate::topology::node;
use crate::topology::sockets::Socket;
use tierkit_core::uapi::{TkSocketWeights, TK_MAX_SOCKETS, TK_SOCKET_SET};

/// One socket's table: `(socket, [(node, weight)...])`.
pub type SocketTable = (u32, Vec<(u32, u8)>);

/// `S=N:W[,N:W...][;S=N:W...]`: sockets below `TK_MAX_SOCKETS`, each once;
/// each table as `--weights N:W,...` (nodes below 64, each once, weights
/// 1..=255).
pub fn parse_socket_weights(s: &str) -> Result<Vec<SocketTable>, Refused> {
    let mut out: Vec<SocketTable> = Vec::new();
    for item in s.split(';') {
        let bad = || {
            Refused(format!(
                "bad table {item:?} in --socket-weights {s:?} (want SOCKET=NODE:WEIGHT[,NODE:WEIGHT...], sockets 0..{})",
                TK_MAX_SOCKETS - 1
            ))
        };
        let (sock, table) = item.split_once('=').ok_or_else(bad)?;
        let sock: u32 = sock.trim().parse().map_err(|_| bad())?;
        if sock >= TK_MAX_SOCKETS {
            return Err(bad());
        }
        if out.iter().any(|(t, _)| *t == sock) {
            return refuse(format!(
                "socket {sock} appears twice in --socket-weights {s:?}"
            ));
        }
        let w = parse_weights(table).map_err(|e| {
            Refused(format!(
                "{} (socket {sock} of --socket-weights)",
                e.0.replace("--weights", "table")
            ))
        })?;
        out.push((sock, w));
    }
    Ok(out)
}

/// `(node, weight)` of the non-zero entries of a 64-entry table.
pub fn table_pairs(t: &[u8; 64]) -> Vec<(u32, u8)> {
    (0..64u32)
        .filter(|&n| t[n as usize] != 0)
        .map(|n| (n, t[n as usize]))
        .collect()
}

/// The per-socket tables `tk-calibrate --per-socket` saved in `cal` (read
/// from `path`), each for a socket of `sockets` and weighing only nodes of
/// `memory`: refused if the file has none, or names a socket or node this
/// machine lacks.
pub fn measured_tables(
    cal: &Calibration,
    path: &str,
    sockets: &[Socket],
    memory: u64,
) -> Result<Vec<(u32, [u8; 64])>, Refused> {
    if cal.sockets.is_empty() {
        return refuse(format!(
            "{path} has no per-socket tables (run tk-calibrate --per-socket)"
        ));
    }
    let tables = cal
        .socket_tables()
        .map_err(|e| Refused(format!("{path}: {e:#}")))?;
    for (s, t) in &tables {
        if !sockets.iter().any(|k| k.id == *s) {
            let ids: Vec<String> = sockets.iter().map(|s| s.id.to_string()).collect();
            return refuse(format!(
                "{path} has a table for socket {s}, which has no online CPU here (sockets: {})",
                ids.join(",")
            ));
        }
        if let Some(n) = (0..64).find(|&n| t[n] != 0 && memory >> n & 1 == 0) {
            return refuse(format!(
                "{path}: socket {s}'s table weighs node {n}, which has no memory here (nodes with memory: {})",
                node::fmt_mask(memory)
            ));
        }
    }
    Ok(tables)
}

/// The per-socket tables of a run: `from_file` (every socket's, for
/// `--weights per-socket` from HMAT or `per-socket:measured` from
/// `tk-calibrate`, else empty), then each `by_hand` table in
/// place of its socket's. Each socket must be one of `sockets`, each node
/// must have memory (`memory`) and be one of the flat weights' nodes
/// (`flat`, the file's nodemask: a socket's candidates are taken from it).
pub fn resolve_tables(
    from_file: Vec<(u32, [u8; 64])>,
    by_hand: &[SocketTable],
    sockets: &[Socket],
    memory: u64,
    flat: u64,
) -> Result<Vec<SocketTable>, Refused> {
    let mut out: Vec<SocketTable> = from_file
        .into_iter()
        .map(|(s, t)| (s, table_pairs(&t)))
        .collect();
    for (s, t) in by_hand {
        out.retain(|(o, _)| o != s);
        out.push((*s, t.clone()));
    }
    out.sort_unstable_by_key(|(s, _)| *s);
    let ids: Vec<String> = sockets.iter().map(|s| s.id.to_string()).collect();
    for (s, t) in &out {
        if !sockets.iter().any(|k| k.id == *s) {
            return refuse(format!(
                "socket {s} has no online CPU (sockets: {})",
                ids.join(",")
            ));
        }
        for &(n, _) in t {
            if memory >> n & 1 == 0 {
                return refuse(format!(
                    "socket {s}'s table: node {n} has no memory (nodes with memory: {})",
                    node::fmt_mask(memory)
                ));
            }
            if flat >> n & 1 == 0 {
                return refuse(format!(
                    "socket {s}'s table: node {n} is not one of --weights' nodes {}",
                    node::fmt_mask(flat)
                ));
            }
        }
    }
    Ok(out)
}

/// `TKRUN_SOCKET_WEIGHTS`: `S=N:W,N:W;S=...`.
pub fn env(tables: &[SocketTable]) -> String {
    tables
        .iter()
        .map(|(s, t)| {
            let w: Vec<String> = t.iter().map(|(n, w)| format!("{n}:{w}")).collect();
            format!("{s}={}", w.join(","))
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// `nr_node_ids`: one more than the highest possible node.
pub fn nr_node_ids() -> Result<u32, Refused> {
    let p = format!("{}/possible", node::NODE_SYSFS);
    let v = std::fs::read_to_string(&p)
        .ok()
        .and_then(|s| node::parse_list(&s).ok())
        .ok_or_else(|| Refused(format!("cannot read {p}")))?;
    Ok(v.iter().max().map_or(0, |m| m + 1))
}

/// Sets each table on `tk` (a file with the run's policy), as the library
/// will: one line for the first the module refuses.
pub fn probe(tk: &Tierkit, tables: &[SocketTable], nr_nodes: u32) -> Result<(), Refused> {
    set_tables(tk, tables, nr_nodes, 0)
}

/// Sets each table, the open file's (`flags` 0) or the device-wide ones
/// (`TK_SOCKET_F_DEVICE`): one line for the first the module refuses.
pub fn set_tables(
    tk: &Tierkit,
    tables: &[SocketTable],
    nr_nodes: u32,
    flags: u32,
) -> Result<(), Refused> {
    for (s, t) in tables {
        let mut a = TkSocketWeights {
            op: TK_SOCKET_SET,
            flags,
            socket: *s,
            nr_nodes,
            ..Default::default()
        };
        for &(n, w) in t {
            a.weights[n as usize] = w;
        }
        if let Err(e) = tk.socket_weights(a) {
            let why = match e.raw_os_error() {
                Some(libc::ENOTTY) => "this tierkit module takes no per-socket weights (TK_IOC_SOCKET_WEIGHTS): update it".to_string(),
                Some(libc::ENOENT) => format!("tierkit knows no socket {s}"),
                Some(libc::ENXIO) => format!("tierkit refused socket {s}'s table: a node without memory"),
                Some(libc::EPERM) => "the device-wide tables need CAP_SYS_ADMIN".to_string(),
                _ => format!("TK_IOC_SOCKET_WEIGHTS for socket {s}: {}", crate::linux::errno::errno_name(&e)),
            };
            return Err(Refused(why));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::topology::sockets::socket2_sockets as sockets;

    #[test]
    fn parsing() {
        let t = parse_socket_weights("0=0:3,2:1;1=1:3,3:1").unwrap();
        assert_eq!(
            t,
            vec![(0, vec![(0, 3), (2, 1)]), (1, vec![(1, 3), (3, 1)])]
        );
        assert_eq!(env(&t), "0=0:3,2:1;1=1:3,3:1");
        for bad in [
            "",
            "0",
            "0=",
            "x=0:1",
            "8=0:1",
            "0=0:0",
            "0=0:256",
            "0=64:1",
            "0=0:1,0:2",
            "0=0:1;0=1:1",
            "0=0:1;",
            "-1=0:1",
            "0:1",
        ] {
            let e = parse_socket_weights(bad).unwrap_err().to_string();
            assert!(e.starts_with("tk-run: ") && !e.contains('\n'), "{bad}: {e}");
        }
    }

    #[test]
    fn flags() {
        let args = |s: &str| super::super::Args::parse(s.split_whitespace().map(String::from));
        let a = args("--weights per-socket --socket-weights 1=1:2 -- p").unwrap();
        assert_eq!(a.weights, Some(super::super::WeightsArg::PerSocket));
        assert_eq!(a.socket_weights, vec![(1, vec![(1, 2)])]);
        assert_eq!(
            args("--weights per-socket:auto -- p").unwrap().weights,
            Some(super::super::WeightsArg::PerSocket)
        );
        let a = args("--weights per-socket:measured --calibration /c.json -- p").unwrap();
        assert_eq!(a.weights, Some(super::super::WeightsArg::PerSocketMeasured));
        assert!(a.per_socket());
        assert!(!args("--weights measured -- p").unwrap().per_socket());
        for bad in [
            "--weights per-socket --gigantic -- p",
            "--weights per-socket:measured --gigantic -- p",
            "--weights per-socket:hmat -- p",
            "--weights per-socket: -- p",
            "--socket-weights 0=0:1 --gigantic -- p",
            "--socket-weights -- p",
            "--socket-weights 0=0:1",
        ] {
            let e = args(bad).unwrap_err().to_string();
            assert!(e.starts_with("tk-run: ") && !e.contains('\n'), "{bad}: {e}");
        }
    }

    #[test]
    fn resolving() {
        let mut h0 = [0u8; 64];
        h0[..4].copy_from_slice(&[6, 3, 2, 1]);
        let mut h1 = [0u8; 64];
        h1[..4].copy_from_slice(&[3, 6, 1, 2]);
        let hand = parse_socket_weights("1=1:1").unwrap();
        let t = resolve_tables(vec![(0, h0), (1, h1)], &hand, &sockets(), 0xf, 0xf).unwrap();
        assert_eq!(t[0], (0, vec![(0, 6), (1, 3), (2, 2), (3, 1)]));
        assert_eq!(t[1], (1, vec![(1, 1)]));
        let err = |s: &str, memory, flat| {
            let h = parse_socket_weights(s).unwrap();
            resolve_tables(Vec::new(), &h, &sockets(), memory, flat)
                .unwrap_err()
                .0
        };
        assert!(err("2=0:1", 0xf, 0xf).contains("socket 2 has no online CPU"));
        assert!(err("0=4:1", 0xf, 0xf).contains("node 4 has no memory"));
        assert!(err("0=3:1", 0xf, 0x7).contains("node 3 is not one of --weights"));
    }

    /// A calibration with `socket2`'s two measured tables.
    fn measured() -> Calibration {
        let table = |socket: u32, w: [u8; 4]| crate::tools::workload::calib::SocketCal {
            socket,
            weights: (0..4).map(|n| (n, w[n as usize])).collect(),
            ..Default::default()
        };
        Calibration {
            sockets: vec![table(0, [16, 8, 5, 2]), table(1, [8, 16, 2, 5])],
            ..Default::default()
        }
    }

    #[test]
    fn measured_tables_against_the_machine() {
        let t = measured_tables(&measured(), "c.json", &sockets(), 0xf).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].0, &t[0].1[..5]), (0, &[16, 8, 5, 2, 0][..]));
        assert_eq!((t[1].0, &t[1].1[..5]), (1, &[8, 16, 2, 5, 0][..]));
        let e = |c: &Calibration, memory| measured_tables(c, "c.json", &sockets(), memory);
        // No tables: a file of the flat calibration only.
        let flat = Calibration::default();
        assert!(e(&flat, 0xf)
            .unwrap_err()
            .0
            .contains("c.json has no per-socket tables (run tk-calibrate --per-socket)"));
        // A socket this machine lacks.
        let mut c = measured();
        c.sockets[1].socket = 5;
        let m = e(&c, 0xf).unwrap_err().0;
        assert!(
            m.contains("socket 5, which has no online CPU here (sockets: 0,1)"),
            "{m}"
        );
        // A node without memory here (measured on a machine with more).
        let m = e(&measured(), 0x7).unwrap_err().0;
        assert!(
            m.contains("socket 0's table weighs node 3, which has no memory"),
            "{m}"
        );
        // A broken table.
        let mut c = measured();
        c.sockets[0].weights.push((1, 3));
        let m = e(&c, 0xf).unwrap_err().0;
        assert!(
            m.starts_with("c.json: socket 0's table: bad entry 1:3"),
            "{m}"
        );
    }
}
