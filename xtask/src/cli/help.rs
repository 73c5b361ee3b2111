//! The help of the flags whose meaning or default differs by command
//! (`--timeout`, `--filter`), written from the values the code uses, and
//! the parser of the command line that carries it.

use clap::{CommandFactory, FromArgMatches};
use std::ffi::OsString;

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

#[cfg(test)]
mod tests;
