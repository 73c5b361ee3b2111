//! `module/core` is exactly what tierkit.ko compiles: every file of `src/`
//! but lib.rs is included by `module/src/tierkit.rs` with `#[path]`, and
//! what only the host or the guest reads lives in the protocol crate.

use std::fs;
use std::path::Path;

#[test]
fn every_core_file_is_compiled_into_the_module() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = fs::read_to_string(core.join("../src/tierkit.rs")).unwrap();
    let mut missing = Vec::new();
    for e in fs::read_dir(core.join("src")).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if name == "lib.rs" || !name.ends_with(".rs") {
            continue;
        }
        if !root.contains(&format!("#[path = \"../core/src/{name}\"]")) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "module/core/src files tierkit.ko does not compile: {missing:?}"
    );
}
