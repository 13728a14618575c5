#!/usr/bin/env bash
# The mainstream kernel benchmark (docs/your-kernel.md, "The mainstream kernel"): the config most
# kernel engineers boot as a KVM guest — `make defconfig` then `make kvm_guest.config` on the
# pinned linux-source-6.12, with CONFIG_PVH=y (truecold-vmm boots a PVH vmlinux) — then where its
# boot goes and the tune its attribution proposes, on the nested harness's virtual clock:
#
#   scripts/mainstream-kernel.sh config FILE     # write the config (about a minute: kconfig only)
#   scripts/mainstream-kernel.sh attribute FILE  # 3 launches + 3 initcall-attributed ones, 2 vCPU / 1 GiB
#   scripts/mainstream-kernel.sh tune FILE BUNDLE   # screen and confirm the command-line proposals
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
  *) die "usage: $0 config FILE | attribute FILE | tune FILE BUNDLE" ;;
esac
