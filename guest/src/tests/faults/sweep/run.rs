//! The run over every operation, one check per operation, and what an
//! operation needs to run at all ([`gib_available`]).

use super::*;

/// The bandwidth lines with node `nid`'s figures doubled (another valid
/// table, so that a write shows whether it took effect).
pub fn bandwidth_variant(orig: &str, nid: u32) -> String {
    orig.lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() == 3 && f[0] == nid.to_string() {
                let d = |s: &str| {
                    s.parse::<u64>()
                        .map_or(s.to_string(), |v| (v * 2).to_string())
                };
                format!("{} {} {}\n", f[0], d(f[1]), d(f[2]))
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

pub fn run(r: &mut Report, topo: &Topology, wd: WeightDir) {
    let saved = match wd.snapshot() {
        Ok(s) => s,
        Err(e) => {
            r.fail("weight snapshot", format!("{e:#}"));
            return;
        }
    };
    let Some(env) = environment(r, topo, wd, saved.auto) else {
        return;
    };
    let mut knobs = match FaultKnobs::systematic(1) {
        Ok(k) => k,
        Err(e) => {
            r.fail("fault injection setup", format!("{e:#}"));
            return;
        }
    };
    r.ok_note(
        "fault injection setup",
        "failslab and fail_page_alloc: ignore-gfp-wait=N, min-order=0, ignore-gfp-highmem=N, verbose=1",
    );
    let tester = match (FailNth::open(), Kmsg::open_at_end()) {
        (Ok(fail), Ok(kmsg)) => Tester { fail, kmsg },
        (Err(e), _) => {
            r.fail("open /proc/thread-self/fail-nth", e.to_string());
            return;
        }
        (_, Err(e)) => {
            r.fail("open /dev/kmsg", e.to_string());
            return;
        }
    };

    let ops = operations(r, topo, &env);
    let mut points = Map::new();
    let mut detail = Map::new();
    for op in ops {
        sweep_op(r, &tester, &env, op, &mut points, &mut detail);
    }
    let total: u64 = points.values().filter_map(Value::as_u64).sum();
    r.note(format!("injection points in total: {total}"));

    put_back(r, &mut knobs, &env, &saved);
    r.set("injection_points", Value::Object(points));
    r.set("injection_points_total", json!(total));
    r.set("injection", Value::Object(detail));
    r.set(
        "tolerance",
        json!({"free_pages_per_node": FREE_TOL_PAGES, "sunreclaim_kb": SLAB_TOL_KB}),
    );
}

/// The run's environment: bandwidth as /init left it, memory at the start
/// (noted), the node with most free memory, what tierkit holds.
fn environment(
    r: &mut Report,
    topo: &Topology,
    wd: WeightDir,
    orig_auto: Option<bool>,
) -> Option<Env> {
    let bw_orig = match std::fs::read_to_string(wd.bandwidth_path()) {
        Ok(s) => s,
        Err(e) => {
            r.fail("read bandwidth", e.to_string());
            return None;
        }
    };
    let start = match MemSnapshot::take_drained() {
        Ok(s) => s,
        Err(e) => {
            r.fail("memory counters", format!("{e:#}"));
            return None;
        }
    };
    r.note(format!("start: {}", start.describe()));
    let big_nid = start
        .free_pages
        .iter()
        .filter(|(n, _)| topo.memory.contains(n))
        .max_by_key(|(_, &p)| p)
        .map_or(0, |(&n, _)| n);
    let baseline_held = match held() {
        Ok(h) => h,
        Err(e) => {
            r.fail("tierkit stats", e);
            return None;
        }
    };
    let first_bw_node = bw_orig
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().next()?.parse().ok());
    Some(Env {
        mem_mask: topo.memory_mask(),
        big_nid,
        bw_new: first_bw_node.map_or(String::new(), |n| bandwidth_variant(&bw_orig, n)),
        bw_orig,
        orig_auto,
        wd,
        baseline_held,
        start,
    })
}

/// The operations swept, in order; the debugfs writes that cannot be
/// made here are skipped with the reason.
fn operations(r: &mut Report, topo: &Topology, env: &Env) -> Vec<Op> {
    let mut ops = vec![
        Op::Open,
        Op::SetPolicy,
        Op::Mmap4k,
        Op::MmapGigantic,
        Op::Bulk,
        Op::TaskNext,
        Op::SetGigantic,
        Op::ClearBench,
        Op::GiganticTouch,
        Op::Rebalance,
    ];
    ops.extend(
        topo.memory
            .iter()
            .filter(|&&n| n < 64)
            .map(|&n| Op::WeightNode(n)),
    );
    ops.push(Op::Auto);
    if env.bw_new.is_empty() {
        r.skip(
            "write weighted_interleave/bandwidth",
            "no bandwidth was written by /init (no HMAT): nothing to vary",
        );
    } else {
        ops.push(Op::Bandwidth);
    }
    if crate::abi::pool::present() {
        ops.push(Op::Pool);
    } else {
        r.skip(
            "write gigantic/pool",
            "the module has no gigantic/pool file",
        );
    }
    ops
}

/// One operation's check: its sweep (unless the GiB it needs cannot be
/// had), the summary noted, its points and detail for the JSON line.
fn sweep_op(
    r: &mut Report,
    tester: &Tester,
    env: &Env,
    op: Op,
    points: &mut Map<String, Value>,
    detail: &mut Map<String, Value>,
) {
    let name = op.name();
    if matches!(op, Op::MmapGigantic | Op::ClearBench | Op::GiganticTouch) {
        match gib_available(env, op) {
            Ok(()) => {}
            Err(Unavailable::Skip(why)) => {
                r.skip(&format!("{name}: every injected fault handled"), why);
                return;
            }
            Err(Unavailable::Fail(why)) => {
                r.fail(&format!("{name}: every injected fault handled"), why);
                return;
            }
        }
    }
    let sw = tester.sweep(env, op);
    let summary = sweep_summary(&sw);
    r.note(format!("{name}: {summary}"));
    if sw.nr_failures == 0 && sw.done {
        r.ok_note(
            &format!("{name}: every injected fault handled"),
            summary.clone(),
        );
    } else {
        let mut why = sw.failures.join("; ");
        if sw.nr_failures > sw.failures.len() {
            why.push_str(&format!(
                " (and {} more)",
                sw.nr_failures - sw.failures.len()
            ));
        }
        if !sw.done {
            why.push_str("; never succeeded without an injected fault");
        }
        r.fail(&format!("{name}: every injected fault handled"), why);
    }
    points.insert(name.clone(), json!(sw.points));
    detail.insert(
        name,
        json!({
            "points": sw.points,
            "points_upper": sw.points_upper,
            "steps": sw.steps,
            "injected_steps": sw.injected_steps,
            "by_type": sw.by_type,
            "errnos": sw.errnos,
            "tolerated": sw.tolerated,
            "seconds": (sw.seconds * 10.0).round() / 10.0,
            "max_free_drift_pages": sw.max_free_drift,
            "max_sunreclaim_drift_kb": sw.max_slab_drift,
            "max_settle_ms": sw.max_settle_ms,
            "failures": sw.nr_failures,
        }),
    );
}

/// A sweep in one line: points, how many were exercised, faults by type,
/// errors, time and the largest drift.
fn sweep_summary(sw: &Sweep) -> String {
    let types: Vec<String> = sw.by_type.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let errnos: Vec<String> = sw.errnos.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let exercised = if sw.steps as u64 > u64::from(sw.points) {
        "each".to_string()
    } else {
        format!("{} of them", sw.injected_steps)
    };
    let count = if sw.points_upper > sw.points {
        format!("{}..{}", sw.points, sw.points_upper)
    } else {
        sw.points.to_string()
    };
    format!(
        "{count} injection points ({exercised} exercised; {}; errors: {}; {} tolerated), {:.1} s, max drift {} pages / SUnreclaim {:+} kB{}",
        if types.is_empty() { "none".into() } else { types.join(", ") },
        if errnos.is_empty() { "none".into() } else { errnos.join(", ") },
        sw.tolerated,
        sw.seconds,
        sw.max_free_drift,
        sw.max_slab_drift,
        if sw.max_settle_ms > 0 {
            format!(" (settled within {} ms)", sw.max_settle_ms)
        } else {
            String::new()
        }
    )
}

/// The knobs and the weight table put back (checked), and the memory
/// given back over the whole test.
fn put_back(r: &mut Report, knobs: &mut FaultKnobs, env: &Env, saved: &WeightSnapshot) {
    r.check("restore fault-injection knobs", knobs.restore());
    let res = restore_wi(env).and_then(|()| saved.restore().map_err(|e| format!("{e:#}")));
    let now = wi_state(&env.wd);
    r.check(
        "weight table restored",
        res.and_then(|()| {
            let now = now?;
            let want: Vec<(u32, u8)> = saved.weights.clone();
            let got: Vec<(u32, u8)> = want
                .iter()
                .map(|&(n, _)| (n, now.table[n as usize]))
                .collect();
            if got != want || now.auto != saved.auto || now.bandwidth != env.bw_orig {
                return Err(format!(
                    "now {got:?} auto={:?} bandwidth {:?}; was {want:?} auto={:?} bandwidth {:?}",
                    now.auto, now.bandwidth, saved.auto, env.bw_orig
                ));
            }
            Ok(())
        }),
    );
    let start = &env.start;
    match start.settled(FREE_TOL_PAGES, SLAB_TOL_KB, SETTLE_MS) {
        Ok((end, _)) => {
            r.note(format!("end: {}", end.describe()));
            r.check(
                "memory given back over the whole test",
                ok_or_join(start.losses(&end, FREE_TOL_PAGES, SLAB_TOL_KB)),
            );
        }
        Err(e) => {
            r.fail("memory given back over the whole test", format!("{e:#}"));
        }
    }
}

pub fn ok_or_join(v: Vec<String>) -> Result<(), String> {
    if v.is_empty() {
        Ok(())
    } else {
        Err(v.join("; "))
    }
}

pub enum Unavailable {
    Skip(String),
    Fail(String),
}

/// Whether one GiB can be had for `op` on the node: the call once without
/// fault injection.
pub fn gib_available(env: &Env, op: Op) -> Result<(), Unavailable> {
    let mut s = Step::new();
    prepare(env, op, &mut s).map_err(Unavailable::Fail)?;
    let res = if op == Op::GiganticTouch {
        match touch_armed(0, &s) {
            Ok(a) => a.value,
            Err(e) => Err(e),
        }
    } else {
        call(op, &mut s)
    };
    match res {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOMEM | libc::EFAULT)) => {
            Err(Unavailable::Skip(format!(
                "no free naturally aligned GiB on node {} ({} without fault injection)",
                env.big_nid,
                if op == Op::GiganticTouch {
                    "SIGBUS".into()
                } else {
                    errno_name(&e)
                }
            )))
        }
        Err(e) => Err(Unavailable::Fail(format!(
            "{} on node {} failed without fault injection: {}",
            op.name(),
            env.big_nid,
            errno_name(&e)
        ))),
    }
}
