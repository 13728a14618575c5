//! The boot-parameter builders (vmm/src/boot_params.rs) over fuzzed inputs: memory size,
//! serial use, extra command line, kernel end, initramfs size, a bzImage setup header and
//! memory maps. Asserts their invariants, not only that they return:
//! - `layout` + `e820`: sorted, disjoint RAM ranges that avoid the legacy and 32-bit holes
//!   and add to exactly the configured size; a size is a `GuestMem` exactly inside the limits;
//! - `cmdline`: the base + `truecold.mem` (+ transport) + trimmed extra, printable ASCII, at
//!   most `CMDLINE_MAX` bytes, and the guest's own parser reads back the size, transport and
//!   engine; each error names the rule that is broken;
//! - `zero_page`: 4096 bytes, the header fields the loader owns set, the setup header kept
//!   elsewhere, the memory map written entry for entry, nothing else written;
//! - `pvh_start_info` / `pvh_memmap`: sizes and fields decode back;
//! - `place_initramfs`: page aligned, above the kernel and 1 MiB, below the limit, as high
//!   as possible; an error only when nothing fits.
#![no_main]
use libfuzzer_sys::fuzz_target;
use truecold_fuzz::Input;
use truecold_proto::boot_cmdline::CmdlineError;
use truecold_proto::kinds::{Engine, RamLayout, Transport};
use truecold_proto::layout::check_map;
use truecold_proto::limits::{GuestMem, MAX_MEM_MIB, MIN_MEM_MIB};
use truecold_proto::GuestConfig;
use truecold_vmm::boot_params::{
    base_cmdline, cmdline, e820, e820_ram, hash_caps, map_entries, place_initramfs, pvh_memmap,
    pvh_start_info, zero_page, BootParamsError, E820Entry, SerialUse, CMDLINE_MAX, E820_RAM,
    INITRD_MAX_END, PVH_MAGIC, ZERO_PAGE_E820_MAX,
};
use truecold_vmm::memory::{layout, ABOVE_4G, HIGH_RAM_START, HOLE_START, LOW_RAM_END};
use truecold_vmm::probe::{checksum, expected_touches, TOUCH_STRIDE, TOUCH_STRIDE_SPARSE};

fn u32_at(b: &[u8], o: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[o..o + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

fn check_layout(mib: u64, how: RamLayout) -> Option<Vec<truecold_vmm::memory::RamRange>> {
    let mem = GuestMem::from_mib(mib);
    let in_limits = (MIN_MEM_MIB..=MAX_MEM_MIB).contains(&mib);
    assert_eq!(mem.is_ok(), in_limits, "{mib} MiB: {mem:?}");
    let ranges = layout(mem.ok()?, how);
    assert!((2..=3).contains(&ranges.len()), "{ranges:?}");
    let full = e820(&ranges, how);
    // The one rule: RAM + the declared hole = configured, to the byte.
    assert_eq!(
        check_map(Engine::Truecold, how, mib << 20, &map_entries(&full)).map(|a| a.ram),
        Ok(Engine::Truecold.expected_firmware_ram(mib << 20, how)),
        "{mib} MiB {how}: {full:?}"
    );
    let map: Vec<E820Entry> = full
        .iter()
        .copied()
        .filter(|e| e.kind == E820_RAM)
        .collect();
    assert_eq!(full.len() - map.len(), usize::from(how.hole().is_some()));
    assert_eq!(map.len(), ranges.len());
    assert_eq!(
        e820_ram(&map) + how.hole().map_or(0, |h| h.len()),
        mib << 20,
        "{mib} MiB: {map:?}"
    );
    for (e, r) in map.iter().zip(&ranges) {
        assert_eq!((e.addr, e.size, e.kind), (r.start, r.size, E820_RAM));
        assert!(e.size > 0, "{map:?}");
        let end = e.addr + e.size;
        // Outside the legacy hole and the 32-bit hole.
        assert!(end <= LOW_RAM_END || e.addr >= HIGH_RAM_START, "{map:?}");
        assert!(end <= HOLE_START || e.addr >= ABOVE_4G, "{map:?}");
    }
    assert!(
        map.windows(2).all(|w| w[0].addr + w[0].size <= w[1].addr),
        "{map:?}"
    );
    assert_eq!(
        expected_touches(&full, TOUCH_STRIDE),
        map.iter().map(|e| e.size.div_ceil(2 << 20)).sum::<u64>()
    );
    assert_eq!(
        expected_touches(&full, TOUCH_STRIDE_SPARSE),
        map.iter().map(|e| e.size.div_ceil(1 << 30)).sum::<u64>()
    );
    Some(ranges)
}

fn serial_use(sel: u8) -> SerialUse {
    match sel % 6 {
        0 => SerialUse::Off,
        1 => SerialUse::Console,
        n => SerialUse::Transport(Engine::ALL[usize::from(n - 2)]),
    }
}

fn check_cmdline(serial: SerialUse, mem: GuestMem, extra: &str) {
    let mut want = base_cmdline(serial).to_string();
    for w in hash_caps(mem) {
        want.push(' ');
        want.push_str(w);
    }
    want.push_str(&format!(" truecold.mem={}", mem.bytes()));
    if let SerialUse::Transport(e) = serial {
        want.push_str(&format!(
            " truecold.transport=serial truecold.engine={}",
            e.as_str()
        ));
    }
    if !extra.trim().is_empty() {
        want.push(' ');
        want.push_str(extra.trim());
    }
    let printable = want.bytes().all(|b| (0x20..0x7f).contains(&b));
    match cmdline(serial, mem, extra) {
        Ok(s) => {
            assert!(printable && s.len() <= CMDLINE_MAX, "{s:?}");
            assert_eq!(s, want);
            // The guest reads back what the host meant, unless the extra words set
            // truecold keys themselves (then the guest's parser decides, strictly). The
            // trimmed extra: `trim` also drops a vertical tab, on which
            // `split_ascii_whitespace` does not split.
            if !extra
                .trim()
                .split_ascii_whitespace()
                .any(|w| w.starts_with("truecold."))
            {
                let g = GuestConfig::from_cmdline(&s).expect("the guest parses the host's line");
                assert_eq!(g.mem, mem.bytes());
                match serial {
                    SerialUse::Transport(e) => {
                        assert_eq!((g.transport, g.engine), (Transport::Serial, e));
                    }
                    _ => assert_eq!(
                        (g.transport, g.engine),
                        (Transport::Ports, Engine::Truecold)
                    ),
                }
            }
        }
        Err(CmdlineError::Invalid) => assert!(!printable, "{want:?}"),
        Err(CmdlineError::TooLong(n)) => {
            assert!(printable);
            assert_eq!(n, want.len());
            assert!(n > CMDLINE_MAX);
        }
    }
}

fn check_zero_page(
    header: Option<&[u8]>,
    cmd_addr: u64,
    cmd_len: usize,
    initrd: Option<(u64, u64)>,
    map: &[E820Entry],
) {
    let z = match zero_page(header, cmd_addr, cmd_len, initrd, map) {
        Err(e) => {
            assert_eq!(e, BootParamsError::TooManyE820(map.len()));
            assert!(map.len() > ZERO_PAGE_E820_MAX);
            return;
        }
        Ok(z) => z,
    };
    assert!(map.len() <= ZERO_PAGE_E820_MAX);
    assert_eq!(z.len(), 4096);
    assert_eq!(usize::from(z[0x1e8]), map.len());
    assert_eq!(&z[0x1fe..0x200], &[0x55, 0xaa]);
    assert_eq!(&z[0x202..0x206], b"HdrS");
    assert_eq!(z[0x210], 0xff);
    assert_eq!(z[0x211] & 1, 1);
    assert_eq!(u32_at(&z, 0x228), cmd_addr as u32);
    assert_eq!(u32_at(&z, 0x238), cmd_len as u32);
    let (ra, rs) = initrd.map_or((0, 0), |(a, s)| (a as u32, s as u32));
    let hdr_at = |o: usize| header.and_then(|h| h.get(o - 0x1f1)).copied().unwrap_or(0);
    if initrd.is_some() {
        assert_eq!((u32_at(&z, 0x218), u32_at(&z, 0x21c)), (ra, rs));
    } else {
        for (o, &b) in z.iter().enumerate().take(0x220).skip(0x218) {
            assert_eq!(b, hdr_at(o));
        }
    }
    for (i, e) in map.iter().enumerate() {
        let o = 0x2d0 + 20 * i;
        assert_eq!(
            (u64_at(&z, o), u64_at(&z, o + 8), u32_at(&z, o + 16)),
            (e.addr, e.size, e.kind)
        );
    }
    let loader_owned = |o: usize| {
        matches!(o, 0x1fe..=0x205 | 0x210 | 0x211 | 0x228..=0x22b | 0x238..=0x23b | 0x218..=0x21f)
            || (header.is_none() && matches!(o, 0x206..=0x207 | 0x230..=0x233))
    };
    for (o, &b) in z.iter().enumerate() {
        if o == 0x1e8 || loader_owned(o) || (0x2d0..0x2d0 + 20 * map.len()).contains(&o) {
            continue;
        }
        let want = if (0x1f1..0x290).contains(&o) {
            hdr_at(o)
        } else {
            0
        };
        assert_eq!(b, want, "zero page byte {o:#x}");
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    // Memory size: mostly near the limits and the holes, sometimes any u64.
    let raw = input.u64();
    let mib = match input.u8() % 4 {
        0 => raw,
        1 => raw % (MAX_MEM_MIB + 16),
        2 => raw % 8192,
        _ => 3072u64.wrapping_add(raw % 64).wrapping_sub(32),
    };
    let serial = serial_use(input.u8());
    let kernel_end = match input.u8() % 3 {
        0 => input.u64(),
        _ => u64::from(input.u32()),
    };
    let initrd_size = match input.u8() % 3 {
        0 => input.u64(),
        _ => u64::from(input.u32()),
    };
    let header = match input.u8() % 3 {
        0 => None,
        _ => Some(input.short()),
    };
    let cmd_addr = input.u64();
    let cmd_len = usize::from(input.u16());
    let initrd = input.bool().then(|| (input.u64(), input.u64()));
    let n = usize::from(input.u8());
    let map: Vec<E820Entry> = (0..n)
        .map(|_| E820Entry {
            addr: input.u64(),
            size: input.u64(),
            kind: input.u32(),
        })
        .collect();
    let modules = u32::from(input.u8() % 2);
    let how = RamLayout::ALL[usize::from(input.u8() % 2)];
    let extra = String::from_utf8_lossy(input.rest()).into_owned();

    if let Some(ranges) = check_layout(mib, how) {
        // A size outside the limits is not a GuestMem: no command line can be built for it.
        let mem = GuestMem::from_mib(mib).expect("check_layout accepted it");
        check_cmdline(serial, mem, &extra);
        let limit = ranges[1].end().min(INITRD_MAX_END);
        let floor = kernel_end.max(HIGH_RAM_START);
        match place_initramfs(&ranges, kernel_end, initrd_size) {
            Ok(a) => {
                assert_eq!(a % 4096, 0);
                assert!(a >= floor && a + initrd_size <= limit, "{a:#x}");
                assert!(a + 4096 + initrd_size > limit, "{a:#x} is not the highest");
            }
            Err(BootParamsError::InitramfsTooLarge {
                size,
                kernel_end: k,
                limit: l,
            }) => {
                assert_eq!((size, k, l), (initrd_size, kernel_end, limit));
                let highest = limit.checked_sub(initrd_size).map(|a| a & !0xfff);
                assert!(highest.is_none_or(|a| a < floor), "{highest:?} fits");
            }
            Err(e) => panic!("place_initramfs: unexpected error {e:?}"),
        }
        let own = e820(&ranges, how);
        check_zero_page(header, cmd_addr, cmd_len, initrd, &own);
    }
    check_zero_page(header, cmd_addr, cmd_len, initrd, &map);

    let mm = pvh_memmap(&map);
    assert_eq!(mm.len(), 24 * map.len());
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
    let si = pvh_start_info(cmd_addr, kernel_end, n as u32, initrd_size, modules);
    assert_eq!(si.len(), 56);
    assert_eq!(u32_at(&si, 0), PVH_MAGIC);
    assert_eq!(u32_at(&si, 12), modules);
    assert_eq!(u64_at(&si, 16), if modules > 0 { initrd_size } else { 0 });
    assert_eq!(
        (u64_at(&si, 24), u64_at(&si, 40), u32_at(&si, 48)),
        (cmd_addr, kernel_end, n as u32)
    );
    let _ = checksum(&map);
    let _ = expected_touches(&map, TOUCH_STRIDE);
});
