//! `TC1` lines: the encoding and the bounded, total decoding of every [`Message`], the hex
//! their binary values travel in, and the assembler that splits the record port's byte
//! stream into lines.

use super::code::{ErrorCode, ProtoError};
use super::liveness::{BootId, Reply};
use super::ports::{LINE_TAG, MAX_LINE, NONCE_LEN};
use super::record::{Clocksource, GuestPlatform, GuestRecord, Workload};
use crate::trace;

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(D[(b >> 4) as usize] as char);
        s.push(D[(b & 15) as usize] as char);
    }
    s
}

/// Decodes lowercase/uppercase hex of exactly `N` bytes.
pub fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let b = s.as_bytes();
    if b.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        let hi = (b[2 * i] as char).to_digit(16)?;
        let lo = (b[2 * i + 1] as char).to_digit(16)?;
        *o = (hi * 16 + lo) as u8;
    }
    Some(out)
}

/// A decoded line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// Serial transport, guest → host: PID 1's checks passed (the ready doorbell's line).
    Ready {
        boot_id: BootId,
    },
    /// Serial transport, host → guest: the fresh nonce, written only after `ready` was read.
    Nonce([u8; NONCE_LEN]),
    Reply(Reply),
    Record(GuestRecord),
    /// An attribution boot's kernel-log trace, after the record ([`trace`]).
    Trace(trace::TraceLine),
}

const READY_KEYS: &[&str] = &["boot_id"];
const NONCE_KEYS: &[&str] = &["value"];
const REPLY_KEYS: &[&str] = &["boot_id", "binding"];
const KSYNC_KEYS: &[&str] = &["kmsg_us", "mono_ns", "records", "truncated"];
const INITCALL_KEYS: &[&str] = &["fn", "start_us", "dur_us", "ret"];
const KMARK_KEYS: &[&str] = &["name", "t_us"];
const RECORD_KEYS: &[&str] = &[
    "boot_id",
    "t_init_ns",
    "t_ready_ns",
    "t_reply_ns",
    "t_record_ns",
    "mem_configured",
    "mem_firmware_ram",
    "mem_total",
    "mem_present",
    "mem_managed",
    "mem_probe",
    "cpus",
    "packages",
    "cores_per_package",
    "threads_per_core",
    "tsc_deadline_timer",
    "constant_tsc",
    "nonstop_tsc",
    "tsc_unstable",
    "clocksource",
    "workload",
    "code",
];

impl Message {
    /// Encodes as one line, `\n` included.
    pub fn encode(&self) -> String {
        match self {
            Message::Ready { boot_id } => format!("{LINE_TAG} ready boot_id={boot_id}\n"),
            Message::Nonce(n) => format!("{LINE_TAG} nonce value={}\n", hex(n)),
            Message::Reply(r) => format!(
                "{LINE_TAG} reply boot_id={} binding={}\n",
                r.boot_id,
                hex(&r.binding)
            ),
            Message::Record(r) => format!(
                "{LINE_TAG} record boot_id={} t_init_ns={} t_ready_ns={} t_reply_ns={} \
                 t_record_ns={} mem_configured={} mem_firmware_ram={} mem_total={} \
                 mem_present={} mem_managed={} mem_probe={} cpus={} packages={} cores_per_package={} threads_per_core={} \
                 tsc_deadline_timer={} constant_tsc={} nonstop_tsc={} tsc_unstable={} \
                 clocksource={} workload={} code={}\n",
                r.boot_id
                    .map(|b| b.to_string())
                    .unwrap_or_else(|| "none".into()),
                r.t_init_ns,
                r.t_ready_ns,
                r.t_reply_ns,
                r.t_record_ns,
                r.mem_configured,
                r.mem_firmware_ram,
                r.mem_total,
                r.mem_present,
                r.mem_managed,
                r.mem_probe,
                r.cpus,
                r.platform.packages,
                r.platform.cores_per_package,
                r.platform.threads_per_core,
                u8::from(r.platform.tsc_deadline_timer),
                u8::from(r.platform.constant_tsc),
                u8::from(r.platform.nonstop_tsc),
                u8::from(r.platform.tsc_unstable),
                r.platform
                    .clocksource
                    .as_ref()
                    .map_or("none", Clocksource::as_str),
                r.workload.encode(),
                r.code.name(),
            ),
            Message::Trace(trace::TraceLine::Sync(k)) => format!(
                "{LINE_TAG} ksync kmsg_us={} mono_ns={} records={} truncated={}\n",
                k.kmsg_us,
                k.mono_ns,
                k.records,
                u8::from(k.truncated)
            ),
            Message::Trace(trace::TraceLine::Initcall(c)) => format!(
                "{LINE_TAG} initcall fn={} start_us={} dur_us={} ret={}\n",
                c.func, c.start_us, c.dur_us, c.ret
            ),
            Message::Trace(trace::TraceLine::Mark(m)) => {
                format!("{LINE_TAG} kmark name={} t_us={}\n", m.name, m.t_us)
            }
        }
    }

    /// Decodes one line (with or without its trailing `\n`). Never panics.
    pub fn decode(line: &[u8]) -> Result<Message, ProtoError> {
        if line.len() > MAX_LINE {
            return Err(ProtoError::LineTooLong);
        }
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        if !line.iter().all(|c| (0x20..0x7f).contains(c)) {
            return Err(ProtoError::NotAscii);
        }
        let text = core::str::from_utf8(line).map_err(|_| ProtoError::NotAscii)?;
        let mut words = text.split(' ');
        if words.next() != Some(LINE_TAG) {
            return Err(ProtoError::BadTag);
        }
        let kind = words.next().unwrap_or("");
        let keys = match kind {
            "ready" => READY_KEYS,
            "nonce" => NONCE_KEYS,
            "reply" => REPLY_KEYS,
            "record" => RECORD_KEYS,
            "ksync" => KSYNC_KEYS,
            "initcall" => INITCALL_KEYS,
            "kmark" => KMARK_KEYS,
            other => return Err(ProtoError::UnknownKind(other.into())),
        };
        let mut vals: Vec<Option<&str>> = vec![None; keys.len()];
        for w in words {
            let (k, v) = w
                .split_once('=')
                .ok_or_else(|| ProtoError::MalformedField(w.into()))?;
            let i = keys
                .iter()
                .position(|key| *key == k)
                .ok_or_else(|| ProtoError::UnknownKey(k.into()))?;
            if vals[i].replace(v).is_some() {
                return Err(ProtoError::DuplicateKey(k.into()));
            }
        }
        let get = |key: &'static str| -> Result<&str, ProtoError> {
            let i = keys.iter().position(|k| *k == key).unwrap_or(usize::MAX);
            vals.get(i)
                .copied()
                .flatten()
                .ok_or(ProtoError::MissingKey(key))
        };
        let bad = |key: &'static str, value: &str| ProtoError::BadValue {
            key,
            value: value.into(),
        };
        let num = |key: &'static str| -> Result<u64, ProtoError> {
            let v = get(key)?;
            if v.is_empty() || !v.bytes().all(|c| c.is_ascii_digit()) {
                return Err(bad(key, v));
            }
            v.parse::<u64>().map_err(|_| bad(key, v))
        };
        match kind {
            "ready" => {
                let b = get("boot_id")?;
                let boot_id = BootId::parse(b).ok_or_else(|| bad("boot_id", b))?;
                Ok(Message::Ready { boot_id })
            }
            "nonce" => {
                let v = get("value")?;
                let n = unhex::<NONCE_LEN>(v).ok_or_else(|| bad("value", v))?;
                Ok(Message::Nonce(n))
            }
            "reply" => {
                let b = get("boot_id")?;
                let boot_id = BootId::parse(b).ok_or_else(|| bad("boot_id", b))?;
                let m = get("binding")?;
                let binding = unhex::<32>(m).ok_or_else(|| bad("binding", m))?;
                Ok(Message::Reply(Reply { boot_id, binding }))
            }
            "ksync" => Ok(Message::Trace(trace::TraceLine::Sync(trace::KmsgSync {
                kmsg_us: num("kmsg_us")?,
                mono_ns: num("mono_ns")?,
                records: num("records")?,
                truncated: match get("truncated")? {
                    "0" => false,
                    "1" => true,
                    v => return Err(bad("truncated", v)),
                },
            }))),
            "initcall" => {
                let f = get("fn")?;
                if !trace::valid_name(f) {
                    return Err(bad("fn", f));
                }
                let r = get("ret")?;
                let digits = r.strip_prefix('-').unwrap_or(r);
                if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
                    return Err(bad("ret", r));
                }
                let ret = r.parse::<i64>().map_err(|_| bad("ret", r))?;
                Ok(Message::Trace(trace::TraceLine::Initcall(
                    trace::Initcall {
                        func: f.to_string(),
                        start_us: num("start_us")?,
                        dur_us: num("dur_us")?,
                        ret,
                    },
                )))
            }
            "kmark" => {
                let n = get("name")?;
                if !trace::KERNEL_MARKS.iter().any(|(k, _)| *k == n) {
                    return Err(bad("name", n));
                }
                Ok(Message::Trace(trace::TraceLine::Mark(trace::KernelMark {
                    name: n.to_string(),
                    t_us: num("t_us")?,
                })))
            }
            _ => {
                let b = get("boot_id")?;
                let boot_id = if b == "none" {
                    None
                } else {
                    Some(BootId::parse(b).ok_or_else(|| bad("boot_id", b))?)
                };
                let w = get("workload")?;
                let workload = Workload::decode(w).ok_or_else(|| bad("workload", w))?;
                let c = get("code")?;
                let code = ErrorCode::ALL
                    .iter()
                    .copied()
                    .find(|x| x.name() == c)
                    .ok_or_else(|| bad("code", c))?;
                let cpus = num("cpus")?;
                let count = |key: &'static str| -> Result<u32, ProtoError> {
                    u32::try_from(num(key)?).map_err(|_| bad(key, get(key).unwrap_or("")))
                };
                let flag = |key: &'static str| -> Result<bool, ProtoError> {
                    match get(key)? {
                        "0" => Ok(false),
                        "1" => Ok(true),
                        v => Err(bad(key, v)),
                    }
                };
                let cs = get("clocksource")?;
                let clocksource = match cs {
                    "none" => None,
                    v => Some(Clocksource::parse(v).ok_or_else(|| bad("clocksource", v))?),
                };
                let platform = GuestPlatform {
                    packages: count("packages")?,
                    cores_per_package: count("cores_per_package")?,
                    threads_per_core: count("threads_per_core")?,
                    tsc_deadline_timer: flag("tsc_deadline_timer")?,
                    constant_tsc: flag("constant_tsc")?,
                    nonstop_tsc: flag("nonstop_tsc")?,
                    tsc_unstable: flag("tsc_unstable")?,
                    clocksource,
                };
                Ok(Message::Record(GuestRecord {
                    boot_id,
                    t_init_ns: num("t_init_ns")?,
                    t_ready_ns: num("t_ready_ns")?,
                    t_reply_ns: num("t_reply_ns")?,
                    t_record_ns: num("t_record_ns")?,
                    mem_configured: num("mem_configured")?,
                    mem_firmware_ram: num("mem_firmware_ram")?,
                    mem_total: num("mem_total")?,
                    mem_present: num("mem_present")?,
                    mem_managed: num("mem_managed")?,
                    mem_probe: num("mem_probe")?,
                    cpus: u32::try_from(cpus)
                        .map_err(|_| bad("cpus", get("cpus").unwrap_or("")))?,
                    platform,
                    workload,
                    code,
                }))
            }
        }
    }
}

/// Splits a byte stream from [`PORT_RECORD`](super::PORT_RECORD) into lines, bounded: a line longer than
/// [`MAX_LINE`] is reported once as [`ProtoError::LineTooLong`] and its bytes dropped
/// up to the next `\n`.
#[derive(Default, Debug)]
pub struct LineAssembler {
    buf: Vec<u8>,
    overflowed: bool,
}

impl LineAssembler {
    /// Feeds bytes; returns each complete line (without `\n`) or overflow error, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Result<Vec<u8>, ProtoError>> {
        let mut out = Vec::new();
        for &b in bytes {
            if b == b'\n' {
                if self.overflowed {
                    out.push(Err(ProtoError::LineTooLong));
                } else {
                    out.push(Ok(core::mem::take(&mut self.buf)));
                }
                self.buf.clear();
                self.overflowed = false;
            } else if self.overflowed {
                continue;
            } else if self.buf.len() + 1 >= MAX_LINE {
                self.overflowed = true;
                self.buf.clear();
            } else {
                self.buf.push(b);
            }
        }
        out
    }

    /// Bytes of an unfinished line.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}
