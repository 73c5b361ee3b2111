use super::*;

fn cal() -> Calibration {
    let node = |nid, kind: &str, rd, wr, tr, lat| NodeCal {
        nid,
        kind: kind.into(),
        read_mbps: rd,
        write_mbps: wr,
        copy_mbps: 0.0,
        scale_mbps: tr * 0.5,
        add_mbps: 0.0,
        triad_mbps: tr,
        latency_ns: lat,
        threads: 2,
        ..Default::default()
    };
    Calibration {
        nodes: vec![
            node(0, "dram", 3150.0, 13200.0, 4000.0, 235.0),
            node(2, "cxl", 30.0, 50.0, 35.0, 571.0),
        ],
        regime: "serial".into(),
        ..Default::default()
    }
}

#[test]
fn weights_like_the_kernel() {
    // The cxl guest's HMAT: 20480 and 10240 MB/s -> 21:10.
    let w = weights_from_bandwidth(&[(0, 20480, 20480), (2, 10240, 10240)], 0b101);
    assert_eq!((w[0], w[2]), (21, 10));
    // Measured: 3150 vs 30 (min of read, write) -> 31:1.
    let c = cal();
    let w = weights_from_bandwidth(&c.measured_entries(), 0b101);
    assert_eq!((w[0], w[2]), (31, 1));
}

#[test]
fn rates_per_workload() {
    let c = cal();
    // Copy: no figure (an old file): from read and write; scale: its own.
    let r = c.rates(Workload::Copy);
    assert!((r[0] - 2.0 / (1.0 / 3150.0 + 1.0 / 13200.0)).abs() < 1e-6);
    assert_eq!(c.rates(Workload::Scale)[0], 2000.0);
    assert_eq!(c.rates(Workload::Add)[0], 4000.0);
    assert_eq!(c.rates(Workload::Triad)[2], 35.0);
    let l = c.rates(Workload::Lookup);
    assert_eq!(l[0], 1.0);
    assert!((l[2] - 235.0 / 571.0).abs() < 1e-12);
    // QEMU's CXL: 8 B / 30 MB/s = 267 ns a word, latency 571: no
    // locality, every load paid. DRAM: 2.5 ns a word against 235.
    assert!(Calibration::no_locality(&c.nodes[1]));
    assert!(!Calibration::no_locality(&c.nodes[0]));
    // 30 random loads at 571 ns, 90 streamed words at 8 B / 30 MB/s.
    let ns = 30.0 * 571.0 + 90.0 * 8e3 / 30.0;
    let a = c.lookup_rates(0, 1000.0, (30.0, 90.0), 2);
    assert_eq!(a[0], 1000.0);
    assert!((a[2] - 1e9 / ns).abs() < 1e-6, "{}", a[2]);
    // Parallel regime: the threads add up; with locality, the ratio.
    let mut p = c.clone();
    p.regime = "parallel".into();
    assert!((p.lookup_rates(0, 1000.0, (30.0, 90.0), 2)[2] - 2e9 / ns).abs() < 1e-6);
    p.nodes[1].read_mbps = 10_000.0;
    assert!((p.lookup_rates(0, 1000.0, (30.0, 90.0), 2)[2] - 1000.0 * 235.0 / 571.0).abs() < 1e-9);
    // Serial: the recommendation is DRAM alone.
    let rec = c.recommend(Workload::Triad).unwrap();
    assert_eq!(rec.mask, Nodemask(0b1));
    assert_eq!(Workload::from_name("stream"), Some(Workload::Triad));
    assert_eq!(Workload::from_name("nope"), None);
}

#[test]
fn patterns() {
    assert_eq!(
        proportional_pattern(&[(0, 3000.0), (2, 30.0)]),
        vec![(0, 100), (2, 1)]
    );
    assert_eq!(
        proportional_pattern(&[(0, 13200.0), (2, 5.0)]),
        vec![(0, 255), (2, 1)]
    );
    assert_eq!(
        proportional_pattern(&[(0, 10.0), (1, 10.0)]),
        vec![(0, 1), (1, 1)]
    );
    assert_eq!(
        proportional_pattern(&[(0, 0.0), (1, 0.0)]),
        vec![(0, 1), (1, 1)]
    );
}

#[test]
fn table_and_json_round_trip() {
    let c = cal();
    let t = c.table(0b101);
    assert_eq!(t.len(), 3);
    assert!(t[2].contains("cxl"), "{}", t[2]);
    let p = std::env::temp_dir().join(format!("tk-cal-{}.json", std::process::id()));
    let p = p.to_str().unwrap();
    c.save(p).unwrap();
    assert_eq!(Calibration::load(p).unwrap(), c);
    std::fs::remove_file(p).unwrap();
}

#[test]
fn measures_on_the_host() {
    let r = Region::new(&Placement::Local, 1 << 20).unwrap();
    let lat = measure_latency(&r, None, 0.01, 1);
    assert!(lat > 0.0 && lat < 1e6, "{lat}");
    // The whole calibration on this host's nodes, tiny.
    let topo = Topology::read().unwrap();
    if !topo.memory.is_empty() {
        let o = Opts {
            size: 1 << 20,
            threads: 2,
            duration: 0.002,
            nodes: None,
            probe: true,
            rounds: 2,
        };
        let mut lines = Vec::new();
        let c = calibrate(&topo, &o, &mut |l| lines.push(l)).unwrap();
        assert_eq!(c.nodes.len(), topo.memory.len());
        let n = &c.nodes[0];
        for x in [
            n.read_mbps,
            n.write_mbps,
            n.copy_mbps,
            n.scale_mbps,
            n.add_mbps,
            n.triad_mbps,
            n.latency_ns,
        ] {
            assert!(x > 0.0 && x.is_finite(), "{n:?}");
        }
        assert!(lines[0].contains("best of 3 rounds"), "{lines:?}");
    }
}
