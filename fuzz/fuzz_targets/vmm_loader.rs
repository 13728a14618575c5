//! The kernel loader on a file the user (or a hostile artifact) names: fuzzed bytes as the
//! kernel image (ELF with or without a PVH note, bzImage setup headers, anything else) and as
//! the initramfs, loaded into a real 4 MiB guest RAM with a command line. Checks: never a
//! panic; a success places the entry point, the command line and the initramfs inside guest
//! RAM; the unknown formats and the images that do not fit end in a typed error.
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use truecold_fuzz::Input;
use truecold_proto::boot_cmdline::{cmdline, SerialUse};
use truecold_proto::limits::GuestMem;
use truecold_vmm::config::KernelSource;
use truecold_vmm::loader;
use truecold_vmm::memory::{self, Backing, GuestRam};

/// One small guest RAM for the process (mapping it per input would dominate the run).
fn ram() -> &'static GuestRam {
    static RAM: OnceLock<GuestRam> = OnceLock::new();
    RAM.get_or_init(|| {
        let mem = GuestMem::from_mib(4).expect("4 MiB is within the limits");
        memory::allocate(mem, Backing::Anon, memory::RamLayout::AroundHole)
            .expect("4 MiB of anonymous guest RAM")
    })
}

fn scratch(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("truecold-fuzz-{}-{name}", std::process::id()))
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let with_initramfs = input.bool();
    let initramfs = input.short().to_vec();
    let kernel = input.bytes(input.rest_len());
    let (kpath, ipath) = (scratch("kernel"), scratch("initramfs"));
    std::fs::write(&kpath, kernel).expect("the scratch kernel file");
    std::fs::write(&ipath, &initramfs).expect("the scratch initramfs file");
    let mem = GuestMem::from_mib(4).expect("4 MiB is within the limits");
    let line = cmdline(SerialUse::Off, mem, "").expect("the base command line");
    let r = loader::load(
        ram(),
        &KernelSource::File(kpath),
        with_initramfs.then_some(ipath.as_path()),
        &line,
    );
    if let Ok(l) = r {
        // The top of guest RAM (its ranges leave the legacy hole below 1 MiB out).
        let end = ram().ranges.iter().map(|r| r.end()).max().unwrap_or(0);
        assert!(l.entry < end, "entry {:#x} outside guest RAM", l.entry);
        assert!(
            l.kernel_end <= end,
            "kernel end {:#x} outside guest RAM",
            l.kernel_end
        );
        if let Some((at, len)) = l.initramfs {
            assert!(
                at.checked_add(len).is_some_and(|e| e <= end),
                "initramfs outside guest RAM"
            );
        }
        assert!(!l.e820.is_empty(), "a load without a memory map");
    }
});
