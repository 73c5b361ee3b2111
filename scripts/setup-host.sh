#!/usr/bin/env bash
# Installs everything `cargo xtask` needs on a Debian 12 (bookworm) host.
#
# Idempotent: each step checks first and does nothing when already done.
# Only bookworm-backports is ever added to the system's apt sources (for
# QEMU 10). Linux source packages from newer suites are fetched by xtask
# through a *private* apt configuration, never through the system's.
set -euo pipefail

say() { printf '[setup] %s\n' "$*" >&2; }
SUDO=""
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { say "not root and no sudo: install the packages listed in README.md by hand"; exit 1; }
    SUDO=sudo
fi

APT_PKGS=(clang-19 lld-19 llvm-19 libclang-19-dev flex bison bc libelf-dev libssl-dev cpio
          busybox-static make gcc libc6-dev python3 xz-utils rsync kmod)
missing=()
for p in "${APT_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

BPO=/etc/apt/sources.list.d/bookworm-backports.sources
need_qemu=1
if command -v qemu-system-x86_64 >/dev/null; then
    v=$(qemu-system-x86_64 --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
    [ "${v:-0}" -ge 10 ] && need_qemu=0
fi

updated=0
apt_update() { [ $updated = 1 ] || { say "apt-get update"; $SUDO apt-get update -qq; updated=1; }; }
if [ $need_qemu = 1 ] && [ ! -f "$BPO" ]; then
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

if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
    say "rustup component add rust-src"
    rustup component add rust-src
fi
if ! command -v bindgen >/dev/null; then
    say "cargo install --locked bindgen-cli (a few minutes)"
    cargo install --locked bindgen-cli
fi
say "host ready"
