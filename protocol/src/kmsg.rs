// SPDX-License-Identifier: GPL-2.0

//! What the kernel prints, read line by line: shared by the harness (the
//! serial console, xtask/src/judge/console.rs) and the guest tests (`/dev/kmsg`,
//! guest/src/tests/faults/kmsg.rs).

/// Tracks, line by line, whether kernel messages belong to the report of
/// an injected fault: the `FAULT_INJECTION: forcing a failure.` line and
/// its `name ...` line (`lib/fault-inject.c` `fail_dump()`), the stack
/// dump `fail_dump()` prints with `verbose=2` (`CPU: ...` up to
/// `</TASK>`), and the `...: page allocation failure: ...` warning
/// (`mm/page_alloc.c` `warn_alloc()`) with its stack dump that follows an
/// injected page allocation failure. A dump must start within
/// [`InjectedDumps::AFTER_LINES`] lines of the fault's report and is at
/// most [`InjectedDumps::MAX_DUMP_LINES`] lines long. Used on the serial console by
/// xtask/src/judge/console.rs and on `/dev/kmsg` by guest/src/tests/faults/kmsg.rs.
#[derive(Clone, Copy, Debug, Default)]
pub struct InjectedDumps {
    state: DumpState,
}

#[derive(Clone, Copy, Debug, Default)]
enum DumpState {
    #[default]
    Idle,
    /// After a fault's report: a dump may start within this many lines.
    After(u32),
    /// In a dump, this many lines in.
    InDump(u32),
}

impl InjectedDumps {
    /// Lines after a fault's report (or its dump) within which a dump of
    /// it may start.
    pub const AFTER_LINES: u32 = 4;
    /// Longest dump (a stack trace with KASAN's and lockdep's frames and
    /// the user-mode registers).
    pub const MAX_DUMP_LINES: u32 = 120;

    /// Feeds one message line; true if it belongs to an injected fault's
    /// report.
    pub fn observe(&mut self, line: &str) -> bool {
        let t = line.trim();
        if t.contains("FAULT_INJECTION: forcing a failure") {
            self.state = DumpState::After(Self::AFTER_LINES);
            return true;
        }
        match self.state {
            DumpState::Idle => false,
            DumpState::After(k) => {
                if t.starts_with("name ") {
                    true
                } else if t.starts_with("CPU: ") || t.contains(": page allocation failure: ") {
                    self.state = DumpState::InDump(0);
                    true
                } else {
                    self.state = if k > 1 {
                        DumpState::After(k - 1)
                    } else {
                        DumpState::Idle
                    };
                    false
                }
            }
            DumpState::InDump(n) => {
                if t.starts_with("</TASK>") {
                    // warn_alloc() may follow fail_dump()'s own dump.
                    self.state = DumpState::After(Self::AFTER_LINES);
                    true
                } else if n >= Self::MAX_DUMP_LINES {
                    self.state = DumpState::Idle;
                    false
                } else {
                    self.state = DumpState::InDump(n + 1);
                    true
                }
            }
        }
    }
}
