//! What the guest programs need of Linux itself: the syscall layer
//! ([`sys`]), what the running kernel says about itself ([`kernel`]:
//! command-line parameters, debugfs, THP), errno names ([`errno`]),
//! memory blocks ([`memblock`]), what holds a node's
//! aligned GiBs ([`pageflags`]), mappings and `/proc` memory figures
//! ([`vma`]), and cgroup v2 ([`cgroup`]).

pub mod cgroup;
pub mod errno;
pub mod kernel;
pub mod memblock;
pub mod pageflags;
pub mod sys;
pub mod vma;
