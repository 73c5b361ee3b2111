//! The guest's `/init` (PID 1 of the initramfs xtask builds,
//! xtask/src/initramfs.rs): mounts, then [`Init::run`] (CXL region
//! assembly, insmod tierkit.ko, the tests, demos, benchmark, command or
//! shell of `tierkit.mode=`, rmmod, `TIERKIT-DONE fails=N`), then power-off.
//! The protocol with the harness is `tierkit_protocol`'s; the steps are
//! `userspace_tests::init`'s.
//!
//! Usage: none by hand. Run as anything but PID 1 it exits with status 2
//! at once (it would mount, load modules and power the machine off).

use std::panic::AssertUnwindSafe;
use userspace_tests::init::{mounts, Init};

/// Powers off; reboots if that fails (`poweroff -f`, `reboot -f`). Never
/// returns: PID 1 must not exit.
fn power_off() -> ! {
    // SAFETY: sync(2) takes no arguments.
    unsafe { libc::sync() };
    // SAFETY: reboot(2) with a valid command; it returns only on failure.
    unsafe { libc::reboot(libc::RB_POWER_OFF) };
    std::thread::sleep(std::time::Duration::from_secs(2));
    // SAFETY: as above.
    unsafe { libc::reboot(libc::RB_AUTOBOOT) };
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

fn main() {
    userspace_tests::help!();
    if std::process::id() != 1 {
        eprintln!("tk-init is the guest's /init (PID 1): it mounts, loads modules and powers off");
        std::process::exit(2);
    }
    // PID 1 inherits every orphan anyway; a subreaper says so to the
    // runner (`init::supervise`), which finds a test's escaped children
    // among its own.
    // SAFETY: prctl(2) with an int argument.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) };
    std::env::set_var("PATH", "/bin:/sbin:/usr/bin:/usr/sbin");
    std::env::set_var("HOME", "/root");
    mounts::mount_all();
    let mut init = Init::guest();
    std::env::set_var("TIERKIT_MODE", &init.params.mode);
    if let Some(info) = init.root.read(tierkit_protocol::param::files::BUILD_INFO) {
        println!("tierkit /init: {info}");
    }
    let ran = std::panic::catch_unwind(AssertUnwindSafe(|| init.run()));
    if let Err(p) = ran {
        let why = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        let mut out = userspace_tests::init::Out::guest();
        out.mark(&tierkit_protocol::marker::line(
            tierkit_protocol::marker::ERROR,
            &format!("/init panicked: {why}"),
        ));
        out.mark(&tierkit_protocol::marker::done(init.fails + 1));
    }
    power_off();
}
