//! Host tests of `module --kdir`: kernel releases, symvers and Rust
//! exports, the plan for a headers tree, config changes.

use super::build::is_build_output;
use super::prepare::debian_make_vars;
use super::*;

#[test]
fn kernel_release_and_version() {
    assert_eq!(
        parse_kernel_release("7.3.4+deb13-amd64\n").unwrap(),
        "7.3.4+deb13-amd64"
    );
    assert!(parse_kernel_release("\n").is_err());
    assert!(parse_kernel_release("7.3 4").is_err());
    assert_eq!(release_version("7.3.4+deb13-amd64"), Some((7, 3, 4)));
    assert_eq!(release_version("6.8.0-45-generic"), Some((6, 8, 0)));
    assert_eq!(release_version("7.3-rc2"), Some((7, 3, 0)));
    assert_eq!(release_version("7.3.4"), Some((7, 3, 4)));
    assert_eq!(release_version("x7.3"), None);
    assert_eq!(release_version("7"), None);
}

#[test]
fn cache_key_follows_release_and_config() {
    let a = cache_key("7.3.4+deb13-amd64", "CONFIG_RUST=y\n");
    assert!(a.starts_with("7.3.4+deb13-amd64-"));
    assert_eq!(a.len(), "7.3.4+deb13-amd64-".len() + 12);
    assert_ne!(
        a,
        cache_key("7.3.4+deb13-amd64", "CONFIG_RUST=y\nCONFIG_X=y\n")
    );
    assert_ne!(a, cache_key("7.3.4+deb13-cloud-amd64", "CONFIG_RUST=y\n"));
    assert_eq!(a, cache_key("7.3.4+deb13-amd64", "CONFIG_RUST=y\n"));
}

const SYMVERS: &str = "0x00000000\t_RNvNtCs1234_6kernel5alloc3foo\tvmlinux\tEXPORT_SYMBOL_GPL\t\n\
0x12345678\tkmalloc_trace\tvmlinux\tEXPORT_SYMBOL\t\n\
0x00000000\t_RNvCsabc_4core3bar\tvmlinux\tEXPORT_SYMBOL_GPL\t\n\
0x00000000\t_RNvCsx_3cxl3baz\tdrivers/cxl/core/cxl_core\tEXPORT_SYMBOL_GPL\tCXL\n\
garbage line\n";

#[test]
fn symvers_and_rust_exports() {
    let s = parse_symvers(SYMVERS);
    assert_eq!(s.len(), 4);
    assert_eq!(s[1].name, "kmalloc_trace");
    assert_eq!(s[3].module, "drivers/cxl/core/cxl_core");
    let r = rust_exports(&s);
    assert_eq!(
        r.into_iter().collect::<Vec<_>>(),
        ["_RNvCsabc_4core3bar", "_RNvNtCs1234_6kernel5alloc3foo"]
    );
    let h = parse_rust_export_header(
        "/* generated */\nEXPORT_SYMBOL_RUST_GPL(_RNvCsabc_4core3bar);\n#include <x>\n",
    );
    assert_eq!(h.into_iter().collect::<Vec<_>>(), ["_RNvCsabc_4core3bar"]);
}

#[test]
fn modpost_undefined_lines() {
    let out = "  MODPOST Module.symvers\nWARNING: modpost: \"_RNvfoo\" [/x/tierkit.ko] undefined!\n  LD [M]  tierkit.ko\n";
    assert_eq!(undefined_symbols(out).len(), 1);
    assert!(undefined_symbols("  LD [M]  tierkit.ko\n").is_empty());
}

#[test]
fn config_changes_lists_each_difference() {
    let a = kconfig::parse_config("CONFIG_A=y\nCONFIG_B=m\n# CONFIG_C is not set\n");
    let b = kconfig::parse_config("CONFIG_A=y\nCONFIG_C=y\n");
    assert_eq!(
        config_changes(&a, &b),
        ["CONFIG_B: m -> unset", "CONFIG_C: unset -> y"]
    );
    assert!(config_changes(&a, &a).is_empty());
}

/// A fake headers tree in a temp dir.
fn tree(name: &str, release: &str, config: &str, symvers: bool, rust: bool) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tierkit-kdir-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(d.join("include/config")).unwrap();
    fs::write(d.join(".config"), config).unwrap();
    fs::write(
        d.join("include/config/kernel.release"),
        format!("{release}\n"),
    )
    .unwrap();
    if symvers {
        fs::write(d.join("Module.symvers"), SYMVERS).unwrap();
    }
    if rust {
        fs::create_dir_all(d.join("rust")).unwrap();
        fs::write(d.join("rust/libkernel.rmeta"), "").unwrap();
        fs::write(d.join("rust/libmacros.so"), "").unwrap();
    }
    d
}

const DEBIAN: &str =
    "CONFIG_CC_VERSION_TEXT=\"x86_64-linux-gnu-gcc-14 (Debian 14.2.0-19) 14.2.0\"\nCONFIG_RUST=y\n";

#[test]
fn refusals_are_one_line_and_say_what_is_missing() {
    let e = |d: &Path| {
        let m = format!("{:#}", inspect(d).unwrap_err());
        assert_eq!(m.lines().count(), 1, "{m}");
        m
    };
    assert!(e(Path::new("/nonexistent/kdir")).contains("no such directory"));
    let empty = std::env::temp_dir().join(format!("tierkit-kdir-empty-{}", std::process::id()));
    fs::create_dir_all(&empty).unwrap();
    assert!(e(&empty).contains("has no .config"));
    let old = tree("old", "6.12.48+deb13-amd64", DEBIAN, true, false);
    assert!(e(&old).contains("kernel 6.12.48+deb13-amd64 is unsupported"));
    let norust = tree("norust", "7.3.4+deb13-amd64", "CONFIG_X=y\n", true, false);
    assert!(e(&norust).contains("built without Rust"));
    let nosym = tree("nosym", "7.3.4+deb13-amd64", DEBIAN, false, false);
    assert!(e(&nosym).contains("no Module.symvers"));
    let ubuntu = tree(
        "ubuntu",
        "7.3.0-5-generic",
        "CONFIG_VERSION_SIGNATURE=\"Ubuntu 7.3.0-5.5-generic 7.3.0\"\nCONFIG_RUST=y\n",
        true,
        false,
    );
    assert!(e(&ubuntu).contains("install linux-lib-rust-7.3.0-5-generic"));
    let other = tree("other", "7.3.1-arch1", "CONFIG_RUST=y\n", true, false);
    assert!(e(&other).contains("not a Debian kernel"));
    for d in [empty, old, norust, nosym, ubuntu, other] {
        let _ = fs::remove_dir_all(d);
    }
}

#[test]
fn plans() {
    let deb = tree("deb", "7.3.4+deb13-amd64", DEBIAN, true, false);
    let h = inspect(&deb).unwrap();
    assert_eq!(h.release, "7.3.4+deb13-amd64");
    assert_eq!(h.key, cache_key("7.3.4+deb13-amd64", DEBIAN));
    assert_eq!(
        plan(&h, &kconfig::parse_config(&h.config)).unwrap(),
        Plan::RebuildDebian
    );
    let own = tree(
        "own",
        "7.3.4",
        "CONFIG_RUST=y\nCONFIG_CC_IS_CLANG=y\n",
        true,
        true,
    );
    let h = inspect(&own).unwrap();
    assert_eq!(
        plan(&h, &kconfig::parse_config(&h.config)).unwrap(),
        Plan::Direct { llvm: true }
    );
    assert_eq!(
        debian_make_vars(&kconfig::parse_config(DEBIAN)).unwrap(),
        [
            "ARCH=x86",
            "CROSS_COMPILE=x86_64-linux-gnu-",
            "CC=x86_64-linux-gnu-gcc-14",
            "HOSTCC=gcc-14"
        ]
    );
    assert!(debian_make_vars(&kconfig::parse_config("CONFIG_RUST=y\n")).is_err());
    for d in [deb, own] {
        let _ = fs::remove_dir_all(d);
    }
}

#[test]
fn build_outputs_are_not_copied() {
    for n in [
        "tierkit.ko",
        "src/.tierkit.o.cmd",
        "tierkit.mod.c",
        "Module.symvers",
        "x.o",
    ] {
        assert!(is_build_output(n), "{n}");
    }
    for n in ["Kbuild", "Makefile", "tierkit.rs", "shim.c", "core.rs"] {
        assert!(!is_build_output(n), "{n}");
    }
}
