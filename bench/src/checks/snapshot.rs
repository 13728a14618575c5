//! What the host and the harness look like at one moment ([`Snapshot`]), taken before and
//! after a campaign: load, CPU time, the harness's residue (descriptors, threads, RSS,
//! children). Read from /proc; anything unreadable is recorded as such, never guessed.

use truecold_proof::residue::{proc_field, Reading};
use truecold_proto::measure::now_ns;

/// A point-in-time reading taken before and after the campaign.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub t_ns: u64,
    /// `/proc/loadavg`, verbatim (trimmed).
    pub loadavg: String,
    /// This process's CPU time, ns.
    pub self_user_ns: u64,
    pub self_sys_ns: u64,
    /// Reaped children's CPU time (the VMM processes), ns.
    pub children_ns: u64,
    /// Busy and total CPU time of the whole host from `/proc/stat`, ns.
    pub host_busy_ns: u64,
    pub host_total_ns: u64,
    /// What the harness holds and the host has free (see [`residue_reading`]).
    pub residue: Reading,
    /// Lines of the harness's `/proc/self/maps` ([`maps_count`]; not in the bundle's
    /// residue: the per-launch cleanup judges it).
    pub harness_maps: Option<u64>,
}

impl Snapshot {
    /// Reads the snapshot now.
    pub fn take() -> Snapshot {
        let (self_user_ns, self_sys_ns) = rusage(libc::RUSAGE_SELF);
        let (cu, cs) = rusage(libc::RUSAGE_CHILDREN);
        let (host_busy_ns, host_total_ns) = read("/proc/stat")
            .and_then(|s| cpu_times(&s))
            .unwrap_or((0, 0));
        Snapshot {
            t_ns: now_ns(),
            loadavg: read("/proc/loadavg")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|| "unreadable".into()),
            self_user_ns,
            self_sys_ns,
            children_ns: cu + cs,
            host_busy_ns,
            host_total_ns,
            residue: residue_reading(),
            harness_maps: maps_count(),
        }
    }

    /// The snapshot after a campaign: as [`Snapshot::take`], but a residue with more harness
    /// threads than `before` is read again, every 2 ms for up to 100 ms, before it stands. A
    /// thread just joined can still be listed for a moment (the kernel wakes the joiner from
    /// its exit path, before the thread is released); a thread still running at the end of
    /// that wait is counted, and is a leak.
    pub fn take_after(before: &Snapshot) -> Snapshot {
        let mut s = Snapshot::take();
        for _ in 0..50 {
            match (s.residue.harness_threads, before.residue.harness_threads) {
                (Some(now), Some(then)) if now > then => {}
                _ => break,
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
            s.residue = residue_reading();
        }
        s
    }
}

/// Reads what the harness holds (descriptors, threads, RSS, children and zombies) and what
/// the host has free (MemAvailable, the hugetlb pool) now; unreadable values are `None`.
pub fn residue_reading() -> Reading {
    let status = read("/proc/self/status").unwrap_or_default();
    let meminfo = read("/proc/meminfo").unwrap_or_default();
    let fds = std::fs::read_dir("/proc/self/fd")
        .ok()
        // The directory handle being read is itself one entry; it is not the harness's.
        .map(|rd| rd.count().saturating_sub(1) as u64);
    let (children, zombies) = match children_of(std::process::id()) {
        Some((c, z)) => (Some(c), Some(z)),
        None => (None, None),
    };
    Reading {
        harness_fds: fds,
        harness_threads: proc_field(&status, "Threads", false),
        harness_rss_bytes: proc_field(&status, "VmRSS", true),
        children,
        zombies,
        mem_available_bytes: proc_field(&meminfo, "MemAvailable", true),
        hugepages_total: proc_field(&meminfo, "HugePages_Total", false),
        hugepages_free: proc_field(&meminfo, "HugePages_Free", false),
    }
}

/// The harness's memory mappings: lines of `/proc/self/maps`, counted through one buffer
/// allocated before the file is opened (so that reading adds no mapping of its own);
/// `None` when unreadable.
pub fn maps_count() -> Option<u64> {
    use std::io::Read;
    let mut buf = vec![0u8; 16 << 10];
    let mut f = std::fs::File::open("/proc/self/maps").ok()?;
    let mut lines = 0u64;
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Some(lines),
            Ok(n) => lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// (children, zombies among them) of process `pid`, from every `/proc/N/stat`; `None` when
/// `/proc` cannot be listed.
fn children_of(pid: u32) -> Option<(u64, u64)> {
    let mut n = 0;
    let mut z = 0;
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        // A process that exits while the directory is read is simply not counted.
        let Some(stat) = read(&format!("/proc/{name}/stat")) else {
            continue;
        };
        if let Some((ppid, state)) = stat_parent_and_state(&stat) {
            if ppid == pid {
                n += 1;
                if state == 'Z' {
                    z += 1;
                }
            }
        }
    }
    Some((n, z))
}

/// (ppid, state) of a `/proc/N/stat` line: the fields after the command name's last `)`
/// (the name may itself hold spaces and parentheses). Pure, for tests.
pub fn stat_parent_and_state(stat: &str) -> Option<(u32, char)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut it = rest.split_whitespace();
    let state = it.next()?.chars().next()?;
    let ppid = it.next()?.parse().ok()?;
    Some((ppid, state))
}

/// A /proc or /sys file's text; `None` when unreadable.
pub(super) fn read(p: &str) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

/// (user, system) CPU time of `who` (`RUSAGE_SELF`, `RUSAGE_CHILDREN`), ns; (0, 0) if
/// unreadable.
pub fn rusage(who: libc::c_int) -> (u64, u64) {
    // SAFETY: all-zero bytes are a valid `rusage` (plain integers).
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage; `who` is RUSAGE_SELF or RUSAGE_CHILDREN.
    let rc = unsafe { libc::getrusage(who, &mut ru) };
    if rc != 0 {
        return (0, 0);
    }
    let ns = |t: libc::timeval| (t.tv_sec as u64) * 1_000_000_000 + (t.tv_usec as u64) * 1_000;
    (ns(ru.ru_utime), ns(ru.ru_stime))
}

/// (busy, total) CPU time of the host from the aggregate `cpu` line of `/proc/stat`, ns.
/// Busy is everything but idle and iowait. Pure, for tests.
pub fn cpu_times(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 4 {
        return None;
    }
    // guest and guest_nice (fields 9, 10) are already included in user and nice.
    let total: u64 = v.iter().take(8).sum();
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as u64 } else { 100 };
    let ns = |t: u64| t.saturating_mul(1_000_000_000) / hz;
    Some((ns(total - idle), ns(total)))
}
