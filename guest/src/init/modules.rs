//! Module loading: the modules the kernel needs first
//! (`/lib/modules/pre/NN-<name>.ko`: under `--kernel debian`, brd and,
//! with CXL, Debian's CXL, DAX and kmem drivers, which xtask names in
//! modules.dep's order, xtask/src/kernels/debian.rs), then tierkit.ko, whose
//! KUnit suites run during its init.

use super::{errno_text, names_with_prefix, Init};
use tierkit_protocol::{marker, param::files};

/// The modules of `/lib/modules/pre`, in load order (their names).
pub fn pre_module_names(init: &Init) -> Vec<String> {
    names_with_prefix(&init.root.at(files::PRE_MODULES), "")
}

/// `NN-<name>.ko` -> `<name>`.
pub fn module_name(file: &str) -> &str {
    let s = file.trim_start_matches(|c: char| c.is_ascii_digit());
    let s = s.strip_prefix('-').unwrap_or(s);
    s.strip_suffix(".ko").unwrap_or(s)
}

/// Loads the modules of `/lib/modules/pre`; a failure to load one fails
/// the run and skips the CXL set-up (false).
pub fn pre_modules(init: &mut Init) -> bool {
    let mut ok = true;
    let all = pre_module_names(init);
    let dir = init.root.at(files::PRE_MODULES);
    let mut n = 0;
    for m in all.iter().filter(|m| m.ends_with(".ko")) {
        let path = dir.join(m);
        if !path.exists() {
            continue;
        }
        if let Err(e) = init.kernel.insmod(&path) {
            let what = format!(
                "insmod {m} failed (rc=1): insmod: can't insert '{m}': {}",
                errno_text(&e)
            );
            init.error(&what);
            ok = false;
        }
        n += 1;
    }
    if n > 0 {
        let names: Vec<&str> = all.iter().map(|m| module_name(m)).collect();
        let l = format!("loaded {n} module(s) before tierkit: {}", names.join(" "));
        init.note(&l);
    }
    ok
}

/// `TIERKIT-INSMOD-START`, insmod tierkit.ko (its KUnit suites run),
/// `TIERKIT-INSMOD rc=N`; true if it loaded.
pub fn insmod_tierkit(init: &mut Init) -> bool {
    init.tag(&marker::start(marker::INSMOD), "");
    let ko = init.root.at(files::TIERKIT_KO);
    let r = init.kernel.insmod(&ko);
    let out = match &r {
        Ok(()) => String::new(),
        Err(e) => format!(
            "insmod: can't insert '{}': {}",
            files::TIERKIT_KO,
            errno_text(e)
        ),
    };
    if !out.is_empty() {
        println!("{out}");
    }
    let rc = i32::from(r.is_err());
    init.mark(&marker::rc_line(marker::INSMOD, rc));
    if rc != 0 {
        let what = format!("insmod {} failed (rc={rc}): {out}", files::TIERKIT_KO);
        init.error(&what);
    }
    rc == 0
}

/// `TIERKIT-RMMOD-START`, rmmod tierkit, `TIERKIT-RMMOD rc=N`; true if
/// it unloaded.
pub fn rmmod_tierkit(init: &mut Init) -> bool {
    init.tag(&marker::start(marker::RMMOD), "");
    let name = init.module;
    let r = init.kernel.rmmod(name);
    let out = match &r {
        Ok(()) => String::new(),
        Err(e) => format!("rmmod: can't unload module '{name}': {}", errno_text(e)),
    };
    if !out.is_empty() {
        println!("{out}");
    }
    let rc = i32::from(r.is_err());
    init.mark(&marker::rc_line(marker::RMMOD, rc));
    if rc != 0 {
        init.error(&format!("rmmod {name} failed (rc={rc}): {out}"));
    }
    rc == 0
}
