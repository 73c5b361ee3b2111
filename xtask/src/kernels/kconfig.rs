//! Pure Kconfig helpers: kernel version from a Makefile, config fragments,
//! the check that Kconfig kept every option tierkit asked for, and the cache
//! key of a kernel build.

use anyhow::{bail, Result};
use std::collections::BTreeMap;
use std::fmt;

/// `make kernelversion` computed from the top-level Makefile:
/// `VERSION.PATCHLEVEL.SUBLEVEL` followed by `EXTRAVERSION`.
pub fn makefile_version(makefile: &str) -> Result<String> {
    let mut fields: BTreeMap<&str, String> = BTreeMap::new();
    for line in makefile.lines().take(40) {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let k = k.trim();
        if matches!(k, "VERSION" | "PATCHLEVEL" | "SUBLEVEL" | "EXTRAVERSION") {
            fields.entry(k).or_insert_with(|| v.trim().to_string());
        }
    }
    let Some(version) = fields.get("VERSION").filter(|v| !v.is_empty()) else {
        bail!("no `VERSION =` line near the top of the Makefile");
    };
    let mut s = version.clone();
    if let Some(p) = fields.get("PATCHLEVEL").filter(|v| !v.is_empty()) {
        s.push('.');
        s.push_str(p);
        if let Some(sub) = fields.get("SUBLEVEL").filter(|v| !v.is_empty()) {
            s.push('.');
            s.push_str(sub);
        }
    }
    if let Some(e) = fields.get("EXTRAVERSION") {
        s.push_str(e);
    }
    Ok(s)
}

/// What a fragment asks for one symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Want {
    /// `CONFIG_X=value` (value as written: `y`, `m`, `8`, `"str"`).
    Value(String),
    /// `# CONFIG_X is not set`.
    NotSet,
}

impl fmt::Display for Want {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Want::Value(v) => write!(f, "={v}"),
            Want::NotSet => write!(f, " is not set"),
        }
    }
}

/// One option asked for by a fragment file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    /// Symbol with its prefix: `CONFIG_RUST`.
    pub symbol: String,
    pub want: Want,
    /// Fragment file (as displayed) and 1-based line.
    pub file: String,
    pub line: usize,
}

/// Parses a fragment: `CONFIG_X=v` and `# CONFIG_X is not set` lines; other
/// comments and blank lines are ignored.
pub fn parse_fragment(file: &str, text: &str) -> Vec<Requirement> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let parsed = if let Some(rest) = line.strip_prefix("# ") {
            rest.strip_suffix(" is not set")
                .filter(|s| is_symbol(s))
                .map(|s| (s.to_string(), Want::NotSet))
        } else if let Some((k, v)) = line.split_once('=') {
            let k = k.trim();
            is_symbol(k).then(|| (k.to_string(), Want::Value(v.trim().to_string())))
        } else {
            None
        };
        if let Some((symbol, want)) = parsed {
            out.push(Requirement {
                symbol,
                want,
                file: file.to_string(),
                line: i + 1,
            });
        }
    }
    out
}

fn is_symbol(s: &str) -> bool {
    s.strip_prefix("CONFIG_")
        .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
}

/// The effective requirements of several fragments merged in order: as in
/// merge_config.sh, a later fragment overrides an earlier one.
pub fn merge_requirements(frags: impl IntoIterator<Item = Vec<Requirement>>) -> Vec<Requirement> {
    let mut map: BTreeMap<String, Requirement> = BTreeMap::new();
    for reqs in frags {
        for r in reqs {
            map.insert(r.symbol.clone(), r);
        }
    }
    map.into_values().collect()
}

/// Symbols set in a final `.config` (`CONFIG_X=v`); "is not set" lines and
/// absent symbols are both absent from the map.
pub fn parse_config(text: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            if is_symbol(k) {
                map.insert(k.to_string(), v.to_string());
            }
        }
    }
    map
}

/// An option Kconfig did not keep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    pub req: Requirement,
    /// What the final .config has instead (`None`: not set / absent).
    pub got: Option<String>,
}

impl fmt::Display for Dropped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let got = match &self.got {
            Some(v) => format!("{}={v}", self.req.symbol),
            None => format!("{} is not set", self.req.symbol),
        };
        write!(
            f,
            "{}{} (from {}:{}) -> final .config has: {got}",
            self.req.symbol, self.req.want, self.req.file, self.req.line
        )
    }
}

/// Checks every requirement against the final config.
pub fn check(reqs: &[Requirement], config: &BTreeMap<String, String>) -> Vec<Dropped> {
    let mut dropped = Vec::new();
    for r in reqs {
        let got = config.get(&r.symbol);
        let ok = match &r.want {
            Want::Value(v) => got == Some(v),
            Want::NotSet => got.is_none_or(|g| g == "n"),
        };
        if !ok {
            dropped.push(Dropped {
                req: r.clone(),
                got: got.cloned(),
            });
        }
    }
    dropped
}

/// The first 12 hex digits of sha256 of the final `.config`.
pub fn config_hash(config_text: &str) -> String {
    crate::util::sha256_hex(config_text.as_bytes())[..12].to_string()
}

/// The name of a kernel build in the cache: `<kernelversion>-<config hash>`.
pub fn cache_key(version: &str, config_text: &str) -> String {
    format!("{version}-{}", config_hash(config_text))
}

/// Kbuild's quiet output: `  CC      mm/page_alloc.o`.
pub fn is_kbuild_step(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("  ") else {
        return false;
    };
    let tag: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
    !tag.is_empty()
        && tag.len() <= 8
        && tag.chars().all(|c| {
            c.is_ascii_uppercase()
                || c.is_ascii_digit()
                || c == '-'
                || c == '_'
                || c == '['
                || c == ']'
        })
        && rest.len() > tag.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_from_makefile() {
        let mk = "# SPDX\nVERSION = 7\nPATCHLEVEL = 3\nSUBLEVEL = 4\nEXTRAVERSION =\nNAME = X\n";
        assert_eq!(makefile_version(mk).unwrap(), "7.3.4");
        let rc = "VERSION = 7\nPATCHLEVEL = 4\nSUBLEVEL = 0\nEXTRAVERSION = -rc2\n";
        assert_eq!(makefile_version(rc).unwrap(), "7.4.0-rc2");
        assert!(makefile_version("all:\n\techo\n").is_err());
    }

    #[test]
    fn fragment_lines() {
        let f = "# comment\nCONFIG_A=y\n\n# CONFIG_B is not set\nCONFIG_NR=8\nCONFIG_S=\"x y\"\n# not a CONFIG line\n";
        let r = parse_fragment("k/a.config", f);
        assert_eq!(r.len(), 4);
        assert_eq!(r[0].symbol, "CONFIG_A");
        assert_eq!(r[0].want, Want::Value("y".into()));
        assert_eq!(r[0].line, 2);
        assert_eq!(r[1].want, Want::NotSet);
        assert_eq!(r[1].line, 4);
        assert_eq!(r[3].want, Want::Value("\"x y\"".into()));
    }

    #[test]
    fn later_fragment_wins() {
        let a = parse_fragment("a", "CONFIG_X=y\nCONFIG_Y=y\n");
        let b = parse_fragment("b", "# CONFIG_X is not set\n");
        let m = merge_requirements([a, b]);
        let x = m.iter().find(|r| r.symbol == "CONFIG_X").unwrap();
        assert_eq!(x.want, Want::NotSet);
        assert_eq!(x.file, "b");
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn dropped_options_are_named_with_their_fragment() {
        let reqs = merge_requirements([
            parse_fragment("kconfig/mm.config", "CONFIG_NUMA=y\nCONFIG_CONTIG_ALLOC=y\n# CONFIG_INIT_ON_ALLOC_DEFAULT_ON is not set\n"),
            parse_fragment("kconfig/base.config", "CONFIG_NR_CPUS=8\nCONFIG_GONE=y\n"),
        ]);
        let cfg = parse_config(
            "#\n# Linux\nCONFIG_NUMA=y\n# CONFIG_CONTIG_ALLOC is not set\nCONFIG_INIT_ON_ALLOC_DEFAULT_ON=y\nCONFIG_NR_CPUS=64\n",
        );
        let d = check(&reqs, &cfg);
        let names: Vec<&str> = d.iter().map(|d| d.req.symbol.as_str()).collect();
        assert_eq!(
            names,
            [
                "CONFIG_CONTIG_ALLOC",
                "CONFIG_GONE",
                "CONFIG_INIT_ON_ALLOC_DEFAULT_ON",
                "CONFIG_NR_CPUS"
            ]
        );
        let s = d[0].to_string();
        assert!(s.contains("kconfig/mm.config:2"), "{s}");
        assert!(s.contains("is not set"), "{s}");
        assert!(d[3].to_string().contains("CONFIG_NR_CPUS=64"));
    }

    #[test]
    fn everything_kept_is_clean() {
        let reqs = parse_fragment(
            "f",
            "CONFIG_A=y\n# CONFIG_B is not set\n# CONFIG_C is not set\n",
        );
        let cfg = parse_config("CONFIG_A=y\n# CONFIG_B is not set\n");
        assert!(check(&reqs, &cfg).is_empty());
    }

    #[test]
    fn cache_key_is_version_and_config_hash() {
        let k = cache_key("7.3.4", "abc");
        assert_eq!(k, "7.3.4-ba7816bf8f01");
        assert_eq!(config_hash("abc").len(), 12);
    }

    #[test]
    fn kbuild_steps() {
        assert!(is_kbuild_step("  CC      mm/page_alloc.o"));
        assert!(is_kbuild_step("  RUSTC L rust/core.o"));
        assert!(is_kbuild_step("  HOSTCC  scripts/basic/fixdep"));
        assert!(is_kbuild_step("  YACC    scripts/kconfig/parser.tab.[ch]"));
        assert!(!is_kbuild_step("make[1]: Entering directory '/x'"));
        assert!(!is_kbuild_step(
            "Kernel: arch/x86/boot/bzImage is ready  (#1)"
        ));
        assert!(!is_kbuild_step("  "));
        assert!(!is_kbuild_step("warning: unused"));
    }
}
