//! `tierkit.ko`: an out-of-tree build against the cached kernel.
//!
//! Under `--profile debug` the build runs clippy (`CLIPPY=1`) with every
//! warning an error and rustc's diagnostics as JSON
//! ([`Profile::module_make_args`]); [`Diagnostics`] turns them back into the
//! human text and into a list of findings (file:line, lint, message) for the
//! failure message.

use crate::kernels::kernel::KernelBuild;
use crate::kernels::profile::Profile;
use crate::say;
use crate::util::{self, show_cmd};
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The built module.
#[derive(Clone, Debug)]
pub struct ModuleBuild {
    pub ko: PathBuf,
}

/// The `make` that builds the module: the same one `make KDIR=...` runs,
/// plus the profile's arguments.
pub fn make_command(kernel: &KernelBuild) -> Command {
    let mut cmd = Command::new("make");
    cmd.arg("-C")
        .arg(&kernel.out_dir)
        .arg(format!("M={}", util::repo_root().join("module").display()))
        .args(["LLVM=1", "ARCH=x86_64"])
        // The test interfaces (TK_IOC_WALK, TK_IOC_PAGE_REFS, debugfs
        // test/): the guests' tests use them; a plain `make` leaves them out.
        .arg("TIERKIT_TEST=1")
        .args(kernel.profile.module_make_args())
        .arg(format!("-j{}", util::nproc()));
    cmd
}

/// Builds `module/tierkit.ko` (incremental; about a second when unchanged).
pub fn build(kernel: &KernelBuild) -> Result<ModuleBuild> {
    if let Some(d) = &kernel.debian {
        // Debian's gcc-built kernel: in the private root, from a copy.
        return Ok(ModuleBuild {
            ko: crate::kernels::kdir::build_module(&d.prepared, true)?,
        });
    }
    // Kbuild writes its objects into module/: one build at a time.
    let _lock = util::lock(&util::out_dir().join("module.lock"), "the module build")?;
    let mut cmd = make_command(kernel);
    let shown = show_cmd(&cmd);
    // The copy of this kernel's last build, if nothing it was built from
    // has changed since: a build for another kernel in between (another
    // boot of the same `test`) left module/'s objects to that kernel, and
    // Kbuild would compile everything again.
    let ko = util::out_dir().join(format!("tierkit-{}.ko", kernel.key));
    let stamp = ko.with_extension("ko.inputs");
    let inputs = inputs_digest(kernel, &shown)?;
    if ko.is_file() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(inputs.as_str()) {
        if util::verbose() {
            say!(
                "tierkit.ko for {}: unchanged since its last build ({})",
                kernel.key,
                ko.display()
            );
        }
        return Ok(ModuleBuild { ko });
    }
    // Until the new copy is in place, no stamp vouches for it.
    let _ = std::fs::remove_file(&stamp);
    if util::verbose() {
        say!("$ {shown}");
    }
    let _slow = util::say_if_slow(format!(
        "building tierkit.ko ({} profile; Kbuild compiles the module's Rust and its C shim; measured times: Documentation/results/tests.md, \"Timings\")",
        kernel.profile
    ));
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("could not start `{shown}`"))?;
    let mut raw = String::from_utf8_lossy(&out.stdout).into_owned();
    raw.push_str(&String::from_utf8_lossy(&out.stderr));
    let diags = Diagnostics::parse(&raw);
    if !out.status.success() {
        if kernel.profile == Profile::Debug && !diags.findings.is_empty() {
            bail!(
                "{}\n{}\n`{shown}` failed ({})",
                diags.summary(),
                diags.rendered.trim_end(),
                out.status
            );
        }
        // 80 lines: a Rust compile error with its notes is long.
        bail!(
            "building tierkit.ko failed: `{shown}` failed ({}):\n{}",
            out.status,
            util::tail_lines(&diags.text, 80)
        );
    }
    // Compiler warnings are worth seeing even when the build succeeds.
    if util::verbose() || diags.text.contains("warning") {
        eprint!("{}", diags.text);
    }
    let built = util::repo_root().join("module/tierkit.ko");
    if !built.is_file() {
        bail!("`{shown}` succeeded but {} does not exist", built.display());
    }
    // A copy per kernel, taken under the lock: a concurrent build against
    // another kernel cannot swap it before the initramfs is written.
    util::write_atomic(&ko, &std::fs::read(&built)?)?;
    util::write_atomic(&stamp, inputs.as_bytes())?;
    Ok(ModuleBuild { ko })
}

/// A digest of what `tierkit.ko` is built from: the `make` command line
/// (kernel directory, profile, flags), the environment make reads (the
/// compilers on `PATH`, `KCFLAGS`, `KRUSTFLAGS`, ...), the kernel image's
/// size and time (a rebuilt kernel), and the path and contents of
/// every source file of the module (`Kbuild`, `Makefile`, `src/`, and the
/// pure logic in `core/src/` that the module includes).
fn inputs_digest(kernel: &KernelBuild, make: &str) -> Result<String> {
    let root = util::repo_root().join("module");
    let mut files = vec![root.join("Kbuild"), root.join("Makefile")];
    for dir in [root.join("src"), root.join("core/src")] {
        collect_files(&dir, &mut files)?;
    }
    files.sort();
    let mut data = Vec::new();
    data.extend_from_slice(make.as_bytes());
    // What make and Kbuild take from the environment: the compilers found
    // on PATH, and the flags a user may add.
    for var in [
        "PATH",
        "LLVM",
        "KCFLAGS",
        "KRUSTFLAGS",
        "KCPPFLAGS",
        "CC",
        "RUSTC",
    ] {
        data.extend_from_slice(format!("\n{var}={:?}", std::env::var_os(var)).as_bytes());
    }
    let image = std::fs::metadata(&kernel.bzimage)
        .with_context(|| format!("reading {}", kernel.bzimage.display()))?;
    data.extend_from_slice(format!("\n{} {:?}\n", image.len(), image.modified().ok()).as_bytes());
    for f in files {
        data.extend_from_slice(f.to_string_lossy().as_bytes());
        data.push(0);
        data.extend(std::fs::read(&f).with_context(|| format!("reading {}", f.display()))?);
        data.push(0);
    }
    Ok(util::sha256_hex(&data))
}

/// Every source file (`.rs`, `.c`, `.h`) under `dir`, recursively.
fn collect_files(dir: &std::path::Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e?.path();
        if p.is_dir() {
            collect_files(&p, out)?;
        } else if matches!(
            p.extension().and_then(|x| x.to_str()),
            Some("rs" | "c" | "h")
        ) {
            out.push(p);
        }
    }
    Ok(())
}

/// One rustc/clippy diagnostic as `--error-format=json` prints it (the
/// fields xtask reads).
#[derive(Deserialize)]
struct JsonDiagnostic {
    message: String,
    code: Option<JsonCode>,
    level: String,
    spans: Vec<JsonSpan>,
    rendered: Option<String>,
}

#[derive(Deserialize)]
struct JsonCode {
    code: String,
}

#[derive(Deserialize)]
struct JsonSpan {
    file_name: String,
    line_start: usize,
    column_start: usize,
    is_primary: bool,
}

/// A problem rustc or clippy found in the module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// `module/src/dev.rs` (paths relative to module/ get that prefix).
    pub file: String,
    pub line: usize,
    pub column: usize,
    /// `clippy::ptr_as_ptr`, `unused_variables`, `E0308`, or `-` for none.
    pub lint: String,
    /// `error` (every warning is one under -Dwarnings) or `warning`.
    pub level: String,
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}: {} {}: {}",
            self.file, self.line, self.column, self.level, self.lint, self.message
        )
    }
}

/// The module build's output with rustc's JSON diagnostics taken apart.
#[derive(Clone, Debug, Default)]
pub struct Diagnostics {
    /// Everything, with each JSON diagnostic replaced by its rendered text.
    pub text: String,
    /// The rendered diagnostics alone.
    pub rendered: String,
    pub findings: Vec<Finding>,
}

impl Diagnostics {
    pub fn parse(output: &str) -> Diagnostics {
        let mut d = Diagnostics::default();
        for line in output.lines() {
            let parsed = line
                .trim_start()
                .starts_with('{')
                .then(|| serde_json::from_str::<JsonDiagnostic>(line.trim()).ok())
                .flatten();
            let Some(j) = parsed else {
                d.text.push_str(line);
                d.text.push('\n');
                continue;
            };
            if let Some(r) = &j.rendered {
                d.text.push_str(r);
                d.rendered.push_str(r);
            }
            let span = j
                .spans
                .iter()
                .find(|s| s.is_primary)
                .or_else(|| j.spans.first());
            // `aborting due to N previous errors` and friends have no span.
            let Some(span) = span else { continue };
            if !matches!(j.level.as_str(), "error" | "warning") {
                continue;
            }
            let file = if span.file_name.starts_with('/') {
                let root = util::repo_root();
                match std::path::Path::new(&span.file_name).strip_prefix(&root) {
                    Ok(rel) => rel.display().to_string(),
                    Err(_) => span.file_name.clone(),
                }
            } else {
                format!("module/{}", span.file_name)
            };
            d.findings.push(Finding {
                file,
                line: span.line_start,
                column: span.column_start,
                lint: j.code.map_or_else(|| "-".to_string(), |c| c.code),
                level: j.level,
                message: j.message,
            });
        }
        d
    }

    /// The headline and one line per finding.
    pub fn summary(&self) -> String {
        let clippy = self
            .findings
            .iter()
            .filter(|f| f.lint.starts_with("clippy::"))
            .count();
        let mut s = format!(
            "the module does not build cleanly under --profile debug (CLIPPY=1, warnings are errors): \
             {} problem(s), {clippy} of them clippy lints:",
            self.findings.len()
        );
        for f in &self.findings {
            s.push_str(&format!("\n  {f}"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The module's sources, the pure logic it includes, and nothing
    /// Kbuild writes (objects, `.cmd` files).
    #[test]
    fn the_inputs_are_the_sources() {
        let root = util::repo_root().join("module");
        let mut files = Vec::new();
        collect_files(&root.join("src"), &mut files).unwrap();
        collect_files(&root.join("core/src"), &mut files).unwrap();
        assert!(files.contains(&root.join("src/tierkit.rs")));
        assert!(files.contains(&root.join("src/shim.c")));
        assert!(files.contains(&root.join("core/src/interleave.rs")));
        assert!(files.iter().all(|f| !f.to_string_lossy().ends_with(".o")));
    }

    /// What Kbuild prints for `make CLIPPY=1 KRUSTFLAGS='-Dwarnings
    /// --error-format=json'` with two clippy findings (rustc 1.95's JSON).
    const OUTPUT: &str = r#"make: Entering directory '/root/.cache/tierkit/kernels/7.3.4-5fcba77bc30f'
make[1]: Entering directory '/work/wt-debug/module'
  CLIPPY [M] src/tierkit.o
{"$message_type":"diagnostic","message":"casting raw pointers to the same type and constness is unnecessary (`*mut u8` -> `*mut u8`)","code":{"code":"clippy::unnecessary_cast","explanation":null},"level":"error","spans":[{"file_name":"src/dev.rs","byte_start":1,"byte_end":2,"line_start":212,"line_end":212,"column_start":22,"column_end":40,"is_primary":true,"text":[],"label":null,"suggested_replacement":null,"suggestion_applicability":null,"expansion":null}],"children":[],"rendered":"error: casting raw pointers to the same type and constness is unnecessary (`*mut u8` -> `*mut u8`)\n   --> src/dev.rs:212:22\n"}
{"$message_type":"diagnostic","message":"unsafe block missing a safety comment","code":{"code":"clippy::undocumented_unsafe_blocks","explanation":null},"level":"error","spans":[{"file_name":"/work/wt-debug/module/src/clear/pool.rs","byte_start":1,"byte_end":2,"line_start":88,"line_end":90,"column_start":9,"column_end":10,"is_primary":true,"text":[],"label":null,"suggested_replacement":null,"suggestion_applicability":null,"expansion":null}],"children":[],"rendered":"error: unsafe block missing a safety comment\n  --> src/clear/pool.rs:88:9\n"}
{"$message_type":"diagnostic","message":"aborting due to 2 previous errors","code":null,"level":"error","spans":[],"children":[],"rendered":"error: aborting due to 2 previous errors\n\n"}
make[3]: *** [/root/.cache/tierkit/src/linux-source-7.3/scripts/Makefile.build:362: src/tierkit.o] Error 1
"#;

    #[test]
    fn clippy_json_becomes_findings_and_text() {
        // Kbuild may hand rustc absolute paths: those under the repository
        // are shown relative to it.
        let root = util::repo_root();
        let output = OUTPUT.replace("/work/wt-debug", &root.display().to_string());
        let d = Diagnostics::parse(&output);
        assert_eq!(d.findings.len(), 2, "{:?}", d.findings);
        assert_eq!(
            d.findings[0].to_string(),
            "module/src/dev.rs:212:22: error clippy::unnecessary_cast: casting raw pointers to the same type and constness is unnecessary (`*mut u8` -> `*mut u8`)"
        );
        let f1 = &d.findings[1];
        assert_eq!(f1.file, "module/src/clear/pool.rs");
        assert_eq!((f1.line, f1.column), (88, 9));
        assert_eq!(f1.lint, "clippy::undocumented_unsafe_blocks");
        // No JSON is left in the human text; the rendered text is there.
        assert!(!d.text.contains("\"$message_type\""));
        assert!(d
            .text
            .contains("error: unsafe block missing a safety comment\n"));
        assert!(d.text.contains("CLIPPY [M] src/tierkit.o"));
        assert!(d.rendered.contains("aborting due to 2 previous errors"));
        let s = d.summary();
        assert!(s.contains("2 problem(s), 2 of them clippy lints:"), "{s}");
        assert!(s.contains("\n  module/src/dev.rs:212:22: error clippy::unnecessary_cast: "));
    }

    #[test]
    fn plain_output_is_kept() {
        let text = "  RUSTC [M] src/tierkit.o\nwarning: unused variable: `x`\n";
        let d = Diagnostics::parse(text);
        assert!(d.findings.is_empty());
        assert_eq!(d.text, text);
    }
}
