// SPDX-License-Identifier: GPL-2.0

//! Sleeping primitives that a fatal signal, or any signal, can interrupt.
//!
//! The kernel crate of 7.3 has `Mutex::lock()` and
//! `Completion::wait_for_completion()`, both uninterruptible: a task that
//! waits behind a long tierkit operation cannot be killed. These wrap the C
//! `struct mutex` and `struct completion` with the killable variants
//! (`mutex_lock_killable()`, `wait_for_completion_killable()`), as
//! Documentation/process/coding-style and the mm code expect of waits that
//! userspace can cause.

use crate::shim;
use core::{cell::UnsafeCell, marker::PhantomPinned, ops::Deref, ops::DerefMut};
use kernel::{bindings, prelude::*, sync::LockClassKey, types::Opaque};

/// A mutex whose lock can be interrupted by a fatal signal.
///
/// # Invariants
///
/// `mutex` is an initialized `struct mutex` (by `__mutex_init()` in
/// [`KillableMutex::new`]); `data` is only accessed while it is held.
#[pin_data]
pub(crate) struct KillableMutex<T> {
    #[pin]
    mutex: Opaque<bindings::mutex>,
    data: UnsafeCell<T>,
    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: the mutex serializes every access to `data`, so sharing the
// wrapper between threads is as safe as sending `T` between them.
unsafe impl<T: Send> Sync for KillableMutex<T> {}
// SAFETY: moving the wrapper to another thread moves `T` with it.
unsafe impl<T: Send> Send for KillableMutex<T> {}

impl<T> KillableMutex<T> {
    /// A mutex holding `data`, named `name` with lock class `key` for
    /// lockdep (use [`kernel::static_lock_class!`]).
    pub(crate) fn new(
        data: T,
        name: &'static CStr,
        key: Pin<&'static LockClassKey>,
    ) -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes; `__mutex_init()` fully
            // initializes it; `name` and `key` are static.
            mutex <- Opaque::ffi_init(|slot: *mut bindings::mutex| unsafe {
                bindings::__mutex_init(slot, name.as_char_ptr(), key.as_ptr())
            }),
            data: UnsafeCell::new(data),
            _pin: PhantomPinned,
        })
    }

    /// `mutex_lock_killable()`: the guard, or `EINTR` if a fatal signal
    /// arrived while waiting (the task is dying; nothing was changed).
    pub(crate) fn lock(&self) -> Result<KillableGuard<'_, T>> {
        // SAFETY: By the type invariant, `mutex` is initialized; the shim
        // only calls `mutex_lock_killable()`.
        let ret = unsafe { shim::tk_mutex_lock_killable(self.mutex.get()) };
        if ret != 0 {
            return Err(EINTR);
        }
        // INVARIANT: the mutex is held until the guard drops.
        Ok(KillableGuard { lock: self })
    }

    /// `mutex_lock_interruptible()`: the guard, or `ERESTARTSYS` if any
    /// signal arrived while waiting (nothing was changed, so the system
    /// call may be restarted). For waits behind long work whose caller can
    /// start again: a stop signal then finds the task in T, handlers run
    /// and the freezer can freeze it.
    pub(crate) fn lock_interruptible(&self) -> Result<KillableGuard<'_, T>> {
        // SAFETY: By the type invariant, `mutex` is initialized; the shim
        // only calls `mutex_lock_interruptible()`.
        let ret = unsafe { shim::tk_mutex_lock_interruptible(self.mutex.get()) };
        if ret != 0 {
            return Err(ERESTARTSYS);
        }
        // INVARIANT: the mutex is held until the guard drops.
        Ok(KillableGuard { lock: self })
    }
}

/// The held lock of a [`KillableMutex`]; unlocks on drop.
///
/// # Invariants
///
/// The current task holds `lock.mutex`.
pub(crate) struct KillableGuard<'a, T> {
    lock: &'a KillableMutex<T>,
}

impl<T> Deref for KillableGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: By the type invariant, the mutex is held, so no one else
        // accesses `data`.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for KillableGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only
        // reference through the guard.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for KillableGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant, the current task holds the mutex.
        unsafe { bindings::mutex_unlock(self.lock.mutex.get()) };
    }
}

/// A `struct completion` with a killable wait.
///
/// # Invariants
///
/// `inner` was initialized by `init_completion()`.
#[pin_data]
pub(crate) struct KillableCompletion {
    #[pin]
    inner: Opaque<bindings::completion>,
}

// SAFETY: `struct completion` is made to be completed and waited for from
// any thread; it has its own lock.
unsafe impl Sync for KillableCompletion {}
// SAFETY: as above.
unsafe impl Send for KillableCompletion {}

impl KillableCompletion {
    /// A completion that is not done.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes; `init_completion()`
            // initializes it fully.
            inner <- Opaque::ffi_init(|slot: *mut bindings::completion| unsafe {
                bindings::init_completion(slot)
            }),
        })
    }

    /// `complete_all()`.
    pub(crate) fn complete_all(&self) {
        // SAFETY: By the type invariant, `inner` is initialized.
        unsafe { bindings::complete_all(self.inner.get()) };
    }

    /// `wait_for_completion_killable()`: `Err(EINTR)` if a fatal signal
    /// arrived first.
    pub(crate) fn wait_killable(&self) -> Result {
        // SAFETY: By the type invariant, `inner` is initialized.
        let ret = unsafe { bindings::wait_for_completion_killable(self.inner.get()) };
        if ret != 0 {
            return Err(EINTR);
        }
        Ok(())
    }

    /// `wait_for_completion()`: uninterruptible, for waits that are short
    /// by construction.
    pub(crate) fn wait(&self) {
        // SAFETY: By the type invariant, `inner` is initialized.
        unsafe { bindings::wait_for_completion(self.inner.get()) };
    }
}

/// `signal_pending(current)`: any signal, for waits that a restart undoes.
pub(crate) fn signal_pending() -> bool {
    kernel::current!().signal_pending()
}

/// `fatal_signal_pending(current)`. Long loops check it every
/// [`SIGNAL_CHECK_PAGES`] pages and back out with `EINTR`.
pub(crate) fn fatal_signal_pending() -> bool {
    // SAFETY: reads the current task's signal state; no precondition.
    unsafe { shim::tk_fatal_signal_pending() }
}

/// How often (in 4 KiB pages) long allocation and freeing loops reschedule
/// and check for a fatal signal: 512 pages (2 MiB), well under 10 ms of
/// work even under emulation.
pub(crate) const SIGNAL_CHECK_PAGES: usize = 512;

/// `cond_resched()` every [`SIGNAL_CHECK_PAGES`] iterations of a loop, and
/// `EINTR` if a fatal signal is pending then. `i` counts from 1.
pub(crate) fn resched_killable(i: usize) -> Result {
    if i % SIGNAL_CHECK_PAGES == 0 {
        // SAFETY: process context without spinlocks held (every caller).
        unsafe { shim::tk_cond_resched() };
        if fatal_signal_pending() {
            return Err(EINTR);
        }
    }
    Ok(())
}

/// `cond_resched()` every [`SIGNAL_CHECK_PAGES`] iterations (for loops
/// that must finish, such as freeing). `i` counts from 1.
pub(crate) fn resched_every(i: usize) {
    if i % SIGNAL_CHECK_PAGES == 0 {
        // SAFETY: process context without spinlocks held (every caller).
        unsafe { shim::tk_cond_resched() };
    }
}
