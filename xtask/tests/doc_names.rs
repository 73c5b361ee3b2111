//! The documentation names only what exists: every repository path it
//! gives (`xtask/src/plan/runs.rs`, `module/src/clear/`, a crate's `src/...`,
//! in text, code spans or the trees of ARCHITECTURE.md), every KUnit case
//! (`tierkit_suite.case`), every tierkit function (`tk_...()`,
//! `tierkit_...()`) and every Rust path (`first_use::BootPool`,
//! `Worker::put`: its last part defined here); and every repository path
//! a source comment names (Rust and C comments, `.ci/run` and
//! `scripts/*.sh`).
//!
//! Host only: `cargo test -p xtask --test doc_names`.

mod doc_tree;

use doc_tree::{doc_files, repo_root};
use std::fs;
use std::path::Path;

/// The top directories of the repository a path in the docs may start with.
const TOPS: &[&str] = &[
    "module/",
    "xtask/",
    "guest/",
    "protocol/",
    "scripts/",
    "kconfig/",
    "tkrun/",
    "Documentation/",
    ".github/",
    ".ci/",
];

/// The crates whose `src/` a bare `src/...` may be under.
const CRATES: &[&str] = &[
    "module",
    "module/core",
    "xtask",
    "guest",
    "protocol",
    "tkrun",
];

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "._/-*<>{}".contains(c)
}

/// The repository paths a text names, with their line numbers.
fn paths(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let chars: Vec<(usize, char)> = line.char_indices().collect();
        let mut i = 0;
        while i < chars.len() {
            let (at, c) = chars[i];
            let starts = (i == 0 || !is_path_char(chars[i - 1].1)) && c != '/';
            let rest = &line[at..];
            if starts && (TOPS.iter().any(|t| rest.starts_with(t)) || rest.starts_with("src/")) {
                let p: String = rest.chars().take_while(|&c| is_path_char(c)).collect();
                let p = p.trim_end_matches(['.', ',']).to_string();
                i += p.chars().count().max(1);
                // The kernel's own files (`scripts/sign-file`, the kernel's
                // `Documentation/...`) and build products are not ours.
                let near = |a: usize, b: usize| line.get(a..b.min(line.len())).unwrap_or("");
                let theirs = near(at.saturating_sub(40), at).contains("kernel's")
                    || near(at + p.len(), at + p.len() + 40).contains("kernel's");
                let built = p.ends_with(".o") || p.ends_with(".ko");
                if !theirs && !built {
                    out.push((n + 1, p));
                }
            } else {
                i += 1;
            }
        }
    }
    out
}

/// Whether `p` (with `*` or `<...>` standing for any name from there on)
/// exists under `base`.
fn exists(base: &Path, p: &str) -> bool {
    let cut = p.find(['*', '<', '{']).unwrap_or(p.len());
    let prefix = &p[..cut];
    if cut < p.len() {
        // The directory part before the pattern must exist.
        let dir = &prefix[..prefix.rfind('/').map_or(0, |i| i + 1)];
        return base.join(dir).exists();
    }
    base.join(prefix).exists()
}

fn path_exists(root: &Path, p: &str) -> bool {
    if p.starts_with("src/") {
        CRATES.iter().any(|c| exists(&root.join(c), p))
    } else {
        exists(root, p)
    }
}

#[test]
fn every_repository_path_exists() {
    let root = repo_root();
    let mut missing = Vec::new();
    for d in doc_files(&root) {
        let text = fs::read_to_string(root.join(&d)).unwrap();
        for (line, p) in paths(&text) {
            if !path_exists(&root, &p) {
                missing.push(format!("{}:{line}: {p}", d.display()));
            }
        }
        // A `../` path in a code span: from the doc's directory, inside
        // the repository.
        let dir = d.parent().unwrap_or(Path::new(""));
        for (line, p) in code_spans(&text) {
            if p.starts_with("../") {
                let ups = p.matches("../").count();
                if ups > dir.components().count() || !exists(&root.join(dir), &p) {
                    missing.push(format!("{}:{line}: {p}", d.display()));
                }
            }
        }
    }
    assert!(missing.is_empty(), "paths that do not exist: {missing:#?}");
}

/// The comment lines of the sources (`//` in Rust and C outside test
/// files; `#` in `.ci/run` and `scripts/*.sh`), the rest blanked so that
/// line numbers stay: code comments name files too, and go stale as docs
/// do when a file moves.
fn source_comments(root: &Path) -> Vec<(std::path::PathBuf, String)> {
    fn walk(root: &Path, rel: &Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(rd) = fs::read_dir(root.join(rel)) else {
            return;
        };
        for e in rd.filter_map(Result::ok) {
            let name = e.file_name().to_string_lossy().to_string();
            let r = rel.join(&name);
            if root.join(&r).is_dir() {
                if !["target", "tests", "node_modules"].contains(&name.as_str()) {
                    walk(root, &r, out);
                }
            } else if (name.ends_with(".rs") || name.ends_with(".c") || name.ends_with(".h"))
                && name != "tests.rs"
            {
                out.push(r);
            }
        }
    }
    let mut files = Vec::new();
    for top in ["module", "xtask/src", "guest/src", "protocol/src", "tkrun"] {
        walk(root, Path::new(top), &mut files);
    }
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = fs::read_to_string(root.join(&f)).unwrap_or_default();
        let comments: Vec<&str> = text
            .lines()
            .map(|l| l.trim_start())
            .map(|l| {
                if l.starts_with("//") || l.starts_with("* ") {
                    l
                } else {
                    ""
                }
            })
            .collect();
        out.push((f, comments.join("\n")));
    }
    let mut scripts = vec![std::path::PathBuf::from(".ci/run")];
    if let Ok(rd) = fs::read_dir(root.join("scripts")) {
        let mut v: Vec<_> = rd
            .filter_map(Result::ok)
            .map(|e| std::path::PathBuf::from("scripts").join(e.file_name()))
            .filter(|p| p.extension().is_some_and(|x| x == "sh"))
            .collect();
        v.sort();
        scripts.extend(v);
    }
    for f in scripts {
        let text = fs::read_to_string(root.join(&f)).unwrap_or_default();
        let comments: Vec<&str> = text
            .lines()
            .map(|l| {
                if l.trim_start().starts_with('#') {
                    l
                } else {
                    ""
                }
            })
            .collect();
        out.push((f, comments.join("\n")));
    }
    out
}

/// Every repository path a source comment names exists, but a source
/// location in a sample log line (`at module/tierkit.rs:40`). In code, a
/// bare `src/...` may be any crate's or tree's, and `Documentation/...` is
/// most often the kernel's: only ours count, a `.md` page or a tierkit ABI
/// file.
#[test]
fn every_repository_path_in_source_comments_exists() {
    let root = repo_root();
    let mut missing = Vec::new();
    for (f, comments) in source_comments(&root) {
        let lines: Vec<&str> = comments.lines().collect();
        for (line, p) in paths(&comments) {
            let ours = TOPS.iter().any(|t| p.starts_with(t))
                && (!p.starts_with("Documentation/")
                    || p.ends_with(".md")
                    || p.contains("tierkit"));
            if !ours {
                continue;
            }
            let text = lines[line - 1];
            let located = text
                .find(p.as_str())
                .and_then(|at| text[at + p.len()..].strip_prefix(':'))
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()));
            if !located
                && !path_exists(&root, &p)
                && !path_exists(&root.join(f.parent().unwrap()), &p)
            {
                missing.push(format!("{}:{line}: {p}", f.display()));
            }
        }
    }
    assert!(missing.is_empty(), "paths that do not exist: {missing:#?}");
}

#[test]
fn path_finding() {
    let got: Vec<String> = paths(
        "see `xtask/src/plan/runs.rs`, src/offline/ and (module/src/clear/).\n\
         not mm/mempolicy.c or /sys/module/x or rust/*.rmeta; xtask/src/*.rs\n\
         the kernel's scripts/sign-file, module/tierkit.ko\n",
    )
    .into_iter()
    .map(|x| x.1)
    .collect();
    assert_eq!(
        got,
        [
            "xtask/src/plan/runs.rs",
            "src/offline/",
            "module/src/clear/",
            "xtask/src/*.rs"
        ]
    );
    let root = repo_root();
    assert!(path_exists(&root, "xtask/src/plan/runs.rs"));
    assert!(path_exists(&root, "src/plan/runs.rs"));
    assert!(!path_exists(&root, "src/offline/"));
    assert!(path_exists(&root, "xtask/src/*.rs"));
    assert!(!path_exists(&root, "xtask/nope/*.rs"));
}

/// The words of `text` that look like `NAME()` or `suite.case`, in code
/// spans.
fn code_spans(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut parts = line.split('`');
        parts.next();
        while let (Some(inside), Some(_)) = (parts.next(), parts.next()) {
            out.push((n + 1, inside.to_string()));
        }
    }
    out
}

/// Every function name defined in the repository's Rust and C sources.
fn defined_functions(root: &Path) -> std::collections::HashSet<String> {
    let mut set = std::collections::HashSet::new();
    fn walk(d: &Path, set: &mut std::collections::HashSet<String>) {
        let Ok(rd) = fs::read_dir(d) else { return };
        for e in rd.filter_map(Result::ok) {
            let p = e.path();
            let name = e.file_name();
            if p.is_dir() {
                if name != "target" && name != ".git" {
                    walk(&p, set);
                }
            } else if p
                .extension()
                .is_some_and(|x| x == "rs" || x == "c" || x == "h")
            {
                let text = fs::read_to_string(&p).unwrap_or_default();
                for w in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                    if w.starts_with("tk_") || w.starts_with("tierkit_") {
                        set.insert(w.to_string());
                    }
                }
            }
        }
    }
    walk(root, &mut set);
    set
}

/// The `tierkit_suite.case` names of a line (no glob characters).
fn kunit_refs(line: &str) -> Vec<(String, String)> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = Vec::new();
    for (i, _) in line.match_indices("tierkit_") {
        if line[..i]
            .chars()
            .next_back()
            .is_some_and(|c| word(c) || c == '/')
        {
            continue;
        }
        let suite: String = line[i..].chars().take_while(|&c| word(c)).collect();
        let rest = &line[i + suite.len()..];
        let Some(rest) = rest.strip_prefix('.') else {
            continue;
        };
        let case: String = rest.chars().take_while(|&c| word(c)).collect();
        let after = rest[case.len()..].chars().next();
        if !case.is_empty()
            && !matches!(after, Some('*' | '?' | '[' | '.'))
            && ![
                "ko", "rs", "py", "c", "h", "md", "json", "toml", "log", "txt", "yaml",
            ]
            .contains(&case.as_str())
        {
            out.push((suite, case));
        }
    }
    out
}

#[test]
fn kunit_references() {
    assert_eq!(
        kunit_refs("(during KUnit tierkit_clear.failing_worker_eio) `tierkit_topology.*` tierkit.ko tierkit_wi_abi.x*"),
        [("tierkit_clear".to_string(), "failing_worker_eio".to_string())]
    );
}

#[test]
fn every_kunit_case_and_tierkit_function_exists() {
    let root = repo_root();
    let tests = xtask::plan::names::Tests::of_tree(&root);
    let fns = defined_functions(&root);
    let mut missing = Vec::new();
    for d in doc_files(&root) {
        let text = fs::read_to_string(root.join(&d)).unwrap();
        // `tierkit_suite.case` anywhere, sample output included.
        for (n, l) in text.lines().enumerate() {
            for (suite, case) in kunit_refs(l) {
                let ok = tests
                    .kunit
                    .iter()
                    .any(|(su, cases)| *su == suite && cases.iter().any(|c| *c == case));
                if !ok {
                    missing.push(format!(
                        "{}:{}: KUnit case {suite}.{case}",
                        d.display(),
                        n + 1
                    ));
                }
            }
        }
        for (line, span) in code_spans(&text) {
            let s = span.trim();
            // `tk_name()` / `tierkit_name()`.
            if let Some(name) = s.strip_suffix("()") {
                if (name.starts_with("tk_") || name.starts_with("tierkit_"))
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !fns.contains(name)
                {
                    missing.push(format!("{}:{line}: function {s}", d.display()));
                }
            }
        }
    }
    assert!(missing.is_empty(), "names that do not exist: {missing:#?}");
}

/// Items of the kernel's own Rust crate (`rust/kernel/`) the docs name:
/// not in this repository.
const KERNEL_CRATE_ITEMS: &[&str] = &["Queue::enqueue", "RawWorkItem::__enqueue"];

/// Every name defined in the repository's Rust sources (functions,
/// types, constants, modules, statics, enum variants).
fn defined_items(root: &Path) -> std::collections::HashSet<String> {
    let mut set = std::collections::HashSet::new();
    fn walk(d: &Path, set: &mut std::collections::HashSet<String>) {
        let Ok(rd) = fs::read_dir(d) else { return };
        for e in rd.filter_map(Result::ok) {
            let p = e.path();
            if p.is_dir() {
                if e.file_name() != "target" && e.file_name() != ".git" {
                    walk(&p, set);
                }
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = fs::read_to_string(&p).unwrap_or_default();
                // Enum variants: a capitalised name that starts a line and
                // is followed by `,`, `(`, ` {` or ` =`.
                for l in text.lines().map(str::trim) {
                    let name: String = l
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    let rest = &l[name.len()..];
                    if name.starts_with(|c: char| c.is_ascii_uppercase())
                        && [",", "(", " {", " ="].iter().any(|t| rest.starts_with(t))
                    {
                        set.insert(name);
                    }
                }
                let words: Vec<&str> = text
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty())
                    .collect();
                for w in words.windows(2) {
                    if matches!(
                        w[0],
                        "fn" | "struct" | "enum" | "const" | "mod" | "type" | "trait" | "static"
                    ) {
                        set.insert(w[1].to_string());
                    }
                }
            }
        }
    }
    walk(root, &mut set);
    set
}

/// `module::Item` and `Type::method` in code spans name something this
/// repository defines (its last part), unless it is std's or the kernel
/// crate's.
#[test]
fn every_rust_path_the_docs_name_exists() {
    let root = repo_root();
    let items = defined_items(&root);
    let mut missing = Vec::new();
    for d in doc_files(&root) {
        let text = fs::read_to_string(root.join(&d)).unwrap();
        for (line, span) in code_spans(&text) {
            let s = span.trim();
            let parts: Vec<&str> = s.split("::").collect();
            let plain = parts.len() >= 2
                && parts.iter().all(|p| {
                    !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                });
            if !plain || matches!(parts[0], "std" | "core" | "alloc" | "kernel") {
                continue;
            }
            if KERNEL_CRATE_ITEMS.contains(&s) {
                continue;
            }
            if !items.contains(*parts.last().unwrap()) {
                missing.push(format!("{}:{line}: {s}", d.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "Rust paths that name nothing here: {missing:#?}"
    );
}

/// The `cargo test -p PKG --test NAME` commands of a text (lines joined,
/// so a command wrapped over two lines counts): (PKG, NAME).
fn test_commands(text: &str) -> Vec<(String, String)> {
    let words: Vec<&str> = text
        .split_whitespace()
        .map(|w| w.trim_matches(['`', '(', ')', ',', ';', ':', '.']))
        .collect();
    words
        .windows(6)
        .filter(|w| w[0] == "cargo" && w[1] == "test" && w[2] == "-p" && w[4] == "--test")
        .map(|w| (w[3].to_string(), w[5].to_string()))
        .collect()
}

/// Every `cargo test -p PKG --test NAME` in the docs names a package of
/// the workspace and one of its integration tests (`tests/NAME.rs`).
#[test]
fn every_test_command_names_a_test_that_exists() {
    let root = repo_root();
    let cargo = fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members: Vec<&str> = cargo
        .lines()
        .find_map(|l| l.strip_prefix("members = "))
        .expect("the workspace's members")
        .trim_matches(['[', ']'])
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .collect();
    let package_dir = |pkg: &str| {
        members.iter().find(|m| {
            fs::read_to_string(root.join(m).join("Cargo.toml"))
                .is_ok_and(|t| t.lines().any(|l| l.trim() == format!("name = \"{pkg}\"")))
        })
    };
    let mut errors = Vec::new();
    let mut seen = 0;
    for f in doc_files(&root) {
        let text = fs::read_to_string(root.join(&f)).unwrap();
        for (pkg, name) in test_commands(&text) {
            seen += 1;
            match package_dir(&pkg) {
                None => errors.push(format!("{}: no package {pkg}", f.display())),
                Some(dir)
                    if !root
                        .join(dir)
                        .join("tests")
                        .join(format!("{name}.rs"))
                        .is_file() =>
                {
                    errors.push(format!(
                        "{}: `cargo test -p {pkg} --test {name}`: no {dir}/tests/{name}.rs",
                        f.display()
                    ))
                }
                Some(_) => {}
            }
        }
    }
    assert!(
        seen >= 5,
        "only {seen} `cargo test -p PKG --test NAME` in the docs"
    );
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    assert_eq!(
        test_commands("run `cargo test -p xtask --test\ndoc_names` (or"),
        [("xtask".to_string(), "doc_names".to_string())]
    );
}

/// Every guest program the docs name (`tk-test-*`, `tk-bench-*`,
/// `tk-demo*`, `tk-calibrate`, ...) is a binary of `guest/src/bin/`, or the
/// stem of a glob (`tk-test-runner-*`); `tk-test-x` is the docs' name for
/// any test.
#[test]
fn every_guest_program_named_exists() {
    let root = repo_root();
    let bins: Vec<String> = fs::read_dir(root.join("guest/src/bin"))
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".rs"))
                .map(str::to_string)
        })
        .collect();
    let mut errors = Vec::new();
    for f in doc_files(&root) {
        let text = fs::read_to_string(root.join(&f)).unwrap();
        for (i, _) in text.match_indices("tk-") {
            if i > 0 && {
                let c = text.as_bytes()[i - 1] as char;
                c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '/' || c == '.'
            } {
                continue;
            }
            let name: String = text[i..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
                .collect();
            let name = name.trim_end_matches('-');
            let glob = text[i + name.len()..].starts_with(['*', '-']);
            let ours = ["tk-test-", "tk-bench-", "tk-demo"]
                .iter()
                .any(|p| name.starts_with(p))
                || [
                    "tk-run",
                    "tk-calibrate",
                    "tk-workload",
                    "tk-stress",
                    "tk-fuzz",
                    "tk-init",
                ]
                .contains(&name);
            if !ours || name == "tk-test-x" || bins.iter().any(|b| b == name) {
                continue;
            }
            if glob && bins.iter().any(|b| b.starts_with(name)) {
                continue;
            }
            errors.push(format!("{}: {name}", f.display()));
        }
    }
    errors.sort();
    errors.dedup();
    assert!(errors.is_empty(), "no such guest program: {errors:#?}");
}

/// ARCHITECTURE.md draws every room: each source file of the guest's rooms,
/// xtask's stage folders, the protocol crate and the module (`name.rs`, or
/// its folder `name/`) is named there, tests apart (`tests.rs`,
/// `kunit.rs`). The reverse of [`every_repository_path_exists`].
#[test]
fn architecture_names_every_source_file() {
    let root = repo_root();
    let arch = fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    const ROOMS: &[&str] = &[
        "guest/src",
        "guest/src/tests",
        "guest/src/benches",
        "guest/src/tools",
        "guest/src/init",
        "xtask/src",
        "xtask/src/kernels",
        "xtask/src/plan",
        "xtask/src/boot",
        "xtask/src/judge",
        "xtask/src/report",
        "xtask/src/cli",
        "xtask/src/commands",
        "xtask/src/util",
        "protocol/src",
        "module/core/src",
        "module/src",
        "module/src/clear",
        "module/src/mapping",
    ];
    let test_file =
        |n: &str| matches!(n, "mod.rs" | "lib.rs" | "main.rs" | "tests.rs" | "kunit.rs");
    let named = |n: &str| {
        arch.match_indices(n).any(|(i, _)| {
            let before = arch[..i].chars().last();
            before.is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
        })
    };
    let mut missing = Vec::new();
    for room in ROOMS {
        let Ok(rd) = fs::read_dir(root.join(room)) else {
            missing.push(format!("{room} (no such folder)"));
            continue;
        };
        for e in rd.filter_map(Result::ok) {
            let n = e.file_name().to_string_lossy().into_owned();
            let p = e.path();
            if p.is_dir() {
                if n == "bin" || named(&format!("{n}/")) {
                    continue;
                }
                // A folder is drawn when its files are.
                let files: Vec<String> = fs::read_dir(&p)
                    .unwrap()
                    .filter_map(Result::ok)
                    .map(|f| f.file_name().to_string_lossy().into_owned())
                    .filter(|f| f.ends_with(".rs") && !test_file(f))
                    .collect();
                if files.iter().any(|f| !named(f)) {
                    missing.push(format!("{room}/{n}/"));
                }
            } else if n.ends_with(".rs") && !test_file(&n) && !named(&n) {
                missing.push(format!("{room}/{n}"));
            }
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not name: {missing:#?}"
    );
}
