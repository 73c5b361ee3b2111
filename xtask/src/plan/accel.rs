//! KVM and CXL: under KVM, QEMU models a CXL fixed memory window as MMIO,
//! so once the guest onlines the window as system RAM, ordinary stores
//! there go through KVM's instruction emulator, and an instruction it does
//! not emulate (XSAVEC) stops the guest with "KVM internal error.
//! Suberror: 1". The fix (QEMU's "cxl: avoid KVM internal error for fixed
//! memory windows", Li Chen, posted 17 March 2026 to qemu-devel,
//! <20260317033304.3185291-1-me@linux.beauty>) maps such a window as RAM.
//!
//! So a cxl boot that would use KVM checks `qemu-system-x86_64 --version`:
//! from [`CXL_KVM_MIN_QEMU`] on it keeps KVM, below it falls back to TCG
//! with one line saying why. numa boots keep KVM. `--kvm` given explicitly
//! keeps KVM (with a warning), and `$TIERKIT_CXL_KVM` overrides the
//! version check: `1` keeps KVM, `0` always falls back.

use crate::say;
use std::fs;
use std::path::Path;

/// The first QEMU release after March 2026, 11.0.0. Whether the fix made
/// it into 11.0 could not be checked here (the series was posted on
/// 17 March 2026, around 11.0's freeze); if a 11.0 guest still dies, set
/// `TIERKIT_CXL_KVM=0`, and with a patched older QEMU `TIERKIT_CXL_KVM=1`.
pub const CXL_KVM_MIN_QEMU: (u32, u32, u32) = (11, 0, 0);

/// The environment variable that overrides the version check.
pub const OVERRIDE_ENV: &str = "TIERKIT_CXL_KVM";

/// `QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-1~bpo12+1)` ->
/// `(10, 0, 2)`.
pub fn parse_qemu_version(text: &str) -> Option<(u32, u32, u32)> {
    let rest = text.split("version ").nth(1)?;
    let word = rest.split_whitespace().next()?;
    let mut nums = word
        .split(['.', '-', '+', '~'])
        .map(|p| p.parse::<u32>().ok());
    let major = nums.next()??;
    let minor = nums.next()??;
    let patch = nums.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

/// The accelerator of a boot: `accel` as chosen ([`crate::boot::qemu::choose_accel`]),
/// `forced` when the user gave `--kvm`, `cxl` when the topology has CXL
/// devices, `qemu` the parsed `--version` (`None`: unreadable), `env` the
/// value of [`OVERRIDE_ENV`]. With a note to print when it differs from
/// what was asked, or to warn.
pub fn decide(
    accel: Accel,
    forced: bool,
    cxl: bool,
    qemu: Option<(u32, u32, u32)>,
    env: Option<&str>,
) -> (Accel, Option<String>) {
    if accel != Accel::Kvm || !cxl {
        return (accel, None);
    }
    let (a, b, c) = CXL_KVM_MIN_QEMU;
    let why = |v: String| {
        format!(
            "{v}: onlining a CXL fixed memory window as system RAM under KVM ends in \
             \"KVM internal error\" before QEMU {a}.{b}.{c} (set {OVERRIDE_ENV}=1 if this QEMU has the fix)"
        )
    };
    match env.map(str::trim) {
        Some("1") => return (Accel::Kvm, None),
        Some("0") => {
            return (
                Accel::Tcg,
                Some(format!(
                    "note: using TCG for this cxl boot, not KVM: {OVERRIDE_ENV}=0"
                )),
            )
        }
        _ => {}
    }
    let problem = match qemu {
        Some(v) if v >= CXL_KVM_MIN_QEMU => return (Accel::Kvm, None),
        Some((x, y, z)) => why(format!("QEMU {x}.{y}.{z}")),
        None => why("qemu-system-x86_64 --version unreadable".into()),
    };
    if forced {
        (
            Accel::Kvm,
            Some(format!("warning: --kvm on cxl although {problem}")),
        )
    } else {
        (
            Accel::Tcg,
            Some(format!(
                "note: using TCG for this cxl boot, not KVM: {problem}"
            )),
        )
    }
}

/// [`decide`] for this host's QEMU and environment, printing its note.
pub fn for_boot(accel: Accel, forced: bool, cxl: bool) -> Accel {
    if accel != Accel::Kvm || !cxl {
        return accel;
    }
    let version = crate::util::cmd_stdout("qemu-system-x86_64", &["--version"])
        .and_then(|v| parse_qemu_version(&v));
    let env = std::env::var(OVERRIDE_ENV).ok();
    let (a, note) = decide(accel, forced, cxl, version, env.as_deref());
    if let Some(n) = note {
        say!("{n}");
    }
    a
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accel {
    Kvm,
    Tcg,
}

/// Why KVM can't be used here, or `None` when it can.
pub fn kvm_problem() -> Option<String> {
    if !Path::new("/dev/kvm").exists() {
        return Some("no /dev/kvm".into());
    }
    if Path::new("/sys/module/kvm_pvm").exists() {
        return Some("/dev/kvm is PVM (kvm_pvm), which cannot boot a stock kernel".into());
    }
    if !Path::new("/sys/module/kvm_intel").exists() && !Path::new("/sys/module/kvm_amd").exists() {
        return Some("/dev/kvm exists but neither kvm_intel nor kvm_amd is loaded".into());
    }
    if let Err(e) = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
    {
        return Some(format!(
            "cannot open /dev/kvm read-write ({e}); add yourself to group kvm"
        ));
    }
    None
}

/// KVM when it really works (or `--kvm`), else TCG with a one-line note.
pub fn choose_accel(force: Option<bool>) -> Accel {
    match force {
        Some(true) => {
            if let Some(p) = kvm_problem() {
                say!("warning: --kvm given although {p}");
            }
            Accel::Kvm
        }
        Some(false) => {
            say!("note: using TCG (--no-kvm)");
            Accel::Tcg
        }
        None => match kvm_problem() {
            None => Accel::Kvm,
            Some(p) => {
                say!("note: using TCG, not KVM: {p}");
                Accel::Tcg
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Accel::{Kvm, Tcg};

    #[test]
    fn versions() {
        let v = |s| parse_qemu_version(s);
        assert_eq!(
            v("QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-1~bpo12+1)\nCopyright"),
            Some((10, 0, 2))
        );
        assert_eq!(v("QEMU emulator version 11.0.0"), Some((11, 0, 0)));
        assert_eq!(
            v("QEMU emulator version 11.1.50 (v11.1.0-123-gabc)"),
            Some((11, 1, 50))
        );
        assert_eq!(v("QEMU emulator version 9.2"), Some((9, 2, 0)));
        assert_eq!(v("qemu: not a version"), None);
        assert_eq!(v(""), None);
    }

    #[test]
    fn cxl_falls_back_to_tcg_on_an_old_qemu_and_numa_keeps_kvm() {
        let old = Some((10, 0, 2));
        let new = Some(CXL_KVM_MIN_QEMU);
        // numa: KVM whatever the version.
        assert_eq!(decide(Kvm, false, false, old, None), (Kvm, None));
        // cxl on an old QEMU: TCG, one line saying why.
        let (a, note) = decide(Kvm, false, true, old, None);
        assert_eq!(a, Tcg);
        let note = note.unwrap();
        assert!(!note.contains('\n'));
        assert!(
            note.contains("QEMU 10.0.2") && note.contains("KVM internal error"),
            "{note}"
        );
        // cxl on a QEMU with the fix: KVM.
        assert_eq!(decide(Kvm, false, true, new, None), (Kvm, None));
        assert_eq!(
            decide(Kvm, false, true, Some((11, 2, 0)), None),
            (Kvm, None)
        );
        // An unreadable version is treated as old.
        assert_eq!(decide(Kvm, false, true, None, None).0, Tcg);
        // TCG stays TCG.
        assert_eq!(decide(Tcg, false, true, new, None), (Tcg, None));
    }

    /// The detection on this host's own QEMU (when there is one): its
    /// `--version` parses, and a cxl boot asked to use KVM gets what
    /// [`decide`] says for that version, numa keeps KVM. No KVM guest
    /// boots: this is as far as the KVM path goes without /dev/kvm.
    #[test]
    fn this_hosts_qemu_is_read() {
        let Some(text) = crate::util::cmd_stdout("qemu-system-x86_64", &["--version"]) else {
            eprintln!("no qemu-system-x86_64 here: nothing to read");
            return;
        };
        let v = parse_qemu_version(&text);
        assert!(v.is_some(), "unparsed: {text:?}");
        if std::env::var_os(OVERRIDE_ENV).is_some() {
            return;
        }
        let want = if v >= Some(CXL_KVM_MIN_QEMU) {
            Kvm
        } else {
            Tcg
        };
        assert_eq!(for_boot(Kvm, false, true), want, "{text}");
        assert_eq!(for_boot(Kvm, false, false), Kvm);
        assert_eq!(for_boot(Tcg, false, true), Tcg);
    }

    #[test]
    fn override_and_forced_kvm() {
        let old = Some((10, 0, 2));
        assert_eq!(decide(Kvm, false, true, old, Some("1")), (Kvm, None));
        let (a, note) = decide(Kvm, false, true, Some((12, 0, 0)), Some("0"));
        assert_eq!(a, Tcg);
        assert!(note.unwrap().contains("TIERKIT_CXL_KVM=0"));
        let (a, note) = decide(Kvm, true, true, old, None);
        assert_eq!(a, Kvm);
        assert!(note.unwrap().starts_with("warning: --kvm"));
        // Anything else in the variable: the version decides.
        assert_eq!(decide(Kvm, false, true, old, Some("yes")).0, Tcg);
    }
}
