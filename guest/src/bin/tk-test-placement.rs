//! tk-test-placement: every page tierkit's mmap hands out sits on the node
//! the kernel's `weighted_interleave_nid` (mm/mempolicy.c) picks for its
//! ilx, and is zero; and bad inputs are refused.
//!
//! For each weight set of `crate::topology::interleave::weight_sets` (the worked example's {3,1}
//! on DRAM and the first memory-only node, 255s, single-node masks): write
//! the weights to tierkit's weight files, `TK_IOC_SET_POLICY`, mmap
//! `/dev/tierkit` MAP_SHARED at a page offset, touch nothing, ask
//! `move_pages(2)` (nodes = NULL) where each page is, compare page by page
//! with tierkit-core's reference walk for ilx = offset + i, then read every
//! byte. Also: `/sys/kernel/debug/tierkit/stats` counts the pages, and
//! gives them back when the file is gone; MPOL_INTERLEAVE mode; the
//! effective nodemask; MAP_PRIVATE, an empty mask, a bad mode and bad
//! weights are refused with EINVAL and leave the old weight in place.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::placement::main()
}
