//! Devices: the truecold ports (doorbell, challenge, record, exit), the probe's ports, an
//! 8250 serial at 0x3f8 (vm-superio; its output goes where the boot says: nowhere, stderr
//! with `--console`, stdout under the serial transport, whose input is then stdin through
//! [`pump_input`]), the i8042 reset line. Everything else is counted and ignored. All guest
//! input is untrusted and bounded.
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::{Mutex, MutexGuard};

use kvm_ioctls::VmFd;
use serde::{Deserialize, Serialize};
use truecold_proto::kinds::Transport;
use truecold_proto::measure::Mark;
use truecold_proto::measure::Stamps;
use truecold_proto::report::{Accounting, ExitTally, Liveness, LivenessKind, ReportCore};
use truecold_proto::trace::GuestTrace;
use truecold_proto::{
    ErrorCode, LineAssembler, Message, Phase, NONCE_LEN, PORT_CHALLENGE, PORT_DOORBELL, PORT_EXIT,
    PORT_RECORD,
};
use vm_superio::serial::SerialEvents;
use vm_superio::{Serial, Trigger};
use vmm_sys_util::eventfd::EventFd;

use crate::probe;

const COM1: u16 = 0x3f8;
const COM1_IRQ: u32 = 4;
const I8042_DATA: u16 = 0x60;
const I8042_CMD: u16 = 0x64;
const I8042_RESET: u8 = 0xfe;
/// Bound on bytes kept from the probe's echo/summary ports.
const PROBE_BYTES_MAX: usize = 4096;

/// Why the devices could not be set up or a device failed.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("cannot create the serial interrupt eventfd")]
    EventFd(#[source] std::io::Error),
    #[error("cannot register the serial irqfd")]
    Irqfd(#[source] kvm_ioctls::Error),
    #[error("getrandom for the liveness nonce failed")]
    Random(#[source] std::io::Error),
    #[error("cannot take stdin as the serial's input")]
    Stdin(#[source] std::io::Error),
    #[error("cannot start the serial input thread")]
    InputThread(#[source] std::io::Error),
}

/// The serial's interrupt line: an irqfd on IRQ 4.
#[derive(Debug)]
pub struct IrqLine(EventFd);

impl Trigger for IrqLine {
    type E = std::io::Error;
    fn trigger(&self) -> Result<(), Self::E> {
        self.0.write(1)
    }
}

/// The serial's events: an eventfd written each time the guest empties the receive FIFO,
/// which [`pump_input`] waits on to refill it.
#[derive(Debug)]
pub struct InputDrained(EventFd);

impl SerialEvents for InputDrained {
    fn buffer_read(&self) {}
    fn out_byte(&self) {}
    fn tx_lost_byte(&self) {}
    fn in_buffer_empty(&self) {
        // An eventfd write fails only when the counter would overflow u64; the pump reads
        // (resets) it at every wake-up, and it also retries on its own after RETRY_MS.
        let _ = self.0.write(1);
    }
}

/// The serial's output under the serial transport: whole lines to `W` (stdout). The 8250
/// model writes and flushes every byte; this writer hands each line to `W` in one write
/// and flushes `W` when the line's `\n` arrives (or when [`LINE_OUT_MAX`] bytes wait), so
/// the reader gets each line at once, one write per line. A partial line left at the end is
/// written when the writer is dropped (the bus is dropped when the run is over).
pub struct LineOut<W: Write> {
    inner: W,
    line: Vec<u8>,
}

/// Longest run of bytes [`LineOut`] holds back waiting for a `\n`.
pub const LINE_OUT_MAX: usize = 4096;

impl<W: Write> LineOut<W> {
    pub fn new(inner: W) -> Self {
        LineOut {
            inner,
            line: Vec::new(),
        }
    }

    fn emit(&mut self) -> std::io::Result<()> {
        let r = self
            .inner
            .write_all(&self.line)
            .and_then(|()| self.inner.flush());
        self.line.clear();
        r
    }
}

impl<W: Write> Write for LineOut<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.line.extend_from_slice(buf);
        if buf.contains(&b'\n') || self.line.len() >= LINE_OUT_MAX {
            self.emit()?;
        }
        Ok(buf.len())
    }

    /// A no-op: a line reaches `W` (flushed) when it ends; the 8250 model's flush after
    /// every byte must not turn each byte into a write.
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<W: Write> Drop for LineOut<W> {
    fn drop(&mut self) {
        if !self.line.is_empty() {
            // Nothing is left to report a failure to: the run is over.
            let _ = self.emit();
        }
    }
}

/// Why the VM stopped (decided by a device or the run loop).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// The guest wrote this code to `PORT_EXIT`.
    ExitPort(u8),
    /// The guest pulsed the reset line through the i8042 (0xfe to port 0x64).
    Reset,
    /// Triple fault on this vCPU.
    Shutdown(usize),
    /// KVM_EXIT_SYSTEM_EVENT of this type.
    SystemEvent(u32),
}

/// What a device asks of the vCPU loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Continue,
    Stop(StopReason),
}

/// VM exits seen, by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitCounts {
    pub io_in: u64,
    pub io_out: u64,
    pub mmio_read: u64,
    pub mmio_write: u64,
    pub hlt: u64,
    /// `KVM_EXIT_SHUTDOWN` (a triple fault, which ends the run).
    #[serde(default)]
    pub shutdown: u64,
    /// `KVM_EXIT_SYSTEM_EVENT` (ends the run).
    #[serde(default)]
    pub system_event: u64,
    /// `KVM_RUN` returned EINTR/EAGAIN (the VMM's own kick): not a VM exit.
    pub interrupted: u64,
    pub serial: u64,
    pub i8042: u64,
    pub truecold: u64,
    pub probe: u64,
    pub other: u64,
    pub unknown_io: u64,
    pub unknown_mmio: u64,
    /// Unknown ports (at most [`ExitCounts::DISTINCT_KEPT`] distinct; `unknown_io` counts
    /// them all), `"0x80"` → count.
    pub unknown_ports: BTreeMap<String, u64>,
    /// Unclaimed MMIO addresses (page granular, at most [`ExitCounts::DISTINCT_KEPT`]
    /// distinct; `unknown_mmio` counts them all), `"0xfed00000"` → count.
    pub unknown_mmio_pages: BTreeMap<String, u64>,
}

impl ExitCounts {
    /// Most distinct unknown ports, and unclaimed MMIO pages, the counts keep by name: a
    /// guest sweeping every port or page must not grow the report without bound.
    pub const DISTINCT_KEPT: usize = 64;

    /// By reason, as the per-stage accounting counts them (`ExitTally`).
    pub fn tally(&self) -> ExitTally {
        ExitTally {
            io_in: self.io_in,
            io_out: self.io_out,
            mmio: self.mmio_read.saturating_add(self.mmio_write),
            hlt: self.hlt,
            shutdown: self.shutdown,
            other: self.other.saturating_add(self.system_event),
        }
    }
}

/// All devices, behind one lock held by the vCPU threads for the span of one exit.
pub struct Bus {
    probe_guest: bool,
    transport: Transport,
    serial: Serial<IrqLine, InputDrained, Box<dyn Write + Send>>,
    nonce: Option<[u8; NONCE_LEN]>,
    nonce_pos: usize,
    assembler: LineAssembler,
    echo: Vec<u8>,
    summary: Vec<u8>,
    /// The VM-exit marks (init and ready doorbells, strict-ready, record); the others stay
    /// empty here.
    pub stamps: Stamps,
    /// VmRSS of this process read right after the strict-ready stamp.
    pub rss_at_strict_ready: Option<u64>,
    pub exits: ExitCounts,
    /// The counters at each VM-exit mark (and `first_run`, `exit`), read right after the stamp.
    pub accounting: Accounting,
    /// An attribution boot's kernel-log trace lines (after the record).
    pub trace: Option<GuestTrace>,
    pub liveness: Liveness,
    pub record: Option<truecold_proto::GuestRecord>,
    pub ap_checkins: Vec<probe::ApCheckin>,
    /// Every protocol error, counted; the first [`ReportCore::PROTOCOL_ERRORS_KEPT`] as text.
    pub protocol_error_count: u64,
    pub protocol_errors: Vec<String>,
    pub last_phase: Option<u8>,
    /// Whether the Ready doorbell had rung when the guest first wrote the exit port.
    pub exit_after_ready: Option<bool>,
    /// The virtio devices' MMIO windows (none without the parity devices).
    virtio: crate::virtio::thread::MmioWindows,
}

impl Bus {
    /// Creates the devices; the serial interrupt is wired to IRQ 4 through an irqfd, the
    /// serial's output goes to `serial_out`. Under [`Transport::Serial`] there is no port
    /// challenge: the guest's `TC1` lines cross the serial and the bench reads them.
    pub fn new(
        vm: &VmFd,
        probe_guest: bool,
        transport: Transport,
        serial_out: Box<dyn Write + Send>,
    ) -> Result<Self, DeviceError> {
        let evt = EventFd::new(libc::EFD_NONBLOCK).map_err(DeviceError::EventFd)?;
        vm.register_irqfd(&evt, COM1_IRQ)
            .map_err(DeviceError::Irqfd)?;
        let drained = EventFd::new(libc::EFD_NONBLOCK).map_err(DeviceError::EventFd)?;
        Ok(Bus {
            probe_guest,
            transport,
            serial: Serial::with_events(IrqLine(evt), InputDrained(drained), serial_out),
            nonce: None,
            nonce_pos: 0,
            assembler: LineAssembler::default(),
            echo: Vec::new(),
            summary: Vec::new(),
            stamps: Stamps::default(),
            rss_at_strict_ready: None,
            exits: ExitCounts::default(),
            accounting: Accounting::default(),
            trace: None,
            liveness: Liveness::new(if probe_guest {
                LivenessKind::ProbeEcho
            } else {
                LivenessKind::Binding
            }),
            record: None,
            ap_checkins: Vec::new(),
            protocol_error_count: 0,
            protocol_errors: Vec::new(),
            last_phase: None,
            exit_after_ready: None,
            virtio: Default::default(),
        })
    }

    /// The transport the guest uses.
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// Routes the virtio devices' MMIO windows to their transports.
    pub fn set_virtio(&mut self, w: crate::virtio::thread::MmioWindows) {
        self.virtio = w;
    }

    /// Whether the bench, not the VMM, makes the challenge and reads the record (the
    /// serial and vsock transports): then the challenge and record ports are protocol
    /// errors.
    fn bench_observes(&self) -> bool {
        matches!(self.transport, Transport::Serial | Transport::Vsock)
    }

    /// Puts host bytes into the serial's receive FIFO (raising its interrupt); returns how
    /// many it took: 0 when the FIFO is full (the caller keeps the rest for later).
    pub fn serial_input(&mut self, bytes: &[u8]) -> usize {
        let room = self.serial.fifo_capacity().min(bytes.len());
        match self.serial.enqueue_raw_bytes(&bytes[..room]) {
            Ok(n) => n,
            // Full (nothing taken).
            Err(vm_superio::serial::Error::FullFifo) => 0,
            // The bytes were queued; only the interrupt failed.
            Err(e) => {
                self.protocol_error(format!("serial input: {e:?}"));
                room
            }
        }
    }

    /// Free bytes in the serial's receive FIFO.
    pub fn serial_input_room(&self) -> usize {
        self.serial.fifo_capacity()
    }

    /// An eventfd written each time the guest empties the receive FIFO (a duplicate of the
    /// serial's).
    pub fn input_drained(&self) -> Result<EventFd, DeviceError> {
        self.serial
            .events()
            .0
            .try_clone()
            .map_err(DeviceError::EventFd)
    }

    fn protocol_error(&mut self, e: String) {
        self.protocol_error_count = self.protocol_error_count.saturating_add(1);
        if self.protocol_errors.len() < ReportCore::PROTOCOL_ERRORS_KEPT {
            self.protocol_errors.push(e);
        }
    }

    fn unknown_port(&mut self, port: u16) {
        self.exits.unknown_io += 1;
        let key = format!("{port:#x}");
        let ports = &mut self.exits.unknown_ports;
        if ports.len() < ExitCounts::DISTINCT_KEPT || ports.contains_key(&key) {
            *ports.entry(key).or_insert(0) += 1;
        }
    }

    /// Samples the process's counters for mark `m` (after its stamp, so the read never
    /// delays it).
    pub fn sample(&mut self, m: Mark) {
        let c = crate::host::counters(self.exits.tally());
        self.accounting.take(m, c);
    }

    /// The probe's summary bytes so far.
    pub fn probe_summary_bytes(&self) -> &[u8] {
        &self.summary
    }

    /// An `out`/`outs` exit at time `t` (ns) from vCPU `vcpu`.
    pub fn io_out(
        &mut self,
        vcpu: usize,
        port: u16,
        data: &[u8],
        t: u64,
    ) -> Result<Action, DeviceError> {
        self.exits.io_out += 1;
        match port {
            PORT_DOORBELL => {
                self.exits.truecold += 1;
                return self.doorbell(data, t);
            }
            PORT_RECORD => {
                self.exits.truecold += 1;
                self.record_bytes(data, t);
            }
            PORT_EXIT => {
                self.exits.truecold += 1;
                self.exit_after_ready
                    .get_or_insert(self.stamps.ready_doorbell.is_some());
                let code = data.first().copied().unwrap_or(0xff);
                return Ok(Action::Stop(StopReason::ExitPort(code)));
            }
            PORT_CHALLENGE => {
                self.exits.truecold += 1;
                self.protocol_error("write to the challenge port".into());
            }
            COM1..=0x3ff => {
                self.exits.serial += 1;
                for b in data {
                    if let Err(e) = self.serial.write((port - COM1) as u8, *b) {
                        self.protocol_error(format!("serial: {e:?}"));
                    }
                }
            }
            I8042_CMD => {
                self.exits.i8042 += 1;
                if data.first() == Some(&I8042_RESET) {
                    return Ok(Action::Stop(StopReason::Reset));
                }
            }
            I8042_DATA => self.exits.i8042 += 1,
            probe::PORT_AP if self.probe_guest => {
                self.exits.probe += 1;
                let apic_id = data.first().copied().unwrap_or(0xff);
                if self.ap_checkins.len() < 256 {
                    self.ap_checkins.push(probe::ApCheckin { vcpu, apic_id });
                }
            }
            probe::PORT_ECHO if self.probe_guest => {
                self.exits.probe += 1;
                self.echo_bytes(data, t);
            }
            probe::PORT_SUMMARY if self.probe_guest => {
                self.exits.probe += 1;
                let room = PROBE_BYTES_MAX.saturating_sub(self.summary.len());
                self.summary
                    .extend_from_slice(&data[..data.len().min(room)]);
                if self.summary.len() >= probe::SUMMARY_LEN && self.stamps.record.is_none() {
                    self.stamps.record = Some(t);
                    self.sample(Mark::Record);
                }
            }
            _ => self.unknown_port(port),
        }
        Ok(Action::Continue)
    }

    /// An `in`/`ins` exit from vCPU `vcpu`.
    pub fn io_in(&mut self, _vcpu: usize, port: u16, data: &mut [u8]) -> Action {
        self.exits.io_in += 1;
        match port {
            PORT_CHALLENGE if self.bench_observes() => {
                self.exits.truecold += 1;
                data.fill(0);
                self.protocol_error(format!(
                    "challenge port read under the {} transport",
                    self.transport.as_str()
                ));
            }
            PORT_CHALLENGE => {
                self.exits.truecold += 1;
                match self.nonce {
                    Some(n) => {
                        for b in data.iter_mut() {
                            *b = n.get(self.nonce_pos).copied().unwrap_or(0);
                            self.nonce_pos = self.nonce_pos.saturating_add(1);
                        }
                    }
                    None => {
                        data.fill(0);
                        self.protocol_error("challenge read before the Ready doorbell".into());
                    }
                }
            }
            PORT_DOORBELL | PORT_RECORD | PORT_EXIT => {
                self.exits.truecold += 1;
                data.fill(0);
            }
            COM1..=0x3ff => {
                self.exits.serial += 1;
                for b in data.iter_mut() {
                    *b = self.serial.read((port - COM1) as u8);
                }
            }
            I8042_CMD | I8042_DATA => {
                self.exits.i8042 += 1;
                data.fill(0);
            }
            _ => {
                self.unknown_port(port);
                data.fill(0xff);
            }
        }
        Action::Continue
    }

    /// An MMIO read: a virtio window's register, else unclaimed (see [`Bus::mmio`]).
    pub fn mmio_read(&mut self, addr: u64, data: &mut [u8]) {
        if self.virtio.read(addr, data) {
            self.exits.mmio_read += 1;
        } else {
            self.mmio(addr, Some(data));
        }
    }

    /// An MMIO write: a virtio window's register, else unclaimed (see [`Bus::mmio`]).
    pub fn mmio_write(&mut self, addr: u64, data: &[u8]) {
        if self.virtio.write(addr, data) {
            self.exits.mmio_write += 1;
        } else {
            self.mmio(addr, None);
        }
    }

    /// An MMIO exit nothing claims: counted, reads return all-ones.
    pub fn mmio(&mut self, addr: u64, read: Option<&mut [u8]>) {
        self.exits.unknown_mmio += 1;
        let key = format!("{:#x}", addr & !0xfff);
        let pages = &mut self.exits.unknown_mmio_pages;
        if pages.len() < ExitCounts::DISTINCT_KEPT || pages.contains_key(&key) {
            *pages.entry(key).or_insert(0) += 1;
        }
        match read {
            Some(d) => {
                self.exits.mmio_read += 1;
                d.fill(0xff);
            }
            None => self.exits.mmio_write += 1,
        }
    }

    fn doorbell(&mut self, data: &[u8], t: u64) -> Result<Action, DeviceError> {
        let [b] = data else {
            self.protocol_error(format!("doorbell write of {} bytes", data.len()));
            return Ok(Action::Continue);
        };
        self.last_phase = Some(*b);
        match Phase::from_byte(*b) {
            Ok(Phase::InitStart) => {
                if self.stamps.ready_doorbell.is_some() {
                    self.protocol_error("InitStart doorbell after the Ready doorbell".into());
                } else if self.stamps.init_doorbell.is_none() {
                    self.stamps.init_doorbell = Some(t);
                    self.sample(Mark::InitDoorbell);
                }
            }
            Ok(Phase::Ready) => {
                if self.stamps.ready_doorbell.is_some() {
                    self.protocol_error("second Ready doorbell".into());
                    return Ok(Action::Continue);
                }
                if self.stamps.init_doorbell.is_none() {
                    // Still answered (the guest's timeline just lacks its init mark), but a
                    // guest that skips a step is not clean.
                    self.protocol_error("Ready doorbell before the InitStart doorbell".into());
                }
                self.stamps.ready_doorbell = Some(t);
                self.sample(Mark::ReadyDoorbell);
                if self.bench_observes() {
                    // The bench makes the nonce and sends it (serial, vsock).
                    return Ok(Action::Continue);
                }
                let n = fresh_nonce()?;
                self.liveness.nonce = Some(truecold_proto::hex(&n));
                self.nonce = Some(n);
                self.nonce_pos = 0;
            }
            Err(e) => self.protocol_error(e.to_string()),
        }
        Ok(Action::Continue)
    }

    fn record_bytes(&mut self, data: &[u8], t: u64) {
        if self.bench_observes() {
            // Each line (or overlong fragment) on the record port is one error.
            for _ in self.assembler.push(data) {
                self.protocol_error(format!(
                    "a line on the record port under the {} transport",
                    self.transport.as_str()
                ));
            }
            return;
        }
        for line in self.assembler.push(data) {
            let msg = match line.and_then(|l| Message::decode(&l)) {
                Ok(m) => m,
                Err(e) => {
                    self.protocol_error(format!("record port: {e}"));
                    continue;
                }
            };
            match msg {
                Message::Reply(r) => {
                    if self.liveness.verified {
                        // Only the verified reply's boot id and binding are kept.
                        self.protocol_error("a reply after the verified one".into());
                        continue;
                    }
                    self.liveness
                        .answer
                        .get_or_insert_with(|| truecold_proto::hex(&r.binding));
                    match self.nonce {
                        Some(n) if r.verifies(&n) => {
                            self.liveness.reply_boot_id = Some(r.boot_id);
                            self.liveness.answer = Some(truecold_proto::hex(&r.binding));
                            self.strict_ready(t);
                        }
                        Some(_) => self.protocol_error("reply binding does not verify".into()),
                        None => self.protocol_error("reply before the Ready doorbell".into()),
                    }
                }
                Message::Trace(l) => {
                    if let Err(e) = self.trace.get_or_insert_with(GuestTrace::default).push(l) {
                        self.protocol_error(format!("record port: {e}"));
                    }
                }
                Message::Ready { .. } | Message::Nonce(_) => {
                    self.protocol_error("a serial-transport line on the record port".into());
                }
                Message::Record(r) if r.code == ErrorCode::Ok && !self.liveness.verified => {
                    // The workload runs after strict-ready: a record that claims success
                    // before the verified reply is a lie, and is not kept. (A failing
                    // guest's record may come first: it never reached ready.)
                    self.protocol_error("a success record before the verified reply".into());
                }
                Message::Record(r) => {
                    if self.record.is_none() {
                        self.record = Some(r);
                        self.stamps.record = Some(t);
                        self.sample(Mark::Record);
                    } else {
                        self.protocol_error("second record".into());
                    }
                }
            }
        }
    }

    /// The liveness answer verified at `t`: strict-ready. The RSS read comes after the
    /// stamp, so it never delays it.
    fn strict_ready(&mut self, t: u64) {
        self.liveness.verified = true;
        self.stamps.strict_ready = Some(t);
        self.sample(Mark::StrictReady);
        self.rss_at_strict_ready = crate::host::self_rss();
    }

    fn echo_bytes(&mut self, data: &[u8], t: u64) {
        let room = PROBE_BYTES_MAX.saturating_sub(self.echo.len());
        self.echo.extend_from_slice(&data[..data.len().min(room)]);
        if self.echo.len() < NONCE_LEN || self.liveness.answer.is_some() {
            return;
        }
        let echoed = &self.echo[..NONCE_LEN];
        self.liveness.answer = Some(truecold_proto::hex(echoed));
        match self.nonce {
            Some(n) if n[..] == *echoed => self.strict_ready(t),
            Some(_) => self.protocol_error("probe echo does not match the nonce".into()),
            None => self.protocol_error("probe echo before the Ready doorbell".into()),
        }
    }

    /// The guest's exit code name, if it is a known [`ErrorCode`].
    pub fn code_name(code: u8) -> String {
        ErrorCode::from_byte(code)
            .map(|c| c.name().to_string())
            .unwrap_or_else(|_| format!("unknown-{code}"))
    }
}

/// Locks the bus. A poisoned lock means a thread holding it panicked; the bus is still
/// consistent enough to report, and that thread's failure is reported separately.
pub fn lock(bus: &Mutex<Bus>) -> MutexGuard<'_, Bus> {
    bus.lock().unwrap_or_else(|p| p.into_inner())
}

/// How the serial's input ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputEnd {
    /// The input reached end of file and every byte read was delivered.
    Eof,
    /// The run ended first.
    Stopped,
    /// Reading the input (or waiting on it) failed.
    Error(String),
}

/// What [`pump_input`] did (the report's `serial_input`): `read - delivered` bytes were read
/// but never reached the guest's FIFO (the run ended first).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SerialInput {
    /// Bytes read from the input.
    pub read: u64,
    /// Bytes put into the serial's receive FIFO.
    pub delivered: u64,
    pub end: InputEnd,
}

/// While the FIFO is full the pump waits for the guest to empty it, and retries on its own
/// this often (a guest that drains it without the "empty" event, e.g. in loopback mode).
const RETRY_MS: i32 = 10;

/// Waits until one of `fds` is readable or hung up, at most `timeout_ms` (-1: no limit);
/// returns which of them are.
fn wait(fds: &[RawFd], timeout_ms: i32) -> std::io::Result<Vec<bool>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        // SAFETY: `pfds` is a live array of `pfds.len()` pollfd structs, valid for the call.
        let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
        if r >= 0 {
            return Ok(pfds.iter().map(|p| p.revents != 0).collect());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Feeds `input` (stdin under the serial transport) into the bus's serial until end of file,
/// a read error or `stop`: each chunk read goes into the receive FIFO under the bus lock;
/// what does not fit waits, outside the lock, until the guest empties the FIFO (`drained`,
/// from [`Bus::input_drained`]), and is never dropped. After end of file the bytes already
/// read are still delivered.
pub fn pump_input<R: Read + AsFd>(
    bus: &Mutex<Bus>,
    input: &mut R,
    drained: &EventFd,
    stop: &EventFd,
) -> SerialInput {
    let mut st = SerialInput {
        read: 0,
        delivered: 0,
        end: InputEnd::Stopped,
    };
    let (input_fd, drained_fd, stop_fd) = (
        input.as_fd().as_raw_fd(),
        drained.as_raw_fd(),
        stop.as_raw_fd(),
    );
    let mut buf = [0u8; 4096];
    loop {
        match wait(&[input_fd, stop_fd], -1) {
            Ok(ready) if ready[1] => return st,
            Ok(_) => {}
            Err(e) => {
                st.end = InputEnd::Error(format!("poll: {e}"));
                return st;
            }
        }
        let n = match input.read(&mut buf) {
            Ok(0) => {
                st.end = InputEnd::Eof;
                return st;
            }
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
                ) =>
            {
                continue
            }
            Err(e) => {
                st.end = InputEnd::Error(format!("read: {e}"));
                return st;
            }
        };
        st.read += n as u64;
        let mut rest = &buf[..n];
        loop {
            let took = lock(bus).serial_input(rest);
            st.delivered += took as u64;
            rest = &rest[took..];
            if rest.is_empty() {
                break;
            }
            match wait(&[drained_fd, stop_fd], RETRY_MS) {
                Ok(ready) if ready[1] => return st,
                Ok(ready) if ready[0] => {
                    // Reset the counter: the next drain after this refill signals again.
                    let _ = drained.read();
                }
                Ok(_) => {}
                Err(e) => {
                    st.end = InputEnd::Error(format!("poll: {e}"));
                    return st;
                }
            }
        }
    }
}

/// Runs `f` (the vCPUs) while a thread feeds stdin into the bus's serial ([`pump_input`]);
/// when `f` returns, the thread is stopped and joined. Returns `f`'s result and what the
/// input thread did.
pub fn with_stdin_input<T>(
    bus: &Mutex<Bus>,
    f: impl FnOnce() -> T,
) -> Result<(T, SerialInput), DeviceError> {
    let mut stdin = std::fs::File::from(
        std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .map_err(DeviceError::Stdin)?,
    );
    let drained = lock(bus).input_drained()?;
    let stop = EventFd::new(libc::EFD_NONBLOCK).map_err(DeviceError::EventFd)?;
    std::thread::scope(|s| {
        let pump = std::thread::Builder::new()
            .name("serial-in".into())
            .spawn_scoped(s, || pump_input(bus, &mut stdin, &drained, &stop))
            .map_err(DeviceError::InputThread)?;
        let out = f();
        // The counter starts at 0 and is written once: this write cannot overflow it.
        let _ = stop.write(1);
        let input = pump.join().unwrap_or_else(|_| SerialInput {
            read: 0,
            delivered: 0,
            end: InputEnd::Error("the input thread panicked".into()),
        });
        Ok((out, input))
    })
}

/// 16 fresh random bytes from getrandom(2).
pub fn fresh_nonce() -> Result<[u8; NONCE_LEN], DeviceError> {
    let mut n = [0u8; NONCE_LEN];
    let mut got = 0;
    while got < NONCE_LEN {
        // SAFETY: writes at most NONCE_LEN - got bytes into `n` starting at offset `got`.
        let r = unsafe { libc::getrandom(n[got..].as_mut_ptr().cast(), NONCE_LEN - got, 0) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(DeviceError::Random(e));
        }
        got += r as usize;
    }
    Ok(n)
}
