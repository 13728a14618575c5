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

t_start=$(date +%s)
scripts/build-artifacts.sh
echo "test.sh: +$(($(date +%s) - t_start)) s: artifacts built"
cargo fmt --all -- --check
cargo clippy -q --workspace --all-targets -- -D warnings
# Every test binary, built once, with cargo's JSON list of them (its diagnostics rendered as
# text): the runs below only run them. `cargo test -p <one package>` would build again (cargo
# resolves one package's features apart from the workspace's: 13 crates for truecold-nested,
# 3 for xtask). Each runs as cargo runs it: from its package's directory, with
# CARGO_MANIFEST_DIR set; the library's tests first, then the binaries', then tests/ by name.
command -v jq >/dev/null || { echo "test.sh: jq is needed (scripts/deps.sh installs it)" >&2; exit 1; }
built=$(mktemp)
cargo test -q --workspace --no-run --message-format=json-render-diagnostics >"$built"
mapfile -t test_bins < <(jq -r 'select(.reason == "compiler-artifact" and .executable != null and .profile.test)
  | [(.target.kind[0] | if . == "lib" then 0 elif . == "bin" then 1 else 2 end),
     .target.name, (.manifest_path | rtrimstr("/Cargo.toml")), .executable] | @tsv' "$built" | sort)
rm -f "$built"
((${#test_bins[@]} > 0)) ||
  { echo "test.sh: no test binary listed (jq reads cargo's list: scripts/deps.sh installs it)" >&2; exit 1; }
root=$(pwd -P)
run_tests() { # $1 = a package's directory; then `only NAME…` or `except NAME…` (test targets)
  local dir=$1 mode=${2:-all} r=0 n=0 order name m exe
  shift $(($# > 1 ? 2 : 1))
  local names=" $* "
  for l in "${test_bins[@]}"; do
    IFS=$'\t' read -r order name m exe <<<"$l"
    [[ $m == "$dir" ]] || continue
    case $mode in
      only) [[ $names == *" $name "* ]] || continue ;;
      except) [[ $names != *" $name "* ]] || continue ;;
    esac
    n=$((n + 1))
    echo "     Running $name ($exe), at +$(($(date +%s) - t_start)) s"
    (cd "$dir" && CARGO_MANIFEST_DIR=$dir "$exe" --include-ignored) || r=1
  done
  ((n > 0)) || { echo "test.sh: no test binary of $dir ($mode $*) was built" >&2; r=1; }
  return "$r"
}
echo "test.sh: +$(($(date +%s) - t_start)) s: lint done, test binaries built"
rc=0
# 1. Alone on the machine: every test that makes or judges a bundle on the host's wall clock
#    (probe campaigns, the VMM's boots, faults, tune, the proof's checks). `verify` reads a
#    descheduled bench as the trace of a dropped row (SequentialGap, ArmOrder), so nothing
#    else runs beside them (docs/testing.md: two streams tried, 2026-12-02).
#    The power simulation (proof's tune_power.rs, about 100 s of both cores) reads no clock:
#    it runs in the second stream below, whose end is otherwise minutes before the first's.
while IFS= read -r dir; do
  case $dir in "$root/nested" | "$root/xtask") continue ;; esac
  run_tests "$dir" except tune_power || rc=1
done < <(printf '%s\n' "${test_bins[@]}" | cut -f3 | sort -u)
cargo test -q --workspace --doc || rc=1
# 2. Then two streams at once, none of whose results is read on the host's clock:
#    - nested: the nested harness's campaigns, bisect and fleet tests, on its virtual clock
#      (QEMU -icount: load moves their wall time, never their samples), its QEMU one thread
#      most of the time;
#    - xtask, the power simulation, then fuzzing: the reproducibility check (an uncached
#      kernel build compared byte for byte), the QEMU TCG boots (hang guards only), the tune
#      rule's power and error rate by simulation, coverage-guided fuzzing (10 s per target,
#      fuzz/README.md).
echo "test.sh: +$(($(date +%s) - t_start)) s: the two streams start"
stream() { # $1 = name; the rest, its command, each output line prefixed with [name]
  local name=$1
  shift
  "$@" 2>&1 | sed -u "s/^/[$name] /"
}
nested_stream() {
  local r=0
  run_tests "$root/nested" || r=1
  echo "test.sh: +$(($(date +%s) - t_start)) s: the nested stream ends"
  return "$r"
}
xtask_then_fuzz() {
  local r=0
  run_tests "$root/xtask" || r=1
  run_tests "$root/proof" only tune_power || r=1
  scripts/fuzz.sh 10 || r=1
  echo "test.sh: +$(($(date +%s) - t_start)) s: the xtask+power+fuzz stream ends"
  return "$r"
}
stream nested nested_stream &
nested=$!
stream xtask+power+fuzz xtask_then_fuzz &
rest=$!
wait "$nested" || { rc=1; echo "test.sh: the nested stream failed" >&2; }
wait "$rest" || { rc=1; echo "test.sh: the xtask+power+fuzz stream failed" >&2; }
exit "$rc"
