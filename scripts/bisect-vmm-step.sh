#!/usr/bin/env bash
# The judge of `git bisect run` over truecold's own history, for a VMM regression:
#
#   cp scripts/bisect-vmm-step.sh /tmp/            # older commits may not have it
#   truecold run --probe -n 50 --out /tmp/vmm-good  # once, on the good commit (or any bundle)
#   git bisect start <bad> <good>
#   git bisect run /tmp/bisect-vmm-step.sh /tmp/vmm-good [truecold run flags…]
#   git bisect log; git bisect reset
#
# Each step builds this checkout's `truecold` and `truecold-vmm` (release), runs one campaign
# with the given flags (default `--probe -n 50`: the VMM floor on this host's /dev/kvm; use
# the baseline's own flags), keeps its bundle under ${TRUECOLD_BISECT_DIR:-/tmp/truecold-vmm-bisect}/<commit>,
# and exits with `truecold-proof compare <baseline> <bundle>`'s code: 0 no regression (good),
# 1 regression (bad), 125 inconclusive (skip), 200 cannot compare (an invalid bundle, another
# contract or clock than the baseline's: stop). A build or campaign that fails is 125. The judge is one fixed `truecold-proof` (${TRUECOLD_PROOF}, default the one
# on PATH), not the one of the commit under test, so every step is judged by the same rule.
set -uo pipefail
[[ $# -ge 1 ]] || { echo "usage: $0 <baseline bundle> [truecold run flags…]" >&2; exit 200; }
BASELINE=$1; shift
FLAGS=("$@"); [[ ${#FLAGS[@]} -gt 0 ]] || FLAGS=(--probe -n 50)
PROOF=${TRUECOLD_PROOF:-$(command -v truecold-proof || true)}
[[ -x $PROOF ]] || { echo "$0: no truecold-proof (set TRUECOLD_PROOF, or cargo install --path proof)" >&2; exit 200; }
COMMIT=$(git rev-parse HEAD)
OUT=${TRUECOLD_BISECT_DIR:-/tmp/truecold-vmm-bisect}/$COMMIT
cargo build -q --release -p truecold-vmm -p truecold-bench || { echo "step $COMMIT: build failed: skip"; exit 125; }
rm -rf "$OUT"; mkdir -p "$(dirname "$OUT")"
target/release/truecold run "${FLAGS[@]}" --vmm target/release/truecold-vmm --out "$OUT" ||
  { echo "step $COMMIT: campaign failed: skip"; exit 125; }
"$PROOF" compare "$BASELINE" "$OUT"
CODE=$?
case $CODE in 0|1|125|200) exit $CODE ;; *) exit 125 ;; esac
