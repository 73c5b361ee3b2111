//! Whether a binary is static: the ELF program headers, read without a
//! loader (the initramfs has no libc, so every binary in it must be).

use anyhow::{bail, Context, Result};
use std::io::Read;
use std::path::Path;

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
