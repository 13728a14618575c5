//! An attribution boot's kernel-log trace: what guest-init reads from `/dev/kmsg` after the
//! workload (only when the command line says `truecold.attribution=1`, see
//! [`crate::cmdline::ATTRIBUTION`]) and sends to the host after its record, as `TC1` lines:
//!
//! | line | once | meaning |
//! |---|---|---|
//! | `TC1 ksync kmsg_us=… mono_ns=… records=… truncated=0\|1` | yes, first | the clock join of the kernel log: guest-init read its CLOCK_MONOTONIC (`mono_ns`), then wrote one line to `/dev/kmsg`, which the kernel stamped `kmsg_us` (the printk clock, `local_clock()`, µs); `records` kmsg records read, `truncated` when a bound stopped the reading |
//! | `TC1 initcall fn=… start_us=… dur_us=… ret=…` | ≤ [`MAX_INITCALLS`] | one `initcall_debug` pair: the `calling` record's printk time, the `returned … after N usecs` figure, the return value |
//! | `TC1 kmark name=… t_us=…` | ≤ [`MAX_KMARKS`] | the first record of each [`KERNEL_MARKS`] entry, its printk time |
//!
//! The host ([`GuestTrace::push`]) keeps them with their bounds: an entry over a bound, a
//! second `ksync` or a malformed line is a typed [`ProtoError`], never a panic.

use serde::{Deserialize, Serialize};

use crate::wire::ProtoError;

/// Most `initcall` lines the host keeps (a tinyconfig-based kernel runs a few hundred).
pub const MAX_INITCALLS: usize = 2048;
/// Most `kmark` lines the host keeps (at most one per [`KERNEL_MARKS`] entry).
pub const MAX_KMARKS: usize = KERNEL_MARKS.len();
/// Longest initcall name (a symbol, or the `0x…` address a kernel without KALLSYMS prints).
pub const MAX_NAME: usize = 96;
/// Most `/dev/kmsg` records guest-init reads.
pub const MAX_KMSG_RECORDS: usize = 16_384;
/// Most `/dev/kmsg` bytes guest-init reads in all.
pub const MAX_KMSG_BYTES: usize = 4 << 20;
/// The line guest-init writes to `/dev/kmsg` for the clock join (its text follows this
/// prefix: the monotonic time, ns).
pub const SYNC_PREFIX: &str = "truecold-ksync mono_ns=";

/// Kernel phase marks: (mark name, the start of the kernel-log message that marks it), in
/// boot order (Linux 6.x x86 wording).
pub const KERNEL_MARKS: [(&str, &str); 8] = [
    ("linux_version", "Linux version "),
    ("memory", "Memory: "),
    ("smp_bringup", "smp: Bringing up secondary CPUs"),
    ("smp_up", "smp: Brought up "),
    ("devtmpfs", "devtmpfs: initialized"),
    ("clocksource", "clocksource: Switched to clocksource "),
    ("free_initmem", "Freeing unused kernel image"),
    ("run_init", "Run /init as init process"),
];

/// The clock join of the kernel log ([`crate::trace`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KmsgSync {
    pub kmsg_us: u64,
    pub mono_ns: u64,
    pub records: u64,
    pub truncated: bool,
}

/// One initcall as `initcall_debug` logged it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Initcall {
    /// The function as the kernel printed it (`%pS`: a symbol, or `0x…` without KALLSYMS).
    #[serde(rename = "fn")]
    pub func: String,
    /// Printk time of its `calling` record, µs.
    pub start_us: u64,
    /// The kernel's own measure (`ktime`), µs.
    pub dur_us: u64,
    pub ret: i64,
}

/// A kernel phase mark ([`KERNEL_MARKS`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelMark {
    pub name: String,
    /// Printk time of the record, µs.
    pub t_us: u64,
}

/// One trace line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceLine {
    Sync(KmsgSync),
    Initcall(Initcall),
    Mark(KernelMark),
}

/// Everything an attribution boot's guest sent of its kernel log.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestTrace {
    pub sync: Option<KmsgSync>,
    pub initcalls: Vec<Initcall>,
    pub marks: Vec<KernelMark>,
}

/// True for a name the wire carries: 1 to [`MAX_NAME`] bytes of `[A-Za-z0-9_.]`.
pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
}

impl GuestTrace {
    /// Keeps `line` within the bounds.
    pub fn push(&mut self, line: TraceLine) -> Result<(), ProtoError> {
        match line {
            TraceLine::Sync(s) => {
                if self.sync.replace(s).is_some() {
                    return Err(ProtoError::Repeated("ksync"));
                }
            }
            TraceLine::Initcall(c) => {
                if self.initcalls.len() >= MAX_INITCALLS {
                    return Err(ProtoError::TooMany {
                        what: "initcall",
                        max: MAX_INITCALLS,
                    });
                }
                self.initcalls.push(c);
            }
            TraceLine::Mark(m) => {
                if self.marks.len() >= MAX_KMARKS {
                    return Err(ProtoError::TooMany {
                        what: "kmark",
                        max: MAX_KMARKS,
                    });
                }
                if self.marks.iter().any(|k| k.name == m.name) {
                    return Err(ProtoError::Repeated("kmark"));
                }
                self.marks.push(m);
            }
        }
        Ok(())
    }
}
