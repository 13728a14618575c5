//! Boot parameters, pure: where the boot structures go, the E820 map, the command line, the
//! PVH `hvm_start_info` (+ memory map and module list), the 64-bit protocol's zero page
//! (`boot_params`), the GDT and the initramfs placement. No KVM and no file I/O here: every
//! function turns values into bytes or addresses, and [`crate::loader`] writes them into
//! guest memory.
use serde::{Deserialize, Serialize};

use crate::memory::{RamLayout, RamRange, HIGH_RAM_START};
use truecold_proto::layout::{MapEntry, MapKind};

// The guest's command line is built in proto, once for every engine.
pub use truecold_proto::boot_cmdline::{
    agent_cmdline, base_cmdline, cmdline, hash_caps, parity_keys, CmdlineError, SerialUse,
    VmmDevices, CMDLINE_MAX,
};

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
/// The initramfs ends at or below this (the 64-bit protocol's default initrd_addr_max).
pub const INITRD_MAX_END: u64 = 0x8000_0000;
/// E820 type of usable RAM.
pub const E820_RAM: u32 = 1;
/// E820 type of a reserved range.
pub const E820_RESERVED: u32 = 2;
/// `hvm_start_info.magic`.
pub const PVH_MAGIC: u32 = 0x336e_c578;
/// Entries the zero page's `e820_table` holds.
pub const ZERO_PAGE_E820_MAX: usize = 128;

// The structures do not overlap where the loader writes them (checked at compile time).
const _: () = assert!(GDT_ADDR + 32 <= PVH_INFO_ADDR);
const _: () = assert!(PVH_INFO_ADDR + 56 <= PVH_MODLIST_ADDR);
const _: () = assert!(PVH_MODLIST_ADDR + 32 <= PVH_MEMMAP_ADDR);
const _: () = assert!(PVH_MEMMAP_ADDR + 24 * 160 <= ZERO_PAGE_ADDR);
const _: () = assert!(ZERO_PAGE_ADDR + 4096 <= BOOT_STACK);
const _: () = assert!(0x2d0 + 20 * ZERO_PAGE_E820_MAX <= 4096);
const _: () = assert!(BOOT_STACK < PML4_ADDR);
const _: () = assert!(PD_ADDR + 4096 <= CMDLINE_ADDR);
const _: () = assert!(CMDLINE_ADDR + (CMDLINE_MAX as u64) < crate::mptable::MPTABLE_ADDR);

/// Boot parameters that cannot be built.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BootParamsError {
    #[error("initramfs of {size} bytes does not fit between the kernel end {kernel_end:#x} and {limit:#x}")]
    InitramfsTooLarge {
        size: u64,
        kernel_end: u64,
        limit: u64,
    },
    #[error(transparent)]
    Cmdline(#[from] CmdlineError),
    #[error("memory map has {0} entries, more than the boot protocol carries")]
    TooManyE820(usize),
}

impl BootParamsError {
    /// Stable kebab-case kind (the CLI's JSON error report).
    pub fn kind(&self) -> &'static str {
        match self {
            BootParamsError::InitramfsTooLarge { .. } => "initramfs-too-large",
            BootParamsError::Cmdline(e) => e.kind(),
            BootParamsError::TooManyE820(_) => "memory-map-too-large",
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

/// The E820 map for the RAM ranges laid out as `how` (pure): exactly one RAM entry per
/// memslot, and `hole-inside`'s hole as one reserved entry, in address order; nothing else.
pub fn e820(ranges: &[RamRange], how: RamLayout) -> Vec<E820Entry> {
    let mut map: Vec<E820Entry> = ranges
        .iter()
        .map(|r| E820Entry {
            addr: r.start,
            size: r.size,
            kind: E820_RAM,
        })
        .collect();
    if let Some(h) = how.hole() {
        map.push(E820Entry {
            addr: h.start,
            size: h.len(),
            kind: E820_RESERVED,
        });
        map.sort_by_key(|e| e.addr);
    }
    map
}

/// Sum of the RAM entries of `map`, bytes.
pub fn e820_ram(map: &[E820Entry]) -> u64 {
    map.iter()
        .filter(|e| e.kind == E820_RAM)
        .map(|e| e.size)
        .sum()
}

/// Bytes of `map`'s reserved entries inside `how`'s hole (0 when it has none): the
/// `e820_hole_reserved` figure.
pub fn e820_hole_reserved(map: &[E820Entry], how: RamLayout) -> u64 {
    let Some(h) = how.hole() else { return 0 };
    map.iter()
        .filter(|e| e.kind == E820_RESERVED)
        .map(|e| {
            let end = e.addr.saturating_add(e.size).min(h.end);
            end.saturating_sub(e.addr.max(h.start))
        })
        .sum()
}

/// `map` as the one accounting rule reads a memory map (`truecold_proto::layout`).
pub fn map_entries(map: &[E820Entry]) -> Vec<MapEntry> {
    map.iter()
        .map(|e| MapEntry {
            start: e.addr,
            end: e.addr.saturating_add(e.size),
            kind: match e.kind {
                E820_RAM => MapKind::Ram,
                E820_RESERVED => MapKind::Reserved,
                _ => MapKind::Other,
            },
        })
        .collect()
}

/// What truecold-vmm tells the guest's command line about its virtio devices (pure): one
/// `virtio_mmio.device=` entry per device in [`VirtioConfig::device_names`] order, the network
/// pair when it attaches a network device, the workspace when it attaches the disk
/// ([`truecold_proto::boot_cmdline::vmm_cmdline`] writes them).
///
/// [`VirtioConfig::device_names`]: crate::config::VirtioConfig::device_names
pub fn virtio_devices(cfg: &crate::config::VirtioConfig) -> VmmDevices {
    VmmDevices {
        devices: cfg.device_names().len(),
        net: cfg.tap.as_ref().and(cfg.net_pair),
        workspace: cfg.workspace.is_some(),
    }
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
) -> Result<Vec<u8>, BootParamsError> {
    if map.len() > ZERO_PAGE_E820_MAX {
        return Err(BootParamsError::TooManyE820(map.len()));
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

/// The 64-bit protocol's page tables, as (guest address, bytes) to write: PML4 → PDPT → PD,
/// an identity map of the first GiB with 2 MiB pages (pure).
pub fn identity_page_tables() -> [(u64, Vec<u8>); 3] {
    let pd: Vec<u8> = (0..512u64)
        .flat_map(|i| ((i << 21) | 0x83).to_le_bytes())
        .collect();
    [
        (PML4_ADDR, (PDPT_ADDR | 3).to_le_bytes().to_vec()),
        (PDPT_ADDR, (PD_ADDR | 3).to_le_bytes().to_vec()),
        (PD_ADDR, pd),
    ]
}

/// Where the initramfs goes: page aligned, as high as possible below the 3 GiB hole and
/// [`INITRD_MAX_END`], above the kernel (pure).
pub fn place_initramfs(
    ranges: &[RamRange],
    kernel_end: u64,
    size: u64,
) -> Result<u64, BootParamsError> {
    let limit = ranges
        .get(1)
        .map(|r| r.end())
        .unwrap_or(0)
        .min(INITRD_MAX_END);
    let too_large = || BootParamsError::InitramfsTooLarge {
        size,
        kernel_end,
        limit,
    };
    let addr = limit.checked_sub(size).ok_or_else(too_large)? & !0xfff;
    if addr < kernel_end.max(HIGH_RAM_START) {
        return Err(too_large());
    }
    Ok(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gm(n: u64) -> truecold_proto::limits::GuestMem {
        truecold_proto::limits::GuestMem::from_mib(n).expect("a size within the limits")
    }
    use crate::memory::{layout, ABOVE_4G, HOLE_START, LOW_RAM_END};

    fn u16_at(b: &[u8], o: usize) -> u16 {
        u16::from_le_bytes([b[o], b[o + 1]])
    }
    fn u32_at(b: &[u8], o: usize) -> u32 {
        u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
    }
    fn u64_at(b: &[u8], o: usize) -> u64 {
        u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
    }
    fn ram(addr: u64, size: u64) -> E820Entry {
        E820Entry {
            addr,
            size,
            kind: E820_RAM,
        }
    }

    #[test]
    fn e820_for_memory_sizes_around_the_32_bit_hole() {
        let below = HOLE_START - HIGH_RAM_START;
        // (MiB, expected map): the low 640 KiB, then from 1 MiB up to the 3 GiB hole, then
        // the rest from 4 GiB.
        let cases: [(u64, Vec<E820Entry>); 6] = [
            (
                4,
                vec![
                    ram(0, LOW_RAM_END),
                    ram(HIGH_RAM_START, (4 << 20) - LOW_RAM_END),
                ],
            ),
            (
                128,
                vec![
                    ram(0, LOW_RAM_END),
                    ram(HIGH_RAM_START, (128 << 20) - LOW_RAM_END),
                ],
            ),
            (
                3071,
                vec![
                    ram(0, LOW_RAM_END),
                    ram(HIGH_RAM_START, (3071 << 20) - LOW_RAM_END),
                ],
            ),
            (
                3072,
                vec![
                    ram(0, LOW_RAM_END),
                    ram(HIGH_RAM_START, below),
                    ram(ABOVE_4G, (3072 << 20) - LOW_RAM_END - below),
                ],
            ),
            (
                4096,
                vec![
                    ram(0, LOW_RAM_END),
                    ram(HIGH_RAM_START, below),
                    ram(ABOVE_4G, (4096 << 20) - LOW_RAM_END - below),
                ],
            ),
            (
                16384,
                vec![
                    ram(0, LOW_RAM_END),
                    ram(HIGH_RAM_START, below),
                    ram(ABOVE_4G, (16384 << 20) - LOW_RAM_END - below),
                ],
            ),
        ];
        for (mib, want) in cases {
            let r = layout(gm(mib), RamLayout::AroundHole);
            let m = e820(&r, RamLayout::AroundHole);
            assert_eq!(m, want, "{mib} MiB");
            assert_eq!(
                e820_ram(&m),
                mib << 20,
                "{mib} MiB: RAM entries sum to the size"
            );
            // One entry per memslot, in order, never overlapping the hole.
            assert_eq!(m.len(), r.len());
            assert!(m.windows(2).all(|w| w[0].addr + w[0].size <= w[1].addr));
            assert!(m
                .iter()
                .all(|e| e.addr + e.size <= HOLE_START || e.addr >= ABOVE_4G));
        }
        // Only RAM entries count.
        let mixed = [
            ram(0, 10),
            E820Entry {
                addr: 10,
                size: 5,
                kind: 2,
            },
        ];
        assert_eq!(e820_ram(&mixed), 10);
        assert_eq!(e820_hole_reserved(&mixed, RamLayout::AroundHole), 0);
    }

    /// `hole-inside`: RAM [0, 640 KiB), the hole reserved, RAM [1 MiB, M) (above 3 GiB: to the
    /// 32-bit hole, then from 4 GiB); RAM + declared hole = M to the byte, by the one rule,
    /// and each layout's map fails the other's rule.
    #[test]
    fn e820_hole_inside_declares_the_hole_and_sums_exactly() {
        use truecold_proto::kinds::Engine;
        use truecold_proto::layout::{check_map, Accounted};
        let hole = HIGH_RAM_START - LOW_RAM_END;
        let reserved = E820Entry {
            addr: LOW_RAM_END,
            size: hole,
            kind: E820_RESERVED,
        };
        let below = HOLE_START - HIGH_RAM_START;
        let cases: [(u64, Vec<E820Entry>); 6] = [
            (
                4,
                vec![
                    ram(0, LOW_RAM_END),
                    reserved,
                    ram(HIGH_RAM_START, (4 << 20) - HIGH_RAM_START),
                ],
            ),
            (
                1024,
                vec![
                    ram(0, LOW_RAM_END),
                    reserved,
                    ram(HIGH_RAM_START, (1024 << 20) - HIGH_RAM_START),
                ],
            ),
            (
                3072,
                vec![ram(0, LOW_RAM_END), reserved, ram(HIGH_RAM_START, below)],
            ),
            (
                3073,
                vec![
                    ram(0, LOW_RAM_END),
                    reserved,
                    ram(HIGH_RAM_START, below),
                    ram(ABOVE_4G, 1 << 20),
                ],
            ),
            (
                4096,
                vec![
                    ram(0, LOW_RAM_END),
                    reserved,
                    ram(HIGH_RAM_START, below),
                    ram(ABOVE_4G, 1 << 30),
                ],
            ),
            (
                16384,
                vec![
                    ram(0, LOW_RAM_END),
                    reserved,
                    ram(HIGH_RAM_START, below),
                    ram(ABOVE_4G, 13 << 30),
                ],
            ),
        ];
        for (mib, want) in cases {
            let m = mib << 20;
            let r = layout(gm(mib), RamLayout::HoleInside);
            let map = e820(&r, RamLayout::HoleInside);
            assert_eq!(map, want, "{mib} MiB");
            assert_eq!(e820_ram(&map) + hole, m, "{mib} MiB: RAM + hole = M");
            assert_eq!(e820_ram(&map), r.iter().map(|r| r.size).sum::<u64>());
            assert_eq!(e820_hole_reserved(&map, RamLayout::HoleInside), hole);
            assert_eq!(
                check_map(
                    Engine::Truecold,
                    RamLayout::HoleInside,
                    m,
                    &map_entries(&map)
                ),
                Ok(Accounted {
                    ram: m - hole,
                    declared: hole
                }),
                "{mib} MiB"
            );
            assert!(check_map(
                Engine::Truecold,
                RamLayout::AroundHole,
                m,
                &map_entries(&map)
            )
            .is_err());
            let around = e820(
                &layout(gm(mib), RamLayout::AroundHole),
                RamLayout::AroundHole,
            );
            assert_eq!(
                check_map(
                    Engine::Truecold,
                    RamLayout::AroundHole,
                    m,
                    &map_entries(&around)
                ),
                Ok(Accounted {
                    ram: m,
                    declared: 0
                }),
                "{mib} MiB"
            );
            assert!(check_map(
                Engine::Truecold,
                RamLayout::HoleInside,
                m,
                &map_entries(&around)
            )
            .is_err());
            // The hole left undeclared is caught.
            let undeclared: Vec<_> = map.iter().copied().filter(|e| e.kind == E820_RAM).collect();
            assert!(check_map(
                Engine::Truecold,
                RamLayout::HoleInside,
                m,
                &map_entries(&undeclared)
            )
            .is_err());
        }
    }

    #[test]
    fn start_info_layout() {
        let b = pvh_start_info(0x20000, 0x6100, 3, 0x6040, 1);
        assert_eq!(b.len(), 56);
        assert_eq!(u32_at(&b, 0), 0x336e_c578, "magic");
        assert_eq!(u32_at(&b, 4), 1, "version");
        assert_eq!(u32_at(&b, 8), 0, "flags");
        assert_eq!(u32_at(&b, 12), 1, "nr_modules");
        assert_eq!(u64_at(&b, 16), 0x6040, "modlist_paddr");
        assert_eq!(u64_at(&b, 24), 0x20000, "cmdline_paddr");
        assert_eq!(u64_at(&b, 32), 0, "rsdp_paddr");
        assert_eq!(u64_at(&b, 40), 0x6100, "memmap_paddr");
        assert_eq!(u32_at(&b, 48), 3, "memmap_entries");
        assert_eq!(u32_at(&b, 52), 0, "reserved");
        let none = pvh_start_info(0x20000, 0x6100, 3, 0x6040, 0);
        assert_eq!(u64_at(&none, 16), 0, "no modules: no list");

        let map = e820(
            &layout(gm(16384), RamLayout::HoleInside),
            RamLayout::HoleInside,
        );
        let mm = pvh_memmap(&map);
        assert_eq!(mm.len(), 24 * 4);
        for (i, e) in map.iter().enumerate() {
            let o = 24 * i;
            assert_eq!(
                (
                    u64_at(&mm, o),
                    u64_at(&mm, o + 8),
                    u32_at(&mm, o + 16),
                    u32_at(&mm, o + 20)
                ),
                (e.addr, e.size, e.kind, 0)
            );
        }
        let m = pvh_module(0x100_0000, 0x2345);
        assert_eq!(m.len(), 32);
        assert_eq!((u64_at(&m, 0), u64_at(&m, 8)), (0x100_0000, 0x2345));
        assert!(m[16..].iter().all(|&b| b == 0));
    }

    #[test]
    fn zero_page_fields() {
        let map = e820(
            &layout(gm(16384), RamLayout::AroundHole),
            RamLayout::AroundHole,
        );
        let z = zero_page(None, CMDLINE_ADDR, 10, Some((0x100_0000, 0x2000)), &map).unwrap();
        assert_eq!(z.len(), 4096);
        assert_eq!(z[0x1e8], 3, "e820_entries");
        assert_eq!(u16_at(&z, 0x1fe), 0xaa55, "boot_flag");
        assert_eq!(&z[0x202..0x206], b"HdrS");
        assert_eq!(u16_at(&z, 0x206), 0x020f, "version (no bzImage header)");
        assert_eq!(z[0x210], 0xff, "type_of_loader");
        assert_eq!(z[0x211] & 1, 1, "LOADED_HIGH");
        assert_eq!(u32_at(&z, 0x218), 0x100_0000, "ramdisk_image");
        assert_eq!(u32_at(&z, 0x21c), 0x2000, "ramdisk_size");
        assert_eq!(u32_at(&z, 0x228), CMDLINE_ADDR as u32, "cmd_line_ptr");
        assert_eq!(u32_at(&z, 0x230), 0x0100_0000, "kernel_alignment");
        assert_eq!(u32_at(&z, 0x238), 10, "cmdline_size");
        for (i, e) in map.iter().enumerate() {
            let o = 0x2d0 + 20 * i;
            assert_eq!(
                (u64_at(&z, o), u64_at(&z, o + 8), u32_at(&z, o + 16)),
                (e.addr, e.size, e.kind)
            );
        }
        // No initramfs: no ramdisk fields.
        let z = zero_page(None, CMDLINE_ADDR, 10, None, &map).unwrap();
        assert_eq!((u32_at(&z, 0x218), u32_at(&z, 0x21c)), (0, 0));

        // A bzImage's setup header is kept (version, alignment), loader fields are ours.
        let mut hdr = vec![0u8; 0x202 + 0x6a - 0x1f1];
        hdr[0x206 - 0x1f1..0x208 - 0x1f1].copy_from_slice(&0x020du16.to_le_bytes());
        hdr[0x230 - 0x1f1..0x234 - 0x1f1].copy_from_slice(&0x20_0000u32.to_le_bytes());
        hdr[0x210 - 0x1f1] = 0x42;
        let z = zero_page(Some(&hdr), CMDLINE_ADDR, 5, None, &map).unwrap();
        assert_eq!(u16_at(&z, 0x206), 0x020d);
        assert_eq!(u32_at(&z, 0x230), 0x20_0000);
        assert_eq!(z[0x210], 0xff);
        assert_eq!(&z[0x202..0x206], b"HdrS");
        // A header longer than the setup header area is cut at 0x290.
        let long = vec![0xee; 4096];
        let z = zero_page(Some(&long), CMDLINE_ADDR, 5, None, &map).unwrap();
        assert_eq!(z[0x28f], 0xee);
        assert_eq!(z[0x290], 0);

        let full = vec![map[0]; ZERO_PAGE_E820_MAX];
        assert_eq!(zero_page(None, 0, 0, None, &full).unwrap()[0x1e8], 128);
        let too_many = vec![map[0]; ZERO_PAGE_E820_MAX + 1];
        assert_eq!(
            zero_page(None, 0, 0, None, &too_many),
            Err(BootParamsError::TooManyE820(129))
        );
        assert_eq!(
            BootParamsError::TooManyE820(129).kind(),
            "memory-map-too-large"
        );
    }

    #[test]
    fn initramfs_placement() {
        let r = layout(gm(128), RamLayout::AroundHole);
        let a = place_initramfs(&r, 0x20_0000, 5000).unwrap();
        assert_eq!(a % 4096, 0);
        assert!(a + 5000 <= r[1].end() && a >= 0x20_0000);
        assert_eq!(a, (r[1].end() - 5000) & !0xfff, "as high as possible");
        assert!(matches!(
            place_initramfs(&r, 0x20_0000, 200 << 20),
            Err(BootParamsError::InitramfsTooLarge { .. })
        ));
        // Above the 3 GiB hole, the initramfs stays below INITRD_MAX_END.
        let big = layout(gm(16384), RamLayout::AroundHole);
        let a = place_initramfs(&big, 0x20_0000, 1 << 20).unwrap();
        assert_eq!(a, INITRD_MAX_END - (1 << 20));
        // It never overlaps the kernel.
        assert!(place_initramfs(&r, r[1].end() - 4096, 8192).is_err());
    }

    #[test]
    fn gdt_and_page_tables() {
        let g = gdt();
        assert_eq!(g[0], 0);
        assert_eq!((g[1] >> 53) & 1, 1, "code segment is 64-bit (L)");
        let pt = identity_page_tables();
        assert_eq!(pt[0], (PML4_ADDR, (PDPT_ADDR | 3).to_le_bytes().to_vec()));
        assert_eq!(pt[1], (PDPT_ADDR, (PD_ADDR | 3).to_le_bytes().to_vec()));
        assert_eq!(pt[2].0, PD_ADDR);
        assert_eq!(pt[2].1.len(), 4096);
        assert_eq!(u64_at(&pt[2].1, 8 * 511), (511 << 21) | 0x83);
    }

    #[test]
    fn virtio_devices_on_the_line_and_the_parity_line_is_the_benchs() {
        use crate::config::VirtioConfig;
        use truecold_proto::boot_cmdline::{vmm_agent_cmdline, vmm_cmdline};
        use truecold_proto::kinds::{RamLayout, Transport};
        use truecold_proto::parity::NetPair;
        let line = |cfg: &VirtioConfig, t: Transport, layout: RamLayout| {
            vmm_cmdline(
                SerialUse::Off,
                gm(128),
                virtio_devices(cfg),
                t,
                layout,
                "x=1",
            )
            .unwrap()
        };
        let plain = line(
            &VirtioConfig::default(),
            Transport::Ports,
            RamLayout::AroundHole,
        );
        assert!(plain.ends_with("truecold.mem=134217728 x=1"), "{plain}");
        let all = VirtioConfig {
            workspace: Some("/w.img".into()),
            tap: Some("tc0".into()),
            net_pair: Some(NetPair::for_slot(0).unwrap()),
            vsock_uds: Some("/run/v.sock".into()),
            ..VirtioConfig::default()
        };
        let parity = line(&all, Transport::Vsock, RamLayout::HoleInside);
        assert!(
            parity.ends_with(
                "truecold.mem=134217728 virtio_mmio.device=4K@0xd0000000:5 \
                 virtio_mmio.device=4K@0xd0001000:6 virtio_mmio.device=4K@0xd0002000:7 \
                 truecold.net=eth0,10.200.0.2/30 truecold.workspace=1 truecold.transport=vsock \
                 truecold.ram_layout=hole-inside x=1"
            ),
            "{parity}"
        );
        // What the bench records for truecold-vmm's parity arm is what it boots.
        assert_eq!(
            vmm_agent_cmdline(
                gm(128),
                NetPair::for_slot(0).unwrap(),
                RamLayout::HoleInside,
                "x=1"
            )
            .unwrap(),
            parity
        );
        let vsock_only = VirtioConfig {
            vsock_uds: Some("/run/v.sock".into()),
            ..VirtioConfig::default()
        };
        let v = line(&vsock_only, Transport::Vsock, RamLayout::AroundHole);
        assert!(
            v.ends_with("virtio_mmio.device=4K@0xd0000000:5 truecold.transport=vsock x=1"),
            "{v}"
        );
    }
}
