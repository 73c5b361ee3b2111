//! One figure, one value, with its source. The convention
//! (Documentation/results/README.md):
//!
//! - every section of a results file (`##` and deeper, or the text before
//!   the first, which its sections inherit) that holds a measured figure
//!   names its date (`2026-12-05` or `5 December 2026`), the commit
//!   (7 to 40 hex digits, in backticks or after `at`/`commit`) and the
//!   command (a code span or block running `cargo xtask`, `bash .ci/run`,
//!   a `tk-*` program, ...); the machine is results/README.md's unless a
//!   section names another;
//! - a figure other docs cite is named once, in a results file's
//!   `| figure | value | source |` table: each number of its value is in
//!   the section its source links to, and no doc outside
//!   Documentation/results/ copies the value;
//! - outside Documentation/results/ (the ABI documents included), a
//!   paragraph that gives a test count (`N passed`), a wall time
//!   (`N min`, `N min N s`), a speed-up (`x1.78`), a duration in words
//!   (`close to a minute`, `tens of seconds`, `8 minutes`) or what
//!   something took (`took 45 s`) links to Documentation/results/.
//!
//! Host only: `cargo test -p xtask --test figures`.

mod doc_tree;

use doc_tree::{doc_files, repo_root};
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The results files, or the docs outside Documentation/results/.
fn results(root: &Path) -> Vec<PathBuf> {
    doc_files(root)
        .into_iter()
        .filter(|p| p.starts_with("Documentation/results"))
        .collect()
}

fn other_docs(root: &Path) -> Vec<PathBuf> {
    doc_files(root)
        .into_iter()
        .filter(|p| !p.starts_with("Documentation/results"))
        .collect()
}

/// Splits `s` into words of digits, letters and the rest, for matching.
fn tokens(s: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    let kind = |c: char| {
        if c.is_ascii_digit() || c == '.' || c == ',' {
            0
        } else if c.is_alphanumeric() || c == '/' || c == 'µ' {
            1
        } else {
            2
        }
    };
    for c in s.chars() {
        if !cur.is_empty() && kind(cur.chars().last().unwrap()) != kind(c) {
            out.push(std::mem::take(&mut cur));
        }
        cur.push(c);
    }
    out.push(cur);
    out.into_iter()
        .map(|t| t.trim_end_matches(['.', ',']).to_string())
        .filter(|t| !t.trim().is_empty() && !t.chars().all(|c| !c.is_alphanumeric()))
        .collect()
}

const UNITS: &[&str] = &[
    "s", "ms", "µs", "us", "ns", "min", "MB/s", "GB/s", "GiB/s", "passed",
];

/// The measured figures of a text: a number followed by a unit of
/// [`UNITS`], or `x` and a decimal (a ratio), as `number unit`.
fn figures(text: &str) -> Vec<String> {
    let t = tokens(text);
    let mut out = Vec::new();
    for (i, w) in t.iter().enumerate() {
        let num = !w.is_empty() && w.chars().next().unwrap().is_ascii_digit();
        if num {
            if let Some(u) = t.get(i + 1).filter(|u| UNITS.contains(&u.as_str())) {
                out.push(format!("{w} {u}"));
            }
        }
        if w == "x" {
            if let Some(r) = t
                .get(i + 1)
                .filter(|r| r.contains('.') && r.chars().all(|c| c.is_ascii_digit() || c == '.'))
            {
                out.push(format!("x{r}"));
            }
        }
    }
    out
}

/// The text without fenced blocks' markers (their content kept: sample
/// commands count as commands) and split into sections: (heading, text).
fn sections(text: &str) -> Vec<(String, String)> {
    let mut out = vec![(String::new(), String::new())];
    let mut fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            out.last_mut().unwrap().1.push_str("`\n");
            continue;
        }
        if !fence && line.starts_with("##") {
            out.push((
                line.trim_start_matches('#').trim().to_string(),
                String::new(),
            ));
        }
        let s = &mut out.last_mut().unwrap().1;
        s.push_str(line);
        s.push('\n');
    }
    out
}

fn has_date(s: &str) -> bool {
    let iso = s.as_bytes().windows(10).any(|w| {
        w[..4].iter().all(u8::is_ascii_digit)
            && w[4] == b'-'
            && w[5..7].iter().all(u8::is_ascii_digit)
            && w[7] == b'-'
            && w[8..].iter().all(u8::is_ascii_digit)
    });
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    iso || MONTHS.iter().any(|m| s.contains(&format!(" {m} 20")))
}

/// A commit: 7 to 40 lower-case hex digits, with a letter among them or
/// after the word `commit`.
fn has_commit(s: &str) -> bool {
    let words: Vec<&str> = s.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    words.iter().enumerate().any(|(i, w)| {
        (7..=40).contains(&w.len())
            && w.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            && ((w.chars().any(|c| c.is_ascii_alphabetic())
                && w.chars().any(|c| c.is_ascii_digit()))
                || words[..i].iter().rev().find(|x| !x.is_empty()) == Some(&"commit"))
    })
}

/// A command, or the plain statement that it was not recorded (figures
/// from before the convention; a new figure comes with its command).
fn has_command(s: &str) -> bool {
    [
        "`cargo xtask",
        "`bash .ci/run",
        "`tk-",
        "`TIERKIT_",
        "`./tk-",
        "cargo xtask ",
    ]
    .iter()
    .any(|c| s.contains(c))
        || s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .contains("command was not recorded")
        || s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .contains("commands were not recorded")
}

/// Every results section with a figure but no date, commit or command.
fn unsourced(root: &Path) -> Vec<String> {
    let mut errors = Vec::new();
    for f in results(root) {
        if f.ends_with("README.md") {
            continue;
        }
        let text = fs::read_to_string(root.join(&f)).unwrap();
        let secs = sections(&text);
        let intro = secs[0].1.clone();
        for (title, body) in &secs {
            let figs = figures(body);
            if figs.is_empty() {
                continue;
            }
            let both = format!("{intro}\n{body}");
            let mut lacks = Vec::new();
            if !has_date(body) && !has_date(&intro) {
                lacks.push("a date");
            }
            if !has_commit(&both) {
                lacks.push("a commit");
            }
            if !has_command(&both) {
                lacks.push("a command");
            }
            if !lacks.is_empty() {
                errors.push(format!(
                    "{} section {title:?} gives {} without {}",
                    f.display(),
                    figs[0],
                    lacks.join(", ")
                ));
            }
        }
    }
    errors
}

/// A named figure: its file, value and source link.
#[derive(Debug)]
struct Named {
    file: PathBuf,
    value: String,
    source: String,
}

/// The `| figure | value | source |` rows of the results files.
fn named(root: &Path) -> (HashMap<String, Named>, Vec<String>) {
    let mut map: HashMap<String, Named> = HashMap::new();
    let mut errors = Vec::new();
    for f in results(root) {
        let text = fs::read_to_string(root.join(&f)).unwrap();
        let mut in_table = false;
        for line in text.lines() {
            let cells: Vec<&str> = line
                .trim()
                .trim_matches('|')
                .split('|')
                .map(str::trim)
                .collect();
            if cells == ["figure", "value", "source"] {
                in_table = true;
                continue;
            }
            if !line.trim_start().starts_with('|') {
                in_table = false;
                continue;
            }
            if !in_table || cells.iter().all(|c| c.chars().all(|x| x == '-')) {
                continue;
            }
            let [name, value, source] = cells[..] else {
                errors.push(format!(
                    "{}: a figure row needs 3 cells: {line}",
                    f.display()
                ));
                continue;
            };
            let name = name.trim_matches('`').to_string();
            if let Some(old) = map.get(&name) {
                errors.push(format!(
                    "figure {name} named twice: {} ({}) and {} ({value})",
                    old.file.display(),
                    old.value,
                    f.display()
                ));
                continue;
            }
            map.insert(
                name,
                Named {
                    file: f.clone(),
                    value: value.to_string(),
                    source: source.to_string(),
                },
            );
        }
    }
    (map, errors)
}

/// The section of `file` that a link's `#anchor` names (GitHub's slug).
fn section_of(root: &Path, file: &Path, link: &str) -> Option<String> {
    let target = link.split_once("](")?.1.split(')').next()?;
    let (path, anchor) = target.split_once('#')?;
    let dest = if path.is_empty() {
        file.to_path_buf()
    } else {
        file.parent()?.join(path)
    };
    let text = fs::read_to_string(root.join(dest)).ok()?;
    let slug = |h: &str| -> String {
        h.to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect()
    };
    sections(&text)
        .into_iter()
        .find(|(t, _)| slug(&t.replace('`', "")) == anchor)
        .map(|(_, b)| b)
}

#[test]
fn every_results_figure_has_its_source() {
    let errors = unsourced(&repo_root());
    assert!(
        errors.is_empty(),
        "figures without a date, commit or command:\n  {}",
        errors.join("\n  ")
    );
}

#[test]
fn named_figures_are_named_once_stated_at_their_source_and_not_copied() {
    let root = repo_root();
    let (map, mut errors) = named(&root);
    assert!(
        !map.is_empty(),
        "no | figure | value | source | table in Documentation/results/"
    );
    let others: Vec<(PathBuf, String)> = other_docs(&root)
        .into_iter()
        .map(|p| {
            let t = fs::read_to_string(root.join(&p)).unwrap();
            (p, t)
        })
        .collect();
    for (name, n) in &map {
        let Some(body) = section_of(&root, &n.file, &n.source) else {
            errors.push(format!(
                "figure {name}: its source {} is no section",
                n.source
            ));
            continue;
        };
        let in_source = figures(&body);
        for fig in figures(&n.value) {
            if !in_source.contains(&fig) {
                errors.push(format!(
                    "figure {name}: {fig} is not in its source section {}",
                    n.source
                ));
            }
            for (p, t) in &others {
                if figures(t).contains(&fig) {
                    errors.push(format!(
                        "figure {name}: {} copies {fig}; link to it",
                        p.display()
                    ));
                }
            }
        }
    }
    assert!(
        errors.is_empty(),
        "named figures:\n  {}",
        errors.join("\n  ")
    );
}

/// A wall time in minutes, `N min` (not `min(a, b)`).
fn minutes(text: &str) -> bool {
    text.match_indices(" min").any(|(i, _)| {
        let before = text[..i].chars().last().is_some_and(|c| c.is_ascii_digit());
        let after = text[i + 4..].chars().next();
        before && after.is_none_or(|c| !c.is_alphanumeric() && c != '(')
    })
}

/// A duration given in words (`close to a minute`, `minutes`, `tens of
/// seconds`, `hours`, `8 minutes`, `90 seconds`): a measured figure all the
/// same, and one that drifts from its source unseen (the same GiB's clear
/// was `tens of seconds`, `close to a minute` and `minutes` in three docs;
/// a deadline spelled `8 minutes` outlived the deadline it was computed
/// from).
fn spelled_duration(text: &str) -> Option<String> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    for (i, w) in words.iter().enumerate() {
        let prev = i.checked_sub(1).map(|j| words[j].as_str());
        let counted = prev.is_some_and(|p| p.chars().all(|c| c.is_ascii_digit()));
        let long = matches!(w.as_str(), "minute" | "minutes" | "hour" | "hours");
        let secs = matches!(w.as_str(), "second" | "seconds") && counted;
        let tens = w == "seconds" && matches!(prev, Some("of")) && i >= 2 && words[i - 2] == "tens";
        if long || secs || tens {
            let from = i.saturating_sub(3);
            return Some(words[from..=i].join(" "));
        }
    }
    None
}

/// A time stated as what something took: `took`, `takes`, `lasted` or
/// `lasts`, then within four words a number and a unit of time (`took 45
/// s`, `takes about 3.5 min`). A bound the code sets (`a 15 s bound`,
/// `killed after 20 s`) is no such claim.
fn timed_claim(text: &str) -> bool {
    const TIME: &[&str] = &["s", "ms", "µs", "us", "ns", "min", "h"];
    let t = tokens(text);
    t.iter().enumerate().any(|(i, w)| {
        matches!(
            w.to_lowercase().as_str(),
            "took" | "takes" | "take" | "lasted" | "lasts"
        ) && (i + 1..(i + 6).min(t.len())).any(|j| {
            t[j].starts_with(|c: char| c.is_ascii_digit())
                && t.get(j + 1).is_some_and(|u| TIME.contains(&u.as_str()))
        })
    })
}

/// The kernel-style ABI documents (Documentation/ABI/testing/*), which
/// [`doc_files`] leaves out (they are not Markdown).
fn abi_docs(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(root.join("Documentation/ABI/testing"))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| PathBuf::from("Documentation/ABI/testing").join(e.file_name()))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn other_docs_link_their_figures_to_results() {
    let root = repo_root();
    let mut errors = Vec::new();
    for p in other_docs(&root).into_iter().chain(abi_docs(&root)) {
        let text = fs::read_to_string(root.join(&p)).unwrap();
        let mut fence = false;
        let mut paras = vec![String::new()];
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                fence = !fence;
                continue;
            }
            if line.trim().is_empty() && !fence {
                paras.push(String::new());
            } else if !fence {
                paras.last_mut().unwrap().push_str(line);
                paras.last_mut().unwrap().push('\n');
            }
        }
        for para in paras {
            let t = tokens(&para);
            let measured = t
                .windows(2)
                .any(|w| w[1] == "passed" && w[0].parse::<u32>().is_ok())
                || minutes(&para)
                || figures(&para).iter().any(|f| f.starts_with('x'))
                || spelled_duration(&para).is_some()
                || timed_claim(&para);
            if measured && !para.contains("results/") {
                errors.push(format!(
                    "{}: {}",
                    p.display(),
                    para.lines().next().unwrap_or("")
                ));
            }
        }
    }
    assert!(
        errors.is_empty(),
        "measured figures without a link to Documentation/results/:\n  {}",
        errors.join("\n  ")
    );
}

#[test]
fn the_checks_find_what_they_look_for() {
    assert_eq!(
        figures("took 8 min 38 s, 73 passed, x1.78 and 402 ns; max 3"),
        ["8 min", "38 s", "73 passed", "x1.78", "402 ns"]
    );
    assert!(has_commit("(commit 4310925)"));
    assert!(!has_commit("2026120 pages"));
    assert!(has_date("on 2026-12-05 at"));
    assert!(has_date("(5 December 2026)"));
    assert!(!has_date("12-05"));
    assert!(has_commit("at be2ac06"));
    assert!(!has_commit("at deadbeef-free"));
    assert!(has_command("`cargo xtask test --ci`"));
    for spelled in [
        "a GiB takes close to a minute or more",
        "its clear takes minutes",
        "tens of seconds to fill",
        "an hour",
        "the test's 8 minutes",
        "within 90 seconds",
        "2 hours",
    ] {
        assert!(spelled_duration(spelled).is_some(), "{spelled}");
    }
    for timed in [
        "1 GiB took 45 s",
        "a boot takes about 3.5 min",
        "it lasted 200 ms",
    ] {
        assert!(timed_claim(timed), "{timed}");
    }
    for not in [
        "a 15 s bound",
        "killed after 20 s",
        "took the lock",
        "takes 3 arguments",
    ] {
        assert!(!timed_claim(not), "{not}");
    }
    assert!(minutes("timed out after 40 min, 1,405 messages"));
    assert!(minutes("took 8 min 38 s"));
    assert!(!minutes("(0 .. min(nr_node_ids, 64) - 1)") && !minutes("2 mins"));
    for not in ["within seconds", "10 s", "a second"] {
        assert_eq!(spelled_duration(not), None, "{not}");
    }
}
