//! `tierkit.cxl=MIB[:WAYS:GRAN][,...]`: per fixed memory window, in window
//! order, the RAM region /init assembles on it: its size in MiB and,
//! interleaved (`--cxl-interleave`), its ways and granularity in bytes.
//! `4096,2048`: two windows, a region on one device each; `4096:2:256`: one
//! region over two 2 GiB devices, 256 bytes per device in turn.

/// One window's region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub mib: u64,
    /// Devices it interleaves across (1: not interleaved).
    pub ways: u32,
    /// Bytes per device in turn; `None`: the root decoder's (1-way).
    pub granularity: Option<u32>,
}

impl Region {
    /// Bytes.
    pub fn bytes(&self) -> u64 {
        self.mib << 20
    }
}

/// The parameter's value: `MIB` for a 1-way region, else `MIB:WAYS:GRAN`.
pub fn encode(regions: &[Region]) -> String {
    regions
        .iter()
        .map(|r| match (r.ways, r.granularity) {
            (1, None) => r.mib.to_string(),
            (w, g) => format!("{}:{w}:{}", r.mib, g.unwrap_or(0)),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses the parameter's value; `None` if malformed (an empty entry, a
/// field that is not a number, zero ways, more than three fields).
pub fn parse(v: &str) -> Option<Vec<Region>> {
    v.split(',')
        .map(|e| {
            let mut f = e.split(':');
            let mib: u64 = f.next()?.parse().ok()?;
            let ways: u32 = f.next().map_or(Some(1), |w| w.parse().ok())?;
            let granularity = match f.next() {
                Some(g) => Some(g.parse().ok()?),
                None => None,
            };
            if f.next().is_some() || ways == 0 {
                return None;
            }
            Some(Region {
                mib,
                ways,
                granularity,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(mib: u64, ways: u32, granularity: Option<u32>) -> Region {
        Region {
            mib,
            ways,
            granularity,
        }
    }

    #[test]
    fn parses_what_it_encodes() {
        for (s, v) in [
            ("4096", vec![r(4096, 1, None)]),
            ("4096,2048", vec![r(4096, 1, None), r(2048, 1, None)]),
            ("4096:2:256", vec![r(4096, 2, Some(256))]),
            (
                "8192:2:4096,2048:2:4096",
                vec![r(8192, 2, Some(4096)), r(2048, 2, Some(4096))],
            ),
        ] {
            assert_eq!(parse(s).as_deref(), Some(&v[..]), "{s}");
            assert_eq!(encode(&v), s);
        }
        assert_eq!(parse("4096:2"), Some(vec![r(4096, 2, None)]));
        assert_eq!(r(2, 1, None).bytes(), 2 << 20);
        for bad in [
            "",
            "x",
            "4096:",
            "4096:0:256",
            "4096:2:256:1",
            "4096:2:x",
            "1,",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
