//! QEMU's `microvm` machine with the vmlinux as a PVH `-kernel`:
//! `-M microvm,x-option-roms=off,isa-serial=on,acpi=off,auto-kernel-cmdline=off -enable-kvm
//! -cpu host -smp N -m M -kernel … -initrd … -append … -nodefaults -no-user-config -display
//! none -no-reboot -serial stdio -device isa-debug-exit,iobase=0xf13,iosize=1`.
//!
//! - `isa-serial=on`: the one 8250 at 0x3f8 (IRQ 4) the guest's `8250.nr_uarts=1` finds
//!   without ACPI or PnP; `-serial stdio` puts it on QEMU's stdio.
//! - `acpi=off`: the tuned guest boots with `acpi=off pci=off`; no ACPI tables are built.
//! - `auto-kernel-cmdline=off`: QEMU appends nothing, so the guest gets exactly the one
//!   command line.
//! - microvm has no i8042, so `reboot=k` cannot reset it: an `isa-debug-exit` device on
//!   truecold's exit port (`PORT_EXIT`) ends QEMU at the guest's exit-port write, with exit
//!   status `code << 1 | 1`. `-no-reboot` ends it on any reset as well (status 0).
//! - truecold's other ports are unknown to QEMU (writes ignored, reads all-ones), like to
//!   Firecracker and Cloud Hypervisor.
//! - `--backing hugetlb`: a 2 MiB hugetlb memfd as the machine's memory backend. QEMU
//!   advises THP on its anonymous guest RAM by itself, so `--backing anon` may get huge
//!   pages (the smaps mapping's `AnonHugePages` records how much); there is no separate
//!   `thp` setting.

use crate::{utf8, EngineError, Guest, Launch};
use std::path::Path;
use truecold_proto::kinds::{Backing, Engine};
use truecold_proto::PORT_EXIT;

/// The argv after the program.
pub fn args(g: &Guest) -> Result<Vec<String>, EngineError> {
    let e = Engine::QemuMicrovm;
    let mut machine =
        "microvm,x-option-roms=off,isa-serial=on,acpi=off,auto-kernel-cmdline=off".to_string();
    let mut v: Vec<String> = Vec::new();
    match g.backing {
        Backing::Anon => {}
        Backing::Hugetlb => {
            machine.push_str(",memory-backend=ram");
            v.push("-object".into());
            v.push(format!(
                "memory-backend-memfd,id=ram,size={}M,hugetlb=on,hugetlbsize=2M",
                g.mem.mib()
            ));
        }
        Backing::Thp => {
            return Err(EngineError::Unsupported {
                engine: e,
                backing: g.backing,
                why: "QEMU advises THP on anonymous guest RAM by itself; `--backing anon` is \
                      that configuration",
            })
        }
    }
    let mut head: Vec<String> = vec![
        "-M".into(),
        machine,
        "-enable-kvm".into(),
        "-cpu".into(),
        "host".into(),
        "-smp".into(),
        g.vcpus.to_string(),
        "-m".into(),
        format!("{}M", g.mem.mib()),
    ];
    head.extend(v);
    head.extend([
        "-kernel".into(),
        utf8(e, "the kernel path", &g.kernel)?,
        "-initrd".into(),
        utf8(e, "the initramfs path", &g.initramfs)?,
        "-append".into(),
        g.cmdline(e)?,
        "-nodefaults".into(),
        "-no-user-config".into(),
        "-display".into(),
        "none".into(),
        "-no-reboot".into(),
        "-serial".into(),
        "stdio".into(),
        "-device".into(),
        format!("isa-debug-exit,iobase={PORT_EXIT:#x},iosize=1"),
    ]);
    Ok(head)
}

/// The arm's launch.
pub fn launch(program: &Path, g: &Guest) -> Result<Launch, EngineError> {
    Ok(Launch {
        engine: Engine::QemuMicrovm,
        program: program.to_path_buf(),
        args: args(g)?,
        files: Vec::new(),
        report_file: None,
        per_sample_stamps: false,
        agent: None,
        ram_layout: truecold_proto::kinds::RamLayout::ABSENT,
    })
}

/// The guest's exit-port code from QEMU's exit status (`isa-debug-exit`: `code << 1 | 1`).
pub fn guest_exit_code(status: i32) -> Option<u8> {
    (status & 1 == 1)
        .then(|| u8::try_from(status >> 1).ok())
        .flatten()
}

/// QEMU's clean ends: the guest wrote `ok` (0) to the exit port (status 1), or reset the
/// machine (`-no-reboot`: status 0).
pub fn exit_is_clean(status: i32) -> bool {
    status == 0 || status == 1
}

/// Whether `line` is QEMU's `--version` line: `QEMU emulator version 7.2.22 (…)`.
pub fn is_version_line(line: &str) -> bool {
    line.strip_prefix("QEMU emulator version ")
        .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
}
