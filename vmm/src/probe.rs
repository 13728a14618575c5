//! The embedded probe guest (built from vmm/probe/probe.S by build.rs) and what the host
//! expects from it: its ports, its summary layout and the checksum it computes.
use serde::{Deserialize, Serialize};

use crate::boot_params::E820Entry;
use crate::config::KernelSource;

/// The probe, entered through PVH like a Linux vmlinux.
pub static PROBE_ELF: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/probe.elf"));
/// The probe variant that never rings (spins after entering long mode).
pub static PROBE_SILENT_ELF: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/probe-silent.elf"));

/// The probe without a PVH note: entered through the 64-bit Linux boot protocol.
pub static PROBE_LINUX64_ELF: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/probe-linux64.elf"));

/// The probe that touches one byte per GiB ([`TOUCH_STRIDE_SPARSE`]) instead of per 2 MiB: the
/// large-memory backing tests check exact memory and the backing without faulting in a whole
/// THP-backed guest.
pub static PROBE_SPARSE_ELF: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/probe-sparse.elf"));

/// The hostile guest (vmm/probe/hostile.S, the probe built with `HOSTILE`): it speaks and
/// abuses the Linux guest's protocol. The tests (vmm/tests/hostile.rs) patch the case to run
/// into its control block, found by [`HOSTILE_MAGIC`], and boot it as a kernel file.
pub static PROBE_HOSTILE_ELF: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/probe-hostile.elf"));
/// The 8 bytes that open the hostile guest's control block: then `case`, `arg`, `next`
/// (little-endian u64 each) and 32 bytes of replayed binding.
pub const HOSTILE_MAGIC: &[u8; 8] = b"TCHOSTL1";

/// `outb`: an AP checks in with its APIC id.
pub const PORT_AP: u16 = 0x0f18;
/// `outsb`: the nonce echoed back.
pub const PORT_ECHO: u16 = 0x0f19;
/// `outsb`: [`SUMMARY_LEN`] bytes of summary.
pub const PORT_SUMMARY: u16 = 0x0f1a;
/// Bytes in the summary.
pub const SUMMARY_LEN: usize = 56;
/// First quad of the summary: "%TCPROB1".
pub const SUMMARY_MAGIC: u64 = 0x3142_4f52_5043_5425;
/// Bytes between the probe's touches (probe.S).
pub const TOUCH_STRIDE: u64 = 2 << 20;
/// Bytes between the sparse probe's touches (probe.S built with `SPARSE`).
pub const TOUCH_STRIDE_SPARSE: u64 = 1 << 30;

/// What the probe saw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeSummary {
    /// Sum of RAM entries in the memory map it was handed.
    pub ram_bytes: u64,
    /// Bytes touched (one per stride — 2 MiB, or 1 GiB for the sparse probe — of every RAM
    /// entry).
    pub touched: u64,
    /// Checksum over every memory-map entry (see [`checksum`]).
    pub checksum: u64,
    /// Touches that did not read back (or RAM beyond what it could map).
    pub bad: u64,
    /// APs that counted themselves in.
    pub aps: u64,
    /// GiB of address space it identity-mapped.
    pub map_gib: u64,
}

/// Why a summary is unusable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SummaryError {
    #[error("probe summary is {0} bytes, want {SUMMARY_LEN}")]
    Length(usize),
    #[error("probe summary magic {0:#x} is wrong")]
    Magic(u64),
}

impl ProbeSummary {
    /// Parses the bytes from [`PORT_SUMMARY`] (untrusted).
    pub fn parse(b: &[u8]) -> Result<Self, SummaryError> {
        if b.len() != SUMMARY_LEN {
            return Err(SummaryError::Length(b.len()));
        }
        let q = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i * 8..i * 8 + 8]);
            u64::from_le_bytes(a)
        };
        if q(0) != SUMMARY_MAGIC {
            return Err(SummaryError::Magic(q(0)));
        }
        Ok(ProbeSummary {
            ram_bytes: q(1),
            touched: q(2),
            checksum: q(3),
            bad: q(4),
            aps: q(5),
            map_gib: q(6),
        })
    }
}

/// The probe's checksum over a memory map: for each entry, `c = rol(c,7) ^ addr`,
/// `c = rol(c,7) ^ size`, `c = rol(c,7) ^ type` (pure; mirrors probe.S).
pub fn checksum(map: &[E820Entry]) -> u64 {
    map.iter().fold(0u64, |mut c, e| {
        c = c.rotate_left(7) ^ e.addr;
        c = c.rotate_left(7) ^ e.size;
        c.rotate_left(7) ^ u64::from(e.kind)
    })
}

/// Touches the probe must make: ceil(size / stride) per RAM entry (pure).
pub fn expected_touches(map: &[E820Entry], stride: u64) -> u64 {
    map.iter()
        .filter(|e| e.kind == 1)
        .map(|e| e.size.div_ceil(stride))
        .sum()
}

/// One AP check-in: which vCPU thread saw it, and the APIC id the AP reported.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApCheckin {
    pub vcpu: usize,
    pub apic_id: u8,
}

/// The probe's results next to what the host expects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeReport {
    pub summary: Option<ProbeSummary>,
    pub summary_error: Option<String>,
    pub expected_checksum: u64,
    pub expected_touched: u64,
    pub expected_aps: u64,
    pub ap_checkins: Vec<ApCheckin>,
    pub checksum_ok: bool,
    pub touched_ok: bool,
    pub ram_ok: bool,
    /// Every AP checked in once, from its own vCPU, with APIC id == vCPU index, and the
    /// probe counted them all.
    pub aps_ok: bool,
}

impl ProbeReport {
    /// Compares `summary` with the map handed to the guest, `vcpus` and the probe's touch
    /// `stride`.
    pub fn judge(
        summary: Result<ProbeSummary, SummaryError>,
        map: &[E820Entry],
        vcpus: u8,
        stride: u64,
        ap_checkins: Vec<ApCheckin>,
    ) -> Self {
        let expected_checksum = checksum(map);
        let expected_touched = expected_touches(map, stride);
        let expected_aps = u64::from(vcpus.saturating_sub(1));
        let ram: u64 = crate::boot_params::e820_ram(map);
        let mut ids: Vec<u8> = ap_checkins.iter().map(|c| c.apic_id).collect();
        ids.sort_unstable();
        let want: Vec<u8> = (1..vcpus).collect();
        let own = ap_checkins.iter().all(|c| c.vcpu == usize::from(c.apic_id));
        let (summary, summary_error) = match summary {
            Ok(s) => (Some(s), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let s = summary.as_ref();
        ProbeReport {
            checksum_ok: s.is_some_and(|s| s.checksum == expected_checksum),
            touched_ok: s.is_some_and(|s| s.touched == expected_touched && s.bad == 0),
            ram_ok: s.is_some_and(|s| s.ram_bytes == ram),
            aps_ok: s.is_some_and(|s| s.aps == expected_aps) && ids == want && own,
            summary,
            summary_error,
            expected_checksum,
            expected_touched,
            expected_aps,
            ap_checkins,
        }
    }

    /// All checks passed.
    pub fn ok(&self) -> bool {
        self.checksum_ok && self.touched_ok && self.ram_ok && self.aps_ok
    }
}

/// What the probe does under each kernel source.
impl KernelSource {
    /// Bytes between the probe's memory touches (`None` for a kernel file).
    pub fn touch_stride(&self) -> Option<u64> {
        match self {
            KernelSource::File(_) => None,
            KernelSource::ProbeSparse => Some(TOUCH_STRIDE_SPARSE),
            KernelSource::Probe | KernelSource::ProbeSilent | KernelSource::ProbeLinux64 => {
                Some(TOUCH_STRIDE)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(s: &ProbeSummary) -> Vec<u8> {
        [
            SUMMARY_MAGIC,
            s.ram_bytes,
            s.touched,
            s.checksum,
            s.bad,
            s.aps,
            s.map_gib,
        ]
        .iter()
        .flat_map(|q| q.to_le_bytes())
        .collect()
    }

    #[test]
    fn summary_roundtrip_and_errors() {
        let s = ProbeSummary {
            ram_bytes: 1,
            touched: 2,
            checksum: 3,
            bad: 0,
            aps: 1,
            map_gib: 4,
        };
        assert_eq!(ProbeSummary::parse(&bytes(&s)).unwrap(), s);
        assert_eq!(ProbeSummary::parse(&[0; 3]), Err(SummaryError::Length(3)));
        assert!(matches!(
            ProbeSummary::parse(&[0; SUMMARY_LEN]),
            Err(SummaryError::Magic(0))
        ));
    }

    #[test]
    fn judge_checks_everything() {
        let lay = |m| crate::memory::layout(m, crate::memory::RamLayout::AroundHole);
        let map = crate::boot_params::e820(
            &truecold_proto::limits::GuestMem::from_mib(128)
                .map(lay)
                .unwrap(),
            crate::memory::RamLayout::AroundHole,
        );
        assert_eq!(expected_touches(&map, TOUCH_STRIDE), 1 + 64);
        assert_eq!(expected_touches(&map, TOUCH_STRIDE_SPARSE), 1 + 1);
        let big = crate::boot_params::e820(
            &truecold_proto::limits::GuestMem::from_mib(16384)
                .map(lay)
                .unwrap(),
            crate::memory::RamLayout::AroundHole,
        );
        assert_eq!(
            expected_touches(&big, TOUCH_STRIDE_SPARSE),
            big.iter()
                .filter(|e| e.kind == 1)
                .map(|e| e.size.div_ceil(1 << 30))
                .sum::<u64>()
        );
        assert!(expected_touches(&big, TOUCH_STRIDE_SPARSE) <= 16 + 3);
        let good = ProbeSummary {
            ram_bytes: 128 << 20,
            touched: 65,
            checksum: checksum(&map),
            bad: 0,
            aps: 1,
            map_gib: 4,
        };
        let ap = vec![ApCheckin {
            vcpu: 1,
            apic_id: 1,
        }];
        assert!(ProbeReport::judge(Ok(good.clone()), &map, 2, TOUCH_STRIDE, ap.clone()).ok());
        let wrong_ap = vec![ApCheckin {
            vcpu: 0,
            apic_id: 1,
        }];
        assert!(!ProbeReport::judge(Ok(good.clone()), &map, 2, TOUCH_STRIDE, wrong_ap).ok());
        assert!(!ProbeReport::judge(Ok(good.clone()), &map, 2, TOUCH_STRIDE, vec![]).ok());
        let bad = ProbeSummary {
            checksum: 7,
            ..good
        };
        assert!(!ProbeReport::judge(Ok(bad), &map, 2, TOUCH_STRIDE, ap.clone()).ok());
        assert!(
            !ProbeReport::judge(Err(SummaryError::Length(0)), &map, 1, TOUCH_STRIDE, vec![]).ok()
        );
        // The sparse probe's 2 touches are right for its stride and wrong for the dense one.
        let sparse = ProbeSummary {
            touched: 2,
            ..good.clone()
        };
        assert!(
            ProbeReport::judge(Ok(sparse.clone()), &map, 2, TOUCH_STRIDE_SPARSE, ap.clone()).ok()
        );
        assert!(!ProbeReport::judge(Ok(sparse), &map, 2, TOUCH_STRIDE, ap).ok());
    }

    #[test]
    fn embedded_probe_is_a_pvh_elf() {
        assert!(PROBE_ELF.starts_with(b"\x7fELF"));
        assert!(PROBE_SILENT_ELF.starts_with(b"\x7fELF"));
        assert!(PROBE_LINUX64_ELF.starts_with(b"\x7fELF"));
        assert_ne!(PROBE_ELF, PROBE_SILENT_ELF);
        assert_ne!(PROBE_ELF, PROBE_LINUX64_ELF);
        assert!(PROBE_HOSTILE_ELF.starts_with(b"\x7fELF"));
        let magic = PROBE_HOSTILE_ELF
            .windows(HOSTILE_MAGIC.len())
            .filter(|w| w == HOSTILE_MAGIC)
            .count();
        assert_eq!(magic, 1, "the hostile guest's control block is found once");
    }
}
