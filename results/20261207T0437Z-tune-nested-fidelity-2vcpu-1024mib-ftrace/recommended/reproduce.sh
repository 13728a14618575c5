#!/bin/sh
# truecold tune: measures this tune's recommended configuration (none: the baseline) on its own: the
# tune's guest, vCPUs, memory, deadline and confirm rounds, the baseline's backing with
# the winners applied, each winner through its flag. Written by truecold-proof from
# tune.json (truecold-proof verify holds it to that); the bundle goes where truecold
# run puts one (results/ under the working directory, or add --out DIR).
set -eu
here=$(dirname "$0")
exec truecold run --nested --mode sequential --count 9 --vcpus 2 --mem-mib 1024 --backing anon --deadline-ms 300000 --kill-grace-ms 500 --ram-layout around-hole "$@"
