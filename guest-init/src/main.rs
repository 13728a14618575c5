//! `truecold-init`: the guest's PID 1. Rings `InitStart`, mounts, reads the command line and
//! the boot id, verifies memory under the engine's layout, mounts the workspace disk
//! (`truecold.workspace=1`), brings networking up (and listens for the TCP proof when
//! `truecold.net` is given), rings `Ready`, answers the host's liveness challenge
//! (strict-ready) on the transport the command line names (truecold's ports, or `TC1` lines
//! on ttyS0 or on an AF_VSOCK stream), answers the TCP proof, runs the workloads, sends one
//! record on that transport, writes the exit code and stops the VM. Every step is one
//! function; every failure has its own [`ErrorCode`]; on any failure the record is still
//! sent, so the host never waits on a silent guest.

mod error;
mod memory;
mod net;
mod ports;
mod serial;
mod sys;
mod vsock;
mod workload;
mod workspace;

use error::InitError;
use ports::Ports;
use serial::Serial;
use std::io::Write;
use std::sync::OnceLock;
use truecold_init::exchange::{tcp_listen, tcp_proof, TCP_WAIT};
use truecold_init::{parse_cpu_count, transport_hint};
use truecold_proto::kinds::Transport;
use truecold_proto::{
    BootId, ErrorCode, GuestConfig, GuestFault, GuestRecord, Message, Phase, Reply, Workload,
};
use vsock::Vsock;

/// The transport, once the command line is read (the panic hook stops the VM by it).
static TRANSPORT: OnceLock<Transport> = OnceLock::new();
/// `truecold.attribution=1`: send the kernel-log trace after the record.
static ATTRIBUTION: OnceLock<bool> = OnceLock::new();

fn main() {
    let t_init_ns = sys::monotonic_ns();
    let ports = Ports::open();
    if let Ok(p) = ports {
        p.doorbell(Phase::InitStart);
    }
    // A panic from here on reaches the host as its own error kind (code `panic`, row kind
    // `guest_panic`): the hook writes the code to the exit port before it stops the VM (a
    // reset under the serial transport; no record follows).
    let exit_port = ports.as_ref().ok().copied();
    truecold_init::panic::install(exit_port.map(|p| move |code| p.exit(code)), || {
        sys::stop(TRANSPORT.get().copied())
    });
    let mut rec = GuestRecord {
        boot_id: None,
        t_init_ns,
        t_ready_ns: 0,
        t_reply_ns: 0,
        t_record_ns: 0,
        mem_configured: 0,
        mem_firmware_ram: 0,
        mem_total: 0,
        mem_present: 0,
        mem_managed: 0,
        mem_probe: 0,
        cpus: 0,
        platform: Default::default(),
        workload: Workload::NotRun,
        code: ErrorCode::Ok,
    };
    match ports {
        Ok(p) => {
            let mut agent = None;
            if let Err(e) = boot(p, &mut agent, &mut rec) {
                report(&e);
                rec.code = e.code();
            }
            // After the workload, outside the measured window; informational for the guest,
            // checked by the host against the configured topology.
            rec.platform = truecold_init::platform::read();
            finish(p, agent, rec);
        }
        // Without the ports nothing can reach the host; the console may still show it.
        Err(e) => report(&e),
    }
    sys::stop(TRANSPORT.get().copied());
}

/// The agent channel once open: ttyS0 (serial transport) or the AF_VSOCK stream (vsock).
enum Agent {
    Serial(Serial),
    Vsock(Vsock),
}

impl Agent {
    /// Opens the channel of `t`; `None` under the ports transport (nothing to open).
    fn open(t: Transport) -> Option<Result<Agent, InitError>> {
        match t {
            Transport::Ports => None,
            Transport::Serial => Some(Serial::open().map(Agent::Serial)),
            Transport::Vsock => Some(Vsock::connect().map(Agent::Vsock)),
        }
    }

    fn send(&mut self, msg: &Message) -> Result<(), InitError> {
        match self {
            Agent::Serial(s) => s.send(msg),
            Agent::Vsock(v) => v.send(msg),
        }
    }

    /// One bounded line that must be the nonce; the reply bound to it and `boot_id`.
    fn answer(&mut self, boot_id: BootId) -> Result<(), InitError> {
        match self {
            Agent::Serial(s) => s.answer(boot_id).map(drop),
            Agent::Vsock(v) => v.answer(boot_id).map(drop),
        }
    }

    /// After the record: ttyS0 is drained already; the vsock stream is shut down and
    /// drained ([`Vsock::drain`]).
    fn close(self) {
        match self {
            Agent::Serial(_) => {}
            Agent::Vsock(v) => v.drain(),
        }
    }
}

/// The steps up to and including the workloads. Fills `rec` as it goes; `agent` is the
/// agent channel once the serial or vsock transport opened it.
fn boot(p: Ports, agent: &mut Option<Agent>, rec: &mut GuestRecord) -> Result<(), InitError> {
    mount_filesystems()?;
    let cfg = read_config()?;
    match cfg.fault {
        None => {}
        Some(GuestFault::Panic) => panic!("truecold.fault=panic: the injected PID 1 panic"),
        // PID 1 exiting is a kernel panic ("Attempted to kill init").
        Some(GuestFault::Exit) => std::process::exit(3),
    }
    rec.mem_configured = cfg.mem;
    let boot_id = read_boot_id()?;
    rec.boot_id = Some(boot_id);
    rec.cpus = count_cpus();
    let mut figures = memory::MemFigures::default();
    let checked = memory::verify(cfg.engine, cfg.ram_layout, cfg.mem, cfg.probe, &mut figures);
    rec.mem_firmware_ram = figures.firmware_ram;
    rec.mem_total = figures.mem_total;
    rec.mem_present = figures.present;
    rec.mem_managed = figures.managed;
    rec.mem_probe = figures.probe;
    checked?;
    if cfg.workspace {
        workspace::mount()?;
    }
    // The TCP proof runs whenever `truecold.net` gives an address, under every transport:
    // bound before Ready, answered after the agent channel's reply.
    let listener = net::bring_up(cfg.net.as_deref())?
        .map(|addr| tcp_listen(addr).map_err(InitError::Tcp))
        .transpose()?;
    rec.t_ready_ns = sys::monotonic_ns();
    p.doorbell(Phase::Ready);
    answer_challenge(p, cfg.transport, agent, boot_id)?;
    rec.t_reply_ns = sys::monotonic_ns();
    if let Some(l) = listener {
        tcp_proof(&l, boot_id, TCP_WAIT).map_err(InitError::Tcp)?;
    }
    let mut ran = workload::run();
    if ran.is_ok() && cfg.workspace {
        ran = workload::run_workspace(boot_id);
    }
    match ran {
        Ok(()) => rec.workload = Workload::BenchOk,
        Err(e) => {
            rec.workload = Workload::Failed(e.code());
            return Err(e);
        }
    }
    Ok(())
}

/// proc, sysfs and devtmpfs, each with its own code.
fn mount_filesystems() -> Result<(), InitError> {
    let nodev = libc::MS_NOSUID | libc::MS_NOEXEC | libc::MS_NODEV;
    for (fstype, target, flags, code) in [
        ("proc", "/proc", nodev, ErrorCode::MountProc),
        ("sysfs", "/sys", nodev, ErrorCode::MountSys),
        ("devtmpfs", "/dev", libc::MS_NOSUID, ErrorCode::MountDev),
    ] {
        match sys::mount(fstype, target, flags) {
            Ok(()) => {}
            // The kernel may have mounted devtmpfs already (DEVTMPFS_MOUNT).
            Err(e) if fstype == "devtmpfs" && e.raw_os_error() == Some(libc::EBUSY) => {}
            Err(source) => {
                return Err(InitError::Mount {
                    code,
                    fstype,
                    target,
                    source,
                })
            }
        }
    }
    Ok(())
}

/// The kernel's boot id, validated as a UUID.
fn read_boot_id() -> Result<BootId, InitError> {
    let path = "/proc/sys/kernel/random/boot_id";
    let text = std::fs::read_to_string(path).map_err(|source| InitError::Read {
        code: ErrorCode::BootId,
        path: path.into(),
        source,
    })?;
    BootId::parse(&text).ok_or_else(|| InitError::BadBootId(text.trim_end().into()))
}

/// `truecold.*` from `/proc/cmdline`; sets [`TRANSPORT`] (when the line does not parse, to
/// [`transport_hint`]'s, so that the failure's record goes where the host listens).
fn read_config() -> Result<GuestConfig, InitError> {
    let path = "/proc/cmdline";
    let text = std::fs::read_to_string(path).map_err(|source| InitError::Read {
        code: ErrorCode::Cmdline,
        path: path.into(),
        source,
    })?;
    let parsed = GuestConfig::from_cmdline(&text);
    let transport = parsed
        .as_ref()
        .map_or_else(|_| transport_hint(&text), |c| c.transport);
    let _ = TRANSPORT.set(transport);
    let _ = ATTRIBUTION.set(parsed.as_ref().is_ok_and(|c| c.attribution));
    parsed.map_err(InitError::Cmdline)
}

/// Online CPUs; 0 when the list cannot be read (informational, not a check).
fn count_cpus() -> u32 {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|t| parse_cpu_count(&t).ok())
        .unwrap_or(0)
}

/// After the `Ready` doorbell: gets the host's nonce and sends the reply line. Ports: the
/// nonce by `rep insb`, the reply by `rep outsb`. Serial / vsock: open the agent channel
/// (ttyS0 raw / connect AF_VSOCK to the host), the `ready` line, one bounded line that must
/// be the `nonce`, the `reply` line.
fn answer_challenge(
    p: Ports,
    transport: Transport,
    agent: &mut Option<Agent>,
    boot_id: BootId,
) -> Result<(), InitError> {
    match Agent::open(transport) {
        None => {
            let nonce = p.nonce();
            p.send(
                Message::Reply(Reply::new(&nonce, boot_id))
                    .encode()
                    .as_bytes(),
            );
        }
        Some(opened) => {
            let a = agent.insert(opened?);
            a.send(&Message::Ready { boot_id })?;
            a.answer(boot_id)?;
        }
    }
    Ok(())
}

/// Sends the record on the transport (ports when it is not known) and writes the exit code.
/// Under the serial and vsock transports the agent channel is opened here if the boot failed
/// before it was; if it cannot be, the exit code is all the host gets.
fn finish(p: Ports, agent: Option<Agent>, mut rec: GuestRecord) {
    rec.t_record_ns = sys::monotonic_ns();
    let code = rec.code as u8;
    let line = Message::Record(rec);
    let transport = TRANSPORT.get().copied().unwrap_or_default();
    match agent.map(Ok).or_else(|| Agent::open(transport)) {
        None => {
            p.send(line.encode().as_bytes());
            // An attribution boot (never a measured row): the trace goes after the record,
            // outside every measured stage.
            if ATTRIBUTION.get() == Some(&true) {
                for l in kernel_trace() {
                    p.send(Message::Trace(l).encode().as_bytes());
                }
            }
        }
        Some(Ok(mut a)) => {
            if let Err(e) = a.send(&line) {
                report(&e);
            }
            a.close();
        }
        Some(Err(e)) => report(&e),
    }
    p.exit(code);
}

/// The attribution trace: writes the sync line to `/dev/kmsg` (its monotonic time, just
/// read), then reads every record non-blocking from the start of the log, within the bounds
/// of `truecold_proto::trace`. Nothing is sent when `/dev/kmsg` cannot be opened or the sync
/// line is not found (the host then has no trace, which the attribution reports).
fn kernel_trace() -> Vec<truecold_proto::trace::TraceLine> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut b = truecold_init::kmsg::TraceBuilder::default();
    let sync = format!(
        "{}{}\n",
        truecold_proto::trace::SYNC_PREFIX,
        sys::monotonic_ns()
    );
    let written = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .and_then(|mut f| f.write_all(sync.as_bytes()));
    if let Err(e) = written {
        let _ = writeln!(std::io::stderr(), "truecold-init: /dev/kmsg write: {e}");
        return Vec::new();
    }
    let Ok(mut f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/kmsg")
    else {
        return Vec::new();
    };
    let mut buf = vec![0u8; 8192];
    while !b.full() {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => b.feed(&buf[..n]),
            // Records overwritten before they were read: the next read goes on.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // EAGAIN: the end of the log.
            Err(_) => break,
        }
    }
    b.lines()
}

/// The error and its source chain on stderr (the console, when there is one).
fn report(e: &InitError) {
    let _ = writeln!(
        std::io::stderr(),
        "truecold-init: {} failed: {}",
        e.code(),
        truecold_proto::measure::error_chain(e)
    );
}
