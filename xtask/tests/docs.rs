//! The documentation's shape: README.md stays short and names the two main
//! commands, and every relative Markdown link in README.md, ARCHITECTURE.md
//! and Documentation/**/*.md points at a file that exists (and, with
//! `#anchor`, at a heading of it, by GitHub's slug rules); every ```c
//! example compiles (cc, warnings as errors) against the uapi header.
//!
//! Host only, no guest: `cargo test -p xtask --test docs`.

mod doc_tree;

use doc_tree::{doc_files, repo_root};
use std::collections::HashMap;
use std::fs;
use std::path::{Component, Path, PathBuf};

/// README.md has fewer lines than this.
const README_MAX_LINES: usize = 200;

/// The text outside fenced code blocks, one entry per line (fenced lines
/// are left empty so that line numbers stay right).
fn outside_fences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    for line in text.lines() {
        let t = line.trim_start();
        let marker: String = t.chars().take_while(|&c| c == '`' || c == '~').collect();
        match &fence {
            Some(open) => {
                if marker.len() >= open.len()
                    && marker.starts_with(&open[..1])
                    && t[marker.len()..].trim().is_empty()
                {
                    fence = None;
                }
                out.push(String::new());
            }
            None if marker.len() >= 3
                && (marker.chars().all(|c| c == '`') || marker.chars().all(|c| c == '~')) =>
            {
                fence = Some(marker);
                out.push(String::new());
            }
            None => out.push(line.to_string()),
        }
    }
    out
}

/// `text` without its inline code spans (which may run over lines), with
/// newlines kept.
fn strip_code_spans(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == '`' {
            let n = b[i..].iter().take_while(|&&c| c == '`').count();
            // Find the closing run of exactly n backticks.
            let mut j = i + n;
            let mut close = None;
            while j < b.len() {
                if b[j] == '`' {
                    let m = b[j..].iter().take_while(|&&c| c == '`').count();
                    if m == n {
                        close = Some(j);
                        break;
                    }
                    j += m;
                } else {
                    j += 1;
                }
            }
            match close {
                Some(j) => {
                    // Keep the newlines inside the span.
                    out.extend(b[i..j + n].iter().filter(|&&c| c == '\n'));
                    i = j + n;
                }
                None => {
                    out.extend(&b[i..i + n]);
                    i += n;
                }
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation other than `-`
/// and `_` dropped, spaces to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| {
            if c == ' ' {
                Some('-')
            } else if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c)
            } else {
                None
            }
        })
        .collect()
}

/// Every anchor a Markdown file's headings give, with GitHub's `-1`, `-2`
/// suffixes for repeated headings.
fn anchors(text: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut v = Vec::new();
    for line in outside_fences(text) {
        let t = line.trim_start();
        let hashes = t.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !t[hashes..].starts_with(' ') {
            continue;
        }
        let title = t[hashes..].trim().trim_end_matches('#').trim();
        let title: String = title.chars().filter(|&c| c != '`' && c != '*').collect();
        let s = slug(&title);
        let n = seen.entry(s.clone()).or_insert(0);
        v.push(if *n == 0 {
            s.clone()
        } else {
            format!("{s}-{n}")
        });
        *n += 1;
    }
    v
}

/// The targets of the inline links `[text](target)` of a Markdown text,
/// with their line numbers, outside code blocks and code spans.
fn links(text: &str) -> Vec<(usize, String)> {
    let body = strip_code_spans(&outside_fences(text).join("\n"));
    let mut v = Vec::new();
    for (n, line) in body.lines().enumerate() {
        let mut rest = line;
        while let Some(p) = rest.find("](") {
            let after = &rest[p + 2..];
            let Some(end) = after.find(')') else {
                break;
            };
            // `(path "title")`: the path alone.
            let target = after[..end].split_whitespace().next().unwrap_or("");
            let target = target.trim_start_matches('<').trim_end_matches('>');
            v.push((n + 1, target.to_string()));
            rest = &after[end + 1..];
        }
    }
    v
}

fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:")
}

/// `rel` (relative to `root`) joined with a link's path, normalised; `None`
/// if it leaves `root`.
fn resolve(rel_dir: &Path, path: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in rel_dir.join(path).components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(x) => out.push(x),
            _ => return None,
        }
    }
    Some(out)
}

/// Every broken relative link under `root`, as `file:line: target: why`.
fn broken_links(root: &Path) -> Vec<String> {
    let mut errors = Vec::new();
    let mut anchor_cache: HashMap<PathBuf, Vec<String>> = HashMap::new();
    for file in doc_files(root) {
        let text = fs::read_to_string(root.join(&file)).expect("readable doc file");
        let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
        for (line, target) in links(&text) {
            let where_ = format!("{}:{line}: ({target})", file.display());
            if target.is_empty() {
                errors.push(format!("{where_}: empty link"));
                continue;
            }
            if is_external(&target) {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let dest = if path.is_empty() {
                file.clone()
            } else {
                match resolve(&dir, path) {
                    Some(d) => d,
                    None => {
                        errors.push(format!("{where_}: leaves the repository"));
                        continue;
                    }
                }
            };
            let full = root.join(&dest);
            if !full.exists() {
                errors.push(format!("{where_}: no such file {}", dest.display()));
                continue;
            }
            let Some(anchor) = anchor else {
                continue;
            };
            if dest.extension().is_none_or(|x| x != "md") || !full.is_file() {
                errors.push(format!(
                    "{where_}: an anchor into {}, which is not a Markdown file",
                    dest.display()
                ));
                continue;
            }
            let list = anchor_cache.entry(dest.clone()).or_insert_with(|| {
                anchors(&fs::read_to_string(&full).expect("readable link target"))
            });
            if !list.iter().any(|a| a == anchor) {
                errors.push(format!(
                    "{where_}: {} has no heading with anchor #{anchor}",
                    dest.display()
                ));
            }
        }
    }
    errors
}

#[test]
fn readme_is_short_and_names_the_two_commands() {
    let readme = fs::read_to_string(repo_root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines < README_MAX_LINES,
        "README.md has {lines} lines; keep it under {README_MAX_LINES} and move the rest to Documentation/"
    );
    for cmd in ["cargo xtask run", "cargo xtask test"] {
        assert!(readme.contains(cmd), "README.md must name `{cmd}`");
    }
}

#[test]
fn every_relative_link_resolves() {
    let root = repo_root();
    let files = doc_files(&root);
    assert!(
        files.iter().any(|f| f.starts_with("Documentation")),
        "no Markdown files found under Documentation/"
    );
    let errors = broken_links(&root);
    assert!(
        errors.is_empty(),
        "broken links:\n  {}",
        errors.join("\n  ")
    );
}

#[test]
fn github_slugs() {
    assert_eq!(
        slug("Gigantic pages at first touch: time to first use"),
        "gigantic-pages-at-first-touch-time-to-first-use"
    );
    assert_eq!(
        slug("CXL memory in ZONE_MOVABLE"),
        "cxl-memory-in-zone_movable"
    );
    assert_eq!(slug("/dev/tierkit"), "devtierkit");
    assert_eq!(slug("The harness (xtask/)"), "the-harness-xtask");
    assert_eq!(
        anchors("# A\n## B\n```\n# not a heading\n```\n## B\n### `code` here\n"),
        ["a", "b", "b-1", "code-here"]
    );
}

#[test]
fn link_parsing_skips_code() {
    let text = "see [a](a.md) and `[b](b.md)`\n```\n[c](c.md)\n```\n[d](d.md#x \"title\") `span\nover` [e](<e.md>)\n";
    let got: Vec<String> = links(text).into_iter().map(|(_, t)| t).collect();
    assert_eq!(got, ["a.md", "d.md#x", "e.md"]);
}

/// A scratch repository in the temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("tierkit-docs-test-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("Documentation/mm")).unwrap();
        Scratch(dir)
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.0.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_check_fails_on_broken_links() {
    let s = Scratch::new("broken");
    s.write(
        "README.md",
        "# t\n\n[ok](Documentation/mm/a.md#the-part) [ok too](ARCHITECTURE.md)\n\
         [missing](Documentation/mm/nope.md)\n\
         [bad anchor](Documentation/mm/a.md#no-such-part)\n\
         [here](#t) [not here](#u)\n",
    );
    s.write("ARCHITECTURE.md", "# map\n[up](Documentation/mm/a.md)\n");
    s.write(
        "Documentation/mm/a.md",
        "# A\n\n## The part\n\n[back](../../README.md#t) [gone](../../../outside.md)\n\
         [abi](../ABI/x#y)\n",
    );
    s.write("Documentation/ABI/x", "not markdown\n");
    let errors = broken_links(&s.0);
    let has = |needle: &str| errors.iter().any(|e| e.contains(needle));
    assert!(
        has("(Documentation/mm/nope.md): no such file"),
        "{errors:#?}"
    );
    assert!(has("#no-such-part"), "{errors:#?}");
    assert!(has("(#u)"), "{errors:#?}");
    assert!(
        has("(../../../outside.md): leaves the repository"),
        "{errors:#?}"
    );
    assert!(has("(../ABI/x#y): an anchor into"), "{errors:#?}");
    assert_eq!(errors.len(), 5, "only the broken links: {errors:#?}");

    // Fixed, the same tree passes.
    s.write(
        "README.md",
        "# t\n\n[ok](Documentation/mm/a.md#the-part) [here](#t)\n",
    );
    s.write(
        "Documentation/mm/a.md",
        "# A\n\n## The part\n\n[back](../../README.md#t)\n",
    );
    let errors = broken_links(&s.0);
    assert!(errors.is_empty(), "{errors:#?}");
}

/// The ```c blocks of the documentation, with the file and line each
/// starts at.
fn c_examples(root: &Path) -> Vec<(PathBuf, usize, String)> {
    let mut out = Vec::new();
    for rel in doc_files(root) {
        let Ok(text) = fs::read_to_string(root.join(&rel)) else {
            continue;
        };
        let mut block: Option<(usize, String)> = None;
        for (i, line) in text.lines().enumerate() {
            match &mut block {
                None if line.trim_start() == "```c" => block = Some((i + 2, String::new())),
                Some((start, code)) if line.trim_start() == "```" => {
                    out.push((rel.clone(), *start, std::mem::take(code)));
                    block = None;
                }
                Some((_, code)) => {
                    code.push_str(line);
                    code.push('\n');
                }
                None => {}
            }
        }
    }
    out
}

/// Compiles `code` as a C program from the repository's top (`-I.`, so
/// `#include "include/uapi/linux/tierkit.h"` resolves) with warnings as
/// errors; `Err` carries the compiler's output.
fn compile_c(root: &Path, code: &str, tag: &str) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("tierkit-doc-c-{}-{tag}", std::process::id()));
    fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let src = dir.join("example.c");
    fs::write(&src, code).map_err(|e| e.to_string())?;
    let out = std::process::Command::new("cc")
        .current_dir(root)
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-I."])
        .arg("-o")
        .arg(dir.join("example"))
        .arg(&src)
        .output()
        .map_err(|e| format!("cc: {e}"))?;
    let _ = fs::remove_dir_all(&dir);
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn every_c_example_compiles() {
    let root = repo_root();
    let examples = c_examples(&root);
    assert!(!examples.is_empty(), "no ```c block in the documentation");
    for (i, (file, line, code)) in examples.iter().enumerate() {
        if let Err(e) = compile_c(&root, code, &i.to_string()) {
            panic!(
                "{}:{line}: the C example does not compile:\n{e}",
                file.display()
            );
        }
    }
}

#[test]
fn a_broken_c_example_fails() {
    let root = repo_root();
    // Statements at file scope, as a fragment would have.
    let frag = "#include \"include/uapi/linux/tierkit.h\"\nstruct tk_policy p;\nioctl(0, TK_IOC_SET_POLICY, &p);\n";
    assert!(compile_c(&root, frag, "broken").is_err());
    let ok = "#include \"include/uapi/linux/tierkit.h\"\nint main(void) { struct tk_policy p = { 0 }; return (int)p.mode; }\n";
    assert_eq!(compile_c(&root, ok, "ok"), Ok(()));
}

/// The number a README sentence gives in words (`ten`) or digits.
fn number_word(w: &str) -> Option<usize> {
    const WORDS: [&str; 21] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
    ];
    WORDS
        .iter()
        .position(|x| *x == w)
        .or_else(|| w.parse().ok())
}

/// The word just before `after` in `text` (after the first match), as a number.
fn number_before(text: &str, after: &str) -> Option<usize> {
    let i = text.find(after)?;
    number_word(text[..i].split_whitespace().last()?)
}

/// The word just after `before` in `text`, as a number.
fn number_after(text: &str, before: &str) -> Option<usize> {
    let i = text.find(before)? + before.len();
    number_word(
        text[i..]
            .split_whitespace()
            .next()?
            .trim_end_matches([',', ':', ';']),
    )
}

/// README's quick start tells what a first run boots and needs as the code
/// has it: the guests of `cargo xtask test` (the quick runs and the
/// `xtask-*` tests), the boots of `--full`, and the host memory each
/// topology needs (the smallest host `cargo xtask run` accepts).
#[test]
fn readme_first_run_matches_the_code() {
    use xtask::commands::test::cmd_tests::TESTS;
    use xtask::plan::runs::{FULL_RUNS, QUICK_RUNS};
    let text = fs::read_to_string(repo_root().join("README.md")).unwrap();
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(
        number_after(&text, "`cargo xtask test` boots"),
        Some(QUICK_RUNS.len() + TESTS.len()),
        "README: `cargo xtask test` boots N guests (the quick runs and the xtask-* tests)"
    );
    assert_eq!(
        number_before(&text, "`xtask-*` tests of"),
        Some(TESTS.len())
    );
    assert_eq!(
        number_before(&text, "boots ([the boots]"),
        Some(FULL_RUNS.len()),
        "README: `--full` ... N boots"
    );
    let readme_gib = |what: &str| -> u64 {
        let i = text
            .find(what)
            .unwrap_or_else(|| panic!("README names {what:?}"));
        let before: Vec<&str> = text[..i].split_whitespace().collect();
        assert_eq!(before.last(), Some(&"GiB"), "{what}");
        before[before.len() - 2].parse().unwrap()
    };
    for (topology, what) in [
        ("numa", "for the default `numa` guest"),
        ("cxl", "for `cxl`"),
        ("numa2", "for `numa2`"),
        ("socket2", "for `socket2`"),
    ] {
        let gib = readme_gib(what);
        let on = |mem: u64| {
            xtask::cli::check_args(
                ["cargo xtask", "run", "--topology", topology],
                &xtask::util::validate::Host {
                    mem_total_gib: Some(mem),
                    cwd: Some(repo_root()),
                    stdin_is_terminal: true,
                },
            )
        };
        assert_eq!(on(gib), Ok(()), "{topology} on a {gib} GiB host");
        assert!(
            on(gib - 1).is_err(),
            "{topology}: README's {gib} GiB is more than it needs"
        );
    }
}

/// Every environment variable xtask reads is in xtask.md's Environment
/// table (each moves a path or a tool the docs give by its default).
#[test]
fn every_environment_variable_is_documented() {
    let doc = fs::read_to_string(repo_root().join("Documentation/dev-tools/xtask.md")).unwrap();
    let mut files = Vec::new();
    fn walk(d: &Path, v: &mut Vec<PathBuf>) {
        for e in fs::read_dir(d).unwrap().filter_map(Result::ok) {
            let p = e.path();
            if p.is_dir() {
                walk(&p, v);
            } else if p.extension().is_some_and(|x| x == "rs") {
                v.push(p);
            }
        }
    }
    walk(&repo_root().join("xtask/src"), &mut files);
    let mut missing = Vec::new();
    for f in files {
        let text = fs::read_to_string(&f).unwrap();
        for pat in ["env::var(\"", "env::var_os(\"", "env = \""] {
            for (i, _) in text.match_indices(pat) {
                let name: String = text[i + pat.len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                    .collect();
                let ours = !matches!(name.as_str(), "TERM" | "CARGO" | "HOME" | "PATH" | "");
                if ours && !doc.contains(&format!("`{name}`")) {
                    missing.push(format!("{}: {name}", f.display()));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not in xtask.md's Environment table: {missing:#?}"
    );
}

/// Every flag `cargo xtask help <command>` lists is in xtask.md.
#[test]
fn every_flag_of_the_help_is_documented() {
    let doc = fs::read_to_string(repo_root().join("Documentation/dev-tools/xtask.md")).unwrap();
    let mut missing = Vec::new();
    for cmd in [
        "run", "shell", "test", "bench", "kernel", "module", "build", "setup", "matrix", "merge",
        "lava",
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(["help", cmd])
            .output()
            .unwrap();
        assert!(out.status.success(), "help {cmd}");
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            // Option lines, not their wrapped descriptions.
            let t = line.trim_start();
            if line.len() - t.len() > 6 || !t.starts_with('-') {
                continue;
            }
            let Some(flag) = t
                .split([' ', ','])
                .find(|w| w.starts_with("--") && w.len() > 2)
            else {
                continue;
            };
            let flag = flag.split(['=', '<']).next().unwrap();
            if flag == "--help" || flag == "--verbose" {
                continue;
            }
            let named = doc.match_indices(flag).any(|(i, _)| {
                doc[i + flag.len()..]
                    .chars()
                    .next()
                    .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-'))
            });
            if !named {
                missing.push(format!("{cmd} {flag}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "flags of the help not in xtask.md: {missing:?}"
    );
}

/// A fresh `cargo xtask` builds xtask itself before xtask can say a word:
/// its alias leaves cargo's progress on (not `--quiet`), and README says
/// so.
#[test]
fn the_alias_shows_cargos_progress_while_it_builds_xtask() {
    let cfg = fs::read_to_string(repo_root().join(".cargo/config.toml")).unwrap();
    let alias = cfg
        .lines()
        .find_map(|l| l.trim().strip_prefix("xtask = "))
        .expect("the xtask alias");
    assert!(alias.contains("--package xtask"), "{alias}");
    assert!(
        !alias.contains("--quiet") && !alias.contains(" -q"),
        "{alias}"
    );
    let readme = fs::read_to_string(repo_root().join("README.md")).unwrap();
    assert!(readme.contains("cargo's progress shown"));
}

/// xtask.md's Flags table gives every topology's default of the flags
/// whose default depends on the topology (`--dram`, `--cxl-mem`,
/// `--dram-perf`), as `plan::topology::TOPOLOGIES` has them: each value,
/// and the topologies of each value but the first's.
#[test]
fn per_topology_defaults_are_the_tables() {
    use xtask::plan::topology::TOPOLOGIES;
    let doc = fs::read_to_string(repo_root().join("Documentation/dev-tools/xtask.md")).unwrap();
    let row = |flag: &str| -> String {
        doc.lines()
            .find(|l| l.starts_with(&format!("| `{flag} ")))
            .unwrap_or_else(|| panic!("xtask.md has no Flags row for {flag}"))
            .to_string()
    };
    let mut errors = Vec::new();
    type Value = fn(&xtask::plan::topology::TopologySpec) -> Option<String>;
    let flags: [(&str, Value); 3] = [
        ("--dram", |t| Some(format!("{}G", t.dram_gib))),
        // Only the topologies with memory-only boot nodes take --cxl-mem.
        ("--cxl-mem", |t| {
            (t.mem_nodes > 0).then(|| format!("{}G", t.mem_gib))
        }),
        ("--dram-perf", |t| {
            Some(format!(
                "{}:{}G",
                t.dram_perf.latency_ns, t.dram_perf.bandwidth_gbs
            ))
        }),
    ];
    for (flag, value) in flags {
        let row = row(flag);
        let default = row.split('|').nth(2).unwrap_or("");
        let mut first: Option<String> = None;
        for t in &TOPOLOGIES {
            let Some(v) = value(t) else { continue };
            if !default.contains(&format!("`{v}`")) && !default.contains(&v) {
                errors.push(format!(
                    "{flag}: {}'s default {v} is not in {default:?}",
                    t.name
                ));
            }
            match &first {
                None => first = Some(v),
                Some(f) if *f != v && !default.contains(t.name) => errors.push(format!(
                    "{flag}: {default:?} does not say that {} has {v}",
                    t.name
                )),
                Some(_) => {}
            }
        }
    }
    assert!(
        errors.is_empty(),
        "xtask.md's Flags table:\n  {}",
        errors.join("\n  ")
    );
}

/// xtask.md's table of the boots of `test` is `plan::runs`: a row per run
/// of QUICK_RUNS and FULL_RUNS, in its table, "default profile only" where
/// the run has no debug boot, with its KUnit glob, every userspace test it
/// selects or leaves out (`tk-test-x` or, in a list, `-x`), its
/// `--cxl-online`, `--cxl-interleave` and `--append`.
#[test]
fn the_boots_table_is_the_runs() {
    use xtask::plan::runs::{FULL_RUNS, QUICK_RUNS};
    let doc = fs::read_to_string(repo_root().join("Documentation/dev-tools/xtask.md")).unwrap();
    let names_test = |row: &str, t: &str| {
        let short = t.strip_prefix("tk-test").map(|s| format!("`{s}`"));
        row.contains(&format!("`{t}`")) || short.is_some_and(|s| row.contains(&s))
    };
    let mut errors = Vec::new();
    for (table, runs) in [("QUICK_RUNS", QUICK_RUNS), ("FULL_RUNS", FULL_RUNS)] {
        for r in runs {
            let Some(row) = doc
                .lines()
                .find(|l| l.starts_with(&format!("| `{}` |", r.name)))
            else {
                errors.push(format!("no row for run {}", r.name));
                continue;
            };
            let cell = |i: usize| row.split(" | ").nth(i).unwrap_or("").to_string();
            if !cell(1).contains(table) {
                errors.push(format!("{}: not in {table}: {}", r.name, cell(1)));
            }
            if cell(1).contains("default profile only") == r.debug {
                errors.push(format!(
                    "{}: debug boot {} against {:?}",
                    r.name,
                    r.debug,
                    cell(1)
                ));
            }
            if let Some(online) = r.cxl_online {
                let zone = match online {
                    xtask::plan::topology::CxlOnline::Kernel => "kernel",
                    xtask::plan::topology::CxlOnline::Movable => "movable",
                };
                let want = format!("--cxl-online {zone}");
                if !row.contains(&want) {
                    errors.push(format!("{}: no `{want}`", r.name));
                }
            }
            if let Some(il) = r.cxl_interleave {
                let want = format!("--cxl-interleave {}:{}", il.ways, il.granularity);
                if !row.contains(&want) {
                    errors.push(format!("{}: no `{want}`", r.name));
                }
            }
            if !r.append.is_empty() && !row.contains(r.append) {
                errors.push(format!("{}: no `--append {}`", r.name, r.append));
            }
            let Some(sel) = r.only else {
                if !cell(3).contains("everything") {
                    errors.push(format!("{}: runs everything: {:?}", r.name, cell(3)));
                }
                continue;
            };
            if !sel.kunit.is_empty() && !row.contains(&format!("`{}`", sel.kunit)) {
                errors.push(format!("{}: KUnit `{}` not named", r.name, sel.kunit));
            }
            for t in sel
                .user
                .split(',')
                .chain(sel.skip.split(','))
                .filter(|t| !t.is_empty())
            {
                if !names_test(row, t) {
                    errors.push(format!("{}: {t} not named", r.name));
                }
            }
        }
    }
    assert!(
        errors.is_empty(),
        "xtask.md's boots of `test`:\n  {}",
        errors.join("\n  ")
    );
}

/// xtask.md's "Deadlines of the guest programs" gives each test's own
/// deadline as `protocol/src/deadline.rs` has it: every scaled entry of
/// its table is named (`tk-test-x` or `-x`) with its seconds, and the
/// default is the one named last (`or N s`).
#[test]
fn the_deadlines_are_the_tables() {
    use tierkit_protocol::deadline::{DEFAULT_SECS, TABLE};
    let doc = fs::read_to_string(repo_root().join("Documentation/dev-tools/xtask.md")).unwrap();
    let from = doc
        .find("### Deadlines of the guest programs")
        .expect("xtask.md's deadline section");
    let text = doc[from..].split_whitespace().collect::<Vec<_>>().join(" ");
    let para = &text[..text
        .find("times `tierkit.deadline_scale=`")
        .expect("the scale")];
    let mut errors = Vec::new();
    for d in TABLE.iter().filter(|d| d.scaled) {
        let short = format!("`{}`", d.name.trim_start_matches("tk-test"));
        let Some(at) = para
            .find(&format!("`{}`", d.name))
            .or_else(|| para.find(&short))
        else {
            errors.push(format!("{} ({} s) is not named", d.name, d.secs));
            continue;
        };
        // The first `N s` after the name is its deadline.
        let words: Vec<&str> = para[at..].split_whitespace().collect();
        let said = words
            .windows(2)
            .find(|w| w[1].trim_end_matches([',', ')', ';']) == "s")
            .map(|w| w[0]);
        if said != Some(&d.secs.to_string()) {
            errors.push(format!("{}: {said:?} s, the table's {} s", d.name, d.secs));
        }
    }
    if !para.contains(&format!("or {DEFAULT_SECS} s")) {
        errors.push(format!("the default, {DEFAULT_SECS} s, is not given"));
    }
    assert!(
        errors.is_empty(),
        "xtask.md's deadlines:\n  {}",
        errors.join("\n  ")
    );
}

/// No table is cut in two by a blank line (the rows after it would show
/// as a paragraph of pipes).
#[test]
fn no_table_is_cut_by_a_blank_line() {
    let root = repo_root();
    let mut errors = Vec::new();
    for f in doc_tree::doc_files(&root) {
        let text = fs::read_to_string(root.join(&f)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for i in 2..lines.len() {
            let row = |l: &str| l.trim_start().starts_with('|');
            if row(lines[i])
                && lines[i - 1].trim().is_empty()
                && row(lines[i - 2])
                && !lines[i + 1..].first().is_some_and(|l| l.contains("---"))
            {
                errors.push(format!("{}:{}", f.display(), i + 1));
            }
        }
    }
    assert!(
        errors.is_empty(),
        "a table row after a blank line: {errors:?}"
    );
}

/// A list of the topologies in the docs (`numa, numa2, ...` or
/// `numa|numa2|...`, up to the end of its parenthesis, code span or table
/// cell) names every topology of `TOPOLOGIES`; per-topology values
/// (`numa, numa2; cxl ...`, `--cxl-mem`'s `numa, numa2 and socket2, whole
/// GiB`) are no such list.
#[test]
fn every_list_of_topologies_is_whole() {
    use xtask::plan::topology::TOPOLOGIES;
    let root = repo_root();
    let mut errors = Vec::new();
    let mut lists = 0;
    for f in doc_files(&root) {
        let text = fs::read_to_string(root.join(&f)).unwrap();
        for pat in ["numa, numa2", "numa\\|numa2", "numa|numa2"] {
            for (i, _) in text.match_indices(pat) {
                let rest = &text[i..];
                let end = rest.find([')', '`', ';', '\n']).unwrap_or(rest.len());
                let list = &rest[..end];
                // `numa, numa2; cxl ...`: per-topology defaults, not a list.
                if list.trim_end().ends_with("numa2") || list.contains(" whole ") {
                    continue;
                }
                lists += 1;
                for t in &TOPOLOGIES {
                    if !list.contains(t.name) {
                        errors.push(format!("{}: {list:?} leaves out {}", f.display(), t.name));
                    }
                }
            }
        }
    }
    assert!(lists >= 3, "only {lists} lists of topologies found");
    assert!(errors.is_empty(), "{errors:#?}");
}

/// xtask.md gives the shared directory's 9p mount options as /init uses
/// them (`SHARE_OPTS` in `guest/src/init/modes.rs`; it left out `msize`).
#[test]
fn the_share_options_are_inits() {
    let src = fs::read_to_string(repo_root().join("guest/src/init/modes.rs")).unwrap();
    let opts = src
        .split_once("SHARE_OPTS: &str = \"")
        .and_then(|(_, r)| r.split_once('"'))
        .map(|(o, _)| o)
        .expect("SHARE_OPTS in guest/src/init/modes.rs");
    let doc = fs::read_to_string(repo_root().join("Documentation/dev-tools/xtask.md")).unwrap();
    assert!(
        doc.contains(&format!("`{opts}`")),
        "xtask.md does not give `{opts}`"
    );
}
