//! tk-fuzz: tierkit's syscall fuzzer (see `crate::tests::fuzz`), for
//! runs by hand in the guest:
//!
//! ```text
//! tk-fuzz                                  # 100000 calls, a fresh seed
//! tk-fuzz --seed 0x1234 --calls 1000000 --seconds 600 --procs 4 --threads 4
//! tk-fuzz --seed 0x1234 --only 1.2         # replay worker 1.2's calls alone
//! ```
//!
//! It prints the seed and the command that repeats the run, one line per
//! check and a `TIERKIT-JSON` summary, puts tierkit's weight table back, and
//! exits 1 if any check failed. `tk-test-fuzz` runs it with fixed bounds in
//! `cargo xtask test`.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::tools::fuzz::main()
}
