//! tierkit's pure algorithms, with no dependency on the `kernel` crate.
//!
//! Every file under `src/` except this one is also compiled into `tierkit.ko`
//! (see `module/src/tierkit.rs`, which includes them with `#[path]`;
//! `tests/compiled_into_module.rs` checks it), so these
//! files use `core::` only, allocate nothing, and carry no crate-level
//! attributes. On the host they are tested with proptest against plain
//! reference models written straight from the kernel's code.
#![no_std]

#[cfg(test)]
extern crate std;

pub mod chunks;
pub mod interleave;
pub mod nodemask;
pub mod pace;
pub mod pool_cmd;
pub mod socket;
pub mod uapi;
pub mod weights;
pub mod wi_table;
