//! LAVA job definitions (`cargo xtask lava`), checked without a LAVA lab:
//! LAVA's own schema (lava-common) is not on PyPI, so what is checked is
//! that tuxlava accepts each job of `cargo xtask matrix` (the `--ci` boots,
//! planned as `cargo xtask test --ci --job ID` plans them: topology, QEMU
//! arguments, kernel command line, timeout), that the YAML it leads to
//! loads and has what a LAVA QEMU job needs (device_type qemu, context
//! arch/machine/cpu/memory, deploy/boot/test actions with timeouts, the
//! monitors), and that every file:// artifact it names exists. The
//! artifacts here are small placeholder files, not a built kernel and
//! initramfs: this checks the generator's path handling, not a boot.

use std::path::{Path, PathBuf};

use xtask::lava;
use xtask::matrix::{self, Job, JobKind, Selection};
use xtask::plan::runs;
use xtask::util::pyenv::Venv;

/// The boots of `cargo xtask matrix` (`--ci`); its last job, the `run --
/// CMD` and `shell` tests, boots no kernel of its own and has no LAVA job.
fn ci_jobs() -> Vec<Job> {
    let sel = Selection {
        ci: true,
        ..Default::default()
    };
    let mut jobs = matrix::jobs(&sel, &runs::ci_boots());
    let last = jobs.pop().unwrap();
    assert_eq!(last.kind, JobKind::XtaskCmd);
    let e = lava::plan_job(&last, Path::new("/nonexistent"), None).unwrap_err();
    assert!(e.to_string().contains("is not one boot"), "{e}");
    assert!(jobs.iter().all(|j| j.kind == JobKind::Boot));
    assert_eq!(jobs.len(), runs::ci_boots().len());
    jobs
}

fn scratch(name: &str) -> PathBuf {
    let d =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn placeholders(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("bzImage"), b"placeholder kernel").unwrap();
    std::fs::write(dir.join("initramfs.cpio"), b"placeholder initramfs").unwrap();
}

#[test]
fn every_ci_job_becomes_a_lava_job_tuxlava_accepts() {
    let venv = Venv::ensure().unwrap_or_else(|e| panic!("{e:#}"));
    let root = scratch("lava");
    for job in ci_jobs() {
        let dir = root.join(&job.id);
        placeholders(&dir);
        let spec = lava::plan_job(&job, &dir, None).unwrap();
        assert!(
            spec.cmdline.contains("tierkit.mode=test"),
            "{}",
            spec.cmdline
        );
        assert!(spec.machine.starts_with("q35"), "{}", spec.machine);
        let cxl = job.topology == "cxl";
        assert_eq!(
            spec.extra_options.iter().any(|o| o.contains("cxl-type3")),
            cxl,
            "{}: {:?}",
            job.id,
            spec.extra_options
        );
        assert!(!spec.extra_options.iter().any(|o| o.starts_with("-kernel")
            || o.starts_with("-initrd")
            || o.starts_with("-serial")));
        let yaml =
            lava::generate(&venv, &spec, &dir).unwrap_or_else(|e| panic!("{}: {e:#}", job.id));
        let problems = lava::check(&venv, &yaml).unwrap();
        assert!(problems.is_empty(), "{}: {problems:?}", job.id);
        let text = std::fs::read_to_string(&yaml).unwrap();
        assert!(text.contains("device_type: qemu"), "{text}");
        assert!(text.contains(&format!("file://{}", dir.join("initramfs.cpio").display())));
        assert!(text.contains("-initrd {rootfs}"), "{text}");
        assert!(text.contains(&spec.cmdline), "the boot's own command line");
        assert!(
            !text.contains("auto_login"),
            "tierkit's /init is no login shell"
        );
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn missing_artifacts_and_broken_jobs_are_found() {
    let venv = Venv::ensure().unwrap_or_else(|e| panic!("{e:#}"));
    let root = scratch("lava-bad");
    let job = ci_jobs().into_iter().find(|j| j.id == "cxl-full").unwrap();
    let dir = root.join(&job.id);
    placeholders(&dir);
    let spec = lava::plan_job(&job, &dir, None).unwrap();
    let yaml = lava::generate(&venv, &spec, &dir).unwrap();
    assert!(lava::check(&venv, &yaml).unwrap().is_empty());

    // The initramfs is gone: named, missing.
    std::fs::remove_file(dir.join("initramfs.cpio")).unwrap();
    let p = lava::check(&venv, &yaml).unwrap();
    assert!(
        p.iter()
            .any(|l| l.contains("initramfs.cpio does not exist")),
        "{p:?}"
    );

    // No test action: refused.
    let text = std::fs::read_to_string(&yaml).unwrap();
    let cut = text.split("- test:").next().unwrap().to_string();
    let broken = dir.join("broken.yaml");
    std::fs::write(&broken, cut).unwrap();
    let p = lava::check(&venv, &broken).unwrap();
    assert!(
        p.iter().any(|l| l.contains("not deploy, boot, test")),
        "{p:?}"
    );

    // Published artifacts: URLs under the base, not file paths.
    let spec = lava::plan_job(&job, &dir, Some("https://ci.example.org/tierkit/42")).unwrap();
    assert_eq!(
        spec.kernel,
        "https://ci.example.org/tierkit/42/cxl-full/bzImage"
    );
    assert_eq!(
        spec.initramfs,
        "https://ci.example.org/tierkit/42/cxl-full/initramfs.cpio"
    );
    let yaml = lava::generate(&venv, &spec, &dir).unwrap();
    assert!(lava::check(&venv, &yaml).unwrap().is_empty());

    // A command line LAVA's image_arg cannot carry.
    let mut bad = spec.clone();
    bad.cmdline.push_str(" x=\"y\"");
    let e = lava::generate(&venv, &bad, &dir).unwrap_err();
    assert!(e.to_string().contains("tuxlava refused"), "{e}");
    std::fs::remove_dir_all(&root).unwrap();
}
