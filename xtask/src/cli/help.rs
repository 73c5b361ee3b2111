//! The help of the flags whose meaning or default differs by command
//! (`--timeout`, `--filter`), written from the values the code uses, the
//! parser of the command line that carries it, and clap's refusals as one
//! line (naming, for a flag the command lacks, the commands that take it).

use clap::{CommandFactory, FromArgMatches};
use std::ffi::OsString;
use std::process::ExitCode;

use super::flags::Cli;
use crate::boot::{BENCH_TIMEOUT_SECS, TIMEOUT_SECS};
use crate::kernels::profile::Profile;
use crate::plan::topology::TOPOLOGIES;

/// The commands that boot a guest, whose `--timeout` and `--filter` help
/// is their own.
pub const BOOTING: [&str; 4] = ["run", "shell", "test", "bench"];

/// The glob dialect of `--filter`, as every command that takes it says.
const DIALECT: &str = "comma-separated globs in the kernel's dialect (`*`, `?`, \
`[a-z]`, `[!g]`, `\\x`); each glob must select something, checked before anything is built";

/// `--timeout`'s help for the command `cmd` (of [`BOOTING`]).
pub fn timeout_help(cmd: &str) -> String {
    if cmd == "shell" {
        return "Kill the guest after this many seconds [default: none: a person's shell has no timeout]".into();
    }
    let base = if cmd == "bench" {
        BENCH_TIMEOUT_SECS
    } else {
        TIMEOUT_SECS
    };
    let mut slower: Vec<String> = TOPOLOGIES
        .iter()
        .filter(|t| t.timeout_factor > 1)
        .map(|t| format!("times {} with --topology {}", t.timeout_factor, t.name))
        .collect();
    slower.extend(
        [Profile::Default, Profile::Debug]
            .into_iter()
            .filter(|p| p.timeout_factor() > 1)
            .map(|p| format!("times {} with --profile {}", p.timeout_factor(), p.name())),
    );
    format!(
        "Kill the guest after this many seconds [default: {base}, {}]",
        slower.join(", ")
    )
}

/// `--filter`'s help for `cmd` (of [`BOOTING`]); `None`: the command
/// selects nothing (`shell`, `bench`), which refuse the flag, and its
/// help leaves it out.
pub fn filter_help(cmd: &str) -> Option<String> {
    match cmd {
        "test" => Some(format!(
            "Only run the matching tests: {DIALECT}. Against KUnit's `suite` or `suite.case` \
             (the one glob that selects KUnit cases goes to `kunit.filter_glob=`), the userspace \
             tests' names (`tk-test-*`) and the `xtask-*` tests"
        )),
        "run" => Some(format!(
            "Only run the matching demos (`tk-demo*`), and with --kunit the matching KUnit \
             suites or cases (`suite` or `suite.case`): {DIALECT}. Not with `run -- CMD`, which \
             runs only the command"
        )),
        _ => None,
    }
}

/// The whole command line's definition: clap's, with each booting
/// command's own `--timeout` and `--filter` help.
pub fn command() -> clap::Command {
    let mut c = Cli::command();
    for name in BOOTING {
        c = c.mut_subcommand(name, |s| {
            let t = timeout_help(name);
            let s = s.mut_arg("timeout", |a| a.help(t.clone()).long_help(t));
            match filter_help(name) {
                Some(f) => s.mut_arg("filter", |a| a.help(f.clone()).long_help(f)),
                None => s.mut_arg("filter", |a| a.hide(true)),
            }
        });
    }
    c
}

/// Parses `args` (the program name first) with [`command`].
pub(super) fn parse<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let mut m = command().try_get_matches_from(args)?;
    Cli::from_arg_matches_mut(&mut m)
}

/// What clap refused, in one line (`error: invalid value '9' for '--cpus
/// <N>': 9 is not in 1..=8`, `error: unexpected argument '--ful' found
/// (did you mean '--full'?)`), exit code 2. `--help`, `--version` and a
/// command line without a command print clap's help instead.
pub(super) fn clap_refusal(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
        _ => {
            eprintln!("error: {}", clap_error_line(&e));
            ExitCode::from(2)
        }
    }
}

/// The first line of clap's message, without `error: `, with the possible
/// values (which clap puts on lines of their own) at its end.
pub(super) fn clap_error_line(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    let mut line = first.strip_prefix("error: ").unwrap_or(first).to_string();
    // `the following required arguments were not provided:`: name them.
    if let Some(ContextValue::Strings(missing)) = e.get(ContextKind::InvalidArg) {
        if line.ends_with(':') {
            line = format!("{line} {}", missing.join(", "));
        }
    }
    // clap quotes the value as given; a newline in it would split the line.
    if let (Some(ContextValue::String(arg)), Some(ContextValue::String(value))) = (
        e.get(ContextKind::InvalidArg),
        e.get(ContextKind::InvalidValue),
    ) {
        if !value.chars().any(char::is_control) {
            return with_possible_values(line, e);
        }
        let value: String = value
            .chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect();
        line = format!("invalid value '{value}' for '{arg}'");
        if let Some(why) = std::error::Error::source(e) {
            line.push_str(&format!(": {why}"));
        }
    }
    with_possible_values(line, e)
}

/// `line`, and the possible values of `e`'s flag if clap knows them, or
/// the flag or command clap suggests instead of an unknown one.
fn with_possible_values(mut line: String, e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    for kind in [ContextKind::SuggestedArg, ContextKind::SuggestedSubcommand] {
        match e.get(kind) {
            Some(ContextValue::String(s)) => line.push_str(&format!(" (did you mean '{s}'?)")),
            Some(ContextValue::Strings(v)) if !v.is_empty() => {
                line.push_str(&format!(" (did you mean '{}'?)", v.join("' or '")))
            }
            _ => {}
        }
    }
    if let Some(ContextValue::Strings(v)) = e.get(ContextKind::ValidValue) {
        if !v.is_empty() {
            line.push_str(&format!(" (possible values: {})", v.join(", ")));
        }
    }
    if let (clap::error::ErrorKind::UnknownArgument, Some(ContextValue::String(arg))) =
        (e.kind(), e.get(ContextKind::InvalidArg))
    {
        if let Some(cmds) = commands_with_flag(arg) {
            line.push_str(&format!(" ('{}' is a flag of {cmds})", flag_name(arg)));
        }
    }
    line
}

/// `--kunit` of `--kunit=x`.
fn flag_name(arg: &str) -> &str {
    arg.split_once('=').map_or(arg, |(f, _)| f)
}

/// The commands that take the long flag `arg` (`run`, `run and test`),
/// when the command it was given to does not: so that `test --kunit` says
/// it is `run`'s, not only that it is unknown.
fn commands_with_flag(arg: &str) -> Option<String> {
    let long = flag_name(arg).strip_prefix("--")?;
    let cmds: Vec<String> = command()
        .get_subcommands()
        .filter(|c| {
            c.get_arguments()
                .any(|a| !a.is_hide_set() && a.get_long() == Some(long))
        })
        .map(|c| format!("`{}`", c.get_name()))
        .collect();
    match cmds.as_slice() {
        [] => None,
        [one] => Some(one.clone()),
        [rest @ .., last] => Some(format!("{} and {last}", rest.join(", "))),
    }
}

#[cfg(test)]
mod tests;
