//! What a [`Calibration`] gives: the regime, rates per workload, weight
//! entries, the recommendation, the table, and its file.

use super::*;

/// `(nid, read, write)` MB/s of measured nodes, each at least 1.
fn entries_of(nodes: &[NodeCal]) -> Vec<(u32, u32, u32)> {
    nodes
        .iter()
        .map(|n| {
            (
                n.nid,
                (n.read_mbps.round() as u32).max(1),
                (n.write_mbps.round() as u32).max(1),
            )
        })
        .collect()
}

impl SocketCal {
    /// Nodemask of the nodes measured from this socket.
    pub fn mask(&self) -> u64 {
        crate::topology::node::mask_of(&self.nodes.iter().map(|n| n.nid).collect::<Vec<_>>())
    }

    /// `(nid, read, write)` MB/s as measured from this socket.
    pub fn measured_entries(&self) -> Vec<(u32, u32, u32)> {
        entries_of(&self.nodes)
    }

    /// The socket's table as saved: refused if a node is 64 or above, is
    /// named twice or weighs 0, or if it weighs no node.
    pub fn table(&self) -> Result<[u8; 64]> {
        let mut t = [0u8; 64];
        for &(n, w) in &self.weights {
            let i = n as usize;
            if i >= 64 || w == 0 || t[i] != 0 {
                bail!(
                    "socket {}'s table: bad entry {n}:{w} (nodes 0..63, each once, weights 1..255)",
                    self.socket
                );
            }
            t[i] = w;
        }
        if self.weights.is_empty() {
            bail!("socket {}'s table weighs no node", self.socket);
        }
        Ok(t)
    }
}

impl Calibration {
    pub fn regime(&self) -> Regime {
        Regime::from_name(&self.regime).unwrap_or(Regime::Parallel)
    }

    pub fn node(&self, nid: u32) -> Option<&NodeCal> {
        self.nodes.iter().find(|n| n.nid == nid)
    }

    /// Nodemask of the calibrated nodes.
    pub fn mask(&self) -> u64 {
        crate::topology::node::mask_of(&self.nodes.iter().map(|n| n.nid).collect::<Vec<_>>())
    }

    /// The model's per-node rates for `w`: for the streaming kernels the
    /// node's calibrated MB/s of the same kernel (a calibration file
    /// without STREAM's kernels falls back to read and write, and to triad
    /// for add); for the lookup `1/latency` relative to the first node
    /// (what the recommendation needs; [`Calibration::lookup_rates`] gives
    /// absolute figures).
    pub fn rates(&self, w: Workload) -> Rates {
        let mut r = [0.0; 64];
        let lat0 = self.nodes.first().map(|n| n.latency_ns).unwrap_or(0.0);
        for n in &self.nodes {
            if n.nid >= 64 {
                continue;
            }
            let rw = || model::stream_rate(n.read_mbps, n.write_mbps, 1, 1);
            let or = |x: f64, f: f64| if x > 0.0 { x } else { f };
            r[n.nid as usize] = match w {
                Workload::Read => n.read_mbps,
                Workload::Copy => or(n.copy_mbps, rw()),
                Workload::Scale => or(n.scale_mbps, rw()),
                Workload::Add => or(n.add_mbps, n.triad_mbps),
                Workload::Triad => n.triad_mbps,
                Workload::Lookup => model::latency_rate(1.0, lat0, n.latency_ns),
            };
        }
        r
    }

    /// Whether loads from node `n` gain nothing from locality: a
    /// sequential word costs at least a quarter of a dependent random load
    /// (`8 bytes / read bandwidth >= latency / 4`). True of QEMU's CXL
    /// window, which it serves access by access; false of any DRAM or CXL
    /// hardware (a word streams in about a nanosecond, a miss takes about
    /// a hundred).
    pub fn no_locality(n: &NodeCal) -> bool {
        n.read_mbps > 0.0 && n.latency_ns > 0.0 && 8e3 / n.read_mbps >= n.latency_ns / 4.0
    }

    /// Lookups/s per node for a lookup of `loads = (random, streamed)`
    /// loads from the working set (see `XsData::load_mix`), anchored at a
    /// measured rate `anchor_rate` on node `anchor`:
    ///
    /// - a node with locality: `anchor_rate · lat_anchor / lat_i`: the
    ///   lookup is latency-bound and keeps the same number of loads in
    ///   flight everywhere, so its rate scales with the inverse latency;
    /// - a node without locality ([`Calibration::no_locality`]): every load
    ///   is paid in turn, a random one at the node's latency and a
    ///   streamed one at a word of its read bandwidth:
    ///   `1 / (random · lat_i + streamed · 8 B / read_i)`, times the
    ///   threads in the parallel regime (in the serial one they take
    ///   turns).
    pub fn lookup_rates(
        &self,
        anchor: u32,
        anchor_rate: f64,
        loads: (f64, f64),
        threads: usize,
    ) -> Rates {
        let mut r = [0.0; 64];
        let Some(a) = self.node(anchor) else {
            return r;
        };
        let par = match self.regime() {
            Regime::Parallel => threads.max(1) as f64,
            Regime::Serial => 1.0,
        };
        for n in &self.nodes {
            if n.nid >= 64 {
                continue;
            }
            let ns = loads.0 * n.latency_ns + loads.1 * 8e3 / n.read_mbps.max(1e-9);
            r[n.nid as usize] = if n.nid != anchor && Self::no_locality(n) && ns > 0.0 {
                par * 1e9 / ns
            } else {
                model::latency_rate(anchor_rate, a.latency_ns, n.latency_ns)
            };
        }
        r
    }

    /// `(nid, read, write)` MB/s as measured, for tierkit's `bandwidth`
    /// file (at least 1, so that a very slow node is not "no data").
    pub fn measured_entries(&self) -> Vec<(u32, u32, u32)> {
        entries_of(&self.nodes)
    }

    /// The per-socket tables (`--per-socket`), as 64-entry tables.
    pub fn socket_tables(&self) -> Result<Vec<(u32, [u8; 64])>> {
        self.sockets
            .iter()
            .map(|s| s.table().map(|t| (s.socket, t)))
            .collect()
    }

    /// `(nid, read, write)` MB/s from HMAT, for the nodes that have it.
    pub fn hmat_entries(&self) -> Vec<(u32, u32, u32)> {
        self.nodes
            .iter()
            .filter_map(|n| n.hmat.as_ref().map(|h| (n.nid, h.read_mbps, h.write_mbps)))
            .collect()
    }

    /// The model's recommendation for `w` over the calibrated nodes.
    pub fn recommend(&self, w: Workload) -> Option<model::Recommendation> {
        model::recommend(self.regime(), &self.rates(w), Nodemask(self.mask()), 255)
    }

    /// The table `tk-calibrate` prints: measured against HMAT, and the
    /// kernel formula's weights from each.
    pub fn table(&self, memory: u64) -> Vec<String> {
        let wm = weights_from_bandwidth(&self.measured_entries(), memory);
        let he = self.hmat_entries();
        let wh = (!he.is_empty()).then(|| weights_from_bandwidth(&he, memory));
        let mut v = vec![format!(
            "{:<4} {:<11} {:>3} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} | {:>8} {:>8} {:>7} | {:>7} {:>7}",
            "node",
            "kind",
            "T",
            "read",
            "write",
            "copy",
            "scale",
            "add",
            "triad",
            "lat ns",
            "HMAT rd",
            "HMAT wr",
            "HMAT ns",
            "w(HMAT)",
            "w(meas)"
        )];
        for n in &self.nodes {
            let h = n.hmat.as_ref();
            let i = (n.nid as usize).min(63);
            v.push(format!(
                "{:<4} {:<11} {:>3} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>7.0} | {:>8} {:>8} {:>7} | {:>7} {:>7}",
                n.nid,
                n.kind,
                n.threads,
                n.read_mbps,
                n.write_mbps,
                n.copy_mbps,
                n.scale_mbps,
                n.add_mbps,
                n.triad_mbps,
                n.latency_ns,
                h.map_or("-".into(), |h| h.read_mbps.to_string()),
                h.map_or("-".into(), |h| h.write_mbps.to_string()),
                h.and_then(|h| h.read_latency_ns)
                    .map_or("-".into(), |l| l.to_string()),
                wh.map_or("-".into(), |w| w[i].to_string()),
                wm[i],
            ));
        }
        v
    }

    pub fn save(&self, path: &str) -> Result<()> {
        std::fs::write(path, serde_json::to_string_pretty(self)?)
            .with_context(|| format!("writing {path}"))
    }

    pub fn load(path: &str) -> Result<Calibration> {
        let s = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
        serde_json::from_str(&s).with_context(|| format!("parsing {path}"))
    }
}
