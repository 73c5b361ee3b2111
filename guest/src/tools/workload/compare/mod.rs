//! `tk-workload`'s comparison of placement policies (see its doc): the
//! settings, the policies ([`Policy`]) and the context every run shares
//! ([`Ctx`]: the calibration, the topology, the weights); each kernel run
//! under every policy, with its rows and checks, in `lookup.rs`,
//! `stream.rs` and `fault.rs`.

mod fault;
mod lookup;
mod stream;

pub use fault::*;
pub use lookup::*;
pub use stream::*;

use crate::harness::report::Report;
use crate::linux::sys::{self, PAGE_SIZE};
use crate::tools::workload;
use crate::tools::workload::calib::Chase;
use crate::tools::workload::calib::{Calibration, Workload};
use crate::tools::workload::kernels::{
    self, deliver, lookup_rate, page_fault2, run_lookups, Bw, ChunkMins, Delivery, Stream,
    TaskPolicy, XsData, XsParams,
};
use crate::tools::workload::rows::{self, Row};
use crate::tools::workload::{amounts_of, fmt_pages, fmt_size, in_guest, Placement, Region};
use crate::topology::node::{nodes_of, Topology};
use crate::topology::weights::WeightDir;
use anyhow::{anyhow, Context, Result};
use serde_json::json;
use tierkit_protocol::model;

#[derive(Clone, Debug)]
pub struct Settings {
    pub threads: usize,
    pub fault_threads: usize,
    pub duration: f64,
    pub lookup_size: usize,
    pub stream_size: usize,
    pub fault_size: usize,
    pub map_size: usize,
    pub nuclides: usize,
    pub reps: usize,
    pub rounds: usize,
}

impl Settings {
    pub fn defaults() -> Settings {
        if in_guest() {
            Settings {
                threads: 1,
                fault_threads: 0,
                duration: 0.2,
                lookup_size: 32 << 20,
                stream_size: 8 << 20,
                fault_size: 2 << 20,
                map_size: 8 << 20,
                nuclides: 34,
                reps: 3,
                rounds: 3,
            }
        } else {
            Settings {
                threads: 0,
                fault_threads: 0,
                duration: 2.0,
                lookup_size: 1 << 30,
                stream_size: 1 << 30,
                fault_size: 128 << 20,
                map_size: 256 << 20,
                nuclides: 68,
                reps: 5,
                rounds: 3,
            }
        }
    }
}

/// A policy of the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Policy {
    Local,
    Bind(u32),
    KernelInterleave,
    KernelWeighted,
    TierkitHmat,
    TierkitAuto,
    TierkitOptimized,
}

impl Policy {
    pub fn name(&self) -> String {
        match self {
            Policy::Local => rows::LOCAL.into(),
            Policy::Bind(n) => rows::bind(*n),
            Policy::KernelInterleave => rows::KERNEL_INTERLEAVE.into(),
            Policy::KernelWeighted => rows::KERNEL_WEIGHTED_HMAT.into(),
            Policy::TierkitHmat => rows::TIERKIT_WEIGHTED_HMAT.into(),
            Policy::TierkitAuto => rows::TIERKIT_AUTO_MEASURED.into(),
            Policy::TierkitOptimized => rows::TIERKIT_OPTIMIZED.into(),
        }
    }

    pub fn is_tierkit(&self) -> bool {
        matches!(
            self,
            Policy::TierkitHmat | Policy::TierkitAuto | Policy::TierkitOptimized
        )
    }
}

/// Everything the runs share.
pub struct Ctx {
    pub topo: Topology,
    pub cal: Calibration,
    pub memory: u64,
    pub kernel_w: Option<[u8; 64]>,
    pub tw: Option<WeightDir>,
    pub cpus: Vec<u32>,
    pub threads: usize,
    pub fault_threads: usize,
    pub dram: u32,
    pub topology: String,
}

/// A policy made ready: the placement, and the nodemask and weights it
/// interleaves with (for the rows).
pub struct Ready {
    pub placement: Placement,
    pub nodemask: Option<Vec<u32>>,
    pub weights: Option<Vec<(u32, u8)>>,
}

pub fn pairs(mask: u64, w: &[u8; 64]) -> Vec<(u32, u8)> {
    nodes_of(mask)
        .into_iter()
        .map(|n| (n, w[n as usize]))
        .collect()
}

impl Ctx {
    pub fn tierkit(&self) -> Result<&WeightDir> {
        self.tw
            .as_ref()
            .ok_or_else(|| anyhow!("no tierkit weight directory"))
    }

    /// Sets tierkit's weights as `p` needs them for workload `w`.
    pub fn prepare(&self, p: &Policy, w: Workload) -> Result<Ready> {
        let mem = self.memory;
        let all_ones = [1u8; 64];
        Ok(match p {
            Policy::Local => Ready {
                placement: Placement::Local,
                nodemask: None,
                weights: None,
            },
            Policy::Bind(n) => Ready {
                placement: Placement::Bind(*n),
                nodemask: Some(vec![*n]),
                weights: None,
            },
            Policy::KernelInterleave => Ready {
                placement: Placement::KernelInterleave(mem),
                nodemask: Some(nodes_of(mem)),
                weights: Some(pairs(mem, &all_ones)),
            },
            Policy::KernelWeighted => {
                let k = self
                    .kernel_w
                    .ok_or_else(|| anyhow!("the kernel has no weighted interleave"))?;
                Ready {
                    placement: Placement::KernelWeighted(mem),
                    nodemask: Some(nodes_of(mem)),
                    weights: Some(pairs(mem, &k)),
                }
            }
            Policy::TierkitHmat => {
                let k = self
                    .kernel_w
                    .ok_or_else(|| anyhow!("the kernel has no weighted interleave"))?;
                let tw = self.tierkit()?;
                tw.set_weights(&pairs(mem, &k))?;
                Ready {
                    placement: Placement::Tierkit(mem),
                    nodemask: Some(nodes_of(mem)),
                    weights: Some(pairs(mem, &tw.table()?)),
                }
            }
            Policy::TierkitAuto => {
                let tw = self.tierkit()?;
                tw.write_bandwidth(&self.cal.measured_entries())
                    .context("writing tierkit's bandwidth")?;
                tw.write_auto_str("true").context("writing true to auto")?;
                Ready {
                    placement: Placement::Tierkit(mem),
                    nodemask: Some(nodes_of(mem)),
                    weights: Some(pairs(mem, &tw.table()?)),
                }
            }
            Policy::TierkitOptimized => {
                let rec = self
                    .cal
                    .recommend(w)
                    .ok_or_else(|| anyhow!("the model has no recommendation"))?;
                let tw = self.tierkit()?;
                let p = pairs(rec.mask.0, &rec.weights);
                tw.set_weights(&p)?;
                Ready {
                    placement: Placement::Tierkit(rec.mask.0),
                    nodemask: Some(nodes_of(rec.mask.0)),
                    weights: Some(p),
                }
            }
        })
    }

    pub fn row(&self, workload: &str, p: &Policy, unit: &str, measured: f64) -> Row {
        Row {
            topology: self.topology.clone(),
            workload: workload.into(),
            policy: p.name(),
            unit: unit.into(),
            measured,
            predicted: None,
            regime: self.cal.regime.clone(),
            threads: Some(self.threads),
            ..Default::default()
        }
    }
}

/// Checks that a `bind:N` working set is all on N.
pub fn check_bind(r: &mut Report, name: &str, p: &Policy, pages: &[(i32, usize)]) {
    if let Policy::Bind(n) = p {
        let off: usize = pages.iter().filter(|x| x.0 != *n as i32).map(|x| x.1).sum();
        if off > 0 {
            r.fail(
                &format!("{name}: pages on node {n}"),
                format!("{off} pages elsewhere: {}", fmt_pages(pages)),
            );
        }
    }
}

/// One policy's working set, made ready.
pub struct Set<T> {
    pub policy: Policy,
    pub ready: Ready,
    pub region: Region,
    pub pages: Vec<(i32, usize)>,
    pub state: T,
}

/// Allocates a working set of `bytes` for every policy (in order, so
/// that each tierkit mapping gets the weights its policy set), then
/// `init` on each. A policy that fails is reported and left out.
pub fn sets<T>(
    ctx: &Ctx,
    policies: &[Policy],
    w: Workload,
    what: &str,
    bytes: usize,
    r: &mut Report,
    mut init: impl FnMut(&Region) -> Result<T>,
) -> Vec<Set<T>> {
    let mut v = Vec::new();
    for p in policies {
        let res = (|| -> Result<Set<T>> {
            let ready = ctx.prepare(p, w)?;
            let region = Region::new(&ready.placement, bytes)?;
            let pages = region.node_pages().unwrap_or_default();
            let state = init(&region)?;
            Ok(Set {
                policy: p.clone(),
                ready,
                region,
                pages,
                state,
            })
        })();
        match res {
            Ok(s) => {
                check_bind(r, &format!("{what} {}", p.name()), p, &s.pages);
                v.push(s);
            }
            Err(e) => {
                r.fail(&format!("{what} {}", p.name()), format!("{e:#}"));
            }
        }
    }
    v
}

/// Per-workload facts for the JSON line (the in-run calibration).
pub type InRun = Vec<(String, serde_json::Value)>;
