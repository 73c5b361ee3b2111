use super::*;

#[test]
fn zoneinfo() {
    let s = "Node 0, zone      DMA\n  per-node stats\n      nr_free_pages 9\n  pages free     3840\n        min      33\n  pagesets\n    cpu: 0\n              count: 5\n              high:  12\n    cpu: 1\n              count: 7\n\
             Node 0, zone   Normal\n  pages free     100\n  pagesets\n    cpu: 0\n              count: 1\n\
             Node 1, zone   Normal\n  pages free     42\n";
    let m = parse_zoneinfo(s).unwrap();
    assert_eq!(m[&0], (3940, 13));
    assert_eq!(m[&1], (42, 0));
    assert!(parse_zoneinfo("  pages free 3\n").is_err());
}

#[test]
fn meminfo() {
    let s = "MemTotal:       100 kB\nSlab:            2000 kB\nSUnreclaim:      1500 kB\n";
    assert_eq!(meminfo_kb(s, "Slab"), Some(2000));
    assert_eq!(meminfo_kb(s, "SUnreclaim"), Some(1500));
    assert_eq!(meminfo_kb(s, "Nope"), None);
    let n = "Node 1 MemTotal:       3094744 kB\nNode 1 MemFree:        3000000 kB\n";
    assert_eq!(meminfo_kb(n, "MemFree"), Some(3_000_000));
}

#[test]
fn slabinfo() {
    let s = "slabinfo - version: 2.1\n# name            <active_objs> <num_objs> <objsize>\nkmalloc-64  100 128 64 64 1 : tunables 0 0 0 : slabdata 2 2 0\nfilp 10 20 256 16 1 : tunables 0 0 0 : slabdata 1 1 0\n";
    let m = parse_slabinfo(s);
    assert_eq!(m.len(), 2);
    assert_eq!(m["kmalloc-64"], (100, 128));
    let a = MemSnapshot {
        slab_objs: m.clone(),
        ..Default::default()
    };
    let mut b = a.clone();
    assert!(a.grown_caches(&b).is_empty());
    b.slab_objs.insert("filp".into(), (11, 20));
    b.slab_objs.insert("new".into(), (1, 1));
    assert_eq!(
        a.grown_caches(&b),
        vec!["filp".to_string(), "new".to_string()]
    );
}

#[test]
fn injected_dumps_are_not_reports() {
    let l: Vec<String> = [
        "FAULT_INJECTION: forcing a failure.",
        "name failslab, interval 1, probability 0, space 0, times 0",
        "CPU: 1 UID: 0 PID: 90 Comm: tk-test-lifecyc Tainted: G O N 7.3.4 #1",
        "Call Trace:",
        " <TASK>",
        " dump_stack_lvl+0x5d/0x80",
        "RIP: 0033:0x7f8d28fa6b99",
        " </TASK>",
        "tk-test-lifecyc: page allocation failure: order:0, mode:0xcc0(GFP_KERNEL)",
        "CPU: 1 UID: 0 PID: 90 Comm: tk-test-lifecyc",
        "RIP: 0033:0x7f8d28fa6b99",
        " </TASK>",
        "Mem-Info:",
        "RIP: 0010:tk_bad+0x1/0x2 [tierkit]",
        "WARNING: CPU: 0 PID: 1 at mm/x.c:1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let c = crash_lines(&l);
    assert_eq!(
        c,
        vec![
            "RIP: 0010:tk_bad+0x1/0x2 [tierkit]".to_string(),
            "WARNING: CPU: 0 PID: 1 at mm/x.c:1".to_string()
        ]
    );
    // A real report inside a dump still counts.
    let l2: Vec<String> = [
        "FAULT_INJECTION: forcing a failure.",
        "CPU: 1 UID: 0 PID: 90",
        "BUG: KASAN: slab-use-after-free in f+0x1/0x2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(crash_lines(&l2).len(), 1);
    // Without a fault report, a dump's RIP counts.
    assert_eq!(crash_lines(&["RIP: 0033:0x1".to_string()]).len(), 1);
}

#[test]
fn losses_and_drift() {
    let mut a = MemSnapshot::default();
    a.free_pages.insert(0, 1000);
    a.free_pages.insert(1, 500);
    a.sunreclaim_kb = 100;
    let mut b = a.clone();
    assert!(a.losses(&b, 0, 0).is_empty());
    b.free_pages.insert(1, 400);
    b.sunreclaim_kb = 300;
    assert!(a.losses(&b, 100, 200).is_empty());
    let l = a.losses(&b, 99, 199);
    assert_eq!(l.len(), 2, "{l:?}");
    assert!(l[0].starts_with("node 1: 100 free pages fewer"), "{l:?}");
    assert_eq!(a.drift(&b), (100, 200));
}

#[test]
fn holdings_parse() {
    let m = parse_holdings(
        "node allocated held gigantic\n0 1536 1024 1\n1 512 0 0\n",
        Some("file_pages 262144\nheld_pages 286168\n"),
    )
    .unwrap();
    assert_eq!(m["node0 held"], 1024);
    assert_eq!(m["node0 gigantic"], 1);
    assert_eq!(m["node1 held"], 0);
    assert_eq!(m["held_pages"], 286168);
    assert!(!m.contains_key("node0 allocated"));
    let old = parse_holdings("node allocated held\n0 5 2\n", None).unwrap();
    assert_eq!(old.len(), 1);
    assert!(parse_holdings("node a b\n0 1\n", None).is_err());
    let mut n = m.clone();
    n.insert("node1 held".into(), 3);
    assert_eq!(
        holdings_diff(&m, &n),
        vec!["node1 held Some(0) -> Some(3)".to_string()]
    );
}

#[test]
fn proc_modules() {
    let s = "tierkit 90112 1 - Live 0xffffffffc0000000\nother 1 0 - Loading 0x0\n";
    let m = parse_proc_modules(s, "tierkit").unwrap();
    assert_eq!((m.refcnt, m.state.as_str()), (1, "Live"));
    assert_eq!(parse_proc_modules(s, "other").unwrap().state, "Loading");
    assert_eq!(parse_proc_modules(s, "tier"), None);
}

#[test]
fn kmsg_faults() {
    let lines: Vec<String> = [
        "FAULT_INJECTION: forcing a failure.\\x0aname failslab, interval 1, probability 0, space 0, times 0",
        "something",
        "FAULT_INJECTION: forcing a failure.",
        "name fail_page_alloc, interval 1, probability 0, space 0, times 0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let f = injected_faults(&lines);
    assert_eq!(
        f,
        vec![
            ("failslab".to_string(), 0),
            ("fail_page_alloc".to_string(), 2)
        ]
    );
    assert!(crash_lines(&lines).is_empty());
    let bad = vec!["WARNING: CPU: 0 PID: 1 at mm/x.c:1".to_string()];
    assert_eq!(crash_lines(&bad).len(), 1);
}

#[test]
fn kunit_restore_value() {
    assert_eq!(KunitFilter::restore_value("(null)"), "*.*");
    assert_eq!(KunitFilter::restore_value("tierkit_wi*"), "tierkit_wi*");
}
