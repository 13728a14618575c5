//! Host-testable parts of `truecold-init`, the guest's PID 1: parsers of what the kernel
//! shows the guest (`/sys/firmware/memmap`, `/proc/meminfo`, CPU lists, the `truecold.net`
//! spec; `/proc/zoneinfo`'s is `truecold_proto::zoneinfo`), the exact-RAM rule per engine,
//! the zone rule, the agent channel's bounded line
//! reader and nonce line, the probe pattern and the workload payload, all pure (the line
//! reader takes any [`Read`]); and the few pieces that do I/O on what a host test can give
//! them too: the exchanges over any stream and the TCP proof on a listener ([`exchange`]),
//! the file round trip of both workloads ([`roundtrip`]) and [`platform::read`], which both
//! binaries share. The steps that touch the guest system live in the binaries (`main.rs`,
//! `bin/platform-init.rs`); the panic hook ([`panic`]) takes its exit port and power-off from
//! `main.rs`.

pub mod exchange;
pub mod kmsg;
pub mod panic;
pub mod platform;
pub mod probe;
pub mod roundtrip;

pub use probe::{probe_check, probe_fill, probe_word};

use sha2::{Digest, Sha256};
use std::io::{self, Read};
use truecold_proto::kinds::{Engine, RamLayout, Transport};
use truecold_proto::layout::{
    check_map, check_zones, kernel_trim, AccountingError, MapEntry, MapKind, RamHole, ZoneError,
    ZoneFigures,
};
use truecold_proto::parity::{WORKSPACE_MOUNT, WORKSPACE_SEED};
use truecold_proto::{BootId, GuestPlatform, Message, ProtoError, MAX_LINE, NONCE_LEN};

/// Everything a parser here can reject.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("`{0}` is not a 0x-prefixed hex number")]
    BadHex(String),
    #[error("`{0}` is not a decimal number")]
    BadNumber(String),
    #[error("range end {end:#x} before start {start:#x}")]
    InvertedRange { start: u64, end: u64 },
    #[error("System RAM ranges overlap at {0:#x}")]
    Overlap(u64),
    #[error("sum of System RAM overflows 64 bits")]
    Overflow,
    #[error("no `{0}` line")]
    MissingKey(&'static str),
    #[error("unexpected unit `{0}` (want kB)")]
    BadUnit(String),
    #[error("malformed CPU list `{0}`")]
    BadCpuList(String),
    #[error("malformed network spec `{0}` (want <dev>,<a.b.c.d>/<prefix>)")]
    BadNetSpec(String),
    #[error("/proc/cpuinfo: {0}")]
    Cpuinfo(&'static str),
}

/// The `type` of firmware memory map entries that count as RAM.
pub const SYSTEM_RAM: &str = "System RAM";
/// The `type` of reserved firmware memory map entries (E820 type 2).
pub const RESERVED: &str = "Reserved";

/// One entry of `/sys/firmware/memmap/<n>/{start,end,type}` (end inclusive, as the kernel shows it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemmapEntry {
    pub start: u64,
    pub end: u64,
    pub kind: String,
}

fn parse_hex(s: &str) -> Result<u64, ParseError> {
    let t = s.trim();
    let digits = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .ok_or_else(|| ParseError::BadHex(t.into()))?;
    if digits.is_empty() || digits.len() > 16 {
        return Err(ParseError::BadHex(t.into()));
    }
    u64::from_str_radix(digits, 16).map_err(|_| ParseError::BadHex(t.into()))
}

fn parse_dec(s: &str) -> Result<u64, ParseError> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return Err(ParseError::BadNumber(s.into()));
    }
    s.parse().map_err(|_| ParseError::BadNumber(s.into()))
}

impl MemmapEntry {
    /// Parses the three sysfs files of one entry.
    pub fn parse(start: &str, end: &str, kind: &str) -> Result<Self, ParseError> {
        let (start, end) = (parse_hex(start)?, parse_hex(end)?);
        if end < start {
            return Err(ParseError::InvertedRange { start, end });
        }
        Ok(MemmapEntry {
            start,
            end,
            kind: kind.trim_end_matches('\n').to_string(),
        })
    }

    /// Bytes covered (the end is inclusive).
    pub fn len(&self) -> u64 {
        self.end - self.start + 1
    }

    /// Never true: an entry covers at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Facts about the firmware RAM map the memory check needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RamSummary {
    /// Sum of all `System RAM` ranges, bytes.
    pub ram_bytes: u64,
    /// One past the highest RAM byte.
    pub top: u64,
}

/// Sums the `System RAM` entries; rejects overlapping RAM ranges (they would double count).
pub fn summarize_ram(entries: &[MemmapEntry]) -> Result<RamSummary, ParseError> {
    let mut ram: Vec<&MemmapEntry> = entries.iter().filter(|e| e.kind == SYSTEM_RAM).collect();
    ram.sort_by_key(|e| e.start);
    let mut sum = 0u64;
    let mut top = 0u64;
    for (i, e) in ram.iter().enumerate() {
        if i > 0 && e.start < top {
            return Err(ParseError::Overlap(e.start));
        }
        sum = sum.checked_add(e.len()).ok_or(ParseError::Overflow)?;
        top = e.end.checked_add(1).ok_or(ParseError::Overflow)?;
    }
    Ok(RamSummary {
        ram_bytes: sum,
        top,
    })
}

/// `MemTotal` from `/proc/meminfo`, in bytes.
pub fn parse_meminfo_total(text: &str) -> Result<u64, ParseError> {
    let line = text
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .ok_or(ParseError::MissingKey("MemTotal"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let n = parse_dec(words.next().unwrap_or(""))?;
    match words.next() {
        Some("kB") => n.checked_mul(1024).ok_or(ParseError::Overflow),
        other => Err(ParseError::BadUnit(other.unwrap_or("").into())),
    }
}

/// How the firmware map breaks the exact-RAM rule of [`exact_ram`] (all figures in bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "engine {engine}{}: {found} bytes of System RAM, expected {expected} (truecold.mem \
     {configured} minus the engine's hole{}){}",
    layout_text(*.engine, *.layout),
    hole_text(.hole),
    in_hole_text(.in_hole)
)]
pub struct RamMismatch {
    pub engine: Engine,
    /// `truecold.ram_layout` (the truecold engine's; peers ignore it).
    pub layout: RamLayout,
    /// `truecold.mem`.
    pub configured: u64,
    /// `engine.expected_firmware_ram(configured, layout)`.
    pub expected: u64,
    /// Sum of the map's System RAM.
    pub found: u64,
    /// The engine's low-RAM hole (`Engine::low_ram_hole`).
    pub hole: Option<RamHole>,
    /// The first System RAM range (end inclusive, as sysfs shows it) that meets the hole.
    pub in_hole: Option<(u64, u64)>,
    /// The breach of the one rule (`truecold_proto::layout::check_map`).
    #[source]
    pub rule: AccountingError,
}

impl MemmapEntry {
    /// The entry as the one accounting rule reads a map (end exclusive).
    pub fn map_entry(&self) -> MapEntry {
        MapEntry {
            start: self.start,
            end: self.end.saturating_add(1),
            kind: match self.kind.as_str() {
                SYSTEM_RAM => MapKind::Ram,
                RESERVED => MapKind::Reserved,
                _ => MapKind::Other,
            },
        }
    }
}

/// The exact-RAM rule (guest-init/README.md), the one definition in
/// [`truecold_proto::layout::check_map`]: the firmware map's System RAM (`ram`, summed from
/// `entries` by [`summarize_ram`]) must equal `engine.expected_firmware_ram(configured,
/// layout)` exactly, no System RAM range may meet the engine's low-RAM hole, and where the
/// layout declares its hole (truecold's `hole-inside`) `Reserved` entries must cover exactly
/// it. Nothing else is allowed for: RAM the engine announces but does not give, or gives
/// where its layout says it must not, is a mismatch.
pub fn exact_ram(
    engine: Engine,
    layout: RamLayout,
    configured: u64,
    ram: RamSummary,
    entries: &[MemmapEntry],
) -> Result<(), RamMismatch> {
    let map: Vec<MapEntry> = entries.iter().map(MemmapEntry::map_entry).collect();
    let Err(rule) = check_map(engine, layout, configured, &map) else {
        return Ok(());
    };
    let hole = engine.low_ram_hole(layout);
    let in_hole = hole.and_then(|h| {
        entries
            .iter()
            .filter(|e| e.kind == SYSTEM_RAM && e.start < h.end && e.end >= h.start)
            .map(|e| (e.start, e.end))
            .min()
    });
    Err(RamMismatch {
        engine,
        layout,
        configured,
        expected: engine.expected_firmware_ram(configured, layout),
        found: ram.ram_bytes,
        hole,
        in_hole,
        rule,
    })
}

fn layout_text(engine: Engine, layout: RamLayout) -> String {
    if engine == Engine::Truecold {
        format!(" ({layout})")
    } else {
        String::new()
    }
}

fn hole_text(hole: &Option<RamHole>) -> String {
    match hole {
        Some(h) => format!(" [{:#x}, {:#x}) = {} bytes", h.start, h.end, h.len()),
        None => ": none".into(),
    }
}

fn in_hole_text(in_hole: &Option<(u64, u64)>) -> String {
    in_hole
        .map(|(s, e)| format!("; System RAM [{s:#x}, {e:#x}] lies in the hole"))
        .unwrap_or_default()
}

/// The zone rule (guest-init/README.md) on the map the guest read, the one definition in
/// [`truecold_proto::layout::check_zones`]: the kernel's zones hold the map's System RAM less
/// the kernel's own trims of that map ([`truecold_proto::layout::kernel_trim`]: page 0, RAM
/// in `[640 KiB, 1 MiB)`, partial pages), to the byte; `MemTotal` is their managed pages;
/// no more are managed than present.
pub fn zone_rule(entries: &[MemmapEntry], zones: ZoneFigures) -> Result<(), ZoneError> {
    let map: Vec<MapEntry> = entries.iter().map(MemmapEntry::map_entry).collect();
    let ram = map
        .iter()
        .filter(|e| e.kind == MapKind::Ram)
        .fold(0u64, |a, e| a.saturating_add(e.end.saturating_sub(e.start)));
    check_zones(ram, kernel_trim(&map), zones)
}

/// What [`read_line_bounded`] got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LineRead {
    /// One line, its `\n` included (at most [`MAX_LINE`] bytes).
    Line(Vec<u8>),
    /// [`MAX_LINE`] bytes came without a `\n`; reading stopped there.
    TooLong,
    /// The reader ended (a hung-up tty) before a `\n`.
    Eof,
}

/// Reads one line from `r`, one byte per `read` so that nothing after the `\n` is consumed,
/// and never more than [`MAX_LINE`] bytes. Interrupted reads are retried; other errors
/// returned.
pub fn read_line_bounded(r: &mut impl Read) -> io::Result<LineRead> {
    let mut line = Vec::with_capacity(64);
    let mut byte = [0u8; 1];
    while line.len() < MAX_LINE {
        match r.read(&mut byte) {
            Ok(0) => return Ok(LineRead::Eof),
            Ok(_) => {
                line.push(byte[0]);
                if byte[0] == b'\n' {
                    return Ok(LineRead::Line(line));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(LineRead::TooLong)
}

/// Why the line the host sent is not the nonce.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NonceLineError {
    #[error("no `\\n` within {MAX_LINE} bytes")]
    TooLong,
    #[error("undecodable line")]
    Decode(#[source] ProtoError),
    #[error("a TC1 `{0}` line where the nonce was due")]
    NotNonce(&'static str),
}

/// The nonce of a `TC1 nonce value=<32 hex>` line (its `\n` optional); anything else is an
/// error. A line [`read_line_bounded`] found too long is [`NonceLineError::TooLong`].
pub fn nonce_from_line(line: &[u8]) -> Result<[u8; NONCE_LEN], NonceLineError> {
    match Message::decode(line).map_err(NonceLineError::Decode)? {
        Message::Nonce(n) => Ok(n),
        Message::Ready { .. } => Err(NonceLineError::NotNonce("ready")),
        Message::Reply(_) => Err(NonceLineError::NotNonce("reply")),
        Message::Record(_) => Err(NonceLineError::NotNonce("record")),
        Message::Trace(_) => Err(NonceLineError::NotNonce("trace")),
    }
}

/// The transport to report a failure on when the command line could not be parsed (so
/// `GuestConfig.transport` is unknown): serial when some word is exactly
/// `truecold.transport=serial` (the spelling `truecold_vmm::boot_params::cmdline` writes),
/// else ports.
pub fn transport_hint(cmdline: &str) -> Transport {
    let serial = format!(
        "{}={}",
        truecold_proto::cmdline::TRANSPORT,
        Transport::Serial.as_str()
    );
    if cmdline.split_ascii_whitespace().any(|w| w == serial) {
        Transport::Serial
    } else {
        Transport::Ports
    }
}

/// Counts the CPUs in a kernel CPU list such as `0-3,5\n` (`/sys/devices/system/cpu/online`).
pub fn parse_cpu_count(text: &str) -> Result<u32, ParseError> {
    let t = text.trim();
    let bad = || ParseError::BadCpuList(t.into());
    if t.is_empty() {
        return Err(bad());
    }
    let mut n: u32 = 0;
    for part in t.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (parse_dec(a), parse_dec(b)),
            None => (parse_dec(part), parse_dec(part)),
        };
        let (a, b) = (a.map_err(|_| bad())?, b.map_err(|_| bad())?);
        if b < a {
            return Err(bad());
        }
        let count = u32::try_from(b - a + 1).map_err(|_| bad())?;
        n = n.checked_add(count).ok_or_else(bad)?;
    }
    Ok(n)
}

/// The topology and TSC flags of `/proc/cpuinfo` (x86) as a [`GuestPlatform`] (the clocksource
/// and the TSC verdict come from elsewhere: [`platform::read`]). Packages are the distinct
/// `physical id`s over all processors; cores per package and threads per core come from the
/// boot CPU's `cpu cores` and `siblings`. A kernel without SMP prints none of those lines:
/// then exactly one processor is one package of one core.
pub fn parse_cpuinfo(text: &str) -> Result<GuestPlatform, ParseError> {
    let mut processors = 0u32;
    let mut package_ids: Vec<u64> = Vec::new();
    let (mut cores, mut siblings, mut flags) = (None, None, None);
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        let first = processors == 1;
        match key {
            "processor" => processors += 1,
            "physical id" => {
                let id = parse_dec(value)?;
                if !package_ids.contains(&id) {
                    package_ids.push(id);
                }
            }
            "cpu cores" if first => cores = Some(parse_dec(value)?),
            "siblings" if first => siblings = Some(parse_dec(value)?),
            "flags" if first => flags = Some(value),
            _ => {}
        }
    }
    if processors == 0 {
        return Err(ParseError::Cpuinfo("no processor"));
    }
    let flags = flags.ok_or(ParseError::Cpuinfo("no flags line"))?;
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    let small = |v: u64| u32::try_from(v).map_err(|_| ParseError::Cpuinfo("count out of range"));
    let (packages, cores_per_package, threads_per_core) = match (cores, siblings) {
        (Some(c), Some(s)) if c > 0 && s % c == 0 && !package_ids.is_empty() => {
            (small(package_ids.len() as u64)?, small(c)?, small(s / c)?)
        }
        (None, None) if package_ids.is_empty() && processors == 1 => (1, 1, 1),
        _ => return Err(ParseError::Cpuinfo("inconsistent topology lines")),
    };
    Ok(GuestPlatform {
        packages,
        cores_per_package,
        threads_per_core,
        tsc_deadline_timer: has("tsc_deadline_timer"),
        constant_tsc: has("constant_tsc"),
        nonstop_tsc: has("nonstop_tsc"),
        ..GuestPlatform::default()
    })
}

/// The kernel-log line x86 prints when it stops trusting the TSC (`mark_tsc_unstable`).
pub const TSC_UNSTABLE_LOG: &str = "Marking TSC unstable";

/// A parsed `truecold.net=<dev>,<a.b.c.d>/<prefix>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetSpec {
    pub dev: String,
    pub addr: [u8; 4],
    pub prefix: u8,
}

impl NetSpec {
    /// Parses the spec; the device name must fit `IFNAMSIZ` (15 bytes + NUL).
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let bad = || ParseError::BadNetSpec(s.into());
        let (dev, rest) = s.split_once(',').ok_or_else(bad)?;
        let (ip, prefix) = rest.split_once('/').ok_or_else(bad)?;
        if dev.is_empty()
            || dev.len() > 15
            || !dev
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || c == b'-')
        {
            return Err(bad());
        }
        let mut addr = [0u8; 4];
        let mut octets = ip.split('.');
        for a in addr.iter_mut() {
            let o = parse_dec(octets.next().ok_or_else(bad)?).map_err(|_| bad())?;
            *a = u8::try_from(o).map_err(|_| bad())?;
        }
        if octets.next().is_some() {
            return Err(bad());
        }
        let prefix = parse_dec(prefix).map_err(|_| bad())?;
        if prefix > 32 {
            return Err(bad());
        }
        Ok(NetSpec {
            dev: dev.into(),
            addr,
            prefix: prefix as u8,
        })
    }

    /// The netmask of the prefix, network byte order.
    pub fn netmask(&self) -> [u8; 4] {
        let m: u32 = if self.prefix == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.prefix))
        };
        m.to_be_bytes()
    }
}

/// Size of the workload's fixed payload.
pub const PAYLOAD_LEN: usize = 1 << 20;

/// The workload's fixed payload: `PAYLOAD_LEN` bytes from a fixed xorshift sequence.
pub fn payload() -> Vec<u8> {
    let mut x: u64 = 0x7472_7565_636f_6c64; // "truecold"
    let mut out = Vec::with_capacity(PAYLOAD_LEN);
    while out.len() < PAYLOAD_LEN {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(PAYLOAD_LEN);
    out
}

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Whether the workspace's seed file held exactly [`WORKSPACE_SEED`] (the caller reads at most
/// one byte more than the seed, so a longer file is told apart).
pub fn seed_matches(got: &[u8]) -> bool {
    got == WORKSPACE_SEED
}

/// The workspace workload's file: `<WORKSPACE_MOUNT>/truecold/probe-<boot id>` (next to the
/// seed, in the directory the image ships).
pub fn workspace_probe_path(boot_id: BootId) -> String {
    format!("{WORKSPACE_MOUNT}/truecold/probe-{boot_id}")
}

#[cfg(test)]
mod tests;
