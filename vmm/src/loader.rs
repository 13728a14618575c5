//! Stage 4: kernel + initramfs + command line + boot information into guest memory.
//! ELF vmlinux with a PVH note → PVH (`hvm_start_info` with memory map, command line and the
//! initramfs as module 0); ELF without it → 64-bit Linux boot protocol (zero page in %rsi);
//! bzImage → 64-bit boot protocol at its 64-bit entry.
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use linux_loader::loader::bzimage::BzImage;
use linux_loader::loader::elf::{Elf, PvhBootCapability};
use linux_loader::loader::KernelLoader;
use serde::{Deserialize, Serialize};
use vm_memory::{Bytes, GuestAddress};

use crate::memory::{GuestRam, RamRange, HIGH_RAM_START};

/// GDT used by the 64-bit protocol entry (and loaded for PVH too).
pub const GDT_ADDR: u64 = 0x500;
/// `hvm_start_info`.
pub const PVH_INFO_ADDR: u64 = 0x6000;
/// `hvm_modlist_entry[1]`.
pub const PVH_MODLIST_ADDR: u64 = 0x6040;
/// `hvm_memmap_table_entry[]` (up to 160 entries before the zero page).
pub const PVH_MEMMAP_ADDR: u64 = 0x6100;
/// The zero page (`boot_params`) of the 64-bit protocol.
pub const ZERO_PAGE_ADDR: u64 = 0x7000;
/// Initial stack of the 64-bit protocol.
pub const BOOT_STACK: u64 = 0x8ff0;
/// Page tables of the 64-bit protocol: PML4, PDPT, PD (identity map of the first GiB).
pub const PML4_ADDR: u64 = 0x9000;
pub const PDPT_ADDR: u64 = 0xa000;
pub const PD_ADDR: u64 = 0xb000;
/// The command line.
pub const CMDLINE_ADDR: u64 = 0x2_0000;
/// Longest command line, NUL excluded (x86 COMMAND_LINE_SIZE is 2048 with the NUL).
pub const CMDLINE_MAX: usize = 2047;
/// The initramfs ends at or below this (the 64-bit protocol's default initrd_addr_max).
pub const INITRD_MAX_END: u64 = 0x8000_0000;
const E820_RAM: u32 = 1;
const PVH_MAGIC: u32 = 0x336e_c578;
const ZERO_PAGE_E820_MAX: usize = 128;

/// Where the kernel comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KernelSource {
    File(PathBuf),
    /// The embedded probe guest.
    Probe,
    /// The embedded probe guest built never to ring (deadline tests).
    ProbeSilent,
    /// The embedded probe guest without a PVH note (64-bit boot protocol).
    ProbeLinux64,
}

/// How the guest is entered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    Pvh,
    Linux64,
}

/// The image format recognised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KernelFormat {
    Elf,
    BzImage,
}

/// Why the kernel could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoaderError {
    #[error("cannot open kernel {path}")]
    OpenKernel {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read kernel {path}")]
    ReadKernel {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} is neither an ELF vmlinux nor a bzImage")]
    UnknownFormat(String),
    #[error("cannot load ELF kernel {0}")]
    Elf(String, #[source] linux_loader::loader::Error),
    #[error("cannot load bzImage {0}")]
    BzImage(String, #[source] linux_loader::loader::Error),
    #[error("cannot read initramfs {path}")]
    Initramfs {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("initramfs of {size} bytes does not fit between the kernel end {kernel_end:#x} and {limit:#x}")]
    InitramfsTooLarge {
        size: u64,
        kernel_end: u64,
        limit: u64,
    },
    #[error("command line of {0} bytes is longer than {CMDLINE_MAX}")]
    CmdlineTooLong(usize),
    #[error("command line contains a NUL or non-ASCII byte")]
    CmdlineInvalid,
    #[error("memory map has {0} entries, more than the boot protocol carries")]
    TooManyE820(usize),
    #[error("writing boot data at {addr:#x} failed")]
    Write {
        addr: u64,
        #[source]
        source: vm_memory::GuestMemoryError,
    },
}

impl LoaderError {
    /// Stable kebab-case kind (the CLI's JSON error report).
    pub fn kind(&self) -> &'static str {
        let missing = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
        match self {
            LoaderError::OpenKernel { source, .. } if missing(source) => "kernel-missing",
            LoaderError::OpenKernel { .. } | LoaderError::ReadKernel { .. } => "kernel-unreadable",
            LoaderError::UnknownFormat(_) | LoaderError::Elf(..) | LoaderError::BzImage(..) => {
                "kernel-corrupt"
            }
            LoaderError::Initramfs { source, .. } if missing(source) => "initramfs-missing",
            LoaderError::Initramfs { .. } => "initramfs-unreadable",
            LoaderError::InitramfsTooLarge { .. } => "initramfs-too-large",
            LoaderError::CmdlineTooLong(_) | LoaderError::CmdlineInvalid => "cmdline-invalid",
            LoaderError::TooManyE820(_) => "memory-map-too-large",
            LoaderError::Write { .. } => "boot-data-write-failed",
        }
    }
}

/// One E820 entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct E820Entry {
    pub addr: u64,
    pub size: u64,
    pub kind: u32,
}

/// The E820 map for the RAM ranges: exactly one RAM entry per memslot, nothing else (pure).
pub fn e820(ranges: &[RamRange]) -> Vec<E820Entry> {
    ranges
        .iter()
        .map(|r| E820Entry {
            addr: r.start,
            size: r.size,
            kind: E820_RAM,
        })
        .collect()
}

/// Sum of the RAM entries of `map`, bytes.
pub fn e820_ram(map: &[E820Entry]) -> u64 {
    map.iter()
        .filter(|e| e.kind == E820_RAM)
        .map(|e| e.size)
        .sum()
}

/// The tuned base command line (see docs/architecture.md and notes/anchors.md): console off
/// unless asked (each 8250 byte is a VM exit), no ACPI/PCI probing, reboot through the
/// keyboard controller (our stop signal), no crypto self-tests, no I/O-port delays.
pub fn base_cmdline(console: bool) -> &'static str {
    if console {
        "console=ttyS0 8250.nr_uarts=1 reboot=k panic=-1 acpi=off pci=off i8042.noaux \
         i8042.nomux i8042.nopnp i8042.dumbkbd cryptomgr.notests swiotlb=noforce \
         io_delay=none no_timer_check"
    } else {
        "8250.nr_uarts=0 quiet loglevel=0 reboot=k panic=-1 acpi=off pci=off i8042.noaux \
         i8042.nomux i8042.nopnp i8042.dumbkbd cryptomgr.notests swiotlb=noforce \
         io_delay=none no_timer_check"
    }
}

/// The full command line (pure): base + `truecold.mem=<bytes>` + extra.
pub fn cmdline(console: bool, mem_bytes: u64, extra: &str) -> Result<String, LoaderError> {
    let mut s = format!(
        "{} {}={}",
        base_cmdline(console),
        truecold_proto::cmdline::MEM,
        mem_bytes
    );
    let extra = extra.trim();
    if !extra.is_empty() {
        s.push(' ');
        s.push_str(extra);
    }
    if !s.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(LoaderError::CmdlineInvalid);
    }
    if s.len() > CMDLINE_MAX {
        return Err(LoaderError::CmdlineTooLong(s.len()));
    }
    Ok(s)
}

/// `hvm_start_info` v1 (56 bytes, pure).
pub fn pvh_start_info(
    cmdline_addr: u64,
    memmap_addr: u64,
    memmap_entries: u32,
    modlist_addr: u64,
    modules: u32,
) -> Vec<u8> {
    let mut b = Vec::with_capacity(56);
    b.extend_from_slice(&PVH_MAGIC.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes()); // version
    b.extend_from_slice(&0u32.to_le_bytes()); // flags
    b.extend_from_slice(&modules.to_le_bytes());
    b.extend_from_slice(&(if modules > 0 { modlist_addr } else { 0 }).to_le_bytes());
    b.extend_from_slice(&cmdline_addr.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes()); // rsdp_paddr: no ACPI
    b.extend_from_slice(&memmap_addr.to_le_bytes());
    b.extend_from_slice(&memmap_entries.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b
}

/// `hvm_memmap_table_entry[]` (24 bytes each, pure).
pub fn pvh_memmap(map: &[E820Entry]) -> Vec<u8> {
    let mut b = Vec::with_capacity(map.len() * 24);
    for e in map {
        b.extend_from_slice(&e.addr.to_le_bytes());
        b.extend_from_slice(&e.size.to_le_bytes());
        b.extend_from_slice(&e.kind.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
    }
    b
}

/// One `hvm_modlist_entry` (32 bytes, pure).
pub fn pvh_module(addr: u64, size: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(32);
    b.extend_from_slice(&addr.to_le_bytes());
    b.extend_from_slice(&size.to_le_bytes());
    b.extend_from_slice(&[0; 16]); // cmdline_paddr, reserved
    b
}

/// The zero page (`boot_params`, 4096 bytes, pure). `setup_header` is the bzImage's header
/// bytes from offset 0x1f1 (None for an ELF vmlinux: a minimal header is written).
pub fn zero_page(
    setup_header: Option<&[u8]>,
    cmdline_addr: u64,
    cmdline_len: usize,
    initrd: Option<(u64, u64)>,
    map: &[E820Entry],
) -> Result<Vec<u8>, LoaderError> {
    if map.len() > ZERO_PAGE_E820_MAX {
        return Err(LoaderError::TooManyE820(map.len()));
    }
    let mut z = vec![0u8; 4096];
    if let Some(h) = setup_header {
        let n = h.len().min(0x290 - 0x1f1);
        z[0x1f1..0x1f1 + n].copy_from_slice(&h[..n]);
    }
    let put32 =
        |z: &mut Vec<u8>, off: usize, v: u32| z[off..off + 4].copy_from_slice(&v.to_le_bytes());
    z[0x1fe..0x200].copy_from_slice(&0xaa55u16.to_le_bytes());
    put32(&mut z, 0x202, 0x5372_6448); // "HdrS"
    if setup_header.is_none() {
        z[0x206..0x208].copy_from_slice(&0x020fu16.to_le_bytes());
        put32(&mut z, 0x230, 0x0100_0000); // kernel_alignment
    }
    z[0x210] = 0xff; // type_of_loader: undefined
    z[0x211] |= 0x01; // LOADED_HIGH
    put32(&mut z, 0x228, cmdline_addr as u32);
    put32(&mut z, 0x238, cmdline_len as u32);
    if let Some((addr, size)) = initrd {
        put32(&mut z, 0x218, addr as u32);
        put32(&mut z, 0x21c, size as u32);
    }
    z[0x1e8] = map.len() as u8;
    for (i, e) in map.iter().enumerate() {
        let o = 0x2d0 + 20 * i;
        z[o..o + 8].copy_from_slice(&e.addr.to_le_bytes());
        z[o + 8..o + 16].copy_from_slice(&e.size.to_le_bytes());
        z[o + 16..o + 20].copy_from_slice(&e.kind.to_le_bytes());
    }
    Ok(z)
}

/// GDT: null, 64-bit code (0x08), data (0x10), TSS (0x18) — pure.
pub fn gdt() -> [u64; 4] {
    [
        0,
        0x00af_9b00_0000_ffff,
        0x00cf_9300_0000_ffff,
        0x008f_8b00_0000_ffff,
    ]
}

/// What was loaded and where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loaded {
    pub format: KernelFormat,
    pub protocol: Protocol,
    pub entry: u64,
    pub kernel_end: u64,
    pub initramfs: Option<(u64, u64)>,
    pub cmdline: String,
    pub e820: Vec<E820Entry>,
}

fn write(ram: &GuestRam, addr: u64, bytes: &[u8]) -> Result<(), LoaderError> {
    ram.mem
        .write_slice(bytes, GuestAddress(addr))
        .map_err(|source| LoaderError::Write { addr, source })
}

/// Where the initramfs goes: page aligned, as high as possible below the 3 GiB hole and
/// [`INITRD_MAX_END`], above the kernel (pure).
pub fn place_initramfs(
    ranges: &[RamRange],
    kernel_end: u64,
    size: u64,
) -> Result<u64, LoaderError> {
    let limit = ranges
        .get(1)
        .map(|r| r.end())
        .unwrap_or(0)
        .min(INITRD_MAX_END);
    let too_large = LoaderError::InitramfsTooLarge {
        size,
        kernel_end,
        limit,
    };
    let addr = limit.checked_sub(size).ok_or(too_large)? & !0xfff;
    if addr < kernel_end.max(HIGH_RAM_START) {
        return Err(LoaderError::InitramfsTooLarge {
            size,
            kernel_end,
            limit,
        });
    }
    Ok(addr)
}

/// The embedded probe image for `source` (None for a file).
pub fn probe_image(source: &KernelSource) -> Option<&'static [u8]> {
    match source {
        KernelSource::File(_) => None,
        KernelSource::Probe => Some(crate::probe::PROBE_ELF),
        KernelSource::ProbeSilent => Some(crate::probe::PROBE_SILENT_ELF),
        KernelSource::ProbeLinux64 => Some(crate::probe::PROBE_LINUX64_ELF),
    }
}

fn sniff(head: &[u8]) -> Option<KernelFormat> {
    if head.starts_with(b"\x7fELF") {
        Some(KernelFormat::Elf)
    } else if head.len() >= 0x206 && &head[0x202..0x206] == b"HdrS" {
        Some(KernelFormat::BzImage)
    } else {
        None
    }
}

/// An image in guest memory: format, protocol, entry, end, and (bzImage) its setup header.
type Image = (KernelFormat, Protocol, u64, u64, Option<Vec<u8>>);

/// Loads an image (`F` = a file or an in-memory cursor) and returns (format, protocol,
/// entry, kernel end, setup header bytes for bzImage).
fn load_image<F>(ram: &GuestRam, name: &str, image: &mut F) -> Result<Image, LoaderError>
where
    F: Read + Seek + vm_memory::ReadVolatile,
{
    let mut head = vec![0u8; 0x1000];
    let mut n = 0;
    while n < head.len() {
        match image.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(source) => {
                return Err(LoaderError::ReadKernel {
                    path: PathBuf::from(name),
                    source,
                })
            }
        }
    }
    head.truncate(n);
    let hi = Some(GuestAddress(HIGH_RAM_START));
    match sniff(&head) {
        Some(KernelFormat::Elf) => {
            let r = Elf::load(&ram.mem, None, image, hi)
                .map_err(|e| LoaderError::Elf(name.to_string(), e))?;
            match r.pvh_boot_cap {
                PvhBootCapability::PvhEntryPresent(a) => {
                    Ok((KernelFormat::Elf, Protocol::Pvh, a.0, r.kernel_end, None))
                }
                _ => Ok((
                    KernelFormat::Elf,
                    Protocol::Linux64,
                    r.kernel_load.0,
                    r.kernel_end,
                    None,
                )),
            }
        }
        Some(KernelFormat::BzImage) => {
            let r = BzImage::load(&ram.mem, None, image, hi)
                .map_err(|e| LoaderError::BzImage(name.to_string(), e))?;
            // The setup header runs from 0x1f1 to 0x202 + the byte at 0x201.
            let end = (0x202 + head[0x201] as usize).min(head.len());
            let hdr = head[0x1f1..end].to_vec();
            Ok((
                KernelFormat::BzImage,
                Protocol::Linux64,
                r.kernel_load.0 + 0x200,
                r.kernel_end,
                Some(hdr),
            ))
        }
        None => Err(LoaderError::UnknownFormat(name.to_string())),
    }
}

/// Fails early, with the path, when the kernel file cannot be opened.
pub fn check_kernel(path: &Path) -> Result<(), LoaderError> {
    File::open(path)
        .map(drop)
        .map_err(|source| LoaderError::OpenKernel {
            path: path.to_path_buf(),
            source,
        })
}

/// Loads kernel, initramfs, command line and boot information.
pub fn load(
    ram: &GuestRam,
    kernel: &KernelSource,
    initramfs: Option<&Path>,
    cmdline: &str,
) -> Result<Loaded, LoaderError> {
    let (format, protocol, entry, kernel_end, hdr) = match kernel {
        KernelSource::File(path) => {
            let mut f = File::open(path).map_err(|source| LoaderError::OpenKernel {
                path: path.clone(),
                source,
            })?;
            let name = path.display().to_string();
            let r = load_image(ram, &name, &mut f)?;
            f.seek(SeekFrom::Start(0))
                .map_err(|source| LoaderError::ReadKernel {
                    path: path.clone(),
                    source,
                })?;
            r
        }
        probe => {
            let img = probe_image(probe).unwrap_or_default();
            load_image(ram, "embedded probe", &mut std::io::Cursor::new(img))?
        }
    };

    let initramfs = match initramfs {
        None => None,
        Some(p) => {
            let bytes = std::fs::read(p).map_err(|source| LoaderError::Initramfs {
                path: p.to_path_buf(),
                source,
            })?;
            let addr = place_initramfs(&ram.ranges, kernel_end, bytes.len() as u64)?;
            write(ram, addr, &bytes)?;
            Some((addr, bytes.len() as u64))
        }
    };

    let mut c = cmdline.as_bytes().to_vec();
    c.push(0);
    write(ram, CMDLINE_ADDR, &c)?;
    let map = e820(&ram.ranges);
    let gdt: Vec<u8> = gdt().iter().flat_map(|e| e.to_le_bytes()).collect();
    write(ram, GDT_ADDR, &gdt)?;
    match protocol {
        Protocol::Pvh => {
            write(ram, PVH_MEMMAP_ADDR, &pvh_memmap(&map))?;
            if let Some((a, s)) = initramfs {
                write(ram, PVH_MODLIST_ADDR, &pvh_module(a, s))?;
            }
            let info = pvh_start_info(
                CMDLINE_ADDR,
                PVH_MEMMAP_ADDR,
                map.len() as u32,
                PVH_MODLIST_ADDR,
                u32::from(initramfs.is_some()),
            );
            write(ram, PVH_INFO_ADDR, &info)?;
        }
        Protocol::Linux64 => {
            let z = zero_page(hdr.as_deref(), CMDLINE_ADDR, cmdline.len(), initramfs, &map)?;
            write(ram, ZERO_PAGE_ADDR, &z)?;
            // Identity map of the first GiB with 2 MiB pages.
            write(ram, PML4_ADDR, &(PDPT_ADDR | 3).to_le_bytes())?;
            write(ram, PDPT_ADDR, &(PD_ADDR | 3).to_le_bytes())?;
            let pd: Vec<u8> = (0..512u64)
                .flat_map(|i| ((i << 21) | 0x83).to_le_bytes())
                .collect();
            write(ram, PD_ADDR, &pd)?;
        }
    }
    Ok(Loaded {
        format,
        protocol,
        entry,
        kernel_end,
        initramfs,
        cmdline: cmdline.to_string(),
        e820: map,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::layout;

    #[test]
    fn e820_equals_memslots() {
        let r = layout(16384).unwrap();
        let m = e820(&r);
        assert_eq!(m.len(), r.len());
        assert_eq!(e820_ram(&m), 16384 << 20);
        assert!(m.iter().all(|e| e.kind == 1));
    }

    #[test]
    fn start_info_layout() {
        let b = pvh_start_info(0x20000, 0x6100, 3, 0x6040, 1);
        assert_eq!(b.len(), 56);
        assert_eq!(u32::from_le_bytes(b[0..4].try_into().unwrap()), 0x336ec578);
        assert_eq!(u32::from_le_bytes(b[4..8].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(b[12..16].try_into().unwrap()), 1);
        assert_eq!(u64::from_le_bytes(b[16..24].try_into().unwrap()), 0x6040);
        assert_eq!(u64::from_le_bytes(b[24..32].try_into().unwrap()), 0x20000);
        assert_eq!(u64::from_le_bytes(b[40..48].try_into().unwrap()), 0x6100);
        assert_eq!(u32::from_le_bytes(b[48..52].try_into().unwrap()), 3);
        let none = pvh_start_info(0x20000, 0x6100, 3, 0x6040, 0);
        assert_eq!(u64::from_le_bytes(none[16..24].try_into().unwrap()), 0);
        assert_eq!(pvh_memmap(&e820(&layout(128).unwrap())).len(), 48);
        assert_eq!(pvh_module(1, 2).len(), 32);
    }

    #[test]
    fn zero_page_fields() {
        let map = e820(&layout(128).unwrap());
        let z = zero_page(None, 0x20000, 10, Some((0x100_0000, 0x2000)), &map).unwrap();
        assert_eq!(z.len(), 4096);
        assert_eq!(&z[0x202..0x206], b"HdrS");
        assert_eq!(u16::from_le_bytes([z[0x1fe], z[0x1ff]]), 0xaa55);
        assert_eq!(z[0x1e8], 2);
        assert_eq!(
            u32::from_le_bytes(z[0x228..0x22c].try_into().unwrap()),
            0x20000
        );
        assert_eq!(
            u32::from_le_bytes(z[0x218..0x21c].try_into().unwrap()),
            0x100_0000
        );
        assert_eq!(
            u32::from_le_bytes(z[0x21c..0x220].try_into().unwrap()),
            0x2000
        );
        let second = 0x2d0 + 20;
        assert_eq!(
            u64::from_le_bytes(z[second..second + 8].try_into().unwrap()),
            0x10_0000
        );
        let too_many = vec![map[0]; 129];
        assert!(matches!(
            zero_page(None, 0, 0, None, &too_many),
            Err(LoaderError::TooManyE820(129))
        ));
    }

    #[test]
    fn cmdline_rules() {
        let c = cmdline(false, 128 << 20, " foo=1 ").unwrap();
        assert!(c.contains("truecold.mem=134217728"));
        assert!(c.ends_with(" foo=1"));
        assert!(c.contains("8250.nr_uarts=0"));
        assert!(!c.contains("console=ttyS0"));
        assert!(cmdline(true, 1, "").unwrap().contains("console=ttyS0"));
        assert!(matches!(
            cmdline(false, 1, &"x".repeat(3000)),
            Err(LoaderError::CmdlineTooLong(_))
        ));
        assert!(matches!(
            cmdline(false, 1, "a\u{e9}"),
            Err(LoaderError::CmdlineInvalid)
        ));
        let parsed = truecold_proto::GuestConfig::from_cmdline(&c).unwrap();
        assert_eq!(parsed.mem, 128 << 20);
    }

    #[test]
    fn initramfs_placement() {
        let r = layout(128).unwrap();
        let a = place_initramfs(&r, 0x20_0000, 5000).unwrap();
        assert_eq!(a % 4096, 0);
        assert!(a + 5000 <= r[1].end() && a >= 0x20_0000);
        assert!(place_initramfs(&r, 0x20_0000, 200 << 20).is_err());
    }

    #[test]
    fn format_sniffing() {
        assert_eq!(sniff(b"\x7fELF...."), Some(KernelFormat::Elf));
        assert_eq!(sniff(b"garbage"), None);
        let mut bz = vec![0u8; 0x300];
        bz[0x202..0x206].copy_from_slice(b"HdrS");
        assert_eq!(sniff(&bz), Some(KernelFormat::BzImage));
    }
}
