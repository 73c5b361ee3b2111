//! The guest's `/init` (PID 1 of the initramfs xtask builds,
//! xtask/src/kernels/initramfs.rs): mounts, then [`Init::run`] (CXL region
//! assembly, insmod tierkit.ko, the tests, demos, benchmark, command or
//! shell of `tierkit.mode=`, rmmod, `TIERKIT-DONE fails=N`), then power-off.
//! The protocol with the harness is `tierkit_protocol`'s; the steps are
//! `tierkit_guest::init`'s.
//!
//! Usage: none by hand. Run as anything but PID 1 it exits with status 2
//! at once (it would mount, load modules and power the machine off).

fn main() {
    tierkit_guest::help!();
    tierkit_guest::init::main()
}
