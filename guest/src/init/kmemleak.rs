//! kmemleak under `tierkit.profile=debug`: scanned and cleared before
//! insmod, scanned again after rmmod; every object it then reports is
//! printed to the console (`unreferenced object ...`), followed by
//! `TIERKIT-KMEMLEAK leaks=N`.

use super::out::LEAK_LEVEL;
use super::{errno_text, Init};
use tierkit_protocol::marker;

pub const KMEMLEAK: &str = "/sys/kernel/debug/kmemleak";
/// At most this many lines of the report go to the console; the count is
/// complete.
pub const MAX_LINES: usize = 2000;

/// Writes `what` to the kmemleak file; a failure (kmemleak disabled
/// itself, e.g. its pool ran out: see the console) is an error.
fn cmd(init: &mut Init, what: &str) -> bool {
    let k = init.root.at(KMEMLEAK);
    // Appending: kmemleak takes the command whatever the offset, and a
    // test's fake file keeps its report.
    let written = std::fs::OpenOptions::new()
        .append(true)
        .open(&k)
        .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{what}\n").as_bytes()));
    match written {
        Ok(()) => true,
        Err(e) => {
            let l = format!(
                "kmemleak: echo {what} > {}: write error: {} (is kmemleak disabled? see the kmemleak: lines of the console)",
                k.display(),
                errno_text(&e)
            );
            init.error(&l);
            false
        }
    }
}

/// An object is reported once it is unchanged across two scans and was at
/// least 5 s old when the second began; one scan takes about 30 s under
/// TCG, so no extra wait is needed.
fn scan(init: &mut Init) -> bool {
    cmd(init, "scan") && cmd(init, "scan")
}

/// Objects in a kmemleak report.
pub fn count(report: &str) -> usize {
    report
        .lines()
        .filter(|l| l.starts_with("unreferenced object"))
        .count()
}

/// Before insmod: whatever boot and /init leaked is reported now and then
/// cleared, so that the scan after rmmod shows only what came later.
pub fn baseline(init: &mut Init) {
    let k = init.root.at(KMEMLEAK);
    if !k.exists() {
        let l = format!(
            "kmemleak: no {} in the debug profile (CONFIG_DEBUG_KMEMLEAK?)",
            k.display()
        );
        init.error(&l);
        return;
    }
    init.tag(marker::KMEMLEAK_BASELINE, "");
    if !scan(init) {
        return;
    }
    let old = count(&super::read_text(&k).unwrap_or_default());
    if !cmd(init, "clear") {
        return;
    }
    init.note(&format!(
        "kmemleak: {old} object(s) from boot and /init cleared before insmod"
    ));
}

/// After rmmod: scan, print every reported object to the console (as
/// kernel log lines, so that they are ordered with the rest), count them.
pub fn check(init: &mut Init) {
    init.tag(marker::KMEMLEAK_SCAN, "");
    if !scan(init) {
        return;
    }
    let report = super::read_text(&init.root.at(KMEMLEAK)).unwrap_or_default();
    let n = count(&report);
    for l in report.lines().take(MAX_LINES) {
        init.out.log(LEAK_LEVEL, l);
    }
    init.tag(marker::KMEMLEAK, &format!("leaks={n}"));
    if n != 0 {
        init.fails += 1;
    }
}
