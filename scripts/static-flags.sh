# Sourced by scripts/build-artifacts.sh and scripts/cli-docs.sh: the one definition of how the
# static host binaries (truecold, truecold-vmm, truecold-l1-init, truecold-proof, …) are built.
#   static_rustflags ROOT TARGET_DIR   prints CARGO_ENCODED_RUSTFLAGS for them
# +crt-static, and every absolute path a build embeds (panic locations, file!() of the
# workspace, of the crates under CARGO_HOME, of build-script output under the target
# directory) remapped to a fixed name, so a build of one commit gives the same binaries in
# any checkout path, cargo home and target directory (docs/fleet.md, "Reproducible
# binaries"). rustc takes the last matching remap: the target directory, usually inside the
# checkout, comes after it. The flags are joined by 0x1f (CARGO_ENCODED_RUSTFLAGS), so a
# path with spaces stays one flag.
static_rustflags() {
  local root=$1 target=$2 cargo_home=${CARGO_HOME:-$HOME/.cargo} sep=$'\x1f'
  root=$(cd "$root" && pwd -P)
  mkdir -p "$target"
  target=$(cd "$target" && pwd -P)
  cargo_home=$(cd "$cargo_home" 2>/dev/null && pwd -P || echo "$cargo_home")
  printf '%s' "-Ctarget-feature=+crt-static${sep}--remap-path-prefix=${cargo_home}=/cargo${sep}--remap-path-prefix=${root}=/truecold${sep}--remap-path-prefix=${target}=/target"
}
