//! The checks `cargo xtask` makes of its whole command line before any
//! build, boot or test: every value clap's parsers cannot judge alone
//! (`--kernel-src`, the profiles, `run -- CMD`'s command and share, and
//! each boot the command will make: topology, kernel command line,
//! memory), each refused in one line.

use anyhow::Result;
use std::ffi::OsString;

use super::flags::{Cli, Cmd, LavaArgs};
use super::help::clap_error_line;
use crate::boot::{self, BootRequest};
use crate::commands::{in_guest, lava, matrix, merge};
use crate::kernels::profile::{KernelKind, Profile};
use crate::util::validate::Host;
use crate::{kernels::kernel, plan::names};

/// Parses `args` (the program name first) and checks every value and
/// every boot they ask for, as [`super::main`] does before any work, without
/// building, booting or testing anything: `Err` is the one line `cargo
/// xtask` prints for them. `--help` and `--version` are `Ok`. The host's
/// memory is `host`'s (tests give their own).
pub fn check_args<I, T>(args: I, host: &Host) -> std::result::Result<(), String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::error::ErrorKind;
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let cli = match super::help::parse(&args) {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            return Ok(())
        }
        Err(e) => return Err(clap_error_line(&e)),
    };
    check_dash_dash(&args)?;
    validate(&cli, host)
}

/// `cargo xtask run --` with nothing after `--` (clap reads it as no
/// command, i.e. the demos).
pub(super) fn check_dash_dash(args: &[OsString]) -> std::result::Result<(), String> {
    match args.iter().position(|a| a == "--") {
        Some(i) if i + 1 == args.len() => in_guest::check_command(&[]),
        _ => Ok(()),
    }
}

/// An error as one line.
fn one_line(e: anyhow::Error) -> String {
    e.to_string().lines().collect::<Vec<_>>().join(" ")
}

/// The checks of [`check_args`] on a parsed command line: `--kernel-src`
/// and `--profile`, then each boot's request as the command will make it
/// ([`crate::boot::check`]: topology, kernel command line, memory).
pub(super) fn validate(cli: &Cli, host: &Host) -> std::result::Result<(), String> {
    let kernel = match &cli.cmd {
        Cmd::Setup { .. } => return Ok(()),
        Cmd::Matrix(m) => {
            let jobs = super::select_jobs(&m.select).map_err(one_line)?;
            return check_jobs(&jobs, m.shard, host);
        }
        Cmd::Lava(l) => return check_lava(l, host).map_err(one_line),
        Cmd::Merge(m) => {
            return merge::check_args(&m.dirs, m.out.as_deref(), m.expect.as_deref())
                .map_err(one_line)
        }
        Cmd::Module(m) => {
            if let Some(dir) = &m.kdir {
                return crate::kernels::kdir::inspect(dir)
                    .map(|_| ())
                    .map_err(one_line);
            }
            &m.kernel
        }
        Cmd::Kernel(k) | Cmd::Build(k) => k,
        Cmd::Run(r) => &r.guest.kernel,
        Cmd::Shell(s) => &s.guest.kernel,
        Cmd::Test(t) => &t.guest.kernel,
        Cmd::Bench(b) => &b.guest.kernel,
    };
    let guest = match &cli.cmd {
        Cmd::Run(r) => Some(&r.guest),
        Cmd::Shell(s) => Some(&s.guest),
        Cmd::Test(t) if !t.ci => Some(&t.guest),
        Cmd::Bench(b) => Some(&b.guest),
        _ => None,
    };
    // Flags that do not go together first: a value is judged only once
    // it is used.
    if let Some(g) = guest.filter(|g| g.kernel_kind == KernelKind::Debian) {
        if let Some(dir) = &g.kernel.kernel_src {
            let src = match kernel_src_from_env(dir) {
                true => "--kernel-src (here $TIERKIT_KERNEL_SRC: unset it)",
                false => "--kernel-src",
            };
            return Err(format!(
                "--kernel debian boots Debian's own kernel: {src} is for --kernel tierkit"
            ));
        }
        if g.kernel.profiles() != [Profile::Default] {
            return Err("--kernel debian boots Debian's kernel as shipped: --profile is for --kernel tierkit (debug is tierkit's own kernel config)".into());
        }
        check_no_kunit(&cli.cmd)?;
    }
    if let Some(g) = guest.filter(|g| g.cxl_online.is_some()) {
        // `run`, `shell` and `bench NAME` boot one topology, numa unless
        // --topology says otherwise; `test` and `bench` boot cxl among others.
        let one = match &cli.cmd {
            Cmd::Run(_) | Cmd::Shell(_) => true,
            Cmd::Bench(b) => b.which.is_some(),
            _ => false,
        };
        let topology = g
            .topology
            .or(one.then_some(crate::plan::topology::TopologyKind::NUMA));
        if let Some(k) = topology.filter(|k| !k.spec().cxl) {
            return Err(format!(
                "--cxl-online needs --topology cxl (got {k}): only that topology has CXL memory to online"
            ));
        }
    }
    if let Some(dir) = &kernel.kernel_src {
        kernel::check_custom_source(dir).map_err(|e| {
            let e = one_line(e);
            match kernel_src_from_env(dir) {
                true => e.replacen("--kernel-src", "--kernel-src (from $TIERKIT_KERNEL_SRC)", 1),
                false => e,
            }
        })?;
    }
    check_in_guest(&cli.cmd, host)?;
    check_filter(&cli.cmd)?;
    check_cmd_job(&cli.cmd)?;
    let boots = requests(cli).map_err(one_line)?;
    let several = boots.len() > 1;
    for (label, req) in boots {
        let labelled = |e: anyhow::Error| {
            let e = one_line(e);
            match (&label, several) {
                (Some(l), true) => format!("{l}: {e}"),
                _ => e,
            }
        };
        boot::check(&req.map_err(labelled)?, host).map_err(labelled)?;
    }
    Ok(())
}

/// The cache every build writes into (`$TIERKIT_CACHE`, else
/// `$XDG_CACHE_HOME/tierkit`, else `~/.cache/tierkit`) is a directory, or
/// can be made one: its nearest existing ancestor is a directory. Else the
/// first write into it would fail with a bare OS error naming no path.
/// Checked for the commands that build or boot, which use it (not for
/// `setup`, `merge` or the list of `matrix`).
pub(super) fn check_cache(cmd: &Cmd) -> std::result::Result<(), String> {
    match cmd {
        Cmd::Setup { .. } | Cmd::Merge(_) => return Ok(()),
        Cmd::Matrix(m) if m.shard.is_none() => return Ok(()),
        _ => {}
    }
    let env_set = |v: &str| std::env::var_os(v).is_some_and(|d| !d.is_empty());
    let from = if env_set("TIERKIT_CACHE") {
        "$TIERKIT_CACHE"
    } else if env_set("XDG_CACHE_HOME") {
        "$XDG_CACHE_HOME/tierkit"
    } else {
        "the default ~/.cache/tierkit"
    };
    let cache = crate::util::cache_dir().map_err(one_line)?;
    let mut p = cache.as_path();
    loop {
        match std::fs::metadata(p) {
            Ok(m) if m.is_dir() => return Ok(()),
            Ok(_) if p == cache => {
                return Err(format!(
                    "the cache {} ({from}) is a file, not a directory: point $TIERKIT_CACHE at a directory",
                    cache.display()
                ))
            }
            Ok(_) => {
                return Err(format!(
                    "the cache {} ({from}) cannot be made: {} is a file, not a directory; point $TIERKIT_CACHE at a directory",
                    cache.display(),
                    p.display()
                ))
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                match p.parent() {
                    Some(up) if !up.as_os_str().is_empty() => p = up,
                    _ => return Ok(()),
                }
            }
            Err(e) => {
                return Err(format!(
                    "the cache {} ({from}): {}: {e}",
                    cache.display(),
                    p.display()
                ))
            }
        }
    }
}

/// Whether `--kernel-src`'s `dir` is `$TIERKIT_KERNEL_SRC`'s (clap's
/// default for the flag), so that a refusal names where it came from.
fn kernel_src_from_env(dir: &std::path::Path) -> bool {
    std::env::var_os("TIERKIT_KERNEL_SRC").is_some_and(|v| std::path::Path::new(&v) == dir)
}

/// A kernel without KUnit (Debian's, as shipped): `run --kunit` would run
/// nothing more, and a `test --filter` glob that selects only KUnit cases
/// would select nothing there.
fn check_no_kunit(cmd: &Cmd) -> std::result::Result<(), String> {
    const WHY: &str =
        "Debian's kernel has KUnit off (no CONFIG_KUNIT): the suites run with --kernel tierkit";
    match cmd {
        Cmd::Run(r) if r.kunit => Err(format!("--kunit: {WHY}")),
        Cmd::Test(t) => {
            let Some(list) = t.guest.filter.as_deref().filter(|f| !f.is_empty()) else {
                return Ok(());
            };
            let xtask = crate::commands::test::cmd_tests::TESTS
                .iter()
                .map(|t| t.name);
            let tests = names::Tests::here().with_xtask(xtask);
            match list.split(',').find(|g| {
                !tests
                    .user
                    .iter()
                    .chain(&tests.xtask)
                    .any(|n| tierkit_protocol::select::glob_match(g, n))
            }) {
                Some(g) => Err(format!(
                    "--filter {list}: {g} selects no userspace or xtask-* test, and {WHY}"
                )),
                None => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

/// `run -- CMD` and `shell`: a command, a working directory the guest can
/// share, no flag that selects tests or demos, and for `shell` a terminal
/// on stdin.
fn check_in_guest(cmd: &Cmd, host: &Host) -> std::result::Result<(), String> {
    let g = match cmd {
        Cmd::Run(r) if !r.cmd.is_empty() => {
            in_guest::check_command(&r.cmd)?;
            &r.guest
        }
        Cmd::Shell(s) => &s.guest,
        _ => return Ok(()),
    };
    if g.filter.is_some() {
        return Err(
            "--filter selects tests and demos: with `run -- CMD` and `shell` only the command runs"
                .into(),
        );
    }
    let share = in_guest::check_share(host.cwd.as_deref())?;
    match cmd {
        Cmd::Run(r) => names::check_guest_command(
            &r.cmd[0],
            &share,
            names::guest_programs(&crate::util::repo_root()).as_deref(),
        ),
        _ if !host.stdin_is_terminal => Err(in_guest::SHELL_NEEDS_A_TERMINAL.into()),
        _ => Ok(()),
    }
}

/// `--filter` of `test` selects at least one test with each glob, and of
/// `run` a demo (or with `--kunit` a KUnit case), before anything boots;
/// `bench` has nothing it selects.
fn check_filter(cmd: &Cmd) -> std::result::Result<(), String> {
    match cmd {
        Cmd::Test(t) if t.guest.filter.as_deref() == Some("") => Err(
            "--filter '': empty: give a glob of the tests, e.g. 'tierkit_topology.*' (a KUnit suite's cases) or tk-test-cxl (a userspace test)"
                .into(),
        ),
        Cmd::Run(r) if r.cmd.is_empty() && r.guest.filter.as_deref() == Some("") => {
            Err(format!(
                "--filter '': empty: give a glob of the demos, e.g. {}",
                names::Tests::here().demos.join(" or ")
            ))
        }
        Cmd::Test(t) => t
            .guest
            .filter
            .as_deref()
            .map_or(Ok(()), |f| {
                let xtask = crate::commands::test::cmd_tests::TESTS.iter().map(|t| t.name);
                names::Tests::here().with_xtask(xtask).check_test_filter(f)
            }),
        Cmd::Run(r) if r.cmd.is_empty() => r.guest.filter.as_deref().map_or(Ok(()), |f| {
            names::Tests::here().check_demo_filter(f, r.kunit)
        }),
        Cmd::Bench(b) if b.guest.filter.is_some() => Err(
            "--filter selects tests and demos: `bench` runs its benchmarks whole (name one: clear, wi, gigantic)"
                .into(),
        ),
        _ => Ok(()),
    }
}

/// `test --job xtask-cmd`: `cargo xtask matrix` lists the tests of `run --
/// CMD` and `shell` as that job, but they are no boot of the selected set
/// (each boots a guest of its own); the refusal gives the job's own
/// command, which selects them with `--filter 'xtask-*'`.
fn check_cmd_job(cmd: &Cmd) -> std::result::Result<(), String> {
    let Cmd::Test(t) = cmd else { return Ok(()) };
    if t.job.as_deref() != Some(matrix::CMD_JOB) {
        return Ok(());
    }
    let sel = matrix::Selection {
        ci: t.ci,
        full: t.full,
        profiles: t.guest.kernel.profiles(),
        kernel: t.guest.kernel_kind,
        topology: t.guest.topology,
    };
    match matrix::cmd_job(&sel) {
        Some(job) => Err(format!(
            "--job {}: that job of `cargo xtask matrix` is the tests of `run -- CMD` and `shell`, which boot guests of their own, not a boot: its command is `{}`",
            matrix::CMD_JOB,
            job.command
        )),
        None => Ok(()),
    }
}

/// A boot's label in messages (when a command makes several), and its
/// request or why it cannot be made.
type Labelled = (Option<String>, Result<BootRequest>);

/// Every boot `cli` asks for, as the dispatch makes them, in order.
fn requests(cli: &Cli) -> Result<Vec<Labelled>> {
    Ok(match &cli.cmd {
        Cmd::Setup { .. }
        | Cmd::Kernel(_)
        | Cmd::Module(_)
        | Cmd::Build(_)
        | Cmd::Matrix(_)
        | Cmd::Merge(_)
        | Cmd::Lava(_) => vec![],
        Cmd::Run(r) => vec![(None, super::run_boot(r))],
        Cmd::Shell(s) => vec![(None, super::shell_boot(&s.guest, !cli.verbose))],
        Cmd::Bench(b) => match b.which {
            Some(which) => vec![(None, super::bench_boot(b, which))],
            None => {
                super::check_bench_all_profile(b)?;
                let f = b.guest.flags();
                crate::commands::bench::all_kinds(b.guest.topology)
                    .into_iter()
                    .map(|k| (Some(format!("bench on {k}")), BootRequest::bench_all(&f, k)))
                    .collect()
            }
        },
        Cmd::Test(t) => {
            let f = t.guest.flags();
            super::test_boots(t)?
                .into_iter()
                .map(|(p, k, run)| {
                    let kernel = match k {
                        KernelKind::Tierkit => String::new(),
                        k => format!(", {k} kernel"),
                    };
                    let label = format!("test run {} ({p} profile{kernel})", run.name);
                    (Some(label), BootRequest::for_run(&f, p, k, &run))
                })
                .collect()
        }
    })
}

/// Every job's command line checked as `cargo xtask test` checks its own;
/// `shard`, given, must pick at least one job.
fn check_jobs(
    jobs: &[matrix::Job],
    shard: Option<matrix::Shard>,
    host: &Host,
) -> std::result::Result<(), String> {
    if let Some(s) = shard {
        if s.pick(jobs).is_empty() {
            return Err(format!(
                "--shard {s}: there are only {} jobs, so shard {} of {} would run none",
                jobs.len(),
                s.k,
                s.n
            ));
        }
    }
    for j in jobs {
        let argv = std::iter::once("cargo xtask".to_string()).chain(j.args.iter().cloned());
        check_args(argv, host).map_err(|e| format!("job {}: {e}", j.id))?;
    }
    Ok(())
}

/// `lava`'s arguments checked before anything is built: the jobs (as
/// `matrix` checks them, boots only) and `--out`.
fn check_lava(l: &LavaArgs, host: &Host) -> Result<()> {
    let all = lava::boot_jobs(super::select_jobs(&l.select)?);
    let jobs = lava::pick(all.clone(), l.job.as_deref(), l.shard)?;
    if let Some(s) = l.shard {
        check_jobs(&all, Some(s), host).map_err(anyhow::Error::msg)?;
    }
    check_jobs(&jobs, None, host).map_err(anyhow::Error::msg)?;
    if let Some(o) = &l.out {
        if o.exists() && !o.is_dir() {
            anyhow::bail!("--out {}: not a directory", o.display());
        }
    }
    Ok(())
}
