//! The logic of `tk-test-run`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-run.rs` (its `--help`).

use crate::abi::tk;
use crate::harness::report::Report;
use crate::tools::run::check::{
    agreement, backing, blocks, check_lines, guest_ready, mapping_of, page_nodes, run, start, Held,
    CHECK, NUMACTL, STREAM, TK_RUN,
};
use crate::tools::run::{resolve, Args, LIB_PATH};
use crate::topology::weights::{RestoreOnDrop, WeightDir};
use crate::{abi::pool, linux::vma, topology::interleave::weight_table, topology::node::Topology};
use std::path::Path;
use std::process::ExitCode;

/// Elements per triad array: 8 MiB each, 2048 pages; 2 MiB with a CXL
/// node, whose memory QEMU serves access by access (tens of MB/s).
fn elements() -> &'static str {
    if crate::topology::cxl::cxl_nodes().is_empty() {
        "1048576"
    } else {
        "262144"
    }
}

/// The weights of the run: the first DRAM node 3, the first memory-only
/// node 1 (one memory node: weight 1 there).
fn weights_of(topo: &Topology) -> Option<Vec<(u32, u8)>> {
    let dram = topo.dram_node().or_else(|| topo.memory.first().copied())?;
    Some(match topo.memory.iter().copied().find(|&n| n != dram) {
        Some(slow) => vec![(dram, 3), (slow, 1)],
        None => vec![(dram, 1)],
    })
}

fn arg(w: &[(u32, u8)]) -> String {
    w.iter()
        .map(|(n, w)| format!("{n}:{w}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn mask(w: &[(u32, u8)]) -> u64 {
    w.iter().fold(0, |m, (n, _)| m | 1 << n)
}

/// Bad flags: exit 2, one `tk-run: ` line, the program never ran. A good
/// command line runs it (so the check can tell).
fn refusals(r: &mut Report, topo: &Topology, good: &str) {
    let marker = "/tmp/tkrun-ran";
    let no_memory = (0..64)
        .find(|n| !topo.memory.contains(n))
        .unwrap_or(63)
        .to_string();
    let bad_node = format!("{no_memory}:1");
    let cases: &[(&str, &[&str])] = &[
        ("weight 0", &["--weights", "0:0"]),
        ("weight 256", &["--weights", "0:256"]),
        ("node without memory", &["--weights", &bad_node]),
        (
            "weights measured without a calibration",
            &["--weights", "measured", "--calibration", "/tmp/none.json"],
        ),
        ("threshold below 4K", &["--threshold", "100"]),
        ("--pool without --gigantic", &["--pool", "1"]),
        ("unknown flag", &["--bogus"]),
        ("missing library", &["--lib", "/tmp/none.so"]),
    ];
    for (what, flags) in cases {
        let _ = std::fs::remove_file(marker);
        let mut argv = vec![TK_RUN];
        argv.extend_from_slice(flags);
        argv.extend_from_slice(&["--", "/bin/touch", marker]);
        let res = run(&argv)
            .map_err(|e| e.to_string())
            .and_then(|(code, _, err)| {
                let lines: Vec<&str> = err.lines().collect();
                if code != 2 {
                    return Err(format!("exit {code}, stderr {err:?}"));
                }
                if lines.len() != 1 || !lines[0].starts_with("tk-run: ") {
                    return Err(format!("stderr is not one `tk-run: ` line: {err:?}"));
                }
                if Path::new(marker).exists() {
                    return Err("the program ran".into());
                }
                Ok(lines[0].to_string())
            });
        r.check_note(&format!("refuse: {what}"), res);
    }
    let _ = std::fs::remove_file(marker);
    let res =
        run(&[TK_RUN, "--weights", good, "--", "/bin/touch", marker]).map_err(|e| e.to_string());
    r.check(
        "accept: good flags run the program",
        res.and_then(|(code, _, err)| match (code, Path::new(marker).exists()) {
            (0, true) => Ok(()),
            _ => Err(format!(
                "exit {code}, ran {}, stderr {err:?}",
                Path::new(marker).exists()
            )),
        }),
    );
    let res = run(&[TK_RUN]).map_err(|e| e.to_string());
    r.check(
        "refuse: no program",
        res.and_then(|(c, _, e)| {
            if c == 2 {
                Ok(())
            } else {
                Err(format!("exit {c}: {e:?}"))
            }
        }),
    );
}

/// The triad's three arrays in `h`: every page where the address rule
/// says, each array backed by `path` (None: anything). Returns pages
/// agreeing, pages, and the triad line.
fn triad_pages(
    r: &mut Report,
    who: &str,
    h: &Held,
    w: &[(u32, u8)],
    path: Option<&str>,
) -> (usize, usize) {
    let arrays = blocks(&h.lines, "array");
    if arrays.len() != 3 || !h.waiting {
        r.fail(
            &format!("{who}: triad arrays"),
            format!("got {:?}", h.lines),
        );
        return (0, 0);
    }
    let table = weight_table(w);
    // The control: the same pages against other weights (the first two
    // swapped) must disagree somewhere, or the comparison proves nothing.
    let mut other = w.to_vec();
    if other.len() >= 2 && other[0].1 != other[1].1 {
        let (a, b) = (other[0].1, other[1].1);
        other[0].1 = b;
        other[1].1 = a;
    }
    let other_table = weight_table(&other);
    let mut other_agree = 0;
    let (mut agree, mut total) = (0, 0);
    let mut first_bad = None;
    for (name, addr, bytes) in &arrays {
        if let Some(p) = path {
            let got = mapping_of(h.pid(), *addr).map(|m| m.2).unwrap_or_default();
            if got != p {
                r.fail(
                    &format!("{who}: array {name} backed by {p}"),
                    format!("backed by {got:?}"),
                );
            }
        }
        match page_nodes(h.pid(), *addr, *bytes) {
            Ok(nodes) => {
                let (a, n, bad) = agreement(&nodes, *addr, mask(w), &table);
                other_agree += agreement(&nodes, *addr, mask(w), &other_table).0;
                agree += a;
                total += n;
                first_bad = first_bad.or(bad.map(|b| format!("array {name}: {b}")));
            }
            Err(e) => {
                r.fail(&format!("{who}: move_pages"), e.to_string());
            }
        }
    }
    let name = format!(
        "{who}: every page of the 3 arrays where the weights {} put it",
        arg(w)
    );
    if other != w {
        r.check_note(
            &format!("{who}: control: the weights {} disagree", arg(&other)),
            if other_agree < total {
                Ok(format!("{other_agree}/{total} pages"))
            } else {
                Err(format!("all {total} pages agree with them too"))
            },
        );
    }
    match first_bad {
        None if total > 0 => r.ok_note(&name, format!("{agree}/{total} pages")),
        _ => r.fail(
            &name,
            format!(
                "{agree}/{total} pages agree; first: {}",
                first_bad.unwrap_or_default()
            ),
        ),
    };
    (agree, total)
}

fn triad_line(lines: &[String]) -> String {
    lines
        .iter()
        .find(|l| l.starts_with("triad "))
        .cloned()
        .unwrap_or_default()
}

fn snapshots() -> String {
    [WeightDir::kernel(), WeightDir::tierkit()]
        .iter()
        .map(|d| match d {
            Some(d) => d
                .snapshot()
                .map(|s| s.describe())
                .unwrap_or_else(|e| format!("{e:#}")),
            None => "absent".into(),
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// tk-run --weights W on the triad; the global tables stay as they were.
fn placement(r: &mut Report, w: &[(u32, u8)]) {
    let before = snapshots();
    let wa = arg(w);
    match start(
        &[
            TK_RUN,
            "--weights",
            &wa,
            "--",
            STREAM,
            "-n",
            elements(),
            "-r",
            "3",
            "-w",
        ],
        false,
    ) {
        Ok(h) => {
            let (a, n) = triad_pages(r, "tk-run", &h, w, Some(tk::DEV_PATH));
            let line = triad_line(&h.lines);
            let (code, err) = h.finish();
            r.check_note(
                "tk-run: the triad ran, no fallback",
                if code == 0 && !err.contains("tk-run:") {
                    Ok(line.clone())
                } else {
                    Err(format!("exit {code}, stderr {err:?}"))
                },
            );
            r.set(
                "tkrun_triad",
                serde_json::json!({"agree": a, "pages": n, "line": line}),
            );
        }
        Err(e) => {
            r.fail("tk-run: start the triad", e.to_string());
        }
    }
    let after = snapshots();
    r.check_note(
        "global weight tables (kernel's, tierkit's) untouched",
        if before == after {
            Ok(before)
        } else {
            Err(format!("before {before}, after {after}"))
        },
    );
}

/// The same triad under numactl --weighted-interleave with the kernel's
/// weights set to W (and put back), THP off.
fn numactl(r: &mut Report, w: &[(u32, u8)]) {
    if !Path::new(NUMACTL).exists() {
        r.skip("numactl --weighted-interleave", "no numactl in the guest");
        return;
    }
    let Some(kw) = WeightDir::kernel() else {
        r.skip(
            "numactl --weighted-interleave",
            "no kernel weighted_interleave directory",
        );
        return;
    };
    let saved = match kw.snapshot() {
        Ok(s) => s,
        Err(e) => {
            r.fail("numactl: save the kernel's weights", format!("{e:#}"));
            return;
        }
    };
    let mut guard = RestoreOnDrop::new(saved);
    if let Err(e) = kw.set_weights(w) {
        r.fail("numactl: set the kernel's weights", format!("{e:#}"));
        return;
    }
    let nodes = w
        .iter()
        .map(|(n, _)| n.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let flag = format!("--weighted-interleave={nodes}");
    match start(
        &[NUMACTL, &flag, STREAM, "-n", elements(), "-r", "3", "-w"],
        true,
    ) {
        Ok(h) => {
            let (a, n) = triad_pages(r, "numactl", &h, w, None);
            let line = triad_line(&h.lines);
            let (code, err) = h.finish();
            r.check_note(
                "numactl: the triad ran",
                if code == 0 {
                    Ok(line.clone())
                } else {
                    Err(format!("exit {code}, stderr {err:?}"))
                },
            );
            r.set(
                "numactl_triad",
                serde_json::json!({"agree": a, "pages": n, "line": line}),
            );
        }
        Err(e) => {
            r.fail("numactl: start the triad", e.to_string());
        }
    }
    r.check(
        "numactl: kernel weights put back",
        guard.done().map_err(|e| format!("{e:#}")),
    );
}

/// tkrun-check under tk-run: its own checks, and which blocks are tierkit's.
fn semantics(r: &mut Report, w: &[(u32, u8)]) {
    let wa = arg(w);
    let (code, out, err) = match run(&[TK_RUN, "--weights", &wa, "--", CHECK, "4"]) {
        Ok(x) => x,
        Err(e) => {
            r.fail("tkrun-check: start", e.to_string());
            return;
        }
    };
    let lines = check_lines(r, "tkrun-check", &out);
    let tierkit = [
        "malloc",
        "calloc",
        "realloc-grown",
        "realloc-doubled",
        "posix_memalign",
        "mmap",
        "mremap-grown",
        "mremap-moved",
        "madvise",
        "dontfork",
        "mmap-partial",
        "fork-child",
        "fork-parent",
    ];
    for name in tierkit {
        let got = backing(&lines, name).unwrap_or("(no line)");
        r.check(
            &format!("tkrun-check: {name} block is tierkit's"),
            if got == tk::DEV_PATH {
                Ok(())
            } else {
                Err(format!("backed by {got}"))
            },
        );
    }
    let fixed = backing(&lines, "map-fixed").unwrap_or("(no line)");
    r.check(
        "tkrun-check: the MAP_FIXED block is the kernel's",
        if fixed == "[anon]" {
            Ok(())
        } else {
            Err(format!("backed by {fixed}"))
        },
    );
    let shrunk = backing(&lines, "realloc-shrunk").unwrap_or("(no line)");
    r.check(
        "tkrun-check: realloc below the threshold leaves tierkit",
        if shrunk != tk::DEV_PATH && shrunk != "(no line)" {
            Ok(())
        } else {
            Err(format!("backed by {shrunk}"))
        },
    );
    r.check(
        "tkrun-check: exit 0, PASSED",
        if code == 0 && out.contains("PASSED") {
            Ok(())
        } else {
            Err(format!("exit {code}, stderr {err:?}"))
        },
    );
    if !err.is_empty() {
        r.note(format!("tkrun-check stderr: {}", err.trim()));
    }
}

/// `tkrun-check FLAG MIB` under tk-run with weights `w`, each block of
/// `blocks` (its name, the backing it must have) checked: its exit
/// status, stdout and stderr, and its stdout's lines; `None` (failed in
/// `r`) if it did not start.
fn check_under(
    r: &mut Report,
    w: &[(u32, u8)],
    flag: &str,
    mib: &str,
    blocks: &[(&str, &str)],
) -> Option<(i32, String, String, Vec<String>)> {
    let wa = arg(w);
    let label = format!("tkrun-check {flag}");
    let (code, out, err) = match run(&[TK_RUN, "--weights", &wa, "--", CHECK, flag, mib]) {
        Ok(x) => x,
        Err(e) => {
            r.fail(&format!("{label}: start"), e.to_string());
            return None;
        }
    };
    let lines = check_lines(r, &label, &out);
    for &(name, want) in blocks {
        let got = backing(&lines, name).unwrap_or("(no line)");
        r.check(
            &format!("{label}: {name} block is {want}"),
            if got == want {
                Ok(())
            } else {
                Err(format!("backed by {got}"))
            },
        );
    }
    Some((code, out, err, lines))
}

/// `tkrun-check -c 64` under tk-run: fork is a copy-on-write snapshot
/// (a writer thread's words from one moment, none from after the fork),
/// copies nothing (the child's start takes under a quarter of the
/// block) and copies only on a write (the parent's reads take under a
/// quarter of the block), on blocks that are tierkit's.
fn fork_cow(r: &mut Report, w: &[(u32, u8)]) {
    let dev = tk::DEV_PATH;
    let blocks = [("cow-snapshot", dev), ("cow-cost", dev), ("cow-read", dev)];
    let Some((code, out, err, _)) = check_under(r, w, "-c", "64", &blocks) else {
        return;
    };
    r.check(
        "tkrun-check -c: exit 0, PASSED",
        if code == 0 && out.contains("PASSED") {
            Ok(())
        } else {
            Err(format!("exit {code}, stderr {err:?}"))
        },
    );
}

/// `tkrun-check -t 256` under tk-run: fork with a written 256 MiB block of
/// tierkit's against fork with the same block of the kernel's anonymous
/// memory (MAP_NORESERVE), side by side in one process.
fn fork_time(r: &mut Report, w: &[(u32, u8)]) {
    let blocks = [("time-cow", tk::DEV_PATH), ("time-kernel", "[anon]")];
    let Some((code, _, err, lines)) = check_under(r, w, "-t", "256", &blocks) else {
        return;
    };
    let times: Vec<&String> = lines.iter().filter(|l| l.starts_with("fork_")).collect();
    r.check_note(
        "tkrun-check -t: exit 0",
        if code == 0 {
            Ok(format!("{times:?}"))
        } else {
            Err(format!("exit {code}, {times:?}, stderr {err:?}"))
        },
    );
}

/// `--weights auto`: the weights the launcher resolves are the kernel's own
/// auto weights (when the kernel's table is in auto mode: both reduce the
/// HMAT/CDAT access1 bandwidth), it says them with `--verbose`, and the
/// triad's arrays sit where they put each page.
fn auto_weights(r: &mut Report, topo: &Topology) {
    let a = Args::parse(["--weights", "auto", "--", STREAM].map(String::from));
    let w = match a.and_then(|a| resolve(&a, topo, 0)) {
        Ok(res) => res.weights,
        Err(e) => {
            r.fail("auto: --weights auto resolves", e.to_string());
            return;
        }
    };
    match WeightDir::kernel().map(|k| k.snapshot()) {
        Some(Ok(s)) if s.auto == Some(true) => {
            let kernel: Vec<(u32, u8)> = s
                .weights
                .iter()
                .copied()
                .filter(|(n, _)| topo.memory.contains(n))
                .collect();
            r.check_note(
                "auto: --weights auto are the kernel's auto weights",
                if kernel == w {
                    Ok(arg(&w))
                } else {
                    Err(format!("tk-run {}, the kernel {}", arg(&w), arg(&kernel)))
                },
            );
        }
        Some(Ok(s)) => {
            r.skip(
                "auto: --weights auto are the kernel's auto weights",
                format!("the kernel's table is not in auto mode: {}", s.describe()),
            );
        }
        Some(Err(e)) => {
            r.fail("auto: read the kernel's weights", format!("{e:#}"));
        }
        None => {
            r.skip(
                "auto: --weights auto are the kernel's auto weights",
                "no kernel weighted_interleave directory",
            );
        }
    }
    let argv = [
        TK_RUN,
        "--weights",
        "auto",
        "--verbose",
        "--",
        STREAM,
        "-n",
        elements(),
        "-r",
        "1",
        "-w",
    ];
    match start(&argv, false) {
        Ok(h) => {
            triad_pages(r, "auto", &h, &w, Some(tk::DEV_PATH));
            let (code, err) = h.finish();
            let said = format!("tk-run: weights {} (auto", arg(&w));
            r.check(
                "auto: the triad ran, --verbose names these weights",
                if code == 0 && err.contains(&said) {
                    Ok(())
                } else {
                    Err(format!("exit {code}, no {said:?} in stderr {err:?}"))
                },
            );
        }
        Err(e) => {
            r.fail("auto: start the triad", e.to_string());
        }
    }
}

fn pool_taken() -> Result<u64, String> {
    let l = vma::read_limits().map_err(|e| format!("{}: {e:#}", vma::LIMITS_PATH))?;
    vma::limit(&l, "gigantic_pool_taken")
        .ok_or_else(|| format!("no gigantic_pool_taken in {}", vma::LIMITS_PATH))
}

/// `--gigantic --pool 1`: tk-run fills the pool before the program starts,
/// and the program's first touch of its 1 GiB takes the pre-cleared range
/// (`gigantic_pool_taken` grows by one), every byte zero. The targets
/// tk-run set are put back to 0 afterwards.
fn gigantic_pool(r: &mut Report) {
    let _boot = crate::abi::first_use::BootPool::release(0);
    let targets = |p: &[pool::PoolLine]| -> Vec<u32> {
        p.iter().filter(|l| l.target > 0).map(|l| l.nid).collect()
    };
    let before = match (pool::read(), pool_taken()) {
        (Ok(p), Ok(t)) => (targets(&p), t),
        (Err(e), _) => {
            r.fail("pool: read the pool", format!("{e:#}"));
            return;
        }
        (_, Err(e)) => {
            r.fail("pool: read gigantic_pool_taken", e);
            return;
        }
    };
    let argv = [
        TK_RUN,
        "--gigantic",
        "--pool",
        "1",
        "--",
        CHECK,
        "-g",
        "1024",
    ];
    match start(&argv, false) {
        Ok(h) => {
            let taken = pool_taken();
            let zero = h.lines.iter().any(|l| l == "ok big block: every byte zero");
            r.check_note(
                "pool: the first touch of the 1 GiB took the pre-cleared range",
                match taken {
                    Ok(t) if h.waiting && t == before.1 + 1 => {
                        Ok(format!("gigantic_pool_taken {} -> {t}", before.1))
                    }
                    Ok(t) => Err(format!(
                        "gigantic_pool_taken {} -> {t}, program output {:?}",
                        before.1, h.lines
                    )),
                    Err(e) => Err(e),
                },
            );
            let (code, err) = h.finish();
            r.check(
                "pool: every byte zero, the program exits 0",
                if zero && code == 0 {
                    Ok(())
                } else {
                    Err(format!("exit {code}, stderr {err:?}"))
                },
            );
        }
        Err(e) => {
            r.fail("pool: start", e.to_string());
        }
    }
    let set: Vec<u32> = pool::read()
        .map(|p| targets(&p))
        .unwrap_or_default()
        .into_iter()
        .filter(|n| !before.0.contains(n))
        .collect();
    let undone: Vec<String> = set
        .iter()
        .filter_map(|&n| {
            pool::set_target(n, 0)
                .err()
                .map(|e| format!("node {n}: {e}"))
        })
        .collect();
    r.check_note(
        "pool: tk-run set a target, put back to 0",
        if set.is_empty() {
            Err("no node had a pool target after tk-run --pool 1".into())
        } else if undone.is_empty() {
            Ok(format!("nodes {set:?}"))
        } else {
            Err(undone.join("; "))
        },
    );
}

pub fn main() -> ExitCode {
    let mut r = Report::new("tk-test-run", "test");
    let Some(topo) = guest_ready(&mut r, &[TK_RUN, STREAM, CHECK, LIB_PATH]) else {
        return r.finish();
    };
    let Some(w) = weights_of(&topo) else {
        r.fail("weights", "no node with memory");
        return r.finish();
    };
    refusals(&mut r, &topo, &arg(&w));
    placement(&mut r, &w);
    numactl(&mut r, &w);
    semantics(&mut r, &w);
    fork_cow(&mut r, &w);
    fork_time(&mut r, &w);
    super::run_gigantic::gigantic(&mut r, &topo, false);
    super::run_gigantic::gigantic(&mut r, &topo, true);
    super::run_gigantic::writer(&mut r, &topo);
    auto_weights(&mut r, &topo);
    gigantic_pool(&mut r);
    r.finish()
}
