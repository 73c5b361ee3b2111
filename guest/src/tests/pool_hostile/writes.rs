//! Steps 1 and 2: odd writes to the pool file, and an open pool file
//! pinning the module.

use super::*;

/// Step 1.
pub fn odd_writes(r: &mut Report, topo: &Topology, nid: u32) {
    let page = crate::linux::sys::PAGE_SIZE;
    refused(
        r,
        "a 1 MiB write of valid lines",
        format!("{nid} 0\n").repeat((1 << 20) / 4).as_bytes(),
        libc::EINVAL,
    );
    let mut over = format!("{nid} 0\n").into_bytes();
    over.resize(page + 1, b' ');
    refused(
        r,
        "a valid line padded to a page plus one byte",
        &over,
        libc::EINVAL,
    );
    // `NID 1`, blanks, then `NID 0`: exactly a page, the last line whole.
    let mut exact = format!("{nid} 1\n").into_bytes();
    let tail = format!("\n{nid} 0\n").into_bytes();
    exact.resize(page - tail.len(), b' ');
    exact.extend_from_slice(&tail);
    taken(
        r,
        "a write of exactly one page (`NID 1`, blanks, `NID 0`): taken whole, the last line wins",
        nid,
        &exact,
        0,
        None,
    );
    refused(
        r,
        "a NUL byte after a valid line",
        format!("{nid} 1\0").as_bytes(),
        libc::EINVAL,
    );
    refused(
        r,
        "a NUL byte inside a number",
        format!("{nid} \x001\n").as_bytes(),
        libc::EINVAL,
    );
    refused(r, "only NUL bytes", b"\0\0\0\0", libc::EINVAL);
    refused(
        r,
        "a valid line, then a line of NULs",
        format!("{nid} 1\n\0\0\n").as_bytes(),
        libc::EINVAL,
    );
    refused(r, "node 4294967295", b"4294967295 1\n", libc::EINVAL);
    refused(
        r,
        "node 4294967296 (above u32)",
        b"4294967296 1\n",
        libc::EINVAL,
    );
    refused(r, "node 1024", b"1024 1\n", libc::EINVAL);
    let past = topo.online.iter().max().map_or(1, |m| m + 1);
    refused(
        r,
        &format!("node {past} (past the online nodes)"),
        format!("{past} 1\n").as_bytes(),
        libc::EINVAL,
    );
    if let Some(&m) = topo.online.iter().find(|n| !topo.memory.contains(n)) {
        refused(
            r,
            &format!("memoryless node {m}, then a good line"),
            format!("{m} 0\n{nid} 1\n").as_bytes(),
            libc::EINVAL,
        );
    }
    taken(
        r,
        "`NID 1` then `NID 0` in one write: the later line wins",
        nid,
        format!("{nid} 1\n{nid} 0\n").as_bytes(),
        0,
        None,
    );
    taken(
        r,
        "`NID 0`, `NID 1`, `NID 0` in one write: the last wins",
        nid,
        format!("{nid} 0\n{nid} 1\n{nid} 0\n").as_bytes(),
        0,
        None,
    );
    let mut many = String::new();
    for i in 0..400 {
        many.push_str(&format!("{nid} {}\n", i % 2));
    }
    many.push_str(&format!("{nid} 1\n"));
    taken(
        r,
        "401 lines for the node in one write (under a page): the last (`NID 1`) wins",
        nid,
        many.as_bytes(),
        1,
        None,
    );
    taken(
        r,
        "pwrite(2) at offset 12345: taken whole",
        nid,
        format!("{nid} 1\n").as_bytes(),
        1,
        Some(12345),
    );
    let res = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .open(POOL_PATH)
            .map_err(|e| errno_name(&e))?;
        f.seek(SeekFrom::Start(1 << 40))
            .map_err(|e| format!("lseek: {}", errno_name(&e)))?;
        f.write_all(format!("{nid} 1\n").as_bytes())
            .map_err(|e| format!("write: {}", errno_name(&e)))?;
        match state(nid)? {
            (1, _) => Ok(()),
            (t, rd) => Err(format!("reads `{nid} {t} {rd}`")),
        }
    })();
    let _ = pool::set_target(nid, 0);
    r.check("lseek to 1 TiB, then write: taken whole", res);
    r.check(
        "an empty write returns 0 and changes nothing",
        match pool::write_bytes(b"") {
            Ok(0) => Ok(()),
            Ok(n) => Err(format!("returned {n}")),
            Err(e) => Err(errno_name(&e)),
        },
    );
    let res = state(nid).and_then(|s| match s {
        (0, _) => pool::wait_for(nid, 0, 0, Duration::from_secs(5)).map(|_| ()),
        (t, rd) => Err(format!("`{nid} {t} {rd}`")),
    });
    r.check("after the odd writes the node is back to `NID 0 0`", res);
}

/// Step 2.
pub fn open_fd_pins(r: &mut Report, nid: u32) {
    let f = match OpenOptions::new().write(true).open(POOL_PATH) {
        Ok(f) => f,
        Err(e) => {
            r.fail("open the pool file", errno_name(&e));
            return;
        }
    };
    r.check(
        "rmmod with the pool file open: EWOULDBLOCK (the fd pins the module)",
        expect_errno(faults::unload_tierkit(), libc::EWOULDBLOCK),
    );
    r.check(
        "the open fd still writes after the refused rmmod",
        (&f).write(format!("{nid} 0\n").as_bytes())
            .map(|_| ())
            .map_err(|e| errno_name(&e)),
    );
    drop(f);
    r.check(
        "tierkit still loaded and Live after the fd is closed",
        match faults::module_line(faults::TIERKIT_MODULE) {
            Some(m) if m.state == "Live" => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
}
