//! tk-stress: the stress run of `tk-test-stress`, longer and configurable,
//! for runs by hand in a guest:
//! `tk-stress --seconds 300 --seed 0x1234 --no-offline`.

use clap::Parser;
use std::process::ExitCode;
use std::time::Duration;
use userspace_tests::read_topology;
use userspace_tests::report::Report;
use userspace_tests::stress::{run, Config};

/// The stress run: concurrent mappers, weight writes, clears and memory
/// blocks going offline.
#[derive(Parser)]
struct Args {
    /// Wall time of the concurrent phase, in seconds.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// The seed (decimal or 0x hex); default from the clock.
    #[arg(long, value_parser = parse_u64)]
    seed: Option<u64>,
    /// Rounds per mapper at most.
    #[arg(long, default_value_t = 200)]
    map_rounds: u32,
    /// Clears per node at most.
    #[arg(long, default_value_t = 3)]
    clear_rounds: u32,
    /// Largest mapping, in 4 KiB pages (at least 17).
    #[arg(long, default_value_t = 1024)]
    max_pages: usize,
    /// Do not offline memory blocks.
    #[arg(long)]
    no_offline: bool,
    /// Time limit of each block offline/online, in seconds.
    #[arg(long, default_value_t = 20)]
    offline_limit: u64,
}

fn parse_u64(s: &str) -> Result<u64, String> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    }
    .map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let a = Args::parse();
    let mut r = Report::new("tk-stress", "test");
    let Some(topo) = read_topology(&mut r) else {
        return r.finish();
    };
    let cfg = Config {
        seconds: a.seconds,
        map_rounds: a.map_rounds,
        clear_rounds: a.clear_rounds,
        max_pages: a.max_pages.max(17),
        offline: !a.no_offline,
        offline_limit: Duration::from_secs(a.offline_limit),
        seed: a.seed,
        weight_rounds: u32::MAX,
        ..Config::suite()
    };
    run(&mut r, &topo, &cfg);
    r.finish()
}
