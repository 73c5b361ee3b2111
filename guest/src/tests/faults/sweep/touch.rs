//! The first touch of a gigantic mapping, armed in a forked child: a
//! failure is SIGBUS for it, reported as `EFAULT`.

use super::*;

/// The child's `fail-nth` fd, for its SIGBUS handler.
pub static CHILD_FAIL_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// The child's SIGBUS handler: the first touch failed. Exits 2 if the
/// armed fault was injected (`fail-nth` reads 0), 3 if not. Only
/// async-signal-safe calls.
pub extern "C" fn child_sigbus(_: libc::c_int) {
    let fd = CHILD_FAIL_FD.load(std::sync::atomic::Ordering::Relaxed);
    let mut buf = [0u8; 16];
    // SAFETY: reads at most `buf.len()` bytes into a live buffer.
    let r = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    let digits = if r > 0 { &buf[..r as usize] } else { &buf[..0] };
    let zero = !digits.is_empty()
        && digits
            .iter()
            .filter(|b| b.is_ascii_digit())
            .all(|&b| b == b'0');
    // SAFETY: leaves the child at once.
    unsafe { libc::_exit(if zero { 2 } else { 3 }) };
}

/// Touches 64 KiB of stack below the caller's frame, so that the child's
/// calls after arming take no copy-on-write fault of their own.
#[inline(never)]
pub fn prefault_stack() {
    let mut pad = [0u8; 64 << 10];
    for i in (0..pad.len()).step_by(PAGE_SIZE) {
        // SAFETY: inside `pad`.
        unsafe { std::ptr::write_volatile(pad.as_mut_ptr().add(i), 1) };
    }
    std::hint::black_box(&pad);
}

/// In the child: arm `n` (0: nothing) on its own `fail-nth` and write the
/// first byte of the gigantic mapping at `map`, whose fault makes the GiB
/// (allocate, clear, map one PUD). Exit 0: done without a fault injected,
/// 1: done with one injected (tolerated), 2/3 from [`child_sigbus`].
pub fn child_touch(n: u32, map: usize) -> i32 {
    let Ok(fail) = FailNth::open() else {
        return 10;
    };
    CHILD_FAIL_FD.store(fail.raw_fd(), std::sync::atomic::Ordering::Relaxed);
    // SAFETY: a plain handler that only calls async-signal-safe functions.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = child_sigbus as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut()) != 0 {
            return 11;
        }
    }
    prefault_stack();
    if n == 0 {
        // SAFETY: the first byte of the parent's shared gigantic mapping,
        // inherited; a failure is SIGBUS, handled above.
        unsafe { std::ptr::write_volatile(map as *mut u8, 1) };
        return 0;
    }
    // SAFETY: as above.
    match fail.run(n, || unsafe { std::ptr::write_volatile(map as *mut u8, 1) }) {
        Ok(a) => i32::from(a.injected),
        Err(_) => 12,
    }
}

/// The gigantic first touch under fault injection: a forked child arms
/// its own `fail-nth` (the parent's fork must not count) and touches the
/// step's mapping. A SIGBUS is `Err(EFAULT)`.
pub fn touch_armed(n: u32, s: &Step) -> io::Result<Armed<io::Result<()>>> {
    let map = s.map as usize;
    let efault = || Err(io::Error::from_raw_os_error(libc::EFAULT));
    let (value, injected) = match fork_run(|| child_touch(n, map))? {
        Exit::Code(0) => (Ok(()), false),
        Exit::Code(1) => (Ok(()), true),
        Exit::Code(2) => (efault(), true),
        Exit::Code(3) => (efault(), false),
        e => return Err(io::Error::other(format!("the touching child ended: {e}"))),
    };
    Ok(Armed { value, injected })
}
