#!/usr/bin/env bash
# Installs what truecold needs on a fresh Debian 12 machine (idempotent; needs root for apt).
set -euo pipefail
# The kernel source is pinned (kernel-config/build.sh checks the exact version).
# linux-source-6.12 is installed, at its pinned version, by kernel-config/build.sh.
# build-essential's g++ also builds libFuzzer for scripts/fuzz.sh (crate libfuzzer-sys).
pkgs=(qemu-system-x86 build-essential flex bison bc libelf-dev libssl-dev
      cpio xz-utils python3 file)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
# git: the bisect tests' fixture kernel tree (any git will do; many machines have their own).
command -v git >/dev/null || missing+=(git)
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  # Never remove a user's packages. Installing a package can make apt remove an installed one
  # that the new package breaks or conflicts with (an older qemu-utils beside the qemu-system-x86
  # being installed was removed this way). So: a dry run first; whatever it would remove joins
  # the install list, which makes apt upgrade that package instead of removing it; and
  # --no-remove makes the real install abort, naming the package, rather than remove anything.
  want=("${missing[@]}")
  for _ in 1 2 3; do
    plan=$(apt-get install -s -q --no-install-recommends "${want[@]}")
    mapfile -t removed < <(awk '$1 == "Remv" { print $2 }' <<<"$plan")
    ((${#removed[@]})) || break
    echo "deps: that install would remove ${removed[*]}; upgrading them instead"
    want+=("${removed[@]}")
  done
  apt-get install -y -q --no-install-recommends --no-remove "${want[@]}"
fi
for c in rustfmt clippy; do
  rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
done
# Peer engines (engines campaigns, `truecold run --engine …`): the static builds of Firecracker
# v1.16.1 and Cloud Hypervisor v53.0 in ../shared/peers/bin beside the clone, checked against
# the digests pinned in scripts/peers.sha256. Elsewhere, point TRUECOLD_FIRECRACKER and
# TRUECOLD_CLOUD_HYPERVISOR at the binaries (README: "Engines side by side" says how to get
# them); the bench names what is missing when an engines campaign needs it.
root=$(cd "$(dirname "$0")/.." && pwd)
peers=$root/../shared/peers/bin
if [[ -d $peers ]]; then
  sums=$root/scripts/peers.sha256
  (cd "$peers" && sha256sum -c --strict --quiet "$sums") ||
    { echo "deps: $peers does not match scripts/peers.sha256" >&2; exit 1; }
  echo "deps: peer engines in $peers match scripts/peers.sha256"
else
  echo "deps: no $peers here; engines campaigns need --firecracker/--cloud-hypervisor or TRUECOLD_FIRECRACKER/TRUECOLD_CLOUD_HYPERVISOR"
fi
