#!/usr/bin/env bash
# The test command (README, .ci/run). Every tier runs here, none is skipped:
#  1. pure unit tests and property tests (boot params, E820, CPUID, stats, bundle, parsers);
#  2. the probe guest booted by the real VMM on this machine's /dev/kvm;
#  3. the real tuned Linux guest: under QEMU TCG directly, and in the nested harness
#     (QEMU TCG + emulated SVM → L1 Linux with KVM → truecold-vmm → the guest, strict-ready);
#  4.–6. tune, bisect, reliability and security (faults, hostile guest, seccomp, fuzzing);
#  plus lint, a 20-sample probe campaign, a 3-sample nested Linux campaign and a nested
#  engines campaign (truecold, Firecracker, Cloud Hypervisor, QEMU microvm; 3 interleaved
#  rounds) whose bundles/directory pass `sha256sum -c --strict` and `truecold-proof verify`,
#  `truecold bisect` of a fixture kernel tree and of two configs in the nested harness,
#  and the byte-for-byte reproducibility check of vmlinux and initramfs.
set -euo pipefail
cd "$(dirname "$0")/.."
export TRUECOLD_CACHE=${TRUECOLD_CACHE:-/var/cache/truecold}
scripts/build-artifacts.sh
cargo fmt --all -- --check
cargo clippy -q --workspace --all-targets -- -D warnings
cargo test --workspace --no-fail-fast -- --include-ignored
scripts/fuzz.sh 10  # coverage-guided fuzzing, 10 s per target (fuzz/README.md)
