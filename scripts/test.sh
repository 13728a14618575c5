#!/usr/bin/env bash
# The test command (README, .ci/run; the tiers in full: docs/testing.md). Every tier runs here,
# none is skipped:
#  1. pure unit tests and property tests (boot params, E820, CPUID, stats, bundle, parsers);
#  2. the probe guest booted by the real VMM on this machine's /dev/kvm;
#  3. the real tuned Linux guest: under QEMU TCG directly, and in the nested harness
#     (QEMU TCG + emulated SVM → L1 Linux with KVM → truecold-vmm → the guest, strict-ready);
#  4.–6. tune, bisect, reliability and security (faults, hostile guest, seccomp, fuzzing);
#  plus lint, a 20-sample probe campaign, a 3-sample nested Linux campaign and a nested
#  engines campaign (truecold, Firecracker, Cloud Hypervisor, QEMU microvm; 2 interleaved
#  rounds) whose bundles/directory pass `sha256sum -c --strict` and `truecold-proof verify`,
#  `truecold bisect` of a fixture kernel tree and of two configs in the nested harness,
#  `truecold replay` of a fresh and of the committed fixture bundle and `truecold fleet` on a
#  single-node Slurm cluster (nested/tests/fleet.rs, scripts/slurm-local.sh),
#  and the byte-for-byte reproducibility check of vmlinux and initramfs.
#
# Its own cost is measured, never asserted as a time: at the end it prints the wall time and
# the peak resident memory of the largest single process of the run (GNU time's maximum RSS
# over every waited-for descendant), against the budget docs/testing.md states (a fresh clone on
# 2 cores: ≤ 45 minutes with an empty kernel cache, ≤ 25 with a warm one). A process above
# TRUECOLD_TEST_RSS_LIMIT_MIB (default 8192) fails the run: on a 24 GiB machine two such
# processes at once would leave it to the OOM killer.
set -euo pipefail
cd "$(dirname "$0")/.."
export TRUECOLD_CACHE=${TRUECOLD_CACHE:-/var/cache/truecold}

if [[ -z ${TRUECOLD_TEST_INNER:-} ]]; then
  scripts/deps.sh  # installs GNU time (/usr/bin/time) among the rest
  limit=${TRUECOLD_TEST_RSS_LIMIT_MIB:-8192}
  stats=$(mktemp)
  start=$(date +%s)
  rc=0
  TRUECOLD_TEST_INNER=1 /usr/bin/time -o "$stats" -f '%M %e' "$0" "$@" || rc=$?
  # GNU time writes "Command exited with non-zero status N" first when the run failed: the
  # figures are its last line.
  read -r rss_kib wall_s < <(tail -n 1 "$stats") || true
  [[ ${rss_kib:-} =~ ^[0-9]+$ ]] || rss_kib=0
  [[ ${wall_s:-} =~ ^[0-9]+(\.[0-9]+)?$ ]] || wall_s=$(($(date +%s) - start))
  rm -f "$stats"
  secs=${wall_s%.*}
  rss_mib=$((rss_kib / 1024))
  echo "test.sh: wall time $((secs / 60)) min $((secs % 60)) s; peak RSS of one process ${rss_mib} MiB (limit ${limit} MiB); kernel cache ${TRUECOLD_CACHE}; exit ${rc}"
  echo "test.sh: budget (docs/testing.md, 'What the test command costs'): a fresh clone on 2 cores in ≤ 45 min with an empty kernel cache, ≤ 25 min with a warm one"
  if ((rc == 0 && rss_mib > limit)); then
    echo "test.sh: a process of the run peaked at ${rss_mib} MiB, above ${limit} MiB" >&2
    rc=1
  fi
  exit "$rc"
fi

scripts/build-artifacts.sh
cargo fmt --all -- --check
cargo clippy -q --workspace --all-targets -- -D warnings
# Every test binary, built once: the runs below only run them.
cargo test -q --workspace --no-run
rc=0
# 1. Alone on the machine: every test that makes or judges a bundle on the host's wall clock
#    (probe campaigns, the VMM's boots, faults, tune, the proof's checks). `verify` reads a
#    descheduled bench as the trace of a dropped row (SequentialGap, ArmOrder), so nothing
#    else runs beside them (docs/testing.md: two streams tried, 2026-12-02).
cargo test --workspace --no-fail-fast --exclude truecold-nested --exclude xtask -- --include-ignored || rc=1
# 2. Then two streams at once, none of whose results is read on the host's clock:
#    - nested: the nested harness's campaigns and bisect tests, on its virtual clock (QEMU
#      -icount: load moves their wall time, never their samples), its QEMU one thread most
#      of the time;
#    - xtask, then fuzzing: the reproducibility check (an uncached kernel build compared byte
#      for byte), the QEMU TCG boots (hang guards only), coverage-guided fuzzing (10 s per
#      target, fuzz/README.md).
stream() { # $1 = name; the rest, its command, each output line prefixed with [name]
  local name=$1
  shift
  "$@" 2>&1 | sed -u "s/^/[$name] /"
}
xtask_then_fuzz() {
  local r=0
  cargo test -p xtask --no-fail-fast -- --include-ignored || r=1
  scripts/fuzz.sh 10 || r=1
  return "$r"
}
stream nested cargo test -p truecold-nested --no-fail-fast -- --include-ignored &
nested=$!
stream xtask+fuzz xtask_then_fuzz &
rest=$!
wait "$nested" || { rc=1; echo "test.sh: the nested stream failed" >&2; }
wait "$rest" || { rc=1; echo "test.sh: the xtask+fuzz stream failed" >&2; }
exit "$rc"
