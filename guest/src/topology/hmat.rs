//! The firmware's memory performance per initiator, from the ACPI tables
//! themselves: HMAT (Heterogeneous Memory Attribute Table) and SRAT (System
//! Resource Affinity Table), as `/sys/firmware/acpi/tables/{HMAT,SRAT}`
//! give them.
//!
//! The kernel reduces HMAT to one best initiator per memory node (sysfs
//! `node*/access0` and `access1`, read by [`crate::topology::node`]); the per-socket
//! weights need every initiator-target pair, so this parses the table.
//! Pure: bytes in, figures out; tested on the host on tables recorded from
//! the `socket2` topology's guest. Values are normalized as the kernel's
//! `hmat_normalize()` (drivers/acpi/numa/hmat.c) does: bandwidth in MB/s,
//! latency in ns; an entry of 0 or 0xffff is no figure.

use std::fmt;

/// A table the parser refuses, with the byte offset where it went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadTable(pub String);

impl fmt::Display for BadTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadTable {}

fn bad<T>(msg: impl Into<String>) -> Result<T, BadTable> {
    Err(BadTable(msg.into()))
}

/// Length of the standard ACPI table header.
const ACPI_HEADER: usize = 36;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// The table's bytes after its signature, length and checksum are checked:
/// `b[..length]`, and its revision.
fn checked<'a>(b: &'a [u8], sig: &[u8; 4]) -> Result<(&'a [u8], u8), BadTable> {
    if b.len() < ACPI_HEADER || &b[..4] != sig {
        return bad(format!(
            "not an ACPI {} table (signature or header)",
            String::from_utf8_lossy(sig)
        ));
    }
    let len = u32_at(b, 4).unwrap_or(0) as usize;
    if len < ACPI_HEADER || len > b.len() {
        return bad(format!("table length {len} outside 36..={}", b.len()));
    }
    let t = &b[..len];
    if t.iter().fold(0u8, |s, &x| s.wrapping_add(x)) != 0 {
        return bad("checksum does not sum to 0");
    }
    Ok((t, b[8]))
}

/// The sub-structures `(type, bytes)` from `start`, each with a `length`
/// field at `len_at` of width `len_width` (2 or 4 bytes in HMAT, 1 in SRAT).
fn structures(
    t: &[u8],
    start: usize,
    len_at: usize,
    len_width: usize,
) -> Result<Vec<(u16, &[u8])>, BadTable> {
    let mut out = Vec::new();
    let mut at = start;
    while at < t.len() {
        let (ty, len) = match len_width {
            1 => (
                t.get(at).map(|&x| u16::from(x)),
                t.get(at + len_at).map(|&x| x as usize),
            ),
            _ => (u16_at(t, at), u32_at(t, at + len_at).map(|x| x as usize)),
        };
        let (Some(ty), Some(len)) = (ty, len) else {
            return bad(format!("structure header cut at byte {at}"));
        };
        let end = at.checked_add(len).filter(|&e| e <= t.len());
        let Some(end) = end.filter(|_| len >= len_at + len_width) else {
            return bad(format!(
                "structure at byte {at}: length {len} runs past the table"
            ));
        };
        out.push((ty, &t[at..end]));
        at = end;
    }
    Ok(out)
}

/// HMAT's data types (System Locality Latency and Bandwidth Information).
pub const ACCESS_LATENCY: u8 = 0;
pub const READ_LATENCY: u8 = 1;
pub const WRITE_LATENCY: u8 = 2;
pub const ACCESS_BANDWIDTH: u8 = 3;
pub const READ_BANDWIDTH: u8 = 4;
pub const WRITE_BANDWIDTH: u8 = 5;

/// A Memory Proximity Domain Attributes structure (HMAT type 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DomainAttrs {
    /// The memory's proximity domain.
    pub memory: u32,
    /// The attached initiator's domain, when the flags say it is valid.
    pub initiator: Option<u32>,
}

/// A System Locality Latency and Bandwidth Information structure (HMAT
/// type 1): one data type, a matrix initiator x target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Locality {
    /// Bits 0-3 of the flags: 0 memory, 1-3 a memory-side cache level.
    pub hierarchy: u8,
    pub data_type: u8,
    pub initiators: Vec<u32>,
    pub targets: Vec<u32>,
    pub base_unit: u64,
    /// Row-major: `entries[i * targets.len() + t]`.
    pub entries: Vec<u16>,
}

/// A parsed HMAT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hmat {
    pub revision: u8,
    pub domains: Vec<DomainAttrs>,
    pub localities: Vec<Locality>,
}

fn parse_locality(s: &[u8], at: usize) -> Result<Locality, BadTable> {
    let short = || BadTable(format!("locality structure at byte {at} is cut short"));
    let flags = *s.get(8).ok_or_else(short)?;
    let data_type = *s.get(9).ok_or_else(short)?;
    let ni = u32_at(s, 12).ok_or_else(short)? as usize;
    let nt = u32_at(s, 16).ok_or_else(short)? as usize;
    let base_unit = u64_at(s, 24).ok_or_else(short)?;
    // 32 bytes of header, 4 per domain, 2 per entry: checked in u64.
    let need = 32 + 4 * (ni as u64 + nt as u64) + 2 * (ni as u64 * nt as u64);
    if need > s.len() as u64 {
        return bad(format!(
            "locality structure at byte {at}: {ni} x {nt} entries need {need} bytes, it has {}",
            s.len()
        ));
    }
    let list = |from: usize, n: usize| -> Vec<u32> {
        (0..n).filter_map(|k| u32_at(s, from + 4 * k)).collect()
    };
    let initiators = list(32, ni);
    let targets = list(32 + 4 * ni, nt);
    let e0 = 32 + 4 * (ni + nt);
    let entries = (0..ni * nt).filter_map(|k| u16_at(s, e0 + 2 * k)).collect();
    Ok(Locality {
        hierarchy: flags & 0x0f,
        data_type,
        initiators,
        targets,
        base_unit,
        entries,
    })
}

impl Hmat {
    /// Parses the table's bytes (signature, length and checksum checked;
    /// memory-side cache structures, type 2, and unknown types skipped).
    pub fn parse(b: &[u8]) -> Result<Hmat, BadTable> {
        let (t, revision) = checked(b, b"HMAT")?;
        let mut h = Hmat {
            revision,
            domains: Vec::new(),
            localities: Vec::new(),
        };
        // 36-byte header, 4 reserved bytes; then type u16, reserved u16,
        // length u32.
        let mut at = ACPI_HEADER + 4;
        for (ty, s) in structures(t, ACPI_HEADER + 4, 4, 4)? {
            match ty {
                0 => {
                    let (Some(flags), Some(init), Some(mem)) =
                        (u16_at(s, 8), u32_at(s, 12), u32_at(s, 16))
                    else {
                        return bad(format!("domain structure at byte {at} is cut short"));
                    };
                    h.domains.push(DomainAttrs {
                        memory: mem,
                        initiator: (flags & 1 == 1).then_some(init),
                    });
                }
                1 => h.localities.push(parse_locality(s, at)?),
                _ => {}
            }
            at += s.len();
        }
        Ok(h)
    }

    /// `hmat_normalize()`: an entry times the base unit, 0 for no figure
    /// (0, 0xffff, or a product past `u32`); revision 1 counts in tenths,
    /// revision 2 gives latency in picoseconds.
    pub fn normalize(&self, entry: u16, base: u64, data_type: u8) -> u32 {
        if entry == 0 || entry == 0xffff || base > u64::from(u32::MAX / u32::from(entry)) {
            return 0;
        }
        let v = (u64::from(entry) * base) as u32;
        match self.revision {
            1 if v < 10 => 0,
            1 => v.div_ceil(10),
            2 if data_type <= WRITE_LATENCY => v.div_ceil(1000),
            _ => v,
        }
    }

    /// The memory-level figure of `data_type` from `initiator` to `target`
    /// (proximity domains), if the table gives one (not 0).
    pub fn figure(&self, initiator: u32, target: u32, data_type: u8) -> Option<u32> {
        self.localities
            .iter()
            .filter(|l| l.hierarchy == 0 && l.data_type == data_type)
            .find_map(|l| {
                let i = l.initiators.iter().position(|&x| x == initiator)?;
                let t = l.targets.iter().position(|&x| x == target)?;
                let e = *l.entries.get(i * l.targets.len() + t)?;
                Some(self.normalize(e, l.base_unit, data_type)).filter(|&v| v != 0)
            })
    }

    /// `(read, write)` bandwidth in MB/s from `initiator` to `target`, as
    /// the kernel's `hmat_update_target_access()` takes them: an access
    /// figure sets both, a read or write figure its own.
    pub fn bandwidth(&self, initiator: u32, target: u32) -> Option<(u32, u32)> {
        let access = self.figure(initiator, target, ACCESS_BANDWIDTH);
        let read = self.figure(initiator, target, READ_BANDWIDTH).or(access);
        let write = self.figure(initiator, target, WRITE_BANDWIDTH).or(access);
        Some((read?, write?))
    }

    /// Every initiator domain named by a memory-level locality structure.
    pub fn initiators(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .localities
            .iter()
            .filter(|l| l.hierarchy == 0)
            .flat_map(|l| l.initiators.iter().copied())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// What SRAT says of proximity domains: which CPUs (APIC ids) and which
/// physical ranges are in each.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Srat {
    /// `(domain, APIC or x2APIC id)` of each enabled CPU.
    pub cpus: Vec<(u32, u32)>,
    /// `(domain, base, length)` of each enabled memory range.
    pub memory: Vec<(u32, u64, u64)>,
}

impl Srat {
    /// Parses the table's bytes: Processor Local APIC (type 0), Memory
    /// (type 1) and Processor Local x2APIC (type 2) affinity structures;
    /// others skipped.
    pub fn parse(b: &[u8]) -> Result<Srat, BadTable> {
        let (t, _) = checked(b, b"SRAT")?;
        let mut s = Srat::default();
        // 36-byte header, 4 + 8 reserved bytes; then type u8, length u8.
        for (ty, x) in structures(t, ACPI_HEADER + 12, 1, 1)? {
            let cut = || BadTable(format!("SRAT structure of type {ty} is cut short"));
            match ty {
                0 => {
                    let flags = u32_at(x, 4).ok_or_else(cut)?;
                    let hi = x.get(9..12).ok_or_else(cut)?;
                    let pxm = u32::from_le_bytes([x[2], hi[0], hi[1], hi[2]]);
                    if flags & 1 == 1 {
                        s.cpus.push((pxm, u32::from(x[3])));
                    }
                }
                1 => {
                    let (Some(pxm), Some(base), Some(len), Some(flags)) =
                        (u32_at(x, 2), u64_at(x, 8), u64_at(x, 16), u32_at(x, 28))
                    else {
                        return Err(cut());
                    };
                    if flags & 1 == 1 && len > 0 {
                        s.memory.push((pxm, base, len));
                    }
                }
                2 => {
                    let (Some(pxm), Some(id), Some(flags)) =
                        (u32_at(x, 4), u32_at(x, 8), u32_at(x, 12))
                    else {
                        return Err(cut());
                    };
                    if flags & 1 == 1 {
                        s.cpus.push((pxm, id));
                    }
                }
                _ => {}
            }
        }
        Ok(s)
    }
}

#[cfg(test)]
#[path = "hmat_tests.rs"]
mod tests;
