//! What holds the pages of a node's naturally aligned GiBs, from
//! `/proc/kpageflags` and `/proc/kpagecount`
//! (Documentation/admin-guide/mm/pagemap.rst): the kind of page that keeps
//! `alloc_contig_pages()` from taking a GiB (a slab page, a page table, a
//! kernel page off the LRU, a poisoned page) is what a test that finds no
//! free aligned GiB reports, so that the test before it that left it there
//! can be found.

use std::fs;
use std::io;
use std::os::unix::fs::FileExt;

use crate::linux::memblock;
use crate::linux::sys::PAGE_SIZE;

/// Pages of a GiB.
const GIB_PAGES: u64 = (1 << 30) / PAGE_SIZE as u64;

// Bits of `/proc/kpageflags` (include/uapi/linux/kernel-page-flags.h, and
// the kernel-internal ones of fs/proc/page.c).
const KPF_LRU: u32 = 5;
const KPF_SLAB: u32 = 7;
const KPF_BUDDY: u32 = 10;
const KPF_ANON: u32 = 12;
const KPF_COMPOUND_TAIL: u32 = 16;
const KPF_HUGE: u32 = 17;
const KPF_UNEVICTABLE: u32 = 18;
const KPF_HWPOISON: u32 = 19;
const KPF_NOPAGE: u32 = 20;
const KPF_OFFLINE: u32 = 23;
const KPF_PGTABLE: u32 = 26;
const KPF_RESERVED: u32 = 32;

/// The kind of one page, as far as taking its GiB goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Free: a buddy head, or a page nobody holds (a buddy tail, a per-CPU
    /// list's page).
    Free,
    /// On an LRU list (user memory, page cache): migration moves it,
    /// unless someone pins it.
    Lru,
    /// A slab page: never moved.
    Slab,
    /// A page table: never moved.
    PageTable,
    /// Reserved at boot (memmap, firmware): never taken.
    Reserved,
    /// Poisoned (memory failure): lost for the boot.
    HwPoison,
    /// Offline (a balloon, an offlined block's page).
    Offline,
    /// A hugetlb page.
    Huge,
    /// Held by someone (a count) and none of the above: a kernel
    /// allocation (vmalloc, KASAN shadow, a driver's or tierkit's page).
    Kernel,
}

/// Classifies one page from its kpageflags word and kpagecount.
pub fn kind(flags: u64, count: u64) -> Kind {
    let has = |b: u32| flags & (1 << b) != 0;
    if has(KPF_HWPOISON) {
        Kind::HwPoison
    } else if has(KPF_RESERVED) {
        Kind::Reserved
    } else if has(KPF_HUGE) {
        Kind::Huge
    } else if has(KPF_SLAB) {
        Kind::Slab
    } else if has(KPF_PGTABLE) {
        Kind::PageTable
    } else if has(KPF_OFFLINE) {
        Kind::Offline
    } else if has(KPF_LRU) || has(KPF_UNEVICTABLE) || (has(KPF_COMPOUND_TAIL) && has(KPF_ANON)) {
        Kind::Lru
    } else if has(KPF_BUDDY) || count == 0 || has(KPF_NOPAGE) {
        Kind::Free
    } else {
        Kind::Kernel
    }
}

/// One naturally aligned GiB of a node and what its pages are.
#[derive(Clone, Debug, Default)]
pub struct GibCensus {
    pub first_pfn: u64,
    /// Pages per [`Kind`], in its order.
    pub counts: [u64; 9],
    /// The first few pages that are neither free nor on an LRU list:
    /// `(pfn, flags, count)`.
    pub samples: Vec<(u64, u64, u64)>,
}

impl GibCensus {
    /// `GiB at pfn 0x280000: free N, lru N, ...`, kinds with no page left
    /// out, then the samples.
    pub fn describe(&self) -> String {
        const NAMES: [&str; 9] = [
            "free", "lru", "slab", "pgtable", "reserved", "hwpoison", "offline", "hugetlb",
            "kernel",
        ];
        let kinds: Vec<String> = NAMES
            .iter()
            .zip(self.counts)
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let samples: Vec<String> = self
            .samples
            .iter()
            .map(|(p, f, c)| format!("{p:#x} flags {f:#x} count {c}"))
            .collect();
        format!(
            "GiB at pfn {:#x}: {}{}",
            self.first_pfn,
            kinds.join(", "),
            if samples.is_empty() {
                String::new()
            } else {
                format!(" (first held: {})", samples.join("; "))
            }
        )
    }
}

/// How many held pages each GiB's census keeps as samples.
const SAMPLES: usize = 4;

/// The census of every naturally aligned GiB all of whose memory blocks
/// belong to `nid`, ascending.
pub fn node_gibs(nid: u32) -> io::Result<Vec<GibCensus>> {
    let bs = memblock::block_size()?;
    let per_block = bs / PAGE_SIZE as u64;
    let blocks = memblock::node_blocks(nid);
    let flags = fs::File::open("/proc/kpageflags")?;
    let counts = fs::File::open("/proc/kpagecount")?;
    let mut firsts: Vec<u64> = blocks
        .iter()
        .map(|&b| b * per_block / GIB_PAGES * GIB_PAGES)
        .collect();
    firsts.dedup();
    let mut out = Vec::new();
    for first in firsts {
        let whole = (first..first + GIB_PAGES)
            .step_by(per_block.max(1) as usize)
            .all(|p| blocks.binary_search(&(p / per_block)).is_ok());
        if !whole {
            continue;
        }
        let mut f = vec![0u8; GIB_PAGES as usize * 8];
        let mut c = vec![0u8; GIB_PAGES as usize * 8];
        flags.read_exact_at(&mut f, first * 8)?;
        counts.read_exact_at(&mut c, first * 8)?;
        let mut g = GibCensus {
            first_pfn: first,
            ..Default::default()
        };
        for (i, (fw, cw)) in f.chunks_exact(8).zip(c.chunks_exact(8)).enumerate() {
            let fl = u64::from_ne_bytes(fw.try_into().unwrap_or_default());
            let n = u64::from_ne_bytes(cw.try_into().unwrap_or_default());
            let k = kind(fl, n);
            g.counts[k as usize] += 1;
            if !matches!(k, Kind::Free | Kind::Lru) && g.samples.len() < SAMPLES {
                g.samples.push((first + i as u64, fl, n));
            }
        }
        out.push(g);
    }
    Ok(out)
}

/// [`node_gibs`] as one line per GiB, or why it could not be read.
pub fn describe_node_gibs(nid: u32) -> String {
    match node_gibs(nid) {
        Ok(v) if v.is_empty() => format!("node {nid} has no whole aligned GiB"),
        Ok(v) => v
            .iter()
            .map(GibCensus::describe)
            .collect::<Vec<_>>()
            .join(" | "),
        Err(e) => format!("node {nid}'s pages: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(kind(0, 0), Kind::Free);
        assert_eq!(kind(1 << KPF_BUDDY, 0), Kind::Free);
        assert_eq!(kind(1 << KPF_LRU, 1), Kind::Lru);
        assert_eq!(kind(1 << KPF_SLAB, 0), Kind::Slab);
        assert_eq!(kind(1 << KPF_PGTABLE, 1), Kind::PageTable);
        assert_eq!(kind(1 << KPF_RESERVED, 1), Kind::Reserved);
        assert_eq!(kind(1 << KPF_HWPOISON | 1 << KPF_LRU, 1), Kind::HwPoison);
        assert_eq!(kind(0, 1), Kind::Kernel);
        let mut g = GibCensus {
            first_pfn: 0x280000,
            ..Default::default()
        };
        g.counts[Kind::Free as usize] = 3;
        g.counts[Kind::Slab as usize] = 1;
        g.samples.push((0x280010, 0x80, 1));
        assert_eq!(
            g.describe(),
            "GiB at pfn 0x280000: free 3, slab 1 (first held: 0x280010 flags 0x80 count 1)"
        );
    }
}
