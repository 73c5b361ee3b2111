// SPDX-License-Identifier: GPL-2.0

//! Per-socket weights in the kernel: which socket the calling CPU is on,
//! which nodes a socket's CPUs are on, and `TK_IOC_SOCKET_WEIGHTS`.
//!
//! The tables and the rule that picks one ([`crate::socket`]) are pure and
//! host-tested in `module/core/src/socket.rs`. A socket is a CPU package:
//! `topology_physical_package_id()` of a CPU.

use crate::interleave::{self, Nodemask, Weights};
use crate::shim::{self, node};
use crate::socket::{check_table, Levels, SocketError, SocketWeights, MAX_SOCKETS};
use crate::uapi::{self, TkSocketWeights};
use crate::wi::{cpuset_mems, memory_nodes, possible_nodes, Mode, Policy, Wi};
use kernel::{
    ffi::c_int,
    prelude::*,
    transmute::{AsBytes, FromBytes},
};

// SAFETY: `TkSocketWeights` is `repr(C)` with only integer fields and no
// padding (4 * 4 + 8 + 2 * 4 + 64 bytes): every bit pattern is valid.
unsafe impl FromBytes for TkSocketWeights {}
// SAFETY: as above, no padding and no interior mutability.
unsafe impl AsBytes for TkSocketWeights {}

impl From<SocketError> for Error {
    fn from(e: SocketError) -> Error {
        match e {
            SocketError::UnknownSocket => ENOENT,
            SocketError::SizeMismatch | SocketError::ZeroSum => EINVAL,
            SocketError::NoMemory => ENXIO,
        }
    }
}

/// The socket (package id) of `cpu`, `None` for an offline CPU.
fn cpu_socket(cpu: c_int) -> Option<usize> {
    // SAFETY: no precondition: the shim range-checks `cpu` and checks that
    // it is online.
    let pkg = unsafe { shim::tk_cpu_package(cpu) };
    usize::try_from(pkg).ok()
}

/// The socket of the CPU running this call, read once: the allocation
/// that follows places by this socket's table even if the task is migrated
/// meanwhile. `None` for a package id tierkit cannot name (`>=
/// MAX_SOCKETS`): then no table applies.
pub(crate) fn this_socket() -> Option<usize> {
    let cpu = kernel::cpu::CpuId::current().as_u32();
    cpu_socket(c_int::try_from(cpu).ok()?).filter(|&s| s < MAX_SOCKETS)
}

/// The nodes with an online CPU of `socket` (walks every online CPU of
/// every node once; nodes are at most 64).
pub(crate) fn socket_cpu_nodes(socket: usize) -> Nodemask {
    let mut mask = Nodemask::EMPTY;
    for nid in 0..possible_nodes() {
        if node::nr_cpus(nid) == 0 {
            continue;
        }
        let Ok(c_nid) = c_int::try_from(nid) else {
            continue;
        };
        let mut cpu: c_int = -1;
        loop {
            // SAFETY: `nid` is online (it has online CPUs), as the shim
            // requires.
            cpu = unsafe { shim::tk_node_next_cpu(c_nid, cpu) };
            if cpu < 0 || cpu as u32 >= kernel::cpu::nr_cpu_ids() {
                break;
            }
            if cpu_socket(cpu) == Some(socket) {
                mask = mask.with(nid);
                break;
            }
        }
    }
    mask
}

impl Wi {
    /// A snapshot of the device-wide per-socket tables.
    pub(crate) fn sockets(&self) -> SocketWeights {
        *self.sockets.lock()
    }
}

/// Where an allocation runs, read once at the start of the call that
/// allocates: the socket of its CPU, the nodes its task's cpuset allows,
/// and the nodes with memory then.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Caller {
    /// [`this_socket`].
    pub(crate) socket: Option<usize>,
    /// [`cpuset_mems`].
    pub(crate) mems: Nodemask,
    /// [`memory_nodes`].
    pub(crate) memory: Nodemask,
}

impl Caller {
    /// The calling task, now.
    pub(crate) fn current() -> Caller {
        Caller {
            socket: this_socket(),
            mems: cpuset_mems(),
            memory: memory_nodes(),
        }
    }
}

impl Policy {
    /// The nodes and weights an allocation by `at` places by under this
    /// policy, over the policy's mask cut to the caller's cpuset
    /// ([`interleave::cpuset_nodemask`]): for weighted interleave,
    /// [`Levels::pick`] over the file's tables (`file`), its own flat
    /// weights, the device's tables and the global table (`wi`, read now);
    /// for plain interleave, every weight 1.
    pub(crate) fn placement(&self, file: &SocketWeights, wi: &Wi, at: Caller) -> (Nodemask, Weights) {
        let mask = interleave::cpuset_nodemask(self.mask, at.mems, at.memory);
        if self.mode == Mode::Interleave {
            return (mask, Weights::new());
        }
        let device = wi.sockets();
        Levels {
            file,
            file_flat: self.own,
            device: &device,
            global: wi.weights(),
        }
        .pick(at.socket, mask)
    }

    /// The address-path selector for an allocation by `at`: the selector
    /// of [`Policy::placement`]'s nodes and weights.
    pub(crate) fn placed_selector(
        &self,
        file: &SocketWeights,
        wi: &Wi,
        at: Caller,
    ) -> Result<crate::interleave::Selector> {
        let (mask, weights) = self.placement(file, wi, at);
        // Never empty: the policy's mask is not, and `pick` keeps it.
        crate::interleave::Selector::new(mask, &weights).ok_or(EINVAL)
    }
}

/// `TK_IOC_SOCKET_WEIGHTS` on a checked argument, against `file` (the open
/// file's tables; `mapped`: the file is mapped) or the device's, whose
/// changes need `admin()` to pass (`CAP_SYS_ADMIN`). Fills the argument's
/// outputs. See `uapi::TkSocketWeights`.
pub(crate) fn socket_weights_ioctl(
    a: &mut TkSocketWeights,
    wi: &Wi,
    file: &mut SocketWeights,
    mapped: bool,
    admin: impl FnOnce() -> Result,
) -> Result {
    if a.flags & !uapi::TK_SOCKET_F_DEVICE != 0 || a.op > uapi::TK_SOCKET_CLEAR {
        return Err(EINVAL);
    }
    let socket = a.socket as usize;
    let cpu_nodes = if socket < MAX_SOCKETS {
        socket_cpu_nodes(socket)
    } else {
        Nodemask::EMPTY
    };
    if cpu_nodes.is_empty() {
        return Err(ENOENT);
    }
    let device = a.flags & uapi::TK_SOCKET_F_DEVICE != 0;
    if a.op != uapi::TK_SOCKET_GET {
        if device {
            admin()?;
        } else if mapped {
            return Err(EBUSY);
        }
    }
    let nr_node_ids = node::nr_node_ids();
    let mut dev_tables = wi.sockets.lock();
    let tables: &mut SocketWeights = if device { &mut dev_tables } else { file };
    match a.op {
        uapi::TK_SOCKET_SET => {
            check_table(&a.weights, a.nr_nodes, nr_node_ids, memory_nodes())?;
            tables.set(socket, a.weights)?;
        }
        uapi::TK_SOCKET_CLEAR => tables.clear(socket),
        _ => {}
    }
    let table = tables.get(socket).copied();
    drop(dev_tables);
    a.has_table = u32::from(table.is_some());
    a.weights = table.unwrap_or([0; crate::interleave::MAX_NUMNODES]);
    a.nr_nodes = u32::try_from(nr_node_ids).unwrap_or(u32::MAX);
    a.cpu_nodes = cpu_nodes.0;
    a.this_socket = this_socket().map_or(-1, |s| s as i32);
    Ok(())
}
