//! tk-test-lifecycle: unloading and loading tierkit, over and over, with
//! and without its files held, and with faults injected into the load.
//!
//! - `CYCLES` cycles (`DEBUG_CYCLES` on the debug kernel, where KASAN and
//!   kmemleak catch at once what many cycles show the default kernel) of
//!   `delete_module(2)` + `finit_module(2)` of
//!   `/lib/modules/tierkit.ko`. Every cycle checks that the loaded module
//!   works (open, `TK_IOC_SET_POLICY`, a mapping that reads zero, its
//!   debugfs files) and that an unloaded one left nothing behind
//!   (/proc/modules, /dev/tierkit, /sys/kernel/debug/tierkit). Some cycles
//!   hold something across the `delete_module(O_NONBLOCK)`: an open
//!   `/dev/tierkit`, a live mapping of it whose fd is closed, an open
//!   `/sys/kernel/debug/tierkit/stats`, an open weight file. The unload
//!   must then be refused (`EWOULDBLOCK`, or `EBUSY`; delete_module(2)),
//!   the module must still work, and the unload must succeed once the
//!   file is closed or the mapping unmapped. (A debugfs file open across
//!   an unload once let the unload succeed, and the close then oopsed.
//!   Should an unload succeed with a debugfs file held, this test
//!   fails and hands the file to a child that keeps it open, so that the
//!   close does not take the guest down with it.)
//! - Fault injection into the load (`fail-nth`, as tk-test-faults): for N
//!   = 1, 2, ...: `finit_module` with the Nth allocation failing. Each
//!   failed load must leave the module not loaded, with an errno
//!   `finit_module(2)` documents for it, and memory given back. The sweep
//!   ends at the first N whose fault lands after tierkit's init returned
//!   (the kernel's module notifiers, e.g. KUnit's suite filter, whose own
//!   failure message the harness counts as a KUnit error), or at the first
//!   load without an injected fault. Where each fault landed comes from the
//!   stack `fail_dump()` prints with `verbose=2` (a plain `dump_stack()`,
//!   nothing the harness reads as a crash): inside the init
//!   (`do_one_initcall`) or after it (the module notifier chain, KUnit's
//!   suite filter). A fault in that filter makes KUnit print `kunit module:
//!   error filtering suites: -12`, which the harness would count as a KUnit
//!   failure; so during this sweep the console prints only log levels 0-2
//!   (`/proc/sys/kernel/printk`, put back after), and the test reads every
//!   step's messages from `/dev/kmsg` itself and fails on any BUG, WARNING,
//!   oops or KUnit error, except that one message after a fault injected
//!   into KUnit's filter.
//! - Each `finit_module` would run all of tierkit's KUnit suites (about
//!   25 s under TCG): KUnit's `filter_glob` parameter is writable at run
//!   time (lib/kunit/executor.c, 0600) and `kunit_module_init()` filters
//!   with it at every load, so the test sets it to a glob no suite matches
//!   and puts it back afterwards (an unset parameter reads `(null)` and is
//!   put back as `*.*`, what KUnit uses when it is unset).
//!
//! At the end tierkit is loaded again with the weight table as /init set it
//! (bandwidth, auto, weights, compared), and every node's free memory is
//! within 1% of the start.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::lifecycle::main()
}
