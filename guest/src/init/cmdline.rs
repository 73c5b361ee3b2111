//! The kernel command-line parameters /init reads
//! ([`tierkit_protocol::param`]).

use tierkit_protocol::{cxl, param};

/// What the harness asked this boot to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    /// `tierkit.mode=` (default `run`).
    pub mode: String,
    /// `tierkit.filter=`: `None` runs every test.
    pub filter: Option<String>,
    /// `tierkit.skip=`: `None` leaves none out.
    pub skip: Option<String>,
    /// `tierkit.cxl=` as given (`None`: no CXL set-up).
    pub cxl: Option<String>,
    /// `tierkit.profile=debug`.
    pub debug: bool,
    /// `preempt=`: the preemption model asked for.
    pub preempt: Option<String>,
    /// `tierkit.deadline_scale=`: userspace tests' deadlines are this many
    /// times their own (at least 1).
    pub deadline_scale: u32,
}

impl Params {
    /// Reads them from the text of `/proc/cmdline`; the last word of a
    /// parameter wins.
    pub fn parse(cmdline: &str) -> Params {
        let v = |name| param::value(cmdline, name).map(str::to_string);
        Params {
            mode: v(param::MODE).unwrap_or_else(|| param::MODE_RUN.to_string()),
            filter: v(param::FILTER),
            skip: v(param::SKIP),
            // An empty value asks for nothing, as `[ -n "$CXL" ]` did.
            cxl: v(param::CXL).filter(|c| !c.is_empty()),
            debug: v(param::PROFILE).as_deref() == Some(param::PROFILE_DEBUG),
            preempt: v(param::PREEMPT).filter(|p| !p.is_empty()),
            deadline_scale: v(param::DEADLINE_SCALE)
                .and_then(|s| s.parse().ok())
                .filter(|&n| n > 0)
                .unwrap_or(1),
        }
    }

    /// The regions of `tierkit.cxl=`; `Err` with the value if malformed.
    pub fn cxl_regions(&self) -> Option<Result<Vec<cxl::Region>, String>> {
        let c = self.cxl.as_deref()?;
        Some(cxl::parse(c).ok_or_else(|| format!("{}={c}: malformed", param::CXL)))
    }

    /// Whether the userspace test `name` runs.
    pub fn selects(&self, name: &str) -> bool {
        tierkit_protocol::select::selects(self.filter.as_deref(), self.skip.as_deref(), name)
    }
}

/// Whether this kernel is the debug profile's (`tierkit.profile=debug` on
/// the running kernel's command line): tests that repeat work size it to
/// what KASAN, lockdep and kmemleak make each round cost.
pub fn debug_profile() -> bool {
    std::fs::read_to_string("/proc/cmdline").is_ok_and(|c| Params::parse(&c).debug)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let p = Params::parse("console=ttyS0 loglevel=7\n");
        assert_eq!(p.mode, "run");
        assert_eq!(
            (p.filter, p.skip, p.cxl, p.debug),
            (None, None, None, false)
        );
        assert!(p.preempt.is_none());
        assert_eq!(p.deadline_scale, 1);
        assert_eq!(Params::parse("tierkit.deadline_scale=0").deadline_scale, 1);
        assert_eq!(
            Params::parse("tierkit.deadline_scale=16").deadline_scale,
            16
        );
    }

    #[test]
    fn every_parameter() {
        let p = Params::parse(
            "tierkit.mode=test kunit.filter_glob=tierkit_* tierkit.filter=tk-test-* \
             tierkit.skip=tk-test-fuzz,tk-test-stress tierkit.cxl=4096:2:256 \
             tierkit.profile=debug preempt=full\n",
        );
        assert_eq!(p.mode, "test");
        assert_eq!(p.filter.as_deref(), Some("tk-test-*"));
        assert_eq!(p.skip.as_deref(), Some("tk-test-fuzz,tk-test-stress"));
        assert_eq!(p.preempt.as_deref(), Some("full"));
        assert!(p.debug);
        let r = p.cxl_regions().unwrap().unwrap();
        assert_eq!(
            (r.len(), r[0].mib, r[0].ways, r[0].granularity),
            (1, 4096, 2, Some(256))
        );
        assert!(p.selects("tk-test-vma"));
        assert!(!p.selects("tk-test-fuzz"));
        assert!(!p.selects("tk-demo"));
        let bad = Params::parse("tierkit.cxl=4096:0");
        assert!(bad.cxl_regions().unwrap().is_err());
        assert!(!Params::parse("tierkit.profile=default").debug);
    }
}
