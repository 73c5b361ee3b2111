//! The three workload kernels of `tk-workload`.
//!
//! **Lookup, XSBench-style** (written from the algorithm of Tramm et al.,
//! "XSBench - The Development and Verification of a Performance
//! Abstraction for Monte Carlo Reactor Analysis", PHYSOR 2014; no code
//! copied). N nuclides each have G energy gridpoints (sorted random
//! energies in [0, 1)) with five cross sections each. The **unionized
//! energy grid** holds all N·G energies sorted, and for every union point
//! and nuclide the index of that nuclide's gridpoint at or below the union
//! energy. A lookup draws a random energy and a random material (12
//! materials, the fuel holding half of the nuclides, drawn with fixed
//! probabilities), finds the energy in the union grid by **binary
//! search**, and for each nuclide of the material reads its index, the
//! two bracketing gridpoints, interpolates the five cross sections and
//! adds them, weighted by the nuclide's concentration, into the
//! macroscopic cross sections. Memory: N·G·48 bytes of gridpoints, N·G·8
//! of union energies and N·G·N·4 of indices, almost all of it touched at
//! random: latency-bound. Threads draw independently; lookups/s counts
//! them all. The first lookups of each thread are hashed (the index of
//! the largest macroscopic cross section), so that every placement can be
//! checked to compute the same results.
//!
//! **Bandwidth, STREAM-style**: arrays a, b, c of n doubles; copy
//! `c = a`, scale `b = s·c`, add `c = a + b`, triad `a = b + s·c`; each
//! thread its own contiguous part; MB/s counted as STREAM does (16, 16,
//! 24, 24 bytes per element); each chunk's best time over the timed
//! blocks ([`ChunkMins`]); results checked.
//!
//! **Faults, will-it-scale page_fault2-style**: each thread maps a private
//! mapping of its own shared-memory file, writes one byte per page (a
//! copy-on-write fault that allocates an anonymous page under the
//! thread's memory policy), unmaps, and again; faults/s summed over the
//! threads. And pages/s delivered to userspace: tierkit's `mmap` (every
//! page allocated at once) against the kernel faulting page by page and
//! the kernel's batched `MAP_POPULATE`.
//!
//! Here: [`ChunkMins`], which the lookup and bandwidth kernels share; the
//! kernels in `lookup.rs`, `stream.rs` and `fault.rs`.

use super::{fmt_pages, part, run_threads, run_threads_settled, Region, Rng, SendPtr};
use crate::abi::tk::{Tierkit, TK_MODE_WEIGHTED_INTERLEAVE};
use crate::linux::sys::{self, monotonic_ns, Mapping, PAGE_SIZE};
use anyhow::{bail, Context, Result};

mod fault;
mod lookup;
mod stream;

pub use fault::*;
pub use lookup::*;
pub use stream::*;

#[cfg(test)]
mod tests;

/// The best time of each chunk of a repeated piece of work.
///
/// Every timed block of a measurement does the same work in the same
/// order (the same lookups, the same array slices, the same pointer
/// chase), timed chunk by chunk (about 0.1 to a few ms each). Interference
/// from the rest of the machine (another process on the CPU, or, for a
/// guest, the host descheduling the vCPU) only ever makes a chunk slower,
/// so the least time of each chunk over the blocks, summed, is the time
/// of the whole work with the interference removed at chunk granularity:
/// on a shared host a whole block of 0.1 s is rarely left alone, while
/// each 0.1 ms chunk is in some block. The same estimator serves every
/// policy and node, so figures stay comparable with each other and with
/// the model's inputs. A block that did less work (a deadline-bound one)
/// counts on the chunks it shares with the others.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChunkMins {
    mins: Vec<u64>,
}

impl ChunkMins {
    /// Merges one block's chunk times (ns, in order).
    pub fn add(&mut self, times: &[u64]) {
        if self.mins.is_empty() {
            self.mins = times.to_vec();
            return;
        }
        self.mins.truncate(times.len());
        for (m, &t) in self.mins.iter_mut().zip(times) {
            if t < *m {
                *m = t;
            }
        }
    }

    /// Chunks with a time.
    pub fn len(&self) -> usize {
        self.mins.len()
    }

    /// Whether no block was added.
    pub fn is_empty(&self) -> bool {
        self.mins.is_empty()
    }

    /// Σ of the best chunk times, ns (at least 1 when there are chunks).
    pub fn total_ns(&self) -> u64 {
        if self.mins.is_empty() {
            0
        } else {
            self.mins.iter().sum::<u64>().max(1)
        }
    }
}
