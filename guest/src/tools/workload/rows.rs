//! The rows of the benchmark report ([`Row`]): the definition is the
//! protocol crate's `rows` (`protocol/src/rows.rs`), which xtask's report
//! reads too.

pub use tierkit_protocol::rows::*;
