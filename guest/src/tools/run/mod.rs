//! `tk-run`: tierkit for unmodified programs. The launcher's flags, how
//! its weights are resolved, and the environment it hands to
//! `libtkrun.so` (`tkrun/libtkrun/`); see Documentation/dev-tools/tk-run.md.
//! The launcher itself is `src/bin/tk-run.rs`; its tests in the guest are
//! `tk-test-run` (`check.rs`).

pub mod check;
pub mod socket;

use crate::abi::tk::{self, Tierkit};
use crate::tools::workload::calib::{weights_from_bandwidth, Calibration};
use crate::topology::node::{self, Topology};
use crate::{abi::pool, linux::errno::errno_name};
use std::fmt;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};
use tierkit_core::uapi::{TK_MODE_WEIGHTED_INTERLEAVE, TK_POLICY_F_WEIGHTS};

/// Where the preload library is in the guest (and the default `--lib`).
pub const LIB_PATH: &str = "/lib/tierkit/libtkrun.so";
/// Where `tk-calibrate` saves its result by default.
pub const CALIBRATION_PATH: &str = "/tmp/tierkit-calibration.json";
/// Default threshold: chunks and mappings of at least 2 MiB.
pub const DEFAULT_THRESHOLD: u64 = 2 << 20;

/// Which weights the program runs with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WeightsArg {
    /// tierkit's auto weights from the firmware's (HMAT or CDAT) bandwidth.
    Auto,
    /// The weights of `tk-calibrate`'s measured bandwidth.
    Measured,
    /// `N:W,N:W...`.
    Explicit(Vec<(u32, u8)>),
    /// One table per socket from HMAT's bandwidth from that socket's CPUs
    /// (the flat weights, for an allocation on a socket without a table,
    /// are `auto`'s).
    PerSocket,
    /// One table per socket as `tk-calibrate --per-socket` measured them
    /// (the flat weights are `measured`'s, from the same file).
    PerSocketMeasured,
}

/// The parsed command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Args {
    pub weights: Option<WeightsArg>,
    /// `--socket-weights`: tables by hand, in place of their sockets'.
    pub socket_weights: Vec<socket::SocketTable>,
    pub threshold: u64,
    pub gigantic: bool,
    pub pool: Option<u64>,
    pub calibration: String,
    pub lib: String,
    pub verbose: bool,
    pub program: Vec<String>,
}

/// A refused command line or setting: one line, exit status 2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused(pub String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tk-run: {}", self.0)
    }
}

fn refuse<T>(msg: impl Into<String>) -> Result<T, Refused> {
    Err(Refused(msg.into()))
}

/// `SIZE`: bytes, or with a K, M or G suffix (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, Refused> {
    let t = s.trim();
    let (num, mul) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .map_or_else(
            || refuse(format!("bad size {s:?} (bytes, or with K, M or G)")),
            Ok,
        )
}

/// `N:W[,N:W...]`: nodes below 64, each once, weights 1..=255.
pub fn parse_weights(s: &str) -> Result<Vec<(u32, u8)>, Refused> {
    let mut out: Vec<(u32, u8)> = Vec::new();
    for item in s.split(',') {
        let bad = || {
            Refused(format!(
                "bad weight {item:?} in --weights {s:?} (want NODE:WEIGHT, weight 1..255)"
            ))
        };
        let (n, w) = item.split_once(':').ok_or_else(bad)?;
        let n: u32 = n.trim().parse().map_err(|_| bad())?;
        let w: u8 = w.trim().parse().map_err(|_| bad())?;
        if n >= 64 || w == 0 {
            return Err(bad());
        }
        if out.iter().any(|&(m, _)| m == n) {
            return refuse(format!("node {n} appears twice in --weights {s:?}"));
        }
        out.push((n, w));
    }
    Ok(out)
}

impl Args {
    /// Parses `tk-run [FLAGS] -- PROGRAM [ARGS...]` (the `--` may be left
    /// out when the program does not start with `-`).
    pub fn parse<I: IntoIterator<Item = String>>(argv: I) -> Result<Args, Refused> {
        let mut a = Args {
            weights: None,
            socket_weights: Vec::new(),
            threshold: DEFAULT_THRESHOLD,
            gigantic: false,
            pool: None,
            calibration: CALIBRATION_PATH.into(),
            lib: LIB_PATH.into(),
            verbose: false,
            program: Vec::new(),
        };
        let mut it = argv.into_iter();
        while let Some(arg) = it.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
                _ => (arg.clone(), None),
            };
            let mut value = |name: &str| -> Result<String, Refused> {
                inline
                    .clone()
                    .or_else(|| it.next())
                    .map_or_else(|| refuse(format!("{name} needs a value")), Ok)
            };
            match flag.as_str() {
                "--" => {
                    a.program = it.collect();
                    break;
                }
                "--weights" => {
                    let v = value("--weights")?;
                    a.weights = Some(match v.as_str() {
                        "auto" => WeightsArg::Auto,
                        "measured" => WeightsArg::Measured,
                        "per-socket" | "per-socket:auto" => WeightsArg::PerSocket,
                        "per-socket:measured" => WeightsArg::PerSocketMeasured,
                        _ => WeightsArg::Explicit(parse_weights(&v)?),
                    });
                }
                "--socket-weights" => {
                    a.socket_weights = socket::parse_socket_weights(&value("--socket-weights")?)?;
                }
                "--threshold" => {
                    a.threshold = parse_size(&value("--threshold")?)?;
                    if a.threshold < 4096 {
                        return refuse("--threshold must be at least 4K");
                    }
                }
                "--gigantic" => a.gigantic = true,
                "--pool" => {
                    let v = value("--pool")?;
                    a.pool = Some(v.parse::<u64>().ok().filter(|&n| n <= 64).map_or_else(
                        || refuse(format!("bad --pool {v:?} (0..64 GiB ranges)")),
                        Ok,
                    )?);
                }
                "--calibration" => a.calibration = value("--calibration")?,
                "--lib" => a.lib = value("--lib")?,
                "--verbose" | "-v" => a.verbose = true,
                f if f.starts_with('-') => {
                    return refuse(format!("unknown flag {f} (see tk-run --help)"))
                }
                _ => {
                    a.program = std::iter::once(arg).chain(it).collect();
                    break;
                }
            }
        }
        if a.per_socket() && a.gigantic {
            return refuse("per-socket weights place 4 KiB pages; they do not go with --gigantic");
        }
        if a.pool.is_some() && !a.gigantic {
            return refuse("--pool needs --gigantic");
        }
        if a.program.is_empty() {
            return refuse("no program to run (tk-run [FLAGS] -- PROGRAM [ARGS...])");
        }
        Ok(a)
    }
}

impl Args {
    /// Whether the run has per-socket tables (`--weights per-socket[:...]`
    /// or `--socket-weights`).
    pub fn per_socket(&self) -> bool {
        !self.socket_weights.is_empty()
            || matches!(
                self.weights,
                Some(WeightsArg::PerSocket | WeightsArg::PerSocketMeasured)
            )
    }
}

/// `tk-calibrate`'s result at `path`, for the flag `name`: a missing or
/// unreadable file is refused.
pub fn load_calibration(path: &str, name: &str) -> Result<Calibration, Refused> {
    if !std::path::Path::new(path).exists() {
        return refuse(format!(
            "{name}: no tk-calibrate result at {path} (run tk-calibrate first)"
        ));
    }
    Calibration::load(path).map_err(|e| Refused(format!("{name}: {e:#}")))
}

/// The weights a run uses, resolved to a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// `(node, weight)` for every node that gets pages.
    pub weights: Vec<(u32, u8)>,
    /// Where they came from, for messages.
    pub source: String,
    /// Whether chunks below 1 GiB are placed (false: `--gigantic` alone).
    pub place: bool,
    /// The per-socket tables (empty: none), and `nr_node_ids` for them.
    pub sockets: Vec<socket::SocketTable>,
    pub nr_node_ids: u32,
}

impl Resolved {
    /// `TKRUN_WEIGHTS`: `N:W,N:W`.
    pub fn env(&self) -> String {
        self.weights
            .iter()
            .map(|(n, w)| format!("{n}:{w}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// `(node, weight)` of a 64-entry table over `mask`.
fn pairs(table: &[u8; 64], mask: u64) -> Vec<(u32, u8)> {
    node::nodes_of(mask)
        .into_iter()
        .map(|n| (n, table[n as usize].max(1)))
        .collect()
}

/// Resolves `--weights` (and the default) against the live topology.
/// `local` is the node the launcher runs on (`--gigantic` alone places
/// there, as the kernel's default local allocation would).
pub fn resolve(a: &Args, topo: &Topology, local: u32) -> Result<Resolved, Refused> {
    let memory = topo.memory_mask();
    let chosen = match &a.weights {
        None if a.gigantic => {
            let nid = if memory >> local & 1 == 1 {
                local
            } else {
                topo.memory.first().copied().unwrap_or(0)
            };
            return Ok(Resolved {
                weights: vec![(nid, 1)],
                source: format!("node {nid} (local)"),
                place: false,
                sockets: Vec::new(),
                nr_node_ids: 0,
            });
        }
        None | Some(WeightsArg::Auto) | Some(WeightsArg::PerSocket) => {
            let entries: Vec<(u32, u32, u32)> = topo
                .memory
                .iter()
                .filter_map(|&n| node::access1_bandwidth(n).map(|(r, w)| (n, r, w)))
                .collect();
            if entries.is_empty() {
                return refuse(
                    "--weights auto: no node has HMAT or CDAT bandwidth figures (access1)",
                );
            }
            Resolved {
                weights: pairs(&weights_from_bandwidth(&entries, memory), memory),
                source: "auto (HMAT bandwidth)".into(),
                place: true,
                sockets: Vec::new(),
                nr_node_ids: 0,
            }
        }
        Some(w @ (WeightsArg::Measured | WeightsArg::PerSocketMeasured)) => {
            let name = if *w == WeightsArg::Measured {
                "--weights measured"
            } else {
                "--weights per-socket:measured"
            };
            let cal = load_calibration(&a.calibration, name)?;
            let mask = cal.mask() & memory;
            if mask == 0 {
                return refuse(format!(
                    "{name}: {} names no node with memory",
                    a.calibration
                ));
            }
            Resolved {
                weights: pairs(&weights_from_bandwidth(&cal.measured_entries(), mask), mask),
                source: format!("measured ({})", a.calibration),
                place: true,
                sockets: Vec::new(),
                nr_node_ids: 0,
            }
        }
        Some(WeightsArg::Explicit(w)) => {
            if let Some(&(n, _)) = w.iter().find(|&&(n, _)| memory >> n & 1 == 0) {
                return refuse(format!(
                    "--weights: node {n} has no memory (nodes with memory: {})",
                    node::fmt_mask(memory)
                ));
            }
            Resolved {
                weights: w.clone(),
                source: "explicit".into(),
                place: true,
                sockets: Vec::new(),
                nr_node_ids: 0,
            }
        }
    };
    Ok(chosen)
}

/// The environment `libtkrun.so` reads, and `LD_PRELOAD`.
pub fn environment(a: &Args, r: &Resolved, old_preload: Option<&str>) -> Vec<(String, String)> {
    let preload = match old_preload.filter(|s| !s.is_empty()) {
        Some(old) => format!("{}:{old}", a.lib),
        None => a.lib.clone(),
    };
    let mut env = vec![
        ("TKRUN_WEIGHTS".into(), r.env()),
        ("TKRUN_THRESHOLD".into(), a.threshold.to_string()),
        ("TKRUN_PLACE".into(), if r.place { "1" } else { "0" }.into()),
        (
            "TKRUN_GIGANTIC".into(),
            if a.gigantic { "1" } else { "0" }.into(),
        ),
        ("LD_PRELOAD".into(), preload),
    ];
    if a.verbose {
        env.push(("TKRUN_VERBOSE".into(), "1".into()));
    }
    if !r.sockets.is_empty() {
        env.push(("TKRUN_SOCKET_WEIGHTS".into(), socket::env(&r.sockets)));
        env.push(("TKRUN_NR_NODE_IDS".into(), r.nr_node_ids.to_string()));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<Args, Refused> {
        Args::parse(s.split_whitespace().map(String::from))
    }

    fn topo() -> Topology {
        Topology {
            online: vec![0, 1, 2],
            memory: vec![0, 2],
            cpu: vec![0],
        }
    }

    #[test]
    fn flags() {
        let a = args("--weights 0:3,2:1 --threshold 4M -- prog -x").unwrap();
        assert_eq!(a.weights, Some(WeightsArg::Explicit(vec![(0, 3), (2, 1)])));
        assert_eq!(a.threshold, 4 << 20);
        assert_eq!(a.program, vec!["prog", "-x"]);
        let a = args("--gigantic --pool=2 prog --weights x").unwrap();
        assert!(a.gigantic);
        assert_eq!(a.pool, Some(2));
        assert_eq!(a.program, vec!["prog", "--weights", "x"]);
        assert_eq!(
            args("--weights measured -- p").unwrap().weights,
            Some(WeightsArg::Measured)
        );
    }

    #[test]
    fn refusals() {
        for bad in [
            "--weights 0:0 -- p",
            "--weights 0:256 -- p",
            "--weights 64:1 -- p",
            "--weights 0:1,0:2 -- p",
            "--weights zero -- p",
            "--weights",
            "--threshold 1K -- p",
            "--threshold 12Q -- p",
            "--pool 2 -- p",
            "--gigantic --pool 65 -- p",
            "--bogus -- p",
            "--weights 0:1",
            "",
        ] {
            let e = args(bad).unwrap_err();
            assert!(e.to_string().starts_with("tk-run: "), "{bad}: {e}");
            assert!(!e.to_string().contains('\n'), "{bad}: {e}");
        }
    }

    #[test]
    fn resolving() {
        let a = args("--weights 0:3,2:1 -- p").unwrap();
        let r = resolve(&a, &topo(), 0).unwrap();
        assert_eq!(r.env(), "0:3,2:1");
        assert!(r.place);
        let a = args("--weights 0:3,1:1 -- p").unwrap();
        assert!(resolve(&a, &topo(), 0)
            .unwrap_err()
            .0
            .contains("node 1 has no memory"));
        let a = args("--gigantic -- p").unwrap();
        let r = resolve(&a, &topo(), 0).unwrap();
        assert_eq!((r.env().as_str(), r.place), ("0:1", false));
        let a = args("--weights measured --calibration /nonexistent/cal.json -- p").unwrap();
        let e = resolve(&a, &topo(), 0).unwrap_err();
        assert!(e.0.contains("no tk-calibrate result"), "{e}");
        let a = args("--weights per-socket:measured --calibration /nonexistent/c.json -- p");
        let e = resolve(&a.unwrap(), &topo(), 0).unwrap_err();
        assert!(e
            .0
            .starts_with("--weights per-socket:measured: no tk-calibrate result"));
    }

    #[test]
    fn per_socket_measured_takes_the_measured_flat_weights() {
        let mut cal = Calibration::default();
        for (nid, rd) in [(0, 3150.0), (2, 30.0)] {
            cal.nodes.push(crate::tools::workload::calib::NodeCal {
                nid,
                read_mbps: rd,
                write_mbps: rd * 4.0,
                ..Default::default()
            });
        }
        let p = std::env::temp_dir().join(format!("tk-run-cal-{}.json", std::process::id()));
        let p = p.to_str().unwrap().to_string();
        cal.save(&p).unwrap();
        let a = args(&format!(
            "--weights per-socket:measured --calibration {p} -- x"
        ))
        .unwrap();
        let r = resolve(&a, &topo(), 0);
        let m = resolve(
            &args(&format!("--weights measured --calibration {p} -- x")).unwrap(),
            &topo(),
            0,
        );
        std::fs::remove_file(&p).unwrap();
        let (r, m) = (r.unwrap(), m.unwrap());
        assert_eq!(r.weights, vec![(0, 31), (2, 1)]);
        assert_eq!(r.weights, m.weights);
    }

    #[test]
    fn env_for_the_library() {
        let a = args("--weights 0:3,2:1 --gigantic -- p").unwrap();
        let r = resolve(&a, &topo(), 0).unwrap();
        let env = environment(&a, &r, Some("/x.so"));
        let get = |k: &str| env.iter().find(|e| e.0 == k).unwrap().1.clone();
        assert_eq!(get("TKRUN_WEIGHTS"), "0:3,2:1");
        assert_eq!(get("TKRUN_GIGANTIC"), "1");
        assert_eq!(get("TKRUN_THRESHOLD"), (2u64 << 20).to_string());
        assert_eq!(get("LD_PRELOAD"), format!("{LIB_PATH}:/x.so"));
    }
}

/// The node this task runs on (getcpu(2)); 0 if unknown.
fn local_node() -> u32 {
    let (mut cpu, mut node) = (0u32, 0u32);
    // SAFETY: getcpu writes two unsigned ints; the cache argument may be NULL.
    let r = unsafe {
        libc::syscall(
            libc::SYS_getcpu,
            &mut cpu as *mut u32,
            &mut node as *mut u32,
            std::ptr::null_mut::<libc::c_void>(),
        )
    };
    if r == 0 {
        node
    } else {
        0
    }
}

/// Checks that tierkit takes these weights per file (and, for
/// `--gigantic`, gigantic mode), as the library will ask.
fn probe(r: &Resolved, gigantic: bool) -> Result<(), Refused> {
    let tk = Tierkit::open().map_err(|e| {
        Refused(format!(
            "cannot open {}: {} (is tierkit loaded?)",
            tk::DEV_PATH,
            errno_name(&e)
        ))
    })?;
    let mut p = tk::policy(TK_MODE_WEIGHTED_INTERLEAVE, 0);
    p.flags = TK_POLICY_F_WEIGHTS;
    for &(n, w) in &r.weights {
        p.nodemask |= 1 << n;
        p.weights[n as usize] = w;
    }
    match tk.set_policy_raw(p) {
        Ok(got) if got.nodemask == p.nodemask => {}
        Ok(got) => {
            return Err(Refused(format!(
                "tierkit dropped nodes of the mask {:#x} (kept {:#x})",
                p.nodemask, got.nodemask
            )))
        }
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            return Err(Refused(
                "this tierkit module takes no per-file weights (TK_POLICY_F_WEIGHTS): update it"
                    .into(),
            ))
        }
        Err(e) => return Err(Refused(format!("TK_IOC_SET_POLICY: {}", errno_name(&e)))),
    }
    socket::probe(&tk, &r.sockets, r.nr_node_ids)?;
    if gigantic {
        let g = tierkit_core::uapi::TkGigantic {
            threads: tierkit_core::uapi::TK_THREADS_AUTO,
            ..Default::default()
        };
        if let Err(e) = tk.set_gigantic(g) {
            return Err(Refused(if e.raw_os_error() == Some(libc::EPERM) {
                "--gigantic needs CAP_SYS_ADMIN (run as root)".into()
            } else {
                format!("--gigantic: TK_IOC_SET_GIGANTIC: {}", errno_name(&e))
            }));
        }
    }
    Ok(())
}

/// `--pool N`: N pre-cleared GiBs on each node the gigantic pages use,
/// waited for (bounded); the target stays set after tk-run.
fn fill_pool(r: &Resolved, n: u64) -> Result<(), Refused> {
    for &(nid, _) in &r.weights {
        pool::set_target(nid, n).map_err(|e| {
            Refused(format!(
                "--pool: writing {}: {}",
                pool::POOL_PATH,
                errno_name(&e)
            ))
        })?;
    }
    for &(nid, _) in &r.weights {
        if let Err(e) = pool::wait_for(nid, n, n, pool::fill_timeout(nid) * n.max(1) as u32) {
            eprintln!("tk-run: the pool is not full yet ({e}); starting anyway");
        }
    }
    Ok(())
}

fn prepare(a: &Args) -> Result<Resolved, Refused> {
    if !std::path::Path::new(&a.lib).exists() {
        return Err(Refused(format!("{}: no such library (see --lib)", a.lib)));
    }
    let topo =
        Topology::read().map_err(|e| Refused(format!("reading the node topology: {e:#}")))?;
    let mut r = resolve(a, &topo, local_node())?;
    if a.per_socket() {
        let sockets = crate::topology::sockets::read_sockets()
            .map_err(|e| Refused(format!("reading the sockets: {e}")))?;
        let tables = match a.weights {
            Some(WeightsArg::PerSocket) => crate::topology::sockets::hmat_tables()
                .map_err(|e| Refused(format!("--weights per-socket: {e}")))?,
            Some(WeightsArg::PerSocketMeasured) => {
                let name = "--weights per-socket:measured";
                let cal = load_calibration(&a.calibration, name)?;
                socket::measured_tables(&cal, &a.calibration, &sockets, topo.memory_mask())
                    .map_err(|e| Refused(format!("{name}: {}", e.0)))?
            }
            _ => Vec::new(),
        };
        let flat = r.weights.iter().fold(0u64, |m, &(n, _)| m | 1 << n);
        r.sockets = socket::resolve_tables(
            tables,
            &a.socket_weights,
            &sockets,
            topo.memory_mask(),
            flat,
        )?;
        r.nr_node_ids = socket::nr_node_ids()?;
        r.source = format!("{}; per socket {}", r.source, socket::env(&r.sockets));
    }
    probe(&r, a.gigantic)?;
    if let Some(n) = a.pool {
        crate::linux::kernel::ensure_debugfs();
        fill_pool(&r, n)?;
    }
    Ok(r)
}

/// `tk-run`'s `main`.
pub fn main() -> ExitCode {
    let a = match Args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let r = match prepare(&a) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if a.verbose {
        eprintln!(
            "tk-run: weights {} ({}), threshold {} bytes{}, gigantic {}",
            r.env(),
            r.source,
            a.threshold,
            if r.place {
                ""
            } else {
                " (placement off below 1 GiB)"
            },
            if a.gigantic { "on" } else { "off" }
        );
    }
    let old = std::env::var("LD_PRELOAD").ok();
    let err = Command::new(&a.program[0])
        .args(&a.program[1..])
        .envs(environment(&a, &r, old.as_deref()))
        .exec();
    eprintln!("tk-run: cannot run {}: {err}", a.program[0]);
    ExitCode::from(127)
}
