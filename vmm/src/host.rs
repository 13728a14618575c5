//! Facts about the host the VMM runs on: kind of KVM, kernel, RAM, and this process's memory.
use serde::{Deserialize, Serialize};

/// What `/dev/kvm` is backed by.
///
/// Decided in this order:
/// 1. `TRUECOLD_HOST_KIND=hardware|pvm|nested-emulated` (or `--host-kind`) wins;
/// 2. CPUID leaf 0x4000_0000 reads `TCGTCGTCGTCG` (QEMU's software CPU) → `NestedEmulated`;
/// 3. `/sys/module/kvm_pvm` exists → `Pvm`;
/// 4. `vmx` or `svm` in /proc/cpuinfo → `Hardware`;
/// 5. otherwise `Unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum HostKind {
    Hardware,
    Pvm,
    NestedEmulated,
    Unknown,
}

impl HostKind {
    /// Parses the names used by the env var and the CLI.
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "hardware" => Some(HostKind::Hardware),
            "pvm" => Some(HostKind::Pvm),
            "nested-emulated" => Some(HostKind::NestedEmulated),
            "unknown" => Some(HostKind::Unknown),
            _ => None,
        }
    }

    /// Pure decision from the observed facts (see the type's docs).
    pub fn decide(
        forced: Option<HostKind>,
        hypervisor_signature: &str,
        pvm_module: bool,
        cpuinfo: &str,
    ) -> Self {
        if let Some(k) = forced {
            return k;
        }
        if hypervisor_signature == "TCGTCGTCGTCG" {
            return HostKind::NestedEmulated;
        }
        if pvm_module {
            return HostKind::Pvm;
        }
        let hw = cpuinfo
            .lines()
            .filter(|l| l.starts_with("flags"))
            .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"));
        if hw {
            HostKind::Hardware
        } else {
            HostKind::Unknown
        }
    }

    /// The name used by the env var, the CLI and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            HostKind::Hardware => "hardware",
            HostKind::Pvm => "pvm",
            HostKind::NestedEmulated => "nested-emulated",
            HostKind::Unknown => "unknown",
        }
    }

    /// Observes this host: the effective kind (see [`HostKind::detection`]).
    pub fn detect(forced: Option<HostKind>) -> Self {
        HostKind::detection(forced).kind
    }

    /// The kind for one boot: `given` (`--host-kind`; the bench passes the kind it detected
    /// once per campaign) as it is, without reading anything; else [`HostKind::detection`].
    pub fn for_boot(given: Option<HostKind>) -> Detection {
        match given {
            Some(kind) => Detection::given(kind),
            None => HostKind::detection(None),
        }
    }

    /// Observes this host and says whether an override (`forced`, else
    /// `TRUECOLD_HOST_KIND`) replaced what detection found.
    pub fn detection(forced: Option<HostKind>) -> Detection {
        let env = std::env::var("TRUECOLD_HOST_KIND")
            .ok()
            .and_then(|v| HostKind::from_name(&v));
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        Detection::new(
            forced.or(env),
            HostKind::decide(
                None,
                &hypervisor_signature(),
                std::path::Path::new("/sys/module/kvm_pvm").exists(),
                &cpuinfo,
            ),
        )
    }
}

/// The host kind in effect, and what detection alone found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Detection {
    /// The kind in effect (the override when there is one).
    pub kind: HostKind,
    /// What detection found from the host's own facts (None: not detected, the kind was
    /// given).
    pub detected: Option<HostKind>,
    /// Whether an override set `kind` (even to the detected value).
    pub forced: bool,
}

impl Detection {
    /// Pure: `forced` (if any) over `detected`.
    pub fn new(forced: Option<HostKind>, detected: HostKind) -> Self {
        Detection {
            kind: forced.unwrap_or(detected),
            detected: Some(detected),
            forced: forced.is_some(),
        }
    }

    /// Pure: the caller's `kind`, nothing detected.
    pub fn given(kind: HostKind) -> Self {
        Detection {
            kind,
            detected: None,
            forced: true,
        }
    }
}

/// The 12-byte hypervisor vendor signature at CPUID 0x4000_0000 ("" when none).
pub fn hypervisor_signature() -> String {
    let leaf1 = core::arch::x86_64::__cpuid(1);
    if leaf1.ecx & (1 << 31) == 0 {
        return String::new();
    }
    // Hypervisor leaves are defined when the hypervisor bit is set.
    let r = core::arch::x86_64::__cpuid(0x4000_0000);
    let mut b = Vec::with_capacity(12);
    for w in [r.ebx, r.ecx, r.edx] {
        b.extend_from_slice(&w.to_le_bytes());
    }
    String::from_utf8_lossy(&b)
        .trim_end_matches('\0')
        .to_string()
}

/// `uname -r`.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
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
    kb_field(&std::fs::read_to_string("/proc/meminfo").ok()?, "MemTotal")
}

/// VmRSS of this process, bytes.
pub fn self_rss() -> Option<u64> {
    kb_field(&std::fs::read_to_string("/proc/self/status").ok()?, "VmRSS")
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
    parse_smaps(&std::fs::read_to_string("/proc/self/smaps").ok()?, start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_kind_order() {
        let hw = "flags\t: fpu vme svm lm\n";
        let none = "flags\t: fpu vme lm\n";
        assert_eq!(HostKind::decide(None, "", false, hw), HostKind::Hardware);
        assert_eq!(HostKind::decide(None, "", true, hw), HostKind::Pvm);
        assert_eq!(HostKind::decide(None, "", false, none), HostKind::Unknown);
        assert_eq!(
            HostKind::decide(None, "TCGTCGTCGTCG", false, hw),
            HostKind::NestedEmulated
        );
        assert_eq!(
            HostKind::decide(Some(HostKind::Hardware), "", true, none),
            HostKind::Hardware
        );
    }

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
        let d = HostKind::for_boot(Some(HostKind::NestedEmulated));
        assert_eq!(
            (d.kind, d.detected, d.forced),
            (HostKind::NestedEmulated, None, true)
        );
        assert_eq!(
            HostKind::for_boot(None).detected,
            Some(HostKind::detection(None).detected.unwrap())
        );
        for k in [
            HostKind::Hardware,
            HostKind::Pvm,
            HostKind::NestedEmulated,
            HostKind::Unknown,
        ] {
            assert_eq!(HostKind::from_name(k.name()), Some(k));
        }
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
