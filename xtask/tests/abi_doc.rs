//! The ABI documents (`Documentation/ABI/testing/dev-tierkit*`) against
//! `module/core/src/uapi.rs`: every ioctl they name with its number
//! (`TK_IOC_X 0x...`) and every `_IOWR(0xB9, N, struct tk_x), S bytes,
//! 0x...` heading give the number, size and command the module defines,
//! and every `struct tk_x { ... }` they draw has the header's fields, in
//! its order.
//!
//! Host only: `cargo test -p xtask --test abi_doc`.

mod doc_tree;

use doc_tree::repo_root;
use std::collections::BTreeMap;
use std::fs;
use std::mem::size_of;
use tierkit_core::uapi::*;

/// An ioctl as the module defines it: its name, argument struct, number
/// (`nr`), argument size and command.
struct Ioctl {
    name: &'static str,
    strukt: &'static str,
    nr: u32,
    size: usize,
    cmd: u32,
}

fn ioctls() -> Vec<Ioctl> {
    macro_rules! io {
        ($name:ident, $s:literal, $t:ty) => {
            Ioctl {
                name: stringify!($name),
                strukt: $s,
                nr: $name & 0xff,
                size: size_of::<$t>(),
                cmd: $name,
            }
        };
    }
    vec![
        io!(TK_IOC_SET_POLICY, "tk_policy", TkPolicy),
        io!(TK_IOC_BULK, "tk_bulk", TkBulk),
        io!(TK_IOC_TASK_NEXT, "tk_task_next", TkTaskNext),
        io!(TK_IOC_SET_GIGANTIC, "tk_gigantic", TkGigantic),
        io!(TK_IOC_CLEAR_BENCH, "tk_clear_bench", TkClearBench),
        io!(TK_IOC_WALK, "tk_walk", TkWalk),
        io!(TK_IOC_PAGE_REFS, "tk_page_refs", TkPageRefs),
        io!(TK_IOC_REBALANCE, "tk_rebalance", TkRebalance),
        io!(TK_IOC_SNAPSHOT, "tk_snapshot", TkSnapshot),
        io!(TK_IOC_MAPPED_FILE, "tk_mapped_file", TkMappedFile),
        io!(TK_IOC_SOCKET_WEIGHTS, "tk_socket_weights", TkSocketWeights),
    ]
}

/// The ABI documents that describe `/dev/tierkit`, with their text.
fn abi_docs() -> Vec<(String, String)> {
    let dir = repo_root().join("Documentation/ABI/testing");
    let mut v: Vec<(String, String)> = fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("dev-tierkit"))
        })
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, fs::read_to_string(&p).unwrap())
        })
        .collect();
    v.sort();
    v
}

/// `0x...` as a number.
fn hex(w: &str) -> Option<u32> {
    let w = w.trim_end_matches([',', ':', ';', ')', '.']);
    u32::from_str_radix(w.strip_prefix("0x")?, 16).ok()
}

/// Every disagreement between the documents' numbers and the module's.
fn number_errors(docs: &[(String, String)]) -> Vec<String> {
    let table = ioctls();
    let mut errors = Vec::new();
    for (file, text) in docs {
        // The documents wrap lines; read them as one run of words.
        let words: Vec<&str> = text.split_whitespace().collect();
        for (i, w) in words.iter().enumerate() {
            // `TK_IOC_X 0x...`: the list of ioctls.
            if let Some(io) = table.iter().find(|io| *w == io.name) {
                if let Some(cmd) = words.get(i + 1).and_then(|n| hex(n)) {
                    if cmd != io.cmd {
                        errors.push(format!(
                            "{file}: {} is {cmd:#x}, the module's is {:#x}",
                            io.name, io.cmd
                        ));
                    }
                }
            }
            // `_IOWR(0xB9, N, struct tk_x), [S bytes,] 0x...`.
            let Some(rest) = w.strip_prefix("_IOWR(") else {
                continue;
            };
            if rest != "0xB9," {
                errors.push(format!("{file}: _IOWR({rest}: the magic is 0xB9"));
                continue;
            }
            let (Some(nr), Some(&"struct"), Some(s)) =
                (words.get(i + 1), words.get(i + 2), words.get(i + 3))
            else {
                continue;
            };
            let nr: u32 = nr.trim_end_matches(',').parse().unwrap_or(u32::MAX);
            let s = s.trim_end_matches([',', ')']);
            let Some(io) = table.iter().find(|io| io.strukt == s) else {
                errors.push(format!("{file}: _IOWR of struct {s}, which no ioctl takes"));
                continue;
            };
            if nr != io.nr {
                errors.push(format!(
                    "{file}: struct {s} with number {nr}; {} is number {}",
                    io.name, io.nr
                ));
            }
            let mut j = i + 4;
            if words.get(j + 1).is_some_and(|b| b.starts_with("bytes")) {
                let size: usize = words[j].parse().unwrap_or(usize::MAX);
                if size != io.size {
                    errors.push(format!(
                        "{file}: struct {s} of {size} bytes; it is {}",
                        io.size
                    ));
                }
                j += 2;
            }
            match words.get(j).and_then(|n| hex(n)) {
                Some(cmd) if cmd == io.cmd => {}
                Some(cmd) => errors.push(format!(
                    "{file}: struct {s}'s command {cmd:#x}; {} is {:#x}",
                    io.name, io.cmd
                )),
                None => errors.push(format!(
                    "{file}: struct {s}'s _IOWR without its command number"
                )),
            }
        }
    }
    errors
}

/// The fields of every `struct tk_x { ... };` in `text`, in order.
fn structs(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let mut cur: Option<(String, Vec<String>)> = None;
    let mut comment = false;
    for line in text.lines() {
        let t = line.trim();
        if let Some((name, fields)) = cur.as_mut() {
            if t.starts_with("};") {
                out.insert(name.clone(), std::mem::take(fields));
                cur = None;
                continue;
            }
            // The code before any comment on the line.
            let mut code = String::new();
            let mut rest = t;
            loop {
                if comment {
                    match rest.find("*/") {
                        Some(k) => {
                            comment = false;
                            rest = &rest[k + 2..];
                        }
                        None => break,
                    }
                } else {
                    match rest.find("/*") {
                        Some(k) => {
                            code.push_str(&rest[..k]);
                            comment = true;
                            rest = &rest[k + 2..];
                        }
                        None => {
                            code.push_str(rest);
                            break;
                        }
                    }
                }
            }
            for decl in code.split(';') {
                if let Some(last) = decl.split_whitespace().last() {
                    let name = last.split('[').next().unwrap();
                    if decl.split_whitespace().count() >= 2 {
                        fields.push(name.to_string());
                    }
                }
            }
        } else if let Some(rest) = t.strip_prefix("struct tk_") {
            if let Some(name) = rest.strip_suffix('{') {
                cur = Some((format!("tk_{}", name.trim()), Vec::new()));
                comment = false;
            }
        }
    }
    out
}

#[test]
fn ioctl_numbers_and_sizes_are_the_modules() {
    let errors = number_errors(&abi_docs());
    assert!(
        errors.is_empty(),
        "the ABI documents disagree with module/core/src/uapi.rs:\n  {}",
        errors.join("\n  ")
    );
}

#[test]
fn every_ioctl_is_listed_with_its_number() {
    let docs = abi_docs();
    let all: String = docs.iter().map(|(_, t)| t.as_str()).collect();
    let words: Vec<&str> = all.split_whitespace().collect();
    for io in ioctls() {
        let listed = words
            .windows(2)
            .any(|w| w[0] == io.name && hex(w[1]) == Some(io.cmd));
        assert!(
            listed,
            "{} {:#x} is not in the ABI documents",
            io.name, io.cmd
        );
    }
}

#[test]
fn drawn_structs_have_the_headers_fields() {
    let header = fs::read_to_string(repo_root().join("include/uapi/linux/tierkit.h")).unwrap();
    let header = structs(&header);
    assert!(header.len() >= 11, "{header:?}");
    let mut errors = Vec::new();
    let mut drawn = 0;
    for (file, text) in abi_docs() {
        for (name, fields) in structs(&text) {
            drawn += 1;
            match header.get(&name) {
                Some(h) if *h == fields => {}
                Some(h) => errors.push(format!(
                    "{file}: struct {name} {{ {} }}; the header's is {{ {} }}",
                    fields.join(", "),
                    h.join(", ")
                )),
                None => errors.push(format!("{file}: struct {name} is not in the header")),
            }
        }
    }
    assert!(
        drawn >= 8,
        "only {drawn} structs drawn in the ABI documents"
    );
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// The checks find a wrong number, size, command or field.
#[test]
fn the_checks_find_what_they_look_for() {
    let doc = |t: &str| vec![("x".to_string(), t.to_string())];
    assert!(number_errors(&doc(
        "_IOWR(0xB9, 10, struct tk_mapped_file), 40 bytes,\n 0xc028b90a:"
    ))
    .is_empty());
    for bad in [
        "_IOWR(0xB9, 9, struct tk_mapped_file), 40 bytes, 0xc028b90a:",
        "_IOWR(0xB9, 10, struct tk_mapped_file), 48 bytes, 0xc028b90a:",
        "_IOWR(0xB9, 10, struct tk_mapped_file), 40 bytes, 0xc028b909:",
        "_IOWR(0xB9, 10, struct tk_mapped_file), 40 bytes: more",
        "TK_IOC_MAPPED_FILE   0xc028b909  (below)",
    ] {
        assert_eq!(number_errors(&doc(bad)).len(), 1, "{bad}");
    }
    let s = structs(
        "  struct tk_x {\n  __u32 a;  /* in: one,\n  two */\n  __u8 b[64];/* c; */\n  };\n",
    );
    assert_eq!(s["tk_x"], ["a", "b"]);
}
