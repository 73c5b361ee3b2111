//! The C header `include/uapi/linux/tierkit.h` against `src/uapi.rs`.
//!
//! The header's `#define`s and structs are parsed from its text, a small C
//! program that includes it is generated, compiled with `cc` (with
//! `-Wpadded -Werror`: no implicit padding; `-Wno-type-limits` for its
//! own signedness tests) and run, and what it prints (every constant, every
//! struct's size, every field's offset, size and signedness) is compared with the Rust definitions. The header and the
//! Rust side must name the same constants, structs and fields. Skipped,
//! with a message, only when there is no `cc`.

use std::collections::{BTreeMap, BTreeSet};
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;
use tierkit_core::uapi::*;

/// One field as both sides see it.
#[derive(Debug, PartialEq, Eq)]
struct Field {
    name: String,
    offset: usize,
    size: usize,
    /// `Some(signed)` for integers, `None` for arrays.
    signed: Option<bool>,
}

/// Signedness of a field's type, `None` for arrays.
trait Kind {
    const SIGNED: Option<bool>;
}
impl Kind for u8 {
    const SIGNED: Option<bool> = Some(false);
}
impl Kind for u32 {
    const SIGNED: Option<bool> = Some(false);
}
impl Kind for u64 {
    const SIGNED: Option<bool> = Some(false);
}
impl Kind for i32 {
    const SIGNED: Option<bool> = Some(true);
}
impl<T, const N: usize> Kind for [T; N] {
    const SIGNED: Option<bool> = None;
}

fn field_size<S, F>(_: fn(&S) -> &F) -> usize {
    size_of::<F>()
}

fn field_signed<S, F: Kind>(_: fn(&S) -> &F) -> Option<bool> {
    F::SIGNED
}

/// The fields of a Rust struct, in declaration order.
macro_rules! fields {
    ($t:ty { $($f:ident),* $(,)? }) => {
        vec![$(Field {
            name: stringify!($f).to_string(),
            offset: offset_of!($t, $f),
            size: field_size(|s: &$t| &s.$f),
            signed: field_signed(|s: &$t| &s.$f),
        }),*]
    };
}

/// Every C struct of the ABI: name, size, fields.
fn rust_structs() -> BTreeMap<String, (usize, Vec<Field>)> {
    let mut m = BTreeMap::new();
    m.insert(
        "tk_policy".to_string(),
        (
            size_of::<TkPolicy>(),
            fields!(TkPolicy {
                mode,
                flags,
                nodemask,
                weights
            }),
        ),
    );
    m.insert(
        "tk_bulk".to_string(),
        (
            size_of::<TkBulk>(),
            fields!(TkBulk {
                nr_pages,
                per_node,
                il_prev,
                il_weight
            }),
        ),
    );
    m.insert(
        "tk_task_next".to_string(),
        (
            size_of::<TkTaskNext>(),
            fields!(TkTaskNext { count, _pad, nodes }),
        ),
    );
    m.insert(
        "tk_gigantic".to_string(),
        (
            size_of::<TkGigantic>(),
            fields!(TkGigantic {
                threads,
                placement,
                chunk_kib,
                flags,
                last_elapsed_ns,
                last_workers,
                last_nid,
                last_cpu_node,
                nr_cleared,
            }),
        ),
    );
    m.insert(
        "tk_clear_bench".to_string(),
        (
            size_of::<TkClearBench>(),
            fields!(TkClearBench {
                nid,
                threads,
                placement,
                nr_gigantic,
                chunk_kib,
                workers,
                cpu_node,
                _pad,
                elapsed_ns,
                bytes,
                mbps,
                variant,
            }),
        ),
    );
    m.insert(
        "tk_walk".to_string(),
        (
            size_of::<TkWalk>(),
            fields!(TkWalk {
                addr,
                pfn,
                level,
                nid,
            }),
        ),
    );
    m.insert(
        "tk_page_refs".to_string(),
        (
            size_of::<TkPageRefs>(),
            fields!(TkPageRefs {
                pfn,
                refcount,
                mapcount,
                order,
                nid,
                flags,
                _pad,
            }),
        ),
    );
    m.insert(
        "tk_rebalance".to_string(),
        (
            size_of::<TkRebalance>(),
            fields!(TkRebalance {
                flags,
                rate_pages,
                nodemask,
                budget_pages,
                weights,
                looked,
                misplaced,
                moved,
                no_memory,
                busy,
                elapsed_ns,
            }),
        ),
    );
    m.insert(
        "tk_snapshot".to_string(),
        (size_of::<TkSnapshot>(), fields!(TkSnapshot { addr, len })),
    );
    m.insert(
        "tk_mapped_file".to_string(),
        (
            size_of::<TkMappedFile>(),
            fields!(TkMappedFile {
                pid,
                flags,
                addr,
                start,
                end,
                id,
            }),
        ),
    );
    socket_structs(&mut m);
    m
}

/// The per-socket weights' struct, as [`rust_structs`] lists them.
fn socket_structs(m: &mut BTreeMap<String, (usize, Vec<Field>)>) {
    m.insert(
        "tk_socket_weights".to_string(),
        (
            size_of::<TkSocketWeights>(),
            fields!(TkSocketWeights {
                op,
                flags,
                socket,
                nr_nodes,
                cpu_nodes,
                this_socket,
                has_table,
                weights,
            }),
        ),
    );
}

/// Every constant of the ABI, by its C name.
fn rust_constants() -> BTreeMap<String, u64> {
    [
        ("TIERKIT_IOC_MAGIC", u64::from(TIERKIT_IOC_MAGIC)),
        ("TIERKIT_MAX_NODES", TIERKIT_MAX_NODES as u64),
        (
            "TK_MODE_WEIGHTED_INTERLEAVE",
            u64::from(TK_MODE_WEIGHTED_INTERLEAVE),
        ),
        ("TK_MODE_INTERLEAVE", u64::from(TK_MODE_INTERLEAVE)),
        ("TK_POLICY_F_WEIGHTS", u64::from(TK_POLICY_F_WEIGHTS)),
        ("TK_TASK_NEXT_MAX", TK_TASK_NEXT_MAX as u64),
        ("TK_GIGANTIC_BYTES", TK_GIGANTIC_BYTES),
        ("TK_PLACE_LOCAL", u64::from(TK_PLACE_LOCAL)),
        ("TK_PLACE_REMOTE", u64::from(TK_PLACE_REMOTE)),
        ("TK_PLACE_ANY", u64::from(TK_PLACE_ANY)),
        ("TK_THREADS_AUTO", u64::from(TK_THREADS_AUTO)),
        ("TK_GIGANTIC_F_QUERY", u64::from(TK_GIGANTIC_F_QUERY)),
        ("TK_CLEAR_BENCH_MAX", u64::from(TK_CLEAR_BENCH_MAX)),
        ("TK_IOC_SET_POLICY", u64::from(TK_IOC_SET_POLICY)),
        ("TK_IOC_BULK", u64::from(TK_IOC_BULK)),
        ("TK_IOC_TASK_NEXT", u64::from(TK_IOC_TASK_NEXT)),
        ("TK_IOC_SET_GIGANTIC", u64::from(TK_IOC_SET_GIGANTIC)),
        ("TK_IOC_CLEAR_BENCH", u64::from(TK_IOC_CLEAR_BENCH)),
        ("TK_WALK_NONE", u64::from(TK_WALK_NONE)),
        ("TK_WALK_PTE", u64::from(TK_WALK_PTE)),
        ("TK_WALK_PMD", u64::from(TK_WALK_PMD)),
        ("TK_WALK_PUD", u64::from(TK_WALK_PUD)),
        ("TK_IOC_WALK", u64::from(TK_IOC_WALK)),
        ("TK_PAGE_BUDDY", u64::from(TK_PAGE_BUDDY)),
        ("TK_PAGE_ANON", u64::from(TK_PAGE_ANON)),
        ("TK_IOC_PAGE_REFS", u64::from(TK_IOC_PAGE_REFS)),
        ("TK_REBALANCE_F_DRY_RUN", u64::from(TK_REBALANCE_F_DRY_RUN)),
        ("TK_REBALANCE_F_WEIGHTS", u64::from(TK_REBALANCE_F_WEIGHTS)),
        ("TK_IOC_REBALANCE", u64::from(TK_IOC_REBALANCE)),
        ("TK_IOC_SNAPSHOT", u64::from(TK_IOC_SNAPSHOT)),
        ("TK_IOC_MAPPED_FILE", u64::from(TK_IOC_MAPPED_FILE)),
        ("TK_SOCKET_GET", u64::from(TK_SOCKET_GET)),
        ("TK_SOCKET_SET", u64::from(TK_SOCKET_SET)),
        ("TK_SOCKET_CLEAR", u64::from(TK_SOCKET_CLEAR)),
        ("TK_SOCKET_F_DEVICE", u64::from(TK_SOCKET_F_DEVICE)),
        ("TK_MAX_SOCKETS", u64::from(TK_MAX_SOCKETS)),
        ("TK_IOC_SOCKET_WEIGHTS", u64::from(TK_IOC_SOCKET_WEIGHTS)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn header_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include/uapi/linux/tierkit.h")
}

/// Removes `/* ... */` comments (the header has no `//` ones).
fn strip_comments(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        let j = rest[i..].find("*/").expect("unterminated comment") + i + 2;
        rest = &rest[j..];
    }
    out.push_str(rest);
    out
}

/// What the header declares: `#define` names of the ABI, and each struct's
/// fields (name, whether it is an array), in order.
struct Header {
    defines: BTreeSet<String>,
    structs: BTreeMap<String, Vec<(String, bool)>>,
}

fn parse_header(text: &str) -> Header {
    let text = strip_comments(text);
    let mut defines = BTreeSet::new();
    let mut structs = BTreeMap::new();
    let mut current: Option<(String, Vec<(String, bool)>)> = None;
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("#define") {
            let name = rest
                .split_whitespace()
                .next()
                .expect("#define without name");
            // The include guard is no constant.
            if !name.starts_with('_') {
                defines.insert(name.to_string());
            }
        } else if let Some(rest) = line.strip_prefix("struct ") {
            if let Some(name) = rest.strip_suffix('{') {
                assert!(current.is_none(), "nested struct in the header");
                current = Some((name.trim().to_string(), Vec::new()));
            }
        } else if line == "};" {
            let (name, fields) = current.take().expect("'};' outside a struct");
            structs.insert(name, fields);
        } else if let Some((_, fields)) = current.as_mut() {
            if line.is_empty() {
                continue;
            }
            let decl = line.strip_suffix(';').expect("field without ';'");
            let last = decl.split_whitespace().last().expect("empty field");
            let (name, array) = match last.find('[') {
                Some(i) => (&last[..i], true),
                None => (last, false),
            };
            fields.push((name.to_string(), array));
        }
    }
    assert!(current.is_none(), "unterminated struct");
    Header { defines, structs }
}

/// The C program printing what the header says.
fn c_program(header: &Path, h: &Header) -> String {
    let mut c = format!(
        "#include <stddef.h>\n#include <stdio.h>\n#include \"{}\"\n\nint main(void)\n{{\n",
        header.display()
    );
    for d in &h.defines {
        c += &format!("\tprintf(\"const {d} %llu\\n\", (unsigned long long)({d}));\n");
    }
    for (s, fields) in &h.structs {
        c += &format!("\tprintf(\"size {s} %zu\\n\", sizeof(struct {s}));\n");
        for (f, array) in fields {
            let member = format!("((struct {s} *)0)->{f}");
            let signed = if *array {
                "-1".to_string()
            } else {
                format!("(int)((__typeof__({member}))-1 < 0)")
            };
            c += &format!(
                "\tprintf(\"field {s} {f} %zu %zu %d\\n\", offsetof(struct {s}, {f}), sizeof({member}), {signed});\n"
            );
        }
    }
    c += "\treturn 0;\n}\n";
    c
}

#[test]
fn c_header_matches_uapi_rs() {
    let path = header_path();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let h = parse_header(&text);

    // Same names on both sides.
    let consts = rust_constants();
    let rust_names: BTreeSet<String> = consts.keys().cloned().collect();
    assert_eq!(h.defines, rust_names, "#defines of the header vs uapi.rs");
    let structs = rust_structs();
    let c_structs: BTreeSet<&String> = h.structs.keys().collect();
    let r_structs: BTreeSet<&String> = structs.keys().collect();
    assert_eq!(c_structs, r_structs, "structs of the header vs uapi.rs");
    for (s, fields) in &h.structs {
        let c_names: Vec<&str> = fields.iter().map(|(f, _)| f.as_str()).collect();
        let r_names: Vec<&str> = structs[s].1.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(c_names, r_names, "fields of struct {s}");
    }

    // What the compiler makes of the header.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join("tierkit_uapi_header.c");
    let exe = dir.join("tierkit_uapi_header");
    std::fs::write(&src, c_program(&path, &h)).unwrap();
    let cc = match Command::new("cc")
        .args([
            "-std=gnu11",
            "-Wall",
            "-Wextra",
            "-Wpadded",
            "-Werror",
            "-Wno-type-limits",
            "-o",
        ])
        .arg(&exe)
        .arg(&src)
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!(
                "SKIPPED: no `cc` on PATH, include/uapi/linux/tierkit.h was only \
                 checked by name, not compiled"
            );
            return;
        }
        Err(e) => panic!("running cc: {e}"),
    };
    assert!(
        cc.status.success(),
        "cc failed on {}:\n{}",
        src.display(),
        String::from_utf8_lossy(&cc.stderr)
    );
    let run = Command::new(&exe).output().expect("running the C program");
    assert!(run.status.success());
    let out = String::from_utf8(run.stdout).unwrap();

    let mut c_consts = BTreeMap::new();
    let mut c_sizes = BTreeMap::new();
    let mut c_fields: BTreeMap<String, Vec<Field>> = BTreeMap::new();
    for line in out.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w[0] {
            "const" => {
                c_consts.insert(w[1].to_string(), w[2].parse::<u64>().unwrap());
            }
            "size" => {
                c_sizes.insert(w[1].to_string(), w[2].parse::<usize>().unwrap());
            }
            "field" => c_fields.entry(w[1].to_string()).or_default().push(Field {
                name: w[2].to_string(),
                offset: w[3].parse().unwrap(),
                size: w[4].parse().unwrap(),
                signed: match w[5] {
                    "-1" => None,
                    s => Some(s == "1"),
                },
            }),
            _ => panic!("unexpected output line {line:?}"),
        }
    }
    assert_eq!(c_consts, consts, "constants: C (left) vs Rust (right)");
    for (s, (size, fields)) in &structs {
        assert_eq!(c_sizes[s], *size, "sizeof(struct {s})");
        assert_eq!(&c_fields[s], fields, "fields of struct {s}: C vs Rust");
    }
}
