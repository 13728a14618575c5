//! What a campaign leaves behind: the harness's descriptors, threads, memory and children,
//! and the host's free memory and hugetlb pool, read before the first launch and after
//! the last reap ([`Residue`], `environment.residue` in `result.json` since schema 6).
//!
//! [`leaks`] is the one rule that turns the two readings into leaks, used by the bench
//! (which writes each leak as a warning too) and by the verifier (which recomputes them).
//! A leak is a countable resource the campaign did not give back: an open descriptor, a
//! thread, a child process (a zombie counts: it was not reaped), hugetlb pages. The
//! harness's RSS and the host's MemAvailable are recorded but not judged: the rows held in
//! memory grow the RSS by design, and MemAvailable moves with the page cache and every
//! other process.

use serde::{Deserialize, Serialize};

/// One reading. `None`: unreadable (recorded as such, never guessed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reading {
    /// Entries of the harness's `/proc/self/fd`.
    pub harness_fds: Option<u64>,
    /// `Threads:` of the harness's `/proc/self/status`.
    pub harness_threads: Option<u64>,
    /// `VmRSS:` of the harness, bytes.
    pub harness_rss_bytes: Option<u64>,
    /// Processes whose parent is the harness (zombies included).
    pub children: Option<u64>,
    /// Of those, zombies (exited, not reaped).
    pub zombies: Option<u64>,
    /// `MemAvailable:` of `/proc/meminfo`, bytes.
    pub mem_available_bytes: Option<u64>,
    /// `HugePages_Total` and `HugePages_Free` of `/proc/meminfo` (the default-size pool).
    pub hugepages_total: Option<u64>,
    pub hugepages_free: Option<u64>,
}

/// `environment.residue`: the two readings and the leaks [`leaks`] finds in them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Residue {
    /// Before the first launch.
    pub before: Reading,
    /// After the last launch was reaped (and before the bundle is written).
    pub after: Reading,
    /// [`leaks`]`(before, after)`, each also a warning of the bundle.
    pub leaks: Vec<String>,
}

impl Residue {
    /// The residue of two readings, its leaks judged by [`leaks`].
    pub fn new(before: Reading, after: Reading) -> Residue {
        Residue {
            before,
            after,
            leaks: leaks(&before, &after),
        }
    }
}

/// The leaks between two readings, one sentence each (the one rule; see the module doc).
/// A resource unreadable in either reading is not judged.
pub fn leaks(before: &Reading, after: &Reading) -> Vec<String> {
    let mut out = Vec::new();
    let mut grew = |what: &str, b: Option<u64>, a: Option<u64>| {
        if let (Some(b), Some(a)) = (b, a) {
            if a > b {
                out.push(format!(
                    "leak: the harness holds {} more {what} after the campaign than before \
                     ({b} → {a})",
                    a - b
                ));
            }
        }
    };
    grew("open descriptors", before.harness_fds, after.harness_fds);
    grew("threads", before.harness_threads, after.harness_threads);
    grew("child processes", before.children, after.children);
    if let Some(z) = after.zombies.filter(|z| *z > 0) {
        out.push(format!(
            "leak: {z} child process(es) of the harness are zombies (exited, never reaped) \
             after the campaign"
        ));
    }
    if let (Some(b), Some(a)) = (before.hugepages_free, after.hugepages_free) {
        // A pool resized by someone else in between is not the campaign's leak.
        if a < b && before.hugepages_total == after.hugepages_total {
            out.push(format!(
                "leak: {} hugetlb page(s) of the pool are still in use after the campaign \
                 ({b} free before, {a} after)",
                b - a
            ));
        }
    }
    out
}

/// `Key:   N kB` (or `Key: N`) of a `/proc` status-style text, in the unit written
/// (`kB` × 1024 to bytes when `bytes`). Pure, for tests.
pub fn proc_field(text: &str, key: &str, bytes: bool) -> Option<u64> {
    let line = text
        .lines()
        .find(|l| l.split_once(':').is_some_and(|(k, _)| k.trim_end() == key))?;
    let mut it = line.split_once(':')?.1.split_whitespace();
    let n: u64 = it.next()?.parse().ok()?;
    match (bytes, it.next()) {
        (true, Some("kB")) => n.checked_mul(1024),
        (true, None) => Some(n),
        (false, None) => Some(n),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(fds: u64, threads: u64, children: u64, zombies: u64, free: u64) -> Reading {
        Reading {
            harness_fds: Some(fds),
            harness_threads: Some(threads),
            harness_rss_bytes: Some(1 << 20),
            children: Some(children),
            zombies: Some(zombies),
            mem_available_bytes: Some(1 << 30),
            hugepages_total: Some(16),
            hugepages_free: Some(free),
        }
    }

    #[test]
    fn equal_readings_leak_nothing_and_each_resource_is_judged() {
        assert!(leaks(&r(5, 2, 0, 0, 16), &r(5, 2, 0, 0, 16)).is_empty());
        // Fewer is not a leak (a descriptor the harness closed in between).
        assert!(leaks(&r(6, 3, 1, 0, 15), &r(5, 2, 0, 0, 16)).is_empty());
        let l = leaks(&r(5, 2, 0, 0, 16), &r(7, 3, 1, 1, 14));
        assert_eq!(l.len(), 5, "{l:?}");
        assert!(l[0].contains("2 more open descriptors"), "{l:?}");
        assert!(l[1].contains("1 more threads"), "{l:?}");
        assert!(l[2].contains("child processes"), "{l:?}");
        assert!(l[3].contains("zombies"), "{l:?}");
        assert!(l[4].contains("2 hugetlb page(s)"), "{l:?}");
    }

    #[test]
    fn unreadable_or_resized_is_not_judged() {
        let mut a = r(9, 9, 9, 0, 0);
        a.harness_fds = None;
        a.harness_threads = None;
        a.children = None;
        a.hugepages_total = Some(32);
        assert!(leaks(&r(5, 2, 0, 0, 16), &a).is_empty());
        // RSS and MemAvailable are recorded, never judged.
        let mut b = r(5, 2, 0, 0, 16);
        b.harness_rss_bytes = Some(1 << 40);
        b.mem_available_bytes = Some(0);
        assert!(leaks(&r(5, 2, 0, 0, 16), &b).is_empty());
    }

    #[test]
    fn proc_fields_parse_in_their_units() {
        let status = "Name:\tbench\nThreads:\t3\nVmRSS:\t   2048 kB\n";
        assert_eq!(proc_field(status, "Threads", false), Some(3));
        assert_eq!(proc_field(status, "VmRSS", true), Some(2048 * 1024));
        assert_eq!(proc_field(status, "VmRSS", false), None);
        assert_eq!(proc_field(status, "VmSwap", true), None);
        let meminfo = "MemAvailable:   1000 kB\nHugePages_Total:       4\nHugePages_Free: 3\n";
        assert_eq!(proc_field(meminfo, "MemAvailable", true), Some(1_024_000));
        assert_eq!(proc_field(meminfo, "HugePages_Free", false), Some(3));
        assert_eq!(proc_field("Threads: x\n", "Threads", false), None);
    }
}
