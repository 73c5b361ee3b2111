//! Where /init's reports go: every marker is a printk record (written to
//! `/dev/kmsg`, so that it is ordered with the kernel's own output) and a
//! line on the data channel (`/dev/ttyS1`, a file on the host, where the
//! programs' output goes too); in tests, both are kept in memory.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;

/// printk level of markers (`KERN_NOTICE`).
pub const MARK_LEVEL: u8 = 5;
/// printk level of the objects kmemleak reports (`KERN_ERR`).
pub const LEAK_LEVEL: u8 = 3;

/// The data channel.
pub const DATA_TTY: &str = "/dev/ttyS1";

/// The two channels.
#[derive(Debug, Default)]
pub struct Out {
    kmsg: Option<File>,
    data: Option<File>,
    /// Tests: every line logged, and the data channel's bytes.
    recording: bool,
    pub lines: Vec<String>,
    pub data_bytes: Vec<u8>,
}

fn open_write(path: &str) -> Option<File> {
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(path)
        .ok()
}

impl Out {
    /// The guest's `/dev/kmsg` and `/dev/ttyS1` (either may be missing:
    /// its lines are then dropped, as `2>/dev/null` did).
    pub fn guest() -> Out {
        Out {
            kmsg: open_write("/dev/kmsg"),
            data: open_write(DATA_TTY),
            ..Out::default()
        }
    }

    /// Keeps everything in memory (host tests).
    pub fn recording() -> Out {
        Out {
            recording: true,
            ..Out::default()
        }
    }

    /// A marker line on both channels.
    pub fn mark(&mut self, line: &str) {
        self.log(MARK_LEVEL, line);
    }

    /// `line` as a printk record of `level` and on the data channel.
    pub fn log(&mut self, level: u8, line: &str) {
        if let Some(k) = &mut self.kmsg {
            // One write, one record; /dev/kmsg refuses a record over 1024
            // bytes whole (EINVAL), so a longer line is cut there on the
            // console (the data channel keeps it whole).
            let _ = k.write_all(format!("<{level}>{}\n", kmsg_cut(line)).as_bytes());
        }
        self.data(format!("{line}\n").as_bytes());
        if self.recording {
            self.lines.push(line.to_string());
        }
    }

    /// Whether there is a data channel to copy programs' output to.
    pub fn has_data(&self) -> bool {
        self.data.is_some() || self.recording
    }

    /// Bytes of a program's output on the data channel.
    pub fn data(&mut self, b: &[u8]) {
        if let Some(d) = &mut self.data {
            let _ = d.write_all(b);
        }
        if self.recording {
            self.data_bytes.extend_from_slice(b);
        }
    }
}

/// Bytes of a line /dev/kmsg takes in one record with its `<N>` prefix and
/// newline (`PRINTKRB_RECORD_MAX` is 1024).
const KMSG_LINE_MAX: usize = 1000;

/// `line` cut to [`KMSG_LINE_MAX`] bytes on a character boundary.
fn kmsg_cut(line: &str) -> &str {
    if line.len() <= KMSG_LINE_MAX {
        return line;
    }
    let mut end = KMSG_LINE_MAX;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

#[cfg(test)]
mod kmsg_cut_tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_on_a_char_boundary() {
        assert_eq!(kmsg_cut("short"), "short");
        let long = "é".repeat(KMSG_LINE_MAX);
        let cut = kmsg_cut(&long);
        assert!(cut.len() <= KMSG_LINE_MAX && cut.len() >= KMSG_LINE_MAX - 1);
        assert!(long.starts_with(cut));
    }
}
