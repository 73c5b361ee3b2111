//! The guest's userspace binaries: every `[[bin]]` of the `tierkit-guest`
//! crate, built static (`+crt-static`) so the initramfs needs no libc.

use crate::say;
use crate::util::{self, show_cmd};
use anyhow::{bail, Context, Result};
use std::io::Read;
use std::path::{Path, PathBuf};
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
        .args(["--message-format=json-render-diagnostics", "--quiet"])
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        // Set by `cargo run`; it would override RUSTFLAGS.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .stdout(Stdio::piped());
    let shown = show_cmd(&cmd);
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

/// True when the ELF file has no `PT_INTERP` program header (it needs no
/// dynamic loader). Works for ET_EXEC and static-pie ET_DYN.
pub fn elf_is_static(path: &Path) -> Result<bool> {
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut head = vec![0u8; 64];
    f.read_exact(&mut head)
        .with_context(|| format!("{}: too short for ELF", path.display()))?;
    let mut all = head.clone();
    f.read_to_end(&mut all)?;
    elf_has_interp(&all)
        .map(|has| !has)
        .with_context(|| format!("{}", path.display()))
}

/// Parses ELF64 little-endian program headers; true if one is PT_INTERP.
pub fn elf_has_interp(data: &[u8]) -> Result<bool> {
    const PT_INTERP: u32 = 3;
    if data.len() < 64 || &data[..4] != b"\x7fELF" {
        bail!("not an ELF file");
    }
    if data[4] != 2 || data[5] != 1 {
        bail!("not a 64-bit little-endian ELF file");
    }
    let u16_at = |o: usize| u16::from_le_bytes([data[o], data[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(data[0x20..0x28].try_into().unwrap()) as usize;
    let phentsize = u16_at(0x36);
    let phnum = u16_at(0x38);
    for i in 0..phnum {
        let o = phoff + i * phentsize;
        if o + 4 > data.len() {
            bail!("truncated program headers");
        }
        let p_type = u32::from_le_bytes(data[o..o + 4].try_into().unwrap());
        if p_type == PT_INTERP {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elf_with_phdrs(types: &[u32]) -> Vec<u8> {
        let mut d = vec![0u8; 64 + 56 * types.len()];
        d[..4].copy_from_slice(b"\x7fELF");
        d[4] = 2;
        d[5] = 1;
        d[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        d[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        d[0x38..0x3a].copy_from_slice(&(types.len() as u16).to_le_bytes());
        for (i, t) in types.iter().enumerate() {
            let o = 64 + 56 * i;
            d[o..o + 4].copy_from_slice(&t.to_le_bytes());
        }
        d
    }

    #[test]
    fn interp_detection() {
        assert!(elf_has_interp(&elf_with_phdrs(&[6, 3, 1])).unwrap());
        assert!(!elf_has_interp(&elf_with_phdrs(&[1, 1, 2])).unwrap());
        assert!(elf_has_interp(b"#!/bin/sh\n").is_err());
    }

    #[test]
    fn host_binaries() {
        // /bin/sh on Debian is dynamic (dash); skip quietly elsewhere.
        if let Ok(s) = elf_is_static(Path::new("/bin/sh")) {
            assert!(!s);
        }
    }
}
