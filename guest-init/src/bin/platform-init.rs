//! `truecold-platform-init`: a minimal PID 1 that any engine can boot. It mounts `/proc`
//! and `/sys`, reads the boot id and the platform the kernel saw, prints one `TC1 record`
//! line on its stdout (the console, when the command line names one) and reboots at once —
//! `reboot=k` and the i8042 reset end every engine, none of which need ACPI for it. It is
//! the guest of the engine-neutral platform check and of the whole-process engine timings:
//! the same work under every VMM, no truecold ports.

use std::io::Write;
use truecold_proto::{BootId, ErrorCode, GuestRecord, Message, Workload};

fn main() {
    let t_init_ns = monotonic_ns();
    let mounted = mount("proc", "/proc") && mount("sysfs", "/sys");
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .and_then(|t| BootId::parse(&t));
    let rec = GuestRecord {
        boot_id,
        t_init_ns,
        t_ready_ns: 0,
        t_reply_ns: 0,
        t_record_ns: monotonic_ns(),
        mem_configured: 0,
        mem_firmware_ram: 0,
        mem_total: 0,
        mem_present: 0,
        mem_managed: 0,
        mem_probe: 0,
        cpus: 0,
        platform: truecold_init::platform::read(),
        workload: Workload::NotRun,
        code: if mounted && boot_id.is_some() {
            ErrorCode::Ok
        } else {
            ErrorCode::MountProc
        },
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(Message::Record(rec).encode().as_bytes());
    let _ = out.flush();
    // SAFETY: reboot takes no pointers; as PID 1 we may call it. It returns only on failure.
    unsafe { libc::reboot(libc::RB_AUTOBOOT) };
    // Exiting PID 1 panics the kernel, which (panic=-1 or not) is the last way out.
    std::process::exit(1)
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

fn mount(fstype: &str, target: &str) -> bool {
    let (Ok(src), Ok(dst)) = (
        std::ffi::CString::new(fstype),
        std::ffi::CString::new(target),
    ) else {
        return false;
    };
    // SAFETY: valid NUL-terminated strings that outlive the call; data is NULL.
    unsafe {
        libc::mount(
            src.as_ptr(),
            dst.as_ptr(),
            src.as_ptr(),
            0,
            std::ptr::null(),
        ) == 0
    }
}
