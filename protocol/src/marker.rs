//! Marker lines: `TIERKIT-<TAG> [args]`.
//!
//! The order /init prints them in: `BOOT`, `CXL ...` (with `--topology
//! cxl`), `TOPO ...`, `KMEMLEAK-BASELINE` (debug profile), `INSMOD-START`,
//! `INSMOD rc=N`, per program `<KIND>-START name` ... `<KIND> name rc=N`
//! (with `timeout=S` when /init killed it at its deadline, `left=K` when
//! it left K processes behind; or `CMD-START` ... `CMD rc=N`,
//! `SHELL-START` ... `SHELL rc=N`),
//! `RMMOD-START`, `RMMOD rc=N`, `KMEMLEAK-SCAN`, `KMEMLEAK leaks=N` (debug
//! profile), and last `DONE fails=N`; then the guest powers off. `ERROR`
//! and `NOTE` lines come wherever something failed or is worth saying.

/// What every marker line starts with.
pub const PREFIX: &str = "TIERKIT-";

/// `TIERKIT-BOOT mode=M kernel=R cpus=N`: /init started.
pub const BOOT: &str = "BOOT";
/// `TIERKIT-INSMOD-START`, then `TIERKIT-INSMOD rc=N`.
pub const INSMOD: &str = "INSMOD";
/// `TIERKIT-RMMOD-START`, then `TIERKIT-RMMOD rc=N`.
pub const RMMOD: &str = "RMMOD";
/// `TIERKIT-DONE fails=N`: the last marker.
pub const DONE: &str = "DONE";
/// `TIERKIT-ERROR what`: a failure (it counts in `fails`).
pub const ERROR: &str = "ERROR";
/// `TIERKIT-NOTE what`.
pub const NOTE: &str = "NOTE";
/// `TIERKIT-TOPO what`: the topology the guest sees.
pub const TOPO: &str = "TOPO";
/// `TIERKIT-CXL what`: a step of the CXL region assembly.
pub const CXL: &str = "CXL";
/// `TIERKIT-KMEMLEAK leaks=N`; `KMEMLEAK-BASELINE` and `KMEMLEAK-SCAN`
/// start the scans before insmod and after rmmod.
pub const KMEMLEAK: &str = "KMEMLEAK";
pub const KMEMLEAK_BASELINE: &str = "KMEMLEAK-BASELINE";
pub const KMEMLEAK_SCAN: &str = "KMEMLEAK-SCAN";
/// `TIERKIT-CMD-START`, then `TIERKIT-CMD rc=N` (`run -- CMD`).
pub const CMD: &str = "CMD";
/// `TIERKIT-SHELL-START`, then `TIERKIT-SHELL rc=N` (`shell`).
pub const SHELL: &str = "SHELL";
/// `TIERKIT-JSON {...}`: a program's results, on the data channel.
pub const JSON: &str = "JSON";

/// The kinds of guest programs /init runs with start and end markers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProgKind {
    /// `tk-test-*` (`tierkit.mode=test`).
    UserTest,
    /// `tk-demo*` (`tierkit.mode=run`).
    Demo,
    /// `tk-bench-<name>` (`tierkit.mode=bench-<name>`).
    Bench,
}

impl ProgKind {
    pub const ALL: [ProgKind; 3] = [ProgKind::UserTest, ProgKind::Demo, ProgKind::Bench];

    /// Its tag: `USERTEST`, `DEMO`, `BENCH`.
    pub fn tag(self) -> &'static str {
        match self {
            ProgKind::UserTest => "USERTEST",
            ProgKind::Demo => "DEMO",
            ProgKind::Bench => "BENCH",
        }
    }

    pub fn from_tag(tag: &str) -> Option<ProgKind> {
        ProgKind::ALL.into_iter().find(|k| k.tag() == tag)
    }
}

/// `TIERKIT-<tag>` followed by `args` (if any).
pub fn line(tag: &str, args: &str) -> String {
    if args.is_empty() {
        format!("{PREFIX}{tag}")
    } else {
        format!("{PREFIX}{tag} {args}")
    }
}

/// `<TAG>-START`.
pub fn start(tag: &str) -> String {
    format!("{tag}-START")
}

/// `TIERKIT-<KIND>-START name`.
pub fn prog_start(kind: ProgKind, name: &str) -> String {
    line(&start(kind.tag()), name)
}

/// `TIERKIT-<KIND> name rc=N`.
pub fn prog_end(kind: ProgKind, name: &str, rc: i32) -> String {
    line(kind.tag(), &format!("{name} rc={rc}"))
}

/// How a program ended beyond its status: killed at its deadline,
/// processes it left behind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ending {
    /// Killed at its deadline of this many seconds.
    pub timeout: Option<u32>,
    /// Processes it left running when it exited, killed by /init.
    pub left: usize,
    /// What it held (its processes, tierkit's pages and files) was not
    /// given back within the bound after it was killed
    /// ([`crate::deadline::SETTLE_SECS`]).
    pub unreleased: bool,
    /// Whole seconds /init waited after it for its processes to be reaped
    /// and tierkit's counters to come back (0: less than a second).
    pub waited: u32,
}

/// `TIERKIT-<KIND> name rc=N[ timeout=S][ left=K][ unreleased=1][ waited=W]`.
pub fn prog_end_with(kind: ProgKind, name: &str, rc: i32, e: Ending) -> String {
    let mut args = format!("{name} rc={rc}");
    if let Some(s) = e.timeout {
        args.push_str(&format!(" timeout={s}"));
    }
    if e.left > 0 {
        args.push_str(&format!(" left={}", e.left));
    }
    if e.unreleased {
        args.push_str(" unreleased=1");
    }
    if e.waited > 0 {
        args.push_str(&format!(" waited={}", e.waited));
    }
    line(kind.tag(), &args)
}

/// The [`Ending`] of an end marker's arguments.
pub fn ending(args: &str) -> Ending {
    Ending {
        timeout: field(args, "timeout").and_then(|v| v.parse().ok()),
        left: field(args, "left")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        unreleased: field(args, "unreleased") == Some("1"),
        waited: field(args, "waited")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    }
}

/// `TIERKIT-<TAG> rc=N`.
pub fn rc_line(tag: &str, rc: i32) -> String {
    line(tag, &format!("rc={rc}"))
}

/// `TIERKIT-DONE fails=N`.
pub fn done(fails: u32) -> String {
    line(DONE, &format!("fails={fails}"))
}

/// A marker line split into its tag and the rest (`None`: no `TIERKIT-`
/// at the start of `text`).
pub fn split(text: &str) -> Option<(&str, &str)> {
    let t = text.strip_prefix(PREFIX)?;
    Some(t.split_once(' ').unwrap_or((t, "")))
}

/// The value of `key=` among the words of `args` (`rc=`, `fails=`,
/// `leaks=`).
pub fn field<'a>(args: &'a str, key: &str) -> Option<&'a str> {
    args.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// The steps of /init with a start marker and an `rc=` end marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Insmod,
    Rmmod,
    /// `run -- CMD`'s command.
    Cmd,
    /// `shell`'s shell.
    Shell,
}

impl Step {
    pub const ALL: [Step; 4] = [Step::Insmod, Step::Rmmod, Step::Cmd, Step::Shell];

    /// Its tag: `INSMOD`, `RMMOD`, `CMD`, `SHELL`.
    pub fn tag(self) -> &'static str {
        match self {
            Step::Insmod => INSMOD,
            Step::Rmmod => RMMOD,
            Step::Cmd => CMD,
            Step::Shell => SHELL,
        }
    }

    pub fn from_tag(tag: &str) -> Option<Step> {
        Step::ALL.into_iter().find(|s| s.tag() == tag)
    }
}

/// A marker line read: the one reader of what /init says, for every user
/// on the host (the verdict, the live console, the phases of a run, the
/// judge of `run -- CMD` and `shell`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker<'a> {
    /// `BOOT mode=M kernel=R cpus=N`.
    Boot(&'a str),
    /// `CXL what`: a step of the CXL region assembly (`setup`, `ready`, ...).
    Cxl(&'a str),
    /// `TOPO what`.
    Topo(&'a str),
    KmemleakBaseline,
    KmemleakScan,
    /// `KMEMLEAK leaks=N` (`None`: no readable count).
    Kmemleak {
        leaks: Option<u32>,
    },
    /// `<STEP>-START`.
    Start(Step),
    /// `<STEP> rc=N` (`None`: no readable status).
    End {
        step: Step,
        rc: Option<i32>,
    },
    /// `<KIND>-START name`.
    ProgStart {
        kind: ProgKind,
        name: &'a str,
    },
    /// `<KIND> name rc=N[ timeout=S][ left=K]`.
    ProgEnd {
        kind: ProgKind,
        name: &'a str,
        rc: Option<i32>,
        ending: Ending,
    },
    /// `DONE fails=N` (0 when the count is missing).
    Done {
        fails: u32,
    },
    /// `ERROR what`.
    Error(&'a str),
    /// `NOTE what`.
    Note(&'a str),
    /// `JSON {...}`: the JSON text.
    Json(&'a str),
    /// A `TIERKIT-` tag this side does not know.
    Other {
        tag: &'a str,
        args: &'a str,
    },
}

/// The marker text in a console or data-channel line: from `TIERKIT-`
/// (after a printk prefix or other output) to the end, without trailing
/// white space.
pub fn locate(line: &str) -> Option<&str> {
    line.find(PREFIX).map(|i| line[i..].trim_end())
}

impl<'a> Marker<'a> {
    /// The marker of a console or data-channel line ([`locate`], then
    /// [`Marker::parse`]).
    pub fn find(line: &'a str) -> Option<Marker<'a>> {
        Marker::parse(locate(line)?)
    }

    /// A marker text (`TIERKIT-<TAG> [args]`, from its start) read.
    pub fn parse(text: &'a str) -> Option<Marker<'a>> {
        let (tag, args) = split(text)?;
        let args = args.trim_end();
        let first = args.split_whitespace().next().unwrap_or("");
        let rc = || field(args, "rc").and_then(|v| v.parse().ok());
        if let Some(t) = tag.strip_suffix("-START") {
            if let Some(kind) = ProgKind::from_tag(t) {
                return Some(Marker::ProgStart { kind, name: first });
            }
            if let Some(step) = Step::from_tag(t) {
                return Some(Marker::Start(step));
            }
        }
        if let Some(kind) = ProgKind::from_tag(tag) {
            let ending = ending(args);
            return Some(Marker::ProgEnd {
                kind,
                name: first,
                rc: rc(),
                ending,
            });
        }
        if let Some(step) = Step::from_tag(tag) {
            return Some(Marker::End { step, rc: rc() });
        }
        Some(match tag {
            BOOT => Marker::Boot(args),
            CXL => Marker::Cxl(args),
            TOPO => Marker::Topo(args),
            KMEMLEAK_BASELINE => Marker::KmemleakBaseline,
            KMEMLEAK_SCAN => Marker::KmemleakScan,
            KMEMLEAK => Marker::Kmemleak {
                leaks: field(args, "leaks").and_then(|v| v.parse().ok()),
            },
            DONE => Marker::Done {
                fails: field(args, "fails")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
            },
            ERROR => Marker::Error(args),
            NOTE => Marker::Note(args),
            JSON => Marker::Json(args),
            _ => Marker::Other { tag, args },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        assert_eq!(done(3), "TIERKIT-DONE fails=3");
        assert_eq!(line(&start(INSMOD), ""), "TIERKIT-INSMOD-START");
        assert_eq!(rc_line(RMMOD, -1), "TIERKIT-RMMOD rc=-1");
        let s = prog_start(ProgKind::UserTest, "tk-test-vma");
        assert_eq!(s, "TIERKIT-USERTEST-START tk-test-vma");
        let e = prog_end(ProgKind::Bench, "tk-bench-wi", 1);
        assert_eq!(split(&e), Some(("BENCH", "tk-bench-wi rc=1")));
        assert_eq!(field("tk-bench-wi rc=1", "rc"), Some("1"));
        assert_eq!(field("fails=0", "rc"), None);
        assert_eq!(split("TIERKIT-DONE"), Some(("DONE", "")));
        assert_eq!(split("x TIERKIT-DONE"), None);
        for k in ProgKind::ALL {
            assert_eq!(ProgKind::from_tag(k.tag()), Some(k));
        }
        assert_eq!(ProgKind::from_tag("CMD"), None);
        let t = Ending {
            timeout: Some(2),
            left: 3,
            unreleased: true,
            waited: 30,
        };
        let l = prog_end_with(ProgKind::UserTest, "tk-test-x", 137, t);
        assert_eq!(
            l,
            "TIERKIT-USERTEST tk-test-x rc=137 timeout=2 left=3 unreleased=1 waited=30"
        );
        assert_eq!(ending(split(&l).unwrap().1), t);
        assert_eq!(ending("tk-test-x rc=0"), Ending::default());
        let plain = prog_end_with(ProgKind::Demo, "d", 0, Ending::default());
        assert_eq!(plain, prog_end(ProgKind::Demo, "d", 0));
    }

    /// Every line /init writes reads back as what it says.
    #[test]
    fn markers_read_back() {
        fn m(l: &str) -> Marker<'_> {
            Marker::find(l).unwrap()
        }
        assert_eq!(
            m("[    1.0] TIERKIT-BOOT mode=test cpus=2"),
            Marker::Boot("mode=test cpus=2")
        );
        assert_eq!(m(&line(&start(INSMOD), "")), Marker::Start(Step::Insmod));
        assert_eq!(
            m(&rc_line(RMMOD, -1)),
            Marker::End {
                step: Step::Rmmod,
                rc: Some(-1)
            }
        );
        assert_eq!(
            m(&rc_line(CMD, 3)),
            Marker::End {
                step: Step::Cmd,
                rc: Some(3)
            }
        );
        assert_eq!(
            m("TIERKIT-SHELL rc=x"),
            Marker::End {
                step: Step::Shell,
                rc: None
            }
        );
        assert_eq!(
            m(&prog_start(ProgKind::Demo, "tk-demo")),
            Marker::ProgStart {
                kind: ProgKind::Demo,
                name: "tk-demo"
            }
        );
        let e = Ending {
            timeout: Some(5),
            left: 1,
            unreleased: true,
            waited: 3,
        };
        assert_eq!(
            m(&format!(
                "junk {}\r\n",
                prog_end_with(ProgKind::UserTest, "tk-test-a", 9, e)
            )),
            Marker::ProgEnd {
                kind: ProgKind::UserTest,
                name: "tk-test-a",
                rc: Some(9),
                ending: e
            }
        );
        assert_eq!(m(&done(2)), Marker::Done { fails: 2 });
        assert_eq!(m("TIERKIT-DONE"), Marker::Done { fails: 0 });
        assert_eq!(
            m(&line(KMEMLEAK, "leaks=4")),
            Marker::Kmemleak { leaks: Some(4) }
        );
        assert_eq!(m(&line(KMEMLEAK_SCAN, "")), Marker::KmemleakScan);
        assert_eq!(m(&line(KMEMLEAK_BASELINE, "")), Marker::KmemleakBaseline);
        assert_eq!(m(&line(CXL, "setup x")), Marker::Cxl("setup x"));
        assert_eq!(
            m(&line(TOPO, "preempt: full")),
            Marker::Topo("preempt: full")
        );
        assert_eq!(m(&line(ERROR, "share: no")), Marker::Error("share: no"));
        assert_eq!(m(&line(NOTE, "n")), Marker::Note("n"));
        assert_eq!(m(&line(JSON, "{\"a\":1}")), Marker::Json("{\"a\":1}"));
        assert_eq!(
            m("TIERKIT-NEW x"),
            Marker::Other {
                tag: "NEW",
                args: "x"
            }
        );
        assert_eq!(Marker::find("no marker here"), None);
        assert_eq!(
            locate("[ 1.0] TIERKIT-DONE fails=0  \n"),
            Some("TIERKIT-DONE fails=0")
        );
        for s in Step::ALL {
            assert_eq!(Step::from_tag(s.tag()), Some(s));
        }
    }
}
