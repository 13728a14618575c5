#!/usr/bin/env bash
# A kernel git tree with a known boot regression, for `truecold bisect`'s tests and for trying
# it by hand:
#
#   scripts/bisect-fixture.sh <dir>      # prints "good <commit>" and "bad <commit>"
#
# <dir>/linux is a git work tree of the pinned Debian linux-source-6.12 (the source
# kernel-config/build.sh extracts), committed as is, with four commits on top:
#   1. a new Documentation file              (nothing built changes)
#   2. a comment in kernel/reboot.c          (one object rebuilt, same code)
#   3. `mdelay(30)` at the start of ksysfs_init, a built-in core_initcall: THE REGRESSION
#   4. a comment in init/main.c              (one object rebuilt, same code)
# and two branches off the first commit, for the step's skip cases:
#   broken-build  kernel/ksysfs.c does not compile
#   broken-boot   ksysfs_init panics: the kernel never reaches strict-ready
# Author, committer and dates are fixed, so the commit ids are the same on every machine and
# every run (and the kernel build cache, keyed by commit, stays valid). An existing <dir> made
# by this version of the script is reused, with the kernel build it holds
# (<dir>/linux/.truecold-build, first a copy of the pinned source's base build); the tree is
# reset to its last commit.
set -euo pipefail
die() { echo "scripts/bisect-fixture.sh: error: $*" >&2; exit 1; }
[[ $# -eq 1 ]] || die "usage: $0 <dir>"
DIR=$1
PKG_VERSION=6.12.117-1~deb12u1
SRC=${TRUECOLD_CACHE:-/var/cache/truecold}/src/$PKG_VERSION/linux-source-6.12
[[ -f ${SRC%/linux-source-6.12}/.extracted ]] ||
  die "the pinned kernel source is not extracted at $SRC (run: kernel-config/build.sh base out/kernel, or scripts/build-artifacts.sh)"
command -v git >/dev/null || die "git is needed (apt-get install git)"

export GIT_AUTHOR_NAME=truecold GIT_AUTHOR_EMAIL=truecold@localhost
export GIT_COMMITTER_NAME=truecold GIT_COMMITTER_EMAIL=truecold@localhost
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
T=0
commit() { # $1 = message; every commit one fixed minute after the previous one
  T=$((T + 60))
  GIT_AUTHOR_DATE="@$((1767225600 + T)) +0000" GIT_COMMITTER_DATE="@$((1767225600 + T)) +0000" \
    git -C "$W" commit -q -m "$1"
}
replace() { # $1 = file, $2 = python-free sed expression; writes a new file (never in place)
  sed -e "$2" "$W/$1" >"$W/$1.new" && mv -f "$W/$1.new" "$W/$1"
}

mkdir -p "$DIR"
exec 9>"$DIR/.lock"
flock 9
W=$DIR/linux
SELF=$(sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1)
if [[ -f $DIR/.done && $(cat "$DIR/.done") == "$SELF" ]]; then
  git -C "$W" bisect reset >/dev/null 2>&1 || true
  git -C "$W" checkout -q --force main 2>/dev/null ||
    die "$W exists but cannot be reset; remove $DIR"
else
  rm -rf "$W" "$W.tmp"
  echo "scripts/bisect-fixture.sh: copying $SRC into $W (once)" >&2
  # The source's base build (kernel-config/build.sh: <source>/.truecold-build-base, where
  # nothing names the source by an absolute path) comes along as the tree's object directory
  # (<tree>/.truecold-build), its times kept, so the tree's first build starts from the pinned
  # base kernel's build instead of from nothing; the source's other object directories stay
  # behind. Copied under build.sh's lock on it.
  # The source's own entries are named one by one, never `.`: kernel-config/build.sh makes and
  # removes object directories in the source's top directory while other builds run (a cold
  # test run builds kernels beside this copy), and tar fails on a directory that changed as it
  # read it. The entries themselves do not change once extracted (kbuild writes only to O=).
  mkdir -p "$W.tmp"
  mapfile -t entries < <(find "$SRC" -mindepth 1 -maxdepth 1 ! -name '.truecold-build*' -printf '%P\n' | LC_ALL=C sort)
  ((${#entries[@]} > 0)) || die "$SRC is empty"
  tar -C "$SRC" -cf - -- "${entries[@]}" | tar -C "$W.tmp" -xf -
  if [[ -d $SRC/.truecold-build-base ]]; then
    exec 8>"${SRC%/linux-source-6.12}/.build-base.lock"
    flock 8
    cp -a "$SRC/.truecold-build-base" "$W.tmp/.truecold-build"
    flock -u 8
  fi
  mv "$W.tmp" "$W"
  git -C "$W" init -q -b main
  git -C "$W" config core.compression 1
  git -C "$W" config gc.auto 0
  # Debian's packaged tree ignores everything (.gitignore: /*), hence -f; the object
  # directory stays out.
  git -C "$W" add -A -f -- . ':(exclude).truecold-build'
  commit "Linux $PKG_VERSION (Debian linux-source-6.12), as packaged"
  printf 'This tree is the truecold bisect fixture (scripts/bisect-fixture.sh).\n' \
    >"$W/Documentation/truecold-fixture.txt"
  git -C "$W" add -f Documentation/truecold-fixture.txt
  commit "Documentation: say what this tree is"
  replace kernel/reboot.c 's|^ \*  linux/kernel/reboot\.c$| *  linux/kernel/reboot.c (truecold fixture: a comment only)|'
  git -C "$W" add -f kernel/reboot.c
  commit "reboot: a comment"
  replace kernel/ksysfs.c 's|^#include <linux/compiler.h>$|#include <linux/compiler.h>\n#include <linux/delay.h>|'
  replace kernel/ksysfs.c '/^static int __init ksysfs_init(void)$/,/^\tint error;$/s|^\tint error;$|\tint error;\n\n\tmdelay(30);\t/* truecold fixture: the regression bisect must find */|'
  grep -q 'mdelay(30)' "$W/kernel/ksysfs.c" || die "the ksysfs.c edit did not apply"
  git -C "$W" add -f kernel/ksysfs.c
  commit "ksysfs: wait 30 ms at init"
  replace init/main.c 's|^ \*  linux/init/main\.c$| *  linux/init/main.c (truecold fixture: a comment only)|'
  git -C "$W" add -f init/main.c
  commit "init: a comment"
  git -C "$W" checkout -q -b broken-build HEAD~4
  replace kernel/ksysfs.c 's|^static int __init ksysfs_init(void)$|static int __init ksysfs_init(void) this does not compile|'
  git -C "$W" add -f kernel/ksysfs.c
  commit "ksysfs: a syntax error"
  git -C "$W" checkout -q -b broken-boot HEAD~1
  replace kernel/ksysfs.c '/^static int __init ksysfs_init(void)$/,/^\tint error;$/s|^\tint error;$|\tint error;\n\n\tpanic("truecold fixture: this kernel never reaches strict-ready");|'
  grep -q 'truecold fixture: this kernel never' "$W/kernel/ksysfs.c" || die "the broken-boot edit did not apply"
  git -C "$W" add -f kernel/ksysfs.c
  commit "ksysfs: panic at init"
  git -C "$W" checkout -q main
  echo "$SELF" >"$DIR/.done"
fi
echo "good $(git -C "$W" rev-list --max-parents=0 main)"
echo "regression $(git -C "$W" rev-parse main~1)"
echo "bad $(git -C "$W" rev-parse main)"
echo "broken-build $(git -C "$W" rev-parse broken-build)"
echo "broken-boot $(git -C "$W" rev-parse broken-boot)"
