// SPDX-License-Identifier: GPL-2.0

//! Declarations of the C shim in `shim.c`.
//!
//! Each function is a one-line wrapper around a `static inline` function or a
//! macro of the kernel that bindgen cannot export. Signatures must match
//! `shim.c` exactly.

use kernel::bindings;
use kernel::ffi::{c_char, c_int, c_uint, c_ulong};

// `struct page` ends in a zero-sized bindgen array (`its_array`), which
// rustc calls FFI-unsafe; only pointers to it cross the boundary.
#[allow(improper_ctypes)]
extern "C" {
    pub(crate) fn tk_nr_cpu_ids() -> c_uint;
    pub(crate) fn tk_cpu_online(cpu: c_int) -> bool;
    pub(crate) fn tk_node_next_cpu(nid: c_int, prev: c_int) -> c_int;
    pub(crate) fn tk_nr_cpus_node(nid: c_int) -> c_uint;
    pub(crate) fn tk_nr_node_ids() -> c_int;
    pub(crate) fn tk_node_online(nid: c_int) -> bool;
    pub(crate) fn tk_node_has_memory(nid: c_int) -> bool;
    pub(crate) fn tk_node_has_cpu(nid: c_int) -> bool;
    pub(crate) fn tk_nearest_cpu_node(nid: c_int) -> c_int;
    pub(crate) fn tk_node_free_pages(nid: c_int) -> c_ulong;

    pub(crate) fn tk_alloc_pages_node(
        nid: c_int,
        gfp: bindings::gfp_t,
        order: c_uint,
    ) -> *mut bindings::page;
    pub(crate) fn tk_page_to_pfn(page: *const bindings::page) -> c_ulong;
    pub(crate) fn tk_pfn_to_page(pfn: c_ulong) -> *mut bindings::page;
    pub(crate) fn tk_page_address(page: *const bindings::page) -> *mut core::ffi::c_void;
    pub(crate) fn tk_page_to_nid(page: *const bindings::page) -> c_int;
    pub(crate) fn tk_clear_pages(addr: *mut core::ffi::c_void, npages: c_uint);
    pub(crate) fn tk_clear_pages_variant() -> *const c_char;
    pub(crate) fn tk_init_on_alloc() -> bool;
    pub(crate) fn tk_alloc_contig(nr_pages: c_ulong, nid: c_int) -> *mut bindings::page;
    pub(crate) fn tk_free_contig(page: *mut bindings::page, nr_pages: c_ulong);

    pub(crate) fn tk_cond_resched();
    pub(crate) fn tk_ktime_get_ns() -> u64;
    pub(crate) fn tk_alloc_workqueue(name: *const c_char) -> *mut bindings::workqueue_struct;

    // Weighted interleave: node hotplug (module/src/wi/debugfs.rs).
    pub(crate) fn tk_register_node_notifier(
        cb: Option<unsafe extern "C" fn(ctx: *mut core::ffi::c_void, nid: c_int, added: bool)>,
        ctx: *mut core::ffi::c_void,
    ) -> c_int;
    pub(crate) fn tk_unregister_node_notifier();
    pub(crate) fn tk_gfp_noretry() -> bindings::gfp_t;
}

/// Safe view of the node facts the module asks for everywhere.
pub(crate) mod node {
    use kernel::ffi::c_int;

    /// `nr_node_ids`: one more than the highest possible node id.
    pub(crate) fn nr_node_ids() -> usize {
        // SAFETY: reads a variable that is fixed after boot.
        let n = unsafe { super::tk_nr_node_ids() };
        n.max(0) as usize
    }

    /// `node_online(nid)`, false for ids out of range.
    pub(crate) fn online(nid: usize) -> bool {
        // SAFETY: the shim range-checks `nid` before reading the node state.
        unsafe { super::tk_node_online(nid as c_int) }
    }

    /// `node_state(nid, N_MEMORY)`, false for ids out of range.
    pub(crate) fn has_memory(nid: usize) -> bool {
        // SAFETY: the shim range-checks `nid` before reading the node state.
        unsafe { super::tk_node_has_memory(nid as c_int) }
    }

    /// `node_state(nid, N_CPU)`, false for ids out of range.
    pub(crate) fn has_cpu(nid: usize) -> bool {
        // SAFETY: the shim range-checks `nid` before reading the node state.
        unsafe { super::tk_node_has_cpu(nid as c_int) }
    }

    /// Online CPUs of `nid`.
    pub(crate) fn nr_cpus(nid: usize) -> u32 {
        if !online(nid) {
            return 0;
        }
        // SAFETY: `nid` is an online node, so `cpumask_of_node(nid)` is valid.
        unsafe { super::tk_nr_cpus_node(nid as c_int) }
    }

    /// Free pages on `nid`, summed over its zones (pages).
    pub(crate) fn free_pages(nid: usize) -> u64 {
        // SAFETY: the shim checks that `nid` is online before reading NODE_DATA.
        unsafe { super::tk_node_free_pages(nid as c_int) as u64 }
    }
}
