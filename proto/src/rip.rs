//! Host-side sampling of the guest's instruction pointer (`truecold-vmm boot
//! --sample-rip-us N`): the VMM's waiting thread wakes every [`SamplePeriod`], asks each
//! vCPU for a sample and kicks it out of `KVM_RUN` (the run loop's kick signal, which sets
//! `immediate_exit`); the vCPU thread stamps the time on the VMM's one clock
//! ([`crate::measure::now_ns`]), reads RIP (`KVM_GET_REGS`) and its MP state
//! (`KVM_GET_MP_STATE`: halted, or waiting for its start) and appends them to a buffer
//! allocated before the seccomp filters. No guest-side instrumentation.
//!
//! The report carries them compactly ([`RipSamples`], one [`VcpuSamples`] per vCPU): time
//! and RIP as deltas from the previous sample, the state as one character per sample. A
//! [`Recorder`] encodes and bounds them (at most [`MAX_SAMPLES`] samples and
//! [`MAX_SAMPLE_BYTES`] bytes of those arrays over all vCPUs, so a report stays under the
//! bench's 1 MiB report cap whatever the period and the boot's length); a sample past a
//! bound is counted ([`VcpuSamples::over_cap`]), never silently dropped.
//! [`RipSamples::decode`] is the one reading (bounded, linear, a typed [`RipError`]).
//!
//! # Call stacks (`--sample-stacks`)
//! With a guest kernel built with frame pointers the VMM also walks the guest's frame-pointer
//! chain at each sample (truecold-vmm's `unwind`): the return addresses from the innermost
//! caller outwards, at most [`MAX_STACK_DEPTH`], and how the walk ended ([`StackEnd`]). A
//! vCPU's stacks are kept once each in a table ([`VcpuSamples::stacks`], each return address
//! as a difference from the previous one, [`VcpuSamples::stack_end`]) and each sample names
//! its entry ([`VcpuSamples::stack`]); the table and the indices count against the same
//! byte bound as the samples, and at most [`MAX_STACKS`] entries are kept over all vCPUs. A
//! stack past a bound keeps its sample: it names the one entry [`StackEnd::OverCap`] without
//! frames, so nothing is dropped silently. [`RipSamples::stacks`] is the one reading.

use serde::{Deserialize, Serialize};

/// Most samples kept over all vCPUs (each vCPU gets an equal share).
pub const MAX_SAMPLES: usize = 65_536;
/// Most bytes of the encoded arrays (`dt_ns`, `drip`, `state`, and with call stacks `stack`,
/// `stacks`, `stack_end`; separators) over all vCPUs.
pub const MAX_SAMPLE_BYTES: usize = 640 << 10;

/// Most return addresses walked per sample.
pub const MAX_STACK_DEPTH: usize = 48;

/// Most distinct call stacks kept over all vCPUs (each vCPU an equal share).
pub const MAX_STACKS: usize = 16_384;

/// Why sampling input is unusable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RipError {
    #[error(
        "sampling period {0} µs is outside {min}..={max} µs",
        min = SamplePeriod::MIN_US,
        max = SamplePeriod::MAX_US
    )]
    Period(u64),
    #[error("sampling period `{0}` is not a whole number of µs")]
    BadPeriod(String),
    #[error("vCPU {vcpu}: {dt} time deltas, {drip} RIP deltas and {state} states differ")]
    Lengths {
        vcpu: usize,
        dt: usize,
        drip: usize,
        state: usize,
    },
    #[error("vCPU {vcpu}: state `{ch}` is none of r, h, w, ?")]
    State { vcpu: usize, ch: char },
    #[error("vCPU {vcpu}: a sample's time overflows")]
    TimeOverflow { vcpu: usize },
    #[error("more than {MAX_SAMPLES} samples")]
    TooMany,
    #[error("vCPU {vcpu}: {samples} samples and {indices} stack indices differ")]
    StackIndices {
        vcpu: usize,
        samples: usize,
        indices: usize,
    },
    #[error("vCPU {vcpu}: {stacks} stacks and {ends} stack ends differ")]
    StackEnds {
        vcpu: usize,
        stacks: usize,
        ends: usize,
    },
    #[error("vCPU {vcpu}: stack index {index} is outside its {stacks} stacks")]
    StackIndex {
        vcpu: usize,
        index: u32,
        stacks: usize,
    },
    #[error("vCPU {vcpu}: stack end `{ch}` is none of e, d, l, o, a, u, r, n, c")]
    StackEnd { vcpu: usize, ch: char },
    #[error("vCPU {vcpu}: a stack of more than {MAX_STACK_DEPTH} frames, or frames where the walk ended without any")]
    StackDepth { vcpu: usize },
    #[error("more than {MAX_STACKS} stacks")]
    TooManyStacks,
    #[error("vCPU {vcpu}: call stacks without their samples' indices, or the reverse")]
    StackParts { vcpu: usize },
}

/// The sampling period, µs ([`SamplePeriod::MIN_US`] to [`SamplePeriod::MAX_US`]); checked
/// once, where it is parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u64", into = "u64")]
pub struct SamplePeriod(u32);

impl SamplePeriod {
    /// Shortest period: below it the kicks alone would dominate the boot.
    pub const MIN_US: u64 = 10;
    /// Longest period (one second).
    pub const MAX_US: u64 = 1_000_000;
    /// The bench's default (`--attribution-sample-us`).
    pub const DEFAULT_US: u64 = 100;
    /// [`SamplePeriod::DEFAULT_US`] as a period.
    pub const DEFAULT: SamplePeriod = SamplePeriod(Self::DEFAULT_US as u32);

    pub fn from_us(us: u64) -> Result<Self, RipError> {
        if !(Self::MIN_US..=Self::MAX_US).contains(&us) {
            return Err(RipError::Period(us));
        }
        u32::try_from(us)
            .map(SamplePeriod)
            .map_err(|_| RipError::Period(us))
    }

    /// Parses a flag's value (decimal µs).
    pub fn parse(s: &str) -> Result<Self, RipError> {
        let us = s
            .parse::<u64>()
            .map_err(|_| RipError::BadPeriod(s.to_string()))?;
        Self::from_us(us)
    }

    pub fn us(self) -> u64 {
        u64::from(self.0)
    }

    pub fn ns(self) -> u64 {
        self.us() * 1000
    }
}

impl TryFrom<u64> for SamplePeriod {
    type Error = RipError;
    fn try_from(us: u64) -> Result<Self, RipError> {
        Self::from_us(us)
    }
}

impl From<SamplePeriod> for u64 {
    fn from(p: SamplePeriod) -> u64 {
        p.us()
    }
}

impl std::fmt::Display for SamplePeriod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a vCPU was doing when sampled (`KVM_GET_MP_STATE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum VcpuState {
    /// `r`: runnable (executing guest code).
    Running,
    /// `h`: halted (`HLT`, the guest's idle).
    Halted,
    /// `w`: an AP still waiting for its INIT/SIPI.
    WaitingForStart,
    /// `?`: the MP state could not be read, or is another.
    Unknown,
}

impl VcpuState {
    pub fn as_char(self) -> char {
        match self {
            VcpuState::Running => 'r',
            VcpuState::Halted => 'h',
            VcpuState::WaitingForStart => 'w',
            VcpuState::Unknown => '?',
        }
    }

    pub fn from_char(c: char) -> Option<Self> {
        Some(match c {
            'r' => VcpuState::Running,
            'h' => VcpuState::Halted,
            'w' => VcpuState::WaitingForStart,
            '?' => VcpuState::Unknown,
            _ => return None,
        })
    }
}

/// How the walk of a sample's call stack ended (one character per entry of
/// [`VcpuSamples::stack_end`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StackEnd {
    /// `e`: where the kernel ends a chain: a zero frame pointer, or an encoded `pt_regs`
    /// pointer (the frame of an entry: from user space, an interrupt, a new task).
    End,
    /// `d`: [`MAX_STACK_DEPTH`] return addresses walked, the chain going on.
    Depth,
    /// `l`: a frame pointer not above the previous one (a loop, or a chain going down).
    NotAbove,
    /// `o`: a frame pointer outside the stack's span (below RSP, or more than
    /// [`MAX_STACK_SPAN`] above it: another stack, an interrupt's for one).
    OutOfSpan,
    /// `a`: a frame pointer misaligned, non-canonical or outside the kernel's half.
    BadAddress,
    /// `u`: a frame not mapped by the guest's page tables, or outside its RAM.
    Unmapped,
    /// `r`: a return address outside the kernel's half.
    BadReturn,
    /// `n`: not walked: the vCPU was not running 64-bit kernel code (user space, or before
    /// long mode with paging).
    NotWalked,
    /// `c`: not kept: the vCPU's share of [`MAX_STACKS`] or of [`MAX_SAMPLE_BYTES`] was full
    /// (the sample is kept, its stack is not).
    OverCap,
}

/// The span above RSP in which a frame pointer is taken as the same stack's (a kernel
/// thread's stack is 16 KiB without KASAN; an IRQ stack is another stack).
pub const MAX_STACK_SPAN: u64 = 64 << 10;

impl StackEnd {
    pub const ALL: [StackEnd; 9] = [
        StackEnd::End,
        StackEnd::Depth,
        StackEnd::NotAbove,
        StackEnd::OutOfSpan,
        StackEnd::BadAddress,
        StackEnd::Unmapped,
        StackEnd::BadReturn,
        StackEnd::NotWalked,
        StackEnd::OverCap,
    ];

    pub fn as_char(self) -> char {
        match self {
            StackEnd::End => 'e',
            StackEnd::Depth => 'd',
            StackEnd::NotAbove => 'l',
            StackEnd::OutOfSpan => 'o',
            StackEnd::BadAddress => 'a',
            StackEnd::Unmapped => 'u',
            StackEnd::BadReturn => 'r',
            StackEnd::NotWalked => 'n',
            StackEnd::OverCap => 'c',
        }
    }

    pub fn from_char(c: char) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_char() == c)
    }

    /// Whether the chain ended where the kernel ends it, or was not walked at all: every
    /// other end leaves the outer frames unknown.
    pub fn complete(self) -> bool {
        matches!(self, StackEnd::End | StackEnd::NotWalked)
    }

    /// The words for an incomplete stack (a flame graph's marker frame).
    pub fn describe(self) -> &'static str {
        match self {
            StackEnd::End => "complete",
            StackEnd::Depth => "deeper than the walk's bound",
            StackEnd::NotAbove => "bad chain: a frame not above the previous",
            StackEnd::OutOfSpan => "chain left the stack",
            StackEnd::BadAddress => "bad chain: a bad frame address",
            StackEnd::Unmapped => "bad chain: a frame not mapped",
            StackEnd::BadReturn => "bad chain: a return address outside the kernel",
            StackEnd::NotWalked => "not walked",
            StackEnd::OverCap => "not kept: the stack table was full",
        }
    }
}

/// The address a return address `ret` is looked up at to name its calling function: the
/// byte before it, inside the call instruction (a call that ends its function, to a
/// `noreturn` callee, returns past the function's end). One definition for the bench's
/// symbol map and the proof's profile.
pub fn call_site(ret: u64) -> u64 {
    ret.wrapping_sub(1)
}

/// One walked call stack: the return addresses from the innermost caller outwards, and how
/// the walk ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Stack {
    pub frames: Vec<u64>,
    pub end: StackEnd,
}

/// One decoded sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// CLOCK_MONOTONIC, ns (the VMM's stamps' clock).
    pub t_ns: u64,
    pub rip: u64,
    pub state: VcpuState,
}

/// One vCPU's samples, encoded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VcpuSamples {
    /// Each sample's time minus the previous one's (the first: minus [`RipSamples::t0_ns`]), ns.
    pub dt_ns: Vec<u64>,
    /// Each sample's RIP minus the previous one's (the first: minus 0), wrapping, as i64.
    pub drip: Vec<i64>,
    /// One [`VcpuState`] character per sample.
    pub state: String,
    /// Samples not taken: the vCPU's share of [`MAX_SAMPLES`] or [`MAX_SAMPLE_BYTES`] was
    /// full.
    pub over_cap: u64,
    /// Ticks at which this vCPU had not yet served the previous tick's request (one sample
    /// for both).
    pub coalesced: u64,
    /// Requests served whose registers could not be read.
    pub unread: u64,
    /// Requests still pending when the run stopped (served after `exit`: not samples of the
    /// run).
    pub at_stop: u64,
    /// The samples asked of this vCPU: every tick of the sampler's grid from the first run
    /// to the stop while its thread ran, the ticks the waiting thread slept through
    /// (`missed_ticks`) included. Absent in a report made before the VMM counted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<u64>,
    /// Per sample, its call stack's index in [`VcpuSamples::stacks`]. Absent when the VMM
    /// walked no stacks (no `--sample-stacks`, and every report made before it could).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<Vec<u32>>,
    /// The distinct call stacks: each one's return addresses from the innermost caller
    /// outwards, the first as its value (as i64), each next as its difference from the
    /// previous one (wrapping).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stacks: Vec<Vec<i64>>,
    /// One [`StackEnd`] character per entry of [`VcpuSamples::stacks`].
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stack_end: String,
}

/// The share of its requested samples a vCPU obtained below which an attribution says its
/// rate was not obtained (README, HTML, the run's summary): 90 %, in ppm.
pub const OBTAINED_FLOOR_PPM: u64 = 900_000;

impl VcpuSamples {
    /// Samples kept.
    pub fn obtained(&self) -> u64 {
        self.dt_ns.len() as u64
    }

    /// [`VcpuSamples::obtained`] per million [`VcpuSamples::requested`]; `None` without the
    /// count or with nothing requested.
    pub fn obtained_ppm(&self) -> Option<u64> {
        let r = self.requested.filter(|&r| r > 0)?;
        Some((u128::from(self.obtained()) * 1_000_000 / u128::from(r)) as u64)
    }
}

/// A boot's RIP samples (the report's `rip_samples`; absent when sampling is off).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RipSamples {
    pub period_us: SamplePeriod,
    /// The sampler's start (CLOCK_MONOTONIC ns): the origin of each vCPU's first `dt_ns`.
    pub t0_ns: u64,
    /// Ticks the waiting thread made (each asks every started vCPU for one sample).
    pub ticks: u64,
    /// Ticks skipped because the waiting thread woke late (no vCPU was asked).
    pub missed_ticks: u64,
    pub vcpus: Vec<VcpuSamples>,
}

fn dec_len_u64(v: u64) -> usize {
    v.checked_ilog10().map_or(1, |d| d as usize + 1)
}

fn dec_len_i64(v: i64) -> usize {
    dec_len_u64(v.unsigned_abs()) + usize::from(v < 0)
}

/// One vCPU's sample buffer: allocated up front ([`Recorder::new`]), appended to from the
/// vCPU thread without allocating, encoded as it goes.
#[derive(Clone, Debug)]
pub struct Recorder {
    out: VcpuSamples,
    last_t: u64,
    last_rip: u64,
    cap: usize,
    cap_bytes: usize,
    bytes: usize,
    stacks: Option<StackTable>,
}

/// A vCPU's call stacks while recording: the distinct ones in a flat array with an
/// open-addressing index, all allocated by [`Recorder::with_stacks`] (no allocation after).
#[derive(Clone, Debug)]
struct StackTable {
    /// Every entry's frames, one after the other.
    frames: Vec<u64>,
    /// Entry i's frames are `frames[start[i]..start[i + 1]]`.
    start: Vec<u32>,
    end: Vec<StackEnd>,
    /// Open addressing: an entry's index, or `u32::MAX` (empty); a power of two ≥ twice
    /// the entries.
    slots: Vec<u32>,
    /// Most entries.
    cap: usize,
    /// The sample's entries.
    index: Vec<u32>,
    /// The [`StackEnd::OverCap`] entry, once made.
    over_cap: Option<u32>,
}

const EMPTY_SLOT: u32 = u32::MAX;

fn stack_hash(frames: &[u64], end: StackEnd) -> u64 {
    // FNV-1a over the frames' bytes and the end's character.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: u8| {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    for f in frames {
        for b in f.to_le_bytes() {
            eat(b);
        }
    }
    eat(end.as_char() as u8);
    h
}

/// The bytes one table entry adds to the report: `[`, each delta and its comma, `],`, and
/// its end character.
fn entry_bytes(frames: &[u64]) -> usize {
    let mut prev = 0u64;
    let mut b = 3 + 1;
    for f in frames {
        b += dec_len_i64(f.wrapping_sub(prev) as i64) + 1;
        prev = *f;
    }
    b
}

impl StackTable {
    fn new(cap: usize, frames: usize, samples: usize) -> Self {
        let slots = (cap.max(1) * 2).next_power_of_two();
        StackTable {
            frames: Vec::with_capacity(frames),
            start: {
                let mut v = Vec::with_capacity(cap + 1);
                v.push(0);
                v
            },
            end: Vec::with_capacity(cap),
            slots: vec![EMPTY_SLOT; slots],
            cap,
            index: Vec::with_capacity(samples),
            over_cap: None,
        }
    }

    fn entry(&self, i: usize) -> (&[u64], StackEnd) {
        (
            &self.frames[self.start[i] as usize..self.start[i + 1] as usize],
            self.end[i],
        )
    }

    /// The slot holding `frames`/`end`, or the empty one where it goes (the table is never
    /// full: at most half its slots are used).
    fn find(&self, frames: &[u64], end: StackEnd) -> (usize, Option<u32>) {
        let mask = self.slots.len() - 1;
        let mut at = stack_hash(frames, end) as usize & mask;
        loop {
            match self.slots[at] {
                EMPTY_SLOT => return (at, None),
                i if self.entry(i as usize) == (frames, end) => return (at, Some(i)),
                _ => at = (at + 1) & mask,
            }
        }
    }

    /// Whether a new entry of `frames` fits the entry and frame bounds (the last entry is
    /// kept for the [`StackEnd::OverCap`] one until that is made).
    fn fits(&self, frames: &[u64]) -> bool {
        self.end.len() + usize::from(self.over_cap.is_none()) < self.cap
            && self.frames.len() + frames.len() <= self.frames.capacity()
    }

    fn insert(&mut self, slot: usize, frames: &[u64], end: StackEnd) -> u32 {
        let i = self.end.len() as u32;
        self.frames.extend_from_slice(frames);
        self.start.push(self.frames.len() as u32);
        self.end.push(end);
        self.slots[slot] = i;
        i
    }

    fn finish(self) -> (Vec<u32>, Vec<Vec<i64>>, String) {
        let stacks = (0..self.end.len())
            .map(|i| {
                let mut prev = 0u64;
                self.entry(i)
                    .0
                    .iter()
                    .map(|f| {
                        let d = f.wrapping_sub(prev) as i64;
                        prev = *f;
                        d
                    })
                    .collect()
            })
            .collect();
        let ends = self.end.iter().map(|e| e.as_char()).collect();
        (self.index, stacks, ends)
    }
}

impl Recorder {
    /// One of `vcpus` recorders (each holds an equal share of the bounds; `vcpus` ≥ 1).
    pub fn new(vcpus: usize) -> Self {
        let n = vcpus.max(1);
        let cap = MAX_SAMPLES / n;
        Recorder {
            out: VcpuSamples {
                dt_ns: Vec::with_capacity(cap),
                drip: Vec::with_capacity(cap),
                state: String::with_capacity(cap),
                ..VcpuSamples::default()
            },
            last_t: 0,
            last_rip: 0,
            cap,
            cap_bytes: MAX_SAMPLE_BYTES / n,
            bytes: 0,
            stacks: None,
        }
    }

    /// [`Recorder::new`] with a call-stack table ([`Recorder::push_with_stack`]), its share
    /// of [`MAX_STACKS`] entries and as many frames as its byte share can encode (two bytes
    /// each at least).
    pub fn with_stacks(vcpus: usize) -> Self {
        let mut r = Recorder::new(vcpus);
        let n = vcpus.max(1);
        let cap = MAX_STACKS / n;
        let frames = (r.cap_bytes / 2).min(cap * MAX_STACK_DEPTH);
        r.stacks = Some(StackTable::new(cap, frames, r.cap));
        r
    }

    /// Sets the time origin (before the first sample).
    pub fn start(&mut self, t0_ns: u64) {
        self.last_t = t0_ns;
    }

    /// True when no further sample fits.
    pub fn full(&self) -> bool {
        self.out.dt_ns.len() >= self.cap
    }

    /// Whether this recorder keeps call stacks ([`Recorder::with_stacks`]).
    pub fn walks_stacks(&self) -> bool {
        self.stacks.is_some()
    }

    /// Appends one sample, or counts it in `over_cap` when a bound is reached (returns
    /// whether it was kept). Times before the origin or the previous sample count as 0.
    /// A recorder with stacks records this sample's as not walked.
    pub fn push(&mut self, s: Sample) -> bool {
        self.push_with_stack(s, &[], StackEnd::NotWalked)
    }

    /// [`Recorder::push`] with the sample's call stack (`frames` beyond [`MAX_STACK_DEPTH`]
    /// are not kept; ignored without a stack table). A stack that does not fit the table or
    /// the bytes keeps its sample under the one [`StackEnd::OverCap`] entry; a sample that
    /// does not fit is counted in `over_cap`.
    pub fn push_with_stack(&mut self, s: Sample, frames: &[u64], end: StackEnd) -> bool {
        let dt = s.t_ns.saturating_sub(self.last_t);
        let drip = s.rip.wrapping_sub(self.last_rip) as i64;
        // Each number and its comma, and the state's character.
        let mut b = dec_len_u64(dt) + dec_len_i64(drip) + 3;
        if self.full() || self.bytes + b > self.cap_bytes {
            self.over_cap();
            return false;
        }
        if let Some(t) = self.stacks.as_mut() {
            let frames = &frames[..frames.len().min(MAX_STACK_DEPTH)];
            let frames: &[u64] = if end == StackEnd::OverCap {
                &[]
            } else {
                frames
            };
            let (slot, found) = t.find(frames, end);
            let index = match found {
                Some(i) => i,
                None => {
                    let cost = entry_bytes(frames);
                    // The index of the entry and its comma.
                    let ib = dec_len_u64(u64::from(t.end.len() as u32)) + 1;
                    if t.fits(frames) && self.bytes + b + ib + cost <= self.cap_bytes {
                        b += cost;
                        t.insert(slot, frames, end)
                    } else {
                        match t.over_cap {
                            Some(i) => i,
                            None => {
                                // The table kept an entry for it ([`StackTable::fits`]); the
                                // bytes may still be short, and then the sample is counted.
                                let (slot, _) = t.find(&[], StackEnd::OverCap);
                                let cost = entry_bytes(&[]);
                                if t.end.len() >= t.cap
                                    || self.bytes + b + ib + cost > self.cap_bytes
                                {
                                    self.over_cap();
                                    return false;
                                }
                                b += cost;
                                let i = t.insert(slot, &[], StackEnd::OverCap);
                                t.over_cap = Some(i);
                                i
                            }
                        }
                    }
                }
            };
            let ib = dec_len_u64(u64::from(index)) + 1;
            if self.bytes + b + ib > self.cap_bytes {
                // A known entry's index must fit too (a new one's was counted above).
                self.over_cap();
                return false;
            }
            b += ib;
            t.index.push(index);
        }
        self.bytes += b;
        self.last_t = self.last_t.saturating_add(dt);
        self.last_rip = s.rip;
        self.out.dt_ns.push(dt);
        self.out.drip.push(drip);
        self.out.state.push(s.state.as_char());
        true
    }

    /// Counts a sample not taken because the buffer is full.
    pub fn over_cap(&mut self) {
        self.out.over_cap += 1;
    }

    pub fn at_stop(&mut self) {
        self.out.at_stop += 1;
    }

    pub fn unread(&mut self) {
        self.out.unread += 1;
    }

    /// The samples so far.
    pub fn len(&self) -> usize {
        self.out.dt_ns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of the encoded arrays so far (bounded by this recorder's share of
    /// [`MAX_SAMPLE_BYTES`]).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn finish(self) -> VcpuSamples {
        let mut out = self.out;
        if let Some(t) = self.stacks {
            let (index, stacks, ends) = t.finish();
            out.stack = Some(index);
            out.stacks = stacks;
            out.stack_end = ends;
        }
        out
    }
}

/// One vCPU's call stacks, decoded ([`RipSamples::stacks`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VcpuStacks {
    /// The distinct stacks.
    pub table: Vec<Stack>,
    /// Per sample, its stack's index in `table`.
    pub of_sample: Vec<u32>,
}

impl RipSamples {
    /// Every vCPU's samples, in order (bounded by [`MAX_SAMPLES`] over all vCPUs; linear).
    pub fn decode(&self) -> Result<Vec<Vec<Sample>>, RipError> {
        let total: usize = self.vcpus.iter().map(|v| v.dt_ns.len()).sum();
        if total > MAX_SAMPLES {
            return Err(RipError::TooMany);
        }
        let mut out = Vec::with_capacity(self.vcpus.len());
        for (i, v) in self.vcpus.iter().enumerate() {
            let states = v.state.chars().count();
            if v.dt_ns.len() != v.drip.len() || v.dt_ns.len() != states {
                return Err(RipError::Lengths {
                    vcpu: i,
                    dt: v.dt_ns.len(),
                    drip: v.drip.len(),
                    state: states,
                });
            }
            let mut t = self.t0_ns;
            let mut rip = 0u64;
            let mut samples = Vec::with_capacity(v.dt_ns.len());
            for ((dt, d), ch) in v.dt_ns.iter().zip(&v.drip).zip(v.state.chars()) {
                t = t
                    .checked_add(*dt)
                    .ok_or(RipError::TimeOverflow { vcpu: i })?;
                rip = rip.wrapping_add(*d as u64);
                let state = VcpuState::from_char(ch).ok_or(RipError::State { vcpu: i, ch })?;
                samples.push(Sample {
                    t_ns: t,
                    rip,
                    state,
                });
            }
            out.push(samples);
        }
        Ok(out)
    }

    /// Whether the VMM walked call stacks (any vCPU carries stack indices).
    pub fn has_stacks(&self) -> bool {
        self.vcpus.iter().any(|v| v.stack.is_some())
    }

    /// Every vCPU's call stacks (`None` for a vCPU without them), checked: one index per
    /// sample, each inside its table, one end per entry, at most [`MAX_STACK_DEPTH`] frames
    /// an entry and none where the walk did not run, at most [`MAX_STACKS`] entries in all
    /// (bounded, linear).
    pub fn stacks(&self) -> Result<Vec<Option<VcpuStacks>>, RipError> {
        let total: usize = self.vcpus.iter().map(|v| v.stacks.len()).sum();
        if total > MAX_STACKS {
            return Err(RipError::TooManyStacks);
        }
        let mut out = Vec::with_capacity(self.vcpus.len());
        for (i, v) in self.vcpus.iter().enumerate() {
            let Some(of_sample) = &v.stack else {
                if !v.stacks.is_empty() || !v.stack_end.is_empty() {
                    return Err(RipError::StackParts { vcpu: i });
                }
                out.push(None);
                continue;
            };
            if of_sample.len() != v.dt_ns.len() {
                return Err(RipError::StackIndices {
                    vcpu: i,
                    samples: v.dt_ns.len(),
                    indices: of_sample.len(),
                });
            }
            let ends = v.stack_end.chars().count();
            if ends != v.stacks.len() {
                return Err(RipError::StackEnds {
                    vcpu: i,
                    stacks: v.stacks.len(),
                    ends,
                });
            }
            let mut table = Vec::with_capacity(v.stacks.len());
            for (deltas, ch) in v.stacks.iter().zip(v.stack_end.chars()) {
                let end = StackEnd::from_char(ch).ok_or(RipError::StackEnd { vcpu: i, ch })?;
                if deltas.len() > MAX_STACK_DEPTH
                    || (!deltas.is_empty()
                        && matches!(end, StackEnd::NotWalked | StackEnd::OverCap))
                {
                    return Err(RipError::StackDepth { vcpu: i });
                }
                let mut f = 0u64;
                let frames = deltas
                    .iter()
                    .map(|d| {
                        f = f.wrapping_add(*d as u64);
                        f
                    })
                    .collect();
                table.push(Stack { frames, end });
            }
            if let Some(&index) = of_sample.iter().find(|&&x| x as usize >= table.len()) {
                return Err(RipError::StackIndex {
                    vcpu: i,
                    index,
                    stacks: table.len(),
                });
            }
            out.push(Some(VcpuStacks {
                table,
                of_sample: of_sample.clone(),
            }));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn period_is_checked_once_at_its_bounds() {
        assert_eq!(SamplePeriod::from_us(9), Err(RipError::Period(9)));
        assert_eq!(SamplePeriod::from_us(10).map(SamplePeriod::ns), Ok(10_000));
        assert!(SamplePeriod::from_us(1_000_000).is_ok());
        assert_eq!(
            SamplePeriod::from_us(1_000_001),
            Err(RipError::Period(1_000_001))
        );
        assert!(matches!(
            SamplePeriod::parse("1e3"),
            Err(RipError::BadPeriod(_))
        ));
        assert_eq!(SamplePeriod::parse("100").map(SamplePeriod::us), Ok(100));
        assert!(serde_json::from_str::<SamplePeriod>("5").is_err());
        assert_eq!(
            serde_json::to_string(&SamplePeriod::from_us(250).unwrap()).unwrap(),
            "250"
        );
    }

    fn s(t_ns: u64, rip: u64, state: VcpuState) -> Sample {
        Sample { t_ns, rip, state }
    }

    #[test]
    fn encoding_round_trips_kernel_and_user_rips() {
        let mut r = Recorder::new(2);
        r.start(1_000);
        let want = [
            s(1_500, 0xffff_ffff_8100_1234, VcpuState::Running),
            s(101_500, 0xffff_ffff_8100_1200, VcpuState::Halted),
            s(201_500, 0x40_1000, VcpuState::Running),
            s(301_000, u64::MAX, VcpuState::Unknown),
            s(401_000, 0, VcpuState::WaitingForStart),
        ];
        for x in want {
            assert!(r.push(x));
        }
        r.at_stop();
        let v = r.finish();
        assert_eq!(v.state, "rhr?w");
        assert_eq!(v.dt_ns[0], 500);
        assert_eq!(v.at_stop, 1);
        let rs = RipSamples {
            period_us: SamplePeriod::from_us(100).unwrap(),
            t0_ns: 1_000,
            ticks: 5,
            missed_ticks: 0,
            vcpus: vec![v, VcpuSamples::default()],
        };
        let json = serde_json::to_string(&rs).unwrap();
        let back: RipSamples = serde_json::from_str(&json).unwrap();
        let d = back.decode().unwrap();
        assert_eq!(d[0], want);
        assert!(d[1].is_empty());
    }

    #[test]
    fn the_byte_bound_holds_and_counts_what_it_refuses() {
        let mut r = Recorder::new(1);
        r.start(0);
        // Worst case: every RIP delta is 20 characters.
        let mut kept = 0u64;
        let mut refused = 0u64;
        for i in 0..(MAX_SAMPLES as u64) {
            let rip = if i % 2 == 0 { 1 } else { i64::MIN as u64 };
            if r.push(s(i * 10_000, rip, VcpuState::Running)) {
                kept += 1;
            } else {
                refused += 1;
            }
        }
        assert!(refused > 0);
        let v = r.finish();
        assert_eq!(v.over_cap, refused);
        assert_eq!(v.dt_ns.len() as u64, kept);
        let json = serde_json::to_string(&v).unwrap();
        assert!(json.len() <= MAX_SAMPLE_BYTES + 200, "{}", json.len());
        // The sample bound, per vCPU share.
        let mut r = Recorder::new(4);
        for i in 0..(MAX_SAMPLES as u64 / 4 + 3) {
            r.push(s(i, 5, VcpuState::Halted));
        }
        assert_eq!(r.len(), MAX_SAMPLES / 4);
        assert_eq!(r.finish().over_cap, 3);
    }

    #[test]
    fn decode_refuses_what_does_not_add_up() {
        let v = VcpuSamples {
            dt_ns: vec![1, 2],
            drip: vec![1],
            state: "rr".into(),
            ..VcpuSamples::default()
        };
        let mut rs = RipSamples {
            period_us: SamplePeriod::from_us(100).unwrap(),
            t0_ns: 0,
            ticks: 0,
            missed_ticks: 0,
            vcpus: vec![v],
        };
        assert!(matches!(
            rs.decode(),
            Err(RipError::Lengths { vcpu: 0, .. })
        ));
        rs.vcpus[0].drip.push(3);
        rs.vcpus[0].state = "rx".into();
        assert_eq!(rs.decode(), Err(RipError::State { vcpu: 0, ch: 'x' }));
        rs.vcpus[0].state = "rr".into();
        rs.vcpus[0].dt_ns[1] = u64::MAX;
        assert_eq!(rs.decode(), Err(RipError::TimeOverflow { vcpu: 0 }));
        rs.vcpus[0].dt_ns = vec![0; MAX_SAMPLES + 1];
        assert_eq!(rs.decode(), Err(RipError::TooMany));
    }

    #[test]
    fn stacks_are_kept_once_each_and_round_trip() {
        let k = 0xffff_ffff_8100_0000u64;
        let mut r = Recorder::with_stacks(2);
        assert!(r.walks_stacks());
        r.start(0);
        let a = [k + 0x10, k + 0x2000, k + 0x30];
        let b = [k + 0x10, k + 0x40];
        assert!(r.push_with_stack(s(10, k, VcpuState::Running), &a, StackEnd::End));
        assert!(r.push_with_stack(s(20, k + 1, VcpuState::Running), &b, StackEnd::NotAbove));
        assert!(r.push_with_stack(s(30, k + 2, VcpuState::Halted), &a, StackEnd::End));
        // The same frames with another end are another stack.
        assert!(r.push_with_stack(s(40, k, VcpuState::Running), &a, StackEnd::Depth));
        assert!(r.push(s(50, 0x40_1000, VcpuState::Running)));
        let v = r.finish();
        assert_eq!(v.stack.as_deref(), Some(&[0, 1, 0, 2, 3][..]));
        assert_eq!(v.stack_end, "eldn");
        assert_eq!(v.stacks[3], Vec::<i64>::new());
        assert_eq!(v.stacks[0][1], 0x1ff0);
        let rs = RipSamples {
            period_us: SamplePeriod::from_us(100).unwrap(),
            t0_ns: 0,
            ticks: 5,
            missed_ticks: 0,
            vcpus: vec![v, VcpuSamples::default()],
        };
        let back: RipSamples = serde_json::from_str(&serde_json::to_string(&rs).unwrap()).unwrap();
        assert!(back.has_stacks());
        let st = back.stacks().unwrap();
        let st0 = st[0].as_ref().unwrap();
        assert_eq!(st0.table[0].frames, a);
        assert_eq!(
            st0.table[1],
            Stack {
                frames: b.to_vec(),
                end: StackEnd::NotAbove
            }
        );
        assert_eq!(st0.table[3].end, StackEnd::NotWalked);
        assert!(st[1].is_none());
        // Without stacks nothing of them is written: a report keeps its bytes.
        let mut plain = Recorder::new(1);
        plain.push(s(1, 2, VcpuState::Running));
        let json = serde_json::to_string(&plain.finish()).unwrap();
        assert!(!json.contains("stack"), "{json}");
    }

    #[test]
    fn a_stack_past_the_table_keeps_its_sample_under_the_over_cap_entry() {
        let k = 0xffff_ffff_8100_0000u64;
        // 64 vCPUs: 256 entries each.
        let n = 64;
        let mut r = Recorder::with_stacks(n);
        let cap = MAX_STACKS / n;
        let mut kept = 0;
        for i in 0..(cap as u64 + 10) {
            if r.push_with_stack(s(i, k, VcpuState::Running), &[k + i * 16], StackEnd::End) {
                kept += 1;
            }
        }
        let v = r.finish();
        assert_eq!(kept, cap + 10, "every sample kept");
        assert_eq!(v.stacks.len(), cap);
        assert_eq!(v.stack_end.chars().last(), Some('c'));
        let over = (cap - 1) as u32;
        assert_eq!(
            v.stack
                .as_ref()
                .unwrap()
                .iter()
                .filter(|&&x| x == over)
                .count(),
            11
        );
        assert!(v.stacks[cap - 1].is_empty());
    }

    #[test]
    fn stacks_count_against_the_byte_bound() {
        let mut r = Recorder::with_stacks(1);
        let mut refused = 0u64;
        // Deep stacks of far-apart frames: ~48 × 21 bytes each; distinct every time.
        for i in 0..(MAX_SAMPLES as u64) {
            let frames: Vec<u64> = (0..MAX_STACK_DEPTH as u64)
                .map(|d| if d % 2 == 0 { i } else { i64::MIN as u64 })
                .collect();
            if !r.push_with_stack(s(i, 1, VcpuState::Running), &frames, StackEnd::Depth) {
                refused += 1;
            }
        }
        assert!(r.bytes() <= MAX_SAMPLE_BYTES);
        let v = r.finish();
        assert_eq!(v.over_cap, refused);
        assert!(
            v.stack_end.ends_with('c'),
            "the table filled up to the bound"
        );
        let json = serde_json::to_string(&v).unwrap();
        assert!(json.len() <= MAX_SAMPLE_BYTES + 300, "{}", json.len());
    }

    #[test]
    fn stack_decoding_refuses_what_does_not_add_up() {
        let base = || VcpuSamples {
            dt_ns: vec![1, 2],
            drip: vec![1, 1],
            state: "rr".into(),
            stack: Some(vec![0, 1]),
            stacks: vec![vec![-5, 8], vec![]],
            stack_end: "en".into(),
            ..VcpuSamples::default()
        };
        let rs = |v: VcpuSamples| RipSamples {
            period_us: SamplePeriod::from_us(100).unwrap(),
            t0_ns: 0,
            ticks: 2,
            missed_ticks: 0,
            vcpus: vec![v],
        };
        assert!(rs(base()).stacks().is_ok());
        let mut v = base();
        v.stack = Some(vec![0]);
        assert!(matches!(rs(v).stacks(), Err(RipError::StackIndices { .. })));
        let mut v = base();
        v.stack = Some(vec![0, 2]);
        assert!(matches!(
            rs(v).stacks(),
            Err(RipError::StackIndex { index: 2, .. })
        ));
        let mut v = base();
        v.stack_end = "e".into();
        assert!(matches!(rs(v).stacks(), Err(RipError::StackEnds { .. })));
        let mut v = base();
        v.stack_end = "ez".into();
        assert_eq!(rs(v).stacks(), Err(RipError::StackEnd { vcpu: 0, ch: 'z' }));
        let mut v = base();
        v.stacks[1] = vec![1];
        assert_eq!(rs(v).stacks(), Err(RipError::StackDepth { vcpu: 0 }));
        let mut v = base();
        v.stacks[0] = vec![1; MAX_STACK_DEPTH + 1];
        assert_eq!(rs(v).stacks(), Err(RipError::StackDepth { vcpu: 0 }));
        let mut v = base();
        v.stack = None;
        assert_eq!(rs(v).stacks(), Err(RipError::StackParts { vcpu: 0 }));
        let mut v = base();
        v.stacks = vec![vec![]; MAX_STACKS + 1];
        assert_eq!(rs(v).stacks(), Err(RipError::TooManyStacks));
    }
}
