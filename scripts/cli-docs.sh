#!/usr/bin/env bash
# Shell completions and man pages for `truecold` and `truecold-proof`, generated from their
# clap definitions by each binary's hidden `cli-docs DIR` subcommand (docs/building.md,
# "Shell completions and man pages"):
#   scripts/cli-docs.sh OUTDIR
# writes OUTDIR/completions/{truecold,truecold-proof}.{bash,fish}, OUTDIR/completions/_truecold
# and _truecold-proof (zsh), and OUTDIR/man/truecold*.1 (one page per command). An existing
# file there is refused, never overwritten: choose a new or empty OUTDIR.
# Builds the release binaries where scripts/build-artifacts.sh puts them (static,
# target/x86_64-unknown-linux-gnu/release; cargo rebuilds only what changed), without the
# guest artifacts: no kernel build, no root.
set -euo pipefail
# A usage error exits 125, as both binaries' do (`git bisect run` reads 125 as "skip").
(($# == 1)) || { echo "usage: scripts/cli-docs.sh OUTDIR" >&2; exit 125; }
out=$1
[[ $out == /* ]] || out=$PWD/$out
cd "$(dirname "$0")/.."
. scripts/static-flags.sh
target_dir=${CARGO_TARGET_DIR:-target}
CARGO_ENCODED_RUSTFLAGS=$(static_rustflags . "$target_dir") RUSTFLAGS= cargo build -q --release \
  --target x86_64-unknown-linux-gnu -p truecold-bench -p truecold-proof
bin=$target_dir/x86_64-unknown-linux-gnu/release
"$bin/truecold" cli-docs "$out"
"$bin/truecold-proof" cli-docs "$out"
