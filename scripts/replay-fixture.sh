#!/usr/bin/env bash
# Makes the replay fixture anew: the short nested bundle nested/tests/fleet.rs replays
# (docs/fleet.md, "The replay fixture"), `truecold run --nested -n 3 --vcpus 1 --mem-mib 256
# --seed 0x7265706c6179` with this checkout's artifacts (scripts/build-artifacts.sh first),
# written to results/<UTC>-replay-fixture-nested-1vcpu-256mib in place of the one there.
# A bundle records the digests of every input of its figures (the VMM, the guest, the L0
# QEMU, the L1 kernel, L1's init and the bench that runs in L1): run this at the commit
# that changed one of them, and commit the new directory.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-gnu/release/truecold
[[ -x $bin ]] || { echo "replay-fixture: $bin is missing: scripts/build-artifacts.sh" >&2; exit 1; }
out=results/$(date -u +%Y%m%dT%H%MZ)-replay-fixture-nested-1vcpu-256mib
"$bin" run --nested -n 3 --vcpus 1 --mem-mib 256 --seed 0x7265706c6179 --out "$out"
for old in results/*-replay-fixture-nested-*; do
  [[ $old == "$out" ]] && continue
  if git ls-files --error-unmatch "$old" >/dev/null 2>&1; then git rm -rq "$old"; else rm -rf "$old"; fi
done
echo "replay-fixture: $out (commit it: git add $out)"
