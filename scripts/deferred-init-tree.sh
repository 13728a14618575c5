#!/usr/bin/env bash
# The kernel tree of docs/fidelity.md's deferred struct-page init row: the pinned
# linux-source-6.12 (the bisect fixture's first commit, scripts/bisect-fixture.sh) with one
# commit on top that runs deferred struct-page init on one thread
# (deferred_page_init_max_threads() returns 1, where 6.12 gives the padata job every CPU of
# the node). Author and dates are fixed, so the commit ids are the same on every machine.
#
#   scripts/deferred-init-tree.sh DIR    # prints "good <commit>" and "bad <commit>"
#
# Then, on the nested harness's parallel clock:
#   truecold bisect run --nested --kernel-tree DIR/linux --good G --bad B --clock parallel \
#     --vcpus 2 --mem-mib 16384 -n 7 --max-n 14 --threshold-pct 1 --profile 0
set -euo pipefail
die() { echo "scripts/deferred-init-tree.sh: error: $*" >&2; exit 1; }
[[ $# -eq 1 ]] || die "usage: $0 DIR"
[[ ! -e $1 ]] || die "$1 exists"
here=$(cd "$(dirname "$0")" && pwd)
cache=${TRUECOLD_CACHE:-/var/cache/truecold}
SRC=$cache/src/6.12.117-1~deb12u1/linux-source-6.12
[[ -d $SRC/.truecold-build-base ]] || die "no base kernel build in $SRC (run: scripts/build-artifacts.sh)"
bash "$here/bisect-fixture.sh" "$cache/bisect-fixture" >/dev/null
fixture=$cache/bisect-fixture/linux
base=$(git -C "$fixture" rev-list --max-parents=0 HEAD)
T=$1/linux
mkdir -p "$1"
git clone -q --shared --no-checkout "$fixture" "$T"
git -C "$T" checkout -q -b deferred-init-one-thread "$base"
f=$T/mm/mm_init.c
old=$'\treturn max(cpumask_weight(node_cpumask), 1U);'
[[ $(grep -cxF "$old" "$f") -eq 1 ]] || die "$f: deferred_page_init_max_threads() is not as expected"
sed -i "s/^\treturn max(cpumask_weight(node_cpumask), 1U);$/\treturn 1;/" "$f"
export GIT_AUTHOR_NAME=truecold GIT_AUTHOR_EMAIL=truecold@localhost GIT_COMMITTER_NAME=truecold \
  GIT_COMMITTER_EMAIL=truecold@localhost GIT_AUTHOR_DATE="2026-12-07T00:00:00Z" \
  GIT_COMMITTER_DATE="2026-12-07T00:00:00Z"
git -C "$T" commit -q -am "mm: deferred struct-page init on one thread (the lever measured: padata multithreading off)"
# The tree's object directory starts as a copy of the base build (as the fixture's does).
cp -a "$SRC/.truecold-build-base" "$T/.truecold-build"
echo "good $base"
echo "bad $(git -C "$T" rev-parse HEAD)"
