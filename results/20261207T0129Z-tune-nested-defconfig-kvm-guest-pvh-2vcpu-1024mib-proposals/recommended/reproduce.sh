#!/bin/sh
# truecold tune: measures this tune's recommended configuration (initcall-blacklist-cmos_init, initcall-blacklist-early_resume_init, initcall-blacklist-i8042_init, initcall-blacklist-jent_mod_init) on its own: the
# tune's guest, vCPUs, memory, deadline and confirm rounds, the baseline's backing with
# the winners applied, each winner through its flag. Written by truecold-proof from
# tune.json (truecold-proof verify holds it to that); the bundle goes where truecold
# run puts one (results/ under the working directory, or add --out DIR).
set -eu
here=$(dirname "$0")
exec truecold run --nested --mode sequential --count 6 --vcpus 2 --mem-mib 1024 --backing anon --deadline-ms 300000 --kill-grace-ms 500 --cmdline-extra 'initcall_blacklist=cmos_init initcall_blacklist=early_resume_init initcall_blacklist=i8042_init initcall_blacklist=jent_mod_init' --ram-layout around-hole --kernel-config "$here/../user-kernel.config" "$@"
