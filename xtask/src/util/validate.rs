//! Checks of the command line's values, run before anything is built,
//! booted or tested: clap's value parsers of `--timeout`, `--cpu`,
//! `--filter` and `--append`, the host's memory, and POSIX shell quoting
//! for the commands xtask writes down (`qemu-cmd.txt`).
//!
//! Each check returns one line saying why, without the flag's name: clap
//! (or [`crate::cli`]'s `validate`) puts the flag in front.

use std::borrow::Cow;
use tierkit_protocol::param;

/// x86's `COMMAND_LINE_SIZE` (arch/x86/include/asm/setup.h), the NUL
/// included: a longer kernel command line is cut off without a word.
pub const KERNEL_CMDLINE_MAX: usize = 2048 - 1;

/// The longest `--timeout`: a week. (A larger one would overflow the
/// deadline's `Instant`.)
pub const TIMEOUT_MAX_SECS: u64 = 7 * 24 * 3600;

/// `--timeout SECS`: whole seconds, 1 to [`TIMEOUT_MAX_SECS`].
pub fn parse_timeout(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.strip_prefix('+').unwrap_or(t);
    if t.starts_with('-') && t.len() > 1 && t[1..].chars().all(|c| c.is_ascii_digit()) {
        return Err(format!(
            "{t} is negative: give whole seconds from 1 to {TIMEOUT_MAX_SECS} (a week)"
        ));
    }
    if !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit())
        && digits.parse::<u64>().is_err()
    {
        return Err(format!(
            "{t} s is more than a week ({TIMEOUT_MAX_SECS} s), the longest xtask waits for a guest"
        ));
    }
    let n: u64 = t.parse().map_err(|_| {
        "not a whole number of seconds (e.g. 600; the guest is killed after that long)".to_string()
    })?;
    if n == 0 {
        return Err("0 seconds would kill the guest at once: give at least 1".into());
    }
    if n > TIMEOUT_MAX_SECS {
        return Err(format!(
            "{n} s is more than a week ({TIMEOUT_MAX_SECS} s), the longest xtask waits for a guest"
        ));
    }
    Ok(n)
}

/// A whole number from `lo` to `hi`, or one line why not: negative, not
/// a number, or out of the range, however many digits (clap's own integer
/// parsers say `invalid digit found in string` and `number too large to
/// fit in target type`, and take `-1` for a flag).
pub fn parse_whole(s: &str, lo: u64, hi: u64) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.strip_prefix('+').unwrap_or(t);
    let all_digits = |x: &str| !x.is_empty() && x.chars().all(|c| c.is_ascii_digit());
    if t.strip_prefix('-').is_some_and(all_digits) {
        return Err(format!("{t} is negative, not in {lo}..={hi}"));
    }
    if !all_digits(digits) {
        return Err(format!("not a whole number: give one in {lo}..={hi}"));
    }
    match digits.parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!("{digits} is not in {lo}..={hi}")),
    }
}

/// `--cpus N`: 1 to 8 (`CONFIG_NR_CPUS=8` in kconfig/base.config).
pub fn parse_cpus(s: &str) -> Result<u32, String> {
    parse_whole(s, 1, 8).map(|n| n as u32)
}

/// `test --repeat N`: 1 to 1000 rounds.
pub fn parse_repeat(s: &str) -> Result<u32, String> {
    parse_whole(s, 1, 1000).map(|n| n as u32)
}

/// `--cpu MODEL`: a QEMU `-cpu` value, one word (`max`, `max,erms=off`).
pub fn parse_cpu_model(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        return Err("empty: give a QEMU CPU model, e.g. max or max,erms=off".into());
    }
    if let Some(c) = s.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{} in a CPU model: QEMU's -cpu takes one word, e.g. max or max,erms=off",
            describe_char(c)
        ));
    }
    if matches!(s, "help" | "?") || s.starts_with("help,") {
        return Err("QEMU would list its CPU models and exit instead of booting: run `qemu-system-x86_64 -cpu help` for the list".into());
    }
    Ok(s.to_string())
}

/// `--filter GLOB`: one glob that the kernel command line can carry
/// (`kunit.filter_glob=GLOB tierkit.filter=GLOB`). An empty one passes
/// here: its refusal names an example of what the command selects, which
/// only the command knows (`crate::cli`'s checks).
pub fn parse_filter(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Ok(String::new());
    }
    if s.split(',').any(str::is_empty) {
        return Err("an empty glob: a comma at either end or two in a row".into());
    }
    check_filter(s).map(|()| s.to_string())
}

/// A test selection (`--filter`, or a run's own) as a kernel parameter's
/// value: not empty, no space (it would end the parameter), no double
/// quote (the kernel's quoting), no control character.
pub fn check_filter(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("empty: give a glob of the tests to select".into());
    }
    if let Some(c) = s
        .chars()
        .find(|&c| c.is_whitespace() || c.is_control() || c == '"')
    {
        return Err(format!(
            "{} cannot be carried: the glob goes on the kernel command line (kunit.filter_glob=, tierkit.filter=), where spaces end a parameter and quotes join them",
            describe_char(c)
        ));
    }
    Ok(())
}

/// `--append ARGS`: kernel parameters the command line can carry.
pub fn parse_append(s: &str) -> Result<String, String> {
    check_append(s).map(|()| s.to_string())
}

/// The parameters xtask sets itself, each from what sets it: a second
/// value in `--append` would contradict the first (which of the two /init
/// or KUnit reads is no contract), so it is refused with the flag to use.
/// Other `tierkit.*` words (`tierkit.bench=`, `tierkit.run_args=`) are the
/// guest programs' own and pass, as do kernel parameters xtask sets
/// before `--append` so that a later one wins (`memhp_default_state=`,
/// `init_on_alloc=`).
const OWN_PARAMS: [(&str, &str); 7] = [
    (
        param::MODE,
        "the command (run, test, bench, run -- CMD, shell)",
    ),
    (param::FILTER, "--filter"),
    (
        param::SKIP,
        "the boot's own selection (xtask/src/plan/runs.rs)",
    ),
    (param::CXL, "--cxl-dev and --cxl-interleave"),
    (param::PROFILE, "--profile"),
    (param::DEADLINE_SCALE, "--topology and --profile"),
    (param::KUNIT_FILTER, "--filter"),
];

/// Kernel command-line words of `--append` (or a run's own): some text,
/// balanced double quotes (the kernel's only quoting: an open quote takes
/// the rest of the line, tierkit's own parameters too, into one value), no
/// NUL, newline or other control character, neither `quiet` (it hides
/// KTAP output) nor `kunit_shutdown` (it powers off before the module's
/// suites run), and none of xtask's own parameters ([`OWN_PARAMS`]).
pub fn check_append(s: &str) -> Result<(), String> {
    if s.trim().is_empty() {
        return Err("empty: give kernel parameters, e.g. 'foo=1 bar'".into());
    }
    if let Some(c) = s.chars().find(|&c| c.is_control() && c != '\t') {
        return Err(format!(
            "{}: the kernel command line is one line of text",
            describe_char(c)
        ));
    }
    if s.chars().filter(|&c| c == '"').count() % 2 == 1 {
        return Err("unbalanced double quote: the kernel would read the rest of its command line (tierkit's parameters too) as part of this value; close it, e.g. foo=\"a b\"".into());
    }
    if s.split_whitespace()
        .any(|w| w == "quiet" || w.starts_with("kunit_shutdown"))
    {
        return Err(
            "`quiet` hides KTAP output and `kunit_shutdown` powers off before the module's suites run"
                .into(),
        );
    }
    for w in s.split_whitespace() {
        let name = w.split('=').next().unwrap_or(w);
        if let Some((p, by)) = OWN_PARAMS.iter().find(|(p, _)| *p == name) {
            return Err(format!(
                "`{p}=` is xtask's own, set from {by}: give that instead of a second value"
            ));
        }
    }
    Ok(())
}

/// A character for an error message: `a space`, `a newline`, `'"'`.
fn describe_char(c: char) -> String {
    match c {
        ' ' => "a space".into(),
        '\t' => "a tab".into(),
        '\n' => "a newline".into(),
        '\r' => "a carriage return".into(),
        '\0' => "a NUL byte".into(),
        '"' => "a double quote (\")".into(),
        c if c.is_control() || c.is_whitespace() => format!("the character U+{:04X}", c as u32),
        c => format!("`{c}`"),
    }
}

/// What the host offers a guest: its memory, and the working directory
/// `run -- CMD` and `shell` share with it.
#[derive(Clone, Debug, Default)]
pub struct Host {
    /// `MemTotal` of `/proc/meminfo`, whole GiB (rounded down); `None`:
    /// unknown, not checked.
    pub mem_total_gib: Option<u64>,
    /// The current directory; `None`: it cannot be read (deleted, no
    /// permission), and a command that shares it is refused.
    pub cwd: Option<std::path::PathBuf>,
    /// Whether stdin is a terminal: `shell` reads a person's keys from it,
    /// and with a pipe or a file the guest's shell would wait for input
    /// that never comes.
    pub stdin_is_terminal: bool,
}

impl Host {
    /// This machine.
    pub fn this() -> Host {
        Host {
            mem_total_gib: std::fs::read_to_string("/proc/meminfo")
                .ok()
                .and_then(|t| parse_meminfo_gib(&t, "MemTotal")),
            cwd: std::env::current_dir().ok(),
            stdin_is_terminal: std::io::IsTerminal::is_terminal(&std::io::stdin()),
        }
    }
}

/// The `KEY:  N kB` line of a `/proc/meminfo` text, in whole GiB.
pub fn parse_meminfo_gib(meminfo: &str, key: &str) -> Option<u64> {
    let kb: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kb >> 20)
}

/// One argument for a POSIX shell (`sh`, `bash`, `dash`): as is when it
/// needs no quoting, else quoted so that the shell reads it back exactly.
/// A NUL byte cannot be passed to a program at all; it is shown as `\0`
/// inside the quotes (the copy is for reading, and will not run).
pub fn shell_quote(arg: &str) -> Cow<'_, str> {
    match shlex::try_quote(arg) {
        Ok(q) => q,
        Err(_) => {
            let q = shlex::try_quote(&arg.replace('\0', "\\0"))
                .map(|q| q.into_owned())
                .unwrap_or_else(|_| "''".to_string());
            Cow::Owned(q)
        }
    }
}

/// A command line for a POSIX shell: each word [`shell_quote`]d.
pub fn shell_join<'a>(words: impl IntoIterator<Item = &'a str>) -> String {
    words
        .into_iter()
        .map(shell_quote)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_refuses_zero_junk_and_too_long() {
        assert_eq!(parse_timeout("600"), Ok(600));
        assert_eq!(parse_timeout("1"), Ok(1));
        assert!(parse_timeout("0").unwrap_err().contains("at least 1"));
        assert!(parse_timeout("").is_err());
        assert!(parse_timeout("-5").is_err());
        assert!(parse_timeout("10s").is_err());
        assert!(parse_timeout(&u64::MAX.to_string()).is_err());
        assert!(parse_timeout(&(TIMEOUT_MAX_SECS + 1).to_string()).is_err());
        assert_eq!(
            parse_timeout(&TIMEOUT_MAX_SECS.to_string()),
            Ok(TIMEOUT_MAX_SECS)
        );
    }

    #[test]
    fn cpu_model_is_one_word() {
        assert_eq!(
            parse_cpu_model("max,erms=off").as_deref(),
            Ok("max,erms=off")
        );
        for bad in ["", " ", "max erms", "max\n", "help", "?"] {
            assert!(parse_cpu_model(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn filter_refuses_what_the_command_line_cannot_carry() {
        for ok in [
            "tierkit_topology.*",
            "tk-test-cxl,tk-test-block-offline",
            "tierkit_[!g]*",
            "a'b",
        ] {
            assert_eq!(parse_filter(ok).as_deref(), Ok(ok));
        }
        // An empty one is the command's to refuse, with its own example.
        assert_eq!(parse_filter("").as_deref(), Ok(""));
        assert!(check_filter("").unwrap_err().contains("empty"));
        assert!(parse_filter("a b").unwrap_err().contains("a space"));
        assert!(parse_filter("a\"b").unwrap_err().contains("double quote"));
        assert!(parse_filter("a\tb").unwrap_err().contains("a tab"));
        assert!(parse_filter("a\nb").unwrap_err().contains("newline"));
        assert!(parse_filter("a\0b").unwrap_err().contains("NUL"));
    }

    #[test]
    fn append_refuses_unbalanced_quotes_control_characters_and_quiet() {
        for ok in [
            "foo=1",
            "foo=\"a b\" bar",
            "dyndbg=\"module tierkit +p\"",
            "a=\"x\" b=\"y\"",
            "x\ty",
        ] {
            assert_eq!(parse_append(ok).as_deref(), Ok(ok), "{ok:?}");
        }
        assert!(parse_append("foo=\"bar")
            .unwrap_err()
            .contains("unbalanced"));
        assert!(parse_append("a=\"x\" b=\"y")
            .unwrap_err()
            .contains("unbalanced"));
        assert!(parse_append("foo=1\nbar").unwrap_err().contains("newline"));
        assert!(parse_append("foo=\0").unwrap_err().contains("NUL"));
        assert!(parse_append("").unwrap_err().contains("empty"));
        assert!(parse_append("   ").unwrap_err().contains("empty"));
        assert!(parse_append("quiet").is_err());
        assert!(parse_append("a kunit_shutdown=halt").is_err());
    }

    #[test]
    fn meminfo() {
        let t = "MemTotal:       24558172 kB\nMemFree:  1 kB\nMemAvailable:   12582912 kB\n";
        assert_eq!(parse_meminfo_gib(t, "MemTotal"), Some(23));
        assert_eq!(parse_meminfo_gib(t, "MemAvailable"), Some(12));
        assert_eq!(parse_meminfo_gib("MemFree: 1 kB\n", "MemTotal"), None);
        assert_eq!(parse_meminfo_gib("MemTotalX: 1 kB\n", "MemTotal"), None);
    }

    /// What `sh` reads back from `line`: its words, one per line.
    fn sh_words(line: &str) -> Vec<String> {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("for a in {line}; do printf '%s\\n' \"$a\"; done"))
            .output()
            .expect("sh runs");
        assert!(out.status.success(), "{line}: {out:?}");
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn shell_quoting_round_trips_through_sh() {
        let words = [
            "qemu-system-x86_64",
            "-append",
            "console=ttyS0 foo=\"bar baz\" it's",
            "'",
            "''",
            "a'b\"c",
            "$HOME",
            "`id`",
            "back\\slash",
            "semi;colon&amp|pipe",
            "*",
            "~",
            "",
            "tab\there",
            "-M",
            "cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G",
        ];
        let line = shell_join(words);
        assert_eq!(sh_words(&line), words);
        // Plain words stay readable.
        assert_eq!(shell_quote("-nodefaults"), "-nodefaults");
        assert_eq!(shell_quote("file:/r/data.log"), "file:/r/data.log");
        // A NUL cannot be passed on; it still gives one quoted word.
        assert_eq!(sh_words(&shell_quote("a\0b")), ["a\\0b"]);
    }
}
