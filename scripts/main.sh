#!/usr/bin/env bash
# The main job (README): builds whatever is missing (guest kernel, init, initramfs, VMM,
# bench), then runs the default campaign — 1,000 sequential true-cold boots, 2 vCPU / 16 GiB —
# and writes a proof bundle under results/. Extra arguments go to `truecold run`.
# On a host whose /dev/kvm cannot boot Linux (PVM) the bench says why and runs the probe-guest
# campaign instead, labelled "VMM floor (probe guest), not a Linux boot".
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build-artifacts.sh
bin=target/x86_64-unknown-linux-gnu/release
exec "$bin/truecold" run --vmm "$bin/truecold-vmm" --guest-dir out/guest "$@"
