#!/usr/bin/env bash
# Installs what truecold needs on a fresh Debian 12 machine (idempotent; needs root for apt).
set -euo pipefail
# One run at a time on a machine: two at once (a test run beside a build, two clones) would
# unpack and replace the same /opt/truecold prefix under each other.
if [[ -z ${TRUECOLD_DEPS_LOCKED:-} ]]; then
  exec 9>"${TRUECOLD_DEPS_LOCK:-/run/lock/truecold-deps.lock}"
  flock 9
  export TRUECOLD_DEPS_LOCKED=1
fi
# The kernel source is pinned (kernel-config/build.sh checks the exact version).
# linux-source-6.12 is installed, at its pinned version, by kernel-config/build.sh.
# build-essential's g++ also builds libFuzzer for scripts/fuzz.sh (crate libfuzzer-sys).
# time: GNU time, which scripts/test.sh runs itself under (its duration and peak RSS).
# jq: scripts/test.sh reads cargo's JSON list of the test binaries it built.
pkgs=(qemu-system-x86 build-essential flex bison bc libelf-dev libssl-dev
      cpio xz-utils python3 file time chromium jq)
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
# (docs/virtual-clock.md): QEMU 10.0.2, built here from the source of Debian's
# bookworm-backports package with truecold's patches (scripts/l0-qemu/, applied in order,
# each exactly: a source they do not fit fails here instead of building without them), and
# run on the firmware of that package (SeaBIOS from the same suite):
#   0001  SVM: an interrupt injected through the VMCB's EVENTINJ is delivered once (without
#         it the next exit request of TCG's CPU loop delivers the same vector again, inside
#         its own handler with the guest's IF clear, which deadlocks the guest: finding 6);
#   0002  the build leaves out the firmware blobs the +ds source does not carry;
#   0003  a CPU's round-robin turn is at most 10,000 instructions (finding 13);
#   0004  the parallel clock, which L1 reads through a CPUID leaf (nested/src/parallel.rs).
# The build is pinned by the source tarball's digest, the patches, the configuration and
# Debian's toolchain; it goes into /opt/truecold/qemu-<release>-<build> and is linked as
# /usr/local/bin/truecold-l0-qemu (truecold_nested::L0_QEMU), beside whatever QEMU the
# machine has, never in its place. A prefix whose recorded patch digest differs from
# scripts/l0-qemu/ is refused: a change of the patches names another clock, so it comes with
# a new L0_BUILD. apt reads the suite through a source list of truecold's own under
# /opt/truecold/apt, so the machine's sources, preferences and packages stay as they are.
# meson and pycotap (QEMU's build tools, newer than Debian 12's) come from PyPI, pinned by
# digest. A new machine spends about 4 minutes of 2 cores here, once.
L0_SUITE=bookworm-backports
L0_QEMU_VERSION=1:10.0.2+ds-2+deb13u1~bpo12+1
L0_QEMU_ORIG=qemu_10.0.2+ds.orig.tar.xz
L0_QEMU_ORIG_SHA256=0901da33844a331bf8b3602b9c1fbd178e60b737c8e3ade678255bd090c9b9f1
L0_SEABIOS_VERSION=1.16.3-2~bpo12+1
L0_BUILD=truecold-2  # change with the patches or the configuration: it names another clock
L0_PKGVERSION="$L0_BUILD: Debian $L0_QEMU_VERSION source, SVM EVENTINJ fix, 10k-instruction turns, parallel clock"
L0_PATCHES=$(cd "$(dirname "${BASH_SOURCE[0]}")/l0-qemu" && pwd)
# The digest of the patches, in order (file names and contents).
l0_patch_digest() { (cd "$L0_PATCHES" && sha256sum ./*.patch) | sha256sum | cut -d" " -f1; }
L0_PYPI=("meson==1.5.0 --hash=sha256:52b34f4903b882df52ad0d533146d4b992c018ea77399f825579737672ae7b20"
         "pycotap==1.3.1 --hash=sha256:1c3a25b3ff89e48f4e00f1f71dbbc1642b4f65c65d416524d07e73492fff25ea")
L0_MIRROR=${TRUECOLD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
l0_qemu_build() {  # $1: the prefix to fill (…/usr)
  local prefix=$1 apt=/opt/truecold/apt tmp have d
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
  printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\ndeb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
    "$L0_MIRROR" "$L0_SUITE" "$L0_MIRROR" "$L0_SUITE" >"$apt/sources.list"
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
  apt_update
  apt_install ninja-build pkg-config libglib2.0-dev python3-venv patch
  tmp=$(mktemp -d)
  chmod 755 "$tmp"
  # The firmware, and the source (apt may fail on the Debian packaging tarball, which the
  # build does not use: the source tarball is checked by its digest instead).
  (cd "$tmp" && apt-get "${o[@]}" download -q "qemu-system-data=$L0_QEMU_VERSION" "seabios=$L0_SEABIOS_VERSION" >/dev/null 2>&1) ||
    { echo "deps: apt-get download of qemu-system-data $L0_QEMU_VERSION and seabios $L0_SEABIOS_VERSION failed" >&2; rm -rf "$tmp"; return 1; }
  (cd "$tmp" && apt-get "${o[@]}" source -q --download-only "qemu=$L0_QEMU_VERSION" >/dev/null 2>&1) || true
  echo "$L0_QEMU_ORIG_SHA256  $tmp/$L0_QEMU_ORIG" | sha256sum -c --strict --quiet ||
    { echo "deps: $L0_QEMU_ORIG from $L0_SUITE is missing or not the pinned source" >&2; rm -rf "$tmp"; return 1; }
  for d in "$tmp"/*.deb; do dpkg-deb -x "$d" "$tmp/root"; done
  mkdir -p "$prefix/bin" "$prefix/share"
  cp -a "$tmp/root/usr/share/qemu" "$tmp/root/usr/share/seabios" "$prefix/share/"
  python3 -m venv "$tmp/venv"
  printf '%s\n' "${L0_PYPI[@]}" >"$tmp/requirements.txt"
  "$tmp/venv/bin/pip" install -q --require-hashes --no-deps -r "$tmp/requirements.txt" ||
    { echo "deps: pip could not install QEMU's build tools from PyPI" >&2; rm -rf "$tmp"; return 1; }
  tar -xJf "$tmp/$L0_QEMU_ORIG" -C "$tmp"
  local src=$tmp/qemu-10.0.2
  local p
  for p in "$L0_PATCHES"/*.patch; do
    patch -d "$src" -p1 --batch --forward --fuzz=0 --no-backup-if-mismatch -s <"$p" ||
      { echo "deps: $p does not apply exactly to $L0_QEMU_ORIG" >&2; rm -rf "$tmp"; return 1; }
  done
  mkdir -p "$src/build"
  (cd "$src/build" && PATH=$tmp/venv/bin:$PATH ../configure --python="$tmp/venv/bin/python3" \
      --target-list=x86_64-softmmu --without-default-features --enable-tcg --disable-kvm \
      --disable-xen --disable-docs --disable-werror --disable-download --disable-install-blobs \
      --with-pkgversion="$L0_PKGVERSION" --prefix=/usr >"$tmp/configure.log" 2>&1 &&
    ninja -j"$(nproc)" qemu-system-x86_64 >"$tmp/build.log" 2>&1) ||
    { echo "deps: building QEMU failed; its logs: $tmp/configure.log $tmp/build.log" >&2; return 1; }
  install -m 755 "$src/build/qemu-system-x86_64" "$prefix/bin/qemu-system-x86_64"
  l0_patch_digest >"$prefix/../truecold-patches.sha256"
  rm -rf "$tmp"
}
l0_qemu() {
  local dir=/opt/truecold/qemu-10.0.2-$L0_BUILD link=/usr/local/bin/truecold-l0-qemu have
  if [[ -x $dir/usr/bin/qemu-system-x86_64 ]] && [[ $(cat "$dir/truecold-patches.sha256" 2>/dev/null) != "$(l0_patch_digest)" ]]; then
    echo "deps: $dir was built from other patches than scripts/l0-qemu/: a change of the patches names another clock, so give it a new L0_BUILD" >&2
    return 1
  fi
  if [[ ! -x $dir/usr/bin/qemu-system-x86_64 ]]; then
    echo "deps: building the nested harness's L0 QEMU ($L0_PKGVERSION) into $dir"
    rm -rf "$dir.partial"
    l0_qemu_build "$dir.partial/usr" || { rm -rf "$dir.partial"; return 1; }
    rm -rf "$dir"
    mv "$dir.partial" "$dir"
  fi
  if [[ -e $link || -L $link ]] && [[ $(readlink "$link") != /opt/truecold/qemu-*/usr/bin/qemu-system-x86_64 ]]; then
    echo "deps: $link exists and is not truecold's; remove it" >&2
    return 1
  fi
  ln -sfn "$dir/usr/bin/qemu-system-x86_64" "$link"
  have=$("$link" --version | head -1)
  [[ $have == "QEMU emulator version 10.0.2 ($L0_PKGVERSION)" ]] ||
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
# The VMM's jail user (docs/security.md): `truecold-vmm boot` run as root drops to it after
# opening every descriptor it needs (it needs no access to /dev/kvm), and refuses to boot
# when it is missing. A system user and group of its own, no home, no shell.
if ! getent passwd truecold-vmm >/dev/null; then
  getent group truecold-vmm >/dev/null || groupadd --system truecold-vmm
  useradd --system --no-create-home --shell /usr/sbin/nologin --gid truecold-vmm truecold-vmm
fi
echo "deps: jail user: $(id truecold-vmm)"
for c in rustfmt clippy; do
  rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
done
# Peer engines (engines campaigns, `truecold run --engine …`): the static builds of Firecracker
# v1.16.1 and Cloud Hypervisor v53.0 in ../shared/peers/bin beside the clone, checked against
# the digests pinned in scripts/peers.sha256. Elsewhere, point TRUECOLD_FIRECRACKER and
# TRUECOLD_CLOUD_HYPERVISOR at the binaries (docs/engines.md, "Where the engine binaries come
# from", says how to get them); the bench names what is missing when an engines campaign needs it.
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
