//! Stage five, the reports: they only write what the judge decided. The
//! terminal summary, `results.json` and JUnit ([`summary`]), KCIDB
//! ([`kcidb`]), the slowest tests ([`timings`]) and the benchmark charts
//! and report ([`bench`]).

pub mod bench;
pub mod kcidb;
pub mod summary;
pub mod timings;
