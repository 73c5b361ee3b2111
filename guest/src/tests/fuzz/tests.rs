use super::*;

#[test]
fn rng_is_fixed() {
    // These values pin the streams: a seed must mean the same calls in
    // every version of the fuzzer.
    let mut r = Rng::new(1);
    let v: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
    let mut r2 = Rng::new(1);
    assert_eq!(v, (0..3).map(|_| r2.next_u64()).collect::<Vec<_>>());
    let mut x = 0u64;
    assert_eq!(splitmix64(&mut x), 0xe220_a839_7b1d_cdaf);
    assert_ne!(worker_seed(7, 0, 0), worker_seed(7, 0, 1));
    assert_ne!(worker_seed(7, 1, 0), worker_seed(7, 0, 1));
    assert_eq!(worker_seed(7, 1, 2), worker_seed(7, 1, 2));
}

#[test]
fn cmds() {
    let mut r = Rng::new(3);
    let mut known = 0;
    for _ in 0..10_000 {
        let c = gen_cmd(&mut r);
        let ty = (c >> 8) & 0xff;
        assert!(!VFS_TYPES.contains(&ty), "{c:#x}");
        if KNOWN.contains(&c) {
            known += 1;
        }
    }
    assert!((3500..4700).contains(&known), "{known}");
    assert_eq!(ioc(3, 0xB9, 1, 80), TK_IOC_SET_POLICY);
}

#[test]
fn payload_classes() {
    let mut r = Rng::new(5);
    for _ in 0..200 {
        let (p, c) = weight_payload(&mut r);
        if c == Class::Valid {
            // A number 1..=255 (kstrtou8, base 0), or the empty write.
            let s = String::from_utf8(p).unwrap();
            let t = s.trim_end_matches('\n').trim_start_matches('+');
            let v = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                u32::from_str_radix(h, 16).unwrap()
            } else if t.len() > 1 && t.starts_with('0') {
                u32::from_str_radix(&t[1..], 8).unwrap()
            } else if t.is_empty() {
                assert_eq!(s, "");
                1
            } else {
                t.parse().unwrap()
            };
            assert!((1..=255).contains(&v), "{s:?}");
        }
    }
    let env = Env {
        mem_nodes: vec![0, 2],
        mem_mask: 0b101,
        nr_node_ids: 3,
        wi: PathBuf::from("/nonexistent"),
        online_cpus: 2,
        bandwidth_ok: true,
        movable: None,
    };
    for _ in 0..200 {
        let (p, c) = bandwidth_payload(&mut r, &env);
        let s = String::from_utf8_lossy(&p).to_string();
        if c == Class::Valid {
            for l in s.lines() {
                let n: u32 = l.split_whitespace().next().unwrap().parse().unwrap();
                assert!(n == 0 || n == 2, "{s:?}");
            }
        }
        // Node 1 is possible without memory: never named.
        assert!(
            !s.lines()
                .any(|l| l.starts_with("1 ") || l.starts_with("1\t")),
            "{s:?}"
        );
    }
}

#[test]
fn structs_round_trip() {
    let mut buf = vec![0u8; 100];
    let p = TkPolicy {
        mode: 1,
        flags: 2,
        nodemask: 3,
        weights: [4; 64],
    };
    put(&mut buf, &p);
    let q: TkPolicy = get(&buf);
    assert_eq!((q.mode, q.flags, q.nodemask, q.weights[63]), (1, 2, 3, 4));
    let short: TkBulk = get(&buf[..4]);
    assert_eq!(short.nr_pages, 1);
}

#[test]
fn races_dealt_once_each() {
    let mut env = Env {
        mem_nodes: vec![0, 2],
        mem_mask: 0b101,
        nr_node_ids: 3,
        wi: PathBuf::from("/nonexistent"),
        online_cpus: 2,
        bandwidth_ok: true,
        movable: None,
    };
    // Without a movable block, no offline race is owed.
    assert_eq!(Race::here(&env).len(), RACES.len() - 2);
    env.movable = Some(2);
    for n in [1usize, 2, 4, 7, 9] {
        let mut all: Vec<Race> = (0..n).flat_map(|i| Race::dealt(&env, i, n)).collect();
        assert_eq!(all.len(), RACES.len(), "{n} workers");
        for r in RACES {
            all.retain(|&x| x != r);
        }
        assert!(all.is_empty());
    }
}
