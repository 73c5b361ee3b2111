//! Time to first use of 1 GiB, for `tk-bench-gigantic` (every worker
//! count, median of R) and
//! `tk-demo-gigantic` (a short plan for `cargo xtask run`).
//!
//! For a node with memory, "time to first use" is the time from `mmap`
//! until every 4 KiB page of the GiB has been written once (one byte per
//! page, in address order, [`Mapping::touch_pages`]):
//!
//! - **tierkit, T workers**: open `/dev/tierkit`, `TK_IOC_SET_POLICY` to
//!   the node alone, `TK_IOC_SET_GIGANTIC` with `threads = T` (or
//!   `TK_THREADS_AUTO`) and `TK_PLACE_LOCAL` (the node's CPUs, or the
//!   nearest node's for a CPU-less node), then the timed part: `mmap`
//!   1 GiB `MAP_SHARED` and the touches; the first touch faults the GiB in
//!   (allocate, clear with T workers, one PUD). Past the eligible CPUs the
//!   file refuses T (`EINVAL`) and the series ends there;
//! - **tierkit from a ready pool**: untimed, the node's pool target is set
//!   to 1 ([`crate::abi::pool`]) and the bench waits until the range is ready;
//!   then the same timed part with T = 1, whose first touch takes the
//!   pre-cleared range (no clear: `TK_GIGANTIC_F_QUERY` reports 0 workers,
//!   checked). The pool refills behind each run, untimed, and is emptied
//!   afterwards;
//! - **hugetlb**: the timed part is `mmap(MAP_PRIVATE | MAP_ANONYMOUS |
//!   MAP_HUGETLB | MAP_HUGE_1GB)`, `mbind(MPOL_BIND, node)` and the
//!   touches; the first touch is the kernel's own first fault (allocate
//!   from the pool, `folio_zero_user()` on one CPU, map). A free 1 GiB page
//!   on the node comes from the boot pool or is reserved at runtime through
//!   `/sys/devices/system/node/nodeN/hugepages/hugepages-1048576kB/nr_hugepages`
//!   and given back afterwards.
//!
//! On a small guest the early boot allocations may leave no free naturally
//! aligned GiB for a runtime allocation (e.g. `--dram 4G --cxl-mem 2G`).
//! Then reserve 1 GiB pages at boot (`--append 'hugepagesz=1G
//! hugepages=0:1,1:1'`): a node's boot pages are handed back to the buddy
//! allocator before it is measured (every side then gets that GiB) and
//! reserved again afterwards.
//!
//! Each measurement runs in a child process (the binary again with
//! `--child`, see [`child_requested`]), so a SIGBUS (no free aligned GiB
//! at fault time) ends only the child and is reported. With
//! [`Plan::warm_up`] each (node, variant) is measured once untimed first:
//! under QEMU, memory the host never touched costs about 1 s per GiB extra
//! on its first use, and tierkit (`alloc_contig_pages()` returns the GiB
//! it freed last) and hugetlb (the same pool page) then reuse warm memory.

use crate::abi::pool;
use crate::abi::tk::{Tierkit, TK_MODE_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::errno::errno_name;
use crate::linux::sys::{monotonic_ns, Mapping, MPOL_BIND, PAGE_SIZE};
use crate::topology::node::Topology;
use serde_json::{json, Value};

use std::process::{Command, ExitCode};
use tierkit_core::uapi::{TkGigantic, TK_GIGANTIC_BYTES, TK_PLACE_LOCAL, TK_THREADS_AUTO};

mod cpu;
mod hugetlb;
pub use hugetlb::{BootPool, HugePage};

const GIB: usize = TK_GIGANTIC_BYTES as usize;
const PAGES: usize = GIB / PAGE_SIZE;

/// The target for hugetlb ÷ tierkit-from-a-ready-pool.
pub const POOL_TARGET: f64 = 20.0;

/// The targets for hugetlb ÷ tierkit, by worker count.
pub fn target(threads: u32) -> Option<f64> {
    match threads {
        1 => Some(0.95),
        2 => Some(1.8),
        _ => None,
    }
}

/// `T=2`, or `T=auto` for `TK_THREADS_AUTO`.
pub fn threads_label(threads: u32) -> String {
    if threads == TK_THREADS_AUTO {
        "T=auto".into()
    } else {
        format!("T={threads}")
    }
}

/// Child: one tierkit first use on `nid` with `threads` workers (or
/// `TK_THREADS_AUTO`); with `from_pool`, the fault must have taken a ready
/// range (0 workers). Then, untimed for the figure, the same touches again
/// on the mapped GiB: what touching every 4 KiB page costs by itself (under
/// TCG each page is a softmmu TLB fill). Prints `NS WORKERS CPU_NODE NID
/// RETOUCH_NS` on success.
fn child_tierkit(nid: u32, threads: u32, from_pool: bool) -> Result<String, String> {
    let tk = Tierkit::open().map_err(|e| format!("open /dev/tierkit: {e}"))?;
    tk.set_policy(TK_MODE_INTERLEAVE, 1u64 << nid)
        .map_err(|e| format!("TK_IOC_SET_POLICY: {}", errno_name(&e)))?;
    tk.set_gigantic(TkGigantic {
        threads,
        placement: TK_PLACE_LOCAL,
        ..Default::default()
    })
    .map_err(|e| format!("TK_IOC_SET_GIGANTIC: {}", errno_name(&e)))?;
    let t0 = monotonic_ns();
    let m = tk
        .map(PAGES, 0)
        .map_err(|e| format!("mmap: {}", errno_name(&e)))?;
    m.touch_pages();
    let ns = monotonic_ns() - t0;
    let t1 = monotonic_ns();
    m.touch_pages();
    let retouch = monotonic_ns() - t1;
    let q = tk
        .gigantic_query()
        .map_err(|e| format!("TK_GIGANTIC_F_QUERY: {}", errno_name(&e)))?;
    if q.last_nid != nid as i32 {
        return Err(format!(
            "the GiB was made on node {}, not {nid}",
            q.last_nid
        ));
    }
    if from_pool && q.last_workers != 0 {
        return Err(format!(
            "the first touch did not take a ready range: cleared by {} workers in {:.3} s",
            q.last_workers,
            q.last_elapsed_ns as f64 / 1e9
        ));
    }
    Ok(format!(
        "{ns} {} {} {} {retouch}",
        q.last_workers, q.last_cpu_node, q.last_nid
    ))
}

/// A private anonymous 1 GiB hugetlb mapping (`MAP_HUGETLB |
/// MAP_HUGE_1GB`) bound to `nid` (`mbind(MPOL_BIND)`), not faulted in:
/// its first touch is the kernel's first fault, which takes a free page
/// of the node's 1 GiB hugetlb pool and clears it on one CPU.
pub fn hugetlb_gib(nid: u32) -> Result<Mapping, String> {
    let m = Mapping::new(
        GIB,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB | libc::MAP_HUGE_1GB,
        -1,
        0,
    )
    .map_err(|e| format!("mmap MAP_HUGE_1GB: {}", errno_name(&e)))?;
    m.mbind(MPOL_BIND, 1u64 << nid, 0)
        .map_err(|e| format!("mbind: {}", errno_name(&e)))?;
    Ok(m)
}

/// The node of the faulted-in hugetlb page of `m` (`move_pages(2)`);
/// `Err` unless it is `nid`.
pub fn hugetlb_on(m: &Mapping, nid: u32) -> Result<i32, String> {
    let on = m
        .page_nodes()
        .ok()
        .and_then(|v| v.first().copied())
        .unwrap_or(-1);
    if on != nid as i32 {
        return Err(format!("the hugetlb page landed on node {on}, not {nid}"));
    }
    Ok(on)
}

/// Child: one hugetlb first use bound to `nid`. Prints `NS 1 -1 NODE`.
fn child_hugetlb(nid: u32) -> Result<String, String> {
    let t0 = monotonic_ns();
    let m = hugetlb_gib(nid)?;
    m.touch_pages();
    let ns = monotonic_ns() - t0;
    let on = hugetlb_on(&m, nid)?;
    Ok(format!("{ns} 1 -1 {on} 0"))
}

/// The child side of a measurement: `args` after `--child` are
/// `tierkit NID T`, `pool NID`, `hugetlb NID` or `null`.
fn child_main(args: &[String]) -> ExitCode {
    let num = |i: usize| args.get(i).and_then(|s| s.parse::<u32>().ok());
    let r = match (args.first().map(String::as_str), num(1), num(2)) {
        (Some("tierkit"), Some(nid), Some(t)) => child_tierkit(nid, t, false),
        (Some("pool"), Some(nid), _) => child_tierkit(nid, 1, true),
        (Some("hugetlb"), Some(nid), _) => child_hugetlb(nid),
        // The cost of a measurement itself: spawn, print, exit.
        (Some("null"), _, _) => Ok("0 0 -1 -1 0".to_string()),
        _ => Err(format!("bad child arguments {args:?}")),
    };
    match r {
        Ok(s) => {
            println!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// `Some(exit code)` when this process is a measurement child (`BIN
/// --child ...`): the binary's `main` returns it at once.
pub fn child_requested() -> Option<ExitCode> {
    let args: Vec<String> = std::env::args().collect();
    (args.get(1).map(String::as_str) == Some("--child")).then(|| child_main(&args[2..]))
}

/// What one child measured.
#[derive(Clone, Copy, Debug)]
struct Sample {
    ns: u64,
    workers: u32,
    cpu_node: i32,
    /// The touches again once mapped (tierkit only; 0 for hugetlb).
    retouch_ns: u64,
    /// Busy time of all CPUs from before the child until the system was
    /// back where it began ([`cpu`]), ns.
    cpu_ns: u64,
}

/// Runs one measurement in a child (`--child ARGS`). `Err` carries the
/// child's reason, or the signal that ended it.
fn measure(args: &[String]) -> Result<Sample, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let out = Command::new(exe)
        .arg("--child")
        .args(args)
        .output()
        .map_err(|e| format!("spawn the child: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        use std::os::unix::process::ExitStatusExt;
        return Err(match out.status.signal() {
            Some(libc::SIGBUS) => {
                "SIGBUS at first touch (no free naturally aligned GiB on the node)".to_string()
            }
            Some(s) => format!("child killed by signal {s}"),
            None => stderr.trim().to_string(),
        });
    }
    let f: Vec<&str> = stdout.split_whitespace().collect();
    match f.as_slice() {
        [ns, w, c, _, re] => Ok(Sample {
            ns: ns.parse().map_err(|_| format!("child output {stdout:?}"))?,
            workers: w.parse().map_err(|_| format!("child output {stdout:?}"))?,
            cpu_node: c.parse().map_err(|_| format!("child output {stdout:?}"))?,
            retouch_ns: re.parse().map_err(|_| format!("child output {stdout:?}"))?,
            cpu_ns: 0,
        }),
        _ => Err(format!("child output {stdout:?}")),
    }
}

/// Median of `v` (upper median for an even count); 0 when empty.
pub fn median(v: &[u64]) -> u64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    s.get(s.len() / 2).copied().unwrap_or(0)
}

/// With `warm_up` one untimed run first, then `reps` timed ones, each
/// after `before` (untimed; e.g. making sure the pool is full) and followed
/// by `again` (until the system is back where it began: e.g. the pool
/// refilled). The CPU time of each sample covers the child and `again`.
fn series(
    args: &[String],
    reps: usize,
    warm_up: bool,
    mut before: impl FnMut() -> Result<(), String>,
    mut again: impl FnMut() -> Result<(), String>,
) -> Result<Vec<Sample>, String> {
    if warm_up {
        before().map_err(|e| format!("warm-up: {e}"))?;
        measure(args).map_err(|e| format!("warm-up: {e}"))?;
        again().map_err(|e| format!("warm-up: {e}"))?;
    }
    (0..reps)
        .map(|_| {
            before()?;
            let c0 = cpu::busy_ns().ok_or("cannot read /proc/stat")?;
            let mut s = measure(args)?;
            again()?;
            let c1 = cpu::busy_ns().ok_or("cannot read /proc/stat")?;
            s.cpu_ns = c1.saturating_sub(c0);
            Ok(s)
        })
        .collect()
}

/// The CPU time of a measurement that measures nothing (the `null` child:
/// spawn, print, exit), median of `reps`, ns: taken off every variant's.
fn null_cpu(reps: usize) -> Result<u64, String> {
    let s = series(&["null".to_string()], reps, false, || Ok(()), || Ok(()))?;
    Ok(median(&s.iter().map(|x| x.cpu_ns).collect::<Vec<_>>()))
}

/// Seconds with three decimals.
pub fn secs(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e9)
}

/// What to measure on each node.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Timed repetitions per variant (the figure is their median).
    pub reps: usize,
    /// tierkit worker counts, in order (`TK_THREADS_AUTO` allowed); past
    /// the first, an `EINVAL` (more workers than the placement has CPUs)
    /// ends the series.
    pub threads: Vec<u32>,
    /// Also tierkit from a ready pool.
    pub pool: bool,
    /// One untimed run before the timed ones, per variant.
    pub warm_up: bool,
}

/// Everything measured so far, for the JSON line and the table.
#[derive(Debug, Default)]
pub struct Results {
    /// One per (node, variant, T): medians and samples.
    pub rows: Vec<Value>,
    /// hugetlb ÷ tierkit per (node, T) and hugetlb ÷ pool per node.
    pub ratios: Vec<Value>,
    /// (node, variant) that could not be measured, with the reason.
    pub skipped: Vec<Value>,
    /// The printed table's lines.
    pub table: Vec<String>,
    /// The null child's CPU time ([`null_cpu`]), ns: the same for every
    /// node, measured before the first one.
    pub null_cpu_ns: Option<u64>,
}

impl Results {
    /// Prints the table, headed by what it shows.
    pub fn print(&self, reps: usize) {
        println!();
        println!("time to first use of 1 GiB (mmap .. every 4 KiB touched), median of {reps};");
        println!("cpu: busy time of all CPUs until the system is back where it began (the GiB");
        println!("freed, the pool refilled), less a null measurement's and the child's re-touch:");
        println!(
            "{:<14} {:<14} {:>9} {:>9} {:>10}",
            "node", "variant", "seconds", "cpu s", "hugetlb/x"
        );
        for l in &self.table {
            println!("{l}");
        }
    }

    /// Adds `rows`, `ratios` and `skipped` to the JSON line.
    pub fn into_report(self, r: &mut Report) {
        r.set("rows", Value::Array(self.rows));
        r.set("ratios", Value::Array(self.ratios));
        r.set("skipped", Value::Array(self.skipped));
    }
}

/// `target >= X: met|missed`, or `no target`.
fn verdict(ratio: f64, tgt: Option<f64>) -> (Option<bool>, String) {
    match tgt {
        Some(x) if ratio >= x => (Some(true), format!("target >= {x}: met")),
        Some(x) => (Some(false), format!("target >= {x}: missed")),
        None => (None, "no target".into()),
    }
}

/// A node being measured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeAt {
    pub nid: u32,
    /// `dram` (it has CPUs) or `cxl` (memory only).
    pub kind: &'static str,
    /// `node N (KIND)`, for check names and the table.
    pub label: String,
}

impl NodeAt {
    pub fn of(topo: &Topology, nid: u32) -> NodeAt {
        let kind = if topo.cpu.contains(&nid) {
            "dram"
        } else {
            "cxl"
        };
        NodeAt {
            nid,
            kind,
            label: format!("node {nid} ({kind})"),
        }
    }
}

impl Results {
    /// Records that `variant` could not be measured on `n`, and why, as a
    /// skipped check `name`.
    fn skip(&mut self, r: &mut Report, n: &NodeAt, variant: &str, name: &str, why: String) {
        r.skip(name, why.clone());
        self.skipped
            .push(json!({"nid": n.nid, "kind": n.kind, "variant": variant, "reason": why}));
    }
}

/// The samples' times and their median, ns.
fn times(s: &[Sample]) -> (Vec<u64>, u64) {
    let ns: Vec<u64> = s.iter().map(|x| x.ns).collect();
    let med = median(&ns);
    (ns, med)
}

/// `row` with the samples' CPU time: each sample's ([`Sample::cpu_ns`]),
/// their median, and the median net of the null child's and of the
/// child's own re-touch ([`cpu::net`]); and that net median, ns.
fn with_cpu(mut row: Value, s: &[Sample], null: u64) -> (Value, u64) {
    let cycle: Vec<u64> = s.iter().map(|x| x.cpu_ns).collect();
    let net = median(
        &s.iter()
            .map(|x| cpu::net(x.cpu_ns, null, x.retouch_ns))
            .collect::<Vec<_>>(),
    );
    row["cpu_samples_ns"] = json!(cycle);
    row["cpu_median_ns"] = json!(median(&cycle));
    row["cpu_null_ns"] = json!(null);
    row["cpu_net_ns"] = json!(net);
    (row, net)
}

/// The tierkit series of `plan` on `n`: (T, median ns, net CPU ns) per T
/// measured.
fn tierkit_series(
    r: &mut Report,
    n: &NodeAt,
    plan: &Plan,
    null: u64,
    out: &mut Results,
) -> Vec<(u32, u64, u64)> {
    let (nid, kind, node) = (n.nid, n.kind, &n.label);
    let reps = plan.reps;
    let mut tk = Vec::new();
    for (i, &t) in plan.threads.iter().enumerate() {
        let label = threads_label(t);
        let a = vec!["tierkit".to_string(), nid.to_string(), t.to_string()];
        match series(&a, reps, plan.warm_up, || Ok(()), || Ok(())) {
            Ok(s) => {
                let (ns, med) = times(&s);
                let (row, cpu) = with_cpu(
                    json!({
                        "nid": nid, "kind": kind, "variant": "tierkit",
                        "threads": if t == TK_THREADS_AUTO { s[0].workers } else { t },
                        "auto": t == TK_THREADS_AUTO,
                        "placement": "local", "workers": s[0].workers, "cpu_node": s[0].cpu_node,
                        "samples_ns": ns, "median_ns": med,
                    }),
                    &s,
                    null,
                );
                r.ok_note(
                    &format!("{node} tierkit {label}"),
                    format!(
                        "median {} s of {reps}, {} workers on node {}, CPU {} s",
                        secs(med),
                        s[0].workers,
                        s[0].cpu_node,
                        secs(cpu)
                    ),
                );
                out.rows.push(row);
                tk.push((t, med, cpu));
            }
            // More workers than the placement has CPUs.
            Err(e) if i > 0 && e.contains("EINVAL") => {
                r.note(format!(
                    "{node}: {label} refused ({e}); the series ends there"
                ));
                break;
            }
            Err(e) if i == 0 && (e.contains("SIGBUS") || e.contains("ENOMEM")) => {
                out.skip(r, n, "tierkit", &format!("{node} tierkit"), e);
                break;
            }
            Err(e) => {
                r.fail(&format!("{node} tierkit {label}"), e);
                break;
            }
        }
    }
    tk
}

/// tierkit from a ready pool on `n`: (median ns, net CPU ns), or `None`
/// (skipped or failed, recorded in `r`). The CPU time includes the
/// refill that clears the next range. The pool is emptied again before it
/// returns.
fn pool_series(
    r: &mut Report,
    n: &NodeAt,
    plan: &Plan,
    null: u64,
    out: &mut Results,
) -> Option<(u64, u64)> {
    let (nid, kind) = (n.nid, n.kind);
    let name = format!("{} tierkit from a ready pool", n.label);
    if !pool::present() {
        let why = format!("no {} (a tierkit.ko without the pool)", pool::POOL_PATH);
        out.skip(r, n, "pool", &name, why);
        return None;
    }
    let (target, fill) = match pool::Target::filled(nid, 1) {
        Ok(t) => t,
        Err(e) if e.contains("ENOSPC") => {
            out.skip(r, n, "pool", &name, e);
            return None;
        }
        Err(e) => {
            r.fail(&name, format!("filling the pool: {e}"));
            return None;
        }
    };
    let timeout = pool::fill_timeout(nid);
    let mut refills = Vec::new();
    let a = vec!["pool".to_string(), nid.to_string()];
    // A write ends a refill pause: the refill the last fault woke may have
    // found no free GiB while that child still held its range (a small
    // guest has one), and then waits 10 s.
    let refill = || -> Result<std::time::Duration, String> {
        pool::set_target(nid, 1).map_err(|e| format!("write `{nid} 1`: {}", errno_name(&e)))?;
        pool::wait_for(nid, 1, 1, timeout)
    };
    let res = series(
        &a,
        plan.reps,
        plan.warm_up,
        || refill().map(|_| ()),
        || {
            refills.push(refill()?.as_secs_f64());
            Ok(())
        },
    );
    drop(target);
    match res {
        Ok(s) => {
            let (ns, med) = times(&s);
            let retouch: Vec<u64> = s.iter().map(|x| x.retouch_ns).collect();
            let floor = median(&retouch);
            let (row, cpu) = with_cpu(
                json!({
                    "nid": nid, "kind": kind, "variant": "pool", "threads": 0,
                    "workers": 0, "fill_s": fill.as_secs_f64(), "refill_wait_s": refills,
                    "samples_ns": ns, "median_ns": med, "retouch_samples_ns": retouch,
                    "retouch_median_ns": floor,
                }),
                &s,
                null,
            );
            r.ok_note(
                &name,
                format!(
                    "median {} s of {}, no clear at fault time (the same touches once mapped: {} s); first fill {:.1} s; CPU with the refill {} s",
                    secs(med),
                    plan.reps,
                    secs(floor),
                    fill.as_secs_f64(),
                    secs(cpu)
                ),
            );
            out.rows.push(row);
            Some((med, cpu))
        }
        Err(e) => {
            r.fail(&name, e);
            None
        }
    }
}

/// Measures `plan` on `nid`: tierkit per T, then from a ready pool, then
/// hugetlb; the ratios against hugetlb with their targets (reported
/// met or missed, not enforced). A side that cannot get a GiB is skipped
/// with the reason.
pub fn run_node(r: &mut Report, topo: &Topology, nid: u32, plan: &Plan, out: &mut Results) {
    let n = NodeAt::of(topo, nid);
    let (node, kind) = (&n.label, n.kind);
    // tierkit first: its range is freed after each run, and the pool and
    // the hugetlb reservation below may then take that GiB.
    let boot = BootPool::release(nid);
    if let Some(n) = boot.restore {
        r.note(format!(
            "{node}: {n} boot-time 1 GiB hugetlb page(s) handed back for the run"
        ));
    }
    // What a measurement costs by itself, taken off each one's CPU time.
    let null = match out.null_cpu_ns.map_or_else(|| null_cpu(plan.reps), Ok) {
        Ok(ns) => *out.null_cpu_ns.insert(ns),
        Err(e) => {
            r.fail("the null child", e);
            return;
        }
    };
    let tk = tierkit_series(r, &n, plan, null, out);
    let from_pool = if plan.pool {
        pool_series(r, &n, plan, null, out)
    } else {
        None
    };
    let hp = match HugePage::get(nid) {
        Ok(hp) => hp,
        Err(e) => {
            out.skip(r, &n, "hugetlb", &format!("{node} hugetlb"), e);
            return;
        }
    };
    let a = vec!["hugetlb".to_string(), nid.to_string()];
    let (huge, huge_cpu) = match series(&a, plan.reps, plan.warm_up, || Ok(()), || Ok(())) {
        Ok(s) => {
            let (ns, med) = times(&s);
            let (row, cpu) = with_cpu(
                json!({
                    "nid": nid, "kind": kind, "variant": "hugetlb", "threads": 1,
                    "page": hp.how, "samples_ns": ns, "median_ns": med,
                }),
                &s,
                null,
            );
            r.ok_note(
                &format!("{node} hugetlb"),
                format!(
                    "median {} s of {}, page {}, CPU {} s",
                    secs(med),
                    plan.reps,
                    hp.how,
                    secs(cpu)
                ),
            );
            out.rows.push(row);
            (med, cpu)
        }
        Err(e) => {
            r.fail(&format!("{node} hugetlb"), e);
            return;
        }
    };
    drop(hp);
    drop(boot);
    out.table.push(format!(
        "{:<14} {:<14} {:>9} {:>9} {:>10}",
        node,
        "hugetlb",
        secs(huge),
        secs(huge_cpu),
        ""
    ));
    let sides = tk
        .iter()
        .map(|&(t, ns, cpu)| {
            (
                format!("tierkit {}", threads_label(t)),
                Some(t),
                ns,
                cpu,
                target(t),
            )
        })
        .chain(
            from_pool
                .map(|(ns, cpu)| ("tierkit pool".to_string(), None, ns, cpu, Some(POOL_TARGET))),
        );
    for (label, t, ns, cpu, tgt) in sides {
        let ratio = huge as f64 / ns.max(1) as f64;
        let (met, verdict) = verdict(ratio, tgt);
        r.ok_note(
            &format!("{node} hugetlb / {label}"),
            format!("{ratio:.2} ({verdict})"),
        );
        out.table.push(format!(
            "{:<14} {:<14} {:>9} {:>9} {:>10.2}  {verdict}",
            node,
            label,
            secs(ns),
            secs(cpu),
            ratio
        ));
        let variant = if t.is_some() { "tierkit" } else { "pool" };
        out.ratios.push(json!({
            "nid": nid, "kind": kind, "variant": variant, "threads": t, "tierkit_ns": ns,
            "hugetlb_ns": huge, "hugetlb_over_tierkit": ratio, "target": tgt, "met": met,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_samples() {
        assert_eq!(median(&[5, 1, 3]), 3);
        assert_eq!(median(&[4, 1, 3, 2]), 3);
        assert_eq!(median(&[7]), 7);
        assert_eq!(median(&[]), 0);
    }

    #[test]
    fn first_use_targets() {
        assert_eq!(target(1), Some(0.95));
        assert_eq!(target(2), Some(1.8));
        assert_eq!(target(3), None);
        assert_eq!(POOL_TARGET, 20.0);
    }

    #[test]
    fn labels_and_verdicts() {
        assert_eq!(threads_label(2), "T=2");
        assert_eq!(threads_label(TK_THREADS_AUTO), "T=auto");
        assert_eq!(
            verdict(21.0, Some(20.0)),
            (Some(true), "target >= 20: met".into())
        );
        assert_eq!(verdict(1.0, Some(1.8)).0, Some(false));
        assert_eq!(verdict(1.0, None), (None, "no target".into()));
        let topo = Topology {
            online: vec![0, 1],
            memory: vec![0, 1],
            cpu: vec![0],
        };
        let n = NodeAt::of(&topo, 1);
        assert_eq!((n.label.as_str(), n.kind), ("node 1 (cxl)", "cxl"));
    }

    #[test]
    fn bad_child_arguments_fail() {
        assert_eq!(child_main(&["nope".into()]), ExitCode::FAILURE);
    }
}
