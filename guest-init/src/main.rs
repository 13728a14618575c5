//! `truecold-init`: the guest's PID 1. Rings `InitStart`, mounts, reads the boot id and the
//! command line, verifies memory, brings networking up, rings `Ready`, answers the host's
//! liveness challenge (strict-ready), runs the workload, sends one record, writes the exit
//! code and powers off. Every step is one function; every failure has its own
//! [`ErrorCode`]; on any failure the record is still sent, so the host never waits on a
//! silent guest.

mod error;
mod memory;
mod net;
mod ports;
mod sys;
mod workload;

use error::InitError;
use ports::Ports;
use std::io::Write;
use truecold_init::parse_cpu_count;
use truecold_proto::{
    BootId, ErrorCode, GuestConfig, GuestRecord, Message, Phase, Reply, Workload,
};

fn main() {
    let t_init_ns = sys::monotonic_ns();
    let ports = Ports::open();
    if let Ok(p) = ports {
        p.doorbell(Phase::InitStart);
    }
    // A panic from here on reaches the host as its own error kind (code `panic`, row kind `guest_panic`): the hook
    // writes the code to the exit port before it tries to power off.
    let exit_port = ports.as_ref().ok().copied();
    truecold_init::panic::install(exit_port.map(|p| move |code| p.exit(code)), || {
        sys::power_off()
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
            if let Err(e) = boot(p, &mut rec) {
                report(&e);
                rec.code = e.code();
            }
            // After the workload, outside the measured window; informational for the guest,
            // checked by the host against the configured topology.
            rec.platform = truecold_init::platform::read();
            finish(p, rec);
        }
        // Without the ports nothing can reach the host; the console may still show it.
        Err(e) => report(&e),
    }
    sys::power_off();
}

/// The steps up to and including the workload. Fills `rec` as it goes.
fn boot(p: Ports, rec: &mut GuestRecord) -> Result<(), InitError> {
    mount_filesystems()?;
    let boot_id = read_boot_id()?;
    rec.boot_id = Some(boot_id);
    let cfg = read_config()?;
    rec.mem_configured = cfg.mem;
    rec.cpus = count_cpus();
    let mut figures = memory::MemFigures::default();
    let checked = memory::verify(cfg.mem, cfg.probe, &mut figures);
    rec.mem_firmware_ram = figures.firmware_ram;
    rec.mem_total = figures.mem_total;
    rec.mem_probe = figures.probe;
    checked?;
    net::bring_up(cfg.net.as_deref())?;
    rec.t_ready_ns = sys::monotonic_ns();
    p.doorbell(Phase::Ready);
    answer_challenge(p, boot_id);
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

/// `truecold.*` from `/proc/cmdline`.
fn read_config() -> Result<GuestConfig, InitError> {
    let path = "/proc/cmdline";
    let text = std::fs::read_to_string(path).map_err(|source| InitError::Read {
        code: ErrorCode::Cmdline,
        path: path.into(),
        source,
    })?;
    GuestConfig::from_cmdline(&text).map_err(InitError::Cmdline)
}

/// Online CPUs; 0 when the list cannot be read (informational, not a check).
fn count_cpus() -> u32 {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|t| parse_cpu_count(&t).ok())
        .unwrap_or(0)
}

/// Reads the nonce the host chose after the `Ready` doorbell and sends the reply line.
fn answer_challenge(p: Ports, boot_id: BootId) {
    let nonce = p.nonce();
    let line = Message::Reply(Reply::new(&nonce, boot_id)).encode();
    p.send(line.as_bytes());
}

/// Sends the record and writes the exit code.
fn finish(p: Ports, mut rec: GuestRecord) {
    rec.t_record_ns = sys::monotonic_ns();
    let code = rec.code as u8;
    p.send(Message::Record(rec).encode().as_bytes());
    p.exit(code);
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
