//! tk-test-stress: the bounded stress run, in the suite on every topology:
//! 15 s of concurrent mappers (with threads racing close and munmap
//! against population), weight, auto and bandwidth writes, clears on every
//! node at once, and on the cxl topology memory blocks going offline and
//! online; then the checks of [`tierkit_guest::tools::stress`].

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::stress::main()
}
