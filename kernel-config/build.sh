#!/usr/bin/env bash
# Builds a truecold kernel variant reproducibly from Debian's linux-source-6.12.
#
#   kernel-config/build.sh <base|debug|nested-host|parity> <outdir>
#   kernel-config/build.sh tune <outdir> <dir>/tune-<knob>.config...
#   kernel-config/build.sh config <outdir> <full .config>
#
# Writes <outdir>/{vmlinux,bzImage,config,manifest.json}. The extracted source is cached
# once per package version in ${TRUECOLD_CACHE:-/var/cache/truecold}/src/, each build in
# .../kernel/<key>/ where key = sha256(source, fragments or start config, this script,
# toolchain). A finished build whose key matches is reused (its files are re-hashed first).
#
# Two ways `truecold bisect` uses it:
# - TRUECOLD_KERNEL_TREE=<git work tree>: build that tree's checkout instead of the pinned
#   package (the source in the key is the tree's HEAD commit, plus a hash of `git diff HEAD`
#   when it has uncommitted changes to tracked files).
# - `config`: start from a complete .config (resolved by olddefconfig) instead of tinyconfig
#   plus fragments.
# Both build incrementally, a bisect step recompiling only what its commit or symbols changed;
# the artifacts are still cached per key. Each build has an object directory of its own
# (below, "Object directories"): a git tree's <tree>/.truecold-build, the pinned source's one
# per lineage, <source>/.truecold-build-<lineage>. The released variants build from scratch; a
# tune's Kconfig arm starts from a copy of the baseline's objects.
#
# Environment:
#   TRUECOLD_CACHE              cache root (default /var/cache/truecold)
#   TRUECOLD_KERNEL_TREE        a kernel git work tree to build instead of the package
#   TRUECOLD_KERNEL_FRESH_DIR   build from scratch in this (empty or absent) directory and
#                               never read or write the build cache (reproducibility check)
#   TRUECOLD_JOBS               make -j (default: nproc)
#   TRUECOLD_KERNEL_LINEAGE     the pinned source's object directory to build in
#                               (.truecold-build-<lineage>; defaults: the variant's name,
#                               config-<sha> for a .config, tune-<key> for a tune arm)
#   TRUECOLD_KERNEL_LINEAGE_FROM  the lineage whose objects a new directory starts from
#                               (a tune arm: `base`, or its baseline's)
set -euo pipefail

PKG=linux-source-6.12
PKG_VERSION=6.12.117-1~deb12u1
TARBALL=/usr/src/linux-source-6.12.tar.xz
TOOLS=(make gcc libc6-dev flex bison bc libelf-dev libssl-dev cpio xz-utils binutils
       )
# Pinned reproducibility inputs: everything the kernel embeds about its build.
export KBUILD_BUILD_TIMESTAMP="Thu Jan  1 00:00:00 UTC 1970"
export KBUILD_BUILD_USER=truecold
export KBUILD_BUILD_HOST=truecold
export KBUILD_BUILD_VERSION=1
export LC_ALL=C TZ=UTC
unset LOCALVERSION KCONFIG_CONFIG ARCH CROSS_COMPILE

die() { echo "kernel-config/build.sh: error: $*" >&2; exit 1; }
log() { echo "kernel-config/build.sh: $*" >&2; }

USAGE="usage: $0 <base|debug|nested-host|parity> <outdir> | $0 tune <outdir> <fragment>... | $0 config <outdir> <config>"
[[ $# -ge 2 ]] || die "$USAGE"
VARIANT=$1
OUTDIR=$2
shift 2
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# FRAGMENTS: names (manifest, cache key); FRAG_FILES: their paths, in merge order.
case "$VARIANT" in
  base) FRAGMENTS=(base.config) ;;
  debug) FRAGMENTS=(base.config debug.config) ;;
  nested-host) FRAGMENTS=(base.config nested-host.config) ;;
  parity) FRAGMENTS=(base.config parity.config) ;;
  # `truecold tune`'s Kconfig knobs: base.config, then each knob's fragment
  # (`tune-<knob>.config`, written by the bench from truecold_proto::tune), in the order given.
  tune) [[ $# -ge 1 ]] || die "$USAGE"; FRAGMENTS=(base.config) ;;
  # `truecold bisect config`: a complete .config, resolved by olddefconfig, no fragments.
  config) [[ $# -eq 1 ]] || die "$USAGE"; FRAGMENTS=() ;;
  *) die "unknown variant '$VARIANT' (want base, debug, nested-host, parity, tune or config)" ;;
esac
[[ $VARIANT == tune || $VARIANT == config || $# -eq 0 ]] || die "$USAGE"
START_CONFIG=""
if [[ $VARIANT == config ]]; then
  START_CONFIG=$1
  [[ -f $START_CONFIG ]] || die "missing start config $START_CONFIG"
  shift
fi
TREE=${TRUECOLD_KERNEL_TREE:-}
if [[ -n $TREE ]]; then
  [[ -d $TREE ]] || die "TRUECOLD_KERNEL_TREE=$TREE is not a directory"
  TREE=$(cd "$TREE" && pwd)
  git -C "$TREE" rev-parse --verify -q HEAD >/dev/null ||
    die "TRUECOLD_KERNEL_TREE=$TREE is not a git work tree with a commit"
  [[ -f $TREE/Makefile && -f $TREE/arch/x86/Kconfig ]] || die "$TREE is not a Linux source tree"
fi
FRAG_FILES=()
for f in "${FRAGMENTS[@]}"; do FRAG_FILES+=("$HERE/$f"); done
for f in "$@"; do
  n=$(basename "$f")
  [[ $n =~ ^tune-[a-z0-9-]+\.config$ ]] || die "a tune fragment is named tune-<knob>.config, not '$n'"
  FRAGMENTS+=("$n"); FRAG_FILES+=("$f")
done
for f in "${FRAG_FILES[@]}"; do [[ -f "$f" ]] || die "missing fragment $f"; done

# --- 1. packages -------------------------------------------------------------------------
pkg_version() { dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null |
                awk '$3=="installed"{print $4}'; }
APT_UPDATED=0
apt_install() {
  [[ $(id -u) -eq 0 ]] || die "need root to apt-get install: $*"
  if [[ $APT_UPDATED -eq 0 ]]; then
    log "apt-get update"
    apt-get update -qq || die "apt-get update failed"
    APT_UPDATED=1
  fi
  log "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" ||
    die "apt-get install $* failed"
}
MISSING=()
for p in "${TOOLS[@]}"; do [[ -n $(pkg_version "$p") ]] || MISSING+=("$p"); done
[[ ${#MISSING[@]} -eq 0 ]] || apt_install "${MISSING[@]}"
if [[ -z $TREE && $(pkg_version "$PKG") != "$PKG_VERSION" ]]; then
  apt_install "$PKG=$PKG_VERSION" ||
    die "cannot install the pinned $PKG=$PKG_VERSION (apt-cache policy $PKG shows what is offered)"
fi
if [[ -z $TREE ]]; then
  HAVE=$(pkg_version "$PKG")
  [[ $HAVE == "$PKG_VERSION" ]] || die "$PKG is '$HAVE', pinned '$PKG_VERSION'"
  [[ -f $TARBALL ]] || die "$TARBALL missing although $PKG $PKG_VERSION is installed"
fi

# --- 2. cache key ------------------------------------------------------------------------
sha() { sha256sum "$1" | cut -d' ' -f1; }
SCRIPT_SHA=$(sha "$HERE/build.sh")
# The toolchain is an input too: a gcc or binutils update must not reuse a build it did not make.
TOOLCHAIN="gcc=$(dpkg-query -W -f='${Version}' gcc-12 2>/dev/null || gcc -dumpfullversion) binutils=$(dpkg-query -W -f='${Version}' binutils 2>/dev/null || ld --version | head -1) make=$(dpkg-query -W -f='${Version}' make 2>/dev/null || make --version | head -1)"
if [[ -n $TREE ]]; then
  SOURCE="tree=$(git -C "$TREE" rev-parse HEAD)"
  if [[ -n $(git -C "$TREE" status --porcelain --untracked-files=no) ]]; then
    SOURCE+="+diff=$(git -C "$TREE" diff HEAD | sha256sum | cut -d' ' -f1)"
  fi
else
  SOURCE="package=$PKG=$PKG_VERSION"
fi
KEY_INPUT="$SOURCE"$'\n'"script=$SCRIPT_SHA"$'\n'"toolchain=$TOOLCHAIN"$'\n'
[[ -z $START_CONFIG ]] || KEY_INPUT+="start-config=$(sha "$START_CONFIG")"$'\n'
FRAG_JSON=""
for i in "${!FRAGMENTS[@]}"; do
  f=${FRAGMENTS[$i]}
  h=$(sha "${FRAG_FILES[$i]}")
  KEY_INPUT+="fragment=$f=$h"$'\n'
  FRAG_JSON+="${FRAG_JSON:+,}"$'\n'"    {\"name\": \"$f\", \"sha256\": \"$h\"}"
done
KEY=$(printf '%s' "$KEY_INPUT" | sha256sum | cut -d' ' -f1)
CACHE=${TRUECOLD_CACHE:-/var/cache/truecold}
mkdir -p "$CACHE/src" "$CACHE/kernel" || die "cannot create cache $CACHE"

# --- 3. source, extracted once (or the given tree) ---------------------------------------
SRC_PARENT="$CACHE/src/$PKG_VERSION"
SRC="$SRC_PARENT/linux-source-6.12"
[[ -z $TREE ]] || SRC=$TREE
exec 8>"$CACHE/src/.lock"
flock 8
if [[ -z $TREE && ! -f "$SRC_PARENT/.extracted" ]]; then
  log "extracting $TARBALL into $SRC_PARENT"
  rm -rf "$SRC_PARENT" "$SRC_PARENT.tmp"
  mkdir -p "$SRC_PARENT.tmp"
  tar -C "$SRC_PARENT.tmp" -xf "$TARBALL" || die "extracting $TARBALL failed"
  [[ -d "$SRC_PARENT.tmp/linux-source-6.12" ]] || die "$TARBALL has no linux-source-6.12/"
  mv "$SRC_PARENT.tmp" "$SRC_PARENT"
  touch "$SRC_PARENT/.extracted"
fi
flock -u 8

# --- 4. reuse a cached build -------------------------------------------------------------
FILES=(vmlinux bzImage config)
write_outputs() { # $1 = directory holding vmlinux, bzImage, config, manifest.json
  mkdir -p "$OUTDIR"
  for f in "${FILES[@]}" manifest.json; do cp -f "$1/$f" "$OUTDIR/$f.tmp" && mv -f "$OUTDIR/$f.tmp" "$OUTDIR/$f"; done
}
cache_valid() { # $1 = artifact dir; every file present and matching the manifest
  local d=$1 f
  [[ -f "$d/manifest.json" ]] || return 1
  for f in "${FILES[@]}"; do
    [[ -f "$d/$f" ]] || return 1
    grep -q "\"$f\": \"$(sha "$d/$f")\"" "$d/manifest.json" || return 1
  done
}
if [[ -n ${TRUECOLD_KERNEL_FRESH_DIR:-} ]]; then
  WORK=$TRUECOLD_KERNEL_FRESH_DIR
  [[ ! -e $WORK || -z $(ls -A "$WORK") ]] || die "TRUECOLD_KERNEL_FRESH_DIR=$WORK is not empty"
else
  WORK="$CACHE/kernel/$KEY"
  mkdir -p "$WORK"
  exec 9>"$WORK/.lock"
  flock 9
  if cache_valid "$WORK/artifacts"; then
    log "cache hit $WORK"
    write_outputs "$WORK/artifacts"
    exit 0
  fi
  rm -rf "$WORK/build" "$WORK/artifacts"
fi
BUILD="$WORK/build"
ART="$WORK/artifacts"
if [[ -z ${TRUECOLD_KERNEL_FRESH_DIR:-} ]]; then
  # Object directories inside the source, each a direct subdirectory of it, where kbuild names
  # the source `..`, so no command line, dependency file or object holds an absolute path, and
  # a copy of a built tree (`cp -a`, which keeps the times) is a built tree.
  # - A git tree's (bisect) one: <tree>/.truecold-build, each build starting from whatever it
  #   last built (a step recompiles only what its commit changed).
  # - The pinned package source's: one per lineage, <source>/.truecold-build-<lineage>, so a
  #   build of one config never leaves another's objects for the next build of a third:
  #   `base`, `nested-host`, `parity`, `debug` (the released variants, built from scratch
  #   each time); `config-<sha>` for a complete .config (a user's kernel), or the lineage the
  #   caller names (TRUECOLD_KERNEL_LINEAGE: a `bisect config`'s steps share one, each
  #   recompiling only the symbols it changes); `tune-<key>` for a tune's Kconfig arm.
  # - A tune's Kconfig arm (and any build given TRUECOLD_KERNEL_LINEAGE_FROM=<lineage>)
  #   starts from a copy of that lineage's tree when it has none of its own: the baseline's
  #   objects, so only what the knob's symbols change is compiled (a full build of a large
  #   config is many minutes; an arm's, about as long as its symbols' objects take).
  # Each directory is locked while in use (the lock is beside it, outside the tree). A
  # directory another version of this script or toolchain built is emptied first (its stamp).
  if [[ -n $TREE ]]; then
    LOCK=$(git -C "$TREE" rev-parse --absolute-git-dir)/truecold-build.lock
    BUILD="$SRC/.truecold-build"
  else
    case "$VARIANT" in
      config) LINEAGE=${TRUECOLD_KERNEL_LINEAGE:-config-$(sha "$START_CONFIG" | cut -c1-16)} ;;
      tune) LINEAGE=${TRUECOLD_KERNEL_LINEAGE:-tune-${KEY:0:16}} ;;
      *) LINEAGE=${TRUECOLD_KERNEL_LINEAGE:-$VARIANT} ;;
    esac
    [[ $LINEAGE =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || die "lineage '$LINEAGE' is not a plain name"
    LOCK=$SRC_PARENT/.build-$LINEAGE.lock
    BUILD="$SRC/.truecold-build-$LINEAGE"
  fi
  exec 7>"$LOCK"
  flock 7
  STAMP=$(printf 'script=%s\ntoolchain=%s\n' "$SCRIPT_SHA" "$TOOLCHAIN")
  FROM_LINEAGE=${TRUECOLD_KERNEL_LINEAGE_FROM:-}
  if [[ $VARIANT == tune && -z $FROM_LINEAGE ]]; then FROM_LINEAGE=base; fi
  INCREMENTAL=0
  [[ -n $TREE || -n $START_CONFIG || -n $FROM_LINEAGE ]] && INCREMENTAL=1
  if [[ $INCREMENTAL == 1 && -f $BUILD/.truecold-stamp && $(cat "$BUILD/.truecold-stamp") == "$STAMP" ]]; then
    log "incremental build directory $BUILD"
  else
    rm -rf "$BUILD"
    FROM_DIR="$SRC/.truecold-build-$FROM_LINEAGE"
    if [[ -z $TREE && -n $FROM_LINEAGE && -f $FROM_DIR/.truecold-stamp &&
          $(cat "$FROM_DIR/.truecold-stamp") == "$STAMP" ]]; then
      # The copy is made under the source lineage's lock, so it is not half a build.
      exec 6>"$SRC_PARENT/.build-$FROM_LINEAGE.lock"
      flock 6
      log "object directory $BUILD copied from $FROM_DIR (lineage $FROM_LINEAGE)"
      cp -a "$FROM_DIR" "$BUILD.tmp" && mv "$BUILD.tmp" "$BUILD" || die "copying $FROM_DIR failed"
      flock -u 6
    fi
  fi
  mkdir -p "$BUILD"
  printf '%s\n' "$STAMP" >"$BUILD/.truecold-stamp"
  # A copy of a built tree: kbuild names the source relatively, but the tools it builds with
  # their own make (objtool and its libsubcmd, under tools/) record the absolute paths of
  # their sources and objects in their .cmd files. Those are rewritten to this source and this
  # directory, their times kept, or objtool would be rebuilt and every object it checks would
  # be out of date. `.truecold-source` names the source and the directory the objects were
  # built in (`src=`, `build=`; one bare line: the source, its objects in .truecold-build).
  if [[ -f $BUILD/.truecold-source ]]; then
    FROM_SRC=$(sed -n 's/^src=//p' "$BUILD/.truecold-source")
    FROM_BUILD=$(sed -n 's/^build=//p' "$BUILD/.truecold-source")
    if [[ -z $FROM_SRC ]]; then
      FROM_SRC=$(head -1 "$BUILD/.truecold-source")
      FROM_BUILD=$FROM_SRC/.truecold-build
    fi
    if [[ ( $FROM_SRC != "$SRC" || $FROM_BUILD != "$BUILD" ) && -d $BUILD/tools ]]; then
      log "object directory copied from $FROM_BUILD: its tools' .cmd files renamed to $BUILD"
      while IFS= read -r -d '' f; do
        touch -r "$f" "$BUILD/.truecold-mtime"
        FB=$FROM_BUILD TB=$BUILD FS=$FROM_SRC TS=$SRC \
          perl -pi -e 's/\Q$ENV{FB}\E/$ENV{TB}/g; s/\Q$ENV{FS}\E(?!\/\.truecold-build)/$ENV{TS}/g' "$f"
        touch -r "$BUILD/.truecold-mtime" "$f"
      done < <(grep -rlFZ --include='.*.cmd' -e "$FROM_SRC" "$BUILD/tools" || true)
      rm -f "$BUILD/.truecold-mtime"
    fi
  fi
  printf 'src=%s\nbuild=%s\n' "$SRC" "$BUILD" >"$BUILD/.truecold-source"
fi
mkdir -p "$BUILD" "$ART"
BUILD=$(cd "$BUILD" && pwd)

# --- 5. configure: tinyconfig + fragments + olddefconfig, then verify --------------------
JOBS=${TRUECOLD_JOBS:-$(nproc)}
# No absolute path on the command line: kbuild maps the source's own prefix out of every
# __FILE__ (-fmacro-prefix-map), the configs build no debug information, and the
# reproducibility check (an object directory outside the source, so kbuild names the source
# by its absolute path) compares the result byte for byte with a build in .truecold-build.
MAKE=(make -C "$SRC" O="$BUILD" ARCH=x86_64 -j"$JOBS")
FRAG_PATHS=("${FRAG_FILES[@]}")
if [[ -n $START_CONFIG ]]; then
  cp -f "$START_CONFIG" "$BUILD/.config.tmp" && mv -f "$BUILD/.config.tmp" "$BUILD/.config"
  : >"$WORK/configure.log"
else
  "${MAKE[@]}" -s tinyconfig >"$WORK/configure.log" 2>&1 || die "make tinyconfig failed (see $WORK/configure.log)"
  ( cd "$BUILD" && "$SRC/scripts/kconfig/merge_config.sh" -m -O "$BUILD" "$BUILD/.config" "${FRAG_PATHS[@]}" ) \
    >>"$WORK/configure.log" 2>&1 || die "merge_config.sh failed (see $WORK/configure.log)"
fi
"${MAKE[@]}" -s olddefconfig >>"$WORK/configure.log" 2>&1 || die "make olddefconfig failed (see $WORK/configure.log)"

# The last fragment that names a symbol wins, as in merge_config.sh.
declare -A WANT=()
declare -a ORDER=()
for p in ${FRAG_PATHS[@]+"${FRAG_PATHS[@]}"}; do
  while IFS= read -r line; do
    if [[ $line =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]]; then
      sym=${BASH_REMATCH[1]}; val=${BASH_REMATCH[2]}
    elif [[ $line =~ ^#\ (CONFIG_[A-Za-z0-9_]+)\ is\ not\ set$ ]]; then
      sym=${BASH_REMATCH[1]}; val=n
    else
      continue
    fi
    [[ -n ${WANT[$sym]+x} ]] || ORDER+=("$sym")
    WANT[$sym]=$val
  done <"$p"
done
BAD=()
for sym in "${ORDER[@]}"; do
  want=${WANT[$sym]}
  got=$(grep -E "^$sym=" "$BUILD/.config" | tail -1 | cut -d= -f2- || true)
  [[ -n $got ]] || got=n
  [[ $got == "$want" ]] || BAD+=("$sym: requested $want, got $got")
done
if [[ ${#BAD[@]} -gt 0 ]]; then
  printf 'kernel-config/build.sh: symbol not as requested: %s\n' "${BAD[@]}" >&2
  die "${#BAD[@]} symbol(s) of variant '$VARIANT' did not end up as requested (resolved config: $BUILD/.config)"
fi

# --- 6. build ----------------------------------------------------------------------------
log "building $VARIANT in $BUILD (-j$JOBS)"
T0=$(date +%s)
"${MAKE[@]}" vmlinux bzImage >"$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log" >&2; die "kernel build failed (see $WORK/build.log)"; }
T1=$(date +%s)
echo "build_seconds=$((T1 - T0))" >"$WORK/build-time.txt"
log "built in $((T1 - T0)) s"
# PVH entry: ELF note "Xen", type XEN_ELFNOTE_PHYS32_ENTRY (18).
readelf -n "$BUILD/vmlinux" | grep -A1 -E '^\s+Xen\s' | grep -qE '0x00000012|PHYS32_ENTRY' ||
  die "vmlinux has no Xen PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY)"

cp -f "$BUILD/vmlinux" "$ART/vmlinux"
cp -f "$BUILD/arch/x86/boot/bzImage" "$ART/bzImage"
cp -f "$BUILD/.config" "$ART/config"
cat >"$ART/manifest.json" <<EOF
{
  "variant": "$VARIANT",
  "source": "$SOURCE",
  "start_config_sha256": "$([[ -n $START_CONFIG ]] && sha "$START_CONFIG")",
  "build_script_sha256": "$SCRIPT_SHA",
  "toolchain": "$TOOLCHAIN",
  "cache_key": "$KEY",
  "fragments": [$FRAG_JSON
  ],
  "files": {
    "vmlinux": "$(sha "$ART/vmlinux")",
    "bzImage": "$(sha "$ART/bzImage")",
    "config": "$(sha "$ART/config")"
  }
}
EOF
write_outputs "$ART"
log "wrote $OUTDIR/{vmlinux,bzImage,config,manifest.json}"
