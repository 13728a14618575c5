//! `truecold-init`: the guest's PID 1. Rings `InitStart`, mounts, reads the command line and
//! the boot id, verifies memory under the engine's layout, brings networking up, rings
//! `Ready`, answers the host's liveness challenge (strict-ready) on the transport the command
//! line names (truecold's ports, or `TC1` lines on ttyS0), runs the workload, sends one
//! record on that transport, writes the exit code and stops the VM. Every step is one
//! function; every failure has its own [`ErrorCode`]; on any failure the record is still
//! sent, so the host never waits on a silent guest.

mod error;
mod memory;
mod net;
mod ports;
mod serial;
mod sys;
mod workload;

use error::InitError;
use ports::Ports;
use serial::Serial;
use std::io::Write;
use std::sync::OnceLock;
use truecold_init::{parse_cpu_count, transport_hint};
use truecold_proto::kinds::Transport;
use truecold_proto::{
    BootId, ErrorCode, GuestConfig, GuestFault, GuestRecord, Message, Phase, Reply, Workload,
};

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
        mem_probe: 0,
        cpus: 0,
        platform: Default::default(),
        workload: Workload::NotRun,
        code: ErrorCode::Ok,
    };
    match ports {
        Ok(p) => {
            let mut tty = None;
            if let Err(e) = boot(p, &mut tty, &mut rec) {
                report(&e);
                rec.code = e.code();
            }
            // After the workload, outside the measured window; informational for the guest,
            // checked by the host against the configured topology.
            rec.platform = truecold_init::platform::read();
            finish(p, tty, rec);
        }
        // Without the ports nothing can reach the host; the console may still show it.
        Err(e) => report(&e),
    }
    sys::stop(TRANSPORT.get().copied());
}

/// The steps up to and including the workload. Fills `rec` as it goes; `tty` is ttyS0 once
/// the serial transport opened it.
fn boot(p: Ports, tty: &mut Option<Serial>, rec: &mut GuestRecord) -> Result<(), InitError> {
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
    let checked = memory::verify(cfg.engine, cfg.mem, cfg.probe, &mut figures);
    rec.mem_firmware_ram = figures.firmware_ram;
    rec.mem_total = figures.mem_total;
    rec.mem_probe = figures.probe;
    checked?;
    net::bring_up(cfg.net.as_deref())?;
    rec.t_ready_ns = sys::monotonic_ns();
    p.doorbell(Phase::Ready);
    answer_challenge(p, cfg.transport, tty, boot_id)?;
    rec.t_reply_ns = sys::monotonic_ns();
    match workload::run() {
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
/// nonce by `rep insb`, the reply by `rep outsb`. Serial: open ttyS0 raw, the `ready` line,
/// one bounded line that must be the `nonce`, the `reply` line.
fn answer_challenge(
    p: Ports,
    transport: Transport,
    tty: &mut Option<Serial>,
    boot_id: BootId,
) -> Result<(), InitError> {
    match transport {
        Transport::Ports => {
            let nonce = p.nonce();
            p.send(
                Message::Reply(Reply::new(&nonce, boot_id))
                    .encode()
                    .as_bytes(),
            );
        }
        Transport::Serial => {
            let s = tty.insert(Serial::open()?);
            s.send(&Message::Ready { boot_id })?;
            let nonce = s.read_nonce()?;
            s.send(&Message::Reply(Reply::new(&nonce, boot_id)))?;
        }
        Transport::Vsock => {
            return Err(InitError::Vsock {
                step: "connect",
                source: std::io::ErrorKind::Unsupported.into(),
            })
        }
    }
    Ok(())
}

/// Sends the record on the transport (ports when it is not known) and writes the exit code.
/// Under the serial transport ttyS0 is opened here if the boot failed before it was; if it
/// cannot be, the exit code is all the host gets.
fn finish(p: Ports, tty: Option<Serial>, mut rec: GuestRecord) {
    rec.t_record_ns = sys::monotonic_ns();
    let code = rec.code as u8;
    let line = Message::Record(rec);
    match TRANSPORT.get().copied().unwrap_or_default() {
        Transport::Ports | Transport::Vsock => {
            p.send(line.encode().as_bytes());
            // An attribution boot (never a measured row): the trace goes after the record,
            // outside every measured stage.
            if ATTRIBUTION.get() == Some(&true) {
                for l in kernel_trace() {
                    p.send(Message::Trace(l).encode().as_bytes());
                }
            }
        }
        Transport::Serial => {
            let sent = tty
                .map_or_else(Serial::open, Ok)
                .and_then(|mut s| s.send(&line));
            if let Err(e) = sent {
                report(&e);
            }
        }
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
