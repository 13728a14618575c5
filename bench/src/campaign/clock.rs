//! Time helpers. The one clock of the timeline is the VMM's own
//! [`truecold_proto::measure::now_ns`] (CLOCK_MONOTONIC nanoseconds), so a request stamp taken
//! here and a strict-ready stamp taken there subtract; this module only sleeps on it and
//! names wall-clock dates.

use truecold_proto::measure::now_ns;

/// Sleeps until CLOCK_MONOTONIC reaches `t_ns` (returns at once when it already has).
/// Absolute sleeps do not drift: the open loop's intended times stay on their grid.
pub fn sleep_until_ns(t_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (t_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (t_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: `ts` is a valid timespec; with TIMER_ABSTIME the remainder pointer may be null.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        // clock_nanosleep returns the error number; only EINTR (a signal, e.g. SIGINT) repeats.
        if rc != libc::EINTR {
            return;
        }
        if now_ns() >= t_ns {
            return;
        }
    }
}

/// UTC wall-clock time as `YYYYMMDDTHHMMSSZ` (for bundle directory names) and as
/// RFC 3339 `YYYY-MM-DDTHH:MM:SSZ` (for files).
pub fn utc_now() -> (String, String) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (y, mo, d, h, mi, s) = civil_from_unix(secs);
    (
        format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z"),
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z"),
    )
}

/// Converts Unix seconds to (year, month, day, hour, minute, second) in UTC
/// (proleptic Gregorian calendar, days-from-civil inverted by era arithmetic).
pub fn civil_from_unix(secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (h, mi, s) = (
        (rem / 3600) as u32,
        (rem % 3600 / 60) as u32,
        (rem % 60) as u32,
    );
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(mo <= 2);
    (y, mo, d, h, mi, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_match_known_points() {
        assert_eq!(civil_from_unix(0), (1970, 1, 1, 0, 0, 0));
        // A leap day in a century leap year.
        assert_eq!(civil_from_unix(951_827_696), (2000, 2, 29, 12, 34, 56));
        // A day late in an ordinary year.
        assert_eq!(civil_from_unix(1_795_982_422), (2026, 11, 29, 20, 0, 22));
        // The day after February in a non-leap century year.
        assert_eq!(civil_from_unix(4_107_542_400), (2100, 3, 1, 0, 0, 0));
    }

    #[test]
    fn sleep_until_past_time_returns() {
        let t = now_ns();
        sleep_until_ns(t.saturating_sub(1_000_000));
        assert!(now_ns() >= t);
    }
}
