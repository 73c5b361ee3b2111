//! `--help` and `-h` for every binary in `src/bin/`: [`crate::help!`]
//! prints the binary's module doc (its `//!` lines) on stdout and exits 0
//! before the binary does anything else. One line at the top of `main`:
//!
//! ```ignore
//! fn main() -> ExitCode {
//!     crate::help!();
//!     ...
//! }
//! ```
//!
//! The doc is cut from the source at compile time ([`doc_len`],
//! [`doc_bytes`]), so a binary carries its doc and not its whole source.
//! `tk-fuzz` and `tk-stress` parse with clap, which answers `--help` itself.

use std::io::Write;

/// Prints the binary's module doc and exits 0 when its arguments ask for
/// help (`--help` or `-h`, before any `--`); returns otherwise.
#[macro_export]
macro_rules! help {
    () => {{
        const SRC: &str = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/bin/",
            env!("CARGO_BIN_NAME"),
            ".rs"
        ));
        const DOC: [u8; $crate::harness::help::doc_len(SRC)] =
            $crate::harness::help::doc_bytes(SRC);
        $crate::harness::help::answer(
            env!("CARGO_BIN_NAME"),
            &DOC,
            std::env::args_os()
                .skip(1)
                .map(|a| a.to_string_lossy().into_owned()),
        );
    }};
}

/// Bytes of the leading `//!` lines of `src` (their newlines included).
pub const fn doc_len(src: &str) -> usize {
    let b = src.as_bytes();
    let mut i = 0;
    while i + 3 <= b.len() && b[i] == b'/' && b[i + 1] == b'/' && b[i + 2] == b'!' {
        while i < b.len() && b[i] != b'\n' {
            i += 1;
        }
        if i < b.len() {
            i += 1;
        }
    }
    i
}

/// The first `N` bytes of `src` (`N` = [`doc_len`]).
pub const fn doc_bytes<const N: usize>(src: &str) -> [u8; N] {
    let b = src.as_bytes();
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = b[i];
        i += 1;
    }
    out
}

/// Do `args` (without the program name) ask for help?
pub fn wants_help<I: IntoIterator<Item = S>, S: AsRef<str>>(args: I) -> bool {
    args.into_iter()
        .map(|a| a.as_ref().to_string())
        .take_while(|a| a != "--")
        .any(|a| a == "--help" || a == "-h")
}

/// The usage text of `bin` from its module doc: the `//!` lines without
/// their prefix; the binary's name first.
pub fn usage(bin: &str, doc: &[u8]) -> String {
    let doc = String::from_utf8_lossy(doc);
    let mut s = String::new();
    for l in doc.lines() {
        let l = l.strip_prefix("//!").unwrap_or(l);
        s.push_str(l.strip_prefix(' ').unwrap_or(l));
        s.push('\n');
    }
    let s = s.trim().to_string();
    if s.starts_with(bin) {
        s + "\n"
    } else {
        format!("{bin}: {s}\n")
    }
}

/// [`crate::help!`]'s work: when `args` ask for help, prints
/// [`usage`] on stdout and exits 0.
pub fn answer<I: IntoIterator<Item = S>, S: AsRef<str>>(bin: &str, doc: &[u8], args: I) {
    if !wants_help(args) {
        return;
    }
    let mut out = std::io::stdout().lock();
    // A closed stdout (`| head`) is no reason to fail.
    let _ = out.write_all(usage(bin, doc).as_bytes());
    let _ = out.flush();
    std::process::exit(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "//! tk-x: does x.\n//!\n//! Flags: `--y`.\nuse std::x;\n//! not doc\n";

    #[test]
    fn doc_is_the_leading_doc_lines() {
        const N: usize = doc_len(SRC);
        const D: [u8; N] = doc_bytes(SRC);
        assert_eq!(
            std::str::from_utf8(&D).unwrap(),
            "//! tk-x: does x.\n//!\n//! Flags: `--y`.\n"
        );
        assert_eq!(doc_len("use x;\n//! a\n"), 0);
        assert_eq!(doc_len("//! a"), 5);
        assert_eq!(doc_len(""), 0);
    }

    #[test]
    fn usage_strips_prefixes_and_names_the_binary() {
        let d = doc_bytes::<{ doc_len(SRC) }>(SRC);
        assert_eq!(usage("tk-x", &d), "tk-x: does x.\n\nFlags: `--y`.\n");
        assert_eq!(usage("tk-z", b"//! Does z.\n"), "tk-z: Does z.\n");
        assert_eq!(usage("tk-z", b""), "tk-z: \n");
    }

    #[test]
    fn help_flags() {
        assert!(wants_help(["--help"]));
        assert!(wants_help(["5", "-h"]));
        assert!(!wants_help(["--", "--help"]));
        assert!(!wants_help(["--helpful", "-hh", "5"]));
        assert!(!wants_help(Vec::<String>::new()));
    }
}
