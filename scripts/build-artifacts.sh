#!/usr/bin/env bash
# Builds every artifact the tests and the bench need, reusing what is already built:
#   out/guest/  tuned guest kernel (vmlinux, bzImage, config), static init, initramfs, manifest
#   out/l1/     the nested-host kernel for the nested harness
#   target/x86_64-unknown-linux-gnu/release/  static truecold, truecold-vmm, truecold-l1-init,
#                                             truecold-proof
#   out/cli-docs/  shell completions and man pages of those binaries (their `cli-docs`)
# Kernel builds are cached outside the clone (${TRUECOLD_CACHE:-/var/cache/truecold}), keyed by
# the package version, the fragments and the build script.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
# L1's kernel first and the guest's base kernel last (`xtask guest` builds parity, then base):
# the kernel source's one object directory is left holding the base build, where an
# incremental build from the base config (`truecold bisect config`) starts.
cargo run -q -p xtask -- l1 --out out/l1
cargo run -q -p xtask -- guest --out out/guest
# Static host binaries (the nested harness copies them into L1's initramfs; the device script
# carries them to machines without a toolchain). --target keeps the flags off build scripts;
# their paths are remapped (scripts/static-flags.sh), so the digests a bundle records do not
# depend on where the clone is.
. scripts/static-flags.sh
target_dir=${CARGO_TARGET_DIR:-target}
CARGO_ENCODED_RUSTFLAGS=$(static_rustflags . "$target_dir") RUSTFLAGS= cargo build -q --release \
  --target x86_64-unknown-linux-gnu \
  -p truecold-vmm -p truecold-bench -p truecold-nested -p truecold-proof
# Completions and man pages from the binaries just built (they always match their --help):
# written into a fresh directory, which then replaces out/cli-docs.
bin=$target_dir/x86_64-unknown-linux-gnu/release
docs=out/.cli-docs.$$
rm -rf "$docs"
"$bin/truecold" cli-docs "$docs"
"$bin/truecold-proof" cli-docs "$docs"
rm -rf out/cli-docs
mv "$docs" out/cli-docs
echo "artifacts: out/guest out/l1 out/cli-docs target/x86_64-unknown-linux-gnu/release"
