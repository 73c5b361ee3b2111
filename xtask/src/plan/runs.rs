//! The boots of `cargo xtask test`, as data: adding a run (a topology, or
//! another way of onlining its memory) is one entry of [`QUICK_RUNS`] or
//! [`FULL_RUNS`].
//!
//! `cargo xtask test` runs [`QUICK_RUNS`]: the fast edit-test loop, every
//! KUnit suite and userspace test that answers in seconds. `--full` runs
//! [`FULL_RUNS`]: the whole suite on every topology, with the reliability
//! tests (fault injection, fuzzer, stress, load/unload cycles, hostile
//! inputs) and the 1 GiB work on emulated CXL memory; CI runs `--full`.

use crate::kernels::profile::{KernelKind, Profile};
use crate::plan::topology::CxlOnline;
use crate::plan::topology::{CxlInterleave, TopologyKind};

/// Which tests one boot runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// `kunit.filter_glob=` (`suite` or `suite.case` glob); `None`: every
    /// suite.
    pub kunit: Option<String>,
    /// `tierkit.filter=`: comma-separated globs (the kernel's dialect) on
    /// the userspace tests' names (`tk-test-cxl,tk-test-block-offline`);
    /// `None`: every test.
    pub user: Option<String>,
    /// `tierkit.skip=`: comma-separated globs of userspace tests left out.
    pub skip: Option<String>,
}

impl Filter {
    /// `--filter GLOB[,GLOB...]`: the list for the userspace tests, and
    /// for KUnit its one glob that selects KUnit cases
    /// ([`crate::plan::names::Tests::kunit_glob`]).
    pub fn both(glob: Option<&str>) -> Filter {
        Filter {
            kunit: glob.map(|g| crate::plan::names::Tests::here().kunit_glob(g)),
            user: glob.map(str::to_string),
            skip: None,
        }
    }

    /// Whether /init runs the userspace test `name`: it matches a glob of
    /// `user` (none: every test) and none of `skip` (the same
    /// [`tierkit_protocol::select::selects`] /init calls).
    pub fn selects(&self, name: &str) -> bool {
        tierkit_protocol::select::selects(self.user.as_deref(), self.skip.as_deref(), name)
    }

    /// How the selection is shown in messages; `None`: everything.
    pub fn describe(&self) -> Option<String> {
        let mut parts = Vec::new();
        match (&self.kunit, &self.user) {
            (None, None) => {}
            (Some(k), Some(u)) if k == u => parts.push(k.clone()),
            (k, u) => parts.push(format!(
                "KUnit {}, userspace {}",
                k.as_deref().unwrap_or("*"),
                u.as_deref().unwrap_or("*")
            )),
        }
        if let Some(s) = &self.skip {
            parts.push(format!("without {s}"));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// A glob of `--filter`'s one dialect (the kernel's `glob_match()`)
/// against a test name, as /init and KUnit match it.
pub use tierkit_protocol::select::glob_match;

/// A run's own selection of tests; empty strings select everything
/// (`kunit`, `user`) or leave nothing out (`skip`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Selection {
    pub kunit: &'static str,
    pub user: &'static str,
    pub skip: &'static str,
}

impl Selection {
    /// As a [`Filter`].
    pub fn filter(&self) -> Filter {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Filter {
            kunit: opt(self.kunit),
            user: opt(self.user),
            skip: opt(self.skip),
        }
    }
}

/// One boot of `cargo xtask test`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestRun {
    /// Its label in the summary and its run directory
    /// (`target/tierkit/test-<name>[-debug]`).
    pub name: &'static str,
    pub kind: TopologyKind,
    /// `None`: `--cxl-online` (default movable).
    pub cxl_online: Option<CxlOnline>,
    /// `None`: `--cxl-interleave` (default: a region per device).
    pub cxl_interleave: Option<CxlInterleave>,
    /// `None`: the whole suite.
    pub only: Option<Selection>,
    /// Also under `--profile debug`.
    pub debug: bool,
    /// Kernel command-line words this run adds, before `--append`'s (a
    /// later option wins).
    pub append: &'static str,
    /// Kernel command-line words this run adds under `--profile debug`,
    /// after [`TestRun::append`] and before `--append`'s.
    pub debug_append: &'static str,
    /// Why this boot exists (`cargo xtask test --help` lists it).
    pub why: &'static str,
}

/// [`SLOW_USER_TESTS`] as a literal, for `concat!`.
macro_rules! slow_user_tests {
    () => {
        "tk-test-faults,tk-test-fuzz,tk-test-lifecycle,\
tk-test-hostile,tk-test-stress,tk-test-gigantic,tk-test-block-offline,tk-test-node-offline,\
tk-test-pool,tk-test-pool-cxl,tk-test-pool-hostile,tk-test-offline-held,tk-test-close-scale,\
tk-test-mmap-budget"
    };
}

/// The userspace tests that take tens of seconds to minutes (fault
/// injection, fuzzing, stress, load/unload cycles, hostile inputs, 1 GiB
/// gigantic mappings, memory offlining, the pre-cleared pool: its refill
/// pauses 10 s after a shrink, and a GiB is slow to fill on emulated CXL
/// memory: Documentation/results/topologies.md, "Slow memory"): `--full`
/// only.
pub const SLOW_USER_TESTS: &str = slow_user_tests!();

/// [`LOOP_LEAVES`] as a literal, for `concat!`.
macro_rules! loop_leaves {
    () => {
        "tk-test-gup,tk-test-memcg,tk-test-mm,tk-test-run,tk-test-runner-*"
    };
}

/// The userspace tests the quick numa run leaves, besides the slow ones,
/// to the quick cxl run (so a plain `cargo xtask test` still runs them)
/// and to numa-full (so CI runs them on numa, on both profiles): each
/// takes 10-25 s, by design: `tk-test-mm` gives NUMA balancing,
/// khugepaged, ksmd and DAMON seconds each to act, `tk-test-gup`,
/// `tk-test-run` and `tk-test-memcg` make and check gigantic GiBs (the
/// last under a cgroup with 16 MiB of room); and the runner's own tests
/// (`tk-test-runner-*`: /init's deadlines, leftovers and wait, 11 s
/// together, which test /init rather than the module). Together they were
/// most of the quick numa guest. Debian's kernel in CI runs them on numa
/// too ([`QUICK_NUMA_WHOLE`]).
pub const LOOP_LEAVES: &str = loop_leaves!();

/// The quick numa run's selection, without [`LOOP_LEAVES`].
const QUICK_NUMA_SKIP: &str = concat!(slow_user_tests!(), ",", loop_leaves!());

/// The KUnit suites of the quick runs: every `tierkit_*` suite but
/// `tierkit_gigantic` (a full GiB filled, cleared and checked per node:
/// `--full` only). One glob, as `kunit.filter_glob` takes one; the kernel's
/// glob_match() complements a class with `!`.
pub const QUICK_KUNIT: &str = "tierkit_[!g]*";

/// `cargo xtask test`: the fast loop.
pub const QUICK_RUNS: &[TestRun] = &[
    TestRun {
        name: "numa",
        kind: TopologyKind::NUMA,
        cxl_online: None,
        cxl_interleave: None,
        only: Some(Selection {
            kunit: QUICK_KUNIT,
            user: "",
            skip: QUICK_NUMA_SKIP,
        }),
        debug: true,
        append: "",
        debug_append: "",
        why: "tierkit's KUnit suites but the 1 GiB one, and the quick userspace tests, on DRAM plus a memory-only node",
    },
    TestRun {
        name: "cxl",
        kind: TopologyKind::CXL,
        cxl_online: None,
        cxl_interleave: None,
        only: Some(Selection {
            kunit: "tierkit_wi*",
            user: "tk-test-cxl,tk-test-placement,tk-test-gup,tk-test-memcg,tk-test-cpuset,tk-test-mm,tk-test-run,tk-test-rebalance,tk-test-runner-*",
            skip: "",
        }),
        debug: true,
        append: "",
        // Under KASAN, the vmalloc shadow and stack depot pages that this
        // run's forks and execs leave behind are unmovable and land in
        // every aligned GiB of node 0; tk-test-run's gigantic and pool
        // checks then found none free (ENOMEM for 120 s). The same boot-time
        // GiB as numa-full's, handed back by each test that makes a GiB on
        // node 0 (`first_use::BootPool`).
        debug_append: "hugepagesz=1G hugepages=0:1",
        why: "placement on an emulated CXL device onlined as ZONE_MOVABLE",
    },
];

/// The quick numa run with [`LOOP_LEAVES`] too: what Debian's kernel
/// boots on numa in CI ([`ci_boots`]), as before they left the quick run.
pub const QUICK_NUMA_WHOLE: TestRun = TestRun {
    only: Some(Selection {
        kunit: QUICK_KUNIT,
        user: "",
        skip: SLOW_USER_TESTS,
    }),
    why: "tierkit's KUnit suites but the 1 GiB one, and every userspace test but the slow ones, on DRAM plus a memory-only node",
    ..QUICK_RUNS[0]
};

/// `cargo xtask test --full` (CI): everything.
pub const FULL_RUNS: &[TestRun] = &[
    TestRun {
        name: "numa-full",
        kind: TopologyKind::NUMA,
        cxl_online: None,
        cxl_interleave: None,
        only: None,
        debug: true,
        // Under KASAN, tk-test-lifecycle's module loads leave unmovable
        // pages (vmalloc shadow, stack depot) in every aligned GiB of node
        // 0, so the tests after it found no free aligned GiB there. One GiB
        // reserved at boot is handed back by every test that makes a GiB on
        // node 0, for its own run (`first_use::BootPool`).
        append: "",
        debug_append: "hugepagesz=1G hugepages=0:1",
        why: "the whole suite on DRAM plus a memory-only node",
    },
    TestRun {
        name: "cxl-full",
        kind: TopologyKind::CXL,
        cxl_online: None,
        cxl_interleave: None,
        only: None,
        debug: true,
        append: "",
        debug_append: "",
        why: "the whole suite with an emulated CXL device onlined as ZONE_MOVABLE",
    },
    TestRun {
        name: "cxl-kernel",
        kind: TopologyKind::CXL,
        cxl_online: Some(CxlOnline::Kernel),
        cxl_interleave: None,
        only: Some(Selection {
            kunit: "tierkit_wi_alloc.*",
            user: "tk-test-cxl,tk-test-block-offline,tk-test-placement,tk-test-diff,tk-test-gup",
            skip: "",
        }),
        debug: false,
        append: "",
        debug_append: "",
        why: "the CXL node onlined as kernel memory (ZONE_NORMAL): allocation there, \
              and offlining refused with EBUSY; a short run",
    },
    TestRun {
        name: "cxl-interleave",
        kind: TopologyKind::CXL,
        cxl_online: None,
        cxl_interleave: Some(CxlInterleave {
            ways: 2,
            granularity: 4096,
        }),
        only: Some(Selection {
            kunit: "tierkit_wi_alloc.*",
            user: "tk-test-cxl,tk-test-placement,tk-test-node-offline",
            skip: "",
        }),
        debug: false,
        append: "",
        debug_append: "",
        why: "one region interleaved across two devices behind one host bridge \
              (granularity 4096): assembly, placement and node offlining there; a short run",
    },
    TestRun {
        name: "numa-init-on-alloc",
        kind: TopologyKind::NUMA,
        cxl_online: None,
        cxl_interleave: None,
        only: Some(Selection {
            kunit: "tierkit_gigantic*",
            user: "tk-test-gigantic,tk-test-pool,tk-test-gup,tk-test-vma",
            skip: "",
        }),
        debug: false,
        append: "init_on_alloc=1",
        debug_append: "",
        why: "booted with init_on_alloc=1, as distribution kernels are: gigantic mode, the \
              pre-cleared pool and get_user_pages() with the allocator zeroing every range",
    },
    SOCKET2_RUN,
];

/// The two-socket run of [`FULL_RUNS`], which CI also boots under the debug
/// profile and on Debian's kernel ([`ci_boots`]): about 20 s of guest.
pub const SOCKET2_RUN: TestRun = TestRun {
    name: "socket2",
    kind: TopologyKind::SOCKET2,
    cxl_online: None,
    cxl_interleave: None,
    only: Some(Selection {
        kunit: "tierkit_wi_*",
        user: "tk-test-socket,tk-test-placement,tk-test-diff",
        skip: "",
    }),
    debug: true,
    append: "",
    debug_append: "",
    why: "two sockets, each with CPUs, DRAM and its own memory-only node (HMAT local and \
              remote figures per initiator): per-socket weights page by page for tasks pinned to \
              each socket, and Linux 7.3's placement unchanged with one table; a short run",
};

/// What `cargo xtask test --ci` (`.ci/run`) boots: the default profile's
/// [`FULL_RUNS`], then the debug profile's whole suite on numa, its
/// quick cxl run and the socket2 run, then Debian's own kernel (`--kernel debian`) on the
/// quick numa and cxl runs and on socket2. The debug profile's whole cxl suite (`cargo xtask test
/// --full --profile debug --topology cxl`, long under KASAN on emulated
/// CXL memory) is left out so that a cold CI run, with both kernels built,
/// stays well inside CI's 90 minutes; Documentation/results/tests.md
/// ("CI") has the last measured run.
pub fn ci_boots() -> Vec<(Profile, KernelKind, TestRun)> {
    let mut v: Vec<(Profile, KernelKind, TestRun)> = FULL_RUNS
        .iter()
        .map(|r| (Profile::Default, KernelKind::Tierkit, *r))
        .collect();
    v.push((Profile::Debug, KernelKind::Tierkit, FULL_RUNS[0]));
    v.push((Profile::Debug, KernelKind::Tierkit, QUICK_RUNS[1]));
    v.push((Profile::Debug, KernelKind::Tierkit, SOCKET2_RUN));
    v.push((Profile::Default, KernelKind::Debian, QUICK_NUMA_WHOLE));
    v.push((Profile::Default, KernelKind::Debian, QUICK_RUNS[1]));
    // Debian's kernel has cpusets (tierkit's own has none): tk-test-socket's
    // per-socket tables in a cpuset without socket 0's memory-only node.
    // And ACPI memory hotplug: socket2's node 3 is a DIMM there, which
    // tk-test-socket takes offline whole and back.
    v.push((Profile::Default, KernelKind::Debian, SOCKET2_RUN));
    v
}

/// The boots of `test` for `profile` (`full`: `--full`). With
/// `--topology`, one boot: that topology's first run of the table. With an
/// explicit `--cxl-online`, runs that only exist to try the other zone are
/// left out. (`--filter`, given, replaces every run's own selection.)
pub fn select(
    profile: Profile,
    full: bool,
    topology: Option<TopologyKind>,
    cxl_online: Option<CxlOnline>,
) -> Vec<TestRun> {
    let table = if full { FULL_RUNS } else { QUICK_RUNS };
    if let Some(k) = topology {
        let first = table.iter().find(|r| r.kind == k).copied();
        return vec![first.unwrap_or(TestRun {
            name: k.name(),
            kind: k,
            cxl_online: None,
            cxl_interleave: None,
            only: None,
            debug: true,
            append: "",
            debug_append: "",
            why: "--topology",
        })];
    }
    table
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
    fn quick_and_full_tables() {
        assert_eq!(
            names(&select(Profile::Default, false, None, None)),
            ["numa", "cxl"]
        );
        assert_eq!(
            names(&select(Profile::Default, true, None, None)),
            [
                "numa-full",
                "cxl-full",
                "cxl-kernel",
                "cxl-interleave",
                "numa-init-on-alloc",
                "socket2"
            ]
        );
    }

    /// What the quick numa run leaves out still runs: in the quick cxl
    /// run, in numa-full, and in CI's Debian numa boot.
    #[test]
    fn what_the_numa_loop_leaves_runs_elsewhere() {
        let (numa, cxl) = (QUICK_RUNS[0].only.unwrap(), QUICK_RUNS[1].only.unwrap());
        let whole = QUICK_NUMA_WHOLE.only.unwrap();
        for t in LOOP_LEAVES.split(',') {
            assert!(!numa.filter().selects(t), "{t}");
            assert!(cxl.filter().selects(t), "{t}");
            assert!(whole.filter().selects(t), "{t}");
            assert!(FULL_RUNS[0].only.is_none());
        }
        assert!(numa.filter().selects("tk-test-vma"));
        assert!(!whole.filter().selects("tk-test-faults"));
        assert_eq!(QUICK_NUMA_WHOLE.name, "numa");
        let debian_numa = ci_boots()
            .into_iter()
            .find(|(_, k, r)| *k == KernelKind::Debian && r.kind == TopologyKind::NUMA);
        assert_eq!(debian_numa.map(|b| b.2), Some(QUICK_NUMA_WHOLE));
    }

    #[test]
    fn debug_profile_runs_the_whole_suite_per_topology() {
        assert_eq!(
            names(&select(Profile::Debug, true, None, None)),
            ["numa-full", "cxl-full", "socket2"]
        );
    }

    #[test]
    fn topology_gives_one_boot_and_zone_drops_the_zone_runs() {
        assert_eq!(
            names(&select(
                Profile::Default,
                true,
                Some(TopologyKind::CXL),
                None
            )),
            ["cxl-full"]
        );
        assert_eq!(
            names(&select(
                Profile::Default,
                false,
                Some(TopologyKind::NUMA),
                None
            )),
            ["numa"]
        );
        assert_eq!(
            names(&select(
                Profile::Debug,
                false,
                Some(TopologyKind::NUMA2),
                None
            )),
            ["numa2"]
        );
        assert_eq!(
            names(&select(
                Profile::Default,
                true,
                None,
                Some(CxlOnline::Kernel)
            )),
            [
                "numa-full",
                "cxl-full",
                "cxl-interleave",
                "numa-init-on-alloc",
                "socket2"
            ]
        );
    }

    #[test]
    fn names_are_unique_and_usable_as_directories() {
        let mut n: Vec<&str> = names(QUICK_RUNS);
        n.extend(names(FULL_RUNS));
        assert!(n
            .iter()
            .all(|s| s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')));
        let len = n.len();
        n.sort();
        n.dedup();
        assert_eq!(n.len(), len);
    }

    #[test]
    fn quick_runs_leave_out_only_named_slow_tests() {
        // The quick numa run keeps every tierkit suite and skips exactly
        // the slow userspace tests and those it leaves to the quick cxl
        // run; --full runs them.
        let numa = QUICK_RUNS[0].only.unwrap().filter();
        assert_eq!(numa.kunit.as_deref(), Some(QUICK_KUNIT));
        assert_eq!(numa.user, None);
        assert_eq!(
            numa.skip.as_deref(),
            Some(format!("{SLOW_USER_TESTS},{LOOP_LEAVES}").as_str())
        );
        assert!(FULL_RUNS.iter().take(2).all(|r| r.only.is_none()));
    }

    #[test]
    fn ci_runs_everything_default_debug_numa_full_and_cxl_quick_and_debian_quick() {
        use KernelKind::{Debian, Tierkit};
        let v: Vec<(Profile, KernelKind, &str)> = ci_boots()
            .iter()
            .map(|(p, k, r)| (*p, *k, r.name))
            .collect();
        assert_eq!(
            v,
            [
                (Profile::Default, Tierkit, "numa-full"),
                (Profile::Default, Tierkit, "cxl-full"),
                (Profile::Default, Tierkit, "cxl-kernel"),
                (Profile::Default, Tierkit, "cxl-interleave"),
                (Profile::Default, Tierkit, "numa-init-on-alloc"),
                (Profile::Default, Tierkit, "socket2"),
                (Profile::Debug, Tierkit, "numa-full"),
                (Profile::Debug, Tierkit, "cxl"),
                (Profile::Debug, Tierkit, "socket2"),
                (Profile::Default, Debian, "numa"),
                (Profile::Default, Debian, "cxl"),
                (Profile::Default, Debian, "socket2"),
            ]
        );
    }

    #[test]
    fn selection_of_userspace_tests() {
        assert!(glob_match("tk-test-*", "tk-test-pool"));
        assert!(glob_match("tk-test-p??l", "tk-test-pool"));
        assert!(!glob_match("tk-test-pool", "tk-test-pool-cxl"));
        assert!(glob_match("*", ""));
        let quick = QUICK_RUNS[0].only.unwrap().filter();
        assert!(quick.selects("tk-test-vma"));
        assert!(!quick.selects("tk-test-faults"));
        let cxl = QUICK_RUNS[1].only.unwrap().filter();
        assert!(cxl.selects("tk-test-gup") && !cxl.selects("tk-test-vma"));
        assert!(Filter::both(None).selects("tk-test-anything"));
    }

    #[test]
    fn filter_describe() {
        assert_eq!(Filter::both(None).describe(), None);
        assert_eq!(Filter::both(Some("tk-*")).describe().unwrap(), "tk-*");
        let f = Filter {
            kunit: Some("a.*".into()),
            user: Some("tk-x,tk-y".into()),
            skip: Some("tk-z".into()),
        };
        assert_eq!(
            f.describe().unwrap(),
            "KUnit a.*, userspace tk-x,tk-y, without tk-z"
        );
    }
}
