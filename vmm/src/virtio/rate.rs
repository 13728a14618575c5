//! Token-bucket rate limits on what a guest can make a device do: bytes and operations per
//! second (virtio-blk requests, virtio-net tx frames, virtio-vsock tx packets), the model of
//! Firecracker's rate limiter (a bucket per quantity, refilled continuously, an operation
//! admitted only when every bucket has its cost), written for this device thread.
//!
//! A bucket holds at most `capacity` tokens and gains `per_sec` a second, counted exactly
//! (in nano-tokens: elapsed ns × `per_sec`, no rounding). It starts full. An operation
//! costing `n` tokens is admitted when the bucket holds at least `min(n, capacity)`; its
//! whole cost is then taken, so one operation larger than the capacity leaves a debt the
//! refill repays before the next (it is never refused for good). A device whose next
//! operation is not admitted leaves it in its queue and stops that queue; the limiter says
//! when the buckets will hold its cost ([`Limiter::wake_at`]), the device thread's
//! `epoll_wait` times out then (millisecond resolution: a throttled queue resumes at most
//! 1 ms after its tokens are there) and delivers [`super::Event::Timer`], and the queue goes
//! on. A notification while stopped does nothing (the timer comes anyway). No timerfd, no new
//! syscall: the thread's `epoll_wait` only gains a timeout.
//!
//! The defaults ([`RateLimit::BLK`], [`RateLimit::NET_TX`], [`RateLimit::VSOCK_TX`]) are
//! bounds against a flood, far above any legitimate boot. A parity boot (docs/parity.md)
//! mounts an 8 MiB ext4 image and writes, reads back and deletes one 64 KiB file, completes
//! one TCP round trip and sends its agent lines on vsock; the committed parity bundle
//! `results/20261202T053858Z-nested-parity-2vcpu-16384mib` measured at most 282 blk
//! requests, 6 transmitted frames and 12 vsock chains (tx and rx) a boot. The bursts are
//! 4,096 operations (14× the blk requests, hundreds of times the others) and 64 MiB of blk
//! data (8× the whole image, so even a guest reading and rewriting all of it fits), 16 MiB
//! of frames and of vsock data; a burst is what a boot may use at once, so such a boot never
//! waits; only a guest that keeps going past it is held to the sustained rate (as much
//! again each second). A strict-ready boot without devices has no limiter at all.
use std::fmt;

/// Nano-tokens per token.
const NANO: i128 = 1_000_000_000;

/// One bucket: at most `capacity` tokens, `per_sec` more each second. Both are at least 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    pub capacity: u64,
    pub per_sec: u64,
}

/// A device's limits: a bucket of bytes and one of operations (None: that quantity is not
/// limited).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateLimit {
    pub bytes: Option<Bucket>,
    pub ops: Option<Bucket>,
}

const MIB: u64 = 1 << 20;

impl RateLimit {
    /// No limit.
    pub const UNLIMITED: RateLimit = RateLimit {
        bytes: None,
        ops: None,
    };
    /// virtio-blk: 64 MiB and 4,096 requests at once, then 64 MiB and 4,096 requests a second
    /// (a request's bytes: its whole chain, header and status included).
    pub const BLK: RateLimit = RateLimit {
        bytes: Some(Bucket {
            capacity: 64 * MIB,
            per_sec: 64 * MIB,
        }),
        ops: Some(Bucket {
            capacity: 4096,
            per_sec: 4096,
        }),
    };
    /// virtio-net transmit (the guest's frames to the tap): 16 MiB and 4,096 frames at once,
    /// then as much a second. Receive is the host's traffic, not limited.
    pub const NET_TX: RateLimit = RateLimit {
        bytes: Some(Bucket {
            capacity: 16 * MIB,
            per_sec: 16 * MIB,
        }),
        ops: Some(Bucket {
            capacity: 4096,
            per_sec: 4096,
        }),
    };
    /// virtio-vsock transmit (the guest's packets: each REQUEST a connect on the host):
    /// 16 MiB and 4,096 packets at once, then as much a second.
    pub const VSOCK_TX: RateLimit = RateLimit {
        bytes: Some(Bucket {
            capacity: 16 * MIB,
            per_sec: 16 * MIB,
        }),
        ops: Some(Bucket {
            capacity: 4096,
            per_sec: 4096,
        }),
    };
}

/// A bucket's level over time.
#[derive(Clone, Copy, Debug)]
struct Level {
    spec: Bucket,
    /// Nano-tokens; negative: a debt.
    level: i128,
    /// When `level` was last brought up to date (None: never used, full).
    at: Option<u64>,
}

impl Level {
    fn new(spec: Bucket) -> Self {
        Level {
            spec: Bucket {
                capacity: spec.capacity.max(1),
                per_sec: spec.per_sec.max(1),
            },
            level: 0,
            at: None,
        }
    }

    fn full(&self) -> i128 {
        i128::from(self.spec.capacity) * NANO
    }

    fn refill(&mut self, now: u64) {
        match self.at {
            None => {
                self.level = self.full();
                self.at = Some(now);
            }
            Some(at) if now > at => {
                // Both factors are below 2^64: the product fits in 128 bits.
                let gained = u128::from(now - at) * u128::from(self.spec.per_sec);
                let room = (self.full() - self.level) as u128;
                self.level = if gained >= room {
                    self.full()
                } else {
                    self.level + gained as i128
                };
                self.at = Some(now);
            }
            Some(_) => {}
        }
    }

    /// What admitting `cost` tokens needs in the bucket, nano-tokens.
    fn need(&self, cost: u64) -> i128 {
        i128::from(cost.min(self.spec.capacity)) * NANO
    }

    /// When (≥ `now`) the bucket will hold what `cost` needs (after a refill at `now`).
    fn ready_at(&self, cost: u64, now: u64) -> u64 {
        let short = self.need(cost) - self.level;
        if short <= 0 {
            return now;
        }
        let per = i128::from(self.spec.per_sec);
        let wait = (short + per - 1) / per;
        now.saturating_add(u64::try_from(wait).unwrap_or(u64::MAX))
    }

    fn take(&mut self, cost: u64) {
        self.level -= i128::from(cost) * NANO;
    }
}

/// The limiter of one queue: its buckets, whether (and until when) the queue is stopped,
/// and how often it was.
#[derive(Clone, Debug)]
pub struct Limiter {
    bytes: Option<Level>,
    ops: Option<Level>,
    stopped_until: Option<u64>,
    /// Times the queue stopped for lack of tokens (the device's `…throttled` counter).
    pub throttled: u64,
}

impl Limiter {
    pub fn new(limit: RateLimit) -> Self {
        Limiter {
            bytes: limit.bytes.map(Level::new),
            ops: limit.ops.map(Level::new),
            stopped_until: None,
            throttled: 0,
        }
    }

    /// Whether the queue is stopped at `now` (its tokens are not there yet).
    pub fn stopped(&self, now: u64) -> bool {
        self.stopped_until.is_some_and(|t| now < t)
    }

    /// Whether the queue may run at `now`: false while stopped; else true, and the stop is
    /// over (a queue the guest emptied meanwhile then asks for no timer).
    pub fn go(&mut self, now: u64) -> bool {
        if self.stopped(now) {
            return false;
        }
        self.stopped_until = None;
        true
    }

    /// When the stopped queue may go on (the device's [`super::VirtioDevice::wake_at`]).
    pub fn wake_at(&self) -> Option<u64> {
        self.stopped_until
    }

    /// Admits one operation of `bytes` at `now`: true, and its cost taken from every bucket;
    /// or false, nothing taken, the queue stopped until the buckets hold it (counted once
    /// per stop).
    pub fn admit(&mut self, now: u64, bytes: u64) -> bool {
        let mut ready = now;
        for (level, cost) in [(&mut self.bytes, bytes), (&mut self.ops, 1)] {
            if let Some(l) = level {
                l.refill(now);
                ready = ready.max(l.ready_at(cost, now));
            }
        }
        if ready > now {
            if self.stopped_until.is_none() {
                self.throttled += 1;
            }
            self.stopped_until = Some(ready);
            return false;
        }
        self.stopped_until = None;
        if let Some(l) = &mut self.bytes {
            l.take(bytes);
        }
        if let Some(l) = &mut self.ops {
            l.take(1);
        }
        true
    }

    /// The driver reset the device: the queue is no longer stopped (nothing is in it), the
    /// buckets stay as they are (a reset refills nothing).
    pub fn reset(&mut self) {
        self.stopped_until = None;
    }
}

impl RateLimit {
    /// The flag syntax ([`RateLimit::parse`] reads it back): `off`, or comma-separated
    /// `bytes=CAPACITY/PER_SEC` and `ops=CAPACITY/PER_SEC` (a quantity left out is not
    /// limited).
    pub fn spec(&self) -> String {
        let mut parts = Vec::new();
        for (name, b) in [("bytes", self.bytes), ("ops", self.ops)] {
            if let Some(b) = b {
                parts.push(format!("{name}={}/{}", b.capacity, b.per_sec));
            }
        }
        if parts.is_empty() {
            "off".into()
        } else {
            parts.join(",")
        }
    }

    /// Parses [`RateLimit::spec`]'s syntax; `PER_SEC` may be left out (`bytes=CAPACITY`: as
    /// much a second as at once). Every number is at least 1; a quantity named twice, an
    /// unknown one or an empty spec is refused.
    pub fn parse(s: &str) -> Result<RateLimit, String> {
        if s == "off" {
            return Ok(RateLimit::UNLIMITED);
        }
        let num = |v: &str, what: &str| -> Result<u64, String> {
            match v.parse::<u64>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(format!("`{s}`: {what} `{v}` is not a whole number ≥ 1")),
            }
        };
        let mut out = RateLimit::UNLIMITED;
        for part in s.split(',') {
            let (name, v) = part.split_once('=').ok_or_else(|| {
                format!("`{s}`: `{part}` is not bytes=CAPACITY/PER_SEC or ops=CAPACITY/PER_SEC (or `off`)")
            })?;
            let (cap, per) = match v.split_once('/') {
                Some((c, p)) => (num(c, "capacity")?, num(p, "per-second refill")?),
                None => {
                    let c = num(v, "capacity")?;
                    (c, c)
                }
            };
            let slot = match name {
                "bytes" => &mut out.bytes,
                "ops" => &mut out.ops,
                _ => return Err(format!("`{s}`: `{name}` is neither bytes nor ops")),
            };
            if slot.is_some() {
                return Err(format!("`{s}`: `{name}` given twice"));
            }
            *slot = Some(Bucket {
                capacity: cap,
                per_sec: per,
            });
        }
        Ok(out)
    }
}

/// Each device's limit (`truecold-vmm boot --blk-rate-limit`, `--net-tx-rate-limit`,
/// `--vsock-tx-rate-limit`), the defaults above unless set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    pub blk: RateLimit,
    pub net_tx: RateLimit,
    pub vsock_tx: RateLimit,
}

impl Default for DeviceLimits {
    fn default() -> Self {
        DeviceLimits {
            blk: RateLimit::BLK,
            net_tx: RateLimit::NET_TX,
            vsock_tx: RateLimit::VSOCK_TX,
        }
    }
}

impl DeviceLimits {
    pub fn is_default(&self) -> bool {
        *self == DeviceLimits::default()
    }
}

/// [`DeviceLimits`] in JSON: each limit in its flag syntax ([`RateLimit::spec`]).
impl serde::Serialize for DeviceLimits {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("DeviceLimits", 3)?;
        st.serialize_field("blk", &self.blk.spec())?;
        st.serialize_field("net_tx", &self.net_tx.spec())?;
        st.serialize_field("vsock_tx", &self.vsock_tx.spec())?;
        st.end()
    }
}

impl<'de> serde::Deserialize<'de> for DeviceLimits {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Text {
            blk: String,
            net_tx: String,
            vsock_tx: String,
        }
        let t = Text::deserialize(d)?;
        let p = |v: &str| RateLimit::parse(v).map_err(serde::de::Error::custom);
        Ok(DeviceLimits {
            blk: p(&t.blk)?,
            net_tx: p(&t.net_tx)?,
            vsock_tx: p(&t.vsock_tx)?,
        })
    }
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let one = |b: Option<Bucket>, unit: &str| match b {
            Some(b) => format!("{} {unit} at once, {} {unit}/s", b.capacity, b.per_sec),
            None => format!("{unit} unlimited"),
        };
        write!(f, "{}; {}", one(self.bytes, "bytes"), one(self.ops, "ops"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn the_flag_syntax_reads_back_what_it_writes() {
        for l in [
            RateLimit::BLK,
            RateLimit::NET_TX,
            RateLimit::VSOCK_TX,
            RateLimit::UNLIMITED,
            RateLimit {
                bytes: None,
                ops: Some(Bucket {
                    capacity: 7,
                    per_sec: 3,
                }),
            },
        ] {
            assert_eq!(RateLimit::parse(&l.spec()), Ok(l), "{}", l.spec());
        }
        assert_eq!(
            RateLimit::BLK.spec(),
            "bytes=67108864/67108864,ops=4096/4096"
        );
        assert_eq!(
            RateLimit::parse("ops=10"),
            Ok(RateLimit {
                bytes: None,
                ops: Some(Bucket {
                    capacity: 10,
                    per_sec: 10
                })
            })
        );
        for bad in [
            "",
            "bytes",
            "bytes=0",
            "ops=1/0",
            "ops=-1",
            "iops=3",
            "ops=1,ops=2",
            "bytes=1/2/3",
        ] {
            assert!(RateLimit::parse(bad).is_err(), "{bad}");
        }
        let d = DeviceLimits {
            net_tx: RateLimit::UNLIMITED,
            ..DeviceLimits::default()
        };
        let j = serde_json::to_string(&d).unwrap();
        assert_eq!(serde_json::from_str::<DeviceLimits>(&j).unwrap(), d);
        assert!(j.contains("\"net_tx\":\"off\""), "{j}");
    }

    fn limit(bytes: (u64, u64), ops: (u64, u64)) -> RateLimit {
        RateLimit {
            bytes: Some(Bucket {
                capacity: bytes.0,
                per_sec: bytes.1,
            }),
            ops: Some(Bucket {
                capacity: ops.0,
                per_sec: ops.1,
            }),
        }
    }

    #[test]
    fn a_burst_then_the_sustained_rate_exactly() {
        let mut l = Limiter::new(limit((1000, 1000), (10, 10)));
        let t0 = 5 * SEC;
        for i in 0..10 {
            assert!(l.admit(t0, 1), "op {i} of the burst");
        }
        assert!(!l.admit(t0, 1), "the 11th at once");
        assert_eq!(l.throttled, 1);
        // One op a 100 ms: ready exactly then, not a nanosecond before.
        assert_eq!(l.wake_at(), Some(t0 + SEC / 10));
        assert!(l.stopped(t0 + SEC / 10 - 1));
        assert!(!l.stopped(t0 + SEC / 10));
        assert!(!l.admit(t0 + SEC / 10 - 1, 1));
        assert_eq!(l.throttled, 1, "one stop, however often it is retried");
        assert!(l.admit(t0 + SEC / 10, 1));
        assert_eq!(l.wake_at(), None);
        // Bytes: 1000 at once, the ops bucket refilled after 2 s.
        let t1 = t0 + 2 * SEC;
        assert!(l.admit(t1, 600));
        assert!(!l.admit(t1, 600), "bytes short");
        assert_eq!(l.wake_at(), Some(t1 + 200 * SEC / 1000));
        assert_eq!(l.throttled, 2);
    }

    #[test]
    fn an_operation_larger_than_the_bucket_goes_through_with_a_debt() {
        let mut l = Limiter::new(limit((100, 100), (1000, 1000)));
        assert!(l.admit(0, 350), "a full bucket admits any one operation");
        assert!(!l.admit(0, 1));
        // The debt: 250 bytes, then 1 more: 2.51 s at 100 bytes/s.
        assert_eq!(l.wake_at(), Some(2_510_000_000));
        assert!(l.admit(2_510_000_000, 1));
    }

    #[test]
    fn a_reset_refills_nothing_and_a_clock_going_back_gains_nothing() {
        let mut l = Limiter::new(limit((10, 1), (10, 1)));
        assert!(l.admit(SEC, 10));
        assert!(!l.admit(SEC, 1));
        l.reset();
        assert!(!l.stopped(SEC));
        assert!(!l.admit(SEC, 1), "still empty after the reset");
        assert!(!l.admit(0, 1), "an earlier time adds nothing");
        assert!(l.admit(2 * SEC, 1));
        // A stop whose operation went away (the guest emptied its queue): once its time
        // came, `go` ends it and no timer is asked for.
        assert!(!l.admit(2 * SEC, 1));
        assert_eq!(l.wake_at(), Some(3 * SEC));
        assert!(!l.go(3 * SEC - 1));
        assert!(l.go(3 * SEC));
        assert_eq!(l.wake_at(), None);
    }

    #[test]
    fn unlimited_admits_everything_and_extremes_do_not_overflow() {
        let mut l = Limiter::new(RateLimit::UNLIMITED);
        for _ in 0..1000 {
            assert!(l.admit(0, u64::MAX));
        }
        let mut l = Limiter::new(limit((u64::MAX, u64::MAX), (u64::MAX, u64::MAX)));
        assert!(l.admit(0, u64::MAX));
        assert!(l.admit(u64::MAX, u64::MAX));
        let mut l = Limiter::new(limit((1, 1), (1, 1)));
        assert!(l.admit(u64::MAX - 1, u64::MAX));
        assert!(!l.admit(u64::MAX - 1, 1));
        assert_eq!(l.wake_at(), Some(u64::MAX), "saturates");
        // Zero in a spec is taken as 1 (a bucket that never refills would stop for good).
        let mut l = Limiter::new(limit((0, 0), (0, 0)));
        assert!(l.admit(0, 5));
        assert!(l.admit(6 * SEC, 1));
    }

    #[test]
    fn the_defaults_hold_a_parity_boot_many_times_over() {
        // More than a parity boot's whole use, at one instant: the 8 MiB image read and
        // written back in 282 × 2 requests (the measured count, doubled); a hundred frames
        // and packets of 1.5 KiB.
        let image = 8u64 << 20;
        let mut blk = Limiter::new(RateLimit::BLK);
        for _ in 0..2 * 282 {
            assert!(blk.admit(0, image / 282 + 17));
        }
        for (lim, what) in [(RateLimit::NET_TX, "net"), (RateLimit::VSOCK_TX, "vsock")] {
            let mut l = Limiter::new(lim);
            for _ in 0..100 {
                assert!(l.admit(0, 1514), "{what}");
            }
            assert_eq!(l.throttled, 0);
        }
        assert_eq!(blk.throttled, 0);
        assert_eq!(
            RateLimit::BLK.to_string(),
            "67108864 bytes at once, 67108864 bytes/s; 4096 ops at once, 4096 ops/s"
        );
    }
}
