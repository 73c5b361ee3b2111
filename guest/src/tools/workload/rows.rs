//! The rows of the benchmark report ([`Row`]): the definition is the
//! `tierkit-rows` crate (`userspace-tests/rows`), which xtask's report
//! reads too.

pub use tierkit_rows::*;
