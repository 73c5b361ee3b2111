//! The logic of `tk-fuzz`; what it does and how it is used are the doc of
//! `src/bin/tk-fuzz.rs` (its `--help`).

use crate::harness::report::Report;
use crate::tests::fuzz::{checked_run, Config};
use clap::Parser;
use std::process::ExitCode;

/// Random calls against /dev/tierkit and tierkit's debugfs files.
#[derive(Parser, Debug)]
#[command(
    name = "tk-fuzz",
    version,
    after_help = "Reproducing: a seed fixes every worker's calls (worker P.T draws from its own \
stream, each call from a sub-stream), not how workers interleave: results on shared files \
(EBUSY, a policy another worker set, the weights at the time), fd numbers and where \
--seconds stops a worker vary. Rerun with the printed command; --only P.T replays one \
worker's calls alone, which reproduces whatever did not need another worker."
)]
struct Args {
    /// Seed (decimal or 0x hex); default: a fresh one, printed.
    #[arg(long, value_parser = parse_u64)]
    seed: Option<u64>,
    /// Fuzzed syscalls in total, split over the workers.
    #[arg(long, default_value_t = 100_000)]
    calls: u64,
    /// Time bound in seconds: workers start no call after it; the time a
    /// worker's scheduled races take is added to its bound.
    #[arg(long, default_value_t = 300.0)]
    seconds: f64,
    /// Threads per process.
    #[arg(long, default_value_t = 3)]
    threads: u32,
    /// Processes (forked; they share the files opened before the fork).
    #[arg(long, default_value_t = 2)]
    procs: u32,
    /// GiB-sized calls (gigantic mmap, one-range clear benchmark) worker
    /// 0.0 may make.
    #[arg(long, default_value_t = 0)]
    big: u32,
    /// Replay only worker P.T's calls, alone in this process.
    #[arg(long, value_parser = parse_worker)]
    only: Option<(u32, u32)>,
    /// Leave the debugfs weight files alone (read them only).
    #[arg(long)]
    no_debugfs_writes: bool,
    /// Make no scheduled races (THP flips during faults, stop signals
    /// during paced rebalances, pipes and rings outliving their files,
    /// offlines during mmap and bulk calls).
    #[arg(long)]
    no_races: bool,
    /// Fail unless at least this many calls were made.
    #[arg(long, default_value_t = 0)]
    min_calls: u64,
}

fn parse_u64(s: &str) -> Result<u64, String> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    }
    .map_err(|e| format!("{s:?}: {e}"))
}

fn parse_worker(s: &str) -> Result<(u32, u32), String> {
    let (p, t) = s.split_once('.').ok_or("expected P.T, e.g. 1.2")?;
    Ok((
        p.parse().map_err(|e| format!("{p:?}: {e}"))?,
        t.parse().map_err(|e| format!("{t:?}: {e}"))?,
    ))
}

fn fresh_seed() -> u64 {
    let mut x = crate::linux::sys::monotonic_ns() ^ (u64::from(std::process::id()) << 40);
    crate::tests::fuzz::splitmix64(&mut x)
}

pub fn main() -> ExitCode {
    crate::tests::fuzz::race_child_if_asked();
    let a = Args::parse();
    let mut r = Report::new("tk-fuzz", "test");
    let cfg = Config {
        seed: a.seed.unwrap_or_else(fresh_seed),
        calls: a.calls,
        seconds: a.seconds,
        threads: a.threads.max(1),
        procs: a.procs.max(1),
        big: a.big,
        only: a.only,
        debugfs_writes: !a.no_debugfs_writes,
        races: !a.no_races,
    };
    if let Some((p, t)) = cfg.only {
        if p >= cfg.procs || t >= cfg.threads {
            r.fail(
                "arguments",
                format!(
                    "--only {p}.{t} is not a worker of {} x {}",
                    cfg.procs, cfg.threads
                ),
            );
            return r.finish();
        }
    }
    checked_run(&mut r, &cfg, a.min_calls);
    r.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers() {
        assert_eq!(parse_u64("0x10"), Ok(16));
        assert_eq!(parse_u64("10"), Ok(10));
        assert!(parse_u64("x").is_err());
        assert_eq!(parse_worker("1.2"), Ok((1, 2)));
        assert!(parse_worker("12").is_err());
        let a = Args::parse_from(["tk-fuzz", "--seed", "0xff", "--only", "0.1"]);
        assert_eq!(
            (a.seed, a.only, a.calls),
            (Some(255), Some((0, 1)), 100_000)
        );
    }
}
