//! The memory verification step: the exact-RAM rule of the engine (firmware map vs
//! `truecold.mem`, `truecold_init::exact_ram`), the zone rule (the kernel's zones and
//! MemTotal vs that map, `truecold_init::zone_rule`), probe.

use crate::error::InitError;
use std::fs;
use std::io::Read;
use truecold_init::{
    exact_ram, parse_meminfo_total, probe_check, probe_fill, summarize_ram, zone_rule, MemmapEntry,
};
use truecold_proto::kinds::{Engine, RamLayout};
use truecold_proto::layout::ZoneFigures;
use truecold_proto::{zoneinfo, ErrorCode};

const MEMMAP: &str = "/sys/firmware/memmap";
const ZONEINFO: &str = "/proc/zoneinfo";

/// What the memory step measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemFigures {
    pub firmware_ram: u64,
    pub mem_total: u64,
    /// Σpresent × 4096 (`/proc/zoneinfo`).
    pub present: u64,
    /// Σmanaged × 4096.
    pub managed: u64,
    pub probe: u64,
}

fn read(path: String, code: ErrorCode) -> Result<String, InitError> {
    fs::read_to_string(&path).map_err(|source| InitError::Read { code, path, source })
}

/// Reads every entry of `/sys/firmware/memmap`.
fn firmware_map() -> Result<Vec<MemmapEntry>, InitError> {
    let code = ErrorCode::MemFirmwareUnreadable;
    let dir = fs::read_dir(MEMMAP).map_err(|source| InitError::Read {
        code,
        path: MEMMAP.into(),
        source,
    })?;
    let mut out = Vec::new();
    for ent in dir {
        let ent = ent.map_err(|source| InitError::Read {
            code,
            path: MEMMAP.into(),
            source,
        })?;
        let p = ent.path().display().to_string();
        let start = read(format!("{p}/start"), code)?;
        let end = read(format!("{p}/end"), code)?;
        let kind = read(format!("{p}/type"), code)?;
        out.push(
            MemmapEntry::parse(&start, &end, &kind).map_err(|source| InitError::Parse {
                code,
                what: "firmware memmap entry",
                source,
            })?,
        );
    }
    Ok(out)
}

/// `/proc/zoneinfo`'s sums, read to at most one byte past what the parser accepts.
fn zones() -> Result<zoneinfo::ZoneTotals, InitError> {
    let code = ErrorCode::MemZoneinfoUnreadable;
    let io = |source| InitError::Read {
        code,
        path: ZONEINFO.into(),
        source,
    };
    let mut text = String::new();
    fs::File::open(ZONEINFO)
        .map_err(io)?
        .take(zoneinfo::MAX_BYTES as u64 + 1)
        .read_to_string(&mut text)
        .map_err(io)?;
    zoneinfo::parse(&text).map_err(InitError::Zoneinfo)
}

/// Checks the guest's RAM against `configured` bytes under `engine`'s layout; `figures` is
/// filled as far as it got.
pub fn verify(
    engine: Engine,
    layout: RamLayout,
    configured: u64,
    probe: u64,
    figures: &mut MemFigures,
) -> Result<(), InitError> {
    let code = ErrorCode::MemFirmwareUnreadable;
    let map = firmware_map()?;
    let ram = summarize_ram(&map).map_err(|source| InitError::Parse {
        code,
        what: "firmware memmap",
        source,
    })?;
    figures.firmware_ram = ram.ram_bytes;
    exact_ram(engine, layout, configured, ram, &map).map_err(InitError::MemFirmwareMismatch)?;
    let code = ErrorCode::MemInfoUnreadable;
    let info = read("/proc/meminfo".into(), code)?;
    let total = parse_meminfo_total(&info).map_err(|source| InitError::Parse {
        code,
        what: "/proc/meminfo",
        source,
    })?;
    figures.mem_total = total;
    let z = zones()?;
    figures.present = z.present_bytes();
    figures.managed = z.managed_bytes();
    let account = ZoneFigures {
        present: figures.present,
        managed: figures.managed,
        mem_total: total,
    };
    zone_rule(&map, account).map_err(InitError::Zones)?;
    probe_memory(probe)?;
    figures.probe = probe;
    Ok(())
}

/// Maps `bytes` of anonymous memory (populated by the kernel in one call, not one fault per
/// page), writes the pattern to every word, reads every word back ([`probe_fill`],
/// [`probe_check`]).
fn probe_memory(bytes: u64) -> Result<(), InitError> {
    let words = (bytes / 8) as usize;
    if words == 0 {
        return Ok(());
    }
    let len = words * 8;
    // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(InitError::ProbeMap {
            bytes,
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: `p` is a live, page-aligned, writable mapping of `len` = `words * 8` bytes,
    // used only through this slice until the munmap below.
    let s = unsafe { std::slice::from_raw_parts_mut(p.cast::<u64>(), words) };
    probe_fill(s);
    let bad = probe_check(s);
    // SAFETY: unmapping exactly the mapping made above; `s` is not used afterwards.
    unsafe { libc::munmap(p, len) };
    match bad {
        Some(i) => Err(InitError::ProbeMismatch {
            offset: i as u64 * 8,
        }),
        None => Ok(()),
    }
}
