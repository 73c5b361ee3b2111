// SPDX-License-Identifier: GPL-2.0

//! One order-0 page on a chosen node ([`NodePage`]) and the count of
//! tierkit's pages in ZONE_MOVABLE ([`movable`]). The pages of a mapping,
//! placed by the selector, are [`crate::placed`]'s.
//!
//! The kernel crate's [`kernel::page::Page`] can only be allocated without a
//! node (`Page::alloc_page`) and has no constructor from a raw page, so
//! [`NodePage`] owns an order-0 page from `alloc_pages_node()` itself (through
//! the shim, with `__GFP_THISNODE`: a page is on the node asked for or the
//! allocation fails). The pages of a mapping go to `vm_insert_pages()` as
//! one array ([`crate::placed::PlacedPages::raw_pages`]).

pub(crate) mod movable;

use crate::interleave::MAX_NUMNODES;
use crate::shim;
use core::ptr::NonNull;
use kernel::{bindings, ffi::c_int, page::PAGE_SIZE, prelude::*};

/// An owned order-0 page allocated on a given node, or a share of one.
///
/// # Invariants
///
/// `page` points to a valid `struct page` of an order-0 allocation that this
/// object holds one reference of, given back on drop. The allocation is
/// counted once by [`movable::own`] if it is in ZONE_MOVABLE. Several
/// `NodePage`s may hold the same page after a fork ([`NodePage::share`]):
/// its share count (shim_vma.c `tk_page_share()`) is their number less
/// one, and only the last to drop gives the page back through
/// [`movable::put`]; the others drop a plain reference.
///
/// `repr(transparent)`: a `[NodePage]` has the layout of a `[*mut page]`
/// (see [`crate::placed::PlacedPages::raw_pages`]).
#[repr(transparent)]
pub(crate) struct NodePage {
    page: NonNull<bindings::page>,
}

// SAFETY: A page allocation is not tied to the thread that made it.
unsafe impl Send for NodePage {}
// SAFETY: `NodePage` offers no interior mutability through `&self` except
// raw access to the page's bytes, whose users document their own exclusion.
unsafe impl Sync for NodePage {}

impl NodePage {
    /// Allocates one page on `nid` with `gfp | __GFP_THISNODE |
    /// __GFP_NOWARN`: never another node's memory.
    ///
    /// Errors: `EINVAL` for `nid >= MAX_NUMNODES`; `ENOMEM` when the node
    /// has no page to give, including a node without memory (a policy may
    /// name a node whose memory went offline after it was set: tierkit
    /// places strictly, where the kernel's `alloc_pages_node()` would fall
    /// back to the node's zonelist).
    pub(crate) fn alloc_gfp(nid: usize, gfp: bindings::gfp_t) -> Result<NodePage> {
        if nid >= MAX_NUMNODES {
            return Err(EINVAL);
        }
        if !shim::node::has_memory(nid) {
            return Err(ENOMEM);
        }
        // SAFETY: `nid` is a node with memory; the flags allow sleeping,
        // which is fine in the process context of every caller; each
        // result is NULL or a fresh order-0 page.
        let page = unsafe {
            movable::own(|| shim::tk_alloc_pages_node(nid as c_int, gfp, 0))
        }?;
        // INVARIANT: an owned page, counted by `own`.
        Ok(NodePage { page })
    }

    /// `GFP_KERNEL_ACCOUNT | __GFP_RETRY_MAYFAIL | extra` on `nid`, from the node's kernel zones
    /// first; when they have nothing and the node has ZONE_MOVABLE memory
    /// (a CXL node onlined `online_movable`), from there
    /// (`GFP_HIGHUSER_MOVABLE | __GFP_ACCOUNT | extra`). tierkit moves such
    /// pages away itself when their block goes offline
    /// (module/src/mapping.rs).
    pub(crate) fn alloc_user(nid: usize, extra: bindings::gfp_t) -> Result<NodePage> {
        // A shortage, or a charge past the cgroup's memory.max, fails the
        // syscall with ENOMEM instead of OOM-killing a task.
        // SAFETY: no precondition.
        let extra = extra | unsafe { shim::tk_gfp_retry_mayfail() };
        Self::alloc_gfp(nid, bindings::GFP_KERNEL_ACCOUNT | extra).or_else(|e| {
            // SAFETY: the shim range-checks `nid`.
            if e == ENOMEM && unsafe { shim::tk_node_has_movable(nid as c_int) } {
                // SAFETY: no precondition.
                let movable = unsafe { shim::tk_gfp_highuser_movable() };
                // GFP_KERNEL_ACCOUNT is GFP_KERNEL | __GFP_ACCOUNT.
                let account = bindings::GFP_KERNEL_ACCOUNT & !bindings::GFP_KERNEL;
                Self::alloc_gfp(nid, movable | account | extra)
            } else {
                Err(e)
            }
        })
    }

    /// A zeroed page on `nid` for userspace, charged to the caller's memory
    /// cgroup (see [`alloc_user`](Self::alloc_user)). The page is cleared by
    /// the allocator (`__GFP_ZERO`) whatever `init_on_alloc` says: with it
    /// on, the allocator clears once for both reasons.
    pub(crate) fn alloc_zeroed(nid: usize) -> Result<NodePage> {
        Self::alloc_user(nid, bindings::__GFP_ZERO)
    }

    /// A page on `nid` whose contents are whatever was there (zero only if
    /// `init_on_alloc` is on), charged like [`alloc_zeroed`](Self::alloc_zeroed).
    /// Never handed to userspace.
    pub(crate) fn alloc_uninit(nid: usize) -> Result<NodePage> {
        Self::alloc_user(nid, 0)
    }

    /// A page on `nid` for a copy-on-write copy (module/src/mapping/cow.rs),
    /// charged to the faulting task's memory cgroup; from ZONE_MOVABLE only
    /// if `movable` (the backing's vmas refuse long-term pins). Not zeroed:
    /// the caller copies into it. `ENOMEM` on failure.
    pub(crate) fn alloc_copy(nid: usize, movable: bool) -> Result<NodePage> {
        if movable {
            return Self::alloc_uninit(nid);
        }
        // SAFETY: no precondition.
        let extra = unsafe { shim::tk_gfp_retry_mayfail() };
        Self::alloc_gfp(nid, bindings::GFP_KERNEL_ACCOUNT | extra)
    }

    /// A page on the nearest node with memory other than `nid`, to take
    /// the place of one of `nid`'s pages whose memory goes offline (the
    /// target `do_migrate_range()` would pick), uncharged until the move
    /// hands it that page's charge. Not zeroed: the caller copies into it.
    /// `ENOMEM` on failure.
    pub(crate) fn alloc_away(nid: usize) -> Result<NodePage> {
        let nid = c_int::try_from(nid).map_err(|_| EINVAL)?;
        // SAFETY: process context; the shim allocates an order-0 page.
        let page = unsafe { movable::own(|| shim::tk_alloc_page_away(nid)) }?;
        // INVARIANT: an owned page, counted by `own`.
        Ok(NodePage { page })
    }

    /// A page on `nid` and no other node, to take the place of a page a
    /// rebalance moves there, uncharged until the move hands it that
    /// page's charge; from
    /// ZONE_MOVABLE too only if `movable`. Not zeroed: the caller copies
    /// into it. `ENOMEM` on failure, also for a node without memory.
    pub(crate) fn alloc_on(nid: usize, movable: bool) -> Result<NodePage> {
        let nid = c_int::try_from(nid).map_err(|_| EINVAL)?;
        // SAFETY: process context; the shim range-checks `nid` and
        // allocates an order-0 page.
        let page = unsafe { movable::own(|| shim::tk_alloc_page_on(nid, movable)) }?;
        // INVARIANT: an owned page, counted by `own`.
        Ok(NodePage { page })
    }

    /// Another holder of the same page, for a fork's copy-on-write
    /// snapshot (module/src/mapping/cow.rs): takes a reference and counts
    /// the share. Neither holder may write the page while it is shared.
    pub(crate) fn share(&self) -> NodePage {
        // SAFETY: By the type invariant, `self.page` is a valid page we
        // hold a reference of; the shim takes another.
        unsafe { shim::tk_page_share(self.page.as_ptr()) };
        // INVARIANT: a new reference, and the share counted.
        NodePage { page: self.page }
    }

    /// Whether another [`NodePage`] holds this page too (see
    /// [`share`](Self::share)). Only a holder can make it shared, so
    /// `false` stays true while the caller keeps others from sharing it.
    pub(crate) fn is_shared(&self) -> bool {
        // SAFETY: By the type invariant, `self.page` is a valid page.
        unsafe { shim::tk_page_shared(self.page.as_ptr()) }
    }

    /// `page_to_pfn()`.
    pub(crate) fn pfn(&self) -> u64 {
        // SAFETY: By the type invariant, `self.page` is a valid page.
        unsafe { shim::tk_page_to_pfn(self.page.as_ptr()) as u64 }
    }

    /// The `struct page`, owned by `self`.
    pub(crate) fn as_ptr(&self) -> *mut bindings::page {
        self.page.as_ptr()
    }

    /// `page_to_nid()`.
    pub(crate) fn nid(&self) -> usize {
        // SAFETY: By the type invariant, `self.page` is a valid page.
        unsafe { bindings::page_to_nid(self.page.as_ptr()) as usize }
    }

    /// The page's bytes through its direct-map address. x86_64 has no
    /// highmem, so `page_address()` is always valid.
    fn addr(&self) -> *mut u8 {
        // SAFETY: By the type invariant, `self.page` is a valid page.
        unsafe { shim::tk_page_address(self.page.as_ptr()).cast::<u8>() }
    }

    /// Fills the page with `byte`.
    ///
    /// Uses `memset64()` (`rep stosq`): `memset()` is `rep stosb` on CPUs
    /// with FSRS, which QEMU's TCG runs one byte at a time, 8 times slower.
    ///
    /// # Safety
    ///
    /// No one else may access the page's contents concurrently (e.g. it is
    /// not mapped to userspace).
    pub(crate) unsafe fn fill(&self, byte: u8) {
        // SAFETY: `addr()` is page-aligned and valid for PAGE_SIZE bytes;
        // the caller excludes concurrent access.
        unsafe {
            shim::tk_memset64(
                self.addr().cast::<c_void>(),
                u64::from(byte) * 0x0101_0101_0101_0101,
                PAGE_SIZE / 8,
            )
        };
    }

    /// Whether every byte of the page is `byte`.
    ///
    /// # Safety
    ///
    /// No one may write the page's contents concurrently.
    ///
    /// Uses the kernel's `memchr_inv()`: 8 bytes per access, and not
    /// instrumented per access under KASAN.
    pub(crate) unsafe fn all_bytes_are(&self, byte: u8) -> bool {
        // SAFETY: `addr()` is valid for PAGE_SIZE bytes and nobody writes
        // them concurrently (caller's promise); memchr_inv() only reads
        // them.
        unsafe { bindings::memchr_inv(self.addr().cast::<c_void>(), c_int::from(byte), PAGE_SIZE) }
            .is_null()
    }
}

impl Drop for NodePage {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we hold a reference. Shared: the
        // shim drops it and one share (another `NodePage` still holds the
        // page and its count).
        if unsafe { shim::tk_page_unshare(self.page.as_ptr()) } {
            return;
        }
        // SAFETY: By the type invariant, we are the last holder of this
        // order-0 page, made by `movable::own`. If it is also mapped into
        // userspace, `vm_insert_page()` took its own reference; another
        // holder (a pipe) keeps it an orphan of tierkit's until it lets go.
        unsafe { movable::put(self.page) };
    }
}
