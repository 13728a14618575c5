#!/usr/bin/env bash
# Runs ON a lent device machine, from the repo root, with .device/ carried (see
# scripts/device-prepare.sh) and $OUT set by the device tool:
#   1. prints the KVM kind and the CPU's virtualization flags;
#   2. with hardware KVM: 1,000 sequential 2 vCPU / 16 GiB Linux boots, then 1 vCPU / 128 MiB,
#      each written as a bundle into $OUT (tarred: the tool returns files, not folders);
#      then the engines side by side (truecold, Firecracker, Cloud Hypervisor, and QEMU
#      microvm when the machine has qemu-system-x86_64 — said either way), 100 interleaved
#      rounds at each of the two configurations, as multi-arm directories;
#      without it: says so and runs nothing that would be mistaken for a result.
set -uo pipefail
OUT=${OUT:?OUT must be set by the device tool}
d=.device
echo "== host"; uname -a; nproc; grep -m1 'model name' /proc/cpuinfo
ls -l /dev/kvm 2>&1; ls /sys/module | grep -E '^kvm' | tr '\n' ' '; echo
flags=$(grep -m1 -ow -E 'vmx|svm' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "virtualization flags: ${flags:-none}"
if [[ ! -c /dev/kvm || -z $flags || -d /sys/module/kvm_pvm ]]; then
  echo "no hardware KVM here: no campaign run (numbers from this host would not be hardware-KVM numbers)"
  exit 0
fi
run() { # label, extra args
  local label=$1; shift
  timeout -s INT -k 30 230 "$d/truecold" run --linux --vmm "$d/truecold-vmm" --guest-dir "$d/guest" \
    --out "/tmp/$label" "$@" || echo "campaign $label exited $?"
  [[ -d /tmp/$label ]] || return 0
  (cd "/tmp/$label" && sha256sum -c --strict --quiet SHA256SUMS) && "$d/truecold-proof" verify "/tmp/$label"
  tar -C /tmp -cf "$OUT/$label.tar" "$label"
}
run hw-2vcpu-16g -n 1000 --vcpus 2 --mem-mib 16384
run hw-1vcpu-128m -n 1000 --vcpus 1 --mem-mib 128
engines=truecold,firecracker,cloud-hypervisor
if command -v qemu-system-x86_64 >/dev/null; then
  engines+=,qemu-microvm
else
  echo "no qemu-system-x86_64 on this machine: the engines campaigns run without the qemu-microvm arm"
fi
eng=(--engines "$engines" --firecracker "$d/firecracker" --cloud-hypervisor "$d/cloud-hypervisor")
run hw-engines-2vcpu-16g -n 100 --vcpus 2 --mem-mib 16384 "${eng[@]}"
run hw-engines-1vcpu-128m -n 100 --vcpus 1 --mem-mib 128 "${eng[@]}"
ls -l "$OUT"
