//! tierkit's guest-side test library: a thin syscall layer ([`sys`]),
//! topology discovery ([`node`], and CXL regions in [`cxl`]), the weight files of the kernel and of
//! tierkit ([`weights`]), `/dev/tierkit` ([`tk`]), result reporting
//! ([`report`]), and small helpers shared by the binaries in `src/bin/`.
//!
//! Binaries: `tk-test-*` are run by `cargo xtask test` (exit 0 = pass),
//! `tk-bench-*` by `cargo xtask bench`, `tk-demo*` by `cargo xtask run`.
//! They are built static and run as root from the guest's `/init`; they
//! also run on a real NUMA machine with tierkit.ko loaded (they put the
//! kernel's and tierkit's weights back when they are done).
//!
//! - `tk-test-placement`: tierkit's mmap places each page on
//!   `weighted_interleave_nid(ilx)` and zeroes it; stats; refused inputs.
//! - `tk-test-diff`: tierkit against the kernel's own
//!   MPOL_WEIGHTED_INTERLEAVE / MPOL_INTERLEAVE, page by page, same ilx;
//!   shmem; auto weights from the HMAT bandwidth.
//! - `tk-test-cxl`: the memory-only node of `--topology cxl` is a CXL
//!   region onlined through dax/kmem (skips without CXL regions).
//! - `tk-test-task`: `TK_IOC_TASK_NEXT` and `TK_IOC_BULK` against
//!   tierkit-core's `TaskState` and `bulk_split`.
//! - `tk-bench-wi`: pages/s of tierkit's mmap against anonymous faults.
//! - `tk-demo`: weighted placement and gigantic clearing, for people.
//! - `tk-demo-gigantic`: time to first use of 1 GiB per node, tierkit
//!   (auto workers, and from its pre-cleared pool) against hugetlb
//!   ([`first_use`], shared with `tk-bench-gigantic`).
//! - `tk-test-pool`, `tk-test-pool-cxl`: the pre-cleared gigantic pool
//!   ([`pool`]) on the DRAM node and on the memory-only node.
//! - `tk-test-pool-hostile`: the pool against a hostile root user: odd
//!   writes, an open fd across `rmmod`, concurrent writers with the
//!   shrinker and killed first touches, `rmmod` and a lowered target or a
//!   memory offline during a refill.
//!
//! - `tk-test-rebalance`: `TK_IOC_REBALANCE` moves exactly the pages whose
//!   node changes under new weights, under a concurrent writer, paced,
//!   bounded and killed half-way ([`rebalance`] applies it to another
//!   process's files for `tk-calibrate --apply`).
//!
//! - `tk-init`: the guest's `/init` itself ([`init`]): mounts, CXL region
//!   assembly, insmod, the binaries above, rmmod, power-off.
//!
//! Output protocol (see [`report`]): one `ok - ...` / `not ok - ...: why`
//! line per check, `# ...` comments, and one `TIERKIT-JSON {...}` line last.
//!
//! Everything that does not need the guest is unit-tested on the host with
//! `cargo test -p userspace-tests`.

pub mod block_offline;
pub mod callers;
pub mod cxl;
pub mod faults;
pub mod first_use;
pub mod fuzz;
pub mod help;
pub mod hostile;
pub mod init;
pub mod lifecycle;
pub mod memblock;
pub mod node;
pub mod node_offline;
pub mod offline_held;
pub mod pool;
pub mod pool_hostile;
pub mod pool_test;
pub mod races;
pub mod rebalance;
pub mod report;
pub mod rng;
pub mod stress;
pub mod sys;
pub mod tk;
pub mod tkrun;
pub mod vma;
pub mod weights;
pub mod workload;

use std::path::Path;
use tierkit_core::interleave::{
    interleave_nid_ref, weighted_interleave_nid_ref, Nodemask, Weights,
};

/// The start of a test that needs the module: debugfs mounted,
/// `/dev/tierkit` present, the topology read and noted. On failure the
/// failed check is in `r` and the caller finishes.
pub fn tierkit_ready(r: &mut report::Report) -> Option<node::Topology> {
    ensure_debugfs();
    if !tk::Tierkit::present() {
        r.fail(
            "/dev/tierkit exists",
            "no /dev/tierkit: is tierkit.ko loaded?",
        );
        return None;
    }
    read_topology(r)
}

/// Reads the guest's NUMA topology and notes it in `r`; on failure records a
/// failed `topology` check and returns `None` (the caller then finishes).
pub fn read_topology(r: &mut report::Report) -> Option<node::Topology> {
    match node::Topology::read() {
        Ok(t) => {
            r.note(format!("topology: {}", t.describe()));
            Some(t)
        }
        Err(e) => {
            r.fail("topology", format!("{e:#}"));
            None
        }
    }
}

/// Checks that `/dev/tierkit` exists and returns tierkit's weight directory;
/// on failure records which of the two is missing and returns `None`.
pub fn tierkit_weight_dir(r: &mut report::Report) -> Option<weights::WeightDir> {
    if !tk::Tierkit::present() {
        r.fail(
            "open /dev/tierkit",
            "no /dev/tierkit (is tierkit.ko loaded?)",
        );
        return None;
    }
    let wd = weights::WeightDir::tierkit();
    if wd.is_none() {
        r.fail(
            "tierkit weight files",
            "no tierkit weighted_interleave directory (debugfs)",
        );
    }
    wd
}

/// Mounts debugfs on `/sys/kernel/debug` if nothing is mounted there yet
/// (as root; errors are ignored, the caller then finds no files).
pub fn ensure_debugfs() {
    let mounted = std::fs::read_to_string("/proc/mounts")
        .map(|m| {
            m.lines()
                .any(|l| l.split_whitespace().nth(1) == Some("/sys/kernel/debug"))
        })
        .unwrap_or(true);
    if !mounted && Path::new("/sys/kernel/debug").is_dir() {
        // SAFETY: plain mount(2) with NUL-terminated static strings.
        unsafe {
            libc::mount(
                c"none".as_ptr(),
                c"/sys/kernel/debug".as_ptr(),
                c"debugfs".as_ptr(),
                0,
                std::ptr::null(),
            );
        }
    }
}

/// A one-line description of the THP setup that matters for the kernel
/// side of a comparison: the global mode and whether `madvise` exists.
pub fn thp_note() -> String {
    let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "no THP".into());
    // madvise(0, 0, MADV_NORMAL) is a no-op that only tells whether the
    // syscall exists.
    // SAFETY: an empty range; MADV_NORMAL changes nothing.
    let madv = match unsafe { sys::madvise(std::ptr::null_mut(), 0, libc::MADV_NORMAL) } {
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
            "no madvise (CONFIG_ADVISE_SYSCALLS=n): THP off per process with PR_SET_THP_DISABLE"
        }
        _ => "MADV_NOHUGEPAGE per mapping",
    };
    format!("THP enabled: {mode}; {madv}")
}

/// The node the kernel (with `MPOL_WEIGHTED_INTERLEAVE`) or tierkit (with
/// `TK_MODE_WEIGHTED_INTERLEAVE`) picks for `ilx`: mm/mempolicy.c
/// `weighted_interleave_nid`, by tierkit-core's reference model (a straight
/// port of the kernel's walk). `weights[n]` is node n's weight (0 reads as
/// 1, "never set"). `nodemask` must not be empty.
pub fn expected_wi_nid(nodemask: u64, weights: &[u8; 64], ilx: u64) -> u32 {
    let w = Weights::from_table(*weights);
    weighted_interleave_nid_ref(Nodemask(nodemask), &w, ilx).expect("empty nodemask") as u32
}

/// mm/mempolicy.c `interleave_nid`: the `ilx % nr_nodes`-th node of the
/// mask, by tierkit-core's reference model.
pub fn expected_il_nid(nodemask: u64, ilx: u64) -> u32 {
    interleave_nid_ref(Nodemask(nodemask), ilx).expect("empty nodemask") as u32
}

/// Expected nodes for ilx `first_ilx .. first_ilx + n`.
pub fn expected_seq(
    mode_weighted: bool,
    nodemask: u64,
    weights: &[u8; 64],
    first_ilx: u64,
    n: usize,
) -> Vec<u32> {
    (0..n as u64)
        .map(|i| {
            if mode_weighted {
                expected_wi_nid(nodemask, weights, first_ilx + i)
            } else {
                expected_il_nid(nodemask, first_ilx + i)
            }
        })
        .collect()
}

/// A weight table with `(node, weight)` set and every other node 1.
pub fn weight_table(weights: &[(u32, u8)]) -> [u8; 64] {
    let mut t = [1u8; 64];
    for &(n, w) in weights {
        t[n as usize] = w;
    }
    t
}

/// One weight set of the placement and differential tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightSet {
    pub nodemask: u64,
    /// Weight of each node of the mask.
    pub weights: Vec<(u32, u8)>,
}

impl WeightSet {
    pub fn new(weights: &[(u32, u8)]) -> WeightSet {
        let nodes: Vec<u32> = weights.iter().map(|w| w.0).collect();
        WeightSet {
            nodemask: node::mask_of(&nodes),
            weights: weights.to_vec(),
        }
    }

    /// `{0,1} w{0:3,1:1}`.
    pub fn name(&self) -> String {
        format!(
            "{} {}",
            node::fmt_mask(self.nodemask),
            fmt_weights(&self.weights)
        )
    }

    /// Σ weights: one interleave cycle.
    pub fn total(&self) -> u32 {
        self.weights.iter().map(|w| w.1 as u32).sum()
    }

    /// Enough pages to see every node's run at least twice, and at least
    /// `min`.
    pub fn pages(&self, min: usize) -> usize {
        (2 * self.total() as usize + 7).max(min)
    }

    /// The full weight table (1 outside the set).
    pub fn table(&self) -> [u8; 64] {
        weight_table(&self.weights)
    }
}

/// The weight sets the tests run on a topology: on (DRAM, CXL) the issue's
/// {3,1}, then equal, 255 on either or both sides, co-prime, and then
/// single-node masks; on three or more memory nodes one set over all of
/// them. With one memory node only the single-node sets.
pub fn weight_sets(topo: &node::Topology) -> Vec<WeightSet> {
    let mut v = Vec::new();
    let Some(d) = topo.dram_node().or_else(|| topo.memory.first().copied()) else {
        return v;
    };
    let c = topo
        .cxl_node()
        .or_else(|| topo.memory.iter().copied().find(|&n| n != d));
    if let Some(c) = c {
        for (a, b) in [
            (3, 1),
            (1, 1),
            (255, 1),
            (1, 255),
            (255, 255),
            (2, 5),
            (13, 7),
        ] {
            v.push(WeightSet::new(&[(d, a), (c, b)]));
        }
    }
    v.push(WeightSet::new(&[(d, 9)]));
    if let Some(c) = c {
        v.push(WeightSet::new(&[(c, 255)]));
    }
    if topo.memory.len() >= 3 {
        let all: Vec<(u32, u8)> = topo
            .memory
            .iter()
            .enumerate()
            .filter(|(_, &n)| n < 64)
            .map(|(i, &n)| (n, (i * 37 % 255 + 1) as u8))
            .collect();
        v.push(WeightSet::new(&all));
    }
    v
}

/// Compares the nodes `move_pages` reported with the expected ones, page
/// by page. On mismatch the error names the first few differing pages and
/// how many differ.
pub fn compare_nodes(got: &[i32], want: &[u32]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!(
            "{} pages queried, {} expected",
            got.len(),
            want.len()
        ));
    }
    let bad: Vec<usize> = (0..got.len())
        .filter(|&i| got[i] != want[i] as i32)
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    let first: Vec<String> = bad
        .iter()
        .take(4)
        .map(|&i| format!("page {i} on {}, expected {}", status_str(got[i]), want[i]))
        .collect();
    Err(format!(
        "{} of {} pages differ: {}",
        bad.len(),
        got.len(),
        first.join("; ")
    ))
}

/// Compares two observed sequences (e.g. kernel against tierkit).
pub fn compare_seqs(a_name: &str, a: &[i32], b_name: &str, b: &[i32]) -> Result<(), String> {
    if a.len() != b.len() {
        return Err(format!(
            "{a_name} has {} pages, {b_name} {}",
            a.len(),
            b.len()
        ));
    }
    let bad: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
    if bad.is_empty() {
        return Ok(());
    }
    let first: Vec<String> = bad
        .iter()
        .take(4)
        .map(|&i| {
            format!(
                "page {i}: {a_name} {} {b_name} {}",
                status_str(a[i]),
                status_str(b[i])
            )
        })
        .collect();
    Err(format!(
        "{} of {} pages differ: {}",
        bad.len(),
        a.len(),
        first.join("; ")
    ))
}

/// A `move_pages` status as text: the node, or the errno name.
pub fn status_str(s: i32) -> String {
    match s {
        s if s >= 0 => s.to_string(),
        s if s == -libc::ENOENT => "ENOENT(not present)".into(),
        s if s == -libc::EFAULT => "EFAULT".into(),
        s => format!("errno {}", -s),
    }
}

/// Pages per node: `(node, count)` ascending, negative statuses under -1.
pub fn per_node_counts(nodes: &[i32]) -> Vec<(i32, usize)> {
    let mut m = std::collections::BTreeMap::new();
    for &n in nodes {
        *m.entry(if n < 0 { -1 } else { n }).or_insert(0usize) += 1;
    }
    m.into_iter().collect()
}

/// One character per page: the node's digit (`a`.. from node 10), `?` for
/// a page with no node.
pub fn picture(nodes: &[i32]) -> String {
    nodes
        .iter()
        .map(|&n| match n {
            0..=9 => (b'0' + n as u8) as char,
            10..=35 => (b'a' + (n - 10) as u8) as char,
            _ => '?',
        })
        .collect()
}

/// Formats `(node, weight)` pairs: `w{0:3,1:1}`.
pub fn fmt_weights(weights: &[(u32, u8)]) -> String {
    let v: Vec<String> = weights.iter().map(|(n, w)| format!("{n}:{w}")).collect();
    format!("w{{{}}}", v.join(","))
}

/// `ENOTTY` and friends by name.
pub fn errno_str(e: i32) -> String {
    let name = match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::E2BIG => "E2BIG",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::ENFILE => "ENFILE",
        libc::EMFILE => "EMFILE",
        libc::ENOTTY => "ENOTTY",
        libc::EFBIG => "EFBIG",
        libc::ENOSPC => "ENOSPC",
        libc::ESPIPE => "ESPIPE",
        libc::EROFS => "EROFS",
        libc::EPIPE => "EPIPE",
        libc::ERANGE => "ERANGE",
        libc::ENOSYS => "ENOSYS",
        libc::EOVERFLOW => "EOVERFLOW",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        _ => return format!("errno {e}"),
    };
    name.to_string()
}

/// The errno of an `io::Error`, for messages: its name ([`errno_str`]),
/// or the error's text where it has no errno.
pub fn errno_name(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => errno_str(n),
        None => e.to_string(),
    }
}

/// Checks that `r` failed with `errno`.
pub fn expect_errno<T>(r: std::io::Result<T>, errno: i32) -> Result<(), String> {
    match r {
        Ok(_) => Err(format!(
            "succeeded, expected {}",
            errno_name(&std::io::Error::from_raw_os_error(errno))
        )),
        Err(e) if e.raw_os_error() == Some(errno) => Ok(()),
        Err(e) => Err(format!(
            "failed with {}, expected {}",
            errno_name(&e),
            errno_name(&std::io::Error::from_raw_os_error(errno))
        )),
    }
}

/// Whether the kernel zeroes every page it allocates (`init_on_alloc`):
/// from the boot's `mem auto-init: ..., heap alloc:on|off` line in the
/// kernel log, else from the last `init_on_alloc=` of `/proc/cmdline`;
/// `None` if neither says. With it on, tierkit takes the allocator's
/// zeroing as a gigantic range's clear (`last_workers` 0).
pub fn init_on_alloc() -> Option<bool> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/kmsg")
    {
        let mut buf = vec![0u8; 8192];
        while let Ok(n) = f.read(&mut buf) {
            if n == 0 {
                break;
            }
            let rec = String::from_utf8_lossy(&buf[..n]);
            if let Some(i) = rec.find("heap alloc:") {
                return Some(rec[i + "heap alloc:".len()..].starts_with("on"));
            }
        }
    }
    let cmdline = std::fs::read_to_string("/proc/cmdline").ok()?;
    cmdline
        .split_whitespace()
        .rev()
        .find_map(|w| w.strip_prefix("init_on_alloc="))
        .map(|v| matches!(v, "1" | "y" | "Y" | "on"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_sequences_from_the_issue() {
        // nodes {0,1}, weights {3,1}: 0,0,0,1,0,0,0,1
        let t = weight_table(&[(0, 3), (1, 1)]);
        assert_eq!(
            expected_seq(true, 0b11, &t, 0, 8),
            vec![0, 0, 0, 1, 0, 0, 0, 1]
        );
        // nodes {1,3}, weights {2,5}: 1,1,3,3,3,3,3,1
        let t = weight_table(&[(1, 2), (3, 5)]);
        assert_eq!(
            expected_seq(true, 0b1010, &t, 0, 8),
            vec![1, 1, 3, 3, 3, 3, 3, 1]
        );
        // MPOL_INTERLEAVE ignores weights.
        assert_eq!(expected_seq(false, 0b1010, &t, 1, 4), vec![3, 1, 3, 1]);
        // 0 reads as 1.
        let mut z = [0u8; 64];
        z[0] = 2;
        assert_eq!(expected_seq(true, 0b11, &z, 0, 3), vec![0, 0, 1]);
    }

    #[test]
    fn sets() {
        let t = node::Topology {
            online: vec![0, 1],
            memory: vec![0, 1],
            cpu: vec![0],
        };
        let v = weight_sets(&t);
        assert_eq!(v[0], WeightSet::new(&[(0, 3), (1, 1)]));
        assert_eq!(v[0].name(), "{0,1} w{0:3,1:1}");
        assert_eq!(v[0].pages(256), 256);
        assert_eq!(v[4].total(), 510);
        assert_eq!(v[4].pages(256), 1027);
        assert!(v.iter().any(|s| s.nodemask == 0b01));
        assert!(v
            .iter()
            .any(|s| s.nodemask == 0b10 && s.weights == vec![(1, 255)]));
        let one = node::Topology {
            online: vec![0],
            memory: vec![0],
            cpu: vec![0],
        };
        assert_eq!(weight_sets(&one), vec![WeightSet::new(&[(0, 9)])]);
        let three = node::Topology {
            online: vec![0, 1, 2],
            memory: vec![0, 1, 2],
            cpu: vec![0],
        };
        assert_eq!(weight_sets(&three).last().unwrap().nodemask, 0b111);
    }

    #[test]
    fn compare() {
        assert!(compare_nodes(&[0, 1], &[0, 1]).is_ok());
        let e = compare_nodes(&[0, -libc::ENOENT], &[0, 1]).unwrap_err();
        assert!(e.contains("1 of 2 pages differ"), "{e}");
        assert!(e.contains("page 1 on ENOENT"), "{e}");
        assert!(compare_nodes(&[0], &[0, 1]).is_err());
        assert!(compare_seqs("kernel", &[0, 1], "tierkit", &[0, 1]).is_ok());
        let e = compare_seqs("kernel", &[0, 1], "tierkit", &[0, 0]).unwrap_err();
        assert!(e.contains("page 1: kernel 1 tierkit 0"), "{e}");
    }

    #[test]
    fn counts_and_picture() {
        assert_eq!(
            per_node_counts(&[0, 0, 1, -2]),
            vec![(-1, 1), (0, 2), (1, 1)]
        );
        assert_eq!(picture(&[0, 0, 0, 1, 10, -2]), "0001a?");
        assert_eq!(fmt_weights(&[(0, 3), (1, 1)]), "w{0:3,1:1}");
    }

    #[test]
    fn errno_checks() {
        assert!(expect_errno::<()>(
            Err(std::io::Error::from_raw_os_error(libc::EINVAL)),
            libc::EINVAL
        )
        .is_ok());
        let e = expect_errno::<()>(Ok(()), libc::EINVAL).unwrap_err();
        assert_eq!(e, "succeeded, expected EINVAL");
        let e = expect_errno::<()>(
            Err(std::io::Error::from_raw_os_error(libc::ENOMEM)),
            libc::EINVAL,
        )
        .unwrap_err();
        assert_eq!(e, "failed with ENOMEM, expected EINVAL");
    }
}
