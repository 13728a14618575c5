#!/usr/bin/env bash
# Installs what truecold needs on a fresh Debian 12 machine (idempotent; needs root for apt).
set -euo pipefail
# The kernel source is pinned (kernel-config/build.sh checks the exact version).
# linux-source-6.12 is installed, at its pinned version, by kernel-config/build.sh.
pkgs=(qemu-system-x86 build-essential flex bison bc libelf-dev libssl-dev
      cpio xz-utils python3 file)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
for c in rustfmt clippy; do
  rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
done
