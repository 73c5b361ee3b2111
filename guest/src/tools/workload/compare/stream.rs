//! The STREAM-style kernels under every policy.

use super::*;

pub fn stream(
    ctx: &Ctx,
    s: &Settings,
    policies: &[Policy],
    r: &mut Report,
    inrun: &mut InRun,
) -> Vec<Row> {
    r.note(format!(
        "stream: 3 arrays of {} doubles ({}), {} thread(s), {} rounds, each kernel of each policy \
         timed in blocks of {} s for at least {} s per round, each 256 KiB chunk at its best time; every node's costs \
         re-measured in the same rounds on its own bound working set",
        s.stream_size / 24,
        fmt_size(s.stream_size),
        ctx.threads,
        s.rounds,
        s.duration / 8.0,
        s.duration / 4.0
    ));
    // Each kernel gets a quarter of `--duration` per round, so that a
    // round of the four costs a policy what a round of lookups does.
    // The calibration, side by side with the policies: STREAM on a working
    // set bound to each node (separate from the bind:N policies' own).
    let mut cal_sets = Vec::new();
    for &n in &ctx.topo.memory {
        match Region::new(&Placement::Bind(n), s.stream_size) {
            Ok(region) => {
                let st = Stream::new(&region, &ctx.cpus, ctx.threads, s.duration / 8.0);
                cal_sets.push((n, region, st));
            }
            Err(e) => {
                r.fail(&format!("stream costs of node {n}"), format!("{e:#}"));
            }
        }
    }
    let mut sets = sets(
        ctx,
        policies,
        Workload::Triad,
        "stream",
        s.stream_size,
        r,
        |region| {
            Ok(Stream::new(
                region,
                &ctx.cpus,
                ctx.threads,
                s.duration / 8.0,
            ))
        },
    );
    for _ in 0..s.rounds {
        for (_, _, st) in cal_sets.iter_mut() {
            st.round(&ctx.cpus, ctx.threads, s.duration / 4.0);
        }
        for set in sets.iter_mut() {
            set.state.round(&ctx.cpus, ctx.threads, s.duration / 4.0);
        }
    }
    let mut run = ctx.cal.clone();
    for (n, region, st) in &cal_sets {
        let b = st.best();
        if let Some(x) = run.nodes.iter_mut().find(|x| x.nid == *n) {
            (x.copy_mbps, x.scale_mbps, x.add_mbps, x.triad_mbps) = (b[0], b[1], b[2], b[3]);
        }
        r.note(format!(
            "stream costs of node {n}, same rounds: copy {:.0} scale {:.0} add {:.0} triad {:.0} MB/s, {} physical runs{}",
            b[0],
            b[1],
            b[2],
            b[3],
            region.pfn_runs().map_or("?".into(), |x| x.to_string()),
            ctx.cal.node(*n).map_or(String::new(), |c| format!(
                " (tk-calibrate: {:.0} {:.0} {:.0} {:.0})",
                c.copy_mbps, c.scale_mbps, c.add_mbps, c.triad_mbps
            ))
        ));
    }
    inrun.push((
        "stream".into(),
        json!(cal_sets
            .iter()
            .map(|(n, region, st)| json!({"nid": n, "mbps": st.best(), "errors": st.errors(), "pfn_runs": region.pfn_runs()}))
            .collect::<Vec<_>>()),
    ));
    let workloads = [
        Workload::Copy,
        Workload::Scale,
        Workload::Add,
        Workload::Triad,
    ];
    let mut out = Vec::new();
    for set in sets {
        let name = format!("stream {}", set.policy.name());
        let errors = set.state.errors();
        if errors > 0 {
            r.fail(
                &name,
                format!("{errors} sampled elements have wrong values"),
            );
            continue;
        }
        let best = set.state.best();
        r.ok_note(
            &name,
            format!(
                "copy {:.0} scale {:.0} add {:.0} triad {:.0} MB/s, pages {}, {} physical runs",
                best[0],
                best[1],
                best[2],
                best[3],
                fmt_pages(&set.pages),
                set.region.pfn_runs().map_or("?".into(), |x| x.to_string())
            ),
        );
        let amounts = amounts_of(&set.pages);
        let runs = set.region.pfn_runs();
        for (k, kernel) in Bw::STREAM.iter().enumerate() {
            let mut row = ctx.row(kernel.name(), &set.policy, "MB/s", best[k]);
            row.pfn_runs = runs;
            row.pages = set.pages.clone();
            row.nodemask = set.ready.nodemask.clone();
            row.weights = set.ready.weights.clone();
            row.predicted = Some(model::predict_amounts(
                ctx.cal.regime(),
                &run.rates(workloads[k]),
                &amounts,
            ));
            row.predicted_calibration = Some(model::predict_amounts(
                ctx.cal.regime(),
                &ctx.cal.rates(workloads[k]),
                &amounts,
            ));
            out.push(row);
        }
    }
    out
}
