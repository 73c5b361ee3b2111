use super::*;

#[test]
fn limits_parse() {
    let l =
        parse_limits("file_pages 262144\nfile_gigantic 64\nglobal_pages 2000000\nheld_pages 0\n")
            .unwrap();
    assert_eq!(limit(&l, "file_pages"), Some(262144));
    assert_eq!(limit(&l, "held_pages"), Some(0));
    assert_eq!(limit(&l, "nope"), None);
    assert!(parse_limits("file_pages\n").is_err());
    assert!(parse_limits("file_pages x\n").is_err());
}

#[test]
fn meminfo_parse() {
    let s = "Node 0 MemTotal:       8169644 kB\nNode 0 MemFree:        7000000 kB\n";
    assert_eq!(parse_node_meminfo(s, "MemFree"), Some(7_000_000));
    assert_eq!(parse_node_meminfo(s, "MemTotal"), Some(8_169_644));
    assert_eq!(parse_node_meminfo(s, "Shmem"), None);
}

#[test]
fn zoneinfo_pcp() {
    let s = "Node 0, zone      DMA\n  pages free     3840\n  pagesets\n    cpu: 0\n              count: 5\n              high:  6\n    cpu: 1\n              count: 7\n\
             Node 0, zone   Normal\n  pagesets\n    cpu: 0\n              count: 100\n\
             Node 1, zone   Normal\n  pagesets\n    cpu: 0\n              count: 1000\n";
    assert_eq!(parse_zoneinfo_pcp_pages(s, 0), 112);
    assert_eq!(parse_zoneinfo_pcp_pages(s, 1), 1000);
    assert_eq!(parse_zoneinfo_pcp_pages(s, 2), 0);
    if std::path::Path::new("/sys/devices/system/node/node0/meminfo").exists() {
        assert!(node_free_kb(0).unwrap() >= node_memfree_kb(0).unwrap());
    }
}

#[test]
fn smaps_parse() {
    let s = "7f0000000000-7f0000004000 rw-s 00000000 00:05 12 /dev/tierkit\n\
             Size:                 16 kB\n\
             VmFlags: rd wr sh mr mw me ms dd mm \n\
             7f0000004000-7f0000005000 rw-p 00000000 00:00 0 \n\
             VmFlags: rd wr mr mw me ac \n";
    let f = parse_smaps_vmflags(s, 0x7f00_0000_1000).unwrap();
    assert!(f.iter().any(|x| x == "dd"));
    let g = parse_smaps_vmflags(s, 0x7f00_0000_4000).unwrap();
    assert!(!g.iter().any(|x| x == "dd"));
    assert_eq!(parse_smaps_vmflags(s, 0x1000), None);
}

#[test]
fn fork_and_signals() {
    assert_eq!(fork_run(|| 7).unwrap(), Exit::Code(7));
    let e = fork_run(|| {
        // SAFETY: deliberately faults in the child.
        unsafe { std::ptr::null_mut::<u8>().write_volatile(1) };
        0
    })
    .unwrap();
    assert_eq!(e, Exit::Signal(libc::SIGSEGV));
}

#[test]
fn fork_within_kills_a_child_that_runs_past_the_bound() {
    let t0 = std::time::Instant::now();
    let e = fork_run_within(std::time::Duration::from_millis(200), || loop {
        sleep_ms(1000);
    })
    .unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    assert!(t0.elapsed() < std::time::Duration::from_secs(5));
    let quick = fork_run_within(std::time::Duration::from_secs(30), || 4).unwrap();
    assert_eq!(quick, Exit::Code(4));
}

#[test]
fn synced_kill() {
    let mut s = spawn_synced(|ready| {
        ready();
        loop {
            sleep_ms(1000);
        }
    })
    .unwrap();
    assert_eq!(s.poll().unwrap(), None);
    let (e, dt) = s.kill_and_reap().unwrap();
    assert_eq!(e, Exit::Signal(libc::SIGKILL));
    assert!(dt < 5_000_000_000);
    assert!(spawn_synced(|_| 3).is_err());
}

#[test]
fn pattern_roundtrip_and_proc_mem() {
    let p = mmap_raw(
        2 * PAGE_SIZE,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
    )
    .unwrap();
    // SAFETY: our fresh mapping.
    unsafe {
        fill_pattern(p, 0, 2, 5);
        assert!(check_pattern(p, 0, 2, 5).is_ok());
        assert!(check_pattern(p, 0, 2, 6).is_err());
    }
    let mut b = [0u8; 16];
    proc_mem_read(p as usize, &mut b).unwrap();
    assert_eq!(
        u64::from_ne_bytes(b[..8].try_into().unwrap()),
        pattern_word(5, 0, 0)
    );
    proc_mem_write(p as usize, &[0u8; 8]).unwrap();
    // SAFETY: in bounds.
    assert_eq!(unsafe { (p as *const u64).read_volatile() }, 0);
    let v = vmsplice_read(p as usize + PAGE_SIZE, PAGE_SIZE).unwrap();
    assert_eq!(v.len(), PAGE_SIZE);
    assert_eq!(
        u64::from_ne_bytes(v[..8].try_into().unwrap()),
        pattern_word(5, 1, 0)
    );
    assert!(pagemap_pfn(p as usize).unwrap().is_some());
    assert!(smaps_vmflags(p as usize).is_some());
    // SAFETY: ours, not used afterwards.
    unsafe { munmap(p, 2 * PAGE_SIZE).unwrap() };
}
