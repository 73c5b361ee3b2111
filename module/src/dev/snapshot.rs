// SPDX-License-Identifier: GPL-2.0

//! `/dev/tierkit`'s copy-on-write snapshots for fork: `TK_IOC_SNAPSHOT`
//! and the `mmap` that takes a snapshot (the work is in
//! `crate::mapping::cow`).

use super::{small_may_be_movable, FileState, TkFile, MAX_FILE_GIGANTIC, MAX_FILE_PAGES};
use crate::chunks::GIGANTIC_PAGES;
use crate::mapping::cow::{self, SnapPages};
use crate::mapping::{Backing, BackingPages};
use crate::uapi::TkSnapshot;
use crate::wi::Policy;
use kernel::{
    bindings, ffi::c_void, mm::virt::VmaNew, page::PAGE_SIZE, prelude::*, transmute::FromBytes,
    uaccess::UserSlice,
};

// SAFETY: `repr(C)`, two u64, no padding (uapi.rs).
unsafe impl FromBytes for TkSnapshot {}

impl TkFile {
    /// `TK_IOC_SNAPSHOT`: see `mapping::cow`. The caller's mmap lock is
    /// taken first (as `mmap` takes a file's lock under it), then each
    /// source file's lock for its policy, then this file's.
    pub(super) fn snapshot(&self, arg: usize) -> Result<isize> {
        let mut reader = UserSlice::new(UserPtr::from_addr(arg), size_of::<TkSnapshot>()).reader();
        let a: TkSnapshot = reader.read()?;
        let addr = usize::try_from(a.addr).map_err(|_| EINVAL)?;
        let len = usize::try_from(a.len).map_err(|_| EINVAL)?;
        let me = core::ptr::from_ref::<TkFile>(self).cast::<c_void>();
        let mut policy: Option<Policy> = None;
        let limits = (MAX_FILE_PAGES, MAX_FILE_GIGANTIC);
        let snap = cow::snapshot(&self.device, addr, len, limits, |src| {
            if src == me.cast_mut() {
                return Err(EINVAL);
            }
            // SAFETY: `src` is the `private_data` of the file of a live
            // tierkit vma (its mmap lock is held): the `TkFile` that
            // `open` returned, alive while the file is.
            let f = unsafe { &*src.cast::<TkFile>() };
            let p = f.state.lock()?.policy.ok_or(EINVAL)?;
            match policy {
                Some(q) if q != p => Err(EINVAL),
                _ => {
                    policy = Some(p);
                    Ok(())
                }
            }
        })?;
        let mut st = self.state.lock()?;
        if st.mapped || st.gigantic.is_some() || (st.policy.is_some() && st.policy != policy) {
            return Err(EINVAL);
        }
        st.snapshots.push(snap, GFP_KERNEL)?;
        st.policy = policy;
        st.cow = true;
        Ok(0)
    }

    /// `mmap` of a snapshot's file (`TK_IOC_SNAPSHOT`): the snapshot at
    /// this file offset and length becomes the mapping's backing, its vmas
    /// copy on write; nothing is allocated or inserted (a fault maps each
    /// page, or GiB, read-only). Returns the backing and whether it is a
    /// gigantic one. `EINVAL` if the file has no such snapshot, or for a
    /// gigantic one at an address that is not GiB aligned.
    pub(super) fn mmap_snapshot(
        &self,
        st: &mut FileState,
        vma: &VmaNew,
        pgoff: u64,
        nr_pages: usize,
        mapping: *mut bindings::address_space,
    ) -> Result<(Pin<KBox<Backing>>, bool)> {
        let i = st
            .snapshots
            .iter()
            .position(|s| s.pgoff == pgoff && s.pages.nr_pages() == nr_pages)
            .ok_or(EINVAL)?;
        let gigantic = st
            .snapshots
            .get(i)
            .is_some_and(|s| matches!(s.pages, SnapPages::Gigantic(..)));
        if gigantic && vma.start() % (GIGANTIC_PAGES as usize * PAGE_SIZE) != 0 {
            return Err(EINVAL);
        }
        let movable =
            st.snapshots.get(i).is_some_and(|s| s.movable) || (!gigantic && small_may_be_movable());
        let _ = vma.set_mixedmap();
        let snap = st.snapshots.remove(i)?;
        let (pages, plan) = match snap.pages {
            SnapPages::Small(p) => (BackingPages::Small(p), None),
            SnapPages::Gigantic(g, plan) => (BackingPages::Gigantic(g), Some(plan)),
        };
        let backing = Backing::new(
            &self.device,
            mapping,
            pgoff,
            pages,
            plan,
            snap.reservation,
            movable,
        )?;
        if !gigantic {
            st.nr_pages += nr_pages;
        }
        Ok((backing, gigantic))
    }
}
