//! Stage one, the kernels: everything a boot boots, built and cached.
//! The kernel ([`kernel`]: source, config, build; [`kconfig`]; the build
//! [`profile`]s; Debian's own kernel, [`debian`]; a headers tree's,
//! [`kdir`]), tierkit.ko ([`module`]), the static guest binaries
//! ([`userspace`]), Debian's dynamically linked tools ([`guest_tools`],
//! [`tkrun`]) and the [`initramfs`] that carries them.

pub mod debian;
pub mod guest_tools;
pub mod initramfs;
pub mod kconfig;
pub mod kdir;
pub mod kernel;
pub mod module;
pub mod profile;
pub mod source;
pub mod tkrun;
pub mod userspace;
