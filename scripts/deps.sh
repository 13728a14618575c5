#!/usr/bin/env bash
# Installs what truecold needs on a fresh Debian 12 machine (idempotent; needs root for apt).
set -euo pipefail
# The kernel source is pinned (kernel-config/build.sh checks the exact version).
# linux-source-6.12 is installed, at its pinned version, by kernel-config/build.sh.
# build-essential's g++ also builds libFuzzer for scripts/fuzz.sh (crate libfuzzer-sys).
# time: GNU time, which scripts/test.sh runs itself under (its duration and peak RSS).
pkgs=(qemu-system-x86 build-essential flex bison bc libelf-dev libssl-dev
      cpio xz-utils python3 file time)
export DEBIAN_FRONTEND=noninteractive
updated=0
apt_update() { ((updated)) || { apt-get update -q; updated=1; }; }
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }
# Never remove or replace a user's packages. Installing a package can make apt remove an
# installed one that the new package breaks or conflicts with (Debian 12's qemu-system-x86
# beside a qemu-utils from bookworm-backports: apt removes qemu-utils, or gives up). So
# every install is planned first (a dry run) and refused when the plan removes anything;
# the real install has --no-remove as well.
apt_plan_removes() { apt-get install -s -q --no-install-recommends "$@" 2>&1 | awk '$1 == "Remv" { print $2 } /^E: / { print "(apt: " $0 ")" }'; }
apt_install() {
  local removes
  removes=$(apt_plan_removes "$@")
  [[ -z $removes ]] || { echo "deps: installing $* would remove or break: $(echo $removes)" >&2; return 1; }
  apt-get install -y -q --no-install-recommends --no-remove "$@"
}
# QEMU: Debian 12's qemu-system-x86 (7.2): the qemu-microvm engine and the TCG tests (the
# nested harness runs its own L0 QEMU, below). Where it cannot be installed without removing a package (the case above), the
# same Debian packages are unpacked into a private prefix instead, /opt/truecold/qemu-<ver>,
# with their libraries installed from Debian and qemu-system-x86_64 linked from
# /usr/local/bin: QEMU finds its firmware relative to its own binary, so nothing else changes.
private_qemu() {
  local ver dir tmp libs
  ver=$(apt-cache policy qemu-system-x86 | awk '/Candidate:/ { print $2 }')
  [[ -n $ver && $ver != "(none)" ]] || { echo "deps: apt has no qemu-system-x86 candidate" >&2; return 1; }
  dir=/opt/truecold/qemu-${ver//[:+~]/_}
  if [[ ! -x $dir/usr/bin/qemu-system-x86_64 ]]; then
    mapfile -t libs < <(apt-cache depends --no-recommends --no-suggests qemu-system-x86 |
      awk '$1 == "Depends:" && $2 ~ /^(lib|zlib)/ { print $2 }')
    apt_install "${libs[@]}"
    tmp=$(mktemp -d)
    (cd "$tmp" && chmod 755 . && apt-get download -q "qemu-system-x86=$ver" "qemu-system-common=$ver" qemu-system-data seabios >/dev/null 2>&1) ||
      { echo "deps: apt-get download qemu-system-x86 qemu-system-common qemu-system-data seabios failed" >&2; rm -rf "$tmp"; return 1; }
    mkdir -p "$dir.partial"
    for d in "$tmp"/*.deb; do dpkg-deb -x "$d" "$dir.partial"; done
    rm -rf "$tmp" "$dir"
    mv "$dir.partial" "$dir"
  fi
  local link=/usr/local/bin/qemu-system-x86_64
  if [[ -e $link || -L $link ]] && [[ $(readlink "$link") != "$dir/usr/bin/qemu-system-x86_64" ]]; then
    echo "deps: $link exists and is not truecold's ($dir); remove it or install qemu-system-x86" >&2
    return 1
  fi
  ln -sfn "$dir/usr/bin/qemu-system-x86_64" "$link"
  "$link" --version | head -1 | sed "s|^|deps: $link -> $dir: |"
}
# The nested harness's L0 QEMU, which with the L1 kernel is the virtual clock
# (docs/virtual-clock.md): QEMU 10.0.2 from Debian's bookworm-backports suite, pinned here,
# unpacked into /opt/truecold/qemu-<version> and linked as /usr/local/bin/truecold-l0-qemu
# (truecold_nested::L0_QEMU). It is installed beside whatever QEMU the machine has, never in
# its place: apt reads the suite through a source list of truecold's own under
# /opt/truecold/apt, so the machine's sources, preferences and packages stay as they are
# (QEMU's libraries come from the machine's own Debian 12 suites; none is newer than
# bookworm's). The firmware (SeaBIOS 1.16.3 from the same suite) stays inside the prefix and
# the harness hands it to QEMU with -L (Debian's QEMU 10 looks only in /usr/share).
L0_SUITE=bookworm-backports
L0_QEMU_VERSION=1:10.0.2+ds-2+deb13u1~bpo12+1
L0_SEABIOS_VERSION=1.16.3-2~bpo12+1
L0_MIRROR=${TRUECOLD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
l0_qemu() {
  local dir=/opt/truecold/qemu-${L0_QEMU_VERSION//[:+~]/_} link=/usr/local/bin/truecold-l0-qemu
  local apt=/opt/truecold/apt tmp libs have
  if [[ ! -x $dir/usr/bin/qemu-system-x86_64 ]]; then
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $L0_MIRROR $L0_SUITE main" >"$apt/sources.list"
    local o=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent
             -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
             -o Dir::Etc::Preferences=/nonexistent -o Dir::Etc::PreferencesParts=/nonexistent)
    apt-get "${o[@]}" update -q >/dev/null ||
      { echo "deps: apt-get update of $L0_MIRROR $L0_SUITE failed" >&2; return 1; }
    have=$(apt-cache "${o[@]}" policy qemu-system-x86 | awk '/Candidate:/ { print $2 }')
    if [[ $have != "$L0_QEMU_VERSION" ]]; then
      echo "deps: $L0_SUITE offers qemu-system-x86 ${have:-nothing}, not the pinned $L0_QEMU_VERSION: the virtual clock is defined by its L0 QEMU, so change L0_QEMU_VERSION here only with a re-measurement (docs/virtual-clock.md)" >&2
      return 1
    fi
    mapfile -t libs < <(apt-cache "${o[@]}" depends --no-recommends --no-suggests "qemu-system-x86=$L0_QEMU_VERSION" |
      awk '$1 == "Depends:" && $2 ~ /^(lib|zlib)/ { print $2 }')
    apt_update
    apt_install "${libs[@]}"
    tmp=$(mktemp -d)
    (cd "$tmp" && chmod 755 . && apt-get "${o[@]}" download -q "qemu-system-x86=$L0_QEMU_VERSION" \
      "qemu-system-common=$L0_QEMU_VERSION" "qemu-system-data=$L0_QEMU_VERSION" "seabios=$L0_SEABIOS_VERSION" >/dev/null 2>&1) ||
      { echo "deps: apt-get download of QEMU $L0_QEMU_VERSION and SeaBIOS $L0_SEABIOS_VERSION from $L0_SUITE failed" >&2; rm -rf "$tmp"; return 1; }
    rm -rf "$dir.partial"
    mkdir -p "$dir.partial"
    for d in "$tmp"/*.deb; do dpkg-deb -x "$d" "$dir.partial"; done
    rm -rf "$tmp" "$dir"
    mv "$dir.partial" "$dir"
  fi
  if [[ -e $link || -L $link ]] && [[ $(readlink "$link") != /opt/truecold/qemu-*/usr/bin/qemu-system-x86_64 ]]; then
    echo "deps: $link exists and is not truecold's; remove it" >&2
    return 1
  fi
  ln -sfn "$dir/usr/bin/qemu-system-x86_64" "$link"
  have=$("$link" --version | head -1)
  [[ $have == "QEMU emulator version 10.0.2 (Debian $L0_QEMU_VERSION)" ]] ||
    { echo "deps: $link runs but says \"$have\"" >&2; return 1; }
  echo "deps: the nested harness's L0: $link -> $dir: $have"
}
missing=()
private_qemu_ready() {
  local t
  t=$(readlink /usr/local/bin/qemu-system-x86_64 2>/dev/null) &&
    [[ $t == /opt/truecold/qemu-*/usr/bin/qemu-system-x86_64 && -x $t ]]
}
for p in "${pkgs[@]}"; do
  installed "$p" || { [[ $p == qemu-system-x86 ]] && private_qemu_ready; } || missing+=("$p")
done
# git: the bisect tests' fixture kernel tree (any git will do; many machines have their own).
command -v git >/dev/null || missing+=(git)
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  apt_update
  rest=()
  for p in "${missing[@]}"; do [[ $p == qemu-system-x86 ]] || rest+=("$p"); done
  ((${#rest[@]} == 0)) || apt_install "${rest[@]}"
  if [[ " ${missing[*]} " == *" qemu-system-x86 "* ]]; then
    if [[ -z $(apt_plan_removes qemu-system-x86) ]]; then
      apt_install qemu-system-x86
    else
      echo "deps: qemu-system-x86 cannot be installed beside this machine's packages ($(echo $(apt_plan_removes qemu-system-x86))); unpacking it privately"
      private_qemu
    fi
  fi
fi
l0_qemu
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
