//! The guest↔host wire protocol of truecold, defined once and used by both sides:
//! `guest-init` (the guest's PID 1) encodes, the VMM (and the QEMU stand-in in tests)
//! decodes. Everything the guest sends is untrusted input for the host, so every decoder
//! here is bounded, total (never panics) and returns a typed [`ProtoError`].
//!
//! # Transport: four byte-wide I/O ports
//! | port | direction | meaning |
//! |---|---|---|
//! | [`PORT_DOORBELL`] | `outb` | a [`Phase`] code; the VMM timestamps the VM exit |
//! | [`PORT_CHALLENGE`] | `insb` ×[`NONCE_LEN`] | the host's fresh nonce, chosen after the ready doorbell |
//! | [`PORT_RECORD`] | `outsb` | newline-terminated [`Message`] lines |
//! | [`PORT_EXIT`] | `outb` | final exit code; the VM stops (QEMU `isa-debug-exit` compatible) |
//!
//! The sequence a guest follows: `Phase::InitStart` doorbell → checks → `Phase::Ready`
//! doorbell → read nonce → `reply` line (its arrival is *strict-ready*) → workload →
//! `record` line → exit port.
//!
//! # Lines
//! A line is ASCII, at most [`MAX_LINE`] bytes including the final `\n`:
//! `TC1 <kind> key=value key=value …`. Keys are `[a-z0-9_]+`, values have no spaces.
//! Unknown keys are rejected, duplicate keys are rejected, missing keys are rejected.

mod code;
mod line;
mod liveness;
mod ports;
mod record;

pub use code::{ErrorCode, Phase, ProtoError};
pub use line::{hex, unhex, LineAssembler, Message};
pub use liveness::{liveness_binding, BootId, Reply};
pub use ports::{
    LINE_TAG, MAX_LINE, NONCE_LEN, PORT_CHALLENGE, PORT_DOORBELL, PORT_EXIT, PORT_FIRST, PORT_LAST,
    PORT_RECORD,
};
pub use record::{Clocksource, GuestPlatform, GuestRecord, Workload};
