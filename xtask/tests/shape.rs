//! The source tree's shape: no source file over [`MAX_FILE_LINES`] lines
//! and no function over [`MAX_FN_LINES`], so that every file does one job a
//! reader can hold. Host test files under a `tests/` directory are
//! excepted from the file limit (they are lists of cases), not from the
//! function limit.
//!
//! Rust functions are found with `syn` (free functions, methods, trait
//! methods with a body, and functions nested in them); a function's length
//! runs from its `fn` keyword to its closing brace, doc comments and
//! attributes not counted. C functions are found by the kernel's own
//! coding style, which tierkit's C follows: a definition's body opens with
//! `{` alone at the start of a line and closes with `}` alone at the start
//! of a line.
//!
//! Host only: `cargo test -p xtask --test shape`.

use std::path::{Path, PathBuf};
use std::process::Command;

use syn::spanned::Spanned;
use syn::visit::Visit;

/// No tracked source file is longer than this.
const MAX_FILE_LINES: usize = 800;
/// No function is longer than this.
const MAX_FN_LINES: usize = 150;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask/ has a parent")
        .to_path_buf()
}

/// The tracked source files (`git ls-files`), relative to the root.
fn sources(root: &Path) -> Vec<PathBuf> {
    let out = Command::new("git")
        .args(["ls-files", "-z", "--", "*.rs", "*.c", "*.h", "*.sh", "*.py"])
        .current_dir(root)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git ls-files failed");
    out.stdout
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| PathBuf::from(String::from_utf8_lossy(s).into_owned()))
        .filter(|p| root.join(p).is_file())
        .collect()
}

/// Whether `rel` is a host test file under a `tests/` directory (a crate's
/// integration tests, not a `src/tests/` module such as the guest's tests).
fn under_tests_dir(rel: &Path) -> bool {
    rel.parent().is_some_and(|d| {
        let parts: Vec<_> = d.components().map(|c| c.as_os_str()).collect();
        parts
            .iter()
            .enumerate()
            .any(|(i, c)| *c == "tests" && (i == 0 || parts[i - 1] != "src"))
    })
}

/// A function's name and its first and last line (1-based).
#[derive(Debug, PartialEq)]
struct Func {
    name: String,
    first: usize,
    last: usize,
}

impl Func {
    fn lines(&self) -> usize {
        self.last + 1 - self.first
    }
}

#[derive(Default)]
struct RustFns(Vec<Func>);

impl RustFns {
    fn push(&mut self, name: String, sig: &syn::Signature, block: &syn::Block) {
        self.0.push(Func {
            name,
            first: sig.fn_token.span().start().line,
            last: block.brace_token.span.close().end().line,
        });
    }
}

impl<'ast> Visit<'ast> for RustFns {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.push(f.sig.ident.to_string(), &f.sig, &f.block);
        syn::visit::visit_item_fn(self, f);
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.push(f.sig.ident.to_string(), &f.sig, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }
    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.push(f.sig.ident.to_string(), &f.sig, block);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

/// The functions of a Rust source file.
fn rust_functions(text: &str) -> Result<Vec<Func>, syn::Error> {
    let file = syn::parse_file(text)?;
    let mut v = RustFns::default();
    v.visit_file(&file);
    Ok(v.0)
}

/// The function definitions of a C source file in kernel style: a `{`
/// alone at the start of a line opens a body, the next `}` alone at the
/// start of a line closes it; the name is the identifier before the first
/// `(` of the lines since the previous top-level item.
fn c_functions(text: &str) -> Vec<Func> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_end() != "{" {
            i += 1;
            continue;
        }
        let Some(end) = (i + 1..lines.len()).find(|&j| lines[j].starts_with('}')) else {
            break;
        };
        // The signature: back to the line that starts the declarator.
        let mut start = i;
        while start > 0 {
            let prev = lines[start - 1];
            if prev.trim().is_empty()
                || prev.starts_with('}')
                || prev.starts_with('#')
                || prev.trim_end().ends_with(';')
                || prev.trim_end().ends_with("*/")
            {
                break;
            }
            start -= 1;
        }
        let sig = lines[start..i].join(" ");
        let name = sig
            .split('(')
            .next()
            .and_then(|head| {
                head.split(|c: char| !c.is_alphanumeric() && c != '_')
                    .rfind(|s| !s.is_empty())
            })
            .unwrap_or("?")
            .to_string();
        // Struct and array initialisers (`... = {`) are not functions.
        if !sig.contains('=') && sig.contains('(') {
            out.push(Func {
                name,
                first: start + 1,
                last: end + 1,
            });
        }
        i = end + 1;
    }
    out
}

#[test]
fn no_source_file_is_too_long() {
    let root = repo_root();
    let mut long = Vec::new();
    for rel in sources(&root) {
        if under_tests_dir(&rel) {
            continue;
        }
        let n = std::fs::read_to_string(root.join(&rel))
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if n > MAX_FILE_LINES {
            long.push(format!("{}: {n} lines", rel.display()));
        }
    }
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines (split them by job):\n{}",
        long.join("\n")
    );
}

#[test]
fn no_function_is_too_long() {
    let root = repo_root();
    let mut long = Vec::new();
    for rel in sources(&root) {
        let ext = rel.extension().and_then(|e| e.to_str()).unwrap_or("");
        let Ok(text) = std::fs::read_to_string(root.join(&rel)) else {
            continue;
        };
        let funcs = match ext {
            "rs" => match rust_functions(&text) {
                Ok(f) => f,
                Err(e) => panic!("{}: does not parse: {e}", rel.display()),
            },
            "c" => c_functions(&text),
            _ => continue,
        };
        for f in funcs.iter().filter(|f| f.lines() > MAX_FN_LINES) {
            long.push(format!(
                "{}:{}: {} is {} lines",
                rel.display(),
                f.first,
                f.name,
                f.lines()
            ));
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines (split them into named steps):\n{}",
        long.join("\n")
    );
}

#[test]
fn rust_function_lengths_are_measured_from_fn_to_closing_brace() {
    let src = "/// doc\n#[inline]\nfn a() {\n    let x = 1;\n}\nimpl S {\n    fn b(&self)\n    {\n    }\n}\ntrait T { fn c() {} fn d(); }\nfn outer() {\n    fn inner() {\n    }\n}\n";
    let f = rust_functions(src).expect("parses");
    let got: Vec<(&str, usize)> = f.iter().map(|f| (f.name.as_str(), f.lines())).collect();
    assert_eq!(
        got,
        [("a", 3), ("b", 3), ("c", 1), ("outer", 4), ("inner", 2)]
    );
}

#[test]
fn c_function_lengths_follow_kernel_style() {
    let src = "static const struct vm_operations_struct ops = {\n\t.fault = f,\n};\n\nstatic int\nshort_one(int a,\n\t  int b)\n{\n\treturn a + b;\n}\n\n/* comment */\nvoid two(void)\n{\n}\n";
    let f = c_functions(src);
    assert_eq!(
        f,
        [
            Func {
                name: "short_one".into(),
                first: 5,
                last: 10
            },
            Func {
                name: "two".into(),
                first: 13,
                last: 15
            },
        ]
    );
}

#[test]
fn only_integration_test_dirs_are_excepted() {
    assert!(under_tests_dir(Path::new("guest/tests/help.rs")));
    assert!(under_tests_dir(Path::new("xtask/tests/doc_tree/mod.rs")));
    assert!(!under_tests_dir(Path::new("guest/src/tests/mm.rs")));
    assert!(!under_tests_dir(Path::new("guest/src/tests/fuzz/suite.rs")));
    assert!(!under_tests_dir(Path::new(
        "guest/src/tests/faults/tests.rs"
    )));
}

/// The host tests skip the unit-test harness of binary targets
/// (`commands::test::HOST_TEST_RUNS`: `--lib --test '*'` and `--doc`), so
/// a binary's root may hold no test and declare no module: its logic and
/// its unit tests live in its crate's library.
#[test]
fn binary_targets_hold_no_unit_tests() {
    let root = repo_root();
    let bins: Vec<PathBuf> = sources(&root)
        .into_iter()
        .filter(|p| {
            p.extension().is_some_and(|e| e == "rs")
                && (p.parent().is_some_and(|d| d.ends_with("src/bin"))
                    || p.file_name().is_some_and(|f| f == "main.rs"))
        })
        .collect();
    assert!(
        bins.len() > 40,
        "found only {} binary roots: {bins:?}",
        bins.len()
    );
    let mut bad = Vec::new();
    for rel in &bins {
        let text = std::fs::read_to_string(root.join(rel)).expect("readable");
        let file = syn::parse_file(&text).expect("parses");
        let tests_or_mods = file.items.iter().any(|i| matches!(i, syn::Item::Mod(_)))
            || text.contains("#[test]")
            || text.contains("cfg(test)");
        if tests_or_mods {
            bad.push(rel.display().to_string());
        }
    }
    assert!(
        bad.is_empty(),
        "binary targets with tests or modules, which `cargo xtask test` would not run: {bad:?}"
    );
}
