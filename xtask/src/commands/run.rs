//! `cargo xtask run`: the demos (one boot, [`crate::boot`]), or with
//! `-- CMD` the user's command in the guest ([`super::in_guest`]).

use anyhow::Result;
use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::in_guest::{follow, judge, prepare, report};
use crate::boot::qemu;
use crate::boot::{self, BootRequest};
use crate::util::{self, Timer};

/// `cargo xtask run` as asked.
pub enum RunRequest {
    /// The demos (`--kunit`: and the KUnit suites).
    Demos(BootRequest),
    /// `run -- CMD`: the command, in a boot of mode `cmd`.
    Cmd {
        boot: BootRequest,
        argv: Vec<OsString>,
    },
}

/// `cargo xtask run`: the demos' verdict, or CMD's exit code.
pub(crate) fn run(r: RunRequest) -> Result<ExitCode> {
    match r {
        RunRequest::Demos(req) => boot::run(req).map(|g| g.exit()),
        RunRequest::Cmd { boot, argv } => run_cmd(&boot, &argv).map(ExitCode::from),
    }
}

/// `cargo xtask run [flags] -- CMD...`: the exit code (see [`exit`]).
fn run_cmd(req: &BootRequest, argv: &[OsString]) -> Result<u8> {
    let r = prepare(req, Some(argv))?;
    let mut streamer = qemu::Streamer::new(util::verbose(), false);
    streamer.to_stderr = true;
    streamer.reports_only = true;
    let stop = Arc::new(AtomicBool::new(false));
    let copier = follow(r.run_dir.join("cmd-out.log"), stop.clone());
    let t = Timer::start();
    let res = qemu::boot(
        &r.built.kernel,
        &r.built.initramfs,
        &r.cfg,
        &r.run_dir,
        &mut streamer,
    );
    stop.store(true, Ordering::SeqCst);
    let _ = copier.join();
    let guest = res?;
    let ended = judge(
        &guest.console,
        &guest.data,
        guest.timed_out,
        tierkit_protocol::marker::Step::Cmd,
    );
    report("run", &ended, t.elapsed(), &r.run_dir);
    Ok(ended.code())
}
