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
        // One socket's calibration from CPU 0 alone.
        let mut lines = Vec::new();
        let s = calibrate_socket(&topo, &o, 0, (1, vec![0]), &mut |l| lines.push(l)).unwrap();
        assert_eq!(s.nodes.len(), topo.memory.len());
        assert!(s.nodes.iter().all(|n| n.cpus == [0] && n.read_mbps > 0.0));
        assert!(
            lines.iter().all(|l| l.starts_with("socket 0: node ")),
            "{lines:?}"
        );
        let t = table_from_bandwidth(&s.measured_entries(), s.mask());
        assert_eq!(s.table().unwrap(), t);
        assert_eq!(s.weights.len(), topo.memory.len());
    }
}

/// `socket2`'s two sockets, as measured: each sees its own DRAM and
/// memory-only node faster than the other socket's.
fn two_sockets() -> Calibration {
    let node = |nid, rd: f64| NodeCal {
        nid,
        read_mbps: rd,
        write_mbps: rd * 2.0,
        ..Default::default()
    };
    let socket = |id: u32, bw: [f64; 4]| {
        let s = SocketCal {
            socket: id,
            cpu_nodes: vec![id],
            cpus: vec![id],
            nodes: (0..4).map(|n| node(n, bw[n as usize])).collect(),
            weights: Vec::new(),
        };
        let t = table_from_bandwidth(&s.measured_entries(), s.mask());
        SocketCal {
            weights: (0..4).map(|n| (n, t[n as usize])).collect(),
            ..s
        }
    };
    let mut c = cal();
    c.sockets = vec![
        socket(0, [300.0, 150.0, 100.0, 50.0]),
        socket(1, [150.0, 300.0, 50.0, 100.0]),
    ];
    c
}

#[test]
fn socket_tables_round_trip() {
    let c = two_sockets();
    // The kernel's reduction of 300:150:100:50, as HMAT's gives on socket2.
    assert_eq!(c.sockets[0].weights, vec![(0, 16), (1, 8), (2, 5), (3, 2)]);
    assert_eq!(c.sockets[1].weights, vec![(0, 8), (1, 16), (2, 2), (3, 5)]);
    let p = std::env::temp_dir().join(format!("tk-cal-sock-{}.json", std::process::id()));
    let p = p.to_str().unwrap();
    c.save(p).unwrap();
    let back = Calibration::load(p).unwrap();
    std::fs::remove_file(p).unwrap();
    assert_eq!(back, c);
    let t = back.socket_tables().unwrap();
    assert_eq!(t.len(), 2);
    assert_eq!((t[1].0, &t[1].1[..5]), (1, &[8, 16, 2, 5, 0][..]));
    // The flat calibration is untouched by the tables beside it.
    assert_eq!(back.measured_entries(), cal().measured_entries());
    // Without tables, nothing is written for them: an older reader's file.
    let flat = serde_json::to_value(cal()).unwrap();
    assert!(flat.get("sockets").is_none(), "{flat}");
}

#[test]
fn a_file_without_socket_tables_still_loads() {
    // What tk-calibrate wrote before `--per-socket` existed.
    let old = r#"{"size": 16777216, "duration": 0.15, "rounds": 3,
        "nodes": [{"nid": 0, "kind": "dram", "cpu_node": 0, "cpus": [0], "threads": 1,
                   "read_mbps": 3150.0, "write_mbps": 13200.0, "triad_mbps": 4000.0,
                   "latency_ns": 235.0, "hmat": null},
                  {"nid": 2, "kind": "cxl", "cpu_node": 0, "cpus": [0], "threads": 1,
                   "read_mbps": 30.0, "write_mbps": 50.0, "triad_mbps": 35.0,
                   "latency_ns": 571.0, "hmat": null}],
        "probe": null, "regime": "serial", "elapsed_s": 1.0}"#;
    let c: Calibration = serde_json::from_str(old).unwrap();
    assert!(c.sockets.is_empty());
    assert!(c.socket_tables().unwrap().is_empty());
    let w = weights_from_bandwidth(&c.measured_entries(), c.mask());
    assert_eq!((w[0], w[2]), (31, 1));
}

#[test]
fn bad_socket_tables_are_refused() {
    let mut c = two_sockets();
    for (bad, want) in [
        (vec![(64, 1)], "bad entry 64:1"),
        (vec![(0, 0)], "bad entry 0:0"),
        (vec![(0, 1), (0, 2)], "bad entry 0:2"),
        (vec![], "weighs no node"),
    ] {
        c.sockets[1].weights = bad;
        let e = format!("{:#}", c.socket_tables().unwrap_err());
        assert!(e.contains("socket 1") && e.contains(want), "{e}");
    }
}

proptest::proptest! {
    /// A socket's table is the flat weights' formula on the nodes it
    /// measured, 0 on every other node, and never 0 on a measured one.
    #[test]
    fn socket_table_is_the_flat_formula(
        bw in proptest::collection::vec((1u32..1_000_000, 1u32..1_000_000), 1..8),
        spread in 0u32..8,
    ) {
        let entries: Vec<(u32, u32, u32)> = bw
            .iter()
            .enumerate()
            .map(|(i, &(r, w))| (i as u32 * (spread + 1), r, w))
            .collect();
        let memory = entries.iter().fold(0u64, |m, e| m | 1 << e.0);
        let flat = weights_from_bandwidth(&entries, memory);
        let t = table_from_bandwidth(&entries, memory);
        for n in 0..64 {
            if memory >> n & 1 == 1 {
                proptest::prop_assert_eq!(t[n], flat[n]);
                proptest::prop_assert!(t[n] > 0);
            } else {
                proptest::prop_assert_eq!(t[n], 0);
            }
        }
    }
}
