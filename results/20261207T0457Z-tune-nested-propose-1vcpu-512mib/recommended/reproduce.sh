#!/bin/sh
# truecold tune: measures this tune's recommended configuration (rodata-off, backing-hugetlb, ram-layout-hole-inside) on its own: the
# tune's guest, vCPUs, memory, deadline and confirm rounds, the baseline's backing with
# the winners applied, each winner through its flag. Written by truecold-proof from
# tune.json (truecold-proof verify holds it to that); the bundle goes where truecold
# run puts one (results/ under the working directory, or add --out DIR).
set -eu
here=$(dirname "$0")
exec truecold run --nested --mode sequential --count 6 --vcpus 1 --mem-mib 512 --backing hugetlb --deadline-ms 300000 --kill-grace-ms 500 --cmdline-extra 'rodata=off' --ram-layout hole-inside "$@"
