#!/usr/bin/env bash
# The mainstream kernel benchmark (docs/your-kernel.md, "The mainstream kernel"): the config most
# kernel engineers boot as a KVM guest — `make defconfig` then `make kvm_guest.config` on the
# pinned linux-source-6.12, with CONFIG_PVH=y (truecold-vmm boots a PVH vmlinux) — then where its
# boot goes and the tune its attribution proposes, on the nested harness's virtual clock:
#
#   scripts/mainstream-kernel.sh config FILE     # write the config (about a minute: kconfig only)
#   scripts/mainstream-kernel.sh attribute FILE  # 3 launches + 3 initcall-attributed ones, 2 vCPU / 1 GiB
#   scripts/mainstream-kernel.sh tune FILE BUNDLE   # screen and confirm the command-line proposals
#   scripts/mainstream-kernel.sh build-cost FILE DIR  # a Kconfig arm: a copy against ccache
#
# The first build of the config takes 15 to 25 minutes on 2 cores (then cached by its content);
# each launch of the untuned kernel is 1 to 3 minutes of wall time here (4.4 s on the virtual
# clock, most of it busy-waits that the emulator runs slowly). Every directory goes under
# results/ with the date, as truecold names it. Prerequisite: scripts/build-artifacts.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "scripts/mainstream-kernel.sh: error: $*" >&2; exit 1; }
PKG_VERSION=6.12.117-1~deb12u1
SRC=${TRUECOLD_CACHE:-/var/cache/truecold}/src/$PKG_VERSION/linux-source-6.12
BIN=target/x86_64-unknown-linux-gnu/release
[[ -x $BIN/truecold && -d out/guest ]] || die "no release build (run: scripts/build-artifacts.sh)"
stamp() { date -u +%Y%m%dT%H%MZ; }
case ${1:-} in
  config)
    [[ $# -eq 2 ]] || die "usage: $0 config FILE"
    [[ -f ${SRC%/linux-source-6.12}/.extracted ]] ||
      die "the pinned kernel source is not extracted at $SRC (run: scripts/build-artifacts.sh)"
    O=$(mktemp -d)
    trap 'rm -rf "$O"' EXIT
    make -s -C "$SRC" O="$O" ARCH=x86_64 defconfig >/dev/null
    make -s -C "$SRC" O="$O" ARCH=x86_64 kvm_guest.config >/dev/null
    "$SRC/scripts/config" --file "$O/.config" --enable PVH
    make -s -C "$SRC" O="$O" ARCH=x86_64 olddefconfig >/dev/null
    cp "$O/.config" "$2"
    echo "config: $2 ($(grep -c '=y$' "$2") symbols =y; sha256 $(sha256sum "$2" | cut -d' ' -f1))"
    ;;
  attribute)
    [[ $# -eq 2 ]] || die "usage: $0 attribute FILE"
    "$BIN/truecold" run --nested -n 3 --vcpus 2 --mem-mib 1024 --kernel-config "$2" \
      --attribution 3 --attribution-instrument initcall --vmm "$BIN/truecold-vmm" --guest-dir out/guest \
      --out "results/$(stamp)-own-kernel-defconfig-kvm-guest-pvh-nested-2vcpu-1024mib-attribution-initcall"
    ;;
  tune)
    [[ $# -eq 3 ]] || die "usage: $0 tune FILE BUNDLE"
    # The command-line proposals first: no kernel build, so the verdicts come in the time of
    # their launches. -n 6: with 5 knobs, the fewest rounds at which Holm can name a winner.
    "$BIN/truecold" tune --nested --vcpus 2 --mem-mib 1024 --kernel-config "$2" \
      --propose-from "$3" --propose-class cmdline --knobs initcall-blacklist-cmos_init -n 6 \
      --attribution 1 --vmm "$BIN/truecold-vmm" --guest-dir out/guest \
      --out "results/$(stamp)-tune-nested-defconfig-kvm-guest-pvh-2vcpu-1024mib-proposals"
    ;;
  build-cost)
    # A Kconfig arm of FILE's kernel built two ways (kernel-config/README.md, "A copy against
    # ccache"): from a copy of the config's object directory, as kernel-config/build.sh does,
    # and in a fresh directory sharing objects through ccache (primed by the baseline built in
    # another fresh directory with an empty cache). Same source, flags and reproducibility
    # environment as build.sh; each step's seconds go to DIR/results.tsv with the vmlinux
    # digests. Needs the config's own build first (`attribute` makes it) and about 40 minutes.
    [[ $# -eq 3 ]] || die "usage: $0 build-cost FILE DIR"
    command -v ccache >/dev/null || die "ccache is needed (apt-get install ccache)"
    cfg=$(realpath "$2") out=$3
    [[ ! -e $out ]] || die "$out exists"
    base=$SRC/.truecold-build-config-$(sha256sum "$cfg" | cut -c1-16)
    [[ -f $base/vmlinux ]] ||
      die "no build of $cfg in $base (run: $0 attribute $cfg, which builds it)"
    mkdir -p "$out"
    out=$(realpath "$out")
    export KBUILD_BUILD_TIMESTAMP="Thu Jan  1 00:00:00 UTC 1970" KBUILD_BUILD_USER=truecold \
      KBUILD_BUILD_HOST=truecold KBUILD_BUILD_VERSION=1 LC_ALL=C TZ=UTC
    unset LOCALVERSION KCONFIG_CONFIG ARCH CROSS_COMPILE
    export CCACHE_DIR=$out/ccache CCACHE_BASEDIR=$SRC CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=20G
    j=$(nproc)
    rec() { echo "$*" | tee -a "$out/results.tsv"; }
    secs() { echo $(($(date +%s) - $1)); }
    mk() { local d=$1; shift; make -C "$SRC" O="$d" ARCH=x86_64 -j"$j" "$@"; }
    digest() { sha256sum "$1/vmlinux" | cut -c1-16; }
    arm() { # $1 = directory holding the baseline's .config; $2 = the symbol turned off
      "$SRC/scripts/config" --file "$1/.config" --disable "$2"
      mk "$1" -s olddefconfig
      ! grep -q "^CONFIG_$2=" "$1/.config" || die "$2 is still set in $1/.config"
    }
    rec "# $(date -u +%FT%TZ); $j cores; $(gcc --version | head -1); $(ccache --version | head -1)"
    rec "# config $(sha256sum "$cfg" | cut -c1-16): $(grep -c '=y$' "$cfg") symbols =y"
    t=$(date +%s); mk "$base" vmlinux bzImage >"$out/base-again.log" 2>&1
    rec "own directory: the same config again	$(secs "$t") s"
    for sym in RTC_DRV_CMOS KPROBE_EVENTS; do
      d=$SRC/.truecold-cost-copy-$sym
      rm -rf "$d"
      t=$(date +%s); cp -a "$base" "$d"; c=$(secs "$t")
      arm "$d" "$sym"; mk "$d" vmlinux bzImage >"$out/copy-$sym.log" 2>&1
      rec "copy: arm -$sym (the copy ${c} s)	$(secs "$t") s	vmlinux $(digest "$d")"
      rm -rf "$d"
    done
    d=$SRC/.truecold-cost-ccache-base
    rm -rf "$d"; mkdir "$d"; cp "$cfg" "$d/.config"
    t=$(date +%s); mk "$d" -s olddefconfig; mk "$d" CC="ccache gcc" vmlinux bzImage >"$out/ccache-base.log" 2>&1
    rec "ccache: the baseline, empty cache	$(secs "$t") s	vmlinux $(digest "$d") (own build: $(digest "$base"))"
    rm -rf "$d"
    ccache -z >/dev/null
    d=$SRC/.truecold-cost-ccache-arm
    rm -rf "$d"; mkdir "$d"; cp "$cfg" "$d/.config"
    t=$(date +%s); arm "$d" RTC_DRV_CMOS; mk "$d" CC="ccache gcc" vmlinux bzImage >"$out/ccache-RTC_DRV_CMOS.log" 2>&1
    rec "ccache: arm -RTC_DRV_CMOS, a fresh directory	$(secs "$t") s	vmlinux $(digest "$d")"
    rm -rf "$d"
    ccache -s | grep -E "Hits|Misses" | sed 's/^/# /' | tee -a "$out/results.tsv"
    ;;
  *) die "usage: $0 config FILE | attribute FILE | tune FILE BUNDLE | build-cost FILE DIR" ;;
esac
