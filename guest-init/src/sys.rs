//! Thin wrappers over the few syscalls PID 1 needs.

use std::ffi::CString;
use std::io;
use truecold_proto::kinds::Transport;

/// CLOCK_MONOTONIC in nanoseconds (the guest's uptime clock).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if r != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// `mount(fstype, target, fstype, flags, NULL)`, creating `target` if missing.
pub fn mount(fstype: &str, target: &str, flags: libc::c_ulong) -> io::Result<()> {
    mount_source(fstype, fstype, target, flags)
}

/// `mount(source, target, fstype, flags, NULL)`, creating `target` if missing.
pub fn mount_source(
    source: &str,
    fstype: &str,
    target: &str,
    flags: libc::c_ulong,
) -> io::Result<()> {
    match std::fs::create_dir(target) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let src = CString::new(source).map_err(io::Error::other)?;
    let fs = CString::new(fstype).map_err(io::Error::other)?;
    let dst = CString::new(target).map_err(io::Error::other)?;
    // SAFETY: all pointers are valid NUL-terminated strings living across the call; data is NULL.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            dst.as_ptr(),
            fs.as_ptr(),
            flags,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Stops the guest once its code is on the exit port: under the serial and vsock
/// transports, whose engines may have no exit port (every engine of an engines or parity
/// campaign but truecold-vmm, which the exit port has stopped already), a reset
/// ([`reboot`]: without ACPI a power-off only halts, and Firecracker would run on); under
/// the ports transport, or before the transport is known, [`power_off`] as always.
pub fn stop(transport: Option<Transport>) -> ! {
    match transport {
        Some(Transport::Serial | Transport::Vsock) => reboot(),
        Some(Transport::Ports) | None => power_off(),
    }
}

/// `reboot(RB_AUTOBOOT)`: with `reboot=k` the i8042 reset, which ends Firecracker and
/// truecold-vmm, makes QEMU `-no-reboot` exit, and makes Cloud Hypervisor reboot the VM (the
/// bench kills it after the record). No `sync`: nothing on disk to keep.
pub fn reboot() -> ! {
    // SAFETY: reboot takes no pointers; as PID 1 we may call it.
    unsafe { libc::reboot(libc::RB_AUTOBOOT) };
    // Only reached if the reboot call failed: exiting PID 1 panics the kernel (`panic=-1`
    // then resets).
    std::process::exit(1)
}

/// Powers off, then resets if that call returns. Without ACPI (`acpi=off`) the kernel turns
/// the power-off into a halt, which does not return: under the ports transport the exit port
/// has stopped the VM before this.
pub fn power_off() -> ! {
    // SAFETY: sync and reboot take no pointers; as PID 1 we may call reboot.
    unsafe {
        libc::sync();
        libc::reboot(libc::RB_POWER_OFF);
        libc::reboot(libc::RB_AUTOBOOT);
    }
    // Only reached if both reboot calls failed: exiting PID 1 panics the kernel.
    std::process::exit(1)
}
