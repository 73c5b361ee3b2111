use super::*;
use crate::tools::workload::Placement;

fn small() -> XsData {
    XsData::generate(XsParams {
        nuclides: 6,
        gridpoints: 50,
        seed: 3,
    })
}

#[test]
fn union_grid_indices_bracket_every_energy() {
    let d = small();
    let (n, g) = (d.p.nuclides, d.p.gridpoints);
    assert_eq!(d.union.len(), n * g);
    assert!(d.union.windows(2).all(|w| w[0] <= w[1]));
    for (u, &e) in d.union.iter().enumerate() {
        for nuc in 0..n {
            let j = d.index[u * n + nuc] as usize;
            let ej = d.grid[(nuc * g + j) * GP];
            // The gridpoint is at or below e, unless e is below the
            // nuclide's first; the next one is above e.
            assert!(ej <= e || j == 0, "u {u} nuc {nuc}");
            if j + 1 < g {
                assert!(d.grid[(nuc * g + j + 1) * GP] > e, "u {u} nuc {nuc}");
            }
        }
    }
    assert_eq!(d.materials.len(), MATERIALS);
    assert_eq!(d.materials[0].nuclides.len(), 3);
    assert!((d.cdf[MATERIALS - 1] - 1.0).abs() < 1e-12);
    assert_eq!(d.pick_material(0.0), 0);
    assert_eq!(d.pick_material(0.9999999), MATERIALS - 1);
}

/// A lookup by linear scans, straight from the definition.
fn ref_lookup(d: &XsData, e: f64, mat: usize) -> [f64; XS] {
    let g = d.p.gridpoints;
    let m = &d.materials[mat];
    let mut out = [0.0; XS];
    for (k, &nuc) in m.nuclides.iter().enumerate() {
        let nuc = nuc as usize;
        let at = |j: usize| &d.grid[(nuc * g + j) * GP..(nuc * g + j + 1) * GP];
        let mut j = (0..g).rev().find(|&j| at(j)[0] <= e).unwrap_or(0);
        j = j.min(g - 2);
        let (a, b) = (at(j), at(j + 1));
        let f = (b[0] - e) / (b[0] - a[0]);
        for x in 0..XS {
            out[x] += m.conc[k] * (b[x + 1] - f * (b[x + 1] - a[x + 1]));
        }
    }
    out
}

#[test]
fn lookups_match_the_reference() {
    let d = small();
    let r = Region::new(&Placement::Local, d.p.layout().3).unwrap();
    let v = d.copy_into(&r).unwrap();
    let mut rng = Rng::new(9);
    for _ in 0..500 {
        let e = rng.next_f64();
        let mat = d.pick_material(rng.next_f64());
        // SAFETY: r is alive.
        let got = unsafe { v.lookup(&d, e, mat) };
        let want = ref_lookup(&d, e, mat);
        for x in 0..XS {
            assert!(
                (got[x] - want[x]).abs() <= 1e-9 * want[x].abs().max(1.0),
                "{got:?} {want:?}"
            );
        }
    }
    let a = run_lookups(&d, &v, &[], 2, 0.02);
    let b = run_lookups(&d, &v, &[], 2, 0.01);
    let l = d.loads_per_lookup();
    let (rnd, seq) = d.load_mix();
    assert!(
        (rnd + seq - l).abs() < 1e-9 && seq > rnd * 0.5,
        "{rnd} {seq}"
    );
    // log2(300) ~ 8.2 steps, plus 13 loads per nuclide.
    assert!(l > 8.0 + 13.0 && l < 9.0 + 13.0 * 6.0, "{l}");
    assert!(a.lookups >= 2 * VERIFY_LOOKUPS && a.per_s > 0.0);
    assert_eq!(a.verify, b.verify);
    // Chunk times: every lookup of each thread is in one.
    assert_eq!(a.chunks.len(), 2);
    assert_eq!(
        a.chunks.iter().map(|c| c.len() as u64).sum::<u64>() * LOOKUP_CHUNK,
        a.lookups
    );
    let mut m = vec![ChunkMins::default(); 2];
    for res in [&a, &b] {
        for (m, c) in m.iter_mut().zip(&res.chunks) {
            m.add(c);
        }
    }
    assert!(lookup_rate(&m) >= b.per_s.min(a.per_s) * 0.99);
    // Loads per page add up to the loads per lookup (each nuclide's
    // index and twelve gridpoint words, and the search's steps).
    let pl = d.page_loads(2000);
    assert_eq!(pl.len(), d.p.layout().3.div_ceil(PAGE_SIZE));
    let (r0, s0) = d.load_mix();
    let total: f64 = pl.iter().sum();
    assert!(
        (total - (r0 + s0)).abs() < 0.05 * (r0 + s0),
        "{total} {r0} {s0}"
    );
    // Not uniform: the page of the search's first step is read by
    // every lookup.
    let (_, u_off, _, _) = d.p.layout();
    let mid_page = (u_off + (d.union.len() - 1) / 2 * 8) / PAGE_SIZE;
    assert!(pl[mid_page] >= 1.0, "{}", pl[mid_page]);
}

#[test]
fn chunk_mins_take_each_chunks_best() {
    let mut m = ChunkMins::default();
    assert!(m.is_empty() && m.total_ns() == 0);
    assert_eq!(lookup_rate(&[m.clone()]), 0.0);
    m.add(&[10, 50, 30]);
    m.add(&[20, 40, 35]);
    assert_eq!((m.len(), m.total_ns()), (3, 10 + 40 + 30));
    // A shorter block counts on the common prefix only.
    m.add(&[5, 60]);
    assert_eq!((m.len(), m.total_ns()), (2, 5 + 40));
    // Two threads: rates add. 2 chunks of LOOKUP_CHUNK in 45 ns.
    let r = lookup_rate(&[m.clone(), m]);
    let one = (2 * LOOKUP_CHUNK) as f64 * 1e9 / 45.0;
    assert!((r - 2.0 * one).abs() < 1e-6 * r, "{r}");
}

#[test]
fn chunked_block_is_no_slower_than_its_blocks() {
    // 3 MiB: 131072 elements per array, 4 chunks of STREAM_CHUNK.
    let r = Region::new(&Placement::Local, 3 << 20).unwrap();
    let a = Arrays::new(&r);
    let mut want = a.init(&[], 2);
    let mut b = Block::new(&a, Bw::Triad, &[], 2, 0.002);
    want = Bw::Triad.apply(want, 0.0);
    let mut whole: f64 = 0.0;
    for _ in 0..3 {
        whole = whole.max(b.run(&a, &[], 2));
        want = Bw::Triad.apply(want, 0.0);
    }
    assert_eq!(b.mins.len(), 2);
    assert!(b.mins.iter().all(|m| m.len() == 2), "{:?}", b.mins);
    assert!(b.best >= whole && b.best.is_finite(), "{} {whole}", b.best);
    // Chunked passes compute what whole passes do.
    assert_eq!(a.errors(want), 0);
}

#[test]
fn sizes() {
    let p = XsParams::for_size(32 << 20, 34);
    let total = p.layout().3;
    assert!(total <= 32 << 20 && total > 30 << 20, "{total}");
    assert_eq!(XsParams::for_size(1, 34).gridpoints, 16);
}

#[test]
fn stream_checks_out() {
    let r = Region::new(&Placement::Local, 3 << 20).unwrap();
    let mut s = Stream::new(&r, &[], 2, 0.005);
    assert_eq!(s.errors(), 0);
    for _ in 0..3 {
        s.round(&[], 2, 0.01);
    }
    assert_eq!(s.errors(), 0);
    assert!(s.best().iter().all(|&m| m > 0.0), "{:?}", s.best());
    // A wrong expectation is noticed.
    s.want.0 += 1.0;
    assert!(s.errors() > 0);
}

#[test]
fn every_kernel_keeps_normal_values() {
    let r = Region::new(&Placement::Local, 3 * 8 * 1000).unwrap();
    let a = Arrays::new(&r);
    let mut want = a.init(&[], 1);
    for (no, k) in Bw::ALL.iter().cycle().take(30).enumerate() {
        a.pass(*k, 0, 1, no as u64);
        want = k.apply(want, Arrays::write_value(no as u64));
        assert_eq!(a.errors(want), 0, "{k:?}");
        assert!(want.0.is_normal() && want.1.is_normal());
    }
    let mut b = Block::new(&a, Bw::Read, &[], 1, 0.001);
    assert!(b.run(&a, &[], 1) > 0.0);
    assert_eq!(b.all.len(), 1);
    assert_eq!(Bw::Copy.bytes_per_element(), 16);
}

#[test]
fn faults_on_the_host() {
    let (rate, nodes) = page_fault2(&[], 2, 64 * PAGE_SIZE, 0.01, TaskPolicy::DEFAULT).unwrap();
    assert!(rate > 0.0);
    if !nodes.is_empty() {
        assert_eq!(nodes.iter().map(|n| n.1).sum::<usize>(), 64);
    }
    // Weighted interleave needs Linux 6.9; an older host says EINVAL.
    if let Ok((ns, nodes)) = deliver(Delivery::KernelFault, 16, 0b1, true) {
        assert!(ns > 0);
        assert_eq!(nodes.iter().map(|n| n.1).sum::<usize>(), 16);
    }
}
