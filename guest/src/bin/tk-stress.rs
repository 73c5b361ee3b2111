//! tk-stress: the stress run of `tk-test-stress`, longer and configurable,
//! for runs by hand in a guest:
//! `tk-stress --seconds 300 --seed 0x1234 --no-offline`.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::tools::stress::main()
}
