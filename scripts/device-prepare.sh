#!/usr/bin/env bash
# Run HERE before a device session: puts everything scripts/device-run.sh needs into .device/
# (ignored by git, named in the device tool's `carry`). The lent machine reaches no registry,
# so it gets static binaries and prebuilt guest artifacts only.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build-artifacts.sh
rm -rf .device && mkdir -p .device/guest
cp target/x86_64-unknown-linux-gnu/release/{truecold,truecold-vmm,truecold-proof} .device/
cp out/guest/{vmlinux,initramfs.cpio,config,manifest.json,init} .device/guest/
# The peer engines for the engines campaign (static builds; see ../shared/peers/README.md).
fc=${TRUECOLD_FIRECRACKER:-../shared/peers/bin/firecracker}
ch=${TRUECOLD_CLOUD_HYPERVISOR:-../shared/peers/bin/cloud-hypervisor}
for f in "$fc" "$ch"; do
  [[ -f $f ]] || { echo "device-prepare: $f missing (set TRUECOLD_FIRECRACKER / TRUECOLD_CLOUD_HYPERVISOR; ../shared/peers/README.md)" >&2; exit 1; }
done
cp "$fc" .device/firecracker
cp "$ch" .device/cloud-hypervisor
du -sh .device
