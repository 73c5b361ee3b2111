//! A mapping seen and copied through the kernel rather than by touching
//! it: `/proc/self/pagemap`, `/proc/self/smaps`, `/proc/self/mem`,
//! `vmsplice`, `process_vm_readv`, and whole reads and writes of an fd.

use super::*;

/// The pagemap entry of `addr` in this process: `Some(pfn)` if present
/// (the pfn reads 0 without CAP_SYS_ADMIN), `None` if not present.
pub fn pagemap_pfn(addr: usize) -> io::Result<Option<u64>> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open("/proc/self/pagemap")?;
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, (addr / PAGE_SIZE * 8) as u64)?;
    let e = u64::from_le_bytes(b);
    Ok((e >> 63 == 1).then_some(e & ((1 << 55) - 1)))
}

/// The `VmFlags` of the mapping that contains `addr`, from the text of an
/// smaps file.
pub fn parse_smaps_vmflags(smaps: &str, addr: usize) -> Option<Vec<String>> {
    let mut inside = false;
    for l in smaps.lines() {
        let first = l.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                inside = a <= addr && addr < b;
                continue;
            }
        }
        if inside {
            if let Some(f) = l.strip_prefix("VmFlags:") {
                return Some(f.split_whitespace().map(String::from).collect());
            }
        }
    }
    None
}

/// [`parse_smaps_vmflags`] on `/proc/self/smaps`.
pub fn smaps_vmflags(addr: usize) -> Option<Vec<String>> {
    parse_smaps_vmflags(&std::fs::read_to_string("/proc/self/smaps").ok()?, addr)
}

/// `pread` of `/proc/self/mem` at `addr` (the kernel goes through
/// `access_remote_vm()`, i.e. get_user_pages_remote() with FOLL_FORCE).
pub fn proc_mem_read(addr: usize, buf: &mut [u8]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open("/proc/self/mem")?;
    f.read_exact_at(buf, addr as u64)
}

/// `pwrite` of `/proc/self/mem` at `addr` (FOLL_FORCE | FOLL_WRITE).
pub fn proc_mem_write(addr: usize, buf: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/mem")?;
    f.write_all_at(buf, addr as u64)
}

/// `vmsplice(2)` of `[addr, addr + len)` into a pipe (fs/splice.c
/// `vmsplice_to_pipe` takes the pages with `iov_iter_extract_pages()`,
/// i.e. get_user_pages), then reads them back out of the pipe. `len` at
/// most 64 KiB (the default pipe size).
pub fn vmsplice_read(addr: usize, len: usize) -> io::Result<Vec<u8>> {
    let p = Pipe::new()?;
    let iov = libc::iovec {
        iov_base: addr as *mut c_void,
        iov_len: len,
    };
    // SAFETY: the kernel reads `len` bytes at `addr` (the caller's
    // mapping) into the pipe.
    let n = cvt(unsafe { libc::vmsplice(p.wr, &iov, 1, 0) } as libc::c_long)? as usize;
    let mut out = vec![0u8; n];
    let mut got = 0;
    while got < n {
        // SAFETY: writes at most `n - got` bytes into `out`.
        let r = unsafe { libc::read(p.rd, out[got..].as_mut_ptr() as *mut c_void, n - got) };
        got += cvt(r as libc::c_long)? as usize;
    }
    Ok(out)
}

/// `process_vm_readv(2)` of our own `[addr, addr + len)`
/// (mm/process_vm_access.c: pin_user_pages_remote). `ENOSYS` without
/// CONFIG_CROSS_MEMORY_ATTACH.
pub fn process_vm_read_self(addr: usize, len: usize) -> io::Result<Vec<u8>> {
    let mut out = vec![0u8; len];
    let local = libc::iovec {
        iov_base: out.as_mut_ptr() as *mut c_void,
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut c_void,
        iov_len: len,
    };
    // SAFETY: the kernel writes `len` bytes into `out`.
    let n = cvt(
        unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) } as libc::c_long,
    )?;
    out.truncate(n as usize);
    Ok(out)
}

/// Writes all of `[buf, buf + len)` to `fd` with `write(2)`.
///
/// # Safety
/// `buf` must be readable for `len` bytes (or a mapping whose faults the
/// kernel reports as `EFAULT`).
pub unsafe fn write_all_fd(fd: RawFd, buf: *const u8, len: usize) -> io::Result<()> {
    let mut done = 0;
    while done < len {
        // SAFETY: the caller's buffer is readable for `len` bytes.
        let n = unsafe { libc::write(fd, buf.add(done) as *const c_void, len - done) };
        done += cvt(n as libc::c_long)? as usize;
    }
    Ok(())
}

/// Reads exactly `len` bytes from `fd` into `buf` with `read(2)`.
///
/// # Safety
/// `buf` must be writable for `len` bytes and not aliased by a Rust
/// reference.
pub unsafe fn read_exact_fd(fd: RawFd, buf: *mut u8, len: usize) -> io::Result<()> {
    let mut done = 0;
    while done < len {
        // SAFETY: the caller's buffer is writable for `len` bytes.
        let n = unsafe { libc::read(fd, buf.add(done) as *mut c_void, len - done) };
        let n = cvt(n as libc::c_long)? as usize;
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        done += n;
    }
    Ok(())
}
