//! The boots of `cargo xtask test` without `--topology`, as data: adding a
//! run (a topology, or another way of onlining its memory) is one entry of
//! [`TEST_RUNS`].

use crate::profile::Profile;
use crate::qemu::CxlOnline;
use crate::topology::TopologyKind;

/// Which tests one boot runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// `kunit.filter_glob=` (`suite` or `suite.case` glob); `None`: every
    /// suite.
    pub kunit: Option<String>,
    /// `tierkit.filter=`: comma-separated shell globs on the userspace
    /// tests' names (`tk-test-cxl,tk-test-offline`); `None`: every test.
    pub user: Option<String>,
}

impl Filter {
    /// `--filter GLOB`: the same glob for KUnit and userspace tests.
    pub fn both(glob: Option<&str>) -> Filter {
        Filter {
            kunit: glob.map(str::to_string),
            user: glob.map(str::to_string),
        }
    }

    /// How `--filter` is shown in messages.
    pub fn describe(&self) -> Option<String> {
        match (&self.kunit, &self.user) {
            (None, None) => None,
            (Some(k), Some(u)) if k == u => Some(k.clone()),
            (k, u) => Some(format!(
                "KUnit {}, userspace {}",
                k.as_deref().unwrap_or("*"),
                u.as_deref().unwrap_or("*")
            )),
        }
    }
}

/// One boot of `cargo xtask test`.
#[derive(Clone, Copy, Debug)]
pub struct TestRun {
    /// Its label in the summary and its run directory
    /// (`target/tierkit/test-<name>[-debug]`).
    pub name: &'static str,
    pub kind: TopologyKind,
    /// `None`: `--cxl-online` (default movable).
    pub cxl_online: Option<CxlOnline>,
    /// `(KUnit glob, userspace globs)`; `None`: the whole suite.
    pub only: Option<(&'static str, &'static str)>,
    /// Also under `--profile debug` (the whole suite runs there on every
    /// topology; short extra runs only in the default profile).
    pub debug: bool,
    /// Why this boot exists (`cargo xtask test --help` lists it).
    pub why: &'static str,
}

/// Every boot of `cargo xtask test`, in order.
pub const TEST_RUNS: &[TestRun] = &[
    TestRun {
        name: "numa",
        kind: TopologyKind::Numa,
        cxl_online: None,
        only: None,
        debug: true,
        why: "the whole suite on DRAM plus a memory-only node",
    },
    TestRun {
        name: "cxl",
        kind: TopologyKind::Cxl,
        cxl_online: None,
        only: None,
        debug: true,
        why: "the whole suite with an emulated CXL device onlined as ZONE_MOVABLE",
    },
    TestRun {
        name: "cxl-kernel",
        kind: TopologyKind::Cxl,
        cxl_online: Some(CxlOnline::Kernel),
        only: Some((
            "tierkit_wi_alloc.*",
            "tk-test-cxl,tk-test-offline,tk-test-placement,tk-test-diff",
        )),
        debug: false,
        why: "the CXL node onlined as kernel memory (ZONE_NORMAL): allocation there, \
              and offlining refused with EBUSY; a short run",
    },
];

/// The boots of `test` for `profile`. With `--topology`, one boot: that
/// topology's first run (the whole suite), as the edit-test loop wants. With
/// an explicit `--cxl-online`, runs that only exist to try the other zone
/// are left out. (`--filter`, given, replaces every run's own selection.)
pub fn select(
    profile: Profile,
    topology: Option<TopologyKind>,
    cxl_online: Option<CxlOnline>,
) -> Vec<TestRun> {
    if let Some(k) = topology {
        let first = TEST_RUNS.iter().find(|r| r.kind == k).copied();
        return vec![first.unwrap_or(TestRun {
            name: k.name(),
            kind: k,
            cxl_online: None,
            only: None,
            debug: true,
            why: "--topology",
        })];
    }
    TEST_RUNS
        .iter()
        .filter(|r| profile == Profile::Default || r.debug)
        .filter(|r| cxl_online.is_none() || r.cxl_online.is_none())
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[TestRun]) -> Vec<&str> {
        v.iter().map(|r| r.name).collect()
    }

    #[test]
    fn default_profile_runs_every_entry() {
        assert_eq!(
            names(&select(Profile::Default, None, None)),
            ["numa", "cxl", "cxl-kernel"]
        );
    }

    #[test]
    fn debug_profile_runs_the_whole_suite_per_topology() {
        assert_eq!(names(&select(Profile::Debug, None, None)), ["numa", "cxl"]);
    }

    #[test]
    fn topology_gives_one_boot_and_zone_drops_the_zone_runs() {
        assert_eq!(
            names(&select(Profile::Default, Some(TopologyKind::Cxl), None)),
            ["cxl"]
        );
        assert_eq!(
            names(&select(Profile::Debug, Some(TopologyKind::Numa2), None)),
            ["numa2"]
        );
        assert_eq!(
            names(&select(Profile::Default, None, Some(CxlOnline::Kernel))),
            ["numa", "cxl"]
        );
    }

    #[test]
    fn names_are_unique_and_usable_as_directories() {
        let mut n = names(TEST_RUNS);
        assert!(n
            .iter()
            .all(|s| s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')));
        n.sort();
        n.dedup();
        assert_eq!(n.len(), TEST_RUNS.len());
    }

    #[test]
    fn filter_describe() {
        assert_eq!(Filter::both(None).describe(), None);
        assert_eq!(Filter::both(Some("tk-*")).describe().unwrap(), "tk-*");
        let f = Filter {
            kunit: Some("a.*".into()),
            user: Some("tk-x,tk-y".into()),
        };
        assert_eq!(f.describe().unwrap(), "KUnit a.*, userspace tk-x,tk-y");
    }
}
