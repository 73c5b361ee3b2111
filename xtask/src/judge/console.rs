//! What the kernel prints on the serial console when something is wrong:
//! one table of report patterns ([`PATTERNS`]), used by the live stream
//! ([`crate::boot::qemu::Streamer`]) and by the verdict (the crash scan in
//! [`crate::judge::ktap`], [`crate::judge::verdict`]), and where in the run a console
//! line falls ([`Phases`]); [`fatal`]: a boot that fails early fails fast.
//!
//! The patterns are the first lines of the kernel's own reports (Linux 7.3),
//! after the `printk` prefix is removed:
//!
//! | report | first line | printed by |
//! |---|---|---|
//! | KASAN | `BUG: KASAN: slab-use-after-free in f+0x1/0x2` | `mm/kasan/report.c` |
//! | UBSAN | `UBSAN: array-index-out-of-bounds in lib/x.c:1:2` | `lib/ubsan.c` |
//! | kmemleak | `unreferenced object 0xffff888003a1c000 (size 64):` | `mm/kmemleak.c` (the debugfs report) |
//! | lockdep | `WARNING: possible circular locking dependency detected` | `kernel/locking/lockdep.c` |
//! | atomic context | `BUG: sleeping function called from invalid context at f.c:1` | `kernel/sched/core.c`, `lib/smp_processor_id.c` |
//! | debugobjects | `ODEBUG: free active (active state 0) object: ...` | `lib/debugobjects.c` (a WARN follows) |
//! | list corruption | `list_add corruption. prev->next should be next (...)` | `lib/list_debug.c` (a WARN follows) |
//! | Rust panic | `rust_kernel: panicked at module/src/x.rs:1:2:` | `rust/kernel/lib.rs` (a BUG follows) |
//! | soft lockup | `watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [insmod:73]` | `kernel/watchdog.c` |
//! | hung task | `INFO: task insmod:73 blocked for more than 60 seconds.` | `kernel/hung_task.c` |
//! | RCU stall | `rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:` | `kernel/rcu/tree_stall.h`, `tree_exp.h` |
//! | workqueue lockup | `BUG: workqueue lockup - pool cpus=0 ...` | `kernel/workqueue.c` |
//! | BUG, oops, panic | `BUG: ...`, `kernel BUG at ...`, `Oops: ...`, `Kernel panic - not syncing: ...` | `arch/x86/kernel/dumpstack.c`, `kernel/panic.c` |
//! | WARNING | `WARNING: f.c:1 at f+0x1/0x2, CPU#0: comm/1` | `kernel/panic.c` (`__warn`) |

pub mod fatal;

use serde::Serialize;
use std::fmt;
use tierkit_protocol::marker::{Marker, ProgKind, Step};

/// What kind of kernel report a console line starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CrashKind {
    /// KASAN (or KFENCE) found a bad memory access.
    Kasan,
    /// UBSAN found undefined behaviour in C code.
    Ubsan,
    /// kmemleak found an unreferenced object.
    Kmemleak,
    /// lockdep (or PROVE_RCU) found a locking problem.
    Lockdep,
    /// Sleeping, scheduling or per-CPU access in the wrong context
    /// (DEBUG_ATOMIC_SLEEP, DEBUG_PREEMPT).
    AtomicContext,
    /// debugobjects: a timer, work item, ... used in a wrong state.
    DebugObjects,
    /// DEBUG_LIST: a corrupted list.
    ListCorruption,
    /// A Rust `panic!` in the kernel (overflow checks, debug assertions,
    /// `unwrap`, ...).
    RustPanic,
    /// A CPU that did not schedule for too long.
    SoftLockup,
    /// A task in D state for too long.
    HungTask,
    /// An RCU grace period held up for too long.
    RcuStall,
    /// A workqueue pool that made no progress.
    WorkqueueLockup,
    /// `BUG: ...`, `kernel BUG at ...`.
    Bug,
    /// `Oops: ...`, `general protection fault`, `Unable to handle kernel`.
    Oops,
    /// `Kernel panic - not syncing: ...`.
    Panic,
    /// `WARNING: ...` (WARN_ON and friends).
    Warning,
    /// A `RIP:` line outside any other report.
    Other,
}

impl CrashKind {
    /// Reports that are the message of a WARN: the `WARNING:` line that
    /// follows belongs to them.
    fn warns_next(self) -> bool {
        matches!(self, CrashKind::DebugObjects | CrashKind::ListCorruption)
    }

    /// Whether a `BUG:`/`Oops` line right after a report of this kind is
    /// part of it (the oops of a BUG, the BUG() after a Rust panic).
    fn absorbs_oops(self) -> bool {
        matches!(
            self,
            CrashKind::Bug | CrashKind::Oops | CrashKind::Other | CrashKind::RustPanic
        )
    }
}

impl fmt::Display for CrashKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CrashKind::Kasan => "KASAN report",
            CrashKind::Ubsan => "UBSAN report",
            CrashKind::Kmemleak => "kmemleak report",
            CrashKind::Lockdep => "lockdep report",
            CrashKind::AtomicContext => "atomic-context BUG",
            CrashKind::DebugObjects => "debugobjects report",
            CrashKind::ListCorruption => "list corruption",
            CrashKind::RustPanic => "Rust panic",
            CrashKind::SoftLockup => "soft lockup",
            CrashKind::HungTask => "hung task",
            CrashKind::RcuStall => "RCU stall",
            CrashKind::WorkqueueLockup => "workqueue lockup",
            CrashKind::Bug => "BUG",
            CrashKind::Oops => "oops",
            CrashKind::Panic => "panic",
            CrashKind::Warning => "warning",
            CrashKind::Other => "crash",
        })
    }
}

/// How a pattern matches a line (without its `printk` prefix, leading
/// white space removed).
#[derive(Clone, Copy, Debug)]
pub enum Rule {
    Prefix(&'static str),
    Contains(&'static str),
    /// Starts with the first and contains the second.
    PrefixContains(&'static str, &'static str),
}

impl Rule {
    fn matches(self, t: &str) -> bool {
        match self {
            Rule::Prefix(p) => t.starts_with(p),
            Rule::Contains(c) => t.contains(c),
            Rule::PrefixContains(p, c) => t.starts_with(p) && t[p.len()..].contains(c),
        }
    }
}

/// One kind of report and how its first line looks.
#[derive(Clone, Copy, Debug)]
pub struct Pattern {
    pub kind: CrashKind,
    pub rule: Rule,
    /// A real first line of such a report (checked by the tests).
    pub example: &'static str,
}

const fn p(kind: CrashKind, rule: Rule, example: &'static str) -> Pattern {
    Pattern {
        kind,
        rule,
        example,
    }
}

use CrashKind as K;
use Rule::{Contains, Prefix, PrefixContains};

/// Every report xtask knows, most specific first: the first match wins.
pub const PATTERNS: &[Pattern] = &[
    p(K::Kasan, Prefix("BUG: KASAN: "), "BUG: KASAN: slab-use-after-free in tk_free+0x2a/0x40 [tierkit]"),
    p(K::Kasan, Prefix("BUG: KFENCE: "), "BUG: KFENCE: out-of-bounds read in tk_read+0x1c/0x30 [tierkit]"),
    p(K::Ubsan, Prefix("UBSAN: "), "UBSAN: array-index-out-of-bounds in module/src/shim.c:12:9"),
    p(K::Kmemleak, Prefix("unreferenced object"), "unreferenced object 0xffff888003a1c000 (size 64):"),
    p(K::Kmemleak, PrefixContains("kmemleak: ", "new suspected memory leaks"), "kmemleak: 2 new suspected memory leaks (see /sys/kernel/debug/kmemleak)"),
    p(K::Lockdep, Prefix("WARNING: possible circular locking dependency detected"), "WARNING: possible circular locking dependency detected"),
    p(K::Lockdep, Prefix("WARNING: possible recursive locking detected"), "WARNING: possible recursive locking detected"),
    p(K::Lockdep, Prefix("WARNING: inconsistent lock state"), "WARNING: inconsistent lock state"),
    p(K::Lockdep, Prefix("WARNING: possible irq lock inversion dependency detected"), "WARNING: possible irq lock inversion dependency detected"),
    p(K::Lockdep, PrefixContains("WARNING: ", "-unsafe lock order detected"), "WARNING: HARDIRQ-safe -> HARDIRQ-unsafe lock order detected"),
    p(K::Lockdep, Prefix("WARNING: bad unlock balance detected!"), "WARNING: bad unlock balance detected!"),
    p(K::Lockdep, Prefix("WARNING: bad contention detected!"), "WARNING: bad contention detected!"),
    p(K::Lockdep, Prefix("WARNING: held lock freed!"), "WARNING: held lock freed!"),
    p(K::Lockdep, PrefixContains("WARNING: ", " still has locks held!"), "WARNING: insmod/73 still has locks held!"),
    p(K::Lockdep, Prefix("WARNING: lock held when returning to user space!"), "WARNING: lock held when returning to user space!"),
    p(K::Lockdep, Prefix("WARNING: Nested lock was not taken"), "WARNING: Nested lock was not taken"),
    p(K::Lockdep, Prefix("WARNING: chain_key collision"), "WARNING: chain_key collision"),
    p(K::Lockdep, Prefix("WARNING: suspicious RCU usage"), "WARNING: suspicious RCU usage"),
    p(K::AtomicContext, Prefix("BUG: sleeping function called from invalid context"), "BUG: sleeping function called from invalid context at kernel/locking/mutex.c:580"),
    p(K::AtomicContext, Prefix("BUG: scheduling while atomic"), "BUG: scheduling while atomic: insmod/73/0x00000002"),
    p(K::AtomicContext, Prefix("BUG: using smp_processor_id() in preemptible"), "BUG: using smp_processor_id() in preemptible [00000000] code: tk-test-task/88"),
    p(K::AtomicContext, Prefix("BUG: using __this_cpu_"), "BUG: using __this_cpu_read() in preemptible [00000000] code: insmod/73"),
    p(K::DebugObjects, Prefix("ODEBUG: "), "ODEBUG: free active (active state 0) object: ffff888004b1c0c8 object type: work_struct hint: tk_clear_worker+0x0/0x1c0 [tierkit]"),
    p(K::ListCorruption, PrefixContains("list_", " corruption. "), "list_del corruption. prev->next should be ffff888004b1c0c8, but was dead000000000100. (prev=ffff888004b1c000)"),
    p(K::RustPanic, Prefix("rust_kernel: panicked at "), "rust_kernel: panicked at module/src/wi/mod.rs:88:17:"),
    p(K::SoftLockup, Contains("BUG: soft lockup - CPU#"), "watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [kworker/1:2:91]"),
    p(K::HungTask, PrefixContains("INFO: task ", " for more than "), "INFO: task insmod:73 blocked for more than 60 seconds."),
    p(K::RcuStall, Contains(" detected stalls on CPUs/tasks"), "rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:"),
    p(K::RcuStall, Contains(" self-detected stall on CPU"), "rcu: INFO: rcu_preempt self-detected stall on CPU"),
    p(K::RcuStall, Contains(" detected expedited stalls"), "rcu: INFO: rcu_preempt detected expedited stalls on CPUs/tasks: { 1-... } 21004 jiffies s: 217 root: 0x2/."),
    p(K::WorkqueueLockup, Contains("BUG: workqueue lockup"), "BUG: workqueue lockup - pool cpus=1 node=0 flags=0x0 nice=0 stuck for 31s!"),
    p(K::Panic, Prefix("Kernel panic - not syncing"), "Kernel panic - not syncing: KASAN: panic_on_warn set ..."),
    p(K::Bug, Prefix("BUG: "), "BUG: kernel NULL pointer dereference, address: 0000000000000008"),
    p(K::Bug, Contains(": BUG: "), "watchdog: BUG: something new"),
    p(K::Bug, Prefix("kernel BUG at "), "kernel BUG at rust/helpers/bug.c:7!"),
    p(K::Oops, Prefix("Oops"), "Oops: Oops: 0000 [#1] SMP KASAN NOPTI"),
    p(K::Oops, Contains("general protection fault"), "Oops: general protection fault, probably for non-canonical address 0xdffffc0000000001: 0000 [#1] SMP KASAN NOPTI"),
    p(K::Oops, Prefix("Unable to handle kernel"), "Unable to handle kernel paging request at virtual address 0000000000000008"),
    p(K::Warning, Prefix("WARNING: "), "WARNING: module/src/wi/mod.rs:212 at tk_update+0x1b4/0x1e0 [tierkit], CPU#0: kunit_try_catch/81"),
    p(K::Other, Prefix("RIP: "), "RIP: 0010:tk_clear_chunk+0x2a/0xc0 [tierkit]"),
];

/// The report a console line starts, if any. `text` is the line without
/// its `printk` prefix.
pub fn classify(text: &str) -> Option<CrashKind> {
    let t = text.trim_start();
    PATTERNS.iter().find(|p| p.rule.matches(t)).map(|p| p.kind)
}

/// Tracks, console line by console line, whether a line belongs to what
/// the kernel prints about a fault that was injected on purpose
/// (CONFIG_FAULT_INJECTION; tk-test-faults, tk-test-lifecycle and tk-fuzz
/// arm `fail-nth`): the `FAULT_INJECTION: forcing a failure.` line and its
/// `name ...` line (`lib/fault-inject.c` `fail_dump()`), the stack
/// `fail_dump()` dumps with `verbose=2` (`CPU: ...` up to `</TASK>`), and
/// the `...: page allocation failure: ...` warning with its stack
/// (`mm/page_alloc.c` `warn_alloc()`) right after an injected page
/// allocation failure. Such a dump is a plain `dump_stack()`: its only
/// line that [`PATTERNS`] matches is the user-mode `RIP: 0033:...` of the
/// syscall that was failed, which is then not a report
/// ([`InjectedDumps::classify`]). Every other report counts wherever it
/// stands, inside such a dump too. The dump must start within
/// [`InjectedDumps::AFTER_LINES`] lines of the fault's report and ends at
/// `</TASK>` or after [`InjectedDumps::MAX_DUMP_LINES`] lines. The guest
/// tests read `/dev/kmsg` with the same machine
/// (guest/src/tests/faults/kmsg.rs `InjectedDumps`).
pub use tierkit_protocol::kmsg::InjectedDumps;

/// [`classify`] through an [`InjectedDumps`] tracker.
pub trait ClassifyInjected {
    /// [`classify`] for the next line, with the `RIP:` line of an
    /// injected fault's stack dump not a report.
    fn classify(&mut self, text: &str) -> Option<CrashKind>;
}

impl ClassifyInjected for InjectedDumps {
    fn classify(&mut self, text: &str) -> Option<CrashKind> {
        let injected = self.observe(text);
        match classify(text) {
            Some(CrashKind::Other) if injected => None,
            k => k,
        }
    }
}

/// Whether the line closes the report that is open: `---[ end trace ...]---`
/// (BUG, oops, WARNING, UBSAN) or KASAN's closing row of `=`.
pub fn ends_report(text: &str) -> bool {
    let t = text.trim();
    t.starts_with("---[ end") || (t.len() >= 40 && t.bytes().all(|b| b == b'='))
}

/// How one report continues after its first line: which kinds a second
/// marker line may belong to.
pub fn merges_into(next: CrashKind, open: CrashKind) -> bool {
    match next {
        CrashKind::Bug | CrashKind::Oops => open.absorbs_oops(),
        CrashKind::Warning => open.warns_next(),
        _ => false,
    }
}

/// Whether a line of a report explains it (`Read of size 8 at addr ...`,
/// `insmod/73 is trying to acquire lock:`, `comm "insmod", pid 73, ...`)
/// rather than being boilerplate (CPU, taint, hardware, registers, hex
/// dumps, separators).
pub fn is_detail(text: &str) -> bool {
    let t = text.trim();
    if t.is_empty() {
        return false;
    }
    const NOISE: &[&str] = &[
        "CPU: ",
        "Tainted: ",
        "Hardware name:",
        "Modules linked in",
        "------------",
        "======",
        "Code: ",
        "RSP: ",
        "RAX: ",
        "RDX: ",
        "RBP: ",
        "R10: ",
        "R13: ",
        "FS: ",
        "CS: ",
        "CR2: ",
        "PKRU: ",
        "hex dump",
        "\"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\"",
        "irq event stamp",
        "hardirqs last",
        "softirqs last",
        "Disabling lock debugging",
        "Sched_ext:",
        "#PF: ",
        "PGD ",
    ];
    if NOISE.iter().any(|n| t.starts_with(n)) || t.contains(" Tainted: ") {
        return false;
    }
    // kmemleak's hex dump rows: `00 00 00 00 ...  ................`.
    let hexish = t
        .split_whitespace()
        .take(4)
        .all(|w| w.len() == 2 && w.bytes().all(|b| b.is_ascii_hexdigit()));
    !hexish
}

/// Why a report is not a failure, if it is one of the few the kernel makes
/// about the test machinery rather than about the code under test:
///
/// - a hung task whose stack is KUnit's executor waiting for a case
///   (`kunit_try_catch_run()` in `wait_for_completion_timeout()`). insmod
///   runs the module's suites and waits for each case uninterruptibly, so a
///   case longer than the hung-task timeout (the CXL node's GiB tests, slow
///   under TCG: Documentation/results/topologies.md) makes insmod look hung. That wait is bounded by
///   KUnit's own case timeout (300 s per case, then the case fails), and
///   the case's thread is watched itself: blocked, it is a hung task of its
///   own (`kunit_try_catch`); spinning, a soft lockup or RCU stall.
pub fn not_a_failure(kind: CrashKind, call_trace: &[String]) -> Option<&'static str> {
    let in_trace = |f: &str| {
        call_trace
            .iter()
            .any(|t| t.trim_start_matches("? ").starts_with(f))
    };
    match kind {
        CrashKind::HungTask if in_trace("kunit_try_catch_run+") => Some(
            "KUnit's executor waiting for a long case (bounded by KUnit's case timeout; the case's own thread is watched)",
        ),
        _ => None,
    }
}

/// Whether a line starts a report's stack trace.
pub fn starts_trace(text: &str) -> bool {
    let t = text.trim();
    t == "Call Trace:" || t.starts_with("backtrace (crc ") || t == "backtrace:"
}

/// Frames of a report's machinery, not of the code it is about: left out
/// when a report is quoted (the parsed trace keeps them).
pub fn is_reporting_frame(frame: &str) -> bool {
    const MACHINERY: &[&str] = &[
        "? ",
        "dump_stack",
        "print_report",
        "print_address_description",
        "kasan_",
        "__kasan_",
        "__asan_",
        "ubsan_",
        "__ubsan_handle",
        "__warn",
        "warn_slowpath",
        "report_bug",
        "handle_bug",
        "exc_invalid_op",
        "asm_exc_",
        "__might_resched",
        "__might_sleep",
        "__might_fault",
        "lockdep_",
        "print_circular",
        "print_deadlock",
        "check_noncircular",
        "check_prev_add",
        "check_prevs_add",
        "validate_chain",
        "__lock_acquire",
        "lock_acquire",
        "debug_print_object",
        "__list_add_valid_or_report",
        "__list_del_entry_valid_or_report",
        "kmemleak_alloc",
        "__create_object",
        "rust_begin_unwind",
        "_RNvCs",
    ];
    let f = frame.trim();
    MACHINERY.iter().any(|m| f.starts_with(m))
}

// ---------------------------------------------------------------------------
// Phases of a run
// ---------------------------------------------------------------------------

/// Where a console line falls in the run, from the markers /init prints
/// (`guest/src/init/`): boot, CXL setup, insmod (module init and the KUnit
/// suites), each userspace test, rmmod, the kmemleak scan. The KUnit case
/// itself comes from the KTAP stream ([`crate::judge::ktap::Run::test_at_line`]).
#[derive(Clone, Debug, Default)]
pub struct Phases {
    /// (first console line, 1-based; what runs from there on).
    marks: Vec<(usize, String)>,
}

impl Phases {
    /// The phases of a whole console log.
    pub fn scan(console: &str) -> Phases {
        let mut p = Phases::default();
        for (i, line) in console.lines().enumerate() {
            p.observe(i + 1, line);
        }
        p
    }

    /// Feeds one console line (1-based `no`); returns the new phase if the
    /// line starts one.
    pub fn observe(&mut self, no: usize, line: &str) -> Option<&str> {
        let what = |kind: ProgKind| match kind {
            ProgKind::UserTest => "userspace test",
            ProgKind::Demo => "demo",
            ProgKind::Bench => "benchmark",
        };
        let label = match Marker::find(line)? {
            Marker::Boot(_) => "/init, before insmod".to_string(),
            Marker::Cxl(rest) if rest.starts_with("setup") => {
                "CXL region setup in /init".to_string()
            }
            Marker::Cxl(rest) if rest.starts_with("ready") => "/init, before insmod".to_string(),
            Marker::KmemleakBaseline => "kmemleak baseline scan before insmod".to_string(),
            Marker::Start(Step::Insmod) => {
                "insmod tierkit.ko (module init, KUnit suites)".to_string()
            }
            Marker::End {
                step: Step::Insmod, ..
            } => "after insmod".to_string(),
            Marker::Start(Step::Rmmod) => "rmmod tierkit".to_string(),
            Marker::End {
                step: Step::Rmmod, ..
            } => "after rmmod".to_string(),
            Marker::KmemleakScan => {
                "kmemleak scan after rmmod (the leak may come from any earlier phase)".to_string()
            }
            Marker::ProgStart { kind, name } => format!("{} {name}", what(kind)),
            Marker::ProgEnd { kind, name, .. } => format!("after {} {name}", what(kind)),
            _ => return None,
        };
        self.marks.push((no, label));
        self.marks.last().map(|(_, l)| l.as_str())
    }

    /// What ran at console line `no`.
    pub fn at(&self, no: usize) -> &str {
        self.marks
            .iter()
            .rev()
            .find(|(start, _)| *start <= no)
            .map_or("kernel boot, before /init", |(_, l)| l.as_str())
    }

    /// The last phase fed to [`Phases::observe`].
    pub fn current(&self) -> &str {
        self.marks
            .last()
            .map_or("kernel boot, before /init", |(_, l)| l.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_classifies_as_its_own_kind() {
        for p in PATTERNS {
            assert_eq!(classify(p.example), Some(p.kind), "{}", p.example);
            assert!(p.rule.matches(p.example), "{}", p.example);
        }
    }

    #[test]
    fn ordinary_lines_are_not_reports() {
        for l in [
            "Linux version 7.3.4 (clang version 19.1.7)",
            "kmemleak: Kernel memory leak detector initialized (mem pool available: 39000)",
            "Dynamic Preempt: unsupported mode: none",
            "TIERKIT-USERTEST-START tk-test-placement",
            "    ok 3 gigantic_on_every_node",
            "thread 'main' panicked at userspace-tests/src/bin/tk-test-diff.rs:12:5:",
            "INFO: lockdep is turned off.",
            "watchdog: Delayed init of the lockup detector failed: -19",
            "rcu: RCU CPU stall warnings timeout set to 10 (rcu_cpu_stall_timeout).",
            "hung_task: hung_task_timeout_secs=60",
            "Call Trace:",
        ] {
            assert_eq!(classify(l), None, "{l}");
        }
    }

    #[test]
    fn injected_fault_dumps_are_not_reports() {
        let mut d = InjectedDumps::default();
        let log = [
            ("FAULT_INJECTION: forcing a failure.", None),
            ("name fail_page_alloc, interval 1, probability 0, space 0, times 0", None),
            ("CPU: 1 UID: 0 PID: 90 Comm: tk-test-lifecyc Tainted: G O N 7.3.4 #1", None),
            ("Call Trace:", None),
            (" <TASK>", None),
            (" dump_stack_lvl+0x5d/0x80", None),
            ("RIP: 0033:0x7f8d28fa6b99", None),
            (" </TASK>", None),
            ("tk-test-faults: page allocation failure: order:0, mode:0xcc0(GFP_KERNEL), nodemask=(null)", None),
            ("CPU: 1 UID: 0 PID: 90 Comm: tk-test-faults", None),
            ("RIP: 0033:0x7f8d28fa6b99", None),
            (" </TASK>", None),
            ("Mem-Info:", None),
            ("active_anon:0 inactive_anon:0", None),
            ("somebody else", None),
            ("more", None),
            ("RIP: 0010:tk_bad+0x1/0x2 [tierkit]", Some(CrashKind::Other)),
        ];
        for (l, want) in log {
            assert_eq!(d.classify(l), want, "{l}");
        }
        // A real report inside an injected fault's dump still counts.
        let mut d = InjectedDumps::default();
        d.classify("FAULT_INJECTION: forcing a failure.");
        d.classify("CPU: 0 UID: 0 PID: 1");
        assert_eq!(
            d.classify("BUG: KASAN: slab-use-after-free in f+0x1/0x2"),
            Some(CrashKind::Kasan)
        );
        // A stack dump with no fault before it: its RIP counts.
        let mut d = InjectedDumps::default();
        d.classify("CPU: 0 UID: 0 PID: 1");
        assert_eq!(d.classify("RIP: 0033:0x1"), Some(CrashKind::Other));
    }

    #[test]
    fn leading_white_space_is_ignored() {
        assert_eq!(
            classify("   WARNING: inconsistent lock state"),
            Some(CrashKind::Lockdep)
        );
    }

    #[test]
    fn report_ends_and_merges() {
        assert!(ends_report("---[ end trace 0000000000000000 ]---"));
        assert!(ends_report(
            "=================================================================="
        ));
        assert!(!ends_report("====="));
        assert!(merges_into(CrashKind::Oops, CrashKind::Bug));
        assert!(merges_into(CrashKind::Bug, CrashKind::RustPanic));
        assert!(merges_into(CrashKind::Warning, CrashKind::DebugObjects));
        assert!(!merges_into(CrashKind::Warning, CrashKind::Bug));
        assert!(!merges_into(CrashKind::Panic, CrashKind::Kasan));
        assert!(!merges_into(CrashKind::Kasan, CrashKind::Bug));
    }

    #[test]
    fn details_and_frames() {
        assert!(is_detail(
            "Read of size 8 at addr ffff888004b1c008 by task kunit_try_catch/95"
        ));
        assert!(is_detail("  comm \"insmod\", pid 73, jiffies 4294893296"));
        assert!(!is_detail(
            "CPU: 0 UID: 0 PID: 95 Comm: kunit_try_catch Tainted: G O N 7.3.4 #1"
        ));
        assert!(!is_detail(
            "    6b 6b 6b 6b 6b 6b 6b 6b 6b 6b 6b 6b 6b 6b 6b 6b  kkkkkkkkkkkkkkkk"
        ));
        assert!(!is_detail("      Tainted: G           O     N  7.3.4 #1"));
        assert!(starts_trace("  backtrace (crc 5f1e2d3c):"));
        assert!(is_reporting_frame("kasan_report+0xb9/0xf0"));
        assert!(is_reporting_frame("? __die+0x23/0x70"));
        assert!(!is_reporting_frame(
            "_RNvNtCsk3Xh8yTfu0D_7tierkit5clear11clear_chunk+0x2a/0xc0 [tierkit]"
        ));
    }

    #[test]
    fn only_kunits_own_wait_is_not_a_failure() {
        let executor: Vec<String> = [
            "schedule_timeout+0xae/0x1c0",
            "wait_for_completion_timeout+0x172/0x300",
            "kunit_try_catch_run+0x14c/0x650",
            "kunit_run_case_catch_errors+0x18d/0x450",
        ]
        .map(String::from)
        .to_vec();
        assert!(not_a_failure(CrashKind::HungTask, &executor).is_some());
        // The case's thread blocked in the module: a failure.
        let case: Vec<String> = [
            "__mutex_lock+0x8e1/0x1370",
            "_RNvNtCs1_7tierkit3dev4lock+0x4d/0x1f0 [tierkit]",
            "kunit_try_run_case+0x1a6/0x2e0",
            "kunit_generic_run_threadfn_adapter+0x7c/0xe0",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(not_a_failure(CrashKind::HungTask, &case), None);
        assert_eq!(not_a_failure(CrashKind::SoftLockup, &executor), None);
        assert_eq!(not_a_failure(CrashKind::Warning, &executor), None);
    }

    #[test]
    fn phases_follow_the_markers() {
        let log = "\
[    0.1] Linux version 7.3.4
[    1.0] TIERKIT-BOOT mode=test kernel=7.3.4 cpus=2
[    1.1] TIERKIT-INSMOD-START
[    1.2] KTAP version 1
[    2.0] TIERKIT-INSMOD rc=0
[    2.1] TIERKIT-USERTEST-START tk-test-diff
hello from userspace
[    2.5] TIERKIT-USERTEST tk-test-diff rc=0
[    3.0] TIERKIT-RMMOD-START
[    3.1] TIERKIT-RMMOD rc=0
[    3.2] TIERKIT-KMEMLEAK-SCAN
unreferenced object 0xffff888003a1c000 (size 64):
";
        let p = Phases::scan(log);
        assert_eq!(p.at(1), "kernel boot, before /init");
        assert_eq!(p.at(2), "/init, before insmod");
        assert_eq!(p.at(4), "insmod tierkit.ko (module init, KUnit suites)");
        assert_eq!(p.at(7), "userspace test tk-test-diff");
        assert_eq!(p.at(8), "after userspace test tk-test-diff");
        assert_eq!(p.at(9), "rmmod tierkit");
        assert!(p.at(12).starts_with("kmemleak scan after rmmod"));
        assert_eq!(p.current(), p.at(12));
    }
}
