//! `cargo xtask`: the binary; everything is in the library (`src/lib.rs`).

fn main() -> std::process::ExitCode {
    xtask::cli::main()
}
