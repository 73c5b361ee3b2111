//! The kernel build: `make` into `kernels/<key>/` with a progress bar (a
//! line every 30 s when not on a terminal), unless the cache
//! ([`super::cache`]) has it.

use super::cache::{self, Stamp, ARTIFACTS};
use super::{kmake, KernelBuild, KernelConfig, STAMP};
use crate::kernels::kconfig::is_kbuild_step;
use crate::say;
use crate::util::{self, show_cmd};
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

/// Builds the kernel into `kernels/<key>/` unless a finished build is there.
pub fn build(cfg: &KernelConfig) -> Result<KernelBuild> {
    let kernels = util::cache_dir()?.join("kernels");
    let out = kernels.join(&cfg.key);
    let result = KernelBuild {
        src: cfg.src.dir.clone(),
        out_dir: out.to_path_buf(),
        version: cfg.src.version.clone(),
        config_hash: cfg.hash.clone(),
        key: cfg.key.clone(),
        bzimage: out.join("arch/x86/boot/bzImage"),
        profile: cfg.profile,
        debian: None,
    };
    fs::create_dir_all(&kernels)?;
    let _lock = util::lock(
        &kernels.join(format!("{}.lock", cfg.key)),
        "the kernel build",
    )?;
    // Someone (another shell, a hand-started make) may be building it now.
    cache::wait_for_foreign_make(&out);
    let built = out.join(STAMP).is_file();
    if cache::reuse(cfg, &out, built)? {
        return Ok(result);
    }
    let artifacts_ok = cache::artifacts_ok(&out);
    fs::create_dir_all(&out)?;
    let cfg_path = out.join(".config");
    if fs::read_to_string(&cfg_path).ok().as_deref() != Some(cfg.text.as_str()) {
        fs::write(&cfg_path, &cfg.text)?;
    }
    let t = util::Timer::start();
    let est = cache::expected_steps(&kernels);
    let jobs = util::nproc();
    let log = out.join("build.log");
    announce(cfg, built, artifacts_ok, jobs, &log);
    let steps = make(cfg, &out, &log, est, jobs, &t)?;
    let prev_steps = cache::read_stamp(&out).map(|s| s.steps).unwrap_or(0);
    cache::write_stamp(
        &out,
        &Stamp {
            key: cfg.key.clone(),
            version: cfg.src.version.clone(),
            src: cfg.src.dir.display().to_string(),
            steps: if built { prev_steps.max(steps) } else { steps },
            seconds: t.elapsed().as_secs(),
        },
    )?;
    say!(
        "kernel {} built in {} ({steps} steps)",
        cfg.key,
        util::fmt_dur(t.elapsed())
    );
    Ok(result)
}

/// What is about to happen, and how long a cold build takes.
fn announce(cfg: &KernelConfig, built: bool, artifacts_ok: bool, jobs: usize, log: &Path) {
    let what = if built {
        "incremental make in"
    } else if artifacts_ok {
        "finishing"
    } else {
        "building"
    };
    say!(
        "{what} the {} kernel {} with -j{jobs} (log: {})",
        cfg.profile,
        cfg.key,
        log.display()
    );
    if !built && !artifacts_ok {
        say!(
            "a cold build takes several minutes; measured times: Documentation/results/tests.md, \"CI\""
        );
    }
}

/// A progress bar of `est` steps on a terminal, hidden otherwise.
fn progress_bar(est: u64) -> indicatif::ProgressBar {
    let pb = indicatif::ProgressBar::new(est);
    if util::is_tty() {
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner:.green} [{elapsed_precise}] [{bar:30}] {pos}/~{len} {wide_msg}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        pb.enable_steady_tick(Duration::from_millis(200));
    } else {
        pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    pb
}

/// Progress as the plain log tells it: `812/~1850 steps` against the
/// estimate, and past it `2022 steps (estimate was ~1850)`, never a count
/// above its own total.
fn step_count(steps: u64, est: u64) -> String {
    if steps <= est {
        format!("{steps}/~{est} steps")
    } else {
        format!("{steps} steps (estimate was ~{est})")
    }
}

/// Runs `make -jJOBS` into `out` (output to `log`), counting Kbuild steps
/// against `est`, and checks [`ARTIFACTS`] are there after. The steps.
fn make(
    cfg: &KernelConfig,
    out: &Path,
    log: &Path,
    est: u64,
    jobs: usize,
    t: &util::Timer,
) -> Result<u64> {
    let pb = progress_bar(est);
    let mut steps = 0u64;
    let mut last_plain = Instant::now();
    let mut make = kmake(&cfg.src, out);
    make.arg(format!("-j{jobs}"));
    let shown = show_cmd(&make);
    let res = util::run_logged(make, log, |line| {
        if is_kbuild_step(line) {
            steps += 1;
            if steps > pb.length().unwrap_or(0) {
                pb.set_length(steps + 50);
            }
            pb.set_position(steps);
            pb.set_message(line.trim().to_string());
            if !util::is_tty() && last_plain.elapsed() >= Duration::from_secs(30) {
                last_plain = Instant::now();
                say!(
                    "kernel build: {}, {}: {}",
                    step_count(steps, est),
                    util::fmt_dur(t.elapsed()),
                    line.trim()
                );
            }
        }
    });
    pb.finish_and_clear();
    res.with_context(|| format!("building kernel {} failed: `{shown}`", cfg.key))?;
    for a in ARTIFACTS {
        if !out.join(a).is_file() {
            bail!(
                "`{shown}` succeeded but {} is missing",
                out.join(a).display()
            );
        }
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain log never counts past its own total (`2022/~1850`).
    #[test]
    fn step_count_past_the_estimate() {
        assert_eq!(step_count(812, 1850), "812/~1850 steps");
        assert_eq!(step_count(1850, 1850), "1850/~1850 steps");
        assert_eq!(step_count(2022, 1850), "2022 steps (estimate was ~1850)");
    }
}
