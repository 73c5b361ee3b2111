//! One RAM region per CXL fixed memory window (`tierkit.cxl=`, `--topology
//! cxl`), through the kernel's CXL sysfs: the sequence of
//! Documentation/driver-api/cxl (what `cxl create-region -t ram` does).
//!
//! Window I (root decoder `decoder0.<I>`) targets one host bridge; behind
//! it sit WAYS devices, one per root port (WAYS=1 without
//! `--cxl-interleave`, 2 with `--cxl-interleave 2`):
//! - root decoder `decoder0.<I>`: `create_ram_region` -> `regionZ`;
//! - `regionZ`: `interleave_granularity` (WAYS=1: the root decoder's; else
//!   the one asked for), `interleave_ways`=WAYS;
//! - each endpoint decoder: `mode`=ram, `dpa_size` = its device's ram size;
//! - `regionZ`: `size` = the sum, `target<k>` = the endpoint decoder of the
//!   device behind the host bridge's k-th downstream port (dport id
//!   order), `commit`=1; bind to `cxl_region`.
//!
//! The host bridge's own decoder then interleaves the window across its
//! root ports (the kernel programs it at commit). The region's dax device
//! binds to kmem, which hot-adds its memory; `memhp_default_state` onlines
//! it as a new CPU-less node. Every step is a `TIERKIT-CXL` line; a failed
//! one is `TIERKIT-ERROR cxl step=<name>: <what>` followed by `TIERKIT-CXL
//! diag` lines (the decoders on the window's path and the cxl driver's
//! dmesg lines since the set-up began).

use super::{names_with_prefix, read_text, resolved_name, Init};
use crate::topology::cxl::parse_num;
use std::path::{Path, PathBuf};
use tierkit_protocol::{cxl, marker};

/// The CXL bus's devices and the sysfs of NUMA nodes (guest paths).
pub const CXL_DEVICES: &str = "/sys/bus/cxl/devices";
pub const NODES: &str = "/sys/devices/system/node";
const REGION_BIND: &str = "/sys/bus/cxl/drivers/cxl_region/bind";

/// A step failed; its `TIERKIT-ERROR` line is out.
#[derive(Debug)]
pub struct Failed;

/// The assembly's state.
pub struct Assembly {
    /// The CXL bus's devices under the root.
    pub c: PathBuf,
    /// The window being assembled and its host bridge's CXL port (for the
    /// diagnostics of a failed step).
    win: Option<usize>,
    port: Option<PathBuf>,
    /// The kernel's log since the set-up began (`None` in tests).
    kmsg: Option<crate::tests::faults::Kmsg>,
    dmesg: Vec<String>,
    /// Every sysfs write, in order: (path below the root, value).
    pub writes: Vec<(String, String)>,
    /// The regions bound so far and their sizes in bytes.
    pub regions: Vec<(String, u64)>,
}

/// `s` cut to `n` characters (`cut -c1-N`).
pub fn cut(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// A file's content, or `?`.
fn attr(p: &Path) -> String {
    read_text(p).unwrap_or_else(|| "?".into())
}

/// One decoder's interleave settings, `decoderX.Y(ways=.. granularity=..
/// [targets=..] [mode=.. dpa_size=..] region=..)`.
pub fn decoder_desc(d: &Path) -> String {
    let name = d
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let mut s = format!(
        "{name}(ways={} granularity={}",
        attr(&d.join("interleave_ways")),
        attr(&d.join("interleave_granularity"))
    );
    if d.join("target_list").exists() {
        s += &format!(" targets={}", attr(&d.join("target_list")));
    }
    if d.join("mode").exists() {
        s += &format!(
            " mode={} dpa_size={}",
            attr(&d.join("mode")),
            attr(&d.join("dpa_size"))
        );
    }
    s + &format!(" region={})", attr(&d.join("region")))
}

/// Node `nid`'s MemTotal in kB (0 without meminfo).
pub fn node_kb(init: &Init, nid: &str) -> u64 {
    init.root
        .read(&format!("{NODES}/node{nid}/meminfo"))
        .and_then(|m| {
            m.lines()
                .find(|l| l.contains("MemTotal"))
                .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        })
        .unwrap_or(0)
}

/// `nid` is in a kernel list such as `0,2-3`.
fn in_list(nid: &str, list: &str) -> bool {
    let Ok(n) = nid.parse::<u32>() else {
        return false;
    };
    crate::topology::node::parse_list(list).is_ok_and(|l| l.contains(&n))
}

/// The region's dax device on the dax bus (`/sys/bus/dax/devices/daxZ.Y`).
pub fn dax_of(init: &Init, c: &Path, region: &str) -> Option<PathBuf> {
    let r = c.join(region);
    for dr in names_with_prefix(&r, "dax_region") {
        if let Some(d) = names_with_prefix(&r.join(&dr), "dax")
            .into_iter()
            .find(|n| n.contains('.'))
        {
            return Some(init.root.at(crate::topology::cxl::DAX_SYSFS).join(d));
        }
    }
    None
}

fn count(c: &Path, prefix: &str) -> usize {
    names_with_prefix(c, prefix).len()
}

impl Assembly {
    pub fn new(init: &Init) -> Assembly {
        let kmsg = (init.root.0 == Path::new("/"))
            .then(crate::tests::faults::Kmsg::open_at_end)
            .and_then(Result::ok);
        Assembly {
            c: init.root.at(CXL_DEVICES),
            win: None,
            port: None,
            kmsg,
            dmesg: Vec::new(),
            writes: Vec::new(),
            regions: Vec::new(),
        }
    }

    /// The kernel's side of a failed step, short enough for one printk
    /// record: the root decoder's interleave and capabilities, and the
    /// host bridge port's downstream ports.
    fn why(&self) -> String {
        let Some(w) = self.win else {
            return String::new();
        };
        let rd = self.c.join(format!("decoder0.{w}"));
        let mut s = format!(
            "; kernel: root decoder0.{w} interleave_ways={} interleave_granularity={} cap_ram={} cap_type3={}",
            attr(&rd.join("interleave_ways")),
            attr(&rd.join("interleave_granularity")),
            attr(&rd.join("cap_ram")),
            attr(&rd.join("cap_type3"))
        );
        if let Some(p) = &self.port {
            let ids: Vec<String> = names_with_prefix(p, "dport")
                .iter()
                .map(|d| d["dport".len()..].to_string())
                .collect();
            s += &format!("; host bridge {} dports={}", file_name(p), ids.join(","));
        }
        s + " (more: TIERKIT-CXL diag lines)"
    }

    /// After a failed step: one `TIERKIT-CXL diag` line per decoder on the
    /// window's path (the host bridge port's first decoder and any that
    /// holds a region, the endpoints' first decoders) and the cxl driver's
    /// dmesg lines since the set-up began (its region checks are mostly
    /// dev_dbg, which this kernel does not print).
    fn diag(&mut self, init: &mut Init) {
        if self.win.is_none() {
            return;
        }
        if let Some(port) = self.port.clone() {
            let pname = file_name(&port);
            for (i, d) in decoders(&port).iter().enumerate() {
                if i == 0 || read_text(&d.join("region")).is_some_and(|r| !r.is_empty()) {
                    let l = format!("diag: host bridge {pname} {}", cut(&decoder_desc(d), 900));
                    init.tag(marker::CXL, &l);
                }
            }
            for e in names_with_prefix(&port, "endpoint") {
                let ep = port.join(&e);
                if let Some(d) = decoders(&ep).first() {
                    let l = format!(
                        "diag: {e} ({} below {}) {}",
                        resolved_name(&ep.join("uport")),
                        resolved_name(&ep.join("parent_dport")),
                        cut(&decoder_desc(d), 800)
                    );
                    init.tag(marker::CXL, &l);
                }
            }
        }
        if let Some(k) = &self.kmsg {
            self.dmesg.extend(k.drain());
        }
        let cxl: Vec<&String> = self
            .dmesg
            .iter()
            .filter(|l| l.to_lowercase().contains("cxl") && !l.contains(marker::PREFIX))
            .collect();
        for l in &cxl[cxl.len().saturating_sub(6)..] {
            init.tag(marker::CXL, &format!("diag: dmesg: {}", cut(l, 900)));
        }
    }

    /// `TIERKIT-ERROR cxl step=<step>: <what>` and the diagnostics.
    pub fn fail(&mut self, init: &mut Init, step: &str, what: &str) -> Failed {
        let msg = cut(&format!("{what}{}", self.why()), 900);
        init.tag(marker::ERROR, &format!("cxl step={step}: {msg}"));
        self.diag(init);
        Failed
    }

    /// Writes `value` to `file` (as `echo VALUE > FILE`); a failure is a
    /// failed `step`.
    pub fn write(
        &mut self,
        init: &mut Init,
        step: &str,
        file: &Path,
        value: &str,
    ) -> Result<(), Failed> {
        let shown = file
            .strip_prefix(&self.c)
            .map_or_else(|_| file.display().to_string(), |p| p.display().to_string());
        let rel = file.strip_prefix(&init.root.0).unwrap_or(file);
        self.writes
            .push((format!("/{}", rel.display()), value.to_string()));
        match crate::topology::weights::write_file(file, &format!("{value}\n")) {
            Ok(()) => Ok(()),
            Err(e) => {
                let what = format!(
                    "echo {value} > {shown}: write error: {}",
                    super::errno_text(&e)
                );
                Err(self.fail(init, step, &what))
            }
        }
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The decoders (`decoderX.Y` directories) of a port, in glob order.
fn decoders(port: &Path) -> Vec<PathBuf> {
    names_with_prefix(port, "decoder")
        .into_iter()
        .filter(|n| n.contains('.'))
        .map(|n| port.join(n))
        .filter(|p| p.is_dir())
        .collect()
}

/// The endpoints below a host bridge's CXL port, `(dport id, endpoint
/// dir)`, in dport id order (the root port's number: QEMU `cxl-rp,port=`),
/// i.e. in interleave position order.
pub fn endpoints(port: &Path) -> Vec<(String, PathBuf)> {
    let dports: Vec<(String, Option<PathBuf>)> = names_with_prefix(port, "dport")
        .into_iter()
        .map(|d| {
            (
                d["dport".len()..].to_string(),
                std::fs::canonicalize(port.join(&d)).ok(),
            )
        })
        .collect();
    let mut v: Vec<(String, PathBuf)> = names_with_prefix(port, "endpoint")
        .into_iter()
        .map(|e| port.join(e))
        .filter(|e| e.is_dir())
        .map(|e| {
            let pd = std::fs::canonicalize(e.join("parent_dport")).ok();
            let id = dports
                .iter()
                .filter(|(_, p)| pd.is_some() && *p == pd)
                .map(|(id, _)| id.clone())
                .next_back()
                .unwrap_or_else(|| "?".into());
            (id, e)
        })
        .collect();
    // `sort -n`: a number first by its value, `?` as 0.
    v.sort_by_key(|(id, e)| (id.parse::<u64>().unwrap_or(0), e.clone()));
    v
}

/// The whole set-up: enumeration, one region per window, then each
/// region's dax device, kmem and node; false if a step failed.
pub fn setup(init: &mut Init) -> bool {
    let mut a = Assembly::new(init);
    let ok = assemble(init, &mut a).is_ok();
    if ok {
        let n = a.regions.len();
        init.tag(marker::CXL, &format!("ready: {n} region(s) online"));
    }
    ok
}

/// [`setup`] with the state kept for the caller (tests look at it).
pub fn assemble(init: &mut Init, a: &mut Assembly) -> Result<(), Failed> {
    let spec = init.params.cxl.clone().unwrap_or_default();
    let wanted = match cxl::parse(&spec) {
        Some(w) => w,
        None => {
            let what = format!("tierkit.cxl={spec}: malformed");
            return Err(a.fail(init, "enumerate", &what));
        }
    };
    let nwin = wanted.len();
    let ndev: usize = wanted.iter().map(|w| w.ways as usize).sum();
    let l =
        format!("setup: {nwin} region(s) over {ndev} device(s): {spec} (MiB[:ways:granularity])");
    init.tag(marker::CXL, &l);
    let c = a.c.clone();
    if !c.is_dir() {
        let what = format!(
            "no {}: the kernel has no CXL bus (CONFIG_CXL_BUS)",
            c.display()
        );
        return Err(a.fail(init, "enumerate", &what));
    }
    let enumerated = || count(&c, "decoder0.") >= nwin && count(&c, "endpoint") >= ndev;
    if !init.wait_until(30, enumerated) {
        let what = format!(
            "after 30 s: {} root decoder(s), {} memdev(s), {} endpoint(s); expected {nwin} root decoder(s) and {ndev} memdev(s) and endpoint(s)",
            count(&c, "decoder0."),
            count(&c, "mem"),
            count(&c, "endpoint")
        );
        return Err(a.fail(init, "enumerate", &what));
    }
    let listed: Vec<String> = ["decoder0.", "mem", "endpoint"]
        .iter()
        .flat_map(|p| {
            let n = names_with_prefix(&c, p);
            if n.is_empty() {
                vec![format!("{p}*")]
            } else {
                n
            }
        })
        .collect();
    init.tag(marker::CXL, &format!("enumerated: {}", listed.join(" ")));
    for (i, w) in wanted.iter().enumerate() {
        region_one(init, a, i, w)?;
    }
    for (region, bytes) in a.regions.clone() {
        online_one(init, a, &region, bytes)?;
    }
    Ok(())
}

/// The memdevs behind window `i` and their endpoint decoders, by position:
/// (memdevs, endpoint decoders, `via` text).
fn window_devices(
    init: &mut Init,
    a: &mut Assembly,
    i: usize,
    ways: u32,
    per: u64,
) -> Result<(Vec<String>, Vec<String>, String), Failed> {
    let c = a.c.clone();
    let rd = c.join(format!("decoder0.{i}"));
    // The window's target is a host bridge (root0/dport<uid>), whose CXL
    // port has the devices' endpoints.
    let t = read_text(&rd.join("target_list")).unwrap_or_default();
    let hb = std::fs::canonicalize(c.join(format!("root0/dport{t}"))).ok();
    let root0 = c.join("root0");
    let port = names_with_prefix(&root0, "port")
        .into_iter()
        .map(|p| root0.join(p))
        .rfind(|p| hb.is_some() && std::fs::canonicalize(p.join("uport")).ok() == hb);
    a.port = port.clone();
    let eps = port.as_deref().map(endpoints).unwrap_or_default();
    if eps.len() != ways as usize {
        let what = format!(
            "decoder0.{i} targets host bridge {} ({}), whose CXL port {} has {} endpoint(s), expected {ways} ({ways}-way region)",
            if t.is_empty() { "?" } else { &t },
            hb.as_ref().map_or("no dport".into(), |h| h.display().to_string()),
            port.as_ref().map_or("(none)".into(), |p| p.display().to_string()),
            eps.len()
        );
        return Err(a.fail(init, "map", &what));
    }
    let (mut mems, mut epds, mut via) = (Vec::new(), Vec::new(), String::new());
    for (k, (id, ep)) in eps.iter().enumerate() {
        let mem = resolved_name(&ep.join("uport"));
        let epd = decoders(ep).first().map(|d| file_name(d));
        let size = read_text(&c.join(&mem).join("ram/size")).filter(|s| !s.is_empty());
        if size.as_deref().and_then(parse_num) != Some(per) {
            let what = format!(
                "{mem} (position {k} behind decoder0.{i}) has a volatile capacity of {}, expected {per} bytes",
                size.as_deref().unwrap_or("nothing")
            );
            return Err(a.fail(init, "memdev", &what));
        }
        let Some(epd) = epd else {
            let what = format!("{} ({mem}) has no decoder", file_name(ep));
            return Err(a.fail(init, "map", &what));
        };
        via += &format!(" dport{id}:{}/{epd}", file_name(ep));
        mems.push(mem);
        epds.push(epd);
    }
    Ok((mems, epds, via))
}

/// Assembles the RAM region of window `i`: `w.mib` in all, interleaved
/// across the `w.ways` devices behind its host bridge.
fn region_one(init: &mut Init, a: &mut Assembly, i: usize, w: &cxl::Region) -> Result<(), Failed> {
    let want = w.bytes();
    let ways = w.ways;
    let per = want / u64::from(ways);
    a.win = Some(i);
    a.port = None;
    let c = a.c.clone();
    let rd = c.join(format!("decoder0.{i}"));
    let (mems, epds, via) = window_devices(init, a, i, ways, per)?;
    let region = read_text(&rd.join("create_ram_region")).unwrap_or_default();
    if region.is_empty() {
        let what = format!(
            "decoder0.{i}/create_ram_region gives no region name (not a RAM-capable window?)"
        );
        return Err(a.fail(init, "create", &what));
    }
    a.write(init, "create", &rd.join("create_ram_region"), &region)?;
    let r = c.join(&region);
    let gran = if ways == 1 {
        read_text(&rd.join("interleave_granularity")).unwrap_or_default()
    } else {
        w.granularity.unwrap_or(0).to_string()
    };
    let l = format!(
        "{region}: decoder0.{i} -> {} ({} MiB, {ways}-way, granularity {gran}) via{via}",
        mems.join(" "),
        want >> 20
    );
    init.tag(marker::CXL, &l);
    a.write(
        init,
        "granularity",
        &r.join("interleave_granularity"),
        &gran,
    )?;
    a.write(init, "ways", &r.join("interleave_ways"), &ways.to_string())?;
    for epd in &epds {
        a.write(init, "mode", &c.join(epd).join("mode"), "ram")?;
        a.write(
            init,
            "dpa_size",
            &c.join(epd).join("dpa_size"),
            &per.to_string(),
        )?;
    }
    a.write(init, "size", &r.join("size"), &want.to_string())?;
    for (k, epd) in epds.iter().enumerate() {
        a.write(init, "target", &r.join(format!("target{k}")), epd)?;
    }
    a.write(init, "commit", &r.join("commit"), "1")?;
    let commit = read_text(&r.join("commit")).unwrap_or_default();
    if commit != "1" {
        let what = format!("{region}/commit reads {commit} after writing 1");
        return Err(a.fail(init, "commit", &what));
    }
    let rt = |f: &str| read_text(&r.join(f)).unwrap_or_default();
    let l = format!(
        "{region}: committed (ways {}, granularity {}, size {})",
        rt("interleave_ways"),
        rt("interleave_granularity"),
        rt("size")
    );
    init.tag(marker::CXL, &l);
    a.write(init, "bind", &init.root.at(REGION_BIND), &region)?;
    init.tag(marker::CXL, &format!("{region}: bound to cxl_region"));
    a.regions.push((region, want));
    a.win = None;
    a.port = None;
    Ok(())
}

/// Waits for a bound region's dax device, kmem, its node's memory and its
/// performance data.
fn online_one(init: &mut Init, a: &mut Assembly, region: &str, bytes: u64) -> Result<(), Failed> {
    let c = a.c.clone();
    let mut dax = None;
    if !init.wait_until(20, || {
        dax = dax_of(init, &c, region);
        dax.is_some()
    }) {
        let what = format!("{region} has no dax device 20 s after binding (CONFIG_DEV_DAX_CXL?)");
        return Err(a.fail(init, "dax", &what));
    }
    let dax = dax.unwrap_or_default();
    let dname = file_name(&dax);
    if !init.wait_until(20, || resolved_name(&dax.join("driver")) == "kmem") {
        let what = format!(
            "{dname} of {region} is not bound to kmem after 20 s (driver: {}; CONFIG_DEV_DAX_KMEM?)",
            resolved_name(&dax.join("driver"))
        );
        return Err(a.fail(init, "kmem", &what));
    }
    let nid = read_text(&dax.join("target_node")).unwrap_or_default();
    let has_memory = |init: &Init| {
        init.root
            .read(&format!("{NODES}/has_memory"))
            .unwrap_or_default()
    };
    let online =
        || in_list(&nid, &has_memory(init)) && node_kb(init, &nid) * 1024 >= bytes - bytes / 64;
    if !init.wait_until(60, online) {
        let what = format!(
            "node {nid} (target_node of {dname}, {region}) has {} kB online after 60 s, expected {} kB; has_memory={}",
            node_kb(init, &nid),
            bytes / 1024,
            has_memory(init)
        );
        return Err(a.fail(init, "online", &what));
    }
    let perf = c.join(region).join("access1/read_bandwidth");
    if !init.wait_until(10, || std::fs::read(&perf).is_ok()) {
        let what = format!(
            "{region} has no access1 performance data after 10 s (no generic port / HMAT for its host bridge?)"
        );
        return Err(a.fail(init, "perf", &what));
    }
    let cpus = init
        .root
        .read(&format!("{NODES}/node{nid}/cpulist"))
        .unwrap_or_default();
    let l = format!(
        "{region}: {dname} (kmem) -> node{nid} online, {} kB, cpus={cpus}",
        node_kb(init, &nid)
    );
    init.tag(marker::CXL, &l);
    Ok(())
}
