//! CXL in a topology: the limits of the devices QEMU emulates, the
//! interleave of `--cxl-interleave` ([`CxlInterleave`]) and one type-3
//! device ([`CxlDevice`]).

use std::fmt;

use super::perf::{Perf, CXL_DEV};

/// CXL window granularity (CFMWS): windows are multiples of 256 MiB.
pub const CXL_WINDOW_ALIGN_MIB: u64 = 256;
/// First PCI bus of the first CXL host bridge; each next one is
/// [`CXL_BUS_STRIDE`] higher (a host bridge owns the buses up to the next).
pub const CXL_FIRST_BUS: u32 = 12;
pub const CXL_BUS_STRIDE: u32 = 16;
/// At most this many CXL devices (bus numbers stay below 256).
pub const CXL_MAX_DEVICES: usize = 8;
/// Interleave ways `--cxl-interleave` accepts: 1 (every device its own
/// region) or 2 (two devices behind one host bridge, one region).
pub const CXL_MAX_WAYS: u32 = 2;
/// The region granularity with `--cxl-interleave WAYS` alone: QEMU's
/// window default, which `cxl create-region` also takes (the root decoder's).
pub const CXL_DEFAULT_GRANULARITY: u32 = 256;

/// `--cxl-interleave WAYS[:GRANULARITY]`: how a region spreads over the
/// devices behind one host bridge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CxlInterleave {
    /// Devices per region (and per host bridge): 1 or [`CXL_MAX_WAYS`].
    pub ways: u32,
    /// Bytes of host physical address space that go to one device before
    /// the next: a power of two from 256 to 16384 (CXL HDM decoders).
    pub granularity: u32,
}

impl CxlInterleave {
    /// One device per region (the default).
    pub const NONE: CxlInterleave = CxlInterleave {
        ways: 1,
        granularity: CXL_DEFAULT_GRANULARITY,
    };

    /// Parses `WAYS[:GRANULARITY]`, e.g. `2`, `2:256`, `2:4096` or `2:4K`
    /// (granularity in bytes; `K` = 1024).
    pub fn parse(s: &str) -> std::result::Result<CxlInterleave, String> {
        let (w, g) = match s.split_once(':') {
            Some((w, g)) => (w, Some(g)),
            None => (s, None),
        };
        let ways: u32 = w.trim().parse().map_err(|_| {
            format!("`{s}`: WAYS `{w}` is not a number (WAYS[:GRANULARITY], e.g. 2:4096)")
        })?;
        if !(1..=CXL_MAX_WAYS).contains(&ways) {
            return Err(format!(
                "`{s}`: {ways}-way interleave is not offered: WAYS is 1 or {CXL_MAX_WAYS} (devices behind one host bridge)"
            ));
        }
        let granularity = match g {
            None => CXL_DEFAULT_GRANULARITY,
            Some(g) => {
                let t = g.trim().to_ascii_lowercase();
                let (num, mul) = match t.strip_suffix('k') {
                    Some(n) => (n, 1024),
                    None => (t.as_str(), 1),
                };
                num.parse::<u32>()
                    .ok()
                    .and_then(|n| n.checked_mul(mul))
                    .ok_or_else(|| format!("`{s}`: GRANULARITY `{g}` is not a number of bytes"))?
            }
        };
        if !granularity.is_power_of_two() || !(256..=16384).contains(&granularity) {
            return Err(format!(
                "`{s}`: granularity {granularity} bytes: CXL decoders take a power of two from 256 to 16384"
            ));
        }
        Ok(CxlInterleave { ways, granularity })
    }
}

impl fmt::Display for CxlInterleave {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}-way, granularity {} bytes",
            self.ways, self.granularity
        )
    }
}

/// An emulated CXL type-3 volatile memory device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CxlDevice {
    pub size_gib: u32,
    /// HMAT entry of its generic port, from node 0.
    pub perf: Perf,
}

impl CxlDevice {
    /// `--cxl-dev SIZE[:LATENCY_NS:BANDWIDTH_GBS]`, e.g. `4G` or
    /// `2G:300:5G`; without performance figures [`CXL_DEV`].
    pub fn parse(s: &str) -> std::result::Result<CxlDevice, String> {
        let (size, perf) = match s.split_once(':') {
            // Perf's own message would suggest a bare `NS:GBS`.
            Some((a, b)) => (
                a,
                Some(Perf::parse(b).map_err(|e| {
                    if e.contains("e.g.") {
                        format!("`{s}`: expected SIZE or SIZE:LATENCY_NS:BANDWIDTH_GBS, e.g. 4G or 2G:300:5G")
                    } else {
                        e
                    }
                })?),
            ),
            None => (s, None),
        };
        Ok(CxlDevice {
            size_gib: crate::util::parse_gib(size)?,
            perf: perf.unwrap_or(CXL_DEV),
        })
    }

    pub fn size_mib(&self) -> u64 {
        u64::from(self.size_gib) * 1024
    }
}
