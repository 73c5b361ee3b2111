//! Every default the help states is the one the code uses: each command's
//! `--timeout` against the timeout of the boot it makes, on every topology
//! and profile, and each hand-written `[default: ...]` against the boot
//! made without that flag.

use super::*;
use crate::cli::flags::Cmd;
use crate::plan::topology::{Topology, TopologyKind};

/// The help text of `cmd`'s flag `id`.
fn help_of(cmd: &str, id: &str) -> String {
    let mut c = command();
    let sub = c.find_subcommand_mut(cmd).unwrap();
    let arg = sub.get_arguments().find(|a| a.get_id() == id).unwrap();
    arg.get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default()
}

/// The `[default: ...]` of a help text.
fn default_of(help: &str) -> &str {
    let from = help.find("[default: ").expect("a [default: ...]") + "[default: ".len();
    let len = help[from..].find(']').unwrap();
    &help[from..from + len]
}

/// What `--timeout`'s help says the default is for `args`: its base times
/// each factor whose flag `args` gives.
fn timeout_said(help: &str, args: &[&str]) -> Option<u64> {
    let d = default_of(help);
    if d.starts_with("none") {
        return None;
    }
    let mut parts = d.split(", ");
    let mut secs: u64 = parts.next().unwrap().parse().unwrap();
    for p in parts {
        let (f, flag) = p
            .strip_prefix("times ")
            .and_then(|r| r.split_once(" with "))
            .unwrap_or_else(|| panic!("{p:?}: not `times F with --FLAG VALUE`"));
        let (flag, value) = flag.split_once(' ').unwrap();
        if args.windows(2).any(|w| w == [flag, value]) {
            secs *= f.parse::<u64>().unwrap();
        }
    }
    Some(secs)
}

/// The timeout the code gives the boot of `args`, as the dispatch makes it
/// (`shell`: its request's, none unless given).
fn timeout_made(args: &[&str]) -> Option<u64> {
    let cli = parse(std::iter::once("cargo xtask").chain(args.iter().copied())).unwrap();
    let req = match &cli.cmd {
        Cmd::Run(r) => crate::cli::run_boot(r).unwrap(),
        Cmd::Bench(b) => crate::cli::bench_boot(b, b.which.unwrap()).unwrap(),
        Cmd::Test(t) => crate::cli::test_request(t).unwrap().boots.remove(0).req,
        Cmd::Shell(s) => {
            return crate::cli::shell_request(s, true)
                .unwrap()
                .timeout
                .map(|d| d.as_secs())
        }
        _ => unreachable!(),
    };
    Some(req.job.timeout.as_secs())
}

#[test]
fn each_commands_timeout_help_says_its_default() {
    for (cmd, first) in [
        ("run", &["run"][..]),
        ("run", &["run", "--", "true"][..]),
        ("test", &["test"][..]),
        ("bench", &["bench", "clear"][..]),
        ("shell", &["shell"][..]),
    ] {
        let help = help_of(cmd, "timeout");
        for t in TOPOLOGIES.iter().map(|t| t.name) {
            for p in ["default", "debug"] {
                let mut args: Vec<&str> = first[..first.len().min(2)].to_vec();
                if first.len() > 1 && first[1] == "--" {
                    args.truncate(1);
                }
                args.extend(["--topology", t, "--profile", p]);
                if first.ends_with(&["--", "true"]) {
                    args.extend(["--", "true"]);
                }
                assert_eq!(
                    timeout_said(&help, &args),
                    timeout_made(&args),
                    "{args:?}: `help {cmd}` says {help:?}"
                );
            }
        }
    }
}

/// `kind`'s default in a hand-written default that differs by topology:
/// `numa, numa2: 100:200G; cxl: 100:20G` (each topology's own) or
/// `3G; socket2: 2G` (one for every topology not named after it).
fn default_for<'a>(said: &'a str, kind: &str) -> Option<&'a str> {
    said.split("; ")
        .filter_map(|part| part.split_once(": "))
        .find(|(names, _)| names.split(", ").any(|n| n == kind))
        .map(|(_, value)| value)
        .or_else(|| said.split("; ").find(|part| !part.contains(": ")))
}

#[test]
fn a_default_per_topology_is_read_as_written() {
    let perf = "numa, numa2: 100:200G; cxl: 100:20G";
    assert_eq!(default_for(perf, "numa2"), Some("100:200G"));
    assert_eq!(default_for(perf, "cxl"), Some("100:20G"));
    assert_eq!(default_for(perf, "socket2"), None);
    assert_eq!(default_for("3G; socket2: 2G", "socket2"), Some("2G"));
    assert_eq!(default_for("3G; socket2: 2G", "numa"), Some("3G"));
}

/// The flags whose help states a default by hand, with what the code
/// makes without them (the boot of `run --topology <each>`).
#[test]
fn every_hand_written_default_is_the_codes() {
    let mut checked = vec!["timeout"];
    for kind in [
        TopologyKind::NUMA,
        TopologyKind::NUMA2,
        TopologyKind::CXL,
        TopologyKind::SOCKET2,
    ] {
        let cli = parse(["cargo xtask", "run", "--topology", kind.name()]).unwrap();
        let Cmd::Run(r) = &cli.cmd else {
            unreachable!()
        };
        let req = crate::cli::run_boot(r).unwrap();
        let topo = Topology::new(&req.topology).unwrap();
        let said = |id: &str| default_of(&help_of("run", id)).to_string();
        let own = |id: &str| default_for(&said(id), kind.name()).map(str::to_string);
        assert!(said("topology").starts_with("numa;"));
        assert_eq!(
            timeout_made(&["run"]),
            timeout_made(&["run", "--topology", "numa"])
        );
        assert_eq!(
            own("dram"),
            Some(format!("{}G", topo.cpu_nodes[0].dram_gib))
        );
        if let Some(m) = topo.mem_nodes.first() {
            assert_eq!(own("cxl_mem"), Some(format!("{}G", m.size_gib)), "{kind}");
        }
        if let [d, rest @ ..] = &topo.cxl[..] {
            assert!(rest.is_empty());
            let p = d.perf;
            assert_eq!(
                said("cxl_dev"),
                format!("one {}G:{}:{}G", d.size_gib, p.latency_ns, p.bandwidth_gbs)
            );
            assert_eq!(
                said("cxl_interleave"),
                format!("{}, a region per device", topo.cxl_interleave.ways)
            );
            let gran = format!("default {})", topo.cxl_interleave.granularity);
            assert!(help_of("run", "cxl_interleave").contains(&gran));
        }
        let p = topo.dram_perf;
        let perf = format!("{}:{}G", p.latency_ns, p.bandwidth_gbs);
        assert_eq!(
            own("dram_perf"),
            Some(perf),
            "{kind}: {}",
            said("dram_perf")
        );
        assert!(said("cpu_model").starts_with(&format!("{}:", req.job.cpu_model)));
        let online = clap::ValueEnum::to_possible_value(&req.job.cxl_online).unwrap();
        let online = online.get_name();
        assert!(said("cxl_online").starts_with(&format!("{online};")));
    }
    checked.extend([
        "topology",
        "dram",
        "cxl_mem",
        "cxl_dev",
        "cxl_interleave",
        "dram_perf",
        "cpu_model",
        "cxl_online",
    ]);
    // `merge` and `lava`: their output directories, as the code makes
    // them; lava's artifacts without --artifact-url: file:// paths.
    let out = |cmd: &str, path: std::path::PathBuf| {
        let said = default_of(&help_of(cmd, "out")).to_string();
        assert!(
            path.ends_with(&said),
            "`{cmd} --out`: {said} for {}",
            path.display()
        );
    };
    out("merge", crate::commands::merge::default_out());
    out("lava", crate::commands::lava::default_out());
    let (kernel, _) =
        crate::commands::lava::artifact_urls(None, "numa", std::path::Path::new("/d"));
    assert!(kernel.starts_with("file:///d"), "{kernel}");
    assert!(default_of(&help_of("lava", "artifact_url")).starts_with("file:// paths"));
    checked.extend(["out", "artifact_url"]);
    // No other flag of any command states a default by hand.
    let c = command();
    for sub in c.get_subcommands() {
        for a in sub.get_arguments() {
            let h = a.get_long_help().or(a.get_help()).map(|h| h.to_string());
            if h.is_some_and(|h| h.contains("[default: ")) {
                let id = a.get_id().as_str();
                assert!(
                    checked.contains(&id),
                    "`{} --help`: {id}'s default is not checked here",
                    sub.get_name()
                );
            }
        }
    }
}

/// `test --help` names the quick numa run's KUnit glob as the code has it
/// (it said "every tierkit KUnit suite" while the run left one out).
#[test]
fn test_help_names_the_quick_kunit_glob() {
    let c = command();
    let test = c.find_subcommand("test").unwrap();
    let about = test
        .get_long_about()
        .or(test.get_about())
        .map(|a| a.to_string())
        .unwrap_or_default();
    let glob = crate::plan::runs::QUICK_KUNIT;
    assert!(about.contains(&format!("`{glob}`")), "{about}");
}
