//! What every guest program reports with: its result lines and summary
//! ([`report`]), `--help` from the binary's doc ([`help`]), and a seeded
//! random source ([`rng`]). It needs nothing else of the crate.

pub mod help;
pub mod report;
pub mod rng;
