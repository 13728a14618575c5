//! Thin wrappers over the few syscalls PID 1 needs.

use std::ffi::CString;
use std::io;

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
    match std::fs::create_dir(target) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let src = CString::new(fstype).map_err(io::Error::other)?;
    let dst = CString::new(target).map_err(io::Error::other)?;
    // SAFETY: all pointers are valid NUL-terminated strings living across the call; data is NULL.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            dst.as_ptr(),
            src.as_ptr(),
            flags,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Powers off; if the kernel cannot (no ACPI), resets instead, so the VM always stops.
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
