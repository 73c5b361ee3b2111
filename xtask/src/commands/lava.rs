//! `cargo xtask lava`: LAVA job definitions for the jobs of `cargo xtask
//! matrix`, so that a LAVA lab boots the same kernel and initramfs with the
//! same QEMU topology and kernel command line as `cargo xtask test`.
//!
//! Per job, in `target/tierkit/lava/<job>/`: `bzImage` and
//! `initramfs.cpio` (copies of what `test` boots), `spec.json` (what the
//! generator was given) and `lava-job.yaml`. The YAML comes from tuxlava
//! (`xtask/python/tierkit_lava.py`, in xtask's venv), then gets the boot's
//! QEMU context, command line and LAVA monitors that read KTAP and /init's
//! markers off the console. Artifacts are `file://` paths on this machine,
//! or `--artifact-url BASE/<job>/<file>` where CI publishes them.

use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tierkit_protocol::marker;

use super::matrix::{Job, JobKind, Shard};
use crate::boot::{self, BootRequest, GuestFlags};
use crate::util::pyenv::Venv;
use crate::{boot::qemu, say, util};

/// `cargo xtask lava` as asked: the picked jobs, each with its one boot.
pub struct LavaRequest {
    pub jobs: Vec<(Job, BootRequest)>,
    /// `--artifact-url`.
    pub artifact_url: Option<String>,
    /// `--out`; `None`: target/tierkit/lava.
    pub out: Option<PathBuf>,
}

/// An `http://`, `https://` or `file://` base URL, without a trailing `/`.
pub(crate) fn parse_artifact_url(s: &str) -> std::result::Result<String, String> {
    let ok = ["http://", "https://", "file:///"]
        .iter()
        .any(|p| s.starts_with(p) && s.len() > p.len());
    if !ok || s.contains(char::is_whitespace) || s.contains('"') {
        return Err("give an http://, https:// or file:/// URL without spaces or quotes".into());
    }
    Ok(s.trim_end_matches('/').to_string())
}

/// What the Python generator is given (`spec.json`).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Spec {
    pub job_name: String,
    pub kernel: String,
    /// Ends in `.cpio`: tuxlava passes such a rootfs as `-initrd`.
    pub initramfs: String,
    pub cmdline: String,
    pub machine: String,
    pub cpu: String,
    pub memory: String,
    pub extra_options: Vec<String>,
    pub deploy_minutes: u64,
    pub boot_minutes: u64,
    pub test_minutes: u64,
    pub boot_prompt: String,
    pub monitors: serde_json::Value,
}

/// QEMU options that take no value.
const FLAGS: &[&str] = &["-nodefaults", "-no-user-config", "-no-reboot", "-nographic"];
/// QEMU options LAVA's qemu device sets itself (or that name this
/// machine's files): dropped.
const DROPPED: &[&str] = &["-display", "-serial", "-kernel", "-initrd", "-append"];

/// `qemu_args` split into LAVA's context: machine, cpu, memory and the
/// rest as `extra_options` (one `-opt value` string each).
pub fn context_of(args: &[String]) -> Result<(String, String, String, Vec<String>)> {
    let (mut machine, mut cpu, mut memory) = (None, None, None);
    let mut extra = Vec::new();
    let mut it = args.iter();
    while let Some(opt) = it.next() {
        if FLAGS.contains(&opt.as_str()) {
            continue;
        }
        let value = it
            .next()
            .with_context(|| format!("QEMU option {opt} without a value"))?;
        match opt.as_str() {
            "-machine" if machine.is_none() => machine = Some(value.clone()),
            "-cpu" => cpu = Some(value.clone()),
            "-m" => memory = Some(value.clone()),
            o if DROPPED.contains(&o) => {}
            o => extra.push(format!("{o} {value}")),
        }
    }
    Ok((
        machine.context("no -machine")?,
        cpu.context("no -cpu")?,
        memory.context("no -m")?,
        extra,
    ))
}

/// LAVA monitors for the console: KUnit's KTAP results while tierkit.ko
/// loads, then each userspace test's `TIERKIT-USERTEST name rc=N` until
/// `TIERKIT-DONE`. The result is rc's first digit, which is 0 only for
/// rc 0 (pass); any other is a failure.
pub fn monitors() -> serde_json::Value {
    let mut rc = serde_json::Map::new();
    for n in 0..=9 {
        let r = if n == 0 { "pass" } else { "fail" };
        rc.insert(n.to_string(), r.into());
    }
    let insmod_start = marker::line(&marker::start(marker::INSMOD), "");
    let insmod_end = marker::line(marker::INSMOD, "rc=");
    let done = marker::line(marker::DONE, "");
    let usertest = marker::line(marker::ProgKind::UserTest.tag(), "");
    serde_json::json!([
        {
            "name": "tierkit-kunit",
            "start": insmod_start,
            "end": insmod_end,
            "pattern": "(?P<result>ok|not ok) \\d+ (?P<test_case_id>[^#\\s]+)",
            "fixupdict": { "ok": "pass", "not ok": "fail" }
        },
        {
            "name": "tierkit-userspace",
            "start": insmod_end,
            "end": done,
            "pattern": format!("{usertest} (?P<test_case_id>\\S+) rc=(?P<result>[0-9])[0-9]*"),
            "fixupdict": rc
        }
    ])
}

/// The spec of `job`'s LAVA job: its QEMU arguments (as `qemu_args` made
/// them), kernel command line and timeout; artifacts at `urls`.
pub fn spec(
    job: &Job,
    qemu_args: &[String],
    cmdline: &str,
    timeout_secs: u64,
    urls: (String, String),
) -> Result<Spec> {
    let (machine, cpu, memory, extra_options) = context_of(qemu_args)?;
    let minutes = timeout_secs.div_ceil(60).max(1);
    Ok(Spec {
        job_name: format!("tierkit {} ({})", job.id, job.name),
        kernel: urls.0,
        initramfs: urls.1,
        cmdline: cmdline.to_string(),
        machine,
        cpu,
        memory,
        extra_options,
        deploy_minutes: 5,
        boot_minutes: 5,
        test_minutes: minutes,
        boot_prompt: marker::line(marker::BOOT, ""),
        monitors: monitors(),
    })
}

/// The artifacts' URLs: `base/<job>/bzImage` and `.../initramfs.cpio`, or
/// `file://` paths of the copies in `dir`.
pub fn artifact_urls(base: Option<&str>, job: &str, dir: &Path) -> (String, String) {
    let url = |f: &str| match base {
        Some(b) => format!("{b}/{job}/{f}"),
        None => format!("file://{}", dir.join(f).display()),
    };
    (url("bzImage"), url("initramfs.cpio"))
}

/// Writes `spec.json` and, generated from it, `lava-job.yaml` into `dir`.
pub fn generate(venv: &Venv, spec: &Spec, dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let spec_path = dir.join("spec.json");
    util::write_atomic(&spec_path, serde_json::to_string_pretty(spec)?.as_bytes())?;
    let yaml = dir.join("lava-job.yaml");
    let (s, y) = (spec_path.display().to_string(), yaml.display().to_string());
    let out = venv.tool(&["lava-job", &s, &y]).output()?;
    if !out.status.success() {
        bail!(
            "tuxlava refused the job {}: {}",
            spec.job_name,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(yaml)
}

/// The problems `tierkit_lava.py lava-check` finds in a job file.
pub fn check(venv: &Venv, yaml: &Path) -> Result<Vec<String>> {
    let out = venv
        .tool(&["lava-check", &yaml.display().to_string()])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let problems: Vec<String> = text.lines().map(str::to_string).collect();
    if !out.status.success() && problems.is_empty() {
        bail!(
            "lava-check failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(problems)
}

/// The boots of `all`: a LAVA job boots one kernel; the job of the `run
/// -- CMD` and `shell` tests runs xtask itself and has none.
pub fn boot_jobs(mut all: Vec<Job>) -> Vec<Job> {
    all.retain(|j| j.kind == JobKind::Boot);
    all
}

/// The jobs of `all` that `--job` or `--shard` pick; without either, all.
pub fn pick(all: Vec<Job>, job: Option<&str>, shard: Option<Shard>) -> Result<Vec<Job>> {
    if let Some(id) = job {
        return match all.iter().find(|j| j.id == id) {
            Some(j) => Ok(vec![j.clone()]),
            None => bail!(
                "--job {id}: no such job; the jobs are {}",
                all.iter()
                    .map(|j| j.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
    }
    Ok(match shard {
        Some(s) => s.pick(&all),
        None => all,
    })
}

/// The spec of `job`'s LAVA job with its artifacts in `dir` (`bzImage`,
/// `initramfs.cpio`) or under `artifact_url`: the boot `cargo xtask test
/// ... --job ID` plans (topology, QEMU arguments, kernel command line,
/// timeout); with `kernel` (the built kernel), the tests its config cannot
/// run are left out as `test` leaves them out. Builds nothing.
pub fn plan_job(job: &Job, dir: &Path, artifact_url: Option<&str>) -> Result<Spec> {
    let Some((p, k, run)) = job.boot else {
        bail!("job {} is not one boot", job.id);
    };
    let req = BootRequest::for_run(&GuestFlags::default(), p, k, &run)?;
    plan_built(job, &req, dir, artifact_url, None)
}

fn plan_built(
    job: &Job,
    req: &BootRequest,
    dir: &Path,
    artifact_url: Option<&str>,
    kernel: Option<&crate::kernels::kernel::KernelBuild>,
) -> Result<Spec> {
    let mut cfg = boot::plan(req, qemu::Accel::Tcg)?;
    if let Some(kb) = kernel {
        boot::leave_out_unrunnable(kb, &mut cfg);
    }
    let args = qemu::qemu_args(
        &dir.join("bzImage"),
        &dir.join("initramfs.cpio"),
        &dir.join("data.log"),
        &cfg,
    )?;
    let cmdline = qemu::kernel_cmdline(&cfg)?;
    let urls = artifact_urls(artifact_url, &job.id, dir);
    spec(job, &args, &cmdline, cfg.job.timeout.as_secs(), urls)
}

/// `--out`'s default: `target/tierkit/lava`.
pub fn default_out() -> PathBuf {
    util::out_dir().join("lava")
}

/// `cargo xtask lava`: builds each picked job's kernel and initramfs
/// (cached), copies them into `<out>/<job>/` and writes its LAVA job there.
pub(crate) fn cmd_lava(l: LavaRequest) -> Result<ExitCode> {
    let out = l.out.clone().unwrap_or_else(default_out);
    crate::util::setup::ensure()?;
    let venv = Venv::ensure()?;
    for (job, req) in &l.jobs {
        let dir = out.join(&job.id);
        std::fs::create_dir_all(&dir)?;
        let b = boot::build_all(&req.kernel, req.kind().spec().cxl, false, &dir, Vec::new())?;
        std::fs::copy(&b.kernel.bzimage, dir.join("bzImage"))?;
        if b.initramfs.path != dir.join("initramfs.cpio") {
            std::fs::copy(&b.initramfs.path, dir.join("initramfs.cpio"))?;
        }
        let s = plan_built(job, req, &dir, l.artifact_url.as_deref(), Some(&b.kernel))?;
        let yaml = generate(&venv, &s, &dir)?;
        let problems = check(&venv, &yaml)?;
        if !problems.is_empty() {
            bail!("{}: {}", yaml.display(), problems.join("; "));
        }
        say!("LAVA job {}: {}", job.id, yaml.display());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qemu_arguments_split_into_the_lava_context() {
        let args: Vec<String> = [
            "-nodefaults",
            "-display",
            "none",
            "-machine",
            "q35,hmat=on,cxl=on",
            "-smp",
            "2",
            "-m",
            "8G,maxmem=12G",
            "-M",
            "cxl-fmw.0.size=4G",
            "-cpu",
            "max",
            "-accel",
            "tcg,thread=multi",
            "-serial",
            "stdio",
            "-no-reboot",
            "-kernel",
            "/k",
            "-initrd",
            "/i",
            "-append",
            "console=ttyS0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (machine, cpu, memory, extra) = context_of(&args).unwrap();
        assert_eq!(machine, "q35,hmat=on,cxl=on");
        assert_eq!((cpu.as_str(), memory.as_str()), ("max", "8G,maxmem=12G"));
        assert_eq!(
            extra,
            ["-smp 2", "-M cxl-fmw.0.size=4G", "-accel tcg,thread=multi"]
        );
        assert!(context_of(&["-cpu".to_string()]).is_err());
    }

    #[test]
    fn the_userspace_monitor_passes_rc_0_only() {
        let m = monitors();
        let re = m[1]["pattern"].as_str().unwrap();
        assert!(re.contains("rc=(?P<result>[0-9])[0-9]*"), "{re}");
        let fix = &m[1]["fixupdict"];
        assert_eq!(fix["0"], "pass");
        for d in 1..=9 {
            assert_eq!(fix[d.to_string()], "fail");
        }
    }

    #[test]
    fn artifact_urls_and_their_flag() {
        let (k, i) = artifact_urls(None, "numa-full", Path::new("/o/numa-full"));
        assert_eq!(k, "file:///o/numa-full/bzImage");
        assert_eq!(i, "file:///o/numa-full/initramfs.cpio");
        let (k, _) = artifact_urls(Some("https://x.org/r"), "numa-full", Path::new("/o"));
        assert_eq!(k, "https://x.org/r/numa-full/bzImage");
        assert_eq!(
            parse_artifact_url("https://x.org/r/").unwrap(),
            "https://x.org/r"
        );
        assert!(parse_artifact_url("ftp://x.org").is_err());
        assert!(parse_artifact_url("https://").is_err());
        assert!(parse_artifact_url("https://x.org/a b").is_err());
    }
}
