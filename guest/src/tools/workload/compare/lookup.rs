//! The XSBench-style lookup kernel under every policy.

use super::*;
use crate::tools::workload::kernels::XsView;

pub fn lookup(
    ctx: &Ctx,
    s: &Settings,
    policies: &[Policy],
    r: &mut Report,
    inrun: &mut InRun,
) -> Vec<Row> {
    let params = XsParams::for_size(s.lookup_size, s.nuclides);
    let t0 = sys::monotonic_ns();
    let data = XsData::generate(params);
    let bytes = params.layout().3;
    let mix = data.load_mix();
    let loads = mix.0 + mix.1;
    // Where the lookup's loads fall, per page (the same layout in every
    // working set): the model's traffic split, instead of the page split.
    let page_loads = data.page_loads(16384);
    r.note(format!(
        "lookup: {} nuclides x {} gridpoints, union grid {} points, working set {}, {:.1} loads per lookup \
         (built in {:.1} s); {} rounds of two {} s blocks per policy, each chunk of 64 lookups at its best time",
        params.nuclides,
        params.gridpoints,
        params.union_len(),
        fmt_size(bytes),
        loads,
        (sys::monotonic_ns() - t0) as f64 / 1e9,
        s.rounds,
        s.duration / 2.0
    ));
    let sets = sets(
        ctx,
        policies,
        Workload::Lookup,
        "lookup",
        bytes,
        r,
        |region| data.copy_into(region),
    );
    let mut chases = latency_chases(ctx, s, bytes, r);
    let (best, verify) = lookup_rounds(ctx, s, &data, &sets, &mut chases);
    let mut out = lookup_rows(ctx, policies, sets, (&best, &verify), &page_loads, r);
    predict_lookups(ctx, &mut out, &chases, mix, r, inrun);
    out
}

/// A node's latency chase, re-run in every round of the lookups.
type NodeChase = (u32, Region, Chase);

/// The latency of each node, re-measured in the same rounds (on its own
/// bound buffer of the same size).
fn latency_chases(ctx: &Ctx, s: &Settings, bytes: usize, r: &mut Report) -> Vec<NodeChase> {
    let mut chases = Vec::new();
    for &n in &ctx.topo.memory {
        match Region::new(&Placement::Bind(n), bytes) {
            Ok(region) => {
                let c = Chase::new(
                    &region,
                    ctx.cpus.first().copied(),
                    s.duration,
                    0x77 + n as u64,
                );
                chases.push((n, region, c));
            }
            Err(e) => {
                r.fail(&format!("lookup latency of node {n}"), format!("{e:#}"));
            }
        }
    }
    chases
}

/// A warm-up, then the rounds (each node's chase, then two blocks of
/// lookups per set). Gives each set's best rate and its results' hash.
fn lookup_rounds(
    ctx: &Ctx,
    s: &Settings,
    data: &XsData,
    sets: &[Set<XsView>],
    chases: &mut [NodeChase],
) -> (Vec<f64>, Vec<Option<u64>>) {
    // Warm-up, then rounds.
    for set in sets {
        run_lookups(data, &set.state, &ctx.cpus, ctx.threads, s.duration / 4.0);
    }
    // Per set and thread, each chunk's best time (every block draws the
    // same lookups: see `ChunkMins`).
    let mut mins: Vec<Vec<ChunkMins>> = vec![Vec::new(); sets.len()];
    let mut verify: Vec<Option<u64>> = vec![None; sets.len()];
    for _ in 0..s.rounds {
        for (_, region, c) in chases.iter_mut() {
            c.run(region, ctx.cpus.first().copied());
        }
        for (i, set) in sets.iter().enumerate() {
            // Two blocks of half the duration: more samples for the best.
            for _ in 0..2 {
                let res = run_lookups(data, &set.state, &ctx.cpus, ctx.threads, s.duration / 2.0);
                if mins[i].len() != res.chunks.len() {
                    mins[i] = vec![ChunkMins::default(); res.chunks.len()];
                }
                for (m, c) in mins[i].iter_mut().zip(&res.chunks) {
                    m.add(c);
                }
                verify[i] = Some(res.verify);
            }
        }
    }
    let best: Vec<f64> = mins.iter().map(|m| lookup_rate(m)).collect();
    (best, verify)
}

/// One check and one row per set: the same results as the first set's,
/// the rate, the loads per node (from `page_loads`, the loads per page).
fn lookup_rows(
    ctx: &Ctx,
    policies: &[Policy],
    mut sets: Vec<Set<XsView>>,
    (best, verify): (&[f64], &[Option<u64>]),
    page_loads: &[f64],
    r: &mut Report,
) -> Vec<Row> {
    let mut out = Vec::new();
    let first = verify.first().copied().flatten();
    for (i, set) in sets.drain(..).enumerate() {
        let name = format!("lookup {}", set.policy.name());
        if verify[i] != first {
            r.fail(
                &name,
                format!(
                    "results differ from {}'s (hash {:?} vs {first:?})",
                    policies[0].name(),
                    verify[i]
                ),
            );
            continue;
        }
        r.ok_note(
            &name,
            format!("{:.0} lookups/s, pages {}", best[i], fmt_pages(&set.pages)),
        );
        let mut row = ctx.row("lookup", &set.policy, "lookups/s", best[i]);
        match set.region.page_nodes() {
            Ok(nodes) => {
                let mut t: Vec<(i32, f64)> = Vec::new();
                for (&n, &l) in nodes.iter().zip(page_loads) {
                    match t.iter_mut().find(|x| x.0 == n) {
                        Some(x) => x.1 += l,
                        None => t.push((n, l)),
                    }
                }
                t.sort_by_key(|x| x.0);
                row.traffic = Some(t);
            }
            Err(e) => {
                r.fail(&format!("{name} traffic"), format!("{e:#}"));
            }
        }
        row.pages = set.pages;
        row.pfn_runs = set.region.pfn_runs();
        row.nodemask = set.ready.nodemask;
        row.weights = set.ready.weights;
        drop(set.region);
        out.push(row);
    }
    out
}

/// The rows' predictions, anchored at the DRAM node's measured rate, from
/// the latency measured in the same rounds (and from the calibration's);
/// the in-run figures for the JSON line.
fn predict_lookups(
    ctx: &Ctx,
    out: &mut [Row],
    chases: &[NodeChase],
    mix: (f64, f64),
    r: &mut Report,
    inrun: &mut InRun,
) {
    let loads = mix.0 + mix.1;
    // Predictions, anchored at the DRAM node's measured rate.
    let anchor = out
        .iter()
        .find(|row| row.policy == rows::bind(ctx.dram))
        .or_else(|| out.iter().find(|row| row.policy == rows::LOCAL))
        .map(|row| row.measured);
    let mut run = ctx.cal.clone();
    for (n, _, c) in chases {
        if let Some(x) = run.nodes.iter_mut().find(|x| x.nid == *n) {
            x.latency_ns = c.best_ns;
        }
    }
    r.note(format!(
        "lookup: latency measured in the same rounds: {} (tk-calibrate: {})",
        run.nodes
            .iter()
            .map(|n| format!("node {} {:.0} ns", n.nid, n.latency_ns))
            .collect::<Vec<_>>()
            .join(", "),
        ctx.cal
            .nodes
            .iter()
            .map(|n| format!("node {} {:.0} ns", n.nid, n.latency_ns))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    inrun.push((
        "lookup".into(),
        json!({
            "loads_per_lookup": loads,
            "random_loads": mix.0,
            "streamed_loads": mix.1,
            "latency_ns": run.nodes.iter().map(|n| json!([n.nid, n.latency_ns])).collect::<Vec<_>>(),
            "no_locality": run.nodes.iter().filter(|n| Calibration::no_locality(n)).map(|n| n.nid).collect::<Vec<_>>(),
            "anchor": anchor.map(|a| json!({"node": ctx.dram, "lookups_per_s": a})),
        }),
    ));
    if let Some(a) = anchor {
        let rates = run.lookup_rates(ctx.dram, a, mix, ctx.threads);
        let rates_cal = ctx.cal.lookup_rates(ctx.dram, a, mix, ctx.threads);
        for row in out.iter_mut() {
            // The loads on each node (not the pages: the lookup's traffic
            // is far from uniform over its pages).
            let am = match &row.traffic {
                Some(t) => {
                    let mut a = [0.0; 64];
                    for &(n, l) in t {
                        if (0..64).contains(&n) {
                            a[n as usize] += l;
                        }
                    }
                    a
                }
                None => amounts_of(&row.pages),
            };
            row.predicted = Some(model::predict_amounts(ctx.cal.regime(), &rates, &am));
            row.predicted_calibration =
                Some(model::predict_amounts(ctx.cal.regime(), &rates_cal, &am));
        }
    }
}
