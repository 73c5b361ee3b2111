//! tk-run: run an unmodified, dynamically linked program with tierkit's
//! placement (Documentation/dev-tools/tk-run.md).
//!
//!   tk-run [--weights auto|measured|N:W[,N:W...]] [--threshold SIZE]
//!          [--gigantic [--pool N]] [--calibration FILE] [--lib PATH]
//!          [--verbose] -- PROGRAM [ARGS...]
//!
//! Anonymous private mmaps and malloc chunks of at least SIZE (default 2M)
//! come from /dev/tierkit, placed by weighted interleave with these weights
//! for this program alone (a per-file policy: no global weight table is
//! written). `--weights auto` (the default): tierkit's auto weights from
//! the firmware's bandwidth (HMAT/CDAT access1); `measured`: those of
//! tk-calibrate's saved result (`--calibration`, default
//! /tmp/tierkit-calibration.json); `N:W,...`: these nodes and weights.
//! `--gigantic`: chunks of 1 GiB or more (rounded up to whole GiBs) are
//! tierkit's gigantic pages, cleared by its workers at first touch (needs
//! CAP_SYS_ADMIN); without `--weights` they go to the local node.
//! `--pool N`: first keep N pre-cleared GiBs ready on each node they use.
//! The library is `--lib` (default /lib/tierkit/libtkrun.so), set in
//! LD_PRELOAD; children of the program inherit it.
//!
//! Exit status: the program's; 2 for a refused flag or setting (one line
//! on stderr, before the program starts); 127 if it cannot be started.

use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};
use tierkit_core::uapi::{TK_MODE_WEIGHTED_INTERLEAVE, TK_POLICY_F_WEIGHTS};
use userspace_tests::node::Topology;
use userspace_tests::tk::{self, Tierkit};
use userspace_tests::tkrun::{environment, resolve, Args, Refused, Resolved};
use userspace_tests::{errno_name, pool};

/// The node this task runs on (getcpu(2)); 0 if unknown.
fn local_node() -> u32 {
    let (mut cpu, mut node) = (0u32, 0u32);
    // SAFETY: getcpu writes two unsigned ints; the cache argument may be NULL.
    let r = unsafe {
        libc::syscall(
            libc::SYS_getcpu,
            &mut cpu as *mut u32,
            &mut node as *mut u32,
            std::ptr::null_mut::<libc::c_void>(),
        )
    };
    if r == 0 {
        node
    } else {
        0
    }
}

/// Checks that tierkit takes these weights per file (and, for
/// `--gigantic`, gigantic mode), as the library will ask.
fn probe(r: &Resolved, gigantic: bool) -> Result<(), Refused> {
    let tk = Tierkit::open().map_err(|e| {
        Refused(format!(
            "cannot open {}: {} (is tierkit loaded?)",
            tk::DEV_PATH,
            errno_name(&e)
        ))
    })?;
    let mut p = tk::policy(TK_MODE_WEIGHTED_INTERLEAVE, 0);
    p.flags = TK_POLICY_F_WEIGHTS;
    for &(n, w) in &r.weights {
        p.nodemask |= 1 << n;
        p.weights[n as usize] = w;
    }
    match tk.set_policy_raw(p) {
        Ok(got) if got.nodemask == p.nodemask => {}
        Ok(got) => {
            return Err(Refused(format!(
                "tierkit dropped nodes of the mask {:#x} (kept {:#x})",
                p.nodemask, got.nodemask
            )))
        }
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            return Err(Refused(
                "this tierkit module takes no per-file weights (TK_POLICY_F_WEIGHTS): update it"
                    .into(),
            ))
        }
        Err(e) => return Err(Refused(format!("TK_IOC_SET_POLICY: {}", errno_name(&e)))),
    }
    if gigantic {
        let g = tierkit_core::uapi::TkGigantic {
            threads: tierkit_core::uapi::TK_THREADS_AUTO,
            ..Default::default()
        };
        if let Err(e) = tk.set_gigantic(g) {
            return Err(Refused(if e.raw_os_error() == Some(libc::EPERM) {
                "--gigantic needs CAP_SYS_ADMIN (run as root)".into()
            } else {
                format!("--gigantic: TK_IOC_SET_GIGANTIC: {}", errno_name(&e))
            }));
        }
    }
    Ok(())
}

/// `--pool N`: N pre-cleared GiBs on each node the gigantic pages use,
/// waited for (bounded); the target stays set after tk-run.
fn fill_pool(r: &Resolved, n: u64) -> Result<(), Refused> {
    for &(nid, _) in &r.weights {
        pool::set_target(nid, n).map_err(|e| {
            Refused(format!(
                "--pool: writing {}: {}",
                pool::POOL_PATH,
                errno_name(&e)
            ))
        })?;
    }
    for &(nid, _) in &r.weights {
        if let Err(e) = pool::wait_for(nid, n, n, pool::fill_timeout(nid) * n.max(1) as u32) {
            eprintln!("tk-run: the pool is not full yet ({e}); starting anyway");
        }
    }
    Ok(())
}

fn prepare(a: &Args) -> Result<Resolved, Refused> {
    if !std::path::Path::new(&a.lib).exists() {
        return Err(Refused(format!("{}: no such library (see --lib)", a.lib)));
    }
    let topo =
        Topology::read().map_err(|e| Refused(format!("reading the node topology: {e:#}")))?;
    let r = resolve(a, &topo, local_node())?;
    probe(&r, a.gigantic)?;
    if let Some(n) = a.pool {
        userspace_tests::ensure_debugfs();
        fill_pool(&r, n)?;
    }
    Ok(r)
}

fn main() -> ExitCode {
    userspace_tests::help!();
    let a = match Args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let r = match prepare(&a) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if a.verbose {
        eprintln!(
            "tk-run: weights {} ({}), threshold {} bytes{}, gigantic {}",
            r.env(),
            r.source,
            a.threshold,
            if r.place {
                ""
            } else {
                " (placement off below 1 GiB)"
            },
            if a.gigantic { "on" } else { "off" }
        );
    }
    let old = std::env::var("LD_PRELOAD").ok();
    let err = Command::new(&a.program[0])
        .args(&a.program[1..])
        .envs(environment(&a, &r, old.as_deref()))
        .exec();
    eprintln!("tk-run: cannot run {}: {err}", a.program[0]);
    ExitCode::from(127)
}
