//! No import circles between xtask's modules, nor between those of the
//! workspace's other crates ([`CRATES`]): every `crate::...` and
//! `super::...` path in `src/` (in `use` items and in code, parsed with
//! syn; test-only items left out) names the module it reaches, and the
//! graph of those edges between modules must have no cycle.
//!
//! A module here is a file of a stage folder with its own folder of
//! children (`src/kernels/kdir.rs` with `src/kernels/kdir/`), or a
//! top-level folder without stages (`src/util/`): a child's `super::`
//! stays inside its module.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// The folders whose files are each a module of their own: every folder
/// of `src/` (a test below checks that none is missing).
const STAGES: &[&str] = &[
    "kernels", "plan", "boot", "judge", "report", "commands", "cli", "util",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/a/b/c.rs` -> `[a, b, c]`; `mod.rs` and `lib.rs` name their folder.
fn module_path(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap();
    let mut segs: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        segs.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        segs.pop();
    }
    segs
}

/// The module (graph node) a file's module path belongs to: a stage's
/// `mod.rs` is a module of its own.
fn node_of(stages: &[&str], path: &[String]) -> Option<String> {
    let first = path.first()?;
    let n = if stages.contains(&first.as_str()) {
        2
    } else {
        1
    };
    Some(path[..n.min(path.len())].join("::"))
}

/// The known module a path reaches: its stage file, else the stage's own.
fn reached(stages: &[&str], path: &[String], known: &BTreeSet<String>) -> Option<String> {
    let n = node_of(stages, path)?;
    if known.contains(&n) {
        return Some(n);
    }
    Some(path[0].clone()).filter(|n| known.contains(n))
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string() == "test")
    })
}

/// The module paths `crate::`/`super::` paths of one file reach.
struct Paths<'a> {
    here: &'a [String],
    found: Vec<Vec<String>>,
}

impl Paths<'_> {
    fn add(&mut self, segs: Vec<String>) {
        let mut abs = match segs.first().map(String::as_str) {
            Some("crate") => Vec::new(),
            Some("super") => self.here.to_vec(),
            _ => return,
        };
        let mut rest = segs.as_slice();
        if rest[0] == "crate" {
            rest = &rest[1..];
        }
        while rest.first().is_some_and(|s| s == "super") {
            abs.pop();
            rest = &rest[1..];
        }
        abs.extend(rest.iter().cloned());
        self.found.push(abs);
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut s = prefix.clone();
                if n.ident != "self" {
                    s.push(n.ident.to_string());
                }
                self.add(s);
            }
            syn::UseTree::Rename(r) => {
                let mut s = prefix.clone();
                s.push(r.ident.to_string());
                self.add(s);
            }
            syn::UseTree::Glob(_) => self.add(prefix.clone()),
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| self.use_tree(prefix, t)),
        }
    }
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_item(&mut self, i: &'ast syn::Item) {
        let attrs = match i {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Impl(m) => &m.attrs,
            _ => return syn::visit::visit_item(self, i),
        };
        if !is_test_only(attrs) {
            syn::visit::visit_item(self, i);
        }
    }
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }
    fn visit_path(&mut self, p: &'ast syn::Path) {
        self.add(p.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, p);
    }
}

/// Module -> the modules it imports, over every non-test file of xtask's
/// `src/`.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    graph_of(&src(), STAGES)
}

/// Module -> the modules it imports, over every non-test file under `root`
/// (a crate's `src/`), whose folders named in `stages` hold a module per
/// file.
fn graph_of(root: &Path, stages: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let mut modules: Vec<(PathBuf, Vec<String>)> = files
        .into_iter()
        .filter(|f| !f.starts_with(root.join("bin")))
        .map(|f| {
            let m = module_path(root, &f);
            (f, m)
        })
        .collect();
    modules.sort();
    let known: BTreeSet<String> = modules
        .iter()
        .filter_map(|(_, m)| node_of(stages, m))
        .collect();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, here) in &modules {
        let Some(from) = node_of(stages, here) else {
            continue;
        };
        if here.last().is_some_and(|s| s == "tests") {
            continue;
        }
        let ast = syn::parse_file(&fs::read_to_string(file).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let mut v = Paths {
            here,
            found: Vec::new(),
        };
        v.visit_file(&ast);
        let entry = g.entry(from.clone()).or_default();
        for p in v.found {
            if let Some(to) = reached(stages, &p, &known).filter(|n| *n != from) {
                entry.insert(to);
            }
        }
    }
    g
}

/// Every cycle's modules, one strongly connected component each (Tarjan).
fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    impl<'a> T<'a> {
        fn visit(&mut self, v: &'a str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on.insert(v);
            for w in self.g.get(v).into_iter().flatten() {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let lw = self.low[w.as_str()];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.on.contains(w.as_str()) {
                    let iw = self.index[w.as_str()];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    comp.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    self.out.push(comp);
                }
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.out
}

#[test]
fn no_import_circles() {
    let why = circles_named(&graph());
    assert!(
        why.is_empty(),
        "import circles between xtask's modules:\n{}",
        why.join("\n")
    );
}

/// Each circle of `g`, with the edges that close it.
fn circles_named(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    circles(g)
        .iter()
        .map(|c| {
            let edges: Vec<String> = c
                .iter()
                .flat_map(|a| {
                    g[a].iter()
                        .filter(|b| c.contains(b))
                        .map(move |b| format!("{a} -> {b}"))
                })
                .collect();
            format!("{}: {}", c.join(", "), edges.join("; "))
        })
        .collect()
}

/// The workspace's other crates, each with the folders of its `src/` that
/// hold a module per file (the guest crate's rooms).
const CRATES: &[(&str, &[&str])] = &[
    ("guest/src", &["init", "tests", "benches", "tools"]),
    ("protocol/src", &[]),
    ("module/core/src", &[]),
    ("module/src", &[]),
];

/// No import circle between the modules of the other crates either: the
/// guest crate (its binaries in `src/bin/` are thin entries, left out),
/// the protocol crate, the module's pure core and the module itself.
#[test]
fn no_import_circles_in_any_crate() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut why = Vec::new();
    for (dir, stages) in CRATES {
        for c in circles_named(&graph_of(&top.join(dir), stages)) {
            why.push(format!("{dir}: {c}"));
        }
    }
    assert!(why.is_empty(), "import circles:\n{}", why.join("\n"));
}

/// The check finds a circle, through `super::` and `crate::` paths alike,
/// and sees none in a chain.
#[test]
fn circles_are_found() {
    let g = |edges: &[(&str, &str)]| {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges {
            m.entry(a.to_string()).or_default().insert(b.to_string());
            m.entry(b.to_string()).or_default();
        }
        m
    };
    assert_eq!(
        circles(&g(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])),
        [["a", "b", "c"]]
    );
    assert!(circles(&g(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
    let here = [
        "kernels".to_string(),
        "kdir".to_string(),
        "prepare".to_string(),
    ];
    let mut v = Paths {
        here: &here,
        found: Vec::new(),
    };
    let ast: syn::File = syn::parse_quote! {
        use crate::{plan::runs, kernels::kernel::{self, KernelRequest}};
        use super::super::debian::X;
        fn f() { crate::judge::verdict::judge(); }
        #[cfg(test)]
        mod tests { use crate::report::kcidb; }
    };
    v.visit_file(&ast);
    let known = [
        "judge::verdict",
        "kernels::debian",
        "kernels::kernel",
        "plan::runs",
        "report",
    ];
    let known: BTreeSet<String> = known.iter().map(|s| s.to_string()).collect();
    let nodes: BTreeSet<String> = v
        .found
        .iter()
        .filter_map(|p| reached(STAGES, p, &known))
        .collect();
    assert_eq!(
        nodes.into_iter().collect::<Vec<_>>(),
        [
            "judge::verdict",
            "kernels::debian",
            "kernels::kernel",
            "plan::runs"
        ]
    );
}

/// Every folder of `src/` is in [`STAGES`]: a new one cannot hide its
/// files' circles inside one module.
#[test]
fn every_folder_is_a_stage() {
    for e in fs::read_dir(src()).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                STAGES.contains(&name.as_str()),
                "src/{name}/ is not in STAGES"
            );
        }
    }
}

/// `/init`'s markers are read one way, by the protocol crate's
/// `Marker::find`: no file of `src/` looks for a `TIERKIT-` text itself.
#[test]
fn markers_are_read_by_the_protocol_crate() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut bad = Vec::new();
    for f in files.into_iter().filter(|f| !f.ends_with("tests.rs")) {
        let text = fs::read_to_string(&f).unwrap();
        // Test modules build marker lines as /init would.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for (no, l) in code.lines().enumerate() {
            let reads = [
                "find(\"TIERKIT-",
                "contains(\"TIERKIT-",
                "starts_with(\"TIERKIT-",
                "strip_prefix(\"TIERKIT-",
            ];
            if reads.iter().any(|r| l.contains(r)) {
                bad.push(format!("{}:{}: {}", f.display(), no + 1, l.trim()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "marker text read by hand:\n{}",
        bad.join("\n")
    );
}

/// A stage's rank in the order a boot passes the stages (ARCHITECTURE.md
/// draws it): `util` under everything, then kernels, plan, the console
/// line readers of judge (`printk.rs`, `console.rs`: the QEMU run's live
/// stream reads with them too), the QEMU run, the rest of judge, report,
/// then `boot/mod.rs` (one boot: all of them), the commands and the
/// command line.
fn rank(node: &str) -> Option<usize> {
    let order: &[&[&str]] = &[
        &["util"],
        &["kernels"],
        &["plan"],
        &["judge::printk", "judge::console"],
        &["boot::qemu"],
        &["judge"],
        &["report"],
        &["boot"],
        &["commands"],
        &["cli"],
    ];
    // The most specific name that covers `node` decides (`boot::qemu`
    // before `boot`, `judge::console` before `judge`).
    let covers = |n: &str| node == n || node.starts_with(&format!("{n}::"));
    order
        .iter()
        .enumerate()
        .flat_map(|(i, names)| names.iter().map(move |n| (i, *n)))
        .filter(|(_, n)| covers(n))
        .max_by_key(|(_, n)| n.len())
        .map(|(i, _)| i)
}

/// A stage reads the ones before it and never the ones after.
#[test]
fn stages_import_only_earlier_stages() {
    let g = graph();
    let mut wrong = Vec::new();
    for (from, tos) in &g {
        let Some(rf) = rank(from) else { continue };
        for to in tos {
            if let Some(rt) = rank(to).filter(|&rt| rt > rf) {
                wrong.push(format!("{from} (stage {rf}) -> {to} (stage {rt})"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports of a later stage:\n{}",
        wrong.join("\n")
    );
}
