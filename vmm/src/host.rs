//! Facts about the host the VMM runs on: kind of KVM, kernel, RAM, and this process's memory.
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

pub use truecold_proto::kinds::{Detection, HostKind};

/// Observes this host: the effective kind (see [`detection`]).
pub fn detect(forced: Option<HostKind>) -> HostKind {
    detection(forced).kind
}

/// The kind for one boot: `given` (`--host-kind`; the bench passes the kind it detected once
/// per campaign) as it is, without reading anything; else [`detection`].
pub fn for_boot(given: Option<HostKind>) -> Detection {
    match given {
        Some(kind) => Detection::given(kind),
        None => detection(None),
    }
}

// The one detection, shared with the bench.
pub use truecold_host::kind::{detection, hypervisor_signature};

/// `--host-kind` values: [`HostKind::parse`].
pub fn parse_host_kind(s: &str) -> Result<HostKind, String> {
    HostKind::parse(s)
}

/// `/proc/self/status` (VmRSS, VmHWM, Seccomp, NoNewPrivs).
pub const PROC_SELF_STATUS: &str = "/proc/self/status";
/// `/proc/self/smaps` (the guest memory mappings' backing).
pub const PROC_SELF_SMAPS: &str = "/proc/self/smaps";
/// `/proc/self/stat` (the process start).
pub const PROC_SELF_STAT: &str = "/proc/self/stat";
/// `/proc/sys/kernel/osrelease` (`uname -r`).
pub const PROC_OSRELEASE: &str = "/proc/sys/kernel/osrelease";
/// `/proc/meminfo` (MemTotal).
pub const PROC_MEMINFO: &str = "/proc/meminfo";
/// The THP mode.
pub const SYS_THP_ENABLED: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

/// Every file the VMM reads once its seccomp filter, which forbids opening anything, is in
/// place: [`hold_files`] opens them beforehand and [`read_text`] re-reads them from offset 0.
pub const HELD_FILES: [&str; 6] = [
    PROC_SELF_STATUS,
    PROC_SELF_SMAPS,
    PROC_SELF_STAT,
    PROC_OSRELEASE,
    PROC_MEMINFO,
    SYS_THP_ENABLED,
];

static HELD: OnceLock<Vec<(&'static str, std::fs::File)>> = OnceLock::new();

/// Opens [`HELD_FILES`] (read-only) and keeps them for [`read_text`]: after this, reading
/// them opens nothing. A file that cannot be opened is skipped (its reads then open it, and
/// read nothing under the filter, as an unreadable file reads nothing without one); returns
/// how many are held. Idempotent.
pub fn hold_files() -> usize {
    HELD.get_or_init(|| {
        HELD_FILES
            .iter()
            .filter_map(|&p| std::fs::File::open(p).ok().map(|f| (p, f)))
            .collect()
    })
    .len()
}

/// The text of `path`: through its held descriptor when [`hold_files`] holds it (`pread`
/// from offset 0: /proc and /sys files regenerate their text on each read from the start),
/// else by opening it. None when unreadable.
pub fn read_text(path: &str) -> Option<String> {
    let held = HELD
        .get()
        .and_then(|h| h.iter().find(|(p, _)| *p == path).map(|(_, f)| f));
    let Some(f) = held else {
        return std::fs::read_to_string(path).ok();
    };
    let mut buf = vec![0u8; 16 << 10];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        match f.read_at(&mut buf[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    buf.truncate(len);
    String::from_utf8(buf).ok()
}

/// `uname -r`.
pub fn kernel_release() -> String {
    read_text(PROC_OSRELEASE)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// A `kB` field of a /proc file in `key: N kB` form, in bytes.
pub fn kb_field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        let n: u64 = rest.split_whitespace().next()?.parse().ok()?;
        Some(n * 1024)
    })
}

/// MemTotal of the host, bytes.
pub fn host_mem_total() -> Option<u64> {
    kb_field(&read_text(PROC_MEMINFO)?, "MemTotal")
}

/// VmRSS of this process, bytes.
pub fn self_rss() -> Option<u64> {
    kb_field(&read_text(PROC_SELF_STATUS)?, "VmRSS")
}

/// VmHWM (peak resident set) of this process, bytes.
pub fn self_rss_peak() -> Option<u64> {
    kb_field(&read_text(PROC_SELF_STATUS)?, "VmHWM")
}

/// This process's page faults so far, all threads (`getrusage(RUSAGE_SELF)`): (minor, major).
pub fn self_faults() -> Option<(u64, u64)> {
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage for the call to fill.
    let r = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    (r == 0).then(|| {
        (
            u64::try_from(ru.ru_minflt).unwrap_or(0),
            u64::try_from(ru.ru_majflt).unwrap_or(0),
        )
    })
}

/// The process's counters now, with `exits` so far (`Counters`); zero faults when getrusage
/// fails (it cannot for RUSAGE_SELF with a valid buffer).
pub fn counters(exits: truecold_proto::report::ExitTally) -> truecold_proto::report::Counters {
    let (minflt, majflt) = self_faults().unwrap_or((0, 0));
    truecold_proto::report::Counters {
        exits,
        minflt,
        majflt,
    }
}

/// What /proc/self/smaps says about one mapping.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MappingObservation {
    pub start: u64,
    pub size: u64,
    pub rss: u64,
    pub anon_huge_pages: u64,
    /// `KernelPageSize` (4096 or 2097152 for hugetlb).
    pub kernel_page_size: u64,
    /// hugetlb pages mapped (private + shared).
    pub hugetlb: u64,
}

/// Finds the smaps block of the mapping starting at `start` (pure, for tests).
pub fn parse_smaps(smaps: &str, start: u64) -> Option<MappingObservation> {
    let mut lines = smaps.lines();
    while let Some(l) = lines.next() {
        let Some((range, _)) = l.split_once(' ') else {
            continue;
        };
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else {
            continue;
        };
        if a != start {
            continue;
        }
        let mut block = String::new();
        for l in lines.by_ref() {
            if l.starts_with("VmFlags") {
                break;
            }
            block.push_str(l);
            block.push('\n');
        }
        return Some(MappingObservation {
            start: a,
            size: b - a,
            rss: kb_field(&block, "Rss").unwrap_or(0),
            anon_huge_pages: kb_field(&block, "AnonHugePages").unwrap_or(0),
            kernel_page_size: kb_field(&block, "KernelPageSize").unwrap_or(0),
            hugetlb: kb_field(&block, "Private_Hugetlb").unwrap_or(0)
                + kb_field(&block, "Shared_Hugetlb").unwrap_or(0),
        });
    }
    None
}

/// Observes the mapping at `start` in this process.
pub fn observe_mapping(start: u64) -> Option<MappingObservation> {
    parse_smaps(&read_text(PROC_SELF_SMAPS)?, start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forced_kind_keeps_what_was_detected() {
        let d = Detection::new(Some(HostKind::Hardware), HostKind::Pvm);
        assert_eq!(
            (d.kind, d.detected, d.forced),
            (HostKind::Hardware, Some(HostKind::Pvm), true)
        );
        let d = Detection::new(None, HostKind::Pvm);
        assert_eq!(
            (d.kind, d.detected, d.forced),
            (HostKind::Pvm, Some(HostKind::Pvm), false)
        );
        let d = for_boot(Some(HostKind::NestedEmulated));
        assert_eq!(
            (d.kind, d.detected, d.forced),
            (HostKind::NestedEmulated, None, true)
        );
        assert_eq!(
            for_boot(None).detected,
            Some(detection(None).detected.unwrap())
        );
        for k in HostKind::ALL {
            assert_eq!(parse_host_kind(k.as_str()), Ok(k));
        }
        assert!(parse_host_kind("bare-metal").is_err());
    }

    #[test]
    fn smaps_block() {
        let s = "7f00-7f00200000 rw-p 00000000 00:00 0\nRss:  4 kB\nAnonHugePages:  2048 kB\n\
                 KernelPageSize: 4 kB\nVmFlags: rd wr\n";
        let m = parse_smaps(s, 0x7f00).unwrap();
        assert_eq!(m.rss, 4096);
        assert_eq!(m.anon_huge_pages, 2 << 20);
        assert_eq!(m.kernel_page_size, 4096);
        assert!(parse_smaps(s, 0x1000).is_none());
    }
}
