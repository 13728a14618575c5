//! Stage 3: guest memory. Layout (docs/architecture.md, [`RamLayout`]; the default follows
//! the guest's memory: `RamLayout::default_for`): memslots `[0, 0xA0000)`, `[0x100000, 3 GiB)`
//! and from 4 GiB, summing to exactly `mem_mib` MiB laid `around-hole`, or to `mem_mib` MiB
//! less the 384 KiB hole laid `hole-inside` (RAM ends at `mem_mib` MiB; the hole is an E820
//! reserved entry) or `above-4g` (the same, with RAM below 4 GiB ending at 256 MiB); E820 RAM
//! = memslots, and both obey `truecold_proto::layout::check_map`.
//! Backed by anonymous 4 KiB pages, THP (`MADV_HUGEPAGE`) or hugetlb 2 MiB pages; a backing
//! that cannot be had is an error, never a silent fallback.
use kvm_bindings::kvm_userspace_memory_region;
use kvm_ioctls::VmFd;
use serde::{Deserialize, Serialize};
use truecold_proto::limits::GuestMem;
use vm_memory::{GuestAddress, GuestMemoryMmap, GuestRegionMmap, MmapRegion};

pub const MIB: u64 = 1 << 20;
const HUGE_2M: u64 = 2 * MIB;
/// End of the first RAM range (the legacy VGA/BIOS hole starts here: proto's one definition).
pub const LOW_RAM_END: u64 = truecold_proto::layout::LEGACY_HOLE.start;
/// Start of the second RAM range (where the legacy hole ends).
pub const HIGH_RAM_START: u64 = truecold_proto::layout::LEGACY_HOLE.end;
/// Start of the 32-bit MMIO hole of the `around-hole` and `hole-inside` layouts
/// ([`RamLayout::gap_start`] is each layout's).
pub const HOLE_START: u64 = truecold_proto::layout::GAP_START;
/// RAM resumes here.
pub const ABOVE_4G: u64 = truecold_proto::layout::ABOVE_4G;

pub use truecold_proto::kinds::{Backing, ObtainedBacking, RamLayout};

/// Why guest memory could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("guest memory of {requested_mib} MiB exceeds the host's RAM ({host_mib} MiB)")]
    ExceedsHost { requested_mib: u64, host_mib: u64 },
    #[error("cannot read the host's MemTotal from /proc/meminfo")]
    HostMemUnknown,
    #[error("THP requested but /sys/kernel/mm/transparent_hugepage/enabled is `{0}` (want madvise or always)")]
    ThpUnavailable(String),
    #[error("hugetlb backing needs {needed} free 2 MiB pages, the pool has {free} free (reserve with /proc/sys/vm/nr_hugepages)")]
    HugetlbPool {
        needed: u64,
        free: u64,
        #[source]
        source: std::io::Error,
    },
    #[error("mmap of {size} bytes failed")]
    Mmap {
        size: u64,
        #[source]
        source: std::io::Error,
    },
    #[error("madvise(MADV_HUGEPAGE / MADV_NOHUGEPAGE) failed")]
    Madvise(#[source] std::io::Error),
    #[error("cannot describe guest memory")]
    Region(#[source] vm_memory::mmap::FromRangesError),
    #[error("vm-memory rejected a region")]
    Mmaps(#[source] vm_memory::mmap::MmapRegionError),
    #[error("vm-memory rejected the region collection")]
    Collection(#[source] vm_memory::GuestRegionCollectionError),
    #[error("KVM_SET_USER_MEMORY_REGION for slot {slot} failed")]
    Memslot {
        slot: u32,
        #[source]
        source: kvm_ioctls::Error,
    },
}

impl MemoryError {
    /// Stable kebab-case kind (the CLI's JSON error report).
    pub fn kind(&self) -> &'static str {
        match self {
            MemoryError::ExceedsHost { .. } => "memory-too-large",
            MemoryError::HostMemUnknown => "host-meminfo-unreadable",
            MemoryError::ThpUnavailable(_) => "thp-unavailable",
            MemoryError::HugetlbPool { .. } => "hugetlb-pool-short",
            MemoryError::Mmap { .. } => "memory-mmap-failed",
            MemoryError::Madvise(_) => "memory-madvise-failed",
            MemoryError::Region(_) | MemoryError::Mmaps(_) | MemoryError::Collection(_) => {
                "memory-layout-rejected"
            }
            MemoryError::Memslot { .. } => "memslot-failed",
        }
    }
}

/// One guest RAM range (= one memslot = one E820 RAM entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RamRange {
    pub start: u64,
    pub size: u64,
}

impl RamRange {
    pub fn end(&self) -> u64 {
        self.start + self.size
    }
}

/// The RAM ranges for `mem` laid out as `how` (pure). Their sizes sum to exactly `mem`
/// (`around-hole`) or `mem` − the legacy hole (`hole-inside`): `Engine::Truecold
/// .expected_firmware_ram(mem, how)`, the one rule's figure.
pub fn layout(mem: GuestMem, how: RamLayout) -> Vec<RamRange> {
    let total = mem.bytes();
    let mut ranges = vec![RamRange {
        start: 0,
        size: LOW_RAM_END,
    }];
    // RAM from 1 MiB up, as if contiguous; above the 32-bit hole it resumes at 4 GiB.
    let rest = match how {
        RamLayout::AroundHole => total - LOW_RAM_END,
        RamLayout::HoleInside | RamLayout::Above4g => total - HIGH_RAM_START,
    };
    let below_hole = rest.min(how.gap_start() - HIGH_RAM_START);
    ranges.push(RamRange {
        start: HIGH_RAM_START,
        size: below_hole,
    });
    if rest > below_hole {
        ranges.push(RamRange {
            start: ABOVE_4G,
            size: rest - below_hole,
        });
    }
    ranges
}

fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

/// One host mapping, unmapped on drop.
#[derive(Debug)]
pub struct HostMapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; guest accesses go through KVM and
// vm-memory's volatile accessors, and the mapping outlives every user (see `GuestRam`).
unsafe impl Send for HostMapping {}
// SAFETY: as above; `HostMapping` itself only hands out the address.
unsafe impl Sync for HostMapping {}

impl HostMapping {
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }
    pub fn len(&self) -> u64 {
        self.len as u64
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for HostMapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping this value created and nothing else unmaps.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

fn free_hugepages() -> u64 {
    std::fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// The THP mode in brackets in /sys/kernel/mm/transparent_hugepage/enabled.
pub fn thp_mode() -> String {
    let s = crate::host::read_text(crate::host::SYS_THP_ENABLED).unwrap_or_default();
    s.split_once('[')
        .and_then(|(_, r)| r.split_once(']'))
        .map(|(m, _)| m.to_string())
        .unwrap_or_default()
}

/// Maps `len` bytes (a multiple of 2 MiB), 2 MiB aligned, with `backing`.
fn map(len: u64, backing: Backing) -> Result<HostMapping, MemoryError> {
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    if backing == Backing::Hugetlb {
        let flags = libc::MAP_PRIVATE
            | libc::MAP_ANONYMOUS
            | libc::MAP_HUGETLB
            | (21 << libc::MAP_HUGE_SHIFT);
        // SAFETY: a fresh anonymous mapping; no existing memory is affected.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len as usize, prot, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            return Err(MemoryError::HugetlbPool {
                needed: len / HUGE_2M,
                free: free_hugepages(),
                source: std::io::Error::last_os_error(),
            });
        }
        return Ok(HostMapping {
            ptr: p.cast(),
            len: len as usize,
        });
    }
    // Over-map by 2 MiB, then trim head and tail so the mapping is 2 MiB aligned (THP needs
    // host-virtual and guest-physical addresses co-aligned).
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
    let over = (len + HUGE_2M) as usize;
    // SAFETY: a fresh anonymous mapping; no existing memory is affected.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), over, prot, flags, -1, 0) };
    if p == libc::MAP_FAILED {
        return Err(MemoryError::Mmap {
            size: over as u64,
            source: std::io::Error::last_os_error(),
        });
    }
    let base = p as u64;
    let aligned = round_up(base, HUGE_2M);
    let head = aligned - base;
    let tail = HUGE_2M - head;
    // SAFETY: head and tail lie inside the mapping just created and are not used.
    unsafe {
        if head > 0 {
            libc::munmap(p, head as usize);
        }
        if tail > 0 {
            libc::munmap((aligned + len) as *mut libc::c_void, tail as usize);
        }
    }
    let m = HostMapping {
        ptr: aligned as *mut u8,
        len: len as usize,
    };
    // `anon` means 4 KiB pages even where the host's THP mode is `always`; `thp` asks for
    // huge pages even where it is `madvise`. What was obtained is measured and reported.
    let advice = match backing {
        Backing::Thp => libc::MADV_HUGEPAGE,
        _ => libc::MADV_NOHUGEPAGE,
    };
    // SAFETY: advising a range this function owns.
    let rc = unsafe { libc::madvise(m.ptr.cast(), m.len, advice) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        // A kernel without madvise (e.g. tinyconfig's ADVISE_SYSCALLS=n) cannot be asked for
        // 4 KiB pages; `anon` then gets whatever the host's THP mode gives, and the backing
        // report says what that was. A `thp` request that cannot be made is an error.
        let unsupported = e.raw_os_error() == Some(libc::ENOSYS);
        if backing == Backing::Thp || !unsupported {
            return Err(MemoryError::Madvise(e));
        }
    }
    Ok(m)
}

/// Guest RAM: the ranges, vm-memory's view of them, and the host mappings behind them.
/// Field order matters: `mem` (borrowing the mappings) drops before `mappings`.
#[derive(Debug)]
pub struct GuestRam {
    pub ranges: Vec<RamRange>,
    pub mem: GuestMemoryMmap,
    pub mappings: Vec<HostMapping>,
    pub backing: Backing,
    pub how: RamLayout,
}

impl GuestRam {
    /// Sum of all RAM ranges, bytes.
    pub fn total(&self) -> u64 {
        self.ranges.iter().map(|r| r.size).sum()
    }
    /// Bytes mapped on the host (ranges rounded up to 2 MiB, plus the legacy hole when RAM
    /// lies around it).
    pub fn mapped(&self) -> u64 {
        self.mappings.iter().map(|m| m.len()).sum()
    }
}

/// Checks `mem` against the host and the backing's preconditions.
pub fn check_host(mem: GuestMem, backing: Backing) -> Result<(), MemoryError> {
    let host = crate::host::host_mem_total().ok_or(MemoryError::HostMemUnknown)?;
    // The rule the bench also checks before its first launch (one definition).
    mem.fits_host(host).map_err(|e| MemoryError::ExceedsHost {
        requested_mib: e.requested_mib,
        host_mib: e.host_mib,
    })?;
    if backing == Backing::Thp {
        let mode = thp_mode();
        if mode != "madvise" && mode != "always" {
            return Err(MemoryError::ThpUnavailable(mode));
        }
    }
    Ok(())
}

/// Maps guest RAM laid out as `how` with `backing` (no KVM involved).
pub fn allocate(mem: GuestMem, backing: Backing, how: RamLayout) -> Result<GuestRam, MemoryError> {
    let ranges = layout(mem, how);
    check_host(mem, backing)?;
    // Low mapping covers guest [0, end of range 1): slot 0 and slot 1 share it, so guest
    // physical and host virtual addresses stay 2 MiB co-aligned.
    let low_len = round_up(ranges[1].end(), HUGE_2M);
    let mut mappings = vec![map(low_len, backing)?];
    if let Some(high) = ranges.get(2) {
        mappings.push(map(round_up(high.size, HUGE_2M), backing)?);
    }
    let mut regions = Vec::with_capacity(ranges.len());
    for r in &ranges {
        let (m, off) = if r.start >= ABOVE_4G {
            (&mappings[1], r.start - ABOVE_4G)
        } else {
            (&mappings[0], r.start)
        };
        // SAFETY: [m.ptr + off, + r.size) lies inside mapping `m`, which `GuestRam` keeps alive
        // for as long as `mem` (dropped first).
        let region = unsafe {
            MmapRegion::build_raw(
                m.ptr.add(off as usize),
                r.size as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            )
        }
        .map_err(MemoryError::Mmaps)?;
        let region = GuestRegionMmap::new(region, GuestAddress(r.start)).ok_or(
            MemoryError::Region(vm_memory::mmap::FromRangesError::InvalidGuestRegion),
        )?;
        regions.push(region);
    }
    let mem = GuestMemoryMmap::from_regions(regions).map_err(MemoryError::Collection)?;
    Ok(GuestRam {
        ranges,
        mem,
        mappings,
        backing,
        how,
    })
}

/// Host address of guest-physical `gpa` (must lie in a RAM range).
fn host_addr(ram: &GuestRam, r: &RamRange) -> u64 {
    if r.start >= ABOVE_4G {
        ram.mappings[1].addr() + (r.start - ABOVE_4G)
    } else {
        ram.mappings[0].addr() + r.start
    }
}

/// The legacy option-ROM / BIOS area `[0xC0000, 0x100000)`: not RAM (no E820 entry laid
/// `around-hole`; inside the reserved entry laid `hole-inside`), but
/// Linux reads it at boot (`probe_roms` looks for a `0x55AA` signature every 2 KiB). Without a
/// memslot each of those reads (97 per boot, counted by the devices' `unknown_mmio`) is an
/// exit to this process. [`register`] maps it read-only onto the zero-filled part of the low
/// host mapping that lies in the hole, so the guest reads zeros (no ROM) and a write still
/// exits. It is never RAM: `GuestRam::ranges` does not include it.
///
/// Why the legacy area is not simply RAM (so that RAM would end exactly at M MiB instead of
/// 384 KiB past it, sparing the guest a partly used 128 MiB memory section — 32,672 struct
/// pages initialised as unavailable, ~2.3 ms in the nested harness at 256 MiB): Linux 6.12
/// removes RAM in 640 KiB–1 MiB from `/sys/firmware/memmap` too (measured: System RAM =
/// M − 384 KiB), which breaks the exact-RAM contract the guest checks. `hole-inside`
/// ([`RamLayout::HoleInside`]) ends RAM at M the other way: the hole is declared reserved and
/// counted in the configured size, by the one rule (`truecold_proto::layout`).
pub const ROM_AREA: RamRange = RamRange {
    start: 0xc_0000,
    size: HIGH_RAM_START - 0xc_0000,
};

/// Registers one memslot per RAM range, then (when `rom_area`: KVM_CAP_READONLY_MEM) the
/// read-only [`ROM_AREA`] slot.
pub fn register(vm: &VmFd, ram: &GuestRam, rom_area: bool) -> Result<(), MemoryError> {
    for (slot, r) in ram.ranges.iter().enumerate() {
        let region = kvm_userspace_memory_region {
            slot: slot as u32,
            flags: 0,
            guest_phys_addr: r.start,
            memory_size: r.size,
            userspace_addr: host_addr(ram, r),
        };
        // SAFETY: the host range lies inside a mapping owned by `ram`, which the caller keeps
        // alive until the VM fd is closed (see `boot::run`'s teardown order).
        unsafe { vm.set_user_memory_region(region) }.map_err(|source| MemoryError::Memslot {
            slot: slot as u32,
            source,
        })?;
    }
    if rom_area {
        let slot = ram.ranges.len() as u32;
        let region = kvm_userspace_memory_region {
            slot,
            flags: kvm_bindings::KVM_MEM_READONLY,
            guest_phys_addr: ROM_AREA.start,
            memory_size: ROM_AREA.size,
            // The low mapping covers guest [0, end of the range at HIGH_RAM_START).
            userspace_addr: ram.mappings[0].addr() + ROM_AREA.start,
        };
        // SAFETY: the low mapping spans guest [0, 1 MiB) and more (the second RAM range starts
        // at HIGH_RAM_START and always exists: the smallest guest memory, limits::MIN_MEM_MIB, is over 1 MiB) and outlives the VM fd; the
        // slot is read-only for the guest, and nothing else ever writes that part of it.
        unsafe { vm.set_user_memory_region(region) }
            .map_err(|source| MemoryError::Memslot { slot, source })?;
    }
    Ok(())
}

/// What the host actually gave: requested vs obtained backing, from /proc/self/smaps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackingReport {
    pub requested: Backing,
    /// `anon-4k`, `thp` (some huge pages faulted in), `thp-advised-none-faulted`,
    /// `hugetlb-2m`, or `unobserved` (smaps unreadable).
    pub obtained: ObtainedBacking,
    pub thp_mode: String,
    pub mapped_bytes: u64,
    pub rss_bytes: u64,
    pub anon_huge_bytes: u64,
    pub hugetlb_bytes: u64,
    pub kernel_page_size: u64,
}

/// Observes the backing now (call after ready).
pub fn observe(ram: &GuestRam) -> BackingReport {
    let obs: Vec<_> = ram
        .mappings
        .iter()
        .filter_map(|m| crate::host::observe_mapping(m.addr()))
        .collect();
    let rss = obs.iter().map(|o| o.rss).sum();
    let ahp: u64 = obs.iter().map(|o| o.anon_huge_pages).sum();
    let htlb: u64 = obs.iter().map(|o| o.hugetlb).sum();
    let kps = obs.iter().map(|o| o.kernel_page_size).max().unwrap_or(0);
    let obtained = if obs.len() != ram.mappings.len() {
        ObtainedBacking::Unobserved
    } else if kps == HUGE_2M {
        ObtainedBacking::Hugetlb2m
    } else if ahp > 0 {
        ObtainedBacking::Thp
    } else if ram.backing == Backing::Thp {
        ObtainedBacking::ThpAdvisedNoneFaulted
    } else {
        ObtainedBacking::Anon4k
    };
    BackingReport {
        requested: ram.backing,
        obtained,
        thp_mode: thp_mode(),
        mapped_bytes: ram.mapped(),
        rss_bytes: rss,
        anon_huge_bytes: ahp,
        hugetlb_bytes: htlb,
        kernel_page_size: kps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mib(n: u64) -> GuestMem {
        GuestMem::from_mib(n).expect("a size within the limits")
    }

    #[test]
    fn layout_sums_exactly() {
        use truecold_proto::limits::{MAX_MEM_MIB, MIN_MEM_MIB};
        for n in [MIN_MEM_MIB, 128, 2048, 3071, 3072, 3073, 16384, MAX_MEM_MIB] {
            let r = layout(mib(n), RamLayout::AroundHole);
            assert_eq!(r.iter().map(|r| r.size).sum::<u64>(), n * MIB, "{n}");
            assert_eq!(
                r[0],
                RamRange {
                    start: 0,
                    size: LOW_RAM_END
                }
            );
            assert_eq!(r[1].start, HIGH_RAM_START);
            assert!(r[1].end() <= HOLE_START);
        }
        let r = layout(mib(16384), RamLayout::AroundHole);
        assert_eq!(r.len(), 3);
        assert_eq!(r[1].end(), HOLE_START);
        assert_eq!(r[2].start, ABOVE_4G);
        assert_eq!(layout(mib(128), RamLayout::AroundHole).len(), 2);
    }

    /// `hole-inside`: RAM + the 384 KiB hole = the configured size to the byte, RAM ends at
    /// the configured size (below 3 GiB) or at 4 GiB + (size − 3 GiB) above it.
    #[test]
    fn hole_inside_layout_ends_ram_at_the_configured_size() {
        use truecold_proto::limits::{MAX_MEM_MIB, MIN_MEM_MIB};
        const HOLE: u64 = HIGH_RAM_START - LOW_RAM_END;
        for n in [
            MIN_MEM_MIB,
            127,
            128,
            1024,
            3071,
            3072,
            3073,
            4096,
            16384,
            MAX_MEM_MIB,
        ] {
            let r = layout(mib(n), RamLayout::HoleInside);
            let sum: u64 = r.iter().map(|r| r.size).sum();
            assert_eq!(sum + HOLE, n * MIB, "{n} MiB");
            assert_eq!(
                sum,
                truecold_proto::kinds::Engine::Truecold
                    .expected_firmware_ram(n * MIB, RamLayout::HoleInside),
                "{n}"
            );
            assert_eq!(
                r[0],
                RamRange {
                    start: 0,
                    size: LOW_RAM_END
                }
            );
            assert_eq!(r[1].start, HIGH_RAM_START);
            let top = r.last().map(RamRange::end).unwrap();
            if n * MIB <= HOLE_START {
                assert_eq!((r.len(), top), (2, n * MIB), "{n} MiB: RAM ends at M");
            } else {
                assert_eq!(r.len(), 3, "{n}");
                assert_eq!(r[1].end(), HOLE_START);
                assert_eq!(r[2].start, ABOVE_4G);
                assert_eq!(top, ABOVE_4G + n * MIB - HOLE_START, "{n}");
            }
        }
        // 3072 MiB exactly: nothing left for above 4 GiB.
        assert_eq!(layout(mib(3072), RamLayout::HoleInside).len(), 2);
    }

    /// `above-4g`: the RAM of `hole-inside` (the same sum, the same declared hole), but below
    /// 4 GiB only up to 256 MiB; the rest from 4 GiB.
    #[test]
    fn above_4g_layout_keeps_256_mib_below_4_gib() {
        use truecold_proto::layout::ABOVE_4G_LOW_TOP;
        use truecold_proto::limits::{MAX_MEM_MIB, MIN_MEM_MIB};
        for n in [MIN_MEM_MIB, 255, 256, 257, 1024, 3073, 16384, MAX_MEM_MIB] {
            let r = layout(mib(n), RamLayout::Above4g);
            let inside = layout(mib(n), RamLayout::HoleInside);
            let sum = |v: &[RamRange]| v.iter().map(|r| r.size).sum::<u64>();
            assert_eq!(sum(&r), sum(&inside), "{n} MiB");
            assert_eq!(
                sum(&r),
                truecold_proto::kinds::Engine::Truecold
                    .expected_firmware_ram(n * MIB, RamLayout::Above4g),
                "{n}"
            );
            assert_eq!((r[0], r[1].start), (inside[0], HIGH_RAM_START), "{n}");
            if n * MIB <= ABOVE_4G_LOW_TOP {
                assert_eq!(r, inside, "{n} MiB: all below 256 MiB, as hole-inside");
            } else {
                assert_eq!(r.len(), 3, "{n}");
                assert_eq!(r[1].end(), ABOVE_4G_LOW_TOP, "{n}");
                assert_eq!(r[2].start, ABOVE_4G, "{n}");
                assert_eq!(r[2].end(), ABOVE_4G + n * MIB - ABOVE_4G_LOW_TOP, "{n}");
            }
        }
        assert_eq!(RamLayout::Above4g.gap_start(), ABOVE_4G_LOW_TOP);
        assert_eq!(RamLayout::HoleInside.gap_start(), HOLE_START);
    }

    #[test]
    fn allocate_rejects_more_than_host() {
        let host = crate::host::host_mem_total().unwrap() / MIB;
        assert!(matches!(
            allocate(mib(host * 2), Backing::Anon, RamLayout::AroundHole),
            Err(MemoryError::ExceedsHost { .. })
        ));
    }

    #[test]
    fn allocate_is_aligned() {
        for how in RamLayout::ALL {
            let ram = allocate(mib(128), Backing::Anon, how).unwrap();
            assert_eq!(
                ram.total(),
                truecold_proto::kinds::Engine::Truecold.expected_firmware_ram(128 * MIB, how)
            );
            assert_eq!(ram.mappings[0].addr() % HUGE_2M, 0);
            // Guest-physical and host-virtual addresses 2 MiB co-aligned (THP) in every slot.
            for r in &ram.ranges {
                assert_eq!(host_addr(&ram, r) % HUGE_2M, r.start % HUGE_2M, "{how}");
            }
        }
    }

    /// What the bench reads from smaps for this engine (`Engine::expected_mapping`, the one
    /// definition the verifier holds rows to) is what `allocate` maps.
    #[test]
    fn the_mapping_is_what_the_engines_rule_expects() {
        use truecold_proto::kinds::Engine;
        for how in RamLayout::ALL {
            for n in [4u64, 127, 128, 1024, 3071, 3072, 3073, 5000] {
                let ram = allocate(mib(n), Backing::Anon, how).unwrap();
                assert_eq!(
                    ram.mapped(),
                    Engine::Truecold.expected_mapping(n * MIB, how),
                    "{n} MiB {how}"
                );
            }
        }
    }
}
