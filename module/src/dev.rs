// SPDX-License-Identifier: GPL-2.0

//! `/dev/tierkit`: a misc device whose open files carry a placement policy
//! and hand out pages placed by it. The ABI (ioctls in
//! `module/core/src/uapi.rs`, mmap) is documented in
//! `Documentation/ABI/testing/dev-tierkit`.

use crate::interleave::{TaskState, MAX_NUMNODES};
use crate::uapi::{self, TkBulk, TkPolicy, TkTaskNext};
use crate::wi::{
    pages::{self, PlacedPages},
    Mode, Policy, Wi,
};
use kernel::{
    container_of,
    fs::File,
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    mm::virt::{flags as vm_flags, VmaNew},
    new_mutex,
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    sync::{Arc, Mutex},
    transmute::{AsBytes, FromBytes},
    uaccess::UserSlice,
};

// SAFETY: `TkPolicy` is `repr(C)` with only integer fields and no padding
// (4 + 4 + 8 + 64 bytes): every bit pattern is valid.
unsafe impl FromBytes for TkPolicy {}
// SAFETY: as above, no padding and no interior mutability.
unsafe impl AsBytes for TkPolicy {}
// SAFETY: `repr(C)`, integers only, no padding (8 + 512 + 4 + 4 bytes).
unsafe impl FromBytes for TkBulk {}
// SAFETY: as above.
unsafe impl AsBytes for TkBulk {}
// SAFETY: `repr(C)`, integers only, no padding (4 + 4 + 256 bytes).
unsafe impl FromBytes for TkTaskNext {}
// SAFETY: as above.
unsafe impl AsBytes for TkTaskNext {}

/// The most 4 KiB pages one open file holds (1 GiB): a single `mmap` above
/// it is `EINVAL`, one that would take the file past it is `ENOMEM`.
pub(crate) const MAX_FILE_PAGES: usize = 1 << 18;

/// The most pages one `TK_IOC_BULK` call allocates (4 GiB).
pub(crate) const MAX_BULK_PAGES: u64 = 1 << 20;

/// The registered device and the state its files share.
///
/// # Invariants
///
/// Every `MiscDeviceRegistration<TkFile>` is the `reg` field of a `TkDevice`
/// (this is the only place that creates one), so `TkFile::open` can get back
/// to the `TkDevice` from the registration.
#[pin_data]
pub(crate) struct TkDevice {
    wi: Arc<Wi>,
    #[pin]
    reg: MiscDeviceRegistration<TkFile>,
}

impl TkDevice {
    /// Registers `/dev/tierkit`, whose files use the weight table of `wi`.
    pub(crate) fn new(wi: Arc<Wi>) -> impl PinInit<Self, Error> {
        try_pin_init!(TkDevice {
            // `wi` is initialized before the device is registered, so an
            // early open() finds it.
            wi,
            reg <- MiscDeviceRegistration::register(MiscDeviceOptions { name: c"tierkit" }),
        })
    }
}

/// What an open file has: policy, task state, pages.
struct FileState {
    /// Set by `TK_IOC_SET_POLICY`; `None` until then.
    policy: Option<Policy>,
    /// `il_prev`/`il_weight` for the task and bulk paths.
    task: TaskState,
    /// Set by the first successful `mmap`; the policy is fixed from then on.
    mapped: bool,
    /// Pages of every mapping made, freed when the file is released.
    mappings: KVec<PlacedPages>,
    /// Pages in `mappings`.
    nr_pages: usize,
}

/// An open `/dev/tierkit`.
#[pin_data]
pub(crate) struct TkFile {
    wi: Arc<Wi>,
    #[pin]
    state: Mutex<FileState>,
}

impl TkFile {
    /// `TK_IOC_SET_POLICY`.
    fn set_policy(&self, arg: usize) -> Result<isize> {
        let (mut reader, mut writer) =
            UserSlice::new(UserPtr::from_addr(arg), size_of::<TkPolicy>()).reader_writer();
        let mut p: TkPolicy = reader.read()?;
        // User memory is only touched outside the file's lock: mmap() takes
        // the lock under mmap_lock, and a fault here takes mmap_lock.
        {
            let mut st = self.state.lock();
            if st.mapped {
                return Err(EBUSY);
            }
            let policy = Policy::new(p.mode, p.flags, p.nodemask)?;
            st.policy = Some(policy);
            // do_set_mempolicy(): a new (weighted) interleave policy starts
            // before the first node.
            st.task = TaskState::new();
            p.nodemask = policy.mask.0;
        }
        p.weights = self.wi.weights().effective();
        writer.write(&p)?;
        Ok(0)
    }

    /// The policy if it is weighted interleave, else `EINVAL`.
    fn weighted_policy(st: &FileState) -> Result<Policy> {
        match st.policy {
            Some(p) if p.mode == Mode::Weighted => Ok(p),
            _ => Err(EINVAL),
        }
    }

    /// `TK_IOC_TASK_NEXT`.
    fn task_next(&self, arg: usize) -> Result<isize> {
        let (mut reader, mut writer) =
            UserSlice::new(UserPtr::from_addr(arg), size_of::<TkTaskNext>()).reader_writer();
        let mut t: TkTaskNext = reader.read()?;
        let count = t.count as usize;
        if count == 0 || count > uapi::TK_TASK_NEXT_MAX {
            return Err(EINVAL);
        }
        {
            let mut st = self.state.lock();
            let policy = Self::weighted_policy(&st)?;
            let weights = self.wi.weights();
            for slot in t.nodes.iter_mut().take(count) {
                let nid = st.task.next(policy.mask, &weights).ok_or(EINVAL)?;
                *slot = nid as u8;
            }
        }
        writer.write(&t)?;
        Ok(0)
    }

    /// `TK_IOC_BULK`.
    fn bulk(&self, arg: usize) -> Result<isize> {
        let (mut reader, mut writer) =
            UserSlice::new(UserPtr::from_addr(arg), size_of::<TkBulk>()).reader_writer();
        let mut b: TkBulk = reader.read()?;
        if b.nr_pages == 0 || b.nr_pages > MAX_BULK_PAGES {
            return Err(EINVAL);
        }
        {
            let mut st = self.state.lock();
            let policy = Self::weighted_policy(&st)?;
            let weights = self.wi.weights();
            let mut per_node = [0u64; MAX_NUMNODES];
            let mut task = st.task;
            pages::bulk(&self.wi, policy.mask, &weights, &mut task, b.nr_pages, &mut per_node)?;
            st.task = task;
            b.per_node = per_node;
            b.il_prev = task.il_prev();
            b.il_weight = task.il_weight() as u32;
        }
        writer.write(&b)?;
        Ok(0)
    }
}

#[vtable]
impl MiscDevice for TkFile {
    type Ptr = Pin<KBox<Self>>;

    fn open(_file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<Pin<KBox<Self>>> {
        // SAFETY: by the invariant of `TkDevice`, `misc` is the `reg` field
        // of a pinned `TkDevice`, which outlives the registration and so
        // this call (misc_open() keeps the device registered meanwhile).
        let dev = unsafe {
            &*container_of!(core::ptr::from_ref(misc).cast_mut(), TkDevice, reg)
        };
        KBox::try_pin_init(
            try_pin_init!(TkFile {
                wi: dev.wi.clone(),
                state <- new_mutex!(FileState {
                    policy: None,
                    task: TaskState::new(),
                    mapped: false,
                    mappings: KVec::new(),
                    nr_pages: 0,
                }, "tierkit_file"),
            }),
            GFP_KERNEL,
        )
    }

    fn ioctl(me: Pin<&TkFile>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        match cmd {
            uapi::TK_IOC_SET_POLICY => me.set_policy(arg),
            uapi::TK_IOC_TASK_NEXT => me.task_next(arg),
            uapi::TK_IOC_BULK => me.bulk(arg),
            _ => Err(ENOTTY),
        }
    }

    /// Allocates every page of the mapping on the node the file's policy
    /// picks for its ilx, then inserts them all (see the module docs and
    /// Documentation/ABI/testing/dev-tierkit).
    fn mmap(me: Pin<&TkFile>, _file: &File, vma: &VmaNew) -> Result {
        // A private mapping would copy a page on write, and the copy lands
        // wherever the task's own policy puts it.
        if vma.flags() & vm_flags::SHARED == 0 {
            return Err(EINVAL);
        }
        let start = vma.start();
        let nr_pages = (vma.end() - start) >> PAGE_SHIFT;
        // SAFETY: `vma` is being set up in ->mmap with the mmap lock held
        // for writing, so reading its `vm_pgoff` cannot race with a writer.
        // `VmaRef` has no accessor for it (7.3).
        let pgoff = unsafe { (*vma.as_ptr()).vm_pgoff } as u64;

        let mut st = me.state.lock();
        let policy = st.policy.ok_or(EINVAL)?;
        if nr_pages == 0 || nr_pages > MAX_FILE_PAGES {
            return Err(EINVAL);
        }
        if st.nr_pages + nr_pages > MAX_FILE_PAGES {
            return Err(ENOMEM);
        }
        // Room to keep the pages, so nothing can fail after insertion.
        st.mappings.reserve(1, GFP_KERNEL)?;

        // weighted_interleave_nid() reads the weights at each fault; all of
        // this mapping's "faults" happen now, so one snapshot serves.
        let sel = policy.selector(&me.wi.weights())?;
        let placed = pages::alloc_placed(&me.wi, &sel, pgoff, nr_pages)?;

        vma.set_dontexpand();
        let mixed = vma.set_mixedmap();
        for (i, page) in placed.pages().iter().enumerate() {
            // On failure the mmap path unmaps what was inserted
            // (__mmap_new_file_vma() -> unmap_region()) and `placed` frees
            // the pages.
            mixed.vm_insert_page(start + i * PAGE_SIZE, &page.borrow())?;
        }
        st.nr_pages += placed.len();
        st.mapped = true;
        st.mappings.push_within_capacity(placed).map_err(|_| ENOMEM)?;
        Ok(())
    }
}

