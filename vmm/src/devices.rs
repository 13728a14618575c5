//! Devices: the truecold ports (doorbell, challenge, record, exit), the probe's ports, an
//! 8250 serial at 0x3f8 (vm-superio; output only with `--console`), the i8042 reset line.
//! Everything else is counted and ignored. All guest input is untrusted and bounded.
use std::collections::BTreeMap;
use std::io::Write;

use kvm_ioctls::VmFd;
use serde::{Deserialize, Serialize};
use truecold_proto::measure::Stamps;
use truecold_proto::report::{Liveness, LivenessKind, ReportCore};
use truecold_proto::{
    ErrorCode, LineAssembler, Message, Phase, NONCE_LEN, PORT_CHALLENGE, PORT_DOORBELL, PORT_EXIT,
    PORT_RECORD,
};
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
    pub interrupted: u64,
    pub serial: u64,
    pub i8042: u64,
    pub truecold: u64,
    pub probe: u64,
    pub other: u64,
    pub unknown_io: u64,
    pub unknown_mmio: u64,
    /// Unknown ports, `"0x80"` → count.
    pub unknown_ports: BTreeMap<String, u64>,
    /// Unclaimed MMIO addresses (page granular, at most 64 distinct), `"0xfed00000"` → count.
    pub unknown_mmio_pages: BTreeMap<String, u64>,
}

/// All devices, behind one lock held by the vCPU threads for the span of one exit.
pub struct Bus {
    probe_guest: bool,
    serial: Serial<IrqLine, vm_superio::serial::NoEvents, Box<dyn Write + Send>>,
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
    pub liveness: Liveness,
    pub record: Option<truecold_proto::GuestRecord>,
    pub ap_checkins: Vec<probe::ApCheckin>,
    /// Every protocol error, counted; the first [`ReportCore::PROTOCOL_ERRORS_KEPT`] as text.
    pub protocol_error_count: u64,
    pub protocol_errors: Vec<String>,
    pub last_phase: Option<u8>,
}

impl Bus {
    /// Creates the devices; the serial interrupt is wired to IRQ 4 through an irqfd.
    pub fn new(vm: &VmFd, probe_guest: bool, console: bool) -> Result<Self, DeviceError> {
        let evt = EventFd::new(libc::EFD_NONBLOCK).map_err(DeviceError::EventFd)?;
        vm.register_irqfd(&evt, COM1_IRQ)
            .map_err(DeviceError::Irqfd)?;
        let out: Box<dyn Write + Send> = if console {
            Box::new(std::io::stderr())
        } else {
            Box::new(std::io::sink())
        };
        Ok(Bus {
            probe_guest,
            serial: Serial::new(IrqLine(evt), out),
            nonce: None,
            nonce_pos: 0,
            assembler: LineAssembler::default(),
            echo: Vec::new(),
            summary: Vec::new(),
            stamps: Stamps::default(),
            rss_at_strict_ready: None,
            exits: ExitCounts::default(),
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
        })
    }

    fn protocol_error(&mut self, e: String) {
        self.protocol_error_count = self.protocol_error_count.saturating_add(1);
        if self.protocol_errors.len() < ReportCore::PROTOCOL_ERRORS_KEPT {
            self.protocol_errors.push(e);
        }
    }

    fn unknown_port(&mut self, port: u16) {
        self.exits.unknown_io += 1;
        *self
            .exits
            .unknown_ports
            .entry(format!("{port:#x}"))
            .or_insert(0) += 1;
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

    /// An MMIO exit nothing claims: counted, reads return all-ones.
    pub fn mmio(&mut self, addr: u64, read: Option<&mut [u8]>) {
        self.exits.unknown_mmio += 1;
        let key = format!("{:#x}", addr & !0xfff);
        let pages = &mut self.exits.unknown_mmio_pages;
        if pages.len() < 64 || pages.contains_key(&key) {
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
                self.stamps.init_doorbell.get_or_insert(t);
            }
            Ok(Phase::Ready) => {
                if self.stamps.ready_doorbell.is_some() {
                    self.protocol_error("second Ready doorbell".into());
                    return Ok(Action::Continue);
                }
                self.stamps.ready_doorbell = Some(t);
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
                Message::Ready { .. } | Message::Nonce(_) => {
                    self.protocol_error("a serial-transport line on the record port".into());
                }
                Message::Record(r) => {
                    if self.record.is_none() {
                        self.record = Some(r);
                        self.stamps.record = Some(t);
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
