//! tk-run: run an unmodified, dynamically linked program with tierkit's
//! placement (Documentation/dev-tools/tk-run.md).
//!
//!   tk-run [--weights auto|measured|per-socket|N:W[,N:W...]]
//!          [--socket-weights S=N:W[,N:W...][;S=...]] [--threshold SIZE]
//!          [--gigantic [--pool N]] [--calibration FILE] [--lib PATH]
//!          [--verbose] -- PROGRAM [ARGS...]
//!
//! Anonymous private mmaps and malloc chunks of at least SIZE (default 2M)
//! come from /dev/tierkit, placed by weighted interleave with these weights
//! for this program alone (a per-file policy: no global weight table is
//! written). `--weights auto` (the default): tierkit's auto weights from
//! the firmware's bandwidth (HMAT/CDAT access1); `measured`: those of
//! tk-calibrate's saved result (`--calibration`, default
//! /tmp/tierkit-calibration.json); `N:W,...`: these nodes and weights;
//! `per-socket`: one table per socket (CPU package) from HMAT's bandwidth
//! from that socket's CPUs, each allocation placed by the table of the
//! socket it runs on (the flat weights, `auto`'s, for a socket without
//! one). `--socket-weights S=N:W,...;S=...`: tables by hand (sockets
//! 0..7, nodes among --weights' own), replacing those sockets' HMAT tables.
//! `--gigantic`: chunks of 1 GiB or more (rounded up to whole GiBs) are
//! tierkit's gigantic pages, cleared by its workers at first touch (needs
//! CAP_SYS_ADMIN); without `--weights` they go to the local node.
//! `--pool N`: first keep N pre-cleared GiBs ready on each node they use.
//! `--verbose`: the resolved weights on one line before the program
//! starts, and from the library one line per gigantic range at each fork
//! (shared copy-on-write, or copied for the child).
//! The library is `--lib` (default /lib/tierkit/libtkrun.so), set in
//! LD_PRELOAD; children of the program inherit it.
//!
//! Exit status: the program's; 2 for a refused flag or setting (one line
//! on stderr, before the program starts); 127 if it cannot be started.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tools::run::main()
}
