//! The page_fault2-style kernel under every policy, and the pages/s
//! tierkit's mmap delivers against the kernel's faults and `MAP_POPULATE`.

use super::*;

pub fn fault(ctx: &Ctx, s: &Settings, policies: &[Policy], r: &mut Report) -> Vec<Row> {
    r.note(format!(
        "fault: page_fault2 on a private mapping of a {} shared-memory file per thread, 1..{} threads, \
         {} rounds of {} s, best counts; deliveries of {}, {} rounds, median",
        fmt_size(s.fault_size),
        ctx.fault_threads,
        s.rounds,
        s.duration,
        fmt_size(s.map_size),
        s.reps
    ));
    let mut out = page_fault2_rows(ctx, s, policies, r);
    // Pages/s delivered: tierkit against the kernel, same weights, round
    // robin.
    let Some(kw) = ctx.kernel_w else {
        r.skip("fault deliveries", "the kernel has no weighted interleave");
        return out;
    };
    out.extend(delivery_rows(ctx, s, policies, &kw, r));
    out
}

/// page_fault2 under each of the kernel's policies, 1..T threads: one
/// check and one row per policy.
fn page_fault2_rows(ctx: &Ctx, s: &Settings, policies: &[Policy], r: &mut Report) -> Vec<Row> {
    let mut out = Vec::new();
    let k = ctx.kernel_w;
    let mut pf: Vec<(Policy, TaskPolicy)> = Vec::new();
    for p in policies.iter().filter(|p| !p.is_tierkit()) {
        let policy = match p {
            Policy::Local => TaskPolicy::DEFAULT,
            Policy::Bind(n) => TaskPolicy {
                mode: sys::MPOL_BIND,
                mask: 1 << n,
            },
            Policy::KernelInterleave => TaskPolicy {
                mode: sys::MPOL_INTERLEAVE,
                mask: ctx.memory,
            },
            Policy::KernelWeighted if k.is_some() => TaskPolicy {
                mode: sys::MPOL_WEIGHTED_INTERLEAVE,
                mask: ctx.memory,
            },
            _ => continue,
        };
        pf.push((p.clone(), policy));
    }
    // best[policy][threads - 1], pages of the first run.
    let mut best = vec![vec![0.0f64; ctx.fault_threads]; pf.len()];
    let mut pages = vec![Vec::new(); pf.len()];
    let mut failed: Vec<Option<String>> = vec![None; pf.len()];
    for t in 1..=ctx.fault_threads {
        for _ in 0..s.rounds {
            for (i, (_, tp)) in pf.iter().enumerate() {
                if failed[i].is_some() {
                    continue;
                }
                match page_fault2(&ctx.cpus, t, s.fault_size, s.duration, *tp) {
                    Ok((rate, n)) => {
                        best[i][t - 1] = best[i][t - 1].max(rate);
                        if pages[i].is_empty() {
                            pages[i] = n;
                        }
                    }
                    Err(e) => failed[i] = Some(format!("{e:#}")),
                }
            }
        }
    }
    for (i, (p, _)) in pf.iter().enumerate() {
        let name = format!("fault page_fault2 {}", p.name());
        if let Some(e) = &failed[i] {
            r.fail(&name, e.clone());
            continue;
        }
        check_bind(r, &name, p, &pages[i]);
        let by: Vec<(usize, f64)> = best[i]
            .iter()
            .enumerate()
            .map(|(t, &f)| (t + 1, f))
            .collect();
        r.ok_note(
            &name,
            format!(
                "{} faults/s, pages {}",
                by.iter()
                    .map(|(t, f)| format!("T={t}: {f:.0}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                fmt_pages(&pages[i])
            ),
        );
        let mut row = ctx.row("fault", p, "faults/s", by.last().map_or(0.0, |x| x.1));
        row.variant = Some("page_fault2".into());
        row.by_threads = Some(by);
        row.pages = pages[i].clone();
        out.push(row);
    }
    out
}

/// Pages/s delivered by tierkit's mmap against the kernel's page-by-page
/// faults and `MAP_POPULATE` with the kernel's weights `kw`: one check and
/// one row per delivery, and their ratios noted.
fn delivery_rows(
    ctx: &Ctx,
    s: &Settings,
    policies: &[Policy],
    kw: &[u8; 64],
    r: &mut Report,
) -> Vec<Row> {
    let mut out = Vec::new();
    let mut dels: Vec<(Delivery, Policy, Ready)> = Vec::new();
    for d in Delivery::ALL {
        match d {
            Delivery::TierkitMmap => {
                if !policies.contains(&Policy::TierkitHmat) {
                    continue;
                }
                match ctx.prepare(&Policy::TierkitHmat, Workload::Triad) {
                    Ok(x) => dels.push((d, Policy::TierkitHmat, x)),
                    Err(e) => {
                        r.fail("fault tierkit-mmap", format!("{e:#}"));
                    }
                }
            }
            _ => {
                if policies.contains(&Policy::KernelWeighted) {
                    dels.push((
                        d,
                        Policy::KernelWeighted,
                        Ready {
                            placement: Placement::KernelWeighted(ctx.memory),
                            nodemask: Some(nodes_of(ctx.memory)),
                            weights: Some(pairs(ctx.memory, kw)),
                        },
                    ));
                }
            }
        }
    }
    let npages = s.map_size / PAGE_SIZE;
    let cpu: Vec<u32> = ctx.cpus.first().copied().into_iter().collect();
    let mut times: Vec<Vec<u64>> = vec![Vec::new(); dels.len()];
    let mut nodes: Vec<Vec<(i32, usize)>> = vec![Vec::new(); dels.len()];
    let mut failed: Vec<Option<String>> = vec![None; dels.len()];
    for rep in 0..s.reps.max(1) {
        for (i, (d, _, _)) in dels.iter().enumerate() {
            if failed[i].is_some() {
                continue;
            }
            // One thread, on the DRAM node's first CPU.
            let (_, res) =
                workload::run_threads(&cpu, 1, |_| deliver(*d, npages, ctx.memory, rep == 0));
            match res.into_iter().next().expect("one thread") {
                Ok((ns, n)) => {
                    times[i].push(ns.max(1));
                    if rep == 0 {
                        nodes[i] = n;
                    }
                }
                Err(e) => failed[i] = Some(format!("{e:#}")),
            }
        }
    }
    let mut rates = Vec::new();
    for (i, (d, p, ready)) in dels.into_iter().enumerate() {
        let name = format!("fault {} {}", d.name(), p.name());
        if let Some(e) = &failed[i] {
            r.fail(&name, e.clone());
            continue;
        }
        let mut t = times[i].clone();
        t.sort_unstable();
        let rate = |ns: u64| npages as f64 * 1e9 / ns as f64;
        let (med, top) = (rate(t[t.len() / 2]), rate(t[0]));
        r.ok_note(
            &name,
            format!(
                "{med:.0} pages/s median, {top:.0} best, pages {}",
                kernels::fmt_nodes(&nodes[i])
            ),
        );
        rates.push((d, med));
        let mut row = ctx.row("fault", &p, "pages/s", med);
        row.variant = Some(d.name().into());
        row.threads = Some(1);
        row.pages = nodes[i].clone();
        row.nodemask = ready.nodemask;
        row.weights = ready.weights;
        out.push(row);
    }
    let get = |d| rates.iter().find(|x| x.0 == d).map(|x| x.1);
    if let (Some(t), Some(f), Some(p)) = (
        get(Delivery::TierkitMmap),
        get(Delivery::KernelFault),
        get(Delivery::KernelPopulate),
    ) {
        r.note(format!(
            "pages/s: tierkit mmap / page-by-page faults = {:.2}, tierkit mmap / MAP_POPULATE = {:.2}",
            t / f,
            t / p
        ));
    }
    out
}
