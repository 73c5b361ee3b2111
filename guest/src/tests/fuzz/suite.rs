//! The logic of `tk-test-fuzz`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-fuzz.rs` (its `--help`).

use crate::harness::report::Report;
use crate::tests::fuzz::{
    auto_payload, checked_run, errno_str, random_payload, run, weight_payload, Config, Env, Rng,
};
use crate::topology::weights::{write_file, WeightDir};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

const BIN: &str = "tk-test-fuzz";
/// "tierkit1" in ASCII: fixed, so that every run makes the same calls.
const SEED: u64 = 0x7469_6572_6b69_7431;
/// Calls of the main run: the floor of calls ([`MIN_CALLS`]) and 5% more
/// (the run stops at the count, not before it, unless [`SECONDS`] is up);
/// under the debug kernel every call costs about 0.4 ms of the run.
const CALLS: u64 = 105_000;
/// The run's time bound for its calls; the run stops at [`CALLS`] long
/// before it on a quiet host. The races add their own time to each
/// worker's bound (a GiB's first touch, paced rebalances, offlines on
/// cxl: minutes under the debug kernel on emulated CXL memory), so they
/// never take the calls' share of it.
const SECONDS: f64 = 240.0;
const PROCS: u32 = 2;
const THREADS: u32 = 2;
const BIG: u32 = 1;
/// The fewest calls a run must make.
const MIN_CALLS: u64 = 100_000;
/// Payloads of the differential phase.
const DIFF_WRITES: usize = 600;

pub fn main() -> ExitCode {
    crate::tests::fuzz::race_child_if_asked();
    let mut r = Report::new(BIN, "test");
    let cfg = Config {
        seed: SEED,
        calls: CALLS,
        seconds: SECONDS,
        threads: THREADS,
        procs: PROCS,
        big: BIG,
        only: None,
        debugfs_writes: true,
        races: true,
    };
    checked_run(&mut r, &cfg, MIN_CALLS);
    replay(&mut r, &cfg);
    differential(&mut r, SEED);
    regressions(&mut r);
    r.finish()
}

/// Runs worker 1.1's stream alone twice from the same weight table and
/// compares what the two runs did.
fn replay(r: &mut Report, base: &Config) {
    const NAME: &str =
        "replay: worker 1.1 alone, twice, makes the same calls with the same results";
    let env = match Env::discover() {
        Ok(e) => e,
        Err(e) => {
            r.fail(NAME, format!("{e:#}"));
            return;
        }
    };
    let wd = WeightDir::new(&env.wi);
    let (snap, bw) = match (wd.snapshot(), std::fs::read_to_string(wd.bandwidth_path())) {
        (Ok(s), Ok(b)) => (s, b),
        (s, b) => {
            r.fail(NAME, format!("snapshot: {:?} {:?}", s.err(), b.err()));
            return;
        }
    };
    let put_back = || -> anyhow::Result<()> {
        if !bw.is_empty() {
            write_file(&wd.bandwidth_path(), &bw)?;
        }
        snap.restore()
    };
    let cfg = Config {
        // 2000 calls for the worker: its share of 8000 over 2 x 2.
        calls: 8000,
        big: 0,
        only: Some((1, 1)),
        races: false,
        ..base.clone()
    };
    let mut runs = Vec::new();
    for _ in 0..2 {
        if let Err(e) = put_back() {
            r.fail(NAME, format!("restoring the weight table: {e:#}"));
            return;
        }
        match run(&cfg, &env) {
            Ok(o) => runs.push(o),
            Err(e) => {
                r.fail(NAME, e.to_string());
                return;
            }
        }
    }
    r.check(
        "weight table restored after the replays",
        put_back().map_err(|e| format!("{e:#}")),
    );
    let (a, b) = (&runs[0], &runs[1]);
    let same = a.ops() == b.ops() && a.calls() == b.calls() && a.results() == b.results();
    if same && a.nr_failures() == 0 && b.nr_failures() == 0 {
        r.ok_note(
            NAME,
            format!(
                "{} calls, {} kinds of outcome",
                a.calls(),
                a.results().len()
            ),
        );
    } else if !same {
        let diff: Vec<String> = a
            .results()
            .iter()
            .filter(|(k, v)| b.results().get(*k) != Some(v))
            .take(6)
            .map(|(k, v)| format!("{k}: {v} vs {:?}", b.results().get(k)))
            .collect();
        r.fail(
            NAME,
            format!(
                "{} / {} calls, {} / {} operations; differ: {}",
                a.calls(),
                b.calls(),
                a.ops(),
                b.ops(),
                diff.join("; ")
            ),
        );
    } else {
        r.fail(
            NAME,
            format!("unexpected results: {:?} {:?}", a.failures(), b.failures()),
        );
    }
}

/// One `write(2)` of `payload` to a fresh open of `path`: bytes written or
/// the errno's name.
fn write_once(path: &Path, payload: &[u8]) -> String {
    let f = std::fs::OpenOptions::new().write(true).open(path);
    match f.and_then(|mut f| f.write(payload)) {
        Ok(n) => format!("wrote {n}"),
        Err(e) => errno_str(e.raw_os_error().unwrap_or(0)),
    }
}

/// The table as text: `node0=3 node1=1 auto=false`.
fn table(wd: &WeightDir, nodes: &[u32]) -> String {
    let mut v: Vec<String> = nodes
        .iter()
        .map(|&n| match wd.weight(n) {
            Ok(w) => format!("node{n}={w}"),
            Err(e) => format!("node{n}=<{e:#}>"),
        })
        .collect();
    v.push(match wd.auto() {
        Ok(Some(a)) => format!("auto={a}"),
        Ok(None) => "auto=<none>".into(),
        Err(e) => format!("auto=<{e:#}>"),
    });
    v.join(" ")
}

/// Payloads beyond the fuzzer's: NULs, empty, around a page.
fn edge_payload(o: &mut Rng) -> Vec<u8> {
    let v: &[&[u8]] = &[
        b"7\0", b"7\0junk", b"\x007", b"\0", b"7\n\0", b"", b"t\0", b"\0true",
    ];
    match o.below(4) {
        0 | 1 => o.pick(v).to_vec(),
        2 => {
            let mut p = vec![b' '; *o.pick(&[4094, 4095, 4096])];
            p[0] = b'7';
            p
        }
        _ => vec![b'1'; *o.pick(&[4095, 4096, 4097])],
    }
}

fn differential(r: &mut Report, seed: u64) {
    const NAME: &str = "weight files: tierkit's answer every write as the kernel's do";
    let Some(kd) = WeightDir::kernel() else {
        r.skip(NAME, "no /sys/kernel/mm/mempolicy/weighted_interleave");
        return;
    };
    let Some(td) = WeightDir::tierkit() else {
        r.fail(NAME, "no tierkit weight directory");
        return;
    };
    let nodes: Vec<u32> = match (kd.nodes(), td.nodes()) {
        (Ok(k), Ok(t)) => k.into_iter().filter(|n| t.contains(n)).collect(),
        (k, t) => {
            r.fail(NAME, format!("listing: {:?} {:?}", k.err(), t.err()));
            return;
        }
    };
    let (ks, ts, tbw) = match (
        kd.snapshot(),
        td.snapshot(),
        std::fs::read_to_string(td.bandwidth_path()),
    ) {
        (Ok(k), Ok(t), Ok(b)) => (k, t, b),
        (k, t, b) => {
            r.fail(
                NAME,
                format!("snapshots: {:?} {:?} {:?}", k.err(), t.err(), b.err()),
            );
            return;
        }
    };
    let mut o = Rng::new(seed ^ 0xd1ff);
    let mut diffs = Vec::new();
    let mut n_diffs = 0;
    let start = (table(&kd, &nodes), table(&td, &nodes));
    if start.0 != start.1 {
        r.note(format!(
            "weight tables differ before the differential run: kernel {} / tierkit {}",
            start.0, start.1
        ));
    }
    for _ in 0..DIFF_WRITES {
        let file = if o.chance(1, 3) {
            "auto".to_string()
        } else {
            format!("node{}", o.pick(&nodes))
        };
        let payload = match o.below(4) {
            0 => edge_payload(&mut o),
            1 => random_payload(&mut o),
            _ if file == "auto" => auto_payload(&mut o).0,
            _ => weight_payload(&mut o).0,
        };
        let before_t = table(&td, &nodes);
        let kr = write_once(&kd.path.join(&file), &payload);
        let tr = write_once(&td.path.join(&file), &payload);
        let (kt, tt) = (table(&kd, &nodes), table(&td, &nodes));
        // Where tierkit's document deliberately differs from sysfs (which
        // takes the first 4096 bytes of a longer write), hold it to its
        // document: EINVAL, nothing changed.
        let differs = if payload.len() > 4096 {
            tr != "EINVAL" || tt != before_t
        } else {
            kr != tr || kt != tt
        };
        if differs {
            n_diffs += 1;
            if diffs.len() < 40 {
                diffs.push(format!(
                    "{file} <- {:?}: kernel {kr} [{kt}], tierkit {tr} [{tt}]",
                    String::from_utf8_lossy(&payload[..payload.len().min(24)])
                        + if payload.len() > 24 {
                            format!("... ({} bytes)", payload.len())
                        } else {
                            String::new()
                        }
                        .as_str()
                ));
            }
        }
        if kt != tt {
            // Start the next payload from equal tables again (a counted
            // difference, or a long write that sysfs took and tierkit,
            // as documented, refused).
            let _ = kd.write_auto_str("false");
            let _ = td.write_auto_str("false");
            for &n in &nodes {
                let _ = kd.set_weight(n, 1);
                let _ = td.set_weight(n, 1);
            }
        }
    }
    let restore = ks
        .restore()
        .and_then(|()| {
            if !tbw.is_empty() {
                write_file(&td.bandwidth_path(), &tbw)?;
            }
            ts.restore()
        })
        .map_err(|e| format!("{e:#}"));
    r.check("weight files restored after the differential run", restore);
    for d in &diffs {
        r.note(format!("differs: {d}"));
    }
    if n_diffs == 0 {
        r.ok_note(NAME, format!("{DIFF_WRITES} payloads to nodeN and auto"));
    } else {
        r.fail(
            NAME,
            format!(
                "{n_diffs} of {DIFF_WRITES} differ, e.g. {}",
                diffs.iter().take(4).cloned().collect::<Vec<_>>().join("; ")
            ),
        );
    }
    r.set("differential_writes", serde_json::json!(DIFF_WRITES));
}

/// One positional write (`pwrite(2)` at `off`) to a fresh open of `path`.
fn pwrite_once(path: &Path, payload: &[u8], off: u64) -> String {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path);
    match f.and_then(|f| f.write_at(payload, off)) {
        Ok(n) => format!("wrote {n}"),
        Err(e) => errno_str(e.raw_os_error().unwrap_or(0)),
    }
}

/// Minimal failing inputs found by the fuzzer, kept as named checks: each
/// writes the same thing to the kernel's weight file and to tierkit's, and
/// wants the same answer and the same table afterwards (the ABI promises
/// the kernel's formats and errors).
///
/// Found by the differential phase (seed 0x746965726b697431):
/// - a write of 0 bytes: the kernel's sysfs returns 0 and changes nothing
///   (kernfs never calls the store for an empty write); tierkit answered
///   EINVAL (fixed in shim_debugfs.c's `tk_dbg_write()`);
/// - a write of more than a page to `auto`: the kernel's sysfs takes the
///   first 4096 bytes (`"1" x 4097` sets auto, returns 4096); tierkit:
///   EINVAL, which its document now states (debugfs-tierkit: "more than
///   4096 bytes is EINVAL"), so this case holds tierkit to its document;
/// - `pwrite(2)`: sysfs files take positional writes (the offset is
///   ignored); tierkit's debugfs files refused them with ESPIPE (the fuzzer
///   saw it on every pwrite; fixed in shim_debugfs.c's `tk_dbg_open()`).
fn regressions(r: &mut Report) {
    let Some(kd) = WeightDir::kernel() else {
        r.skip(
            "regressions (fuzz)",
            "no kernel weight files to compare with",
        );
        return;
    };
    let Some(td) = WeightDir::tierkit() else {
        r.fail("regressions (fuzz)", "no tierkit weight directory");
        return;
    };
    let Some(&n) = kd
        .nodes()
        .ok()
        .and_then(|k| {
            td.nodes()
                .ok()
                .and_then(|t| k.into_iter().find(|n| t.contains(n)))
        })
        .as_ref()
    else {
        r.fail("regressions (fuzz)", "no node with a weight file in both");
        return;
    };
    let (ks, ts, tbw) = match (
        kd.snapshot(),
        td.snapshot(),
        std::fs::read_to_string(td.bandwidth_path()),
    ) {
        (Ok(k), Ok(t), Ok(b)) => (k, t, b),
        (k, t, b) => {
            r.fail(
                "regressions (fuzz)",
                format!("snapshots: {:?} {:?} {:?}", k.err(), t.err(), b.err()),
            );
            return;
        }
    };
    let nodes = [n];
    let node = format!("node{n}");
    let long_ones = vec![b'1'; 4097];
    type Case<'a> = (&'a str, &'a str, &'a [u8], Option<u64>);
    let cases: [Case; 5] = [
        (
            "regression (fuzz): an empty write to nodeN",
            &node,
            b"",
            None,
        ),
        (
            "regression (fuzz): an empty write to auto",
            "auto",
            b"",
            None,
        ),
        (
            "regression (fuzz): a 4097-byte write to auto is EINVAL and changes nothing",
            "auto",
            &long_ones,
            None,
        ),
        (
            "regression (fuzz): pwrite at offset 0 to nodeN",
            &node,
            b"7",
            Some(0),
        ),
        (
            "regression (fuzz): pwrite at offset 1 to auto",
            "auto",
            b"1",
            Some(1),
        ),
    ];
    for (name, file, payload, at) in cases {
        // The same starting point on both sides: manual, weight 3.
        let _ = kd.write_auto_str("false");
        let _ = td.write_auto_str("false");
        let _ = kd.set_weight(n, 3);
        let _ = td.set_weight(n, 3);
        let (kr, tr) = match at {
            None => (
                write_once(&kd.path.join(file), payload),
                write_once(&td.path.join(file), payload),
            ),
            Some(off) => (
                pwrite_once(&kd.path.join(file), payload, off),
                pwrite_once(&td.path.join(file), payload, off),
            ),
        };
        let (kt, tt) = (table(&kd, &nodes), table(&td, &nodes));
        let documented = payload.len() > 4096;
        r.check(
            name,
            if documented {
                if tr == "EINVAL" && tt == format!("node{n}=3 auto=false") {
                    Ok(())
                } else {
                    Err(format!(
                        "tierkit {tr} [{tt}], documented: EINVAL, nothing changed"
                    ))
                }
            } else if kr == tr && kt == tt {
                Ok(())
            } else {
                Err(format!("kernel {kr} [{kt}], tierkit {tr} [{tt}]"))
            },
        );
    }
    let restore = ks
        .restore()
        .and_then(|()| {
            if !tbw.is_empty() {
                write_file(&td.bandwidth_path(), &tbw)?;
            }
            ts.restore()
        })
        .map_err(|e| format!("{e:#}"));
    r.check("weight files restored after the regression cases", restore);
}
