//! Reads what the guest's kernel made of the platform ([`GuestPlatform`]): the one part of
//! this library that does I/O, shared by `truecold-init` and `truecold-platform-init`. Runs
//! after strict-ready (outside the measured window). Nothing here fails the boot: a fact that
//! cannot be read stays at its zero value, which the host's topology check rejects.

use crate::{parse_cpuinfo, TSC_UNSTABLE_LOG};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use truecold_proto::{Clocksource, GuestPlatform};

/// `/proc` and `/sys` must be mounted.
pub fn read() -> GuestPlatform {
    let mut p = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| parse_cpuinfo(&t).ok())
        .unwrap_or_default();
    p.clocksource =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .ok()
            .and_then(|t| Clocksource::parse(&t));
    p.tsc_unstable = kernel_log_contains(TSC_UNSTABLE_LOG);
    p
}

/// Scans the kernel log (`/dev/kmsg`, one record per read, non-blocking, bounded) for `needle`.
fn kernel_log_contains(needle: &str) -> bool {
    const MAX_RECORDS: usize = 1 << 16;
    let Ok(mut f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/kmsg")
    else {
        return false;
    };
    let mut buf = vec![0u8; 8192];
    for _ in 0..MAX_RECORDS {
        match f.read(&mut buf) {
            Ok(0) => return false,
            Ok(n) => {
                if String::from_utf8_lossy(&buf[..n]).contains(needle) {
                    return true;
                }
            }
            // EPIPE: a record was overwritten while we read; the next read goes on.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {}
            Err(_) => return false,
        }
    }
    false
}
