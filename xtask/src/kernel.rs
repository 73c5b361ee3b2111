//! The test kernel: source, config, build, all cached outside the repo.
//!
//! Stages, each a function with a typed value in hand:
//! [`source`] -> [`KernelSource`], [`configure`] -> [`KernelConfig`],
//! [`build`] -> [`KernelBuild`].
//!
//! Cache layout (`$TIERKIT_CACHE`, default `~/.cache/tierkit`):
//! - `apt/`: a private apt configuration and state (never the system's);
//! - `src/linux-source-7.3/`: the extracted Debian source;
//! - `stage/<source id>[-<profile>]/`: a scratch `O=` dir where the config is
//!   generated (one per [`Profile`]: `linux-source-7.3`, `linux-source-7.3-debug`);
//! - `configs/<fingerprint>.config`: final configs by input fingerprint;
//! - `kernels/<version>-<sha256(.config)[..12]>/`: `O=` build dirs; a build is
//!   complete when it holds the stamp `.tierkit-built`. A `--kernel-src`
//!   tree adds `-custom-<hash of its path>`: a build dir belongs to one tree.

use crate::kconfig::{self, Requirement};
use crate::profile::Profile;
use crate::say;
use crate::util::{self, cmd_stdout, show_cmd};
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Debian's package with the default kernel source.
pub const DEFAULT_PACKAGE: &str = "linux-source-7.3";
/// The private apt configuration's only source.
const APT_SOURCE: &str = "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie-backports main\n";
/// Marks a finished build; written only after `make` succeeded.
pub const STAMP: &str = ".tierkit-built";
/// Kbuild steps of a cold build of this config (used until one was counted).
const DEFAULT_STEPS: u64 = 1850;
/// Minutes a cold build of the debug profile took on this project's 2-core VM.
const DEBUG_BUILD_MINUTES: u64 = 26;
const ARCH: &str = "ARCH=x86_64";
const LLVM: &str = "LLVM=1";

/// A kernel source tree.
#[derive(Clone, Debug)]
pub struct KernelSource {
    pub dir: PathBuf,
    /// `make kernelversion`, e.g. `7.3.4`.
    pub version: String,
    /// Given with `--kernel-src` (the user's tree may change between runs).
    pub custom: bool,
    /// Names the scratch dir: `linux-source-7.3` or `custom-<hash of path>`.
    pub id: String,
}

/// The final, checked `.config` for a source.
#[derive(Clone, Debug)]
pub struct KernelConfig {
    pub src: KernelSource,
    pub text: String,
    /// First 12 hex digits of sha256(.config).
    pub hash: String,
    /// `<version>-<hash>`: the build dir's name.
    pub key: String,
    pub profile: Profile,
}

/// A built kernel: `out_dir` is the KDIR for module builds.
#[derive(Clone, Debug)]
pub struct KernelBuild {
    pub src: PathBuf,
    pub out_dir: PathBuf,
    pub version: String,
    pub config_hash: String,
    pub key: String,
    pub bzimage: PathBuf,
    /// The profile whose fragments made the config.
    pub profile: Profile,
    /// Debian's kernel (`--kernel debian`) rather than one xtask built.
    pub debian: Option<crate::debian::DebianKernel>,
}

/// Source, config and build: what every subcommand that boots calls.
pub fn ensure(
    kernel_src: Option<&Path>,
    fresh_config: bool,
    profile: Profile,
) -> Result<KernelBuild> {
    let src = source(kernel_src)?;
    let cfg = configure(&src, fresh_config, profile)?;
    build(&cfg)
}

// --- source ----------------------------------------------------------------

/// The default Debian source, fetched once, or the user's `--kernel-src`.
pub fn source(kernel_src: Option<&Path>) -> Result<KernelSource> {
    match kernel_src {
        Some(dir) => custom_source(dir),
        None => debian_source(),
    }
}

/// Checks a `--kernel-src` tree without touching it: a kernel with Rust
/// support and x86, never configured or built in place. Returns its
/// canonical path and version; errors are one line.
pub fn check_custom_source(dir: &Path) -> Result<(PathBuf, String)> {
    let dir = dir
        .canonicalize()
        .with_context(|| format!("--kernel-src {}: no such directory", dir.display()))?;
    let bad = |why: String| -> Result<(PathBuf, String)> {
        bail!(
            "--kernel-src {} is not a usable kernel tree: {why}",
            dir.display()
        )
    };
    let makefile = match fs::read_to_string(dir.join("Makefile")) {
        Ok(m) => m,
        Err(_) => return bad("it has no top-level Makefile".into()),
    };
    let version = match kconfig::makefile_version(&makefile) {
        Ok(v) => v,
        Err(e) => return bad(format!("its Makefile is not the kernel's ({e})")),
    };
    if !dir.join("scripts/kconfig/merge_config.sh").is_file() {
        return bad("scripts/kconfig/merge_config.sh is missing".into());
    }
    if !dir.join("rust").is_dir() {
        return bad(format!(
            "it has no rust/ directory (kernel {version} predates Rust support, 6.1+ needed)"
        ));
    }
    if !dir.join("arch/x86").is_dir() {
        return bad("arch/x86 is missing".into());
    }
    // The kernel refuses O= builds from a tree that was configured in place.
    let dirty: Vec<&str> = [".config", "include/config", "arch/x86/include/generated"]
        .into_iter()
        .filter(|p| dir.join(p).exists())
        .collect();
    if !dirty.is_empty() {
        bail!(
            "--kernel-src {d} was configured or built in place (it has {}): the kernel refuses the \
             out-of-tree (O=) builds xtask makes (\"The source tree is not clean\"); save its .config \
             and run `make -C {d} mrproper`, or use a clean checkout (`git -C {d} worktree add ../linux-tierkit`)",
            dirty.join(", "),
            d = dir.display()
        );
    }
    Ok((dir, version))
}

fn custom_source(dir: &Path) -> Result<KernelSource> {
    let (dir, version) = check_custom_source(dir)?;
    let id = format!(
        "custom-{}",
        &util::sha256_hex(dir.to_string_lossy().as_bytes())[..10]
    );
    say!("kernel source: {} (version {version})", dir.display());
    Ok(KernelSource {
        dir,
        version,
        custom: true,
        id,
    })
}

fn debian_source() -> Result<KernelSource> {
    let cache = util::cache_dir()?;
    let dir = cache.join("src").join(DEFAULT_PACKAGE);
    if !dir.join("Makefile").is_file() {
        let _lock = util::lock(&cache.join("src.lock"), "the kernel source")?;
        if !dir.join("Makefile").is_file() {
            fetch_debian_source(&cache, &dir)?;
        }
    }
    let version = kconfig::makefile_version(&fs::read_to_string(dir.join("Makefile"))?)
        .with_context(|| format!("{}/Makefile", dir.display()))?;
    Ok(KernelSource {
        dir,
        version,
        custom: false,
        id: DEFAULT_PACKAGE.into(),
    })
}

/// apt-get options that make apt use only `apt_dir`: its own sources,
/// state, cache and preferences, no system status and no locking.
fn apt_options(c: &Path) -> Vec<String> {
    let d = c.display();
    [
        format!("Dir::Etc={d}/etc"),
        format!("Dir::Etc::SourceList={d}/etc/sources.list"),
        format!("Dir::Etc::SourceParts={d}/etc/sources.list.d"),
        format!("Dir::State={d}/state"),
        format!("Dir::Cache={d}/cache"),
        format!("Dir::Etc::Preferences={d}/etc/preferences"),
        format!("Dir::Etc::PreferencesParts={d}/etc/preferences.d"),
        "APT::Architecture=amd64".into(),
        "Debug::NoLocking=1".into(),
        "Dir::State::status=/dev/null".into(),
        "APT::Sandbox::User=root".into(),
        // Without it `apt-get update` only warns when the mirror is
        // unreachable, and the user sees "Unable to locate package" later.
        "APT::Update::Error-Mode=any".into(),
    ]
    .into_iter()
    .flat_map(|o| ["-o".to_string(), o])
    .collect()
}

/// The private apt configuration in `cache/apt` (its dirs and its only
/// source), then `apt-get update` and `apt-get download PACKAGES` into
/// `dest`. `what` names the download in the spinner.
pub(crate) fn apt_download(cache: &Path, packages: &[&str], dest: &Path, what: &str) -> Result<()> {
    let c = cache.join("apt");
    for d in [
        "state/lists/partial",
        "cache/archives/partial",
        "etc/sources.list.d",
        "etc/preferences.d",
    ] {
        fs::create_dir_all(c.join(d))
            .with_context(|| format!("creating {}", c.join(d).display()))?;
    }
    fs::create_dir_all(dest).with_context(|| format!("creating {}", dest.display()))?;
    fs::write(c.join("etc/sources.list"), APT_SOURCE)?;
    let pb = util::spinner(&format!(
        "fetching {what} from trixie-backports (private apt config in {})",
        c.display()
    ));
    let mut update = Command::new("apt-get");
    update.args(apt_options(&c)).arg("update");
    util::run_logged(update, &cache.join("fetch.log"), |_| {}).context(
        "apt-get update with the private configuration failed (is deb.debian.org reachable?)",
    )?;
    let mut dl = Command::new("apt-get");
    dl.args(apt_options(&c))
        .arg("download")
        .args(packages)
        .current_dir(dest);
    util::run_logged(dl, &cache.join("fetch-download.log"), |l| {
        pb.set_message(format!("apt-get download: {l}"))
    })
    .with_context(|| format!("apt-get download {} failed", packages.join(" ")))?;
    pb.finish_and_clear();
    Ok(())
}

/// Downloads `linux-source-7.3` through a private apt configuration and
/// extracts it to `dest` atomically (temp dir + rename).
fn fetch_debian_source(cache: &Path, dest: &Path) -> Result<()> {
    let t = util::Timer::start();
    let debs = cache.join("apt").join("debs");
    fs::create_dir_all(&debs)?;
    let mut deb = find_deb(&debs)?;
    if deb.is_none() {
        apt_download(cache, &[DEFAULT_PACKAGE], &debs, DEFAULT_PACKAGE)?;
        deb = find_deb(&debs)?;
    }
    let deb = deb.with_context(|| {
        format!(
            "apt-get download left no {DEFAULT_PACKAGE}_*.deb in {}",
            debs.display()
        )
    })?;
    let parent = dest.parent().context("source dir has no parent")?;
    fs::create_dir_all(parent)?;
    let tmp = parent.join(format!(".extract-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(tmp.join("deb"))?;
    let pb = util::spinner(&format!(
        "extracting {}",
        deb.file_name().unwrap_or_default().to_string_lossy()
    ));
    let result = (|| -> Result<()> {
        let mut x = Command::new("dpkg");
        x.arg("-x").arg(&deb).arg(tmp.join("deb"));
        util::run_captured(&mut x)?;
        let tarball = tmp
            .join("deb/usr/src")
            .join(format!("{DEFAULT_PACKAGE}.tar.xz"));
        if !tarball.is_file() {
            bail!(
                "{} holds no usr/src/{DEFAULT_PACKAGE}.tar.xz",
                deb.display()
            );
        }
        let mut tar = Command::new("tar");
        tar.arg("-xf").arg(&tarball).arg("-C").arg(&tmp);
        util::run_captured(&mut tar)?;
        let extracted = tmp.join(DEFAULT_PACKAGE);
        if !extracted.join("Makefile").is_file() {
            bail!(
                "{} did not yield {DEFAULT_PACKAGE}/Makefile",
                tarball.display()
            );
        }
        fs::rename(&extracted, dest)
            .with_context(|| format!("renaming {} to {}", extracted.display(), dest.display()))?;
        Ok(())
    })();
    let _ = fs::remove_dir_all(&tmp);
    pb.finish_and_clear();
    result?;
    say!(
        "kernel source ready in {} ({})",
        dest.display(),
        util::fmt_dur(t.elapsed())
    );
    Ok(())
}

fn find_deb(debs: &Path) -> Result<Option<PathBuf>> {
    let mut found: Vec<PathBuf> = fs::read_dir(debs)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n.starts_with(&format!("{DEFAULT_PACKAGE}_")) && n.ends_with(".deb")
            })
        })
        .collect();
    // The newest download wins: file names do not sort as Debian versions
    // do (7.3.10 < 7.3.4 as text).
    found.sort_by_key(|p| fs::metadata(p).and_then(|m| m.modified()).ok());
    Ok(found.pop())
}

// --- config ----------------------------------------------------------------

/// The fragments of a profile, in merge order: `kconfig/*.config` sorted by
/// name (as the shell glob sorts), then for each of the profile's folders
/// (`kconfig/debug/`) its `*.config`, sorted. Subfolders of `kconfig/` are
/// never read by the default profile.
pub fn fragments(profile: Profile) -> Result<Vec<PathBuf>> {
    fragments_in(&util::repo_root().join("kconfig"), profile)
}

fn fragments_in(kconfig: &Path, profile: Profile) -> Result<Vec<PathBuf>> {
    let list = |dir: &Path| -> Result<Vec<PathBuf>> {
        let mut v: Vec<PathBuf> = fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "config"))
            .collect();
        v.sort();
        if v.is_empty() {
            bail!("no *.config fragments in {}", dir.display());
        }
        Ok(v)
    };
    let mut all = list(kconfig)?;
    for sub in profile.fragment_dirs() {
        all.extend(
            list(&kconfig.join(sub))
                .with_context(|| format!("the {profile} profile's kernel config fragments"))?,
        );
    }
    Ok(all)
}

fn kmake(src: &KernelSource, out: &Path) -> Command {
    let mut cmd = Command::new("make");
    cmd.arg("-C")
        .arg(&src.dir)
        .arg(format!("O={}", out.display()))
        .args([ARCH, LLVM]);
    cmd
}

/// `make rustavailable`, turned into an actionable message.
fn check_rust(src: &KernelSource, stage: &Path) -> Result<()> {
    let mut cmd = kmake(src, stage);
    cmd.arg("rustavailable");
    if let Err(e) = util::run_captured(&mut cmd) {
        bail!(
            "the kernel says Rust is not available ({e:#})\n\
             Fix: `cargo xtask setup` installs everything; by hand: `rustup component add rust-src`, \
             `cargo install --locked bindgen-cli`, `apt-get install clang-19 lld-19 llvm-19 libclang-19-dev` \
             (xtask puts /usr/lib/llvm-19/bin first on PATH). A rustc much newer than the kernel \
             knows can also fail: see Documentation/rust/quick-start.rst in the kernel tree."
        );
    }
    Ok(())
}

/// What the final .config depends on besides the kernel's Kconfig files:
/// the fragments and every tool Kconfig probes. Hashing these lets a warm run
/// skip regenerating the config (about 15 s).
fn config_fingerprint(src: &KernelSource, frags: &[(String, String)]) -> Result<String> {
    let mut h = String::from("tierkit-config-v1\n");
    h.push_str(&format!(
        "{ARCH} {LLVM}\nsrc={}\nversion={}\n",
        src.dir.display(),
        src.version
    ));
    h.push_str(&format!(
        "Makefile={}\n",
        util::sha256_hex(&fs::read(src.dir.join("Makefile"))?)
    ));
    if src.custom {
        // The user's tree may change under us: hash every Kconfig file and
        // the configs tinyconfig reads.
        h.push_str(&format!("kconfig={}\n", hash_kconfig_files(&src.dir)?));
    }
    for (name, text) in frags {
        h.push_str(&format!(
            "fragment {name} {}\n",
            util::sha256_hex(text.as_bytes())
        ));
    }
    for (prog, args) in [
        ("clang", &["--version"][..]),
        ("ld.lld", &["--version"][..]),
        ("rustc", &["--version", "--verbose"][..]),
        ("bindgen", &["--version"][..]),
        ("pahole", &["--version"][..]),
        ("rustc", &["--print", "sysroot"][..]),
    ] {
        h.push_str(&format!(
            "{prog} {args:?}: {}\n",
            cmd_stdout(prog, args).unwrap_or_default()
        ));
    }
    h.push_str(&format!(
        "rust-src={}\n",
        crate::setup::rust_src().is_some()
    ));
    Ok(util::sha256_hex(h.as_bytes())[..24].to_string())
}

fn hash_kconfig_files(dir: &Path) -> Result<String> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
        for e in fs::read_dir(d)? {
            let e = e?;
            let ft = e.file_type()?;
            let p = e.path();
            if ft.is_dir() {
                let n = e.file_name();
                if n != ".git" {
                    walk(&p, out)?;
                }
            } else if ft.is_file() {
                let n = e.file_name();
                let n = n.to_string_lossy();
                let in_configs = p.parent().is_some_and(|pp| pp.ends_with("configs"));
                if n.starts_with("Kconfig") || (in_configs && n.ends_with(".config")) {
                    out.push(p);
                }
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk(dir, &mut files)?;
    files.sort();
    let mut all = Vec::new();
    for f in files {
        all.extend_from_slice(f.to_string_lossy().as_bytes());
        all.extend_from_slice(&fs::read(&f)?);
    }
    Ok(util::sha256_hex(&all))
}

/// tinyconfig + the profile's fragments (merge_config.sh) + olddefconfig,
/// then checks that Kconfig kept every option the fragments ask for.
pub fn configure(src: &KernelSource, fresh: bool, profile: Profile) -> Result<KernelConfig> {
    let cache = util::cache_dir()?;
    let stage_name = format!("{}{}", src.id, profile.suffix());
    let stage = cache.join("stage").join(&stage_name);
    fs::create_dir_all(&stage).with_context(|| format!("creating {}", stage.display()))?;
    let _lock = util::lock(
        &cache.join("stage").join(format!("{stage_name}.lock")),
        "the config stage",
    )?;
    check_rust(src, &stage)?;

    let root = util::repo_root();
    let frag_paths = fragments(profile)?;
    let mut frags = Vec::new();
    for p in &frag_paths {
        let name = p.strip_prefix(&root).unwrap_or(p).display().to_string();
        let text = fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        frags.push((name, text));
    }
    let reqs =
        kconfig::merge_requirements(frags.iter().map(|(n, t)| kconfig::parse_fragment(n, t)));

    let fp = config_fingerprint(src, &frags)?;
    let memo = cache.join("configs").join(format!("{fp}.config"));
    let text = match fs::read_to_string(&memo) {
        Ok(t) if !fresh => {
            if util::verbose() {
                say!(
                    "config: reusing {} (same fragments, source and toolchain)",
                    memo.display()
                );
            }
            check_config(&t, &reqs, &stage)?;
            t
        }
        _ => {
            let t = generate_config(src, &stage, &frag_paths, profile)?;
            check_config(&t, &reqs, &stage)?;
            // Remembered only once it passed the check.
            util::write_atomic(&memo, t.as_bytes())?;
            t
        }
    };
    let hash = kconfig::config_hash(&text);
    let mut key = kconfig::cache_key(&src.version, &text);
    if src.custom {
        // An O= build dir belongs to one source tree: objects of another tree
        // with the same version and config must never be taken for current.
        key = format!("{key}-{}", src.id);
    }
    Ok(KernelConfig {
        src: src.clone(),
        text,
        hash,
        key,
        profile,
    })
}

fn generate_config(
    src: &KernelSource,
    stage: &Path,
    frags: &[PathBuf],
    profile: Profile,
) -> Result<String> {
    let t = util::Timer::start();
    let extra: String = profile
        .fragment_dirs()
        .iter()
        .map(|d| format!(" + kconfig/{d}/*.config"))
        .collect();
    let pb = util::spinner(&format!(
        "configuring the {profile} kernel: tinyconfig + kconfig/*.config{extra} + olddefconfig"
    ));
    let log = stage.join("config.log");
    let mut all_out = String::new();
    let mut step = |mut cmd: Command| -> Result<()> {
        let out = util::run_captured(&mut cmd)?;
        all_out.push_str(&out);
        Ok(())
    };
    let _ = fs::remove_file(stage.join(".config"));
    let mut tiny = kmake(src, stage);
    tiny.arg("tinyconfig");
    step(tiny)?;
    let mut merge = Command::new(src.dir.join("scripts/kconfig/merge_config.sh"));
    merge
        .current_dir(&src.dir)
        .env("KCONFIG_CONFIG", stage.join(".config"))
        .arg("-m")
        .arg("-O")
        .arg(stage)
        .arg(stage.join(".config"))
        .args(frags);
    step(merge)?;
    let mut olddef = kmake(src, stage);
    olddef.arg("olddefconfig");
    step(olddef)?;
    let _ = fs::write(&log, &all_out);
    pb.finish_and_clear();
    if util::verbose() {
        say!(
            "kernel config generated in {} (log: {})",
            util::fmt_dur(t.elapsed()),
            log.display()
        );
    }
    fs::read_to_string(stage.join(".config"))
        .with_context(|| format!("reading {}/.config", stage.display()))
}

fn check_config(text: &str, reqs: &[Requirement], stage: &Path) -> Result<()> {
    let cfg = kconfig::parse_config(text);
    let dropped = kconfig::check(reqs, &cfg);
    if !dropped.is_empty() {
        let list: Vec<String> = dropped.iter().map(|d| format!("  {d}")).collect();
        bail!(
            "Kconfig dropped {} option(s) that tierkit's fragments ask for, usually because a \
             dependency is unmet:\n{}\nThe generated config is {}/.config. Find the missing \
             dependency with `make -C <kernel source> O={} ARCH=x86_64 LLVM=1 menuconfig` \
             (press / and type the symbol), then add it to the fragment.",
            dropped.len(),
            list.join("\n"),
            stage.display(),
            stage.display()
        );
    }
    // Checked separately too: a gigantic range must not be zeroed serially
    // by the allocator (init_on_alloc), whatever the fragments say.
    if cfg
        .get("CONFIG_INIT_ON_ALLOC_DEFAULT_ON")
        .is_some_and(|v| v == "y")
    {
        bail!("CONFIG_INIT_ON_ALLOC_DEFAULT_ON=y: the allocator would zero gigantic ranges serially; keep `# CONFIG_INIT_ON_ALLOC_DEFAULT_ON is not set` in kconfig/mm.config");
    }
    Ok(())
}

// --- build -----------------------------------------------------------------

#[derive(serde::Serialize, serde::Deserialize, Default)]
struct Stamp {
    key: String,
    version: String,
    src: String,
    steps: u64,
    seconds: u64,
}

fn read_stamp(dir: &Path) -> Option<Stamp> {
    serde_json::from_str(&fs::read_to_string(dir.join(STAMP)).ok()?).ok()
}

fn write_stamp(dir: &Path, s: &Stamp) -> Result<()> {
    util::write_atomic(
        &dir.join(STAMP),
        serde_json::to_string_pretty(s)?.as_bytes(),
    )
}

/// Kbuild's quiet output: `  CC      mm/page_alloc.o`.
pub fn is_kbuild_step(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("  ") else {
        return false;
    };
    let tag: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
    !tag.is_empty()
        && tag.len() <= 8
        && tag.chars().all(|c| {
            c.is_ascii_uppercase()
                || c.is_ascii_digit()
                || c == '-'
                || c == '_'
                || c == '['
                || c == ']'
        })
        && rest.len() > tag.len()
}

/// PIDs of `make` processes (not ours) building into `out_dir`.
fn foreign_makes(out_dir: &Path) -> Vec<u32> {
    let me = std::process::id();
    let want_o = format!("O={}", out_dir.display());
    let mut pids = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return pids;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_make = args
            .first()
            .is_some_and(|a| a == "make" || a.ends_with("/make"));
        if is_make && args.iter().any(|a| a == &want_o) {
            pids.push(pid);
        }
    }
    pids
}

fn expected_steps(kernels: &Path) -> u64 {
    fs::read_dir(kernels)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| read_stamp(&e.path()))
        .map(|s| s.steps)
        .filter(|&s| s > 0)
        .max()
        .unwrap_or(DEFAULT_STEPS)
}

/// Builds the kernel into `kernels/<key>/` unless a finished build is there.
pub fn build(cfg: &KernelConfig) -> Result<KernelBuild> {
    let kernels = util::cache_dir()?.join("kernels");
    let out = kernels.join(&cfg.key);
    let result = |out: &Path| KernelBuild {
        src: cfg.src.dir.clone(),
        out_dir: out.to_path_buf(),
        version: cfg.src.version.clone(),
        config_hash: cfg.hash.clone(),
        key: cfg.key.clone(),
        bzimage: out.join("arch/x86/boot/bzImage"),
        profile: cfg.profile,
        debian: None,
    };
    fs::create_dir_all(&kernels)?;
    let _lock = util::lock(
        &kernels.join(format!("{}.lock", cfg.key)),
        "this kernel build",
    )?;

    // Someone (another shell, a hand-started make) may be building it now.
    let others = foreign_makes(&out);
    if !others.is_empty() {
        let pb = util::spinner(&format!(
            "another make (pid {others:?}) is building {}; waiting for it",
            out.display()
        ));
        while !foreign_makes(&out).is_empty() {
            std::thread::sleep(Duration::from_secs(2));
        }
        pb.finish_and_clear();
    }

    let built = out.join(STAMP).is_file();
    if built && !cfg.src.custom {
        say!("kernel {} ({} profile, cached)", cfg.key, cfg.profile);
        return Ok(result(&out));
    }
    let artifacts = ["arch/x86/boot/bzImage", "vmlinux", "Module.symvers"];
    let artifacts_ok = artifacts.iter().all(|a| out.join(a).is_file());
    if !built && artifacts_ok && !cfg.src.custom {
        // A build started by hand with the same steps: its log ends with `done`.
        let log = fs::read_to_string(out.join("build.log")).unwrap_or_default();
        if log
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .is_some_and(|l| l.trim() == "done")
        {
            let steps = log.lines().filter(|l| is_kbuild_step(l)).count() as u64;
            write_stamp(
                &out,
                &Stamp {
                    key: cfg.key.clone(),
                    version: cfg.src.version.clone(),
                    src: cfg.src.dir.display().to_string(),
                    steps,
                    seconds: 0,
                },
            )?;
            say!(
                "kernel {} (adopted a finished build started by hand)",
                cfg.key
            );
            return Ok(result(&out));
        }
    }

    fs::create_dir_all(&out)?;
    let cfg_path = out.join(".config");
    if fs::read_to_string(&cfg_path).ok().as_deref() != Some(cfg.text.as_str()) {
        fs::write(&cfg_path, &cfg.text)?;
    }
    let t = util::Timer::start();
    let est = expected_steps(&kernels);
    let jobs = util::nproc();
    let log = out.join("build.log");
    let what = if built {
        "incremental make in"
    } else if artifacts_ok {
        "finishing"
    } else {
        "building"
    };
    say!(
        "{what} the {} kernel {} with -j{jobs} (log: {})",
        cfg.profile,
        cfg.key,
        log.display()
    );
    if !built && !artifacts_ok {
        say!(
            "a cold build takes several minutes (on 2 cores here: default about 6 min, debug about {} min)",
            DEBUG_BUILD_MINUTES
        );
    }
    let pb = indicatif::ProgressBar::new(est);
    if util::is_tty() {
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner:.green} [{elapsed_precise}] [{bar:30}] {pos}/~{len} {wide_msg}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        pb.enable_steady_tick(Duration::from_millis(200));
    } else {
        pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let mut steps = 0u64;
    let mut last_plain = Instant::now();
    let mut make = kmake(&cfg.src, &out);
    make.arg(format!("-j{jobs}"));
    let shown = show_cmd(&make);
    let res = util::run_logged(make, &log, |line| {
        if is_kbuild_step(line) {
            steps += 1;
            if steps > pb.length().unwrap_or(0) {
                pb.set_length(steps + 50);
            }
            pb.set_position(steps);
            pb.set_message(line.trim().to_string());
            if !util::is_tty() && last_plain.elapsed() >= Duration::from_secs(30) {
                last_plain = Instant::now();
                say!(
                    "kernel build: {steps}/~{est} steps, {}: {}",
                    util::fmt_dur(t.elapsed()),
                    line.trim()
                );
            }
        }
    });
    pb.finish_and_clear();
    res.with_context(|| format!("building kernel {} failed: `{shown}`", cfg.key))?;
    for a in artifacts {
        if !out.join(a).is_file() {
            bail!(
                "`{shown}` succeeded but {} is missing",
                out.join(a).display()
            );
        }
    }
    let prev_steps = read_stamp(&out).map(|s| s.steps).unwrap_or(0);
    write_stamp(
        &out,
        &Stamp {
            key: cfg.key.clone(),
            version: cfg.src.version.clone(),
            src: cfg.src.dir.display().to_string(),
            steps: if built { prev_steps.max(steps) } else { steps },
            seconds: t.elapsed().as_secs(),
        },
    )?;
    say!(
        "kernel {} built in {} ({steps} steps)",
        cfg.key,
        util::fmt_dur(t.elapsed())
    );
    Ok(result(&out))
}

/// Debian's kernel (`--kernel debian`): fetched, extracted, its Rust
/// metadata rebuilt ([`crate::debian::ensure`]); `out_dir` is the tree the
/// module builds against, `bzimage` Debian's vmlinuz.
pub fn ensure_debian() -> Result<KernelBuild> {
    let d = crate::debian::ensure()?;
    let h = &d.prepared.headers;
    Ok(KernelBuild {
        src: d.prepared.dir.clone(),
        out_dir: d.prepared.dir.clone(),
        version: h.release.clone(),
        config_hash: kconfig::config_hash(&h.config),
        key: h.key.clone(),
        bzimage: d.vmlinuz.clone(),
        profile: Profile::Default,
        debian: Some(d),
    })
}

/// `cargo xtask kernel`.
pub fn cmd_kernel(kernel_src: Option<&Path>, fresh_config: bool, profile: Profile) -> Result<()> {
    let k = ensure(kernel_src, fresh_config, profile)?;
    say!("kernel {} from {}", k.version, k.src.display());
    say!("bzImage: {}", k.bzimage.display());
    println!("KDIR={}", k.out_dir.display());
    // The top-level Makefile sets LLVM=1 and PATH itself (see its header).
    say!(
        "build the module by hand with: make KDIR={}",
        k.out_dir.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kbuild_steps() {
        assert!(is_kbuild_step("  CC      mm/page_alloc.o"));
        assert!(is_kbuild_step("  RUSTC L rust/core.o"));
        assert!(is_kbuild_step("  HOSTCC  scripts/basic/fixdep"));
        assert!(is_kbuild_step("  YACC    scripts/kconfig/parser.tab.[ch]"));
        assert!(!is_kbuild_step("make[1]: Entering directory '/x'"));
        assert!(!is_kbuild_step(
            "Kernel: arch/x86/boot/bzImage is ready  (#1)"
        ));
        assert!(!is_kbuild_step("  "));
        assert!(!is_kbuild_step("warning: unused"));
    }

    #[test]
    fn debug_fragments_only_in_the_debug_profile() {
        let d = std::env::temp_dir().join(format!("tierkit-frags-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(d.join("debug")).unwrap();
        for f in [
            "base.config",
            "mm.config",
            "debug/debug.config",
            "debug/x.config",
        ] {
            fs::write(d.join(f), "CONFIG_X=y\n").unwrap();
        }
        fs::write(d.join("README"), "").unwrap();
        let names = |p: Profile| -> Vec<String> {
            fragments_in(&d, p)
                .unwrap()
                .iter()
                .map(|f| f.strip_prefix(&d).unwrap().display().to_string())
                .collect()
        };
        assert_eq!(names(Profile::Default), ["base.config", "mm.config"]);
        assert_eq!(
            names(Profile::Debug),
            [
                "base.config",
                "mm.config",
                "debug/debug.config",
                "debug/x.config"
            ]
        );
        fs::remove_file(d.join("debug/debug.config")).unwrap();
        fs::remove_file(d.join("debug/x.config")).unwrap();
        let e = fragments_in(&d, Profile::Debug).unwrap_err();
        assert!(format!("{e:#}").contains("debug profile"), "{e:#}");
        let _ = fs::remove_dir_all(&d);
    }

    /// The repository's own fragments: the debug one exists and is not read
    /// by the default profile.
    #[test]
    fn repository_fragments() {
        let default = fragments(Profile::Default).unwrap();
        assert!(default
            .iter()
            .all(|f| !f.to_string_lossy().contains("/debug/")));
        let debug = fragments(Profile::Debug).unwrap();
        assert!(debug.ends_with(&[util::repo_root().join("kconfig/debug/debug.config")]));
        assert_eq!(debug.len(), default.len() + 1);
    }

    #[test]
    fn apt_is_private() {
        let o = apt_options(Path::new("/c/apt"));
        assert!(o.iter().any(|s| s == "Dir::State::status=/dev/null"));
        assert!(o
            .iter()
            .any(|s| s == "Dir::Etc::SourceList=/c/apt/etc/sources.list"));
        assert_eq!(o.iter().filter(|s| *s == "-o").count(), 12);
        assert!(o.iter().any(|s| s == "APT::Update::Error-Mode=any"));
        assert!(APT_SOURCE.contains("trixie-backports") && !APT_SOURCE.contains("sid"));
    }
}
