//! Stage 4: kernel + initramfs + command line + boot information into guest memory.
//! ELF vmlinux with a PVH note → PVH (`hvm_start_info` with memory map, command line and the
//! initramfs as module 0); ELF without it → 64-bit Linux boot protocol (zero page in %rsi);
//! bzImage → 64-bit boot protocol at its 64-bit entry.
//!
//! This module reads the images and writes into guest memory; the bytes and addresses of
//! every boot structure come from the pure [`crate::boot_params`].
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use linux_loader::loader::bzimage::BzImage;
use linux_loader::loader::elf::{Elf, PvhBootCapability};
use linux_loader::loader::KernelLoader;
use serde::{Deserialize, Serialize};
use vm_memory::{Bytes, GuestAddress, GuestMemoryError};

use crate::boot_params::{
    e820, gdt, identity_page_tables, place_initramfs, pvh_memmap, pvh_module, pvh_start_info,
    zero_page, BootParamsError, E820Entry, CMDLINE_ADDR, GDT_ADDR, PVH_INFO_ADDR, PVH_MEMMAP_ADDR,
    PVH_MODLIST_ADDR, ZERO_PAGE_ADDR,
};
use crate::config::KernelSource;
use crate::memory::{GuestRam, HIGH_RAM_START};

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
    #[error("kernel {name}'s entry point {entry:#x} is outside guest RAM")]
    EntryOutsideRam { name: String, entry: u64 },
    #[error("kernel {name}'s memory image ends at {end:#x}, beyond guest RAM's end {ram_end:#x}")]
    ImageBeyondRam {
        name: String,
        end: u64,
        ram_end: u64,
    },
    #[error("invalid boot parameters")]
    Params(#[source] BootParamsError),
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
            LoaderError::UnknownFormat(_)
            | LoaderError::Elf(..)
            | LoaderError::BzImage(..)
            | LoaderError::EntryOutsideRam { .. }
            | LoaderError::ImageBeyondRam { .. } => "kernel-corrupt",
            LoaderError::Initramfs { source, .. } if missing(source) => "initramfs-missing",
            LoaderError::Initramfs { .. } => "initramfs-unreadable",
            LoaderError::Params(e) => e.kind(),
            LoaderError::Write { .. } => "boot-data-write-failed",
        }
    }
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

/// The embedded probe image for `source` (None for a file).
pub fn probe_image(source: &KernelSource) -> Option<&'static [u8]> {
    match source {
        KernelSource::File(_) => None,
        KernelSource::Probe => Some(crate::probe::PROBE_ELF),
        KernelSource::ProbeSilent => Some(crate::probe::PROBE_SILENT_ELF),
        KernelSource::ProbeLinux64 => Some(crate::probe::PROBE_LINUX64_ELF),
        KernelSource::ProbeSparse => Some(crate::probe::PROBE_SPARSE_ELF),
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

/// A kernel image loaded into guest memory.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Image {
    format: KernelFormat,
    protocol: Protocol,
    /// Guest address of the entry point for `protocol`.
    entry: u64,
    /// First guest address past the kernel.
    kernel_end: u64,
    /// A bzImage's setup header bytes from offset 0x1f1 (None for an ELF vmlinux).
    setup_header: Option<Vec<u8>>,
}

/// Loads an image (`F` = a file or an in-memory cursor) into guest memory.
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
            let (protocol, entry) = match r.pvh_boot_cap {
                PvhBootCapability::PvhEntryPresent(a) => (Protocol::Pvh, a.0),
                _ => (Protocol::Linux64, r.kernel_load.0),
            };
            Ok(Image {
                format: KernelFormat::Elf,
                protocol,
                entry,
                kernel_end: r.kernel_end,
                setup_header: None,
            })
        }
        Some(KernelFormat::BzImage) => {
            let r = BzImage::load(&ram.mem, None, image, hi)
                .map_err(|e| LoaderError::BzImage(name.to_string(), e))?;
            // The setup header runs from 0x1f1 to 0x202 + the byte at 0x201.
            let end = (0x202 + head[0x201] as usize).min(head.len());
            Ok(Image {
                format: KernelFormat::BzImage,
                protocol: Protocol::Linux64,
                // The 64-bit entry is 0x200 past the protected-mode kernel's start.
                entry: r.kernel_load.0 + 0x200,
                kernel_end: r.kernel_end,
                setup_header: Some(head[0x1f1..end].to_vec()),
            })
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
    let image = match kernel {
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
    // An image whose entry point is not in guest RAM, or whose memory image (its BSS
    // included) runs past it, is corrupt: refused here, never a vCPU started at an unmapped
    // address or a kernel whose BSS is not there (both found by the vmm_loader fuzz target:
    // the loader takes an ELF's e_entry and p_memsz as they are).
    let name = || match kernel {
        KernelSource::File(p) => p.display().to_string(),
        _ => "embedded probe".into(),
    };
    if !ram
        .ranges
        .iter()
        .any(|r| (r.start..r.end()).contains(&image.entry))
    {
        return Err(LoaderError::EntryOutsideRam {
            name: name(),
            entry: image.entry,
        });
    }
    let ram_end = ram.ranges.iter().map(|r| r.end()).max().unwrap_or(0);
    if image.kernel_end > ram_end {
        return Err(LoaderError::ImageBeyondRam {
            name: name(),
            end: image.kernel_end,
            ram_end,
        });
    }

    let initramfs = match initramfs {
        None => None,
        Some(p) => {
            // Read straight into guest memory: no buffer in the VMM's own heap (a buffer the
            // size of the initramfs is that many page faults and one more copy).
            let unreadable = |source| LoaderError::Initramfs {
                path: p.to_path_buf(),
                source,
            };
            let mut f = File::open(p).map_err(unreadable)?;
            let meta = f.metadata().map_err(unreadable)?;
            if !meta.is_file() {
                return Err(unreadable(std::io::Error::other("not a regular file")));
            }
            let len = meta.len();
            let addr =
                place_initramfs(&ram.ranges, image.kernel_end, len).map_err(LoaderError::Params)?;
            let count = usize::try_from(len).map_err(|_| {
                unreadable(std::io::Error::other(
                    "initramfs larger than the address space",
                ))
            })?;
            ram.mem
                .read_exact_volatile_from(GuestAddress(addr), &mut f, count)
                .map_err(|e| match e {
                    // The file's bytes (a short read: it shrank while read) or the read itself.
                    GuestMemoryError::IOError(source) => unreadable(source),
                    GuestMemoryError::PartialBuffer {
                        expected,
                        completed,
                    } => unreadable(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("read {completed} of its {expected} bytes"),
                    )),
                    source => LoaderError::Write { addr, source },
                })?;
            Some((addr, len))
        }
    };

    let mut c = cmdline.as_bytes().to_vec();
    c.push(0);
    write(ram, CMDLINE_ADDR, &c)?;
    let map = e820(&ram.ranges, ram.how);
    let gdt: Vec<u8> = gdt().iter().flat_map(|e| e.to_le_bytes()).collect();
    write(ram, GDT_ADDR, &gdt)?;
    match image.protocol {
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
            let z = zero_page(
                image.setup_header.as_deref(),
                CMDLINE_ADDR,
                cmdline.len(),
                initramfs,
                &map,
            )
            .map_err(LoaderError::Params)?;
            write(ram, ZERO_PAGE_ADDR, &z)?;
            for (addr, bytes) in identity_page_tables() {
                write(ram, addr, &bytes)?;
            }
        }
    }
    Ok(Loaded {
        format: image.format,
        protocol: image.protocol,
        entry: image.entry,
        kernel_end: image.kernel_end,
        initramfs,
        cmdline: cmdline.to_string(),
        e820: map,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal 64-bit ELF: one PT_LOAD of 16 bytes at 1 MiB, entry point `entry`.
    fn elf(entry: u64) -> Vec<u8> {
        let mut b = b"\x7fELF\x02\x01\x01".to_vec();
        b.resize(16, 0);
        for (v, n) in [
            (2u64, 2),
            (0x3e, 2),
            (1, 4),
            (entry, 8),
            (64, 8),
            (0, 8),
            (0, 4),
        ] {
            b.extend_from_slice(&v.to_le_bytes()[..n]);
        }
        for (v, n) in [(64u64, 2), (56, 2), (1, 2), (0, 2), (0, 2), (0, 2)] {
            b.extend_from_slice(&v.to_le_bytes()[..n]);
        }
        for (v, n) in [(1u64, 4), (5, 4), (120, 8), (0x10_0000, 8), (0x10_0000, 8)] {
            b.extend_from_slice(&v.to_le_bytes()[..n]);
        }
        for v in [16u64, 16, 0x1000] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&[0x90; 16]);
        b
    }

    /// `mib` MiB of anonymous guest RAM around the hole, and a directory holding `elf(entry)`
    /// as `vmlinux`.
    fn ram_and_kernel(mib: u64, entry: u64) -> (GuestRam, tempfile::TempDir, PathBuf) {
        let mem = truecold_proto::limits::GuestMem::from_mib(mib).unwrap();
        let ram = crate::memory::allocate(
            mem,
            crate::memory::Backing::Anon,
            crate::memory::RamLayout::AroundHole,
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vmlinux");
        std::fs::write(&path, elf(entry)).unwrap();
        (ram, dir, path)
    }

    #[test]
    fn an_entry_point_outside_guest_ram_is_a_corrupt_kernel() {
        let (ram, _dir, path) = ram_and_kernel(4, 0x10_0000);
        let src = KernelSource::File(path.clone());
        let ok = load(&ram, &src, None, "").unwrap();
        assert_eq!((ok.format, ok.entry), (KernelFormat::Elf, 0x10_0000));
        std::fs::write(&path, elf(0x90_0000)).unwrap();
        let e = load(&ram, &src, None, "").unwrap_err();
        assert!(
            matches!(
                e,
                LoaderError::EntryOutsideRam {
                    entry: 0x90_0000,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(e.kind(), "kernel-corrupt");
        // A BSS (p_memsz) that runs past the end of RAM.
        let mut big = elf(0x10_0000);
        big[64 + 40..64 + 48].copy_from_slice(&(64u64 << 20).to_le_bytes());
        std::fs::write(&path, big).unwrap();
        let e = load(&ram, &src, None, "").unwrap_err();
        assert!(matches!(e, LoaderError::ImageBeyondRam { .. }), "{e}");
        assert_eq!(e.kind(), "kernel-corrupt");
    }

    #[test]
    fn the_initramfs_lands_in_guest_memory_byte_for_byte_and_a_bad_one_is_typed() {
        let (ram, dir, kernel) = ram_and_kernel(16, 0x10_0000);
        let src = KernelSource::File(kernel);
        // Read straight into guest memory (no buffer in between): the same bytes at the
        // placed address, its length as the file's.
        let rd = dir.path().join("initramfs");
        let bytes: Vec<u8> = (0..300_001u32).map(|i| (i * 7 + i / 251) as u8).collect();
        std::fs::write(&rd, &bytes).unwrap();
        let ok = load(&ram, &src, Some(&rd), "").unwrap();
        let (addr, len) = ok.initramfs.unwrap();
        assert_eq!(len, bytes.len() as u64);
        let mut back = vec![0u8; bytes.len()];
        ram.mem.read_slice(&mut back, GuestAddress(addr)).unwrap();
        assert!(
            back == bytes,
            "the initramfs in guest memory differs from the file"
        );
        // Missing, and not a regular file (a directory opens): each its own kind.
        let e = load(&ram, &src, Some(&dir.path().join("absent")), "").unwrap_err();
        assert_eq!(e.kind(), "initramfs-missing", "{e}");
        let e = load(&ram, &src, Some(dir.path()), "").unwrap_err();
        assert_eq!(e.kind(), "initramfs-unreadable", "{e}");
    }

    #[test]
    fn format_sniffing() {
        assert_eq!(sniff(b"\x7fELF...."), Some(KernelFormat::Elf));
        assert_eq!(sniff(b"garbage"), None);
        let mut bz = vec![0u8; 0x300];
        bz[0x202..0x206].copy_from_slice(b"HdrS");
        assert_eq!(sniff(&bz), Some(KernelFormat::BzImage));
        assert_eq!(
            sniff(&bz[..0x205]),
            None,
            "a header cut short is not a bzImage"
        );
    }

    #[test]
    fn error_kinds() {
        let missing = check_kernel(Path::new("/nonexistent/vmlinux")).unwrap_err();
        assert_eq!(missing.kind(), "kernel-missing");
        let p = LoaderError::Params(BootParamsError::Cmdline(
            crate::boot_params::CmdlineError::TooLong(3000),
        ));
        assert_eq!(p.kind(), "cmdline-invalid");
        assert_eq!(
            LoaderError::UnknownFormat("x".into()).kind(),
            "kernel-corrupt"
        );
    }
}
