//! Every guest binary (`src/bin/*.rs`, found by listing the directory, so
//! a new one is covered without touching this file) answers `--help` and
//! `-h` with its usage on stdout, exits 0 within a second and does
//! nothing else: no test report, nothing on stderr. (On this host there
//! is no /dev/tierkit: a binary that started its work would fail, or
//! hang, instead.)

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Binaries that do not answer `--help` yet, each with why.
const NOT_YET: &[(&str, &str)] = &[];

/// How long a binary may take to answer. A binary that starts its work
/// instead runs for minutes (benchmarks, fuzzing, 1 GiB clears) or fails at
/// once without /dev/tierkit; 1 s was too short for a binary's start on a
/// host loaded by guests (seen failing on a different binary each run).
const LIMIT: Duration = Duration::from_secs(10);

/// The names of the binaries of `src/bin/`, sorted.
fn bins() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bin");
    let mut v: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .filter_map(|p| Some(p.file_stem()?.to_str()?.to_string()))
        .collect();
    v.sort();
    v
}

/// Where cargo put the binaries of this package for this test run.
fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_tk-demo"))
        .parent()
        .expect("a binary has a directory")
        .to_path_buf()
}

struct Answer {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// Runs `exe arg`, killing it after [`LIMIT`] (`code` is then `None`).
fn run(exe: &Path, arg: &str) -> Answer {
    let start = Instant::now();
    let scratch = std::env::temp_dir();
    let mut child = Command::new(exe)
        .arg(arg)
        .current_dir(&scratch)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let code = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st.code();
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let took = start.elapsed();
    Answer {
        code,
        stdout: out_t.join().unwrap_or_default(),
        stderr: err_t.join().unwrap_or_default(),
        took,
    }
}

#[test]
fn every_binary_answers_help_and_does_nothing_else() {
    let all = bins();
    for (name, _) in NOT_YET {
        assert!(
            all.iter().any(|b| b == name),
            "{name} is in NOT_YET but not in src/bin: drop it from the list"
        );
    }
    let dir = bin_dir();
    let mut checked = 0;
    let mut failures = Vec::new();
    for bin in all.iter().filter(|b| !NOT_YET.iter().any(|(n, _)| n == b)) {
        let exe = dir.join(bin);
        assert!(exe.is_file(), "{} was not built", exe.display());
        for arg in ["--help", "-h"] {
            let a = run(&exe, arg);
            let mut why = Vec::new();
            match a.code {
                None => why.push(format!("still running after {LIMIT:?}: killed")),
                Some(0) => {}
                Some(c) => why.push(format!("exit {c}")),
            }
            if a.took > LIMIT {
                why.push(format!("took {:?}", a.took));
            }
            if a.stdout.trim().is_empty() {
                why.push("no usage on stdout".into());
            } else if !a.stdout.contains(bin.as_str()) {
                why.push("the usage does not name the binary".into());
            }
            // What `tierkit_guest::harness::report::Report` prints once a binary
            // is at work (a usage may well mention the protocol).
            let start = format!("# {bin}: start");
            if a.stdout.lines().any(|l| {
                l == start
                    || l.starts_with("ok - ")
                    || l.starts_with("not ok - ")
                    || l.starts_with("TIERKIT-JSON {")
            }) {
                why.push("it started its work (report lines on stdout)".into());
            }
            if !a.stderr.is_empty() {
                why.push(format!("stderr: {}", a.stderr.trim()));
            }
            if !why.is_empty() {
                failures.push(format!("{bin} {arg}: {}", why.join("; ")));
            }
            checked += 1;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // At least every binary of today but the NOT_YET ones, twice.
    assert!(checked >= 2 * 20, "only {checked} runs");
    eprintln!("{checked} runs of {} binaries answered", checked / 2);
}
