//! tk-test-stress: the bounded stress run, in the suite on every topology:
//! 15 s of concurrent mappers (with threads racing close and munmap
//! against population), weight, auto and bandwidth writes, clears on every
//! node at once, and on the cxl topology memory blocks going offline and
//! online; then the checks of [`userspace_tests::stress`].

use std::process::ExitCode;
use userspace_tests::read_topology;
use userspace_tests::report::Report;
use userspace_tests::stress::{run, Config};

fn main() -> ExitCode {
    userspace_tests::help!();
    let mut r = Report::new("tk-test-stress", "test");
    let Some(topo) = read_topology(&mut r) else {
        return r.finish();
    };
    run(&mut r, &topo, &Config::suite());
    r.finish()
}
