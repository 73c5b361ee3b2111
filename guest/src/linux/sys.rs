//! The thin syscall layer: memory policies, `move_pages(2)`, mappings and
//! ioctls, each a direct `libc::syscall` / libc call with `io::Error` on
//! failure. Nothing here knows about tests.
//!
//! Constants are from Linux 7.3 `include/uapi/linux/mempolicy.h`.

use std::ffi::c_void;
use std::io;
use std::os::fd::RawFd;
use std::ptr;

/// Bytes in a base page on x86_64.
pub const PAGE_SIZE: usize = 4096;
/// `PAGE_SHIFT` on x86_64.
pub const PAGE_SHIFT: u32 = 12;

/// `enum { MPOL_DEFAULT, ... }` in include/uapi/linux/mempolicy.h.
pub const MPOL_DEFAULT: i32 = 0;
pub const MPOL_PREFERRED: i32 = 1;
pub const MPOL_BIND: i32 = 2;
pub const MPOL_INTERLEAVE: i32 = 3;
pub const MPOL_LOCAL: i32 = 4;
pub const MPOL_PREFERRED_MANY: i32 = 5;
/// Since Linux 6.9.
pub const MPOL_WEIGHTED_INTERLEAVE: i32 = 6;

/// `get_mempolicy` flags.
pub const MPOL_F_NODE: u64 = 1 << 0;
pub const MPOL_F_ADDR: u64 = 1 << 1;
pub const MPOL_F_MEMS_ALLOWED: u64 = 1 << 2;

/// `mbind` flags.
pub const MPOL_MF_STRICT: u32 = 1 << 0;
pub const MPOL_MF_MOVE: u32 = 1 << 1;

/// Number of `u64` words in the nodemask buffers handed to the kernel.
/// 16 words = 1024 nodes, enough for any `CONFIG_NODES_SHIFT` <= 10, so
/// `get_mempolicy` never fails with `EINVAL` for a too small `maxnode`.
const MASK_WORDS: usize = 16;

/// The `maxnode` argument for a mask of `words` 64-bit words. The kernel's
/// `get_nodes` (mm/mempolicy.c) starts with `--maxnode`, so the libnuma
/// convention is bits + 1.
fn maxnode(words: usize) -> libc::c_ulong {
    (words * 64 + 1) as libc::c_ulong
}

fn check(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn mask_buf(nodemask: u64) -> [u64; MASK_WORDS] {
    let mut buf = [0u64; MASK_WORDS];
    buf[0] = nodemask;
    buf
}

/// `mbind(2)` for `[addr, addr + len)` with a nodemask of nodes 0..63.
pub fn mbind(addr: usize, len: usize, mode: i32, nodemask: u64, flags: u32) -> io::Result<()> {
    let buf = mask_buf(nodemask);
    // SAFETY: the kernel reads `MASK_WORDS` words from `buf`, which lives
    // across the call; `addr`/`len` are checked by the kernel.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            addr,
            len as libc::c_ulong,
            mode as libc::c_ulong,
            buf.as_ptr(),
            maxnode(MASK_WORDS),
            flags as libc::c_ulong,
        )
    };
    check(ret).map(|_| ())
}

/// `set_mempolicy(2)` for the calling thread.
pub fn set_mempolicy(mode: i32, nodemask: u64) -> io::Result<()> {
    let buf = mask_buf(nodemask);
    let (ptr, words) = if nodemask == 0 {
        (ptr::null(), 0)
    } else {
        (buf.as_ptr(), MASK_WORDS)
    };
    // SAFETY: the kernel reads at most `MASK_WORDS` words from `buf`.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_set_mempolicy,
            mode as libc::c_ulong,
            ptr,
            maxnode(words),
        )
    };
    check(ret).map(|_| ())
}

/// `get_mempolicy(2)` with `flags` and `addr`: returns (mode or node, mask
/// of nodes 0..63).
pub fn get_mempolicy(addr: usize, flags: u64) -> io::Result<(i32, u64)> {
    let mut mode: libc::c_int = 0;
    let mut buf = [0u64; MASK_WORDS];
    // SAFETY: the kernel writes one int to `mode` and at most
    // `MASK_WORDS` words to `buf`.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut mode as *mut libc::c_int,
            buf.as_mut_ptr(),
            maxnode(MASK_WORDS),
            addr,
            flags as libc::c_ulong,
        )
    };
    check(ret)?;
    Ok((mode, buf[0]))
}

/// The node of the page at `addr` (`get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR)`;
/// this faults the page in if it is not present).
pub fn node_of_addr(addr: usize) -> io::Result<i32> {
    get_mempolicy(addr, MPOL_F_NODE | MPOL_F_ADDR).map(|(n, _)| n)
}

/// `move_pages(2)` with `nodes = NULL`: query, for each address, the node
/// of the page mapped there, without moving anything. Each status is a node
/// id, or a negative errno (`-ENOENT` not present, `-EFAULT` no VMA or the
/// zero page), as mm/migrate.c `do_pages_stat_array` writes it.
pub fn move_pages_query(addrs: &[*const c_void]) -> io::Result<Vec<i32>> {
    let mut status = vec![i32::MIN; addrs.len()];
    // SAFETY: `addrs` and `status` both hold `addrs.len()` elements; the
    // kernel only reads the pointers' values and writes `status`.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0 as libc::pid_t,
            addrs.len() as libc::c_ulong,
            addrs.as_ptr(),
            ptr::null::<libc::c_int>(),
            status.as_mut_ptr(),
            0 as libc::c_int,
        )
    };
    check(ret)?;
    Ok(status)
}

/// The node of each of the `nr_pages` pages starting at `base`, by
/// [`move_pages_query`].
pub fn query_page_nodes(base: *const u8, nr_pages: usize) -> io::Result<Vec<i32>> {
    let addrs: Vec<*const c_void> = (0..nr_pages)
        .map(|i| base.wrapping_add(i * PAGE_SIZE) as *const c_void)
        .collect();
    move_pages_query(&addrs)
}

/// `madvise(2)`.
///
/// # Safety
/// Some advice (`MADV_DONTNEED`, `MADV_FREE`, ...) discards the contents
/// of the range: the caller must own `[addr, addr + len)` and not rely on
/// its contents afterwards for such advice.
pub unsafe fn madvise(addr: *mut c_void, len: usize, advice: i32) -> io::Result<()> {
    // SAFETY: per the caller's contract.
    let ret = unsafe { libc::madvise(addr, len, advice) };
    check(ret as libc::c_long).map(|_| ())
}

/// `prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)`: no transparent huge pages of
/// any size for this process's mappings from now on
/// (`MMF_DISABLE_THP_COMPLETELY`, kernel/sys.c `prctl_set_thp_disable`).
/// Available whatever `CONFIG_ADVISE_SYSCALLS` says.
pub fn disable_thp() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    let ret = unsafe {
        libc::prctl(
            libc::PR_SET_THP_DISABLE,
            1 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    check(ret as libc::c_long).map(|_| ())
}

/// `ioctl(2)` with a pointer to `arg`.
///
/// # Safety
/// `req` must be an ioctl whose argument is a `T` the kernel reads and/or
/// writes in place (the `_IOWR(.., T)` convention of `uapi`).
pub unsafe fn ioctl<T>(fd: RawFd, req: u32, arg: &mut T) -> io::Result<i32> {
    // SAFETY: per the caller's contract, the kernel accesses exactly one `T`.
    let ret = unsafe { libc::ioctl(fd, req as _, arg as *mut T) };
    check(ret as libc::c_long).map(|r| r as i32)
}

/// A memory mapping, unmapped on drop.
#[derive(Debug)]
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    /// `mmap(NULL, len, PROT_READ | PROT_WRITE, flags, fd, offset)`.
    pub fn new(len: usize, flags: i32, fd: RawFd, offset: u64) -> io::Result<Mapping> {
        Self::new_at(0, len, flags, fd, offset)
    }

    /// Like [`Mapping::new`] with an address hint (or a fixed address with
    /// `MAP_FIXED_NOREPLACE` in `flags`). `MAP_FIXED`, which would replace
    /// whatever is mapped there, is refused with `EINVAL`.
    pub fn new_at(
        hint: usize,
        len: usize,
        flags: i32,
        fd: RawFd,
        offset: u64,
    ) -> io::Result<Mapping> {
        if flags & libc::MAP_FIXED != 0 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: a fresh mapping: without MAP_FIXED the kernel never
        // replaces an existing mapping (MAP_FIXED_NOREPLACE fails instead).
        let p = unsafe {
            libc::mmap(
                hint as *mut c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                offset as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: p as *mut u8,
            len,
        })
    }

    /// A private anonymous mapping of `len` bytes, not faulted in.
    pub fn anon(len: usize) -> io::Result<Mapping> {
        Self::new(len, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn addr(&self) -> usize {
        self.ptr as usize
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn nr_pages(&self) -> usize {
        self.len / PAGE_SIZE
    }

    /// `madvise(MADV_NOHUGEPAGE)` on the whole mapping, so anonymous faults
    /// allocate order-0 folios and the ilx is not shifted by a THP order
    /// (mm/mempolicy.c `get_vma_policy`). A kernel without
    /// `CONFIG_ADVISE_SYSCALLS` has no madvise (`ENOSYS`); then THP is
    /// turned off for the whole process with [`disable_thp`] instead.
    pub fn no_huge(&self) -> io::Result<()> {
        // SAFETY: the mapping is ours; MADV_NOHUGEPAGE keeps its contents.
        match unsafe { madvise(self.ptr as *mut c_void, self.len, libc::MADV_NOHUGEPAGE) } {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => disable_thp(),
            r => r,
        }
    }

    /// `mbind` the whole mapping.
    pub fn mbind(&self, mode: i32, nodemask: u64, flags: u32) -> io::Result<()> {
        mbind(self.addr(), self.len, mode, nodemask, flags)
    }

    /// Fault every page in, in address order, by writing one byte to each.
    pub fn touch_pages(&self) {
        for i in 0..self.nr_pages() {
            // SAFETY: in bounds of a live read/write mapping.
            unsafe { ptr::write_volatile(self.ptr.add(i * PAGE_SIZE), 1) };
        }
    }

    /// Read every byte; returns the offset of the first non-zero byte.
    pub fn first_nonzero(&self) -> Option<usize> {
        // SAFETY: the mapping is readable for `len` bytes while `self` lives.
        let s = unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) };
        let words = s.len() / 8;
        // SAFETY: the mapping is page aligned, so 8-byte aligned.
        let w = unsafe { std::slice::from_raw_parts(self.ptr as *const u64, words) };
        let i = w.iter().position(|&x| x != 0)?;
        Some(i * 8 + s[i * 8..].iter().position(|&b| b != 0).unwrap_or(0))
    }

    /// The node of each page, by `move_pages(2)`.
    pub fn page_nodes(&self) -> io::Result<Vec<i32>> {
        query_page_nodes(self.ptr, self.nr_pages())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` is a mapping this value owns.
        unsafe { libc::munmap(self.ptr as *mut c_void, self.len) };
    }
}

/// The inode number `/proc/self/maps` shows for the mapping that starts at
/// `addr` (for a shared anonymous mapping: its shmem inode, `/dev/zero
/// (deleted)`), `None` if there is no such line.
pub fn maps_inode(addr: usize) -> Option<u64> {
    parse_maps_inode(&std::fs::read_to_string("/proc/self/maps").ok()?, addr)
}

/// [`maps_inode`] on the text of a maps file.
pub fn parse_maps_inode(maps: &str, addr: usize) -> Option<u64> {
    maps.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let range = f.next()?;
        let start = usize::from_str_radix(range.split('-').next()?, 16).ok()?;
        if start != addr {
            return None;
        }
        // perms, offset, dev, inode
        f.nth(3)?.parse().ok()
    })
}

/// `clock_gettime(CLOCK_MONOTONIC)` in ns.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maxnode_is_bits_plus_one() {
        assert_eq!(maxnode(1), 65);
        assert_eq!(maxnode(16), 1025);
    }

    #[test]
    fn maps_inode_parsing() {
        let maps = "7f0000000000-7f0000004000 rw-s 00000000 00:01 1043 /dev/zero (deleted)\n\
                    7f0000004000-7f0000005000 rw-p 00000000 00:00 0 \n";
        assert_eq!(parse_maps_inode(maps, 0x7f00_0000_0000), Some(1043));
        assert_eq!(parse_maps_inode(maps, 0x7f00_0000_4000), Some(0));
        assert_eq!(parse_maps_inode(maps, 0x1000), None);
        let m = Mapping::new(PAGE_SIZE, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0).unwrap();
        assert!(maps_inode(m.addr()).unwrap() > 0);
    }

    #[test]
    fn anon_mapping_zero_and_touch() {
        let m = Mapping::anon(4 * PAGE_SIZE).unwrap();
        assert_eq!(m.nr_pages(), 4);
        assert_eq!(m.first_nonzero(), None);
        m.touch_pages();
        assert_eq!(m.first_nonzero(), Some(0));
    }

    #[test]
    fn move_pages_query_reports_not_present_then_a_node() {
        let m = Mapping::anon(2 * PAGE_SIZE).unwrap();
        m.no_huge().unwrap();
        // Not faulted: -ENOENT. (move_pages may be missing without NUMA;
        // then there is nothing to check on this host.)
        let Ok(st) = m.page_nodes() else { return };
        assert_eq!(st, vec![-libc::ENOENT; 2]);
        m.touch_pages();
        let st = m.page_nodes().unwrap();
        assert!(st.iter().all(|&n| n >= 0), "{st:?}");
    }
}
