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

use serde::{Deserialize, Serialize};

/// Most samples kept over all vCPUs (each vCPU gets an equal share).
pub const MAX_SAMPLES: usize = 65_536;
/// Most bytes of the encoded arrays (`dt_ns`, `drip`, `state`, separators) over all vCPUs.
pub const MAX_SAMPLE_BYTES: usize = 640 << 10;

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
        }
    }

    /// Sets the time origin (before the first sample).
    pub fn start(&mut self, t0_ns: u64) {
        self.last_t = t0_ns;
    }

    /// True when no further sample fits.
    pub fn full(&self) -> bool {
        self.out.dt_ns.len() >= self.cap
    }

    /// Appends one sample, or counts it in `over_cap` when a bound is reached (returns
    /// whether it was kept). Times before the origin or the previous sample count as 0.
    pub fn push(&mut self, s: Sample) -> bool {
        let dt = s.t_ns.saturating_sub(self.last_t);
        let drip = s.rip.wrapping_sub(self.last_rip) as i64;
        // Each number and its comma, and the state's character.
        let b = dec_len_u64(dt) + dec_len_i64(drip) + 3;
        if self.full() || self.bytes + b > self.cap_bytes {
            self.over_cap();
            return false;
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

    pub fn finish(self) -> VcpuSamples {
        self.out
    }
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
}
