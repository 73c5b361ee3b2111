// SPDX-License-Identifier: GPL-2.0

//! Declarations of the C shim in `shim.c` and `shim_*.c`.
//!
//! What the 7.3 kernel crate and its bindings do not reach: wrappers around
//! `static inline` functions and macros bindgen cannot export, C logic that
//! needs many of them at once (replacement pages with a nodemask, gigantic
//! ranges, memory cgroup charges), and C glue for structures the crate has
//! no vtable for (vm_operations, file operations that pin the module, the
//! memory notifier). Each C function says on the line above it which
//! missing binding keeps it in C. The pool's kthread and shrinker and the
//! node notifier are Rust. Signatures must match `shim.h` exactly.

use kernel::bindings;
use kernel::ffi::{c_char, c_int, c_uint, c_ulong};

// `struct page` ends in a zero-sized bindgen array (`its_array`), which
// rustc calls FFI-unsafe; only pointers to it cross the boundary.
#[expect(improper_ctypes)]
extern "C" {
    /// `cpu_online(cpu)`, false for ids out of range. No precondition.
    pub(crate) fn tk_cpu_online(cpu: c_int) -> bool;
    /// `cpumask_next(prev, cpumask_of_node(nid))`, skipping offline CPUs:
    /// the next online CPU of `nid` after `prev` (-1 to start), `>=
    /// nr_cpu_ids` at the end. `nid` must be an online node.
    pub(crate) fn tk_node_next_cpu(nid: c_int, prev: c_int) -> c_int;
    /// `cpumask_weight_and(cpumask_of_node(nid), cpu_online_mask)`: online
    /// CPUs of `nid`. `nid` must be an online node.
    pub(crate) fn tk_nr_cpus_node(nid: c_int) -> c_uint;
    /// `topology_physical_package_id(cpu)`: the CPU's socket, -1 for an
    /// offline or out-of-range CPU. No precondition.
    pub(crate) fn tk_cpu_package(cpu: c_int) -> c_int;
    /// `nr_node_ids`: one more than the highest possible node id. No
    /// precondition.
    pub(crate) fn tk_nr_node_ids() -> c_int;
    /// `node_online(nid)`, false for ids out of range. No precondition.
    pub(crate) fn tk_node_online(nid: c_int) -> bool;
    /// `node_state(nid, N_MEMORY)`, false for ids out of range. No
    /// precondition.
    pub(crate) fn tk_node_has_memory(nid: c_int) -> bool;
    /// `cpuset_current_mems_allowed`, nodes 0..63: the nodes current's
    /// cpuset allows (every node with memory without cpusets). Process
    /// context.
    pub(crate) fn tk_current_mems_allowed() -> u64;
    /// `node_state(nid, N_CPU)`, false for ids out of range. No
    /// precondition.
    pub(crate) fn tk_node_has_cpu(nid: c_int) -> bool;
    /// Free pages of the zones of `NODE_DATA(nid)`:
    /// `zone_page_state_snapshot(.., NR_FREE_PAGES)` plus the pages on the
    /// zones' per-CPU free lists; 0 for an offline or out-of-range node.
    /// No precondition.
    pub(crate) fn tk_node_free_pages(nid: c_int) -> c_ulong;

    /// `alloc_pages_node(nid, gfp | __GFP_THISNODE | __GFP_NOWARN, order)`;
    /// NULL on failure. `nid` must be a node with memory, and `gfp` must
    /// suit the caller's context (e.g. no sleeping flags in atomic context).
    pub(crate) fn tk_alloc_pages_node(
        nid: c_int,
        gfp: bindings::gfp_t,
        order: c_uint,
    ) -> *mut bindings::page;
    /// `page_to_pfn(page)`. `page` must be a valid `struct page`.
    pub(crate) fn tk_page_to_pfn(page: *const bindings::page) -> c_ulong;
    /// `pfn_to_page(pfn)`. `pfn` must be a valid pfn (`pfn_valid()`), e.g.
    /// one inside a range of pages the caller holds.
    pub(crate) fn tk_pfn_to_page(pfn: c_ulong) -> *mut bindings::page;
    /// `page_address(page)`: its direct-map address (x86_64 has no
    /// highmem). `page` must be a valid `struct page`.
    pub(crate) fn tk_page_address(page: *const bindings::page) -> *mut core::ffi::c_void;
    /// `clear_pages(addr, npages)`, the kernel's own page clearing (rep
    /// stosb, rep stosq or unrolled stores). `addr` must be the kernel address of `npages` writable,
    /// page-aligned pages that nothing else accesses meanwhile.
    pub(crate) fn tk_clear_pages(addr: *mut core::ffi::c_void, npages: c_uint);
    /// Which `clear_pages()` variant the alternatives picked ("erms",
    /// "rep_good", "unrolled"), a static NUL-terminated string. No
    /// precondition.
    pub(crate) fn tk_clear_pages_variant() -> *const c_char;
    /// `want_init_on_alloc(GFP_KERNEL)`. No precondition.
    pub(crate) fn tk_init_on_alloc() -> bool;
    /// `alloc_contig_pages(nr_pages, GFP_KERNEL | __GFP_THISNODE |
    /// __GFP_NOWARN, nid, NULL)` (order-0 pages with one reference each),
    /// or with `folio` one compound folio of order `log2(nr_pages)` (at
    /// most `MAX_FOLIO_ORDER`) holding one reference; NULL on failure.
    /// Sleeps: process context only; `nid` must be an online node with
    /// memory.
    pub(crate) fn tk_alloc_contig(
        nr_pages: c_ulong,
        nid: c_int,
        movable: bool,
        folio: bool,
    ) -> *mut bindings::page;
    /// Drops the reference of a range from [`tk_alloc_contig`]:
    /// `folio_put()` for a folio (freed when the last holder puts it),
    /// `free_contig_range()` otherwise. `page` and `nr_pages` must be such
    /// a range, whose reference is dropped only once.
    pub(crate) fn tk_free_contig(page: *mut bindings::page, nr_pages: c_ulong);
    /// Makes a range of [`tk_alloc_contig`] without `folio` one compound
    /// folio of its order, holding the one reference of its head; the
    /// contents are untouched. 0, `-EINVAL` for a bad size, or `-EBUSY`
    /// when a page kept another reference (the range is then unchanged).
    /// `page` and `nr_pages` must be such a range, whose pages the caller
    /// owns, each with only its own reference; sleeps.
    pub(crate) fn tk_contig_to_folio(page: *mut bindings::page, nr_pages: c_ulong) -> c_int;
    /// `folio_ref_count(page_folio(page))`. `page` must be a valid page
    /// that its caller keeps allocated.
    pub(crate) fn tk_folio_ref_count(page: *mut bindings::page) -> c_int;
    /// KUnit only: `nr` more references on `page`'s folio (fewer if
    /// negative), as another holder takes them. `page` must be a valid
    /// page its caller keeps allocated; each added reference is put back.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn tk_test_page_ref_add(page: *mut bindings::page, nr: c_int);
    /// KUnit only: `GUP_PIN_COUNTING_BIAS`, what a `FOLL_PIN` of an order-0
    /// page adds to its references.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn tk_test_pin_bias() -> c_int;

    /// `cond_resched()`. Process context only, no spinlock held.
    pub(crate) fn tk_cond_resched();
    /// `schedule_timeout_interruptible(msecs_to_jiffies(ms))`: sleeps up to
    /// `ms` milliseconds, less on any signal. Process context, no spinlock
    /// held.
    pub(crate) fn tk_sleep_interruptible_ms(ms: c_uint);
    /// `ktime_get_ns()`. No precondition.
    pub(crate) fn tk_ktime_get_ns() -> u64;
    /// `alloc_workqueue("%s", WQ_PERCPU | WQ_CPU_INTENSIVE, 0, name)`; NULL
    /// on failure. `name` must be a NUL-terminated string;
    /// process context only. The result must go to `destroy_workqueue()`.
    pub(crate) fn tk_alloc_workqueue(name: *const c_char) -> *mut bindings::workqueue_struct;

    /// `__GFP_NORETRY`, which the bindings do not export. No precondition.
    pub(crate) fn tk_gfp_noretry() -> bindings::gfp_t;
    /// `__GFP_RETRY_MAYFAIL`. No precondition.
    pub(crate) fn tk_gfp_retry_mayfail() -> bindings::gfp_t;

    // Reliability (module/src/sync.rs, dev.rs).
    /// `fatal_signal_pending(current)`. No precondition.
    pub(crate) fn tk_fatal_signal_pending() -> bool;
    /// `mutex_lock_killable(lock)`: 0 when locked, `-EINTR` on a fatal
    /// signal. `lock` must be an initialized mutex; process context.
    pub(crate) fn tk_mutex_lock_killable(lock: *mut bindings::mutex) -> c_int;
    /// `mutex_lock_interruptible(lock)`: 0 when locked, `-EINTR` on any
    /// signal. `lock` must be an initialized mutex; process context.
    pub(crate) fn tk_mutex_lock_interruptible(lock: *mut bindings::mutex) -> c_int;
    /// `set_freezable()`. Only in a kthread, for the current one.
    pub(crate) fn tk_set_freezable();
    /// `totalram_pages()`. No precondition.
    pub(crate) fn tk_totalram_pages() -> c_ulong;

    // ZONE_MOVABLE and memory offlining (module/src/dev.rs, clear/range.rs).
    /// Whether node `nid` has managed pages in ZONE_MOVABLE; false for an
    /// offline node or an id out of range.
    pub(crate) fn tk_node_has_movable(nid: c_int) -> bool;
    /// `GFP_HIGHUSER_MOVABLE`. No precondition.
    pub(crate) fn tk_gfp_highuser_movable() -> bindings::gfp_t;
    /// An order-0 page on the nearest node with memory other than `nid`
    /// (`nid` itself if it is the only one), kernel zones first, to take
    /// the place of one of `nid`'s pages going offline, uncharged until
    /// [`tk_page_move_charge`] hands it that page's charge; NULL on
    /// failure. Process context.
    pub(crate) fn tk_alloc_page_away(nid: c_int) -> *mut bindings::page;
    /// An order-0 page on `nid` only (NULL for a node without memory),
    /// kernel zones first, ZONE_MOVABLE too if `movable`, to take the
    /// place of a page a rebalance moves there, uncharged as for
    /// [`tk_alloc_page_away`]; NULL on failure. Process context.
    pub(crate) fn tk_alloc_page_on(nid: c_int, movable: bool) -> *mut bindings::page;
    /// Hands `old`'s memory cgroup charge to `new` (see shim.c). `old`'s
    /// references must be frozen; `new` an uncharged page from
    /// [`tk_alloc_page_away`] or [`tk_alloc_page_on`] that no one else has.
    pub(crate) fn tk_page_move_charge(old: *mut bindings::page, new: *mut bindings::page);
    /// `folio_ref_freeze(page_folio(page), expected)`. `page` must be a
    /// valid page its caller owns a reference to.
    pub(crate) fn tk_page_ref_freeze(page: *mut bindings::page, expected: c_int) -> bool;
    /// `folio_ref_unfreeze(page_folio(page), count)`, after a successful
    /// [`tk_page_ref_freeze`] of `page`.
    pub(crate) fn tk_page_ref_unfreeze(page: *mut bindings::page, count: c_int);
    /// `copy_highpage(dst, src)`. Both valid pages; `dst` not shared.
    pub(crate) fn tk_copy_page(dst: *mut bindings::page, src: *mut bindings::page);
    /// `folio_maybe_dma_pinned(page_folio(page))`. `page` valid.
    pub(crate) fn tk_page_maybe_dma_pinned(page: *mut bindings::page) -> bool;
    /// `vm_insert_page(vma, addr, page)`: for the fault handler. `vma` is
    /// the faulting VM_MIXEDMAP vma, `page` a page the caller keeps alive.
    pub(crate) fn tk_vm_insert_page(
        vma: *mut bindings::vm_area_struct,
        addr: c_ulong,
        page: *mut bindings::page,
    ) -> c_int;
    /// Takes a reference to `page` and counts one more share of it
    /// (shim_vma.c, `page->private`). `page` must be a tierkit order-0
    /// page the caller holds a reference of.
    pub(crate) fn tk_page_share(page: *mut bindings::page);
    /// If `page` is shared, drops one share and the caller's reference
    /// and returns true; else false and nothing changed. The caller holds
    /// a reference of `page`, a tierkit order-0 page.
    pub(crate) fn tk_page_unshare(page: *mut bindings::page) -> bool;
    /// Whether `page` (a tierkit order-0 page) has a share count above 0.
    pub(crate) fn tk_page_shared(page: *mut bindings::page) -> bool;
    /// Gives `vma` the copy-on-write `vm_operations_struct` (write
    /// notified: `page_mkwrite`) and `backing` as its `vm_private_data`.
    /// As [`tk_vma_set_backing`]: only from `->mmap`.
    pub(crate) fn tk_vma_set_cow(vma: *mut bindings::vm_area_struct, backing: *mut core::ffi::c_void);
    /// Current's mmap lock for writing while the tierkit vmas in
    /// `start..end`, 4 KiB and gigantic, become copy-on-write ones (write
    /// notified, as [`tk_vma_set_cow`] and [`tk_vma_set_gigantic_cow`]
    /// make a snapshot's), then downgraded: 0 with the
    /// lock held for reading, or `-EINTR` with it not held. Process
    /// context with an mm, no mmap lock of it held.
    pub(crate) fn tk_mmap_lock_cow_current(start: c_ulong, end: c_ulong) -> c_int;
    /// Releases the read lock [`tk_mmap_lock_cow_current`] left held.
    pub(crate) fn tk_mmap_read_unlock_current();
    /// With current's mmap lock held: the `vm_private_data` of the
    /// tierkit vma at `addr` (NULL if there is none), the file page offset
    /// of `addr`, the vma's end, its file's `private_data` and whether it
    /// is a gigantic vma.
    pub(crate) fn tk_vma_backing_at(
        addr: c_ulong,
        pgoff: *mut c_ulong,
        end: *mut c_ulong,
        file_private: *mut *mut core::ffi::c_void,
        gigantic: *mut bool,
    ) -> *mut core::ffi::c_void;
    /// `register_memory_notifier()` of a notifier that calls `cb(ctx,
    /// start_pfn, nr_pages)` on `MEM_GOING_OFFLINE` and fails the offline
    /// with the negative errno `cb` returns. One registration at a time;
    /// `ctx` must stay valid until [`tk_unregister_memory_notifier`].
    pub(crate) fn tk_register_memory_notifier(
        cb: Option<
            unsafe extern "C" fn(
                ctx: *mut core::ffi::c_void,
                start_pfn: c_ulong,
                nr_pages: c_ulong,
            ) -> c_int,
        >,
        ctx: *mut core::ffi::c_void,
    ) -> c_int;
    /// Unregisters the notifier of [`tk_register_memory_notifier`]. It must
    /// be registered.
    pub(crate) fn tk_unregister_memory_notifier();

    // tierkit's pages in ZONE_MOVABLE (shim_movable.c, pages/movable.rs).
    /// Counts the `nr_pages` pages from `page` (an order-0 page, or a
    /// folio's head) if they are in ZONE_MOVABLE: 0, `-ENOMEM`, or
    /// `-EAGAIN` if an offline is taking their range down (nothing
    /// counted then; the caller gives them back and allocates again).
    /// `page` must be a fresh allocation the caller owns.
    pub(crate) fn tk_movable_track(page: *mut bindings::page, nr_pages: c_ulong) -> c_int;
    /// Gives back the caller's reference to `page` (order-0, or a folio's
    /// head of `nr_pages`), counted by [`tk_movable_track`]: freed now if
    /// it is the only one, else kept as an orphan until it is. The caller
    /// must own that reference; `page` is not touched afterwards.
    pub(crate) fn tk_movable_put(page: *mut bindings::page, nr_pages: c_ulong);
    /// Frees the orphans of pfns `start..start + nr` that only tierkit
    /// still holds and returns how many tierkit pages remain counted in the
    /// sections of that range. Process context.
    pub(crate) fn tk_movable_busy(start_pfn: c_ulong, nr_pages: c_ulong) -> c_ulong;
    /// How many orphans tierkit keeps now. No precondition.
    pub(crate) fn tk_movable_orphans() -> c_ulong;
    /// Module exit: stops the orphan work and puts tierkit's reference of
    /// every orphan. Nothing of tierkit's may be tracked or put afterwards.
    pub(crate) fn tk_movable_exit();
    /// `pfn_to_online_page(pfn)`: NULL for a pfn without a struct page or
    /// in an offline section (whose memmap may be poisoned). No
    /// precondition.
    pub(crate) fn tk_pfn_to_online_page(pfn: c_ulong) -> *mut bindings::page;

    // debugfs files with an owner (module/src/debugfs.rs).
    /// `debugfs_create_dir(name, parent)`: a dentry or an `ERR_PTR`.
    /// `name` NUL-terminated; `parent` NULL or a live debugfs directory.
    pub(crate) fn tk_debugfs_dir(
        name: *const c_char,
        parent: *mut bindings::dentry,
    ) -> *mut bindings::dentry;
    /// `debugfs_create_file()` with the shim's owned file operations
    /// (read-write if `attr->store` is set): a dentry or an `ERR_PTR`.
    /// `attr` must stay valid until the dentry is removed.
    pub(crate) fn tk_debugfs_file(
        name: *const c_char,
        mode: u16,
        parent: *mut bindings::dentry,
        attr: *mut core::ffi::c_void,
    ) -> *mut bindings::dentry;
    /// `debugfs_remove(d)`: recursive, waits for callbacks in flight.
    pub(crate) fn tk_debugfs_remove(d: *mut bindings::dentry);

    // /dev/tierkit mappings (module/src/dev.rs).
    /// Gives `vma` tierkit's `vm_operations_struct` (a fault handler that
    /// maps `tk_mapping_page(backing, pgoff)` again) and `backing` as its
    /// `vm_private_data`. Only from `->mmap` (mmap lock held for writing);
    /// `backing` must stay valid as long as the vma can fault, i.e. until
    /// the file is released. `movable`: its pages may be in
    /// ZONE_MOVABLE (the vma then refuses long-term writable pins with
    /// `EFAULT`, see shim_vma.c `tk_pfn_mkwrite()`).
    pub(crate) fn tk_vma_set_backing(
        vma: *mut bindings::vm_area_struct,
        backing: *mut core::ffi::c_void,
        movable: bool,
    );
}

// /dev/tierkit gigantic mappings: one PUD per GiB at first touch
// (module/src/dev.rs, mapping.rs).
#[expect(improper_ctypes)]
extern "C" {
    /// Points `file` at a copy of its file operations that has
    /// `get_unmapped_area` (GiB-aligned addresses for mappings of a GiB or
    /// more at a GiB-aligned offset), with the same `owner`. Only from the
    /// device's `open`; `file` must be the file being opened.
    pub(crate) fn tk_file_use_dev_fops(file: *mut bindings::file);
    /// Gives `file` (being opened) an address space of its own as its
    /// `f_mapping`; 0 or `-ENOMEM`.
    pub(crate) fn tk_file_own_mapping(file: *mut bindings::file) -> c_int;
    /// Frees the address space [`tk_file_own_mapping`] gave `file`, in its
    /// `->release` (no vma of it is left); nothing if it has none.
    pub(crate) fn tk_file_put_mapping(file: *mut bindings::file);
    /// The `/dev/tierkit` file that process `pid` (in the caller's pid
    /// namespace) maps at `addr`, with a reference the caller owns, the
    /// bounds of that vma in `start`/`end` and the file's id (unique per
    /// open since the module was loaded) in `id`; or an `ERR_PTR`:
    /// `-ESRCH` (no such process or no mm), `-ENOENT` (nothing mapped
    /// there), `-ENODEV` (not a tierkit mapping), `-EINTR` (a fatal signal
    /// while waiting for its mmap_lock). Process context; the three out
    /// pointers must be valid for writes.
    pub(crate) fn tk_mapped_file(
        pid: c_int,
        addr: c_ulong,
        start: *mut c_ulong,
        end: *mut c_ulong,
        id: *mut u64,
    ) -> *mut bindings::file;
    /// Gives `vma` the gigantic `vm_operations_struct` (PUD `huge_fault`,
    /// 4 KiB pages of the GiB for smaller faults, splits and moves only at GiB
    /// boundaries), `VM_HUGEPAGE`, and `backing` as its `vm_private_data`.
    /// Only from `->mmap` (mmap lock held for writing) of a `VM_MIXEDMAP`
    /// vma; `backing` must stay valid until the file is released.
    /// `movable`: its GiBs may come from ZONE_MOVABLE (as
    /// [`tk_vma_set_backing`]).
    pub(crate) fn tk_vma_set_gigantic(
        vma: *mut bindings::vm_area_struct,
        backing: *mut core::ffi::c_void,
        movable: bool,
    );
    /// The PUD insert of a gigantic fault (`vmf`, a fault of a gigantic
    /// vma): `pfn` mapped read-only, or writable for a `write`, as the
    /// PUD slot allows; `*stale` set if the slot holds another GiB's leaf.
    /// Only from `mapping::tk_gigantic_map_pud`, the backing's lock held.
    pub(crate) fn tk_gigantic_insert_pud(
        vmf: *mut bindings::vm_fault,
        pfn: c_ulong,
        write: bool,
        stale: *mut bool,
    ) -> bindings::vm_fault_t;
    /// The PTE insert of a 4 KiB gigantic fault: `vm_insert_page()` of
    /// `page` at the fault's address, if a PMD table is in the PUD slot.
    /// Only from `mapping::tk_gigantic_map_pte`, the backing's lock held.
    pub(crate) fn tk_gigantic_insert_pte(
        vmf: *mut bindings::vm_fault,
        page: *mut bindings::page,
    ) -> bindings::vm_fault_t;
    /// [`tk_vma_set_gigantic`] for the gigantic part of a fork's snapshot:
    /// the copy-on-write gigantic `vm_operations_struct` (write notified:
    /// `page_mkwrite`). Only from `->mmap`, as that function.
    pub(crate) fn tk_vma_set_gigantic_cow(
        vma: *mut bindings::vm_area_struct,
        backing: *mut core::ffi::c_void,
    );
    /// What maps `addr` in the current task's page tables: a
    /// `TK_WALK_*` level (`uapi.rs`; `TK_WALK_PTE`: a PTE table covers
    /// it), with, for a PUD or PMD leaf, the pfn of the 4 KiB page at
    /// `addr` and its node (-1 if none) in `pfn` and `nid`; `-EFAULT` if
    /// no vma covers `addr`, `-EINTR` on a fatal signal. Process context;
    /// takes the mmap lock for reading.
    #[cfg(tierkit_test)]
    pub(crate) fn tk_walk(addr: c_ulong, pfn: *mut c_ulong, nid: *mut c_int) -> c_int;
    /// Who holds the folio of `pfn` (`TK_IOC_PAGE_REFS`): fills every out
    /// argument; 0, or `-EINVAL` if `pfn` has no struct page. All
    /// pointers must be valid for writes. Any context.
    #[cfg(tierkit_test)]
    pub(crate) fn tk_page_refs(
        pfn: c_ulong,
        refcount: *mut c_int,
        mapcount: *mut c_int,
        order: *mut c_uint,
        nid: *mut c_int,
        flags: *mut c_uint,
    ) -> c_int;
}

// The pre-cleared gigantic pool (module/src/clear/ready.rs, refill.rs).
extern "C" {
    /// Managed pages of `nid` in its kernel zones, plus ZONE_MOVABLE with
    /// `movable`: the most a gigantic range could come from. 0 for an
    /// offline or out-of-range node. No precondition.
    pub(crate) fn tk_node_gigantic_capacity(nid: c_int, movable: bool) -> c_ulong;
    /// Restricts the current task to the CPUs of `cpu_node` (nothing if it
    /// has none). No precondition.
    pub(crate) fn tk_bind_to_node_cpus(cpu_node: c_int);
    /// `SHRINKER_NUMA_AWARE`, for `shrinker_alloc()`. No precondition.
    pub(crate) fn tk_shrinker_numa_aware() -> c_uint;
}

/// Safe view of the node facts the module asks for everywhere.
pub(crate) mod node {
    use kernel::ffi::c_int;

    /// `nid` as a C `int`, `None` if it does not fit (no such node).
    fn to_c(nid: usize) -> Option<c_int> {
        c_int::try_from(nid).ok()
    }

    /// `nr_node_ids`: one more than the highest possible node id.
    pub(crate) fn nr_node_ids() -> usize {
        // SAFETY: reads a variable that is fixed after boot.
        let n = unsafe { super::tk_nr_node_ids() };
        usize::try_from(n).unwrap_or(0)
    }

    /// `min(nr_node_ids, 64)`: the node ids tierkit deals with.
    pub(crate) fn possible_nodes() -> usize {
        nr_node_ids().min(crate::interleave::MAX_NUMNODES)
    }

    /// `node_online(nid)`, false for ids out of range.
    pub(crate) fn online(nid: usize) -> bool {
        let Some(nid) = to_c(nid) else { return false };
        // SAFETY: no precondition: the shim range-checks `nid`.
        unsafe { super::tk_node_online(nid) }
    }

    /// `node_state(nid, N_MEMORY)`, false for ids out of range.
    pub(crate) fn has_memory(nid: usize) -> bool {
        let Some(nid) = to_c(nid) else { return false };
        // SAFETY: no precondition: the shim range-checks `nid`.
        unsafe { super::tk_node_has_memory(nid) }
    }

    /// `node_state(nid, N_CPU)`, false for ids out of range.
    pub(crate) fn has_cpu(nid: usize) -> bool {
        let Some(nid) = to_c(nid) else { return false };
        // SAFETY: no precondition: the shim range-checks `nid`.
        unsafe { super::tk_node_has_cpu(nid) }
    }

    /// Online CPUs of `nid`, 0 for an offline node or an id out of range.
    pub(crate) fn nr_cpus(nid: usize) -> u32 {
        let Some(c_nid) = to_c(nid) else { return 0 };
        if !online(nid) {
            return 0;
        }
        // SAFETY: `nid` is an online node, as the shim requires.
        unsafe { super::tk_nr_cpus_node(c_nid) }
    }

    /// Free pages on `nid`, summed over its zones (pages), the per-CPU
    /// free lists and the unfolded per-CPU vmstat deltas included; 0 for an
    /// offline node or an id out of range.
    pub(crate) fn free_pages(nid: usize) -> u64 {
        let Some(nid) = to_c(nid) else { return 0 };
        // SAFETY: no precondition: the shim checks that `nid` is online
        // before reading NODE_DATA.
        unsafe { super::tk_node_free_pages(nid) as u64 }
    }
}

// Test fills (KUnit suites of clear/ and wi/).
extern "C" {
    /// `memset64(addr, value, count)`: `count` 64-bit words of `value` at
    /// `addr` (`rep stosq` on x86_64).
    ///
    /// # Safety
    ///
    /// `addr` must be 8-byte aligned and valid for writes of `count * 8`
    /// bytes that nothing else accesses meanwhile.
    pub(crate) fn tk_memset64(addr: *mut core::ffi::c_void, value: u64, count: usize);
}
