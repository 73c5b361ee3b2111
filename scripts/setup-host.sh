#!/usr/bin/env bash
# Installs everything `cargo xtask` needs on a Debian 12 (bookworm) host.
# `cargo xtask` runs it by itself when a tool is missing; `.ci/run` runs it
# first on a fresh machine.
#
# Idempotent: each step checks first and does nothing when already done.
# Only bookworm-backports is ever added to the system's apt sources (for
# QEMU 10). The Linux source package comes from trixie-backports through a
# *private* apt configuration inside xtask, never through the system's:
# adding trixie or sid here would let apt replace the system's libc6.
#
# Note on `set -o pipefail`: never write `cmd | grep -q ...` here. grep -q
# exits at the first match, cmd then dies of SIGPIPE, and pipefail turns the
# match into a failure. Capture the output into a variable and match that.
set -euo pipefail

# rustup installs cargo, rustc and cargo-installed tools (bindgen) here; a
# non-login CI shell may not have it on PATH yet.
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"

say() { printf '[setup] %s\n' "$*" >&2; }
SUDO=""

APT_PKGS=(clang-19 lld-19 llvm-19 libclang-19-dev flex bison bc libelf-dev libssl-dev cpio
          busybox-static make gcc libc6-dev python3 python3-venv xz-utils rsync kmod ca-certificates
          debian-archive-keyring mmdebstrap tmux)

installed() { # installed PKG -> 0 if dpkg has it fully installed
    local st
    st=$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)
    [ "$st" = "install ok installed" ]
}

missing=()
for p in "${APT_PKGS[@]}"; do
    installed "$p" || missing+=("$p")
done

BPO=/etc/apt/sources.list.d/bookworm-backports.sources
need_qemu=1
if command -v qemu-system-x86_64 >/dev/null; then
    ver=$(qemu-system-x86_64 --version || true)
    major=$(printf '%s\n' "$ver" | sed -n 's/.*version \([0-9][0-9]*\)\..*/\1/p')
    [ "${major:-0}" -ge 10 ] && need_qemu=0
fi

# Root (or sudo) only when something is missing; the message names it.
if [ "$(id -u)" != 0 ] && { [ ${#missing[@]} -gt 0 ] || [ $need_qemu = 1 ]; }; then
    if ! command -v sudo >/dev/null; then
        todo=""
        [ ${#missing[@]} -gt 0 ] && todo="apt-get install ${missing[*]}; "
        if [ $need_qemu = 1 ]; then
            grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/ \
                || todo="${todo}add 'deb http://deb.debian.org/debian bookworm-backports main' to apt's sources and apt-get update; "
            todo="${todo}apt-get install -t bookworm-backports qemu-system-x86 (QEMU 10)"
        fi
        say "not root and no sudo: as root, install: $todo"
        exit 1
    fi
    SUDO=sudo
fi

updated=0
apt_update() { [ $updated = 1 ] || { say "apt-get update"; $SUDO apt-get update -qq; updated=1; }; }
# Some other sources file may already carry bookworm-backports; adding it
# twice makes apt warn "configured multiple times".
bpo_listed=$(grep -rls 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null || true)
if [ $need_qemu = 1 ] && [ -z "$bpo_listed" ]; then
    say "adding bookworm-backports (for qemu-system-x86 10) to $BPO"
    $SUDO tee "$BPO" >/dev/null <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
if [ ${#missing[@]} -gt 0 ]; then
    apt_update
    say "installing: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ $need_qemu = 1 ]; then
    apt_update
    say "installing qemu-system-x86 from bookworm-backports"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        -t bookworm-backports qemu-system-x86 >/dev/null
fi

# Rust: the kernel builds core and alloc from source (rust-src) and needs
# bindgen. Checked through the sysroot, not `rustup component list | grep`.
if ! command -v rustup >/dev/null; then
    if ! command -v rustc >/dev/null; then
        say "no Rust toolchain: install rustup from https://rustup.rs, then run this again"
        exit 1
    fi
fi
sysroot=$(rustc --print sysroot)
if [ ! -f "$sysroot/lib/rustlib/src/rust/library/core/src/lib.rs" ]; then
    command -v rustup >/dev/null || { say "rust-src is missing and there is no rustup to add it"; exit 1; }
    say "rustup component add rust-src"
    rustup component add rust-src
fi
# Pinned: the bindgen version is part of the kernel config's fingerprint, so
# an unpinned install would turn a newer crates.io release into a rebuild.
BINDGEN_VERSION=0.73.2
if ! command -v bindgen >/dev/null; then
    say "cargo install --locked bindgen-cli@$BINDGEN_VERSION (a few minutes)"
    cargo install --locked "bindgen-cli@$BINDGEN_VERSION"
fi
say "host ready"
