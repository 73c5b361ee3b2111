//! The documentation tree the doc checks read (`docs.rs`, `doc_names.rs`,
//! `figures.rs`): the repository's root and its Markdown files.

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask/ has a parent")
        .to_path_buf()
}

/// README.md and ARCHITECTURE.md (if there) and every `*.md` under
/// Documentation/, sorted, relative to `root`.
pub fn doc_files(root: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for top in ["README.md", "ARCHITECTURE.md"] {
        if root.join(top).is_file() {
            v.push(PathBuf::from(top));
        }
    }
    fn walk(root: &Path, rel: &Path, v: &mut Vec<PathBuf>) {
        let Ok(rd) = fs::read_dir(root.join(rel)) else {
            return;
        };
        let mut entries: Vec<_> = rd.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let r = rel.join(e.file_name());
            if root.join(&r).is_dir() {
                walk(root, &r, v);
            } else if r.extension().is_some_and(|x| x == "md") {
                v.push(r);
            }
        }
    }
    walk(root, Path::new("Documentation"), &mut v);
    v
}
