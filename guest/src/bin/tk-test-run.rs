//! tk-test-run: tk-run on unmodified, dynamically linked programs
//! (Documentation/dev-tools/tk-run.md): bad flags refused before the
//! program starts; the triad's malloc'd arrays placed page by page as the
//! weights say (move_pages on its pid), with no global weight table
//! touched; the same arrays under `numactl --weighted-interleave` and the
//! kernel's weights set alike (THP off), side by side; what tkrun-check
//! does to its memory (realloc across the threshold, mremap, partial
//! munmap, MAP_FIXED, fork, threads) behaving as anonymous memory; and
//! `--gigantic`: a 1 GiB malloc is one gigantic range, every byte zero;
//! `--weights auto`: the kernel's auto (HMAT) weights, the triad placed by
//! them; `--gigantic --pool 1`: the first touch served from the pool.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::run::main()
}
