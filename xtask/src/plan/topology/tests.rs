//! Host tests of the topologies: the table's defaults, options, QEMU
//! arguments, HMAT figures and CXL interleave.

use super::qemu_args::mib_size;
use super::*;

#[test]
fn every_topology_of_the_table_builds_with_its_defaults() {
    for t in &TOPOLOGIES {
        let k = TopologyKind::by_name(t.name).unwrap();
        assert_eq!(k.spec().name, t.name);
        let o = TopologyOpts {
            cpus: 2 * t.cpu_nodes,
            dram_gib: t.dram_gib,
            ..TopologyOpts::defaults(k)
        };
        let topo = Topology::new(&o).unwrap();
        assert_eq!(topo.cpu_nodes.len() as u32, t.cpu_nodes, "{}", t.name);
        assert_eq!(topo.mem_nodes.len() as u32, t.mem_nodes, "{}", t.name);
        assert_eq!(topo.cxl.is_empty(), !t.cxl, "{}", t.name);
        assert!(!topo.qemu_args().is_empty());
    }
    assert_eq!(TopologyKind::by_name("nope"), None);
    assert_ne!(TopologyKind::NUMA, TopologyKind::CXL);
}

fn opts(kind: TopologyKind, cpus: u32) -> TopologyOpts {
    TopologyOpts {
        cpus,
        dram_gib: 4,
        ..TopologyOpts::defaults(kind)
    }
}

fn has(args: &[String], flag: &str, val: &str) -> bool {
    args.windows(2).any(|w| w[0] == flag && w[1] == val)
}

/// Asserts that `args` has every `(flag, value)` pair, naming the
/// missing ones.
#[track_caller]
fn assert_has(args: &[String], want: &[(&str, &str)]) {
    let missing: Vec<_> = want.iter().filter(|(f, v)| !has(args, f, v)).collect();
    assert!(missing.is_empty(), "missing {missing:?} in {args:?}");
}

#[test]
fn default_numa_topology() {
    let t = Topology::new(&opts(TopologyKind::NUMA, 2)).unwrap();
    let a = t.qemu_args();
    assert_has(
        &a,
        &[
            ("-machine", "q35,hmat=on"),
            ("-smp", "2,sockets=1,cores=2,threads=1"),
            ("-m", "7G"),
            ("-object", "memory-backend-ram,id=m0,size=4G"),
            ("-object", "memory-backend-ram,id=m1,size=3G"),
            ("-numa", "node,nodeid=0,cpus=0-1,memdev=m0"),
            ("-numa", "node,nodeid=1,memdev=m1,initiator=0"),
            ("-numa", "dist,src=0,dst=1,val=25"),
            ("-numa", "hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-latency,latency=100"),
            ("-numa", "hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-bandwidth,bandwidth=200G"),
            ("-numa", "hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-latency,latency=250"),
            ("-numa", "hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-bandwidth,bandwidth=50G"),
        ],
    );
    // 2 backends, 2 nodes, 1 distance, 2x2 hmat-lb entries.
    assert_eq!(a.iter().filter(|x| *x == "-numa").count(), 2 + 1 + 4);
}

#[test]
fn one_cpu() {
    let t = Topology::new(&opts(TopologyKind::NUMA, 1)).unwrap();
    assert!(has(
        &t.qemu_args(),
        "-numa",
        "node,nodeid=0,cpus=0,memdev=m0"
    ));
}

#[test]
fn numa2_has_two_cpu_nodes_and_a_memory_node() {
    let t = Topology::new(&opts(TopologyKind::NUMA2, 2)).unwrap();
    let a = t.qemu_args();
    assert_has(
        &a,
        &[
            ("-m", "11G"),
            ("-smp", "2,sockets=2,cores=1,threads=1"),
            ("-numa", "node,nodeid=0,cpus=0,memdev=m0"),
            ("-numa", "node,nodeid=1,cpus=1,memdev=m1"),
            ("-numa", "node,nodeid=2,memdev=m2,initiator=0"),
            ("-numa", "dist,src=0,dst=1,val=20"),
            ("-numa", "dist,src=0,dst=2,val=25"),
            ("-numa", "dist,src=1,dst=2,val=30"),
            ("-numa", "hmat-lb,initiator=1,target=0,hierarchy=memory,data-type=access-latency,latency=150"),
            ("-numa", "hmat-lb,initiator=1,target=2,hierarchy=memory,data-type=access-bandwidth,bandwidth=40G"),
        ],
    );
    assert_eq!(t.distance(2, 0), 25);
    assert!(Topology::new(&opts(TopologyKind::NUMA2, 3)).is_err());
}

#[test]
fn cxl_default_is_one_4g_device() {
    let t = Topology::new(&opts(TopologyKind::CXL, 2)).unwrap();
    let a = t.qemu_args();
    assert_has(
        &a,
        &[
            ("-machine", "q35,hmat=on,cxl=on"),
            ("-m", "4G,maxmem=8G,slots=4"),
            ("-object", "memory-backend-ram,id=m0,size=4G"),
            ("-numa", "node,nodeid=0,cpus=0-1,memdev=m0"),
        ],
    );
    // The generic port's proximity domain: no memory, no CPUs.
    assert_has(
        &a,
        &[
            ("-numa", "node,nodeid=1"),
            ("-object", "memory-backend-ram,id=cxl-mem0,share=on,size=4G"),
            ("-device", "pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1"),
            (
                "-object",
                "acpi-generic-port,id=cxl-gp0,pci-bus=cxl.1,node=1",
            ),
            (
                "-device",
                "cxl-rp,port=0,bus=cxl.1,id=cxl_rp0,chassis=0,slot=2",
            ),
            (
                "-device",
                "cxl-type3,bus=cxl_rp0,volatile-memdev=cxl-mem0,id=cxl-vmem0,sn=1",
            ),
            ("-M", "cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G"),
        ],
    );
    // HMAT: DRAM 100 ns / 20 GB/s, the generic port 250 ns / 10 GB/s.
    assert_has(
        &a,
        &[
            ("-numa", "hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-bandwidth,bandwidth=20G"),
            ("-numa", "hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-latency,latency=250"),
            ("-numa", "hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-bandwidth,bandwidth=10G"),
        ],
    );
    // No SLIT: the CXL node the kernel makes is not a QEMU node.
    assert!(!a.iter().any(|x| x.starts_with("dist,")));
    // 2 nodes + 2x2 hmat-lb entries.
    assert_eq!(a.iter().filter(|x| *x == "-numa").count(), 2 + 4);
    assert_eq!(t.cxl_param().as_deref(), Some("4096"));
    assert!(t.describe().contains("cxl0: 4 GiB"), "{}", t.describe());
}

#[test]
fn cxl_two_devices_get_their_own_bridge_port_window_and_node() {
    let mut o = opts(TopologyKind::CXL, 2);
    o.dram_gib = 6;
    o.cxl_devs = vec![
        CxlDevice::parse("4G").unwrap(),
        CxlDevice::parse("2G:300:5G").unwrap(),
    ];
    o.dram_perf = Some(Perf::parse("90ns:40G").unwrap());
    let t = Topology::new(&o).unwrap();
    let a = t.qemu_args();
    assert_has(
        &a,
        &[
            ("-m", "6G,maxmem=12G,slots=4"),
            ("-numa", "node,nodeid=1"),
            ("-numa", "node,nodeid=2"),
            ("-device", "pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1"),
            ("-device", "pxb-cxl,bus_nr=28,bus=pcie.0,id=cxl.2"),
            (
                "-object",
                "acpi-generic-port,id=cxl-gp1,pci-bus=cxl.2,node=2",
            ),
            (
                "-device",
                "cxl-rp,port=0,bus=cxl.2,id=cxl_rp1,chassis=0,slot=3",
            ),
            (
                "-device",
                "cxl-type3,bus=cxl_rp1,volatile-memdev=cxl-mem1,id=cxl-vmem1,sn=2",
            ),
            ("-object", "memory-backend-ram,id=cxl-mem1,share=on,size=2G"),
        ],
    );
    // One -M with both windows, each targeting its own host bridge.
    assert!(has(
        &a,
        "-M",
        "cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G,cxl-fmw.1.targets.0=cxl.2,cxl-fmw.1.size=2G"
    ));
    assert_eq!(a.iter().filter(|x| *x == "-M").count(), 1);
    assert_has(
        &a,
        &[
            ("-numa", "hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-latency,latency=90"),
            ("-numa", "hmat-lb,initiator=0,target=2,hierarchy=memory,data-type=access-latency,latency=300"),
            ("-numa", "hmat-lb,initiator=0,target=2,hierarchy=memory,data-type=access-bandwidth,bandwidth=5G"),
        ],
    );
    assert_eq!(t.cxl_param().as_deref(), Some("4096,2048"));
    // Device ids are unique.
    let ids: Vec<&String> = a.iter().filter(|x| x.contains("id=cxl")).collect();
    let mut u = ids.clone();
    u.sort();
    u.dedup();
    assert_eq!(u.len(), ids.len());
}

#[test]
fn cxl_windows_and_specs() {
    let d = CxlDevice::parse("3G").unwrap();
    assert_eq!(d.size_mib(), 3072);
    assert_eq!(d.perf, CXL_DEV);
    let w = |mib: u64| mib.div_ceil(CXL_WINDOW_ALIGN_MIB) * CXL_WINDOW_ALIGN_MIB;
    assert_eq!(w(1000), 1024);
    assert_eq!(mib_size(1280), "1280M");
    assert_eq!(mib_size(2048), "2G");
    assert!(CxlDevice::parse("512M").is_err());
    assert!(CxlDevice::parse("2G:300").is_err());
    assert!(CxlDevice::parse("2G:0:5G").is_err());
    let p = Perf::parse("250ns:10GB/s").unwrap();
    assert_eq!((p.latency_ns, p.bandwidth_gbs), (250, 10));
    assert!(Perf::parse("fast").is_err());
    // --cxl-dev only with --topology cxl, and not too many.
    let mut o = opts(TopologyKind::NUMA, 2);
    o.cxl_devs = vec![d.clone()];
    assert!(Topology::new(&o).is_err());
    let mut o = opts(TopologyKind::CXL, 2);
    o.cxl_devs = vec![d; CXL_MAX_DEVICES + 1];
    assert!(Topology::new(&o).is_err());
    // numa keeps its figures and has no CXL parameter.
    let t = Topology::new(&opts(TopologyKind::NUMA, 2)).unwrap();
    assert_eq!(t.dram_perf, LOCAL_DRAM);
    assert_eq!(t.cxl_param(), None);
}

#[test]
fn cxl_interleave_two_devices_behind_one_host_bridge() {
    for (spec, gran) in [("2", 256), ("2:256", 256), ("2:4096", 4096), ("2:4K", 4096)] {
        let mut o = opts(TopologyKind::CXL, 2);
        o.cxl_interleave = Some(CxlInterleave::parse(spec).unwrap());
        let t = Topology::new(&o).unwrap();
        let a = t.qemu_args();
        // Default: two 2 GiB devices, one 4 GiB region.
        assert_eq!(t.cxl.len(), 2);
        assert!(t.cxl.iter().all(|d| d.size_gib == 2 && d.perf == CXL_DEV));
        assert_eq!(t.cxl_region_gib(), vec![4]);
        assert!(has(&a, "-m", "4G,maxmem=8G,slots=4"));
        // One host bridge, one generic port (node 1), one window.
        assert_eq!(a.iter().filter(|x| x.starts_with("pxb-cxl,")).count(), 1);
        assert!(has(&a, "-device", "pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1"));
        assert!(has(
            &a,
            "-object",
            "acpi-generic-port,id=cxl-gp0,pci-bus=cxl.1,node=1"
        ));
        assert_eq!(
            a.iter()
                .filter(|x| x.starts_with("acpi-generic-port,"))
                .count(),
            1
        );
        assert!(has(&a, "-numa", "node,nodeid=1"));
        assert!(!has(&a, "-numa", "node,nodeid=2"));
        // Two root ports of that bridge, port numbers 0 and 1, each with
        // its device and backend.
        for i in 0..2 {
            assert!(has(
                &a,
                "-device",
                &format!(
                    "cxl-rp,port={i},bus=cxl.1,id=cxl_rp{i},chassis=0,slot={}",
                    i + 2
                )
            ));
            assert!(has(
                &a,
                "-device",
                &format!(
                    "cxl-type3,bus=cxl_rp{i},volatile-memdev=cxl-mem{i},id=cxl-vmem{i},sn={}",
                    i + 1
                )
            ));
            assert!(has(
                &a,
                "-object",
                &format!("memory-backend-ram,id=cxl-mem{i},share=on,size=2G")
            ));
        }
        // One window of the region's size, with its granularity.
        assert!(
            has(
                &a,
                "-M",
                &format!(
                    "cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G,cxl-fmw.0.interleave-granularity={gran}"
                )
            ),
            "{a:?}"
        );
        // HMAT for the one generic port; 2 nodes + 2x2 entries.
        assert!(has(
            &a,
            "-numa",
            "hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-bandwidth,bandwidth=10G"
        ));
        assert_eq!(a.iter().filter(|x| *x == "-numa").count(), 2 + 4);
        assert_eq!(
            t.cxl_param().as_deref(),
            Some(format!("4096:2:{gran}").as_str())
        );
        let d = t.describe();
        assert!(d.contains("root port 1 of host bridge 0"), "{d}");
        assert!(d.contains(&format!("granularity {gran} bytes")), "{d}");
    }
}

#[test]
fn cxl_interleave_groups_given_devices() {
    let mut o = opts(TopologyKind::CXL, 2);
    o.cxl_interleave = Some(CxlInterleave::parse("2:4096").unwrap());
    o.cxl_devs = ["4G", "4G", "1G:300:5G", "1G:300:5G"]
        .iter()
        .map(|s| CxlDevice::parse(s).unwrap())
        .collect();
    let t = Topology::new(&o).unwrap();
    let a = t.qemu_args();
    assert_eq!(t.cxl_region_gib(), vec![8, 2]);
    assert_has(
        &a,
        &[
            ("-device", "pxb-cxl,bus_nr=28,bus=pcie.0,id=cxl.2"),
            ("-device", "cxl-rp,port=1,bus=cxl.2,id=cxl_rp3,chassis=0,slot=5"),
            ("-M", "cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=8G,cxl-fmw.0.interleave-granularity=4096,cxl-fmw.1.targets.0=cxl.2,cxl-fmw.1.size=2G,cxl-fmw.1.interleave-granularity=4096"),
        ],
    );
    // The second bridge's generic port (node 2) has the second pair's figures.
    assert!(has(
        &a,
        "-numa",
        "hmat-lb,initiator=0,target=2,hierarchy=memory,data-type=access-latency,latency=300"
    ));
    assert_eq!(t.cxl_param().as_deref(), Some("8192:2:4096,2048:2:4096"));
    let ids: Vec<&String> = a.iter().filter(|x| x.contains("id=cxl")).collect();
    let mut u = ids.clone();
    u.sort();
    u.dedup();
    assert_eq!(u.len(), ids.len());
    // An odd count, or a pair that differs, is refused.
    o.cxl_devs.pop();
    assert!(Topology::new(&o).is_err());
    o.cxl_devs = ["4G", "2G"]
        .iter()
        .map(|s| CxlDevice::parse(s).unwrap())
        .collect();
    let e = Topology::new(&o).unwrap_err().to_string();
    assert!(e.contains("differ"), "{e}");
    // Only with --topology cxl.
    let mut n = opts(TopologyKind::NUMA, 2);
    n.cxl_interleave = Some(CxlInterleave::parse("2").unwrap());
    assert!(Topology::new(&n).is_err());
    // 1-way is today's layout: no granularity in the window.
    let mut one = opts(TopologyKind::CXL, 2);
    one.cxl_interleave = Some(CxlInterleave::parse("1").unwrap());
    let t1 = Topology::new(&one).unwrap();
    assert!(has(
        &t1.qemu_args(),
        "-M",
        "cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G"
    ));
    assert_eq!(t1.cxl_param().as_deref(), Some("4096"));
}

#[test]
fn cxl_interleave_specs() {
    let p = |s| CxlInterleave::parse(s);
    assert_eq!(
        p("2").unwrap(),
        CxlInterleave {
            ways: 2,
            granularity: 256
        }
    );
    assert_eq!(p("2:16k").unwrap().granularity, 16384);
    assert_eq!(p("1").unwrap(), CxlInterleave::NONE);
    for bad in ["0", "3", "4", "x", "2:128", "2:300", "2:32K", "2:", "2:abc"] {
        assert!(p(bad).is_err(), "{bad}");
    }
}

#[test]
fn socket2_has_a_memory_node_per_socket_and_local_remote_hmat() {
    let o = TopologyOpts {
        slow_gib: 2,
        ..TopologyOpts::defaults(TopologyKind::SOCKET2)
    };
    let t = Topology::new(&o).unwrap();
    assert_eq!(t.cpu_nodes.len(), 2);
    assert_eq!(t.mem_nodes[0].initiator, 0);
    assert_eq!(t.mem_nodes[1].initiator, 1);
    let bw = |i, n| t.perf(i, n).bandwidth_gbs;
    // The RFC's figures: local DRAM 300, local CXL 100; remote 150, 50.
    assert_eq!(
        [bw(0, 0), bw(0, 2), bw(0, 1), bw(0, 3)],
        [300, 100, 150, 50]
    );
    assert_eq!(
        [bw(1, 1), bw(1, 3), bw(1, 0), bw(1, 2)],
        [300, 100, 150, 50]
    );
    let a = t.qemu_args();
    assert!(has(&a, "-smp", "2,sockets=2,cores=1,threads=1"), "{a:?}");
    assert!(
        has(&a, "-numa", "node,nodeid=3,memdev=m3,initiator=1"),
        "{a:?}"
    );
    assert!(has(
        &a,
        "-numa",
        "hmat-lb,initiator=1,target=2,hierarchy=memory,data-type=access-bandwidth,bandwidth=50G"
    ));
    assert_eq!(t.distance(1, 3), 25);
    assert_eq!(t.distance(0, 3), 30);
    // numa and numa2 keep their single memory-only node near node 0.
    for k in [TopologyKind::NUMA, TopologyKind::NUMA2] {
        let t = Topology::new(&opts(k, 2)).unwrap();
        assert_eq!(t.mem_nodes.len(), 1);
        assert_eq!(t.mem_nodes[0].initiator, 0);
    }
    let t = Topology::new(&opts(TopologyKind::NUMA2, 2)).unwrap();
    assert_eq!([t.perf(0, 2), t.perf(1, 2)], [SLOW_MEM, SLOW_MEM_REMOTE]);
    assert_eq!(t.perf(1, 0), REMOTE_DRAM);
}

/// On a kernel with ACPI memory hotplug, socket2's last memory-only node
/// (node 3, the highest node, so SRAT's hot-pluggable range is its
/// domain) is a DIMM: no boot memory on its `-numa node`, a `pc-dimm` of
/// it, `-m` with room for it, and its HMAT figures as before. numa and cxl
/// have none, with or without the kernel's support.
#[test]
fn socket2_last_memory_node_is_a_dimm_where_the_kernel_hot_adds() {
    let o = TopologyOpts {
        slow_gib: 2,
        dram_gib: 2,
        mem_hotplug: true,
        ..TopologyOpts::defaults(TopologyKind::SOCKET2)
    };
    let t = Topology::new(&o).unwrap();
    assert_eq!(
        t.mem_nodes.iter().map(|n| n.dimm).collect::<Vec<_>>(),
        [false, true]
    );
    assert_eq!(
        (t.boot_mem_gib(), t.dimm_gib(), t.total_mem_gib()),
        (6, 2, 8)
    );
    let a = t.qemu_args();
    assert_has(
        &a,
        &[
            ("-m", "6G,maxmem=8G,slots=4"),
            ("-numa", "node,nodeid=2,memdev=m2,initiator=0"),
            ("-numa", "node,nodeid=3,initiator=1"),
            ("-object", "memory-backend-ram,id=m3,size=2G"),
            ("-device", "pc-dimm,id=dimm3,memdev=m3,node=3"),
            (
                "-numa",
                "hmat-lb,initiator=1,target=3,hierarchy=memory,data-type=access-bandwidth,bandwidth=100G",
            ),
            (
                "-numa",
                "hmat-lb,initiator=0,target=3,hierarchy=memory,data-type=access-latency,latency=300",
            ),
        ],
    );
    assert!(!has(&a, "-numa", "node,nodeid=3,memdev=m3,initiator=1"));
    assert!(t.describe().contains("node3: 2 GiB memory only"));
    assert!(t.describe().contains("a hot-pluggable DIMM"));
    // Without the kernel's support: boot memory, as before.
    let t = Topology::new(&TopologyOpts {
        mem_hotplug: false,
        ..o.clone()
    })
    .unwrap();
    assert!(t.mem_nodes.iter().all(|n| !n.dimm));
    assert!(has(&t.qemu_args(), "-m", "8G"));
    for k in [TopologyKind::NUMA, TopologyKind::NUMA2, TopologyKind::CXL] {
        let t = Topology::new(&TopologyOpts {
            mem_hotplug: true,
            ..opts(k, 2)
        })
        .unwrap();
        assert_eq!(t.dimm_gib(), 0, "{k}");
        assert!(
            !t.qemu_args().iter().any(|x| x.starts_with("pc-dimm")),
            "{k}"
        );
    }
}
