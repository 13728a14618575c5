#!/usr/bin/env bash
# Coverage-guided fuzzing of the parsers and builders that take untrusted or hand-edited
# bytes (fuzz/README.md): libFuzzer through the libfuzzer-sys crate, on the stable toolchain
# (the SanitizerCoverage pass that rustc's LLVM has, no nightly flag).
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
# Builds every target (or those named), runs each for SECONDS_PER_TARGET (default 60) from
# its committed corpus fuzz/corpus/<target>, FUZZ_JOBS targets at a time (default: one per
# core), and prints per target: executions, coverage
# (libFuzzer's `cov`: instrumented edges reached; `ft`: its finer features), corpus size,
# crashes. Fails when any target crashed, hung (-timeout) or did not run. New corpus entries
# and crash inputs go under fuzz/target/fuzz-work (FUZZ_WORK), never into the repository.
#   scripts/fuzz.sh --minimize [TARGET...]
# reduces fuzz/corpus/<target> to the inputs that add coverage, in place: review and commit.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/fuzz"
minimize=0
if [[ ${1:-} == --minimize ]]; then
  minimize=1
  shift
fi
secs=60
if ((!minimize)); then
  secs=${1:-60}
  shift || true
fi
[[ $secs =~ ^[0-9]+$ && $secs -gt 0 ]] || { echo "fuzz: seconds per target must be a positive whole number, not '$secs'" >&2; exit 2; }
all=$(sed -n 's/^name = "\([a-z_0-9]*\)"$/\1/p' Cargo.toml | grep -v '^truecold-fuzz$')
targets=("$@")
((${#targets[@]})) || mapfile -t targets <<<"$all"
for t in "${targets[@]}"; do
  grep -qx "$t" <<<"$all" || { echo "fuzz: no target '$t' (targets: $(echo $all))" >&2; exit 2; }
done

host=$(rustc -vV | sed -n 's/^host: //p')
# The flags cargo-fuzz passes for `--sanitizer none`, all stable: SanitizerCoverage with
# inline 8-bit counters, the PC table and comparison tracing (libFuzzer's value profile and
# CMP-guided mutations), plus debug assertions and overflow checks (an overflow is a crash).
# `--target` keeps them off build scripts and proc macros, which must not link libFuzzer.
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions -Coverflow-checks"
export CARGO_TARGET_DIR=$root/fuzz/target
start=$(date +%s)
bins=()
for t in "${targets[@]}"; do bins+=(--bin "$t"); done
# fuzz/ is its own workspace (fuzz/Cargo.toml), so it has its own Cargo.lock, made from the
# root's (the same versions of every shared crate); cargo adds to it when a member crate gains
# a dependency. The root's `cargo fmt --all` does not reach it: checked here.
cargo fmt --check
cargo build -q --release --target "$host" "${bins[@]}"
echo "fuzz: built ${#targets[@]} targets in $(($(date +%s) - start)) s"

work=${FUZZ_WORK:-$root/fuzz/target/fuzz-work}
bindir=$CARGO_TARGET_DIR/$host/release
if ((minimize)); then
  # Keeps, per target, the smallest set of inputs of fuzz/corpus/<target> that reaches the
  # same coverage (libFuzzer -merge=1). To grow a corpus, copy chosen inputs of a run
  # (fuzz/target/fuzz-work/<target>/new) into it first.
  for t in "${targets[@]}"; do
    seeds=$root/fuzz/corpus/$t
    rm -rf "$work/$t/min"
    mkdir -p "$work/$t/min"
    "$bindir/$t" -merge=1 "$work/$t/min" "$seeds" >"$work/$t/merge.txt" 2>&1 ||
      { echo "fuzz: merging $t failed: $work/$t/merge.txt" >&2; exit 1; }
    rm -f "$seeds"/*
    cp "$work/$t/min"/* "$seeds"/
    echo "fuzz: $t: $(ls "$seeds" | wc -l) inputs, $(du -sb "$seeds" | cut -f1) bytes"
  done
  exit 0
fi
# One target per core at a time (FUZZ_JOBS, default nproc): each libFuzzer run is one
# process on one core, so the targets' seconds are the same and the wall time is divided.
jobs=${FUZZ_JOBS:-$(nproc)}
[[ $jobs =~ ^[0-9]+$ && $jobs -gt 0 ]] || { echo "fuzz: FUZZ_JOBS must be a positive whole number, not '$jobs'" >&2; exit 2; }
fuzz_one() { # $1 = target; leaves $work/$1/row (the table row) and $work/$1/rc
  local t=$1 seeds=$root/fuzz/corpus/$1 log rc=0 execs rate last cov ft corp crashes
  log=$work/$t/log.txt
  local opts=(-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
              -artifact_prefix="$work/$t/crashes/")
  case $t in
    # Lines longer than the 4096-byte limit must be reachable.
    proto_lines) opts+=(-max_len=16384) ;;
  esac
  # New inputs go to the first directory; the committed corpus is only read.
  "$bindir/$t" "${opts[@]}" "$work/$t/new" "$seeds" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
  crashes=$(find "$work/$t/crashes" -type f | wc -l)
  printf '%-18s %12s %8s %8s %8s %8s %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$crashes" >"$work/$t/row"
  if ((rc != 0 || crashes > 0)) || [[ -z $execs ]]; then
    echo "$rc" >"$work/$t/rc"
  else
    echo 0 >"$work/$t/rc"
  fi
}
for t in "${targets[@]}"; do
  [[ -d $root/fuzz/corpus/$t ]] || { echo "fuzz: no corpus directory $root/fuzz/corpus/$t" >&2; exit 1; }
  rm -rf "$work/$t"
  mkdir -p "$work/$t/new" "$work/$t/crashes"
done
running=0
for t in "${targets[@]}"; do
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait
failed=()
printf '%-18s %12s %8s %8s %8s %8s %s\n' target executions exec/s cov ft corpus crashes
for t in "${targets[@]}"; do
  cat "$work/$t/row" 2>/dev/null || printf '%-18s %12s\n' "$t" "(no result)"
  if [[ $(cat "$work/$t/rc" 2>/dev/null) != 0 ]]; then
    failed+=("$t")
    echo "fuzz: $t failed (exit $(cat "$work/$t/rc" 2>/dev/null || echo '?')); its log: $work/$t/log.txt; crash inputs: $work/$t/crashes" >&2
    grep -E -m1 -A12 "panicked at|ERROR: libFuzzer" "$work/$t/log.txt" >&2 || tail -20 "$work/$t/log.txt" >&2
  fi
done
echo "fuzz: ${#targets[@]} targets, $secs s each, $jobs at a time, $(($(date +%s) - start)) s in all (build included)"
if ((${#failed[@]})); then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: no crash, no hang"
