//! The guest's userspace binaries: every `[[bin]]` of the `tierkit-guest`
//! crate, built static (`+crt-static`) so the initramfs needs no libc.

use crate::say;
use crate::util::elf::elf_is_static;
use crate::util::{self, show_cmd};
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::{Command, Stdio};

pub const GUEST_TARGET: &str = "x86_64-unknown-linux-gnu";

/// One static guest binary; it lands in the initramfs as `/bin/<name>`.
#[derive(Clone, Debug)]
pub struct GuestBinary {
    pub name: String,
    pub path: PathBuf,
}

/// Builds `tierkit-guest` for the guest and returns its binaries.
pub fn build() -> Result<Vec<GuestBinary>> {
    let root = util::repo_root();
    let target_dir = util::target_dir().join("guest");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args([
            "build",
            "--release",
            "-p",
            "tierkit-guest",
            "--target",
            GUEST_TARGET,
        ])
        .arg("--target-dir")
        .arg(&target_dir)
        .arg("--message-format=json-render-diagnostics")
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        // Set by `cargo run`; it would override RUSTFLAGS.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .stdout(Stdio::piped());
    // cargo's own progress where a person watches; its lines otherwise.
    if !util::is_tty() {
        cmd.arg("--quiet");
    }
    let shown = show_cmd(&cmd);
    let _slow = util::say_if_slow(format!(
        "building the guest binaries (tierkit-guest for {}, static, release): \
         a first build compiles every crate (minutes; measured times: \
         Documentation/results/tests.md, \"Timings\"), later ones take seconds",
        GUEST_TARGET
    ));
    let out = cmd
        .output()
        .with_context(|| format!("could not start `{shown}`"))?;
    if !out.status.success() {
        bail!(
            "building the guest binaries failed: `{shown}` ({}); compiler output above",
            out.status
        );
    }
    let mut bins = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["reason"] != "compiler-artifact" {
            continue;
        }
        let is_bin = v["target"]["kind"]
            .as_array()
            .is_some_and(|k| k.iter().any(|k| k == "bin"));
        let Some(exe) = v["executable"].as_str() else {
            continue;
        };
        if !is_bin {
            continue;
        }
        let name = v["target"]["name"].as_str().unwrap_or_default().to_string();
        bins.push(GuestBinary {
            name,
            path: PathBuf::from(exe),
        });
    }
    bins.sort_by(|a, b| a.name.cmp(&b.name));
    for b in &bins {
        if !elf_is_static(&b.path)? {
            bail!(
                "{} is dynamically linked (has PT_INTERP); the guest has no libc. \
                 Build it with RUSTFLAGS=\"-C target-feature=+crt-static\"",
                b.path.display()
            );
        }
    }
    if util::verbose() {
        say!(
            "guest binaries: {}",
            bins.iter()
                .map(|b| b.name.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    Ok(bins)
}
