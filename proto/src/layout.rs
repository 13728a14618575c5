//! What the kinds mean for guest memory: where truecold-vmm puts RAM under each
//! [`RamLayout`], each engine's hole below 1 MiB ([`RamHole`], the `impl Engine` memory
//! methods), the guest's `MemTotal` bound ([`memtotal_bounds`]) and the one exact-accounting
//! memory rule ([`check_map`], [`Expected`]) that the VMM (its E820 map and memory figures),
//! guest-init (the firmware map it reads), the bench and the verifier all hold:
//!
//! *configured = E820 RAM + the engine's hole below 1 MiB, to the byte*; no RAM meets the
//! hole; where the layout declares its hole ([`Engine::declared_hole`]: truecold's
//! `hole-inside`), E820 reserved entries cover exactly the hole and nothing else is
//! reserved there. A peer engine's hole is its documented one ([`Engine::low_ram_hole`]),
//! whatever its map says of it.

use serde::{Deserialize, Serialize};

use crate::kinds::Engine;
pub use crate::kinds::RamLayout;
use crate::limits::GuestMem;

/// A range of guest-physical addresses below 1 MiB that an engine's E820 map leaves out of RAM
/// (`[start, end)`), although the engine counts it in the configured memory size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RamHole {
    pub start: u64,
    pub end: u64,
}

impl RamHole {
    /// Bytes in the hole.
    pub fn len(self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    /// Never true for a documented hole.
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }
}

/// The legacy VGA / option-ROM / BIOS area `[640 KiB, 1 MiB)`: never RAM in truecold-vmm's
/// layouts.
pub const LEGACY_HOLE: RamHole = RamHole {
    start: 0xa_0000,
    end: 0x10_0000,
};

/// Where the 32-bit gap (no RAM up to 4 GiB) starts in `around-hole` and `hole-inside`: 3 GiB,
/// as Firecracker and Cloud Hypervisor place theirs.
pub const GAP_START: u64 = 3 << 30;
/// Where RAM below 4 GiB ends in `above-4g`: 256 MiB (room for the kernel, loaded at 16 MiB,
/// and the initramfs above it).
pub const ABOVE_4G_LOW_TOP: u64 = 256 << 20;
/// Where RAM resumes above the 32-bit gap.
pub const ABOVE_4G: u64 = 4 << 30;
/// Guest memory from which truecold-vmm's default layout is `above-4g` (MiB); below it,
/// `hole-inside` ([`RamLayout::default_for`]).
pub const ABOVE_4G_DEFAULT_FROM_MIB: u64 = 4096;

/// Where each layout puts RAM (the layouts and their spellings: [`crate::kinds::RamLayout`]).
impl RamLayout {
    /// truecold-vmm's layout for a guest of `mem` when none is asked for (the VMM's
    /// `--ram-layout` default and `truecold run`'s; the one definition): `above-4g` from
    /// [`ABOVE_4G_DEFAULT_FROM_MIB`], `hole-inside` below it — each where the tunes measured it
    /// the faster (kernel-config/README.md). Every guest, the probe included: the probe has no
    /// struct pages for the layout to change and walks whatever E820 map it is given.
    pub fn default_for(mem: GuestMem) -> RamLayout {
        if mem.mib() >= ABOVE_4G_DEFAULT_FROM_MIB {
            RamLayout::Above4g
        } else {
            RamLayout::HoleInside
        }
    }

    /// The part of the configured size that is not RAM, declared E820 reserved.
    pub fn hole(self) -> Option<RamHole> {
        match self {
            RamLayout::AroundHole => None,
            RamLayout::HoleInside | RamLayout::Above4g => Some(LEGACY_HOLE),
        }
    }

    /// Where the 32-bit gap starts: RAM below 4 GiB ends here, the rest resumes at
    /// [`ABOVE_4G`].
    pub fn gap_start(self) -> u64 {
        match self {
            RamLayout::AroundHole | RamLayout::HoleInside => GAP_START,
            RamLayout::Above4g => ABOVE_4G_LOW_TOP,
        }
    }

    /// Bytes of guest-physical address space the RAM of `configured` bytes spans below the
    /// 32-bit gap and from 4 GiB together: `configured` + the legacy hole when RAM is laid
    /// around it, `configured` when the hole is inside.
    pub fn span(self, configured: u64) -> u64 {
        match self {
            RamLayout::AroundHole => configured.saturating_add(LEGACY_HOLE.len()),
            RamLayout::HoleInside | RamLayout::Above4g => configured,
        }
    }
}

/// Each engine's guest memory: its hole below 1 MiB and its host mapping.
impl Engine {
    /// The engine's low-memory hole under `layout` (truecold's own; peers ignore it): the part
    /// of the configured size its E820 map does not give the guest as RAM. The exact-RAM rule
    /// is `System RAM == configured − hole` with no RAM inside the hole
    /// ([`check_map`], guest-init/README.md).
    /// - truecold: [`RamLayout::hole`] — none laid `around-hole` (RAM below 640 KiB and from
    ///   1 MiB adds to exactly the configured size), `[0xa0000, 0x100000)` laid
    ///   `hole-inside` (declared reserved: [`Engine::declared_hole`]).
    /// - Firecracker v1.16.1: `[EBDA_START = 0x9fc00, HIMEM_START = 0x100000)`
    ///   (src/vmm/src/arch/x86_64/layout.rs; measured: 268,041,216 bytes of RAM for 256 MiB).
    /// - Cloud Hypervisor v53.0: `[EBDA_START = 0xa0000, HIGH_RAM_START = 0x100000)`
    ///   (arch/src/x86_64/layout.rs; measured: 268,042,240 bytes for 256 MiB).
    /// - QEMU microvm: see the match arm (measured in L1, documented there).
    pub fn low_ram_hole(self, layout: RamLayout) -> Option<RamHole> {
        match self {
            Engine::Truecold => layout.hole(),
            Engine::Firecracker => Some(RamHole {
                start: 0x9_fc00,
                end: 0x10_0000,
            }),
            Engine::CloudHypervisor => Some(RamHole {
                start: 0xa_0000,
                end: 0x10_0000,
            }),
            // qboot (QEMU's microvm firmware) reports RAM [0, 0x9fc00) and from 1 MiB.
            Engine::QemuMicrovm => Some(RamHole {
                start: 0x9_fc00,
                end: 0x10_0000,
            }),
        }
    }

    /// The hole the engine's map declares as E820 reserved entries covering exactly it, which
    /// the rule then requires: truecold's `hole-inside` hole. `None` for every peer (their
    /// holes are documented, not held to a declaration) and for `around-hole`.
    pub fn declared_hole(self, layout: RamLayout) -> Option<RamHole> {
        match self {
            Engine::Truecold => layout.hole(),
            Engine::Firecracker | Engine::CloudHypervisor | Engine::QemuMicrovm => None,
        }
    }

    /// The size of the host mapping(s) that back `configured` bytes of guest memory in this
    /// engine's process, as `/proc/<pid>/smaps` shows them. Firecracker, Cloud Hypervisor and
    /// QEMU map exactly the configured size (their low-RAM hole is inside it). truecold-vmm
    /// maps the guest-physical span of its RAM ([`RamLayout::span`]: laid `around-hole` it
    /// spans the hole too, 384 KiB, the read-only ROM-area slot), rounded up to 2 MiB so that
    /// guest-physical and host-virtual addresses stay 2 MiB co-aligned for THP
    /// (vmm/src/memory.rs `allocate`, held to this by a VMM test).
    pub fn expected_mapping(self, configured: u64, layout: RamLayout) -> u64 {
        const ALIGN: u64 = 2 << 20;
        match self {
            Engine::Truecold => layout.span(configured).div_ceil(ALIGN) * ALIGN,
            Engine::Firecracker | Engine::CloudHypervisor | Engine::QemuMicrovm => configured,
        }
    }

    /// The System RAM the guest must find for `configured` bytes under this engine (and
    /// truecold's `layout`): [`Expected::ram`].
    pub fn expected_firmware_ram(self, configured: u64, layout: RamLayout) -> u64 {
        Expected::of(self, layout, configured).ram
    }
}

/// What one memory-map entry is, as far as the rule cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapKind {
    /// E820 type 1 / sysfs `System RAM`.
    Ram,
    /// E820 type 2 / sysfs `Reserved`.
    Reserved,
    /// Anything else (ACPI, NVS, unusable, …).
    Other,
}

/// One memory-map entry, `[start, end)` (the end exclusive, unlike sysfs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapEntry {
    pub start: u64,
    pub end: u64,
    pub kind: MapKind,
}

impl MapEntry {
    fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
    fn meets(&self, h: RamHole) -> bool {
        self.start < h.end && self.end > h.start
    }
}

/// What `configured` bytes must give under `engine` and `layout` (pure).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expected {
    /// The RAM the map (and the memslots) must sum to: configured − the hole.
    pub ram: u64,
    /// The engine's hole below 1 MiB: no RAM may meet it.
    pub hole: Option<RamHole>,
    /// The hole the map must declare as reserved entries covering exactly it (truecold's
    /// `hole-inside`); `None`: nothing is asked of reserved entries.
    pub declared: Option<RamHole>,
}

impl Expected {
    /// The rule's figures for `configured` bytes under `engine` and `layout`.
    pub fn of(engine: Engine, layout: RamLayout, configured: u64) -> Self {
        let hole = engine.low_ram_hole(layout);
        Expected {
            ram: configured.saturating_sub(hole.map_or(0, RamHole::len)),
            hole,
            declared: engine.declared_hole(layout),
        }
    }

    /// Bytes of reserved entries the map must declare in the hole.
    pub fn declared_bytes(&self) -> u64 {
        self.declared.map_or(0, RamHole::len)
    }

    /// The figures' half of the rule: `ram` bytes of RAM and `declared` bytes declared
    /// reserved in the hole add up to `configured` exactly as the layout says.
    pub fn sums(&self, configured: u64, ram: u64, declared: u64) -> Result<(), AccountingError> {
        if declared != self.declared_bytes() {
            return Err(AccountingError::HoleNotDeclared {
                hole: self.declared,
                declared,
            });
        }
        if ram != self.ram {
            return Err(AccountingError::Sum {
                configured,
                ram,
                hole: self.hole.map_or(0, RamHole::len),
                expected: self.ram,
            });
        }
        Ok(())
    }
}

/// How a memory map (or its figures) breaks the rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "kebab-case")]
pub enum AccountingError {
    #[error("{ram} bytes of RAM, expected {expected} (configured {configured} − hole {hole})")]
    Sum {
        configured: u64,
        ram: u64,
        hole: u64,
        expected: u64,
    },
    #[error("RAM [{start:#x}, {end:#x}) meets the hole")]
    RamInHole { start: u64, end: u64 },
    #[error("{declared} bytes declared reserved in the hole, the layout declares {}", hole_bytes(.hole))]
    HoleNotDeclared {
        hole: Option<RamHole>,
        declared: u64,
    },
    #[error(
        "reserved [{start:#x}, {end:#x}) is not inside the declared hole, or overlaps another"
    )]
    ReservedAstride { start: u64, end: u64 },
    #[error("RAM entries overlap at {0:#x}")]
    Overlap(u64),
}

fn hole_bytes(h: &Option<RamHole>) -> String {
    match h {
        Some(h) => format!("[{:#x}, {:#x}) = {} bytes", h.start, h.end, h.len()),
        None => "none".into(),
    }
}

/// What a map that obeys the rule adds up to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Accounted {
    /// Sum of the RAM entries.
    pub ram: u64,
    /// Bytes of reserved entries inside the declared hole (0 when none is declared).
    pub declared: u64,
}

/// The exact-accounting rule on a whole map (pure): RAM entries do not overlap, none meets
/// the hole; where a hole is declared, the reserved entries that meet it lie inside it,
/// do not overlap and cover it; and RAM + declared hole = configured (via
/// [`Expected::sums`]). The first breach is the error.
pub fn check_map(
    engine: Engine,
    layout: RamLayout,
    configured: u64,
    entries: &[MapEntry],
) -> Result<Accounted, AccountingError> {
    let want = Expected::of(engine, layout, configured);
    let mut ram: Vec<&MapEntry> = entries.iter().filter(|e| e.kind == MapKind::Ram).collect();
    ram.sort_by_key(|e| e.start);
    let mut sum = 0u64;
    for (i, e) in ram.iter().enumerate() {
        if i > 0 && e.start < ram[i - 1].end {
            return Err(AccountingError::Overlap(e.start));
        }
        sum = sum.saturating_add(e.len());
    }
    if let Some(h) = want.hole {
        if let Some(e) = ram.iter().find(|e| e.meets(h)) {
            return Err(AccountingError::RamInHole {
                start: e.start,
                end: e.end,
            });
        }
    }
    let declared = match want.declared {
        None => 0,
        Some(h) => {
            let mut res: Vec<&MapEntry> = entries
                .iter()
                .filter(|e| e.kind == MapKind::Reserved && e.meets(h))
                .collect();
            res.sort_by_key(|e| e.start);
            let mut covered = 0u64;
            for (i, e) in res.iter().enumerate() {
                if e.start < h.start || e.end > h.end || (i > 0 && e.start < res[i - 1].end) {
                    return Err(AccountingError::ReservedAstride {
                        start: e.start,
                        end: e.end,
                    });
                }
                covered += e.len();
            }
            covered
        }
    };
    want.sums(configured, sum, declared)?;
    Ok(Accounted { ram: sum, declared })
}

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// The accepted range of `MemTotal` for `ram` bytes of firmware RAM whose highest byte is
/// below `top`. `MemTotal` counts the pages the kernel hands to its page allocator, so it
/// is at most `ram` and lower by what the kernel keeps for itself at boot:
/// - the `struct page` array: 64 bytes per 4 KiB page = `ram / 64`;
/// - the kernel image, early page tables, per-CPU areas, the log buffer and other
///   memblock allocations: a few MiB for this config, allowed 32 MiB;
/// - the swiotlb bounce buffer, 64 MiB, which x86-64 sets up when RAM reaches above 4 GiB.
///
/// Anything below that means RAM the firmware map announces but the kernel did not get.
pub fn memtotal_bounds(ram: u64, top: u64) -> (u64, u64) {
    let swiotlb = if top > 4 * GIB { 64 * MIB } else { 0 };
    let deficit = ram / 64 + 32 * MIB + swiotlb;
    (ram.saturating_sub(deficit), ram)
}

/// The guest's own `MemTotal` bound ([`memtotal_bounds`]) as a host can apply it knowing only
/// the configured size: RAM may reach above 4 GiB (and so the swiotlb allowance applies)
/// when more than 3 GiB − 1 MiB is configured (truecold: 640 KiB low RAM, then RAM from
/// 1 MiB up to the 32-bit hole at 3 GiB). A layout whose hole starts lower would need its own
/// threshold.
pub fn memtotal_bounds_for(configured: u64) -> (u64, u64) {
    let top = if configured > 3 * GIB - MIB {
        4 * GIB + 1
    } else {
        configured
    };
    memtotal_bounds(configured, top)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn above_4g_is_hole_inside_with_a_lower_gap() {
        let l = RamLayout::Above4g;
        assert_eq!(RamLayout::parse("above-4g"), Ok(l));
        assert_eq!(serde_json::to_string(&l).unwrap(), "\"above-4g\"");
        assert_eq!(
            serde_json::from_str::<RamLayout>("\"above-4g\"").unwrap(),
            l
        );
        assert_eq!(l.to_string(), "above-4g");
        assert!(RamLayout::parse("above4g")
            .unwrap_err()
            .contains("above-4g"));
        assert_eq!(l.hole(), RamLayout::HoleInside.hole());
        assert_eq!(l.span(1 << 34), 1 << 34);
        assert_eq!(l.gap_start(), 256 << 20);
        assert!(!l.is_absent());
        assert_eq!(
            Expected::of(Engine::Truecold, l, 1 << 34),
            Expected::of(Engine::Truecold, RamLayout::HoleInside, 1 << 34)
        );
    }

    const MIB: u64 = 1 << 20;

    fn e(start: u64, end: u64, kind: MapKind) -> MapEntry {
        MapEntry { start, end, kind }
    }

    #[test]
    fn spellings_round_trip_the_default_follows_memory_and_absent_is_around_hole() {
        for l in RamLayout::ALL {
            assert_eq!(RamLayout::parse(l.as_str()), Ok(l));
            assert_eq!(
                serde_json::to_string(&l).unwrap(),
                format!("\"{}\"", l.as_str())
            );
        }
        assert!(RamLayout::parse("inside").is_err());
        let mib = |n| GuestMem::from_mib(n).unwrap();
        for (n, want) in [
            (4, RamLayout::HoleInside),
            (1024, RamLayout::HoleInside),
            (ABOVE_4G_DEFAULT_FROM_MIB - 1, RamLayout::HoleInside),
            (ABOVE_4G_DEFAULT_FROM_MIB, RamLayout::Above4g),
            (16384, RamLayout::Above4g),
        ] {
            assert_eq!(RamLayout::default_for(mib(n)), want, "{n} MiB");
        }
        // What an absent record means never moves with the default.
        assert_eq!(RamLayout::ABSENT, RamLayout::AroundHole);
        assert_eq!(RamLayout::absent(), RamLayout::ABSENT);
        assert!(RamLayout::AroundHole.is_absent() && !RamLayout::HoleInside.is_absent());
        assert_eq!(RamLayout::or_absent(None), RamLayout::AroundHole);
        assert_eq!(
            RamLayout::or_absent(Some(RamLayout::HoleInside)),
            RamLayout::HoleInside
        );
    }

    #[test]
    fn the_rule_per_layout() {
        let m = 256 * MIB;
        let around = [
            e(0, 0xa_0000, MapKind::Ram),
            e(MIB, m + 0x6_0000, MapKind::Ram),
        ];
        let inside = [
            e(0, 0xa_0000, MapKind::Ram),
            e(0xa_0000, MIB, MapKind::Reserved),
            e(MIB, m, MapKind::Ram),
        ];
        let t = Engine::Truecold;
        assert_eq!(
            check_map(t, RamLayout::AroundHole, m, &around),
            Ok(Accounted {
                ram: m,
                declared: 0
            })
        );
        assert_eq!(
            check_map(t, RamLayout::HoleInside, m, &inside),
            Ok(Accounted {
                ram: m - 0x6_0000,
                declared: 0x6_0000
            })
        );
        // Each layout's map breaks the other's rule.
        assert!(matches!(
            check_map(t, RamLayout::HoleInside, m, &around),
            Err(AccountingError::HoleNotDeclared { declared: 0, .. })
        ));
        // RAM inside the hole, however the sums come out.
        let over = [e(0, MIB, MapKind::Ram), e(MIB, m - 0x6_0000, MapKind::Ram)];
        assert!(matches!(
            check_map(t, RamLayout::HoleInside, m, &over),
            Err(AccountingError::RamInHole { start: 0, end: MIB })
        ));
        assert!(matches!(
            check_map(t, RamLayout::AroundHole, m, &inside),
            Err(AccountingError::Sum { .. })
        ));
        // The hole not declared: RAM is right, the reserved entry is missing.
        assert_eq!(
            check_map(t, RamLayout::HoleInside, m, &[inside[0], inside[2]]),
            Err(AccountingError::HoleNotDeclared {
                hole: Some(LEGACY_HOLE),
                declared: 0
            })
        );
        // Half declared; declared past the hole.
        let half = [
            inside[0],
            e(0xa_0000, 0xd_0000, MapKind::Reserved),
            inside[2],
        ];
        assert!(matches!(
            check_map(t, RamLayout::HoleInside, m, &half),
            Err(AccountingError::HoleNotDeclared {
                declared: 0x3_0000,
                ..
            })
        ));
        let wide = [
            e(0, 0x9_0000, MapKind::Ram),
            e(0x9_0000, MIB, MapKind::Reserved),
            inside[2],
        ];
        assert!(matches!(
            check_map(t, RamLayout::HoleInside, m, &wide),
            Err(AccountingError::ReservedAstride { .. })
        ));
        // RAM + hole ≠ configured: one page short.
        let short = [inside[0], inside[1], e(MIB, m - 4096, MapKind::Ram)];
        assert_eq!(
            check_map(t, RamLayout::HoleInside, m, &short),
            Err(AccountingError::Sum {
                configured: m,
                ram: m - 0x6_0000 - 4096,
                hole: 0x6_0000,
                expected: m - 0x6_0000
            })
        );
        // Overlapping RAM never double counts.
        let twice = [e(0, 0xa_0000, MapKind::Ram), e(0x9_0000, m, MapKind::Ram)];
        assert_eq!(
            check_map(t, RamLayout::AroundHole, m, &twice),
            Err(AccountingError::Overlap(0x9_0000))
        );
    }

    #[test]
    fn peers_keep_their_documented_holes_whatever_the_layout() {
        let m = 256 * MIB;
        for l in RamLayout::ALL {
            for p in [
                Engine::Firecracker,
                Engine::CloudHypervisor,
                Engine::QemuMicrovm,
            ] {
                let x = Expected::of(p, l, m);
                assert_eq!(x.hole, p.low_ram_hole(RamLayout::AroundHole));
                assert_eq!(x.declared, None);
                assert_eq!(x.ram, p.expected_firmware_ram(m, l));
            }
        }
        // Firecracker's map: no reserved entry is asked for.
        let fc = [e(0, 0x9_fc00, MapKind::Ram), e(MIB, m, MapKind::Ram)];
        assert!(check_map(Engine::Firecracker, RamLayout::AroundHole, m, &fc).is_ok());
    }
}
