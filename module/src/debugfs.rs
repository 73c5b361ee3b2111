// SPDX-License-Identifier: GPL-2.0

//! debugfs directories and files whose open files pin the module.
//!
//! The debugfs file operations of the 7.3 Rust crate (`kernel::debugfs`)
//! have no `owner`, so an open debugfs file does not hold the module, and
//! closing it after `rmmod` calls `full_proxy_release()` on file operations
//! that were unloaded (an oops). tierkit's files use the C shim's file
//! operations instead (`tk_dbg_rw_fops` and `tk_dbg_ro_fops` in shim_debugfs.c,
//! `.owner = THIS_MODULE`): the debugfs proxy takes a module reference for
//! each open file, so `rmmod` is refused (`EWOULDBLOCK`) while one is open.
//!
//! The callbacks stay in Rust: `show` formats into the `seq_file` of
//! `single_open()`, `store` gets the whole write (at most a page,
//! NUL-terminated by `memdup_user_nul()`) and returns its errno to
//! `write(2)`.

use crate::shim;
use core::ptr::NonNull;
use kernel::{
    bindings,
    ffi::{c_char, c_int, c_void},
    fmt,
    prelude::*,
};

/// A debugfs directory, removed with everything under it on drop.
///
/// # Invariants
///
/// `dentry` is a directory from `debugfs_create_dir()` that only this value
/// removes.
pub(crate) struct DebugfsDir {
    dentry: NonNull<bindings::dentry>,
}

// SAFETY: a dentry pointer may be used and removed from any thread.
unsafe impl Send for DebugfsDir {}
// SAFETY: `&DebugfsDir` only creates children, which debugfs serializes.
unsafe impl Sync for DebugfsDir {}

/// `debugfs_create_*()` returns an `ERR_PTR` on failure; with debugfs
/// disabled at boot that is `ENODEV`.
fn check_dentry(d: *mut bindings::dentry) -> Result<NonNull<bindings::dentry>> {
    let addr = d as usize;
    // IS_ERR(): the top 4095 addresses are errnos.
    if addr >= (-4095isize) as usize {
        return Err(Error::from_errno(addr as isize as c_int));
    }
    NonNull::new(d).ok_or(ENOMEM)
}

impl DebugfsDir {
    /// `debugfs_create_dir(name, parent)`; `parent` `None` is the debugfs
    /// root.
    ///
    /// Errors: the errno of `debugfs_create_dir()` (`ENOMEM`, `EEXIST`,
    /// `ENODEV`).
    pub(crate) fn new(name: &CStr, parent: Option<&DebugfsDir>) -> Result<Self> {
        let parent = parent.map_or(core::ptr::null_mut(), |p| p.dentry.as_ptr());
        // SAFETY: `name` is NUL-terminated; `parent` is NULL or a live
        // directory of ours (type invariant of the parent).
        let d = unsafe { shim::tk_debugfs_dir(name.as_char_ptr(), parent) };
        // INVARIANT: a new directory that no one else removes.
        Ok(Self {
            dentry: check_dentry(d)?,
        })
    }

    /// A file `name` in this directory with mode `mode`, whose reads show
    /// `show(&data)` and whose writes (if `store` is given) call
    /// `store(&data, bytes)`.
    pub(crate) fn file<T: Send + Sync>(
        &self,
        name: &CStr,
        mode: u16,
        data: T,
        show: fn(&T, &mut fmt::Formatter<'_>) -> fmt::Result,
        store: Option<fn(&T, &[u8]) -> Result>,
    ) -> Result<DebugfsFile<T>> {
        let inner = KBox::new(
            Inner {
                attr: bindings_attr(),
                data,
                show,
                store,
            },
            GFP_KERNEL,
        )?;
        let ptr = KBox::into_raw(inner);
        // SAFETY: `ptr` is the box just leaked; nothing else refers to it.
        unsafe {
            (*ptr).attr.show = Some(show_trampoline::<T>);
            (*ptr).attr.store = if (*ptr).store.is_some() {
                Some(store_trampoline::<T>)
            } else {
                None
            };
            (*ptr).attr.ctx = ptr.cast();
        }
        // SAFETY: `name` is NUL-terminated; `self.dentry` is a live directory;
        // `attr` lives in the heap until the file is removed (the
        // `DebugfsFile` removes the dentry before freeing it).
        let d = unsafe {
            shim::tk_debugfs_file(
                name.as_char_ptr(),
                mode,
                self.dentry.as_ptr(),
                core::ptr::addr_of_mut!((*ptr).attr).cast(),
            )
        };
        match check_dentry(d) {
            // INVARIANT: the file's private data is `ptr`, freed only after
            // the dentry is removed.
            Ok(dentry) => Ok(DebugfsFile { dentry, inner: ptr }),
            Err(e) => {
                // SAFETY: no file refers to `ptr`: creation failed.
                drop(unsafe { KBox::from_raw(ptr) });
                Err(e)
            }
        }
    }
}

impl Drop for DebugfsDir {
    fn drop(&mut self) {
        // SAFETY: By the type invariant, only we remove this directory.
        // debugfs_remove() is recursive and waits for callbacks in flight.
        unsafe { shim::tk_debugfs_remove(self.dentry.as_ptr()) };
    }
}

/// The C side's `struct tk_dbg_attr` (shim.h).
#[repr(C)]
struct Attr {
    show: Option<unsafe extern "C" fn(*mut c_void, *mut bindings::seq_file) -> c_int>,
    store: Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize) -> c_int>,
    ctx: *mut c_void,
}

fn bindings_attr() -> Attr {
    Attr {
        show: None,
        store: None,
        ctx: core::ptr::null_mut(),
    }
}

/// What a file's `struct tk_dbg_attr` points back to.
struct Inner<T> {
    attr: Attr,
    data: T,
    show: fn(&T, &mut fmt::Formatter<'_>) -> fmt::Result,
    store: Option<fn(&T, &[u8]) -> Result>,
}

/// A debugfs file created by [`DebugfsDir::file`]; removed on drop (which
/// waits for reads and writes in flight), then its data is dropped.
///
/// # Invariants
///
/// `inner` is a leaked `KBox<Inner<T>>` that the file at `dentry` uses as
/// its private data; it is freed only after the dentry is removed.
pub(crate) struct DebugfsFile<T> {
    dentry: NonNull<bindings::dentry>,
    inner: *mut Inner<T>,
}

// SAFETY: the file's data is `Send`; the dentry may be removed anywhere.
unsafe impl<T: Send> Send for DebugfsFile<T> {}
// SAFETY: `&DebugfsFile` exposes only `&T`, which is `Sync`.
unsafe impl<T: Sync> Sync for DebugfsFile<T> {}

impl<T> Drop for DebugfsFile<T> {
    fn drop(&mut self) {
        // SAFETY: the dentry is ours; debugfs_remove() returns after every
        // callback in flight is done, and no new one can start.
        unsafe { shim::tk_debugfs_remove(self.dentry.as_ptr()) };
        // SAFETY: By the type invariant, `inner` came from `KBox::into_raw`
        // and nothing refers to it any more.
        drop(unsafe { KBox::from_raw(self.inner) });
    }
}

/// `core::fmt::Write` into a `seq_file` (`seq_write()`; on overflow the
/// seq_file retries the whole show with a larger buffer).
struct SeqWriter(*mut bindings::seq_file);

impl core::fmt::Write for SeqWriter {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        // SAFETY: `self.0` is the seq_file of the show in progress; `s` is
        // valid for `s.len()` bytes.
        unsafe { bindings::seq_write(self.0, s.as_ptr().cast(), s.len()) };
        Ok(())
    }
}

/// Formats with a `show` callback.
struct Shown<'a, T> {
    data: &'a T,
    show: fn(&T, &mut fmt::Formatter<'_>) -> fmt::Result,
}

impl<T> core::fmt::Display for Shown<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        (self.show)(self.data, f)
    }
}

/// `tk_dbg_attr.show`.
///
/// # Safety
///
/// `ctx` is the `Inner<T>` of a live [`DebugfsFile<T>`]; `m` is the
/// seq_file of a show in progress.
unsafe extern "C" fn show_trampoline<T>(ctx: *mut c_void, m: *mut bindings::seq_file) -> c_int {
    // SAFETY: see the function's safety section.
    let inner = unsafe { &*ctx.cast::<Inner<T>>() };
    let shown = Shown {
        data: &inner.data,
        show: inner.show,
    };
    match core::fmt::write(&mut SeqWriter(m), format_args!("{shown}")) {
        Ok(()) => 0,
        Err(_) => EINVAL.to_errno(),
    }
}

/// `tk_dbg_attr.store`.
///
/// # Safety
///
/// `ctx` is the `Inner<T>` of a live [`DebugfsFile<T>`]; `buf` is valid
/// for `len` bytes.
unsafe extern "C" fn store_trampoline<T>(
    ctx: *mut c_void,
    buf: *const c_char,
    len: usize,
) -> c_int {
    // SAFETY: see the function's safety section.
    let inner = unsafe { &*ctx.cast::<Inner<T>>() };
    // SAFETY: `buf` is valid for `len` bytes (safety section).
    let bytes = unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), len) };
    match inner.store {
        Some(store) => match store(&inner.data, bytes) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        },
        None => EINVAL.to_errno(),
    }
}
