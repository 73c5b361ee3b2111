//! `cargo xtask`'s command layer: the flags (`flags.rs`, clap), the checks
//! that refuse bad input in one line before any work (`check.rs`), and the
//! dispatch: one match that turns the parsed flags into each command's
//! request and calls that command ([`crate::commands`]). Nothing below
//! this module imports it.

use anyhow::{bail, Result};
use std::ffi::OsString;
use std::process::ExitCode;

use crate::boot::qemu::Mode;
use crate::boot::{BootRequest, KernelRequest};
use crate::commands::bench::{self as bench_cmd, BenchRequest};
use crate::commands::lava::LavaRequest;
use crate::commands::module::ModuleRequest;
use crate::commands::run::RunRequest;
use crate::commands::shell::ShellRequest;
use crate::commands::test::{cmd_tests, Boot, TestBoot, TestRequest};
use crate::commands::{self, in_guest, matrix};
use crate::kernels::profile::{KernelKind, Profile};
use crate::plan::topology::TopologyKind;
use crate::util::validate::Host;
use crate::{report::summary, util, util::setup};

mod check;
mod flags;
pub mod help;

pub use check::check_args;
use flags::{BenchArgs, BenchKind, Cmd, KernelArgs, LavaArgs, RunArgs, SelectArgs, TestArgs};

/// `cargo xtask`'s entry point.
pub fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    let cli = match help::parse(&args) {
        Ok(cli) => cli,
        Err(e) => return help::clap_refusal(e),
    };
    // Bad input is refused here, in one line, before anything is built,
    // booted or tested.
    if let Err(why) = check::check_dash_dash(&args)
        .and_then(|()| check::validate(&cli, &Host::this()))
        .and_then(|()| check::check_cache(&cli.cmd))
    {
        eprintln!("error: {why}");
        return ExitCode::from(in_guest::exit::REFUSED);
    }
    util::set_verbose(cli.verbose);
    util::setup_llvm_path();
    // Commands whose last line is a totals line.
    let is_test = matches!(&cli.cmd, Cmd::Test(_) | Cmd::Merge(_))
        || matches!(&cli.cmd, Cmd::Matrix(m) if m.shard.is_some());
    let in_guest =
        matches!(&cli.cmd, Cmd::Run(r) if !r.cmd.is_empty()) || matches!(cli.cmd, Cmd::Shell(_));
    match dispatch(cli.cmd) {
        Ok(code) => code,
        Err(e) => {
            // Not `{:?}`: with RUST_BACKTRACE set that adds xtask's own backtrace.
            eprintln!("\nerror: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            if in_guest {
                return ExitCode::from(in_guest::exit::HOST_ERROR);
            }
            if is_test {
                // CI reads this line; a build or boot error is a failure too.
                println!("{}", summary::Totals::ONE_FAILURE);
            }
            ExitCode::FAILURE
        }
    }
}

/// The one dispatch: each command's request, made from its flags, handed
/// to that command.
fn dispatch(cmd: Cmd) -> Result<ExitCode> {
    match cmd {
        Cmd::Setup { force } => setup::cmd_setup(force).map(|_| ExitCode::SUCCESS),
        Cmd::Kernel(k) => commands::kernel::run(&kernels(&k)),
        Cmd::Module(m) => commands::module::run(match m.kdir {
            Some(dir) => ModuleRequest::Kdir(dir),
            None => ModuleRequest::Kernels(kernels(&m.kernel)),
        }),
        Cmd::Build(k) => commands::build::run(&kernels(&k)),
        Cmd::Run(r) => commands::run::run(run_request(r)?),
        Cmd::Shell(s) => {
            commands::shell::run(shell_request(&s, !util::verbose())?).map(ExitCode::from)
        }
        Cmd::Test(t) => commands::test::run(test_request(&t)?),
        Cmd::Bench(b) => bench_cmd::run(bench_request(&b)?),
        Cmd::Matrix(m) => {
            let jobs = select_jobs(&m.select)?;
            match m.shard {
                None => {
                    println!("{}", matrix::to_json(&jobs));
                    Ok(ExitCode::SUCCESS)
                }
                Some(s) => matrix::run_shard(s, &with_requests(jobs)?),
            }
        }
        Cmd::Merge(m) => {
            let out = m.out.unwrap_or_else(commands::merge::default_out);
            commands::merge::cmd_merge(&m.dirs, &out, m.expect.as_deref())
        }
        Cmd::Lava(l) => commands::lava::cmd_lava(lava_request(l)?),
    }
}

/// Each job with the request its command line makes (as `test` makes it:
/// a boot, or the tests of `run -- CMD` and `shell`).
fn with_requests(jobs: Vec<matrix::Job>) -> Result<Vec<(matrix::Job, TestRequest)>> {
    jobs.into_iter()
        .map(|j| test_request(&parse_test(&j.args)?).map(|t| (j, t)))
        .collect()
}

/// Each job with the boots its command line asks for.
fn with_boots(jobs: Vec<matrix::Job>) -> Result<Vec<(matrix::Job, Vec<TestBoot>)>> {
    jobs.into_iter()
        .map(|j| job_boots(&j).map(|b| (j, b)))
        .collect()
}

/// `lava`: the picked jobs, each one boot (the job of the `run -- CMD`
/// and `shell` tests boots no kernel of its own and is none of them).
fn lava_request(l: LavaArgs) -> Result<LavaRequest> {
    let all = commands::lava::boot_jobs(select_jobs(&l.select)?);
    let picked = commands::lava::pick(all, l.job.as_deref(), l.shard)?;
    let mut jobs = Vec::new();
    for (job, boots) in with_boots(picked)? {
        let [one] = <[TestBoot; 1]>::try_from(boots)
            .map_err(|_| anyhow::anyhow!("job {} is not one boot", job.id))?;
        jobs.push((job, one.req));
    }
    Ok(LavaRequest {
        jobs,
        artifact_url: l.artifact_url,
        out: l.out,
    })
}

/// The kernels `kernel`, `module` and `build` build: one per profile.
fn kernels(k: &KernelArgs) -> Vec<KernelRequest> {
    k.profiles()
        .into_iter()
        .map(|p| KernelRequest {
            src: k.kernel_src.clone(),
            fresh_config: k.fresh_config,
            profile: p,
            kind: KernelKind::Tierkit,
        })
        .collect()
}

/// `run`'s one boot: the demos, or with `-- CMD` the command.
fn run_request(r: RunArgs) -> Result<RunRequest> {
    let boot = run_boot(&r)?;
    Ok(if r.cmd.is_empty() {
        RunRequest::Demos(boot)
    } else {
        RunRequest::Cmd { boot, argv: r.cmd }
    })
}

/// The boot of `run` (mode `run`, or `cmd` with `-- CMD`).
fn run_boot(r: &RunArgs) -> Result<BootRequest> {
    let kind = r.guest.topology.unwrap_or(TopologyKind::NUMA);
    let p = r.guest.kernel.single_profile("run")?;
    let mode = if r.cmd.is_empty() {
        Mode::Run
    } else {
        Mode::Cmd
    };
    BootRequest::new(&r.guest.flags(), mode, p, kind, r.kunit)
}

/// The boot of `shell` (`quiet`: without `-v`).
fn shell_boot(g: &flags::GuestArgs, quiet: bool) -> Result<BootRequest> {
    let kind = g.topology.unwrap_or(TopologyKind::NUMA);
    let p = g.kernel.single_profile("shell")?;
    BootRequest::shell(&g.flags(), p, kind, quiet)
}

/// `shell`'s request: its boot, and a timeout only if `--timeout` is
/// given (a person's shell has none).
fn shell_request(s: &flags::ShellArgs, quiet: bool) -> Result<ShellRequest> {
    Ok(ShellRequest {
        boot: shell_boot(&s.guest, quiet)?,
        timeout: s.guest.timeout.map(std::time::Duration::from_secs),
    })
}

/// `bench <which>`'s one boot.
fn bench_boot(b: &BenchArgs, which: BenchKind) -> Result<BootRequest> {
    let name = match which {
        BenchKind::Clear => "clear",
        BenchKind::Wi => "wi",
        BenchKind::Gigantic => "gigantic",
    };
    let kind = b.guest.topology.unwrap_or(TopologyKind::NUMA);
    let p = b.guest.kernel.single_profile("bench")?;
    BootRequest::new(&b.guest.flags(), Mode::Bench(name.into()), p, kind, false)
}

/// `bench` without a name boots the default profile only.
fn check_bench_all_profile(b: &BenchArgs) -> Result<()> {
    if let Some(p) = b
        .guest
        .kernel
        .profiles()
        .into_iter()
        .find(|&p| p != Profile::Default)
    {
        bail!(
            "--profile {p}: `cargo xtask bench` without a name boots the default profile only; name a benchmark (clear, wi, gigantic) for another"
        );
    }
    Ok(())
}

/// `bench`: one benchmark's boot, or one boot per topology.
fn bench_request(b: &BenchArgs) -> Result<BenchRequest> {
    Ok(match b.which {
        Some(which) => BenchRequest::One(Box::new(bench_boot(b, which)?)),
        None => {
            check_bench_all_profile(b)?;
            let f = b.guest.flags();
            BenchRequest::All(
                bench_cmd::all_kinds(b.guest.topology)
                    .into_iter()
                    .map(|k| BootRequest::bench_all(&f, k))
                    .collect::<Result<_>>()?,
            )
        }
    })
}

/// The boots `t` asks for, `--job` applied.
fn test_boots(t: &TestArgs) -> Result<Vec<Boot>> {
    let all = commands::test::boots(&t.guest.flags(), &t.guest.kernel.profiles(), t.full, t.ci);
    commands::test::select_job(all, t.job.as_deref())
}

/// `test`'s boots as requests.
fn test_boot_requests(t: &TestArgs) -> Result<Vec<TestBoot>> {
    let f = t.guest.flags();
    test_boots(t)?
        .iter()
        .map(|b| TestBoot::new(&f, b))
        .collect()
}

/// `test`: its boots, the host tests, the tests of `run -- CMD` and `shell`.
fn test_request(t: &TestArgs) -> Result<TestRequest> {
    let f = t.guest.flags();
    let mut boots = test_boot_requests(t)?;
    // The tests of run -- CMD and shell boot guests of their own:
    // part of a whole test, never of one --job (a matrix shard).
    let cmd_tests = match t.job {
        Some(_) => Vec::new(),
        None => cmd_tests::selected(&f, &t.guest.kernel.profiles(), t.ci),
    };
    if cmd_tests::filter_is_theirs(t.guest.filter.as_deref()) {
        // `--filter 'xtask-*'`: only the tests of run -- CMD and shell.
        boots.clear();
    }
    Ok(TestRequest {
        host_tests: !t.no_host_tests,
        boots,
        cmd_tests,
        // --ci (which takes no --kernel): tierkit's own.
        cmd_kernel: if t.ci {
            KernelKind::Tierkit
        } else {
            t.guest.kernel_kind
        },
        cmd_kvm: f.kvm,
        repeat: t.repeat,
        lanes: t
            .lanes
            .unwrap_or(if t.ci && t.job.is_none() && util::nproc() >= 2 {
                2
            } else {
                1
            }),
    })
}

/// A `test` command line (`args` after `cargo xtask`) parsed: what
/// `matrix` and `lava` make each job's boots from.
fn parse_test(args: &[String]) -> Result<TestArgs> {
    let argv = std::iter::once("cargo xtask".to_string()).chain(args.iter().cloned());
    let cli = help::parse(argv).map_err(|e| anyhow::anyhow!(help::clap_error_line(&e)))?;
    match cli.cmd {
        Cmd::Test(t) => Ok(t),
        _ => bail!("not a test command: {}", args.join(" ")),
    }
}

/// The boots of `job`, from its command line, as requests.
fn job_boots(job: &matrix::Job) -> Result<Vec<TestBoot>> {
    test_boot_requests(&parse_test(&job.args)?)
}

/// The jobs `select` asks for (`matrix`, `lava`).
fn select_jobs(select: &SelectArgs) -> Result<Vec<matrix::Job>> {
    let sel = select.selection();
    let boots = test_boots(&parse_test(&sel.test_args())?)?;
    Ok(matrix::jobs(&sel, &boots))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests of `run -- CMD` and `shell` ride with a plain `test`, a
    /// `--ci` and a `--filter` that names them, never with the
    /// one-topology edit loop.
    #[test]
    fn run_and_shell_tests_stay_out_of_the_one_topology_loop() {
        let names = |args: &[&str]| {
            let args: Vec<String> = ["test"].iter().chain(args).map(|s| s.to_string()).collect();
            let t = test_request(&parse_test(&args).unwrap()).unwrap();
            (
                t.boots.len(),
                t.cmd_tests.iter().map(|c| c.name).collect::<Vec<_>>(),
            )
        };
        let all: Vec<&str> = cmd_tests::TESTS.iter().map(|c| c.name).collect();
        assert_eq!(names(&["--topology", "numa"]), (1, vec![]));
        assert_eq!(
            names(&["--topology", "cxl", "--filter", "tk-test-vma"]),
            (1, vec![])
        );
        assert_eq!(names(&[]).1, all);
        assert_eq!(names(&["--ci"]).1, all);
        let (boots, numa) = names(&["--topology", "numa", "--filter", "xtask-*"]);
        assert_eq!(boots, 0);
        assert!(numa.contains(&"xtask-run-numactl") && !numa.contains(&"xtask-run-cxl-list"));
        assert_eq!(
            names(&["--filter", "xtask-run-false"]),
            (0, vec!["xtask-run-false"])
        );
    }

    /// Every boot of a `test` is labelled, so that its summary's totals
    /// line is `tierkit [<label>]: ...` and the command's last line the
    /// one `tierkit: ...` line, after one boot as after several.
    #[test]
    fn every_test_boot_is_labelled() {
        for args in [
            &["test", "--topology", "numa"][..],
            &["test"],
            &["test", "--ci"],
        ] {
            let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            let t = test_request(&parse_test(&args).unwrap()).unwrap();
            for b in &t.boots {
                assert!(b.req.label.is_some(), "{args:?}: {}", b.run.name);
            }
        }
    }

    /// What `matrix --shard` runs for each job of `--ci`: a boot job its one
    /// boot and no run/shell tests; the xtask-cmd job those tests, on
    /// tierkit's kernel, and no boot.
    #[test]
    fn each_job_requests_what_its_command_line_runs() {
        let jobs = select_jobs(&SelectArgs::default()).unwrap();
        let reqs = with_requests(jobs).unwrap();
        let (last, boots) = reqs.split_last().unwrap();
        for (job, t) in boots {
            assert_eq!(job.kind, matrix::JobKind::Boot);
            assert_eq!(t.boots.len(), 1, "{}", job.id);
            assert!(t.cmd_tests.is_empty(), "{}", job.id);
            assert!(!t.host_tests, "{}", job.id);
        }
        let (job, t) = last;
        assert_eq!(job.kind, matrix::JobKind::XtaskCmd);
        assert!(t.boots.is_empty());
        assert!(!t.host_tests);
        assert_eq!(t.cmd_kernel, KernelKind::Tierkit);
        let names: Vec<&str> = t.cmd_tests.iter().map(|c| c.name).collect();
        assert_eq!(names, job.tests);
    }
}
