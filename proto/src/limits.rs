//! The limits of one VM, defined once: the VMM's configuration and the bench's command line
//! both check a value through these constructors, so a bad value is an argument error
//! that names the limit before anything launches (never a campaign of failed rows).
//!
//! | value | accepted | why |
//! |---|---|---|
//! | vCPUs | [`MIN_VCPUS`]`..=`[`MAX_VCPUS`] | the MP table (processor entries in the last KiB of base memory) and the probe guest's INIT/SIPI wake-up are tested up to [`MAX_VCPUS`] |
//! | guest memory | [`MIN_MEM_MIB`]`..=`[`MAX_MEM_MIB`] MiB | room for the boot structures and a kernel; above the maximum a value is absurd for one microVM |
//!
//! The memory maximum is a static sanity bound; the VMM also refuses, with its own typed
//! error, memory beyond the host's RAM (`MemTotal`), which it learns only on the host.

use core::fmt;

/// Fewest vCPUs.
pub const MIN_VCPUS: u32 = 1;
/// Most vCPUs.
pub const MAX_VCPUS: u32 = 32;
/// Smallest guest memory, MiB.
pub const MIN_MEM_MIB: u64 = 4;
/// Largest guest memory, MiB (1 TiB).
pub const MAX_MEM_MIB: u64 = 1 << 20;

/// A value outside its limit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error("--vcpus {got}: {MIN_VCPUS} to {MAX_VCPUS} vCPUs are supported")]
    Vcpus { got: u64 },
    #[error("--mem-mib {got}: guest memory below the minimum of {MIN_MEM_MIB} MiB")]
    MemTooSmall { got: u64 },
    #[error("--mem-mib {got}: guest memory above the maximum of {MAX_MEM_MIB} MiB")]
    MemTooLarge { got: u64 },
    #[error("guest memory of {bytes} bytes is not a whole number of MiB")]
    MemNotWholeMib { bytes: u64 },
}

impl LimitError {
    /// Stable kebab-case kind (the VMM's JSON error report).
    pub fn kind(&self) -> &'static str {
        match self {
            LimitError::Vcpus { .. } => "invalid-vcpus",
            LimitError::MemTooSmall { .. } => "memory-too-small",
            LimitError::MemTooLarge { .. } => "memory-too-large",
            LimitError::MemNotWholeMib { .. } => "memory-not-whole-mib",
        }
    }
}

/// A vCPU count within [`MIN_VCPUS`]`..=`[`MAX_VCPUS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Vcpus(u8);

impl Vcpus {
    /// `n` vCPUs, or the error that names the limit.
    pub fn new(n: u64) -> Result<Self, LimitError> {
        if (u64::from(MIN_VCPUS)..=u64::from(MAX_VCPUS)).contains(&n) {
            // In range, so at most MAX_VCPUS (32): fits a u8.
            Ok(Vcpus(n as u8))
        } else {
            Err(LimitError::Vcpus { got: n })
        }
    }

    /// Parses a decimal count and checks it (a command-line value parser).
    pub fn parse(s: &str) -> Result<Self, String> {
        let n: u64 = s
            .trim()
            .parse()
            .map_err(|_| format!("`{s}` is not a whole number of vCPUs"))?;
        Vcpus::new(n).map_err(|e| e.to_string())
    }

    /// The count.
    pub fn get(self) -> u8 {
        self.0
    }
}

impl fmt::Display for Vcpus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A guest memory size: whole MiB within [`MIN_MEM_MIB`]`..=`[`MAX_MEM_MIB`], held as bytes.
/// The one memory quantity of every crate: MiB appear only at the command line
/// ([`GuestMem::parse`]) and in human text ([`fmt::Display`]); everything else asks for
/// [`GuestMem::bytes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GuestMem(u64);

/// Bytes in one MiB.
const MIB: u64 = 1 << 20;

impl GuestMem {
    /// `mib` MiB, or the error that names the limit.
    pub fn from_mib(mib: u64) -> Result<Self, LimitError> {
        if mib < MIN_MEM_MIB {
            Err(LimitError::MemTooSmall { got: mib })
        } else if mib > MAX_MEM_MIB {
            Err(LimitError::MemTooLarge { got: mib })
        } else {
            // At most MAX_MEM_MIB (2^20) MiB: 2^40 bytes, no overflow.
            Ok(GuestMem(mib * MIB))
        }
    }

    /// `bytes`, a whole number of MiB within the limits (a value read back from a VMM
    /// argument, a report or a bundle), or the error that names the limit.
    pub fn from_bytes(bytes: u64) -> Result<Self, LimitError> {
        if bytes % MIB != 0 {
            return Err(LimitError::MemNotWholeMib { bytes });
        }
        GuestMem::from_mib(bytes / MIB)
    }

    /// Parses a decimal MiB count and checks it (a command-line value parser).
    pub fn parse(s: &str) -> Result<Self, String> {
        let n: u64 = s
            .trim()
            .parse()
            .map_err(|_| format!("`{s}` is not a whole number of MiB"))?;
        GuestMem::from_mib(n).map_err(|e| e.to_string())
    }

    /// Whole MiB (for the command line and human text only).
    pub fn mib(self) -> u64 {
        self.0 / MIB
    }

    /// Bytes.
    pub fn bytes(self) -> u64 {
        self.0
    }
}

/// 2 MiB, the page of the hugetlb backing.
pub const HUGE_PAGE_2M: u64 = 2 << 20;

/// A guest larger than the host's RAM: the VMM refuses it (`memory-too-large`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("guest memory of {requested_mib} MiB exceeds the host's RAM ({host_mib} MiB)")]
pub struct ExceedsHostRam {
    pub requested_mib: u64,
    pub host_mib: u64,
}

impl GuestMem {
    /// The host-RAM rule, one definition for the VMM (at every launch) and the bench
    /// (before the first): the guest's memory may not exceed the host's MemTotal
    /// (`host_total_bytes`).
    pub fn fits_host(self, host_total_bytes: u64) -> Result<(), ExceedsHostRam> {
        if self.bytes() > host_total_bytes {
            return Err(ExceedsHostRam {
                requested_mib: self.mib(),
                host_mib: host_total_bytes / (1 << 20),
            });
        }
        Ok(())
    }

    /// The fewest 2 MiB hugetlb pages one guest of this size maps: every byte of its RAM on
    /// a 2 MiB page (the VMM's layout rounds its mappings up and adds the legacy hole, so a
    /// launch needs this many or a page or two more).
    pub fn huge_pages_at_least(self) -> u64 {
        self.bytes().div_ceil(HUGE_PAGE_2M)
    }
}

/// `#[serde(with = "truecold_proto::limits::serde_mib")]`: a [`GuestMem`] as a JSON field of
/// whole MiB (the VMM report's `config.mem_mib`, whose bytes every bundle keeps), checked
/// against the limits when read back.
pub mod serde_mib {
    use super::GuestMem;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(m: &GuestMem, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(m.mib())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<GuestMem, D::Error> {
        let mib = u64::deserialize(d)?;
        GuestMem::from_mib(mib).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for GuestMem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} MiB", self.mib())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_ram_rule_and_the_hugetlb_lower_bound() {
        let m = |mib| GuestMem::from_mib(mib).unwrap();
        let gib = 1u64 << 30;
        assert_eq!(m(1024).fits_host(gib), Ok(()));
        assert_eq!(
            m(1025).fits_host(gib),
            Err(ExceedsHostRam {
                requested_mib: 1025,
                host_mib: 1024
            })
        );
        let e = m(200_000).fits_host(24 * gib).unwrap_err();
        assert_eq!(
            e.to_string(),
            "guest memory of 200000 MiB exceeds the host's RAM (24576 MiB)"
        );
        assert_eq!(m(4).huge_pages_at_least(), 2);
        assert_eq!(m(5).huge_pages_at_least(), 3);
        assert_eq!(m(1024).huge_pages_at_least(), 512);
    }

    #[test]
    fn vcpu_edges() {
        assert_eq!(Vcpus::new(0), Err(LimitError::Vcpus { got: 0 }));
        assert_eq!(Vcpus::new(1).map(Vcpus::get), Ok(1));
        assert_eq!(Vcpus::new(32).map(Vcpus::get), Ok(32));
        assert_eq!(Vcpus::new(33), Err(LimitError::Vcpus { got: 33 }));
        assert_eq!(
            Vcpus::new(u64::MAX),
            Err(LimitError::Vcpus { got: u64::MAX })
        );
        // 256 would wrap to 0 in a u8: the check is on the wide value.
        assert!(Vcpus::new(256).is_err());
        let e = Vcpus::parse("33").unwrap_err();
        assert!(e.contains("--vcpus 33") && e.contains("1 to 32"), "{e}");
        assert!(Vcpus::parse("two").unwrap_err().contains("`two`"));
        assert!(Vcpus::parse("-1").is_err());
        assert_eq!(Vcpus::parse("8").map(Vcpus::get), Ok(8));
        assert_eq!(LimitError::Vcpus { got: 0 }.kind(), "invalid-vcpus");
    }

    #[test]
    fn memory_edges() {
        assert_eq!(
            GuestMem::from_mib(0),
            Err(LimitError::MemTooSmall { got: 0 })
        );
        assert_eq!(
            GuestMem::from_mib(3),
            Err(LimitError::MemTooSmall { got: 3 })
        );
        let min = GuestMem::from_mib(4).unwrap();
        assert_eq!((min.mib(), min.bytes()), (4, 4 << 20));
        let max = GuestMem::from_mib(MAX_MEM_MIB).unwrap();
        assert_eq!(max.bytes(), 1 << 40);
        assert_eq!(
            GuestMem::from_mib(MAX_MEM_MIB + 1),
            Err(LimitError::MemTooLarge {
                got: MAX_MEM_MIB + 1
            })
        );
        // A value whose byte count overflows u64 is just "too large".
        assert!(matches!(
            GuestMem::from_mib(u64::MAX >> 10),
            Err(LimitError::MemTooLarge { .. })
        ));
        let e = GuestMem::parse("1").unwrap_err();
        assert!(e.contains("--mem-mib 1") && e.contains("4 MiB"), "{e}");
        let e = GuestMem::parse("99999999").unwrap_err();
        assert!(e.contains("1048576 MiB"), "{e}");
        assert!(GuestMem::parse("16G").unwrap_err().contains("`16G`"));
        assert_eq!(
            LimitError::MemTooSmall { got: 0 }.kind(),
            "memory-too-small"
        );
        assert_eq!(
            LimitError::MemTooLarge { got: 0 }.kind(),
            "memory-too-large"
        );
        // Bytes round-trip; a byte count off the MiB grid or outside the limits is refused.
        let m = GuestMem::from_mib(16384).unwrap();
        assert_eq!(GuestMem::from_bytes(m.bytes()), Ok(m));
        assert_eq!(m.to_string(), "16384 MiB");
        assert_eq!(
            GuestMem::from_bytes((16 << 20) + 1),
            Err(LimitError::MemNotWholeMib {
                bytes: (16 << 20) + 1
            })
        );
        assert_eq!(
            GuestMem::from_bytes(2 << 20),
            Err(LimitError::MemTooSmall { got: 2 })
        );
        assert!(GuestMem::from_bytes(!((1u64 << 20) - 1)).is_err());
    }

    #[test]
    fn memory_as_a_json_field_of_mib() {
        #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
        struct C {
            #[serde(rename = "mem_mib", with = "serde_mib")]
            mem: GuestMem,
        }
        let c = C {
            mem: GuestMem::from_mib(16384).unwrap(),
        };
        let j = serde_json::to_string(&c).unwrap();
        assert_eq!(j, r#"{"mem_mib":16384}"#);
        assert_eq!(serde_json::from_str::<C>(&j).unwrap(), c);
        let e = serde_json::from_str::<C>(r#"{"mem_mib":2}"#).unwrap_err();
        assert!(e.to_string().contains("below the minimum"), "{e}");
    }
}
