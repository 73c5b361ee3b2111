//! The tests of `cargo xtask run -- CMD` and `cargo xtask shell`, run by
//! `cargo xtask test` after its boots: each starts this very xtask binary
//! as a user would (in a scratch directory, which the guest shares) and
//! checks what comes out: stdout, files, the exit code. They count in the
//! totals line as `[harness] xtask-*` tests (label `xtask run/shell`), with
//! `results.json`, `junit.xml` and `kcidb.json` in
//! `target/tierkit/test-xtask-cmd/` (`cargo xtask matrix` lists them as
//! the job `xtask-cmd`).
//!
//! | test | command | passes when |
//! |---|---|---|
//! | `xtask-run-numactl` | `run -- numactl -H` | exit 0, `available: N nodes` with the topology's N |
//! | `xtask-run-cxl-list` | `run --topology cxl -- cxl list` | exit 0, a JSON list naming each memdev |
//! | `xtask-run-tools` | `run --topology cxl -- sh -c <numastat, daxctl, ndctl, numactl --weighted-interleave>` | exit 0, each one ran |
//! | `xtask-run-false` | `run -- false` | exit 1 |
//! | `xtask-run-panic` | `run -- sh -c <memcg OOM with vm.panic_on_oom=2>` | exit 250, xtask's last line quotes the kernel's panic |
//! | `xtask-run-timeout` | `run --timeout 15 -- sleep 600` | exit 251, xtask's last line says the guest timed out |
//! | `xtask-run-share` | `run -- sh -c 'printf ... > "$2"; echo ...' sh <quotes> 'out file.txt'` | exit 0, the file on the host with the bytes, stdout streamed |
//! | `xtask-shell` | `shell` under tmux | `hello-42` on the screen, `exit 3` ends xtask with 3, the terminal cooked again |
//!
//! The kernel has no magic SysRq, so the panic test makes one without it:
//! a memory cgroup of 16 MiB fills tmpfs, and `vm.panic_on_oom=2` panics on
//! its out-of-memory (with 2 even a cgroup's OOM panics).

use crate::boot::GuestFlags;
use crate::commands::in_guest;
use crate::plan::topology::{Topology, TopologyKind, TopologyOpts};
use crate::report::summary::{self, Totals, UserTest};
use crate::util::{self, fmt_dur, Timer};
use crate::{kernels::profile, say};
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a test does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    NodeCount,
    CxlMemdevs,
    Status(u8),
    /// One of xtask's own codes, and these words in its stderr (its last
    /// line, which tells the code from a command's own status).
    Reserved(u8, &'static str),
    /// Exit 0 and each of these lines on stdout.
    Lines(&'static [&'static str]),
    Share,
    Shell,
}

/// One test.
#[derive(Clone, Copy, Debug)]
pub struct CmdTest {
    pub name: &'static str,
    /// The topology it boots (`numa`, `cxl`).
    pub topology: &'static str,
    args: &'static [&'static str],
    check: Check,
}

const PANIC_SH: &str = "mount -t cgroup2 none /sys/fs/cgroup && \
echo +memory > /sys/fs/cgroup/cgroup.subtree_control && \
mkdir /sys/fs/cgroup/tk && echo 16M > /sys/fs/cgroup/tk/memory.max && \
echo 2 > /proc/sys/vm/panic_on_oom && echo $$ > /sys/fs/cgroup/tk/cgroup.procs && \
dd if=/dev/zero of=/tmp/fill bs=1M count=64; echo 'no panic'";

/// The guest tools besides `numactl -H` and `cxl list`, one line each.
const TOOLS_SH: &str = "set -e; numastat -m | grep -q MemTotal; echo numastat-ok; \
daxctl list > /dev/null; echo daxctl-ok; ndctl list > /dev/null; echo ndctl-ok; \
numactl --weighted-interleave=all true; echo weighted-interleave-ok";

/// The bytes the share test writes: quotes, spaces, `$`, a newline.
const SHARE_TEXT: &str = "it's \"quoted\" $HOME\nline 2";

/// Every test, in the order they run.
pub const TESTS: &[CmdTest] = &[
    CmdTest {
        name: "xtask-run-numactl",
        topology: "numa",
        args: &["run", "--", "numactl", "-H"],
        check: Check::NodeCount,
    },
    CmdTest {
        name: "xtask-run-false",
        topology: "numa",
        args: &["run", "--", "false"],
        check: Check::Status(1),
    },
    CmdTest {
        name: "xtask-run-share",
        topology: "numa",
        args: &[
            "run",
            "--",
            "sh",
            "-c",
            "printf %s \"$1\" > \"$2\" && echo streamed-$((6*7))",
            "sh",
            SHARE_TEXT,
            "out file.txt",
        ],
        check: Check::Share,
    },
    CmdTest {
        name: "xtask-run-panic",
        topology: "numa",
        args: &["run", "--", "sh", "-c", PANIC_SH],
        check: Check::Reserved(
            in_guest::exit::PANIC,
            "the guest kernel panicked: Kernel panic - not syncing",
        ),
    },
    CmdTest {
        name: "xtask-run-timeout",
        topology: "numa",
        args: &["run", "--timeout", "15", "--", "sleep", "600"],
        check: Check::Reserved(in_guest::exit::TIMEOUT, "the guest timed out"),
    },
    CmdTest {
        name: "xtask-shell",
        topology: "numa",
        args: &["shell"],
        check: Check::Shell,
    },
    CmdTest {
        name: "xtask-run-cxl-list",
        topology: "cxl",
        args: &["run", "--", "cxl", "list"],
        check: Check::CxlMemdevs,
    },
    CmdTest {
        name: "xtask-run-tools",
        topology: "cxl",
        args: &["run", "--", "sh", "-c", TOOLS_SH],
        check: Check::Lines(&[
            "numastat-ok",
            "daxctl-ok",
            "ndctl-ok",
            "weighted-interleave-ok",
        ]),
    },
];

/// The tests a `cargo xtask test` runs: none unless the default profile
/// is among its profiles; with `--topology`, none unless `--filter` names
/// them ([`names_them`]), then those of that topology; with `--filter`,
/// those whose name matches one of its comma-separated globs (the one
/// dialect, [`tierkit_protocol::select::glob_match`]).
pub(crate) fn selected(g: &GuestFlags, profiles: &[profile::Profile], ci: bool) -> Vec<CmdTest> {
    if ci {
        return TESTS.to_vec();
    }
    for_selection(
        false,
        profiles,
        g.topology.map(|k| k.name()),
        g.filter.as_deref(),
    )
    .into_iter()
    .filter(|t| {
        g.filter
            .as_deref()
            .is_none_or(|f| tierkit_protocol::select::in_globs(f, t.name))
    })
    .collect()
}

/// The tests of a `test` with these flags, before `--filter`'s globs: all
/// with `--ci`; none unless the default profile is among `profiles`; with
/// a `topology`, none unless `filter` names them ([`names_them`]: the
/// one-topology edit loop boots its own run only, and these tests, each a
/// guest of its own, are left to the plain `cargo xtask test` and CI),
/// then those of that topology. (`cargo xtask matrix` lists them as one
/// job.)
pub fn for_selection(
    ci: bool,
    profiles: &[profile::Profile],
    topology: Option<&str>,
    filter: Option<&str>,
) -> Vec<CmdTest> {
    if ci {
        return TESTS.to_vec();
    }
    if !profiles.contains(&profile::Profile::Default) {
        return vec![];
    }
    if topology.is_some() && !names_them(filter) {
        return vec![];
    }
    TESTS
        .iter()
        .filter(|t| topology.is_none_or(|k| k == t.topology))
        .copied()
        .collect()
}

/// `--filter` names some of these tests (a glob starts with `xtask-`).
pub fn names_them(filter: Option<&str>) -> bool {
    filter.is_some_and(|f| f.split(',').any(|p| p.starts_with("xtask-")))
}

/// `--filter` names only these tests (every glob starts with `xtask-`):
/// `test` then boots nothing else.
pub fn filter_is_theirs(filter: Option<&str>) -> bool {
    filter.is_some_and(|f| f.split(',').all(|p| p.starts_with("xtask-")))
}

/// Runs `tests` (on `--kernel`'s kernel) and returns them as harness
/// tests, with the KCIDB report's problem if it has one.
pub(crate) fn run_all(
    kvm: Option<bool>,
    kernel: profile::KernelKind,
    tests: &[CmdTest],
) -> Result<(Vec<UserTest>, Option<String>)> {
    let exe = std::env::current_exe().context("where is this xtask binary?")?;
    let dir = util::out_dir().join("test-xtask-cmd");
    let share = dir.join("share");
    let _ = fs::remove_dir_all(&share);
    fs::create_dir_all(&share)?;
    let mut out = Vec::new();
    let start_time = crate::report::kcidb::now_rfc3339();
    for (i, t) in tests.iter().enumerate() {
        say!(
            "xtask run/shell test {}/{}: {} ({})",
            i + 1,
            tests.len(),
            t.name,
            shown(t)
        );
        let timer = Timer::start();
        let res = run_one(&exe, kvm, kernel, t, &share, &dir);
        let ms = timer.elapsed().as_millis() as u64;
        let (passed, rc, tail) = match res {
            Ok((rc, msg)) => (true, rc, msg),
            Err(e) => (false, -1, format!("{e:#}")),
        };
        let line = if passed { "ok" } else { "not ok" };
        println!(
            "  {line} - {} ({}){}",
            t.name,
            fmt_dur(timer.elapsed()),
            if passed {
                String::new()
            } else {
                format!(": {tail}")
            }
        );
        out.push(UserTest {
            name: format!("[harness] {}", t.name),
            passed,
            skipped: false,
            rc,
            output_tail: tail,
            duration_ms: ms,
            reason: None,
            ..Default::default()
        });
    }
    let run = crate::judge::ktap::Run::default();
    // KCIDB as for a boot: the facts decided once, the file validated; an
    // invalid file is the report's own problem, not a test's failure.
    let topologies: Vec<(&str, &str)> = tests.iter().map(|t| (t.name, t.topology)).collect();
    let facts = crate::judge::facts::CmdTestsFacts::decide(kernel, &topologies, &out, start_time);
    let problem = crate::report::kcidb::write_cmd_tests(&dir.join("kcidb.json"), &facts, &out);
    if let Some(p) = &problem {
        say!("error: the KCIDB report of the run/shell tests: {p}");
    }
    summary::write_json(&dir.join("results.json"), &run, &out)?;
    summary::write_junit(&dir.join("junit.xml"), "tierkit-xtask-cmd", &run, &out)?;
    let t = Totals::of(&run, &out);
    say!(
        "xtask run/shell tests: {} passed, {} failed (results: {})",
        t.passed,
        t.failed,
        dir.join("results.json").display()
    );
    Ok((out, problem))
}

fn shown(t: &CmdTest) -> String {
    let mut v = vec![t.args[0], "--topology", t.topology];
    v.extend(&t.args[1..]);
    format!("cargo xtask {}", crate::util::validate::shell_join(v))
}

/// The child's arguments: the test's, with the topology and the guest
/// flags of the `test` that runs it.
fn child_args(kvm: Option<bool>, kernel: profile::KernelKind, t: &CmdTest) -> Vec<String> {
    let mut a = vec![
        t.args[0].to_string(),
        "--topology".into(),
        t.topology.into(),
        "--kernel".into(),
        kernel.to_string(),
    ];
    match kvm {
        Some(false) => a.push("--no-kvm".into()),
        Some(true) => a.push("--kvm".into()),
        None => {}
    }
    a.extend(t.args[1..].iter().map(|s| s.to_string()));
    a
}

/// One test: `Ok((exit code, what passed))` or why it failed.
fn run_one(
    exe: &Path,
    kvm: Option<bool>,
    kernel: profile::KernelKind,
    t: &CmdTest,
    share: &Path,
    dir: &Path,
) -> Result<(i32, String)> {
    if t.check == Check::Shell {
        return shell_test(exe, kvm, kernel, t, share, dir);
    }
    let stderr_log = dir.join(format!("{}.stderr", t.name));
    let out = Command::new(exe)
        .args(child_args(kvm, kernel, t))
        .current_dir(share)
        .stdin(Stdio::null())
        .stderr(fs::File::create(&stderr_log)?)
        .output()
        .with_context(|| format!("starting {}", exe.display()))?;
    let rc = out.status.code().unwrap_or(-1);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let err_tail = || {
        let e = fs::read_to_string(&stderr_log).unwrap_or_default();
        util::tail_lines(&e, 4).replace('\n', " | ")
    };
    let want_rc = match t.check {
        Check::Status(c) | Check::Reserved(c, _) => i32::from(c),
        _ => 0,
    };
    if rc != want_rc {
        bail!(
            "exit {rc}, expected {want_rc}; stdout: {:?}; stderr: {}",
            util::tail_lines(&stdout, 3),
            err_tail()
        );
    }
    let msg = match t.check {
        Check::Status(c) => format!("exit {c}"),
        Check::Reserved(c, words) => {
            let e = fs::read_to_string(&stderr_log).unwrap_or_default();
            let last = e.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
            if !last.contains(words) {
                bail!("exit {c}, but xtask's last line does not say {words:?}: {last:?}");
            }
            format!("exit {c}: {last}")
        }
        Check::Lines(want) => {
            let got: Vec<&str> = stdout.lines().collect();
            if let Some(w) = want.iter().find(|w| !got.contains(w)) {
                bail!(
                    "no {w:?} line on stdout: {:?}; stderr: {}",
                    util::tail_lines(&stdout, 6),
                    err_tail()
                );
            }
            want.join(", ")
        }
        Check::NodeCount => {
            let topo = default_topology(t.topology)?;
            let n = topo.cpu_nodes.len() + topo.mem_nodes.len() + topo.cxl_region_gib().len();
            let want = format!("available: {n} nodes");
            if !stdout.contains(&want) {
                bail!(
                    "numactl -H printed no `{want}`: {:?}",
                    util::tail_lines(&stdout, 12)
                );
            }
            want
        }
        Check::CxlMemdevs => {
            let v: serde_json::Value = serde_json::from_str(stdout.trim())
                .with_context(|| format!("`cxl list` printed no JSON: {stdout:?}"))?;
            let n = default_topology(t.topology)?.cxl.len();
            // A plain list of memdevs, or with regions too, a list of
            // {"memdevs": [...]} and {"regions": [...]}.
            let mut mems = std::collections::BTreeSet::new();
            memdev_names(&v, &mut mems);
            if mems.len() != n {
                bail!(
                    "`cxl list` named {} memdev(s) ({mems:?}), expected {n}: {stdout}",
                    mems.len()
                );
            }
            format!("memdevs {mems:?}")
        }
        Check::Share => {
            let f = share.join("out file.txt");
            let got = fs::read_to_string(&f)
                .with_context(|| format!("the guest's file is not on the host: {}", f.display()))?;
            if got != SHARE_TEXT {
                bail!("{} holds {got:?}, expected {SHARE_TEXT:?}", f.display());
            }
            if stdout != "streamed-42\n" {
                bail!("stdout was {stdout:?}, expected \"streamed-42\\n\" (the command's output alone)");
            }
            "the file and stdout as written".into()
        }
        Check::Shell => unreachable!("shell_test"),
    };
    Ok((rc, msg))
}

/// Every `"memdev": NAME` in `cxl list`'s JSON.
fn memdev_names<'a>(v: &'a serde_json::Value, out: &mut std::collections::BTreeSet<&'a str>) {
    match v {
        serde_json::Value::Array(a) => a.iter().for_each(|x| memdev_names(x, out)),
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                match (k.as_str(), x.as_str()) {
                    ("memdev", Some(name)) => {
                        out.insert(name);
                    }
                    _ => memdev_names(x, out),
                }
            }
        }
        _ => {}
    }
}

/// The topology `name` as `cargo xtask` boots it without flags.
fn default_topology(name: &str) -> Result<Topology> {
    let kind = TopologyKind::by_name(name).context("no such topology")?;
    Topology::new(&TopologyOpts {
        kind,
        cpus: 2,
        dram_gib: kind.spec().dram_gib,
        slow_gib: 3,
        cxl_devs: vec![],
        cxl_interleave: None,
        dram_perf: None,
        // These tests boot tierkit's kernel, which adds no DIMMs.
        mem_hotplug: false,
    })
}

/// `tmux` on a private server: runs `args`, returns stdout.
fn tmux(sock: &str, args: &[&str]) -> Result<String> {
    let out = Command::new("tmux")
        .args(["-L", sock])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("could not run tmux (apt-get install tmux; scripts/setup-host.sh does)")?;
    if !out.status.success() {
        bail!(
            "tmux {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Polls the pane until `want` is on it or `secs` pass.
fn wait_pane(sock: &str, want: &str, secs: u64) -> Result<String> {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let screen = tmux(
            sock,
            &["capture-pane", "-p", "-J", "-S", "-200", "-t", "tk"],
        )?;
        if screen.contains(want) {
            return Ok(screen);
        }
        if Instant::now() >= until {
            bail!(
                "no {want:?} on the pane after {secs} s; it shows: {:?}",
                util::tail_lines(&screen, 8)
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `cargo xtask shell` in a tmux pane: the prompt, a command and its
/// output, `exit 3`, then xtask's exit status and the terminal's mode
/// (`stty -a` must say `icanon` and `echo` again: QEMU's raw mode undone).
fn shell_test(
    exe: &Path,
    kvm: Option<bool>,
    kernel: profile::KernelKind,
    t: &CmdTest,
    share: &Path,
    dir: &Path,
) -> Result<(i32, String)> {
    let sock = format!("tierkit-test-{}", std::process::id());
    let args = crate::util::validate::shell_join(
        std::iter::once(exe.to_str().context("xtask's path is not UTF-8")?)
            .chain(child_args(kvm, kernel, t).iter().map(String::as_str)),
    );
    let script = format!(
        "{args} 2>{}; rc=$?; m=$(stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' '); echo \"xtask-exit=$rc tty-modes: $m\"; exec sleep 600",
        crate::util::validate::shell_quote(&dir.join("xtask-shell.stderr").display().to_string())
    );
    let share_s = share.display().to_string();
    tmux(
        &sock,
        &[
            "new-session",
            "-d",
            "-s",
            "tk",
            "-x",
            "160",
            "-y",
            "40",
            "-c",
            &share_s,
            "sh",
            "-c",
            &script,
        ],
    )?;
    let res = (|| -> Result<(i32, String)> {
        // The prompt, `tierkit:<cwd># ` (kernel warnings may name tierkit too).
        wait_pane(&sock, &format!("tierkit:{share_s}#"), 600)?;
        tmux(
            &sock,
            &["send-keys", "-t", "tk", "echo hello-$((6*7))", "Enter"],
        )?;
        wait_pane(&sock, "\nhello-42", 120)?;
        tmux(&sock, &["send-keys", "-t", "tk", "exit 3", "Enter"])?;
        let screen = wait_pane(&sock, "tty-modes:", 120)?;
        let line = screen
            .lines()
            .find(|l| l.contains("xtask-exit="))
            .unwrap_or("");
        let rc: i32 = line
            .split("xtask-exit=")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|r| r.parse().ok())
            .unwrap_or(-1);
        if rc != 3 {
            bail!(
                "xtask shell exited with {rc} after `exit 3`; the pane shows {:?}",
                util::tail_lines(&screen, 8)
            );
        }
        let modes = line.split("tty-modes:").nth(1).unwrap_or("").trim();
        let words: Vec<&str> = modes.split_whitespace().collect();
        if !(words.contains(&"icanon") && words.contains(&"echo")) {
            bail!("the terminal was left in raw mode after the shell: stty -a says {modes:?}");
        }
        Ok((
            rc,
            format!("hello-42 shown, exit 3 passed through, terminal restored ({modes})"),
        ))
    })();
    let _ = tmux(&sock, &["kill-server"]);
    res
}
