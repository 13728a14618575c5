//! The serial observer (pure): the bytes an engine writes on its stdout (its 8250) in,
//! what the bench must do out. Protocol (docs: COMMON protocol of an engines campaign):
//!
//! 1. `TC1 ready boot_id=…` → [`Action::SerialReady`] (stamp), then
//!    [`Action::WriteNonce`] (a fresh nonce, made only now, to write to the engine's stdin);
//! 2. `TC1 reply boot_id=… binding=…` that verifies against that nonce, with the ready
//!    line's boot id → [`Action::StrictReady`] (stamp; then read smaps);
//! 3. `TC1 record …` → [`Action::Record`] (stamp).
//!
//! A line that does not start with `TC1 ` is engine noise: counted, the last few kept, never
//! an error. Protocol errors (counted, the first [`ReportCore::PROTOCOL_ERRORS_KEPT`] kept as
//! text): a `TC1 ` line that does not decode (an overlong one included), a `nonce` from the
//! guest, a second `ready`/`reply`/`record`, a reply before the nonce, a reply that does not
//! verify or names another boot id than the ready line (the first reply is the answer: no
//! second chance), and an unterminated `TC1 ` line at the end of the stream.

use std::collections::VecDeque;
use truecold_proto::report::{Liveness, LivenessKind, ReportCore};
use truecold_proto::{hex, BootId, GuestRecord, LineAssembler, Message, NONCE_LEN};

/// Engine-noise lines kept (the last ones).
pub const NOISE_TAIL_LINES: usize = 16;
/// Characters kept of each noise line.
pub const NOISE_LINE_CHARS: usize = 200;

const TAG: &[u8] = b"TC1 ";

/// What the driver does, in order, for the chunk just fed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// The ready line is complete: stamp `serial_ready`.
    SerialReady,
    /// Write these bytes (the `TC1 nonce …` line) to the engine's stdin.
    WriteNonce(Vec<u8>),
    /// The verified reply is complete: stamp `strict_ready`, then read the mapping.
    StrictReady,
    /// The record is complete: stamp `record`.
    Record,
}

/// The observer's state over one launch.
#[derive(Debug, Default)]
pub struct Observer {
    lines: LineAssembler,
    /// The first bytes of the line being assembled (to tell an overlong `TC1 ` line from
    /// noise, which the assembler drops).
    prefix: Vec<u8>,
    /// Prefixes of the lines completed in the current chunk, in order.
    done: VecDeque<Vec<u8>>,
    nonce: Option<[u8; NONCE_LEN]>,
    pub ready_boot_id: Option<BootId>,
    pub liveness: Option<Liveness>,
    replied: bool,
    pub record: Option<GuestRecord>,
    pub protocol_error_count: u64,
    pub protocol_errors: Vec<String>,
    pub noise_lines: u64,
    pub noise_tail: VecDeque<String>,
}

impl Observer {
    pub fn new() -> Self {
        Self::default()
    }

    /// The challenge as it stands (kind `binding`).
    pub fn liveness(&self) -> Liveness {
        self.liveness
            .clone()
            .unwrap_or_else(|| Liveness::new(LivenessKind::Binding))
    }

    /// Strict-ready was reached.
    pub fn strict_ready(&self) -> bool {
        self.liveness.as_ref().is_some_and(|l| l.verified)
    }

    fn error(&mut self, why: String) {
        self.protocol_error_count += 1;
        if self.protocol_errors.len() < ReportCore::PROTOCOL_ERRORS_KEPT {
            self.protocol_errors.push(why);
        }
    }

    fn noise(&mut self, line: &[u8]) {
        self.noise_lines += 1;
        let text: String = String::from_utf8_lossy(line)
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(NOISE_LINE_CHARS)
            .collect();
        if self.noise_tail.len() == NOISE_TAIL_LINES {
            self.noise_tail.pop_front();
        }
        self.noise_tail.push_back(text);
    }

    /// Feeds one chunk read from the engine's stdout. `make_nonce` is called once, when the
    /// ready line completes (a fresh random nonce in the driver, a fixed one in tests).
    pub fn feed(
        &mut self,
        bytes: &[u8],
        make_nonce: &mut dyn FnMut() -> [u8; NONCE_LEN],
    ) -> Vec<Action> {
        for &b in bytes {
            if b == b'\n' {
                self.done.push_back(std::mem::take(&mut self.prefix));
            } else if self.prefix.len() < TAG.len() {
                self.prefix.push(b);
            }
        }
        let mut out = Vec::new();
        for line in self.lines.push(bytes) {
            let prefix = self.done.pop_front().unwrap_or_default();
            match line {
                Ok(l) => self.line(&l, make_nonce, &mut out),
                Err(e) if prefix.as_slice() == TAG => self.error(format!("TC1 line: {e}")),
                Err(_) => self.noise(b"<overlong line>"),
            }
        }
        out
    }

    /// The stream ended: an unfinished `TC1 ` line is a protocol error, other bytes noise.
    pub fn finish(&mut self) {
        if self.lines.pending() > 0 || !self.prefix.is_empty() {
            if self.prefix.as_slice() == TAG {
                self.error("a TC1 line without its final newline at the end of the output".into());
            } else {
                let p = std::mem::take(&mut self.prefix);
                self.noise(&p);
            }
        }
        self.prefix.clear();
        self.lines = LineAssembler::default();
    }

    fn line(
        &mut self,
        raw: &[u8],
        make_nonce: &mut dyn FnMut() -> [u8; NONCE_LEN],
        out: &mut Vec<Action>,
    ) {
        let l = raw.strip_suffix(b"\r").unwrap_or(raw);
        if !l.starts_with(TAG) {
            self.noise(l);
            return;
        }
        let msg = match Message::decode(l) {
            Ok(m) => m,
            Err(e) => return self.error(format!("TC1 line does not decode: {e}")),
        };
        match msg {
            Message::Ready { boot_id } => {
                if self.ready_boot_id.is_some() {
                    return self.error(format!("a second ready line (boot id {boot_id})"));
                }
                self.ready_boot_id = Some(boot_id);
                let nonce = make_nonce();
                self.nonce = Some(nonce);
                let mut lv = Liveness::new(LivenessKind::Binding);
                lv.nonce = Some(hex(&nonce));
                self.liveness = Some(lv);
                out.push(Action::SerialReady);
                out.push(Action::WriteNonce(
                    Message::Nonce(nonce).encode().into_bytes(),
                ));
            }
            Message::Nonce(_) => self.error("the guest sent a nonce line".into()),
            Message::Trace(_) => {
                self.error("a trace line on the serial (attribution boots use the ports)".into())
            }
            Message::Reply(r) => {
                let Some(nonce) = self.nonce else {
                    return self.error("a reply before the nonce was sent".into());
                };
                if self.replied {
                    return self.error(format!("a second reply (boot id {})", r.boot_id));
                }
                self.replied = true;
                let verified = r.verifies(&nonce);
                let same_boot = self.ready_boot_id == Some(r.boot_id);
                let lv = self
                    .liveness
                    .get_or_insert_with(|| Liveness::new(LivenessKind::Binding));
                lv.answer = Some(hex(&r.binding));
                if verified && same_boot {
                    lv.verified = true;
                    lv.reply_boot_id = Some(r.boot_id);
                    out.push(Action::StrictReady);
                } else if !verified {
                    self.error(format!(
                        "the reply (boot id {}) does not verify against the nonce",
                        r.boot_id
                    ));
                } else {
                    self.error(format!(
                        "the reply's boot id {} is not the ready line's {:?}",
                        r.boot_id,
                        self.ready_boot_id.map(|b| b.to_string())
                    ));
                }
            }
            Message::Record(rec) => {
                if self.record.is_some() {
                    return self.error("a second record".into());
                }
                self.record = Some(rec);
                out.push(Action::Record);
            }
        }
    }
}

#[cfg(test)]
mod tests;
