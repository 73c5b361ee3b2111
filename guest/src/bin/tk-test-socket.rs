//! tk-test-socket: per-socket weights (`TK_IOC_SOCKET_WEIGHTS`) against
//! tierkit-core's model (`tierkit_core::socket`), on any topology; the
//! checks that need two sockets skip on one (run it on `--topology socket2`).
//!
//! - Each socket as `TK_SOCKET_GET` reports it: its CPU nodes as sysfs
//!   shows them (`cpulist`, `physical_package_id`), the caller's socket
//!   while pinned to one of its CPUs, `nr_node_ids`.
//! - Two device-wide table sets (local nodes only 3:1, the RFC's; and all
//!   nodes 6:2:3:1, the socket2 HMAT figures reduced): for a thread pinned
//!   to each socket, every page of a mapping, 40 task steps and a bulk
//!   split of 100 pages, against the model.
//! - A thread that moves to the other socket between two mappings of one
//!   file (consecutive offsets) and between task steps: each page by its
//!   socket's table at its ilx, the first mapping's pages unmoved, the task
//!   state carried over.
//! - A file's own table beats the device's; a nodemask without the local
//!   socket's nodes places as today (the global weights over the mask).
//! - Every socket's table equal to the global weights: each socket's pages
//!   exactly as without tables, and as today's weighted interleave.
//! - Bad inputs, each with its errno and the table unchanged: unknown
//!   socket (ENOENT), size mismatch, zero table, bad op or flag (EINVAL), a
//!   weight on a node without memory (ENXIO, where there is one), a mapped
//!   file's table (EBUSY).
//! - `TK_IOC_REBALANCE` to new weights of a mapped file whose own table
//!   names only the socket's CPU node: the file's tables go and every page
//!   moves where the new weights put it (none would move were the table kept).
//! - In a cgroup v2 cpuset without socket 0's memory-only node (where the
//!   kernel has cpusets: Debian's): with the device's tables (6:2:3:1, and
//!   socket 0's naming only that node), a file made outside the cpuset and
//!   used inside it, pinned to each socket: every page, task step and bulk
//!   page as the model over the file's nodes the cpuset allows (a table
//!   with no node left is passed over).
//! - HMAT as parsed here (`guest/src/topology/hmat.rs`): each memory node's best
//!   initiator figure equal to the kernel's `access0`.
//! - An unmodified program (`tkrun-check -g 4`) under `tk-run --weights
//!   per-socket` and under `--socket-weights` (each socket its own nodes
//!   3:1), pinned to each socket: every page of its block where the model
//!   puts it for that socket's table; the sockets' pages differ. Each bad
//!   tk-run input: exit 2, one line, the program not started.
//! - A short `tk-calibrate --per-socket`: one measured table per socket,
//!   and `tk-run --weights per-socket:measured` placing by them; run again
//!   without `--no-write`, each table is the device's for its socket (read
//!   back, then the device tables and tierkit's weights put back).
//! - Socket 1's memory-only node offline whole (where it is all online
//!   ZONE_MOVABLE: socket2 on Debian's kernel, a hot-pluggable DIMM), with
//!   the device's tables naming it: the node leaves `N_MEMORY` and its
//!   weight files go; a new file pinned to each socket places every page,
//!   task step and bulk page as the model over the nodes with memory (both
//!   table sets); a file table naming the node is ENXIO; a file whose
//!   policy was set before keeps the node: from socket 1 mmap and bulk are
//!   ENOMEM and the task path still returns it, from socket 0 (local-only
//!   tables) the pages are as before the offline. Online again
//!   (online_movable): the weight back, and socket 1's pages, a new file's
//!   and the old file's, as its whole table.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::socket::main()
}
