//! The machine's memory topology: its nodes ([`node`]), CXL regions
//! ([`cxl`]), sockets ([`sockets`]) and the firmware's per-initiator
//! figures ([`hmat`]), the weight files of the kernel and of tierkit
//! ([`weights`]), and where each page of a weighted interleave should land
//! ([`interleave`]).

pub mod cxl;
pub mod hmat;
pub mod interleave;
pub mod node;
pub mod sockets;
pub mod weights;
