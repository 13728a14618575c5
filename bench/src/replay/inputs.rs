//! A replay's inputs held to its record: each file the campaign will run on (the VMM, the
//! guest's kernel, initramfs, init and config; in the nested harness the L0 QEMU's version
//! line, the L1 kernel, L1's init and the static bench that runs the campaign in L1) found
//! where the campaign itself finds it, digested, and compared with what the bundle
//! recorded. Each difference is a [`Mismatch`]; any refuses the replay before anything
//! runs. A file the bundle does not record (L1's init and bench in a bundle written before
//! they were recorded, the engines tool) is digested and reported, never compared.

use super::recorded::Record;
use crate::artifacts::guest_files::{self, artifact_files, sha256_file};
use crate::checks::preflight::kvm_host;
use crate::plan::campaign_plan::CampaignPlan;
use std::fmt;
use std::path::PathBuf;
use truecold_proof::schema::ContractKind;
use truecold_proof::verify::escape_untrusted;

/// One input whose record and local value differ.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Mismatch {
    /// What it is (`vmm`, `vmlinux`, `L0 QEMU`, …).
    pub what: String,
    /// As the bundle recorded it (escaped for a terminal).
    pub recorded: String,
    /// As found here.
    pub here: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: recorded {}, here {}",
            self.what, self.recorded, self.here
        )
    }
}

/// The inputs, checked.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Inputs {
    /// Each input that matched: what, and its recorded value.
    pub matched: Vec<(String, String)>,
    /// Each that did not.
    pub mismatches: Vec<Mismatch>,
    /// Files the campaign runs on that the bundle does not record: what, path, sha256.
    pub unrecorded: Vec<(String, String, String)>,
}

impl Inputs {
    fn hold(&mut self, what: &str, recorded: Option<&str>, here: Result<String, String>) {
        let recorded = recorded.map(escape_untrusted);
        match (recorded, here) {
            (Some(r), Ok(h)) if r == h => self.matched.push((what.to_string(), r)),
            (r, h) => self.mismatches.push(Mismatch {
                what: what.to_string(),
                recorded: r.unwrap_or_else(|| "nothing".into()),
                here: h.unwrap_or_else(|e| e),
            }),
        }
    }
}

/// Checks every input of `plan` (the replay's campaign) against `record`.
pub fn check(record: &Record, plan: &CampaignPlan) -> Inputs {
    let r = record.result();
    let mut inputs = Inputs::default();
    let guest_dir = guest_files::guest_dir(plan.guest_dir.as_deref());
    let mut layout = truecold_nested::Layout::discover();
    layout.guest_dir = guest_dir.clone();
    let vmm: Result<PathBuf, String> = if plan.nested() {
        Ok(plan.vmm.clone().unwrap_or_else(|| layout.vmm.clone()))
    } else {
        guest_files::find_vmm(plan.vmm.as_deref()).map_err(|e| e.to_string())
    };
    let guest = match r.contract.kind {
        ContractKind::Probe => Ok(None),
        ContractKind::Linux if plan.guest.bzimage => {
            guest_files::linux_guest_bzimage(&guest_dir).map(Some)
        }
        ContractKind::Linux => guest_files::linux_guest(&guest_dir).map(Some),
    };
    match (vmm, guest) {
        (Ok(vmm), Ok(guest)) => {
            let files = artifact_files(&vmm, guest.as_ref());
            for (name, recorded) in &r.artifacts {
                let here = match files.iter().find(|(n, _)| n == name) {
                    Some((_, p)) => {
                        sha256_file(p).map_err(|e| format!("unreadable ({e}: {})", p.display()))
                    }
                    None => Err("no such input in this campaign".into()),
                };
                inputs.hold(name, Some(recorded), here);
            }
        }
        (vmm, guest) => {
            if let Err(e) = vmm {
                inputs.hold("vmm", r.artifacts.get("vmm").map(String::as_str), Err(e));
            }
            if let Err(e) = guest {
                inputs.hold(
                    "guest artifacts",
                    Some("the record's digests"),
                    Err(e.to_string()),
                );
            }
        }
    }
    if plan.nested() {
        let recorded = r.environment.nested.as_ref();
        match truecold_nested::L0Qemu::locate()
            .map_err(|e| e.to_string())
            .and_then(|l0| {
                truecold_nested::HarnessFacts::probe(&l0, &layout.l1_kernel, plan.seed)
                    .map_err(|e| e.to_string())
            }) {
            Ok(f) => {
                inputs.hold(
                    "L0 QEMU",
                    recorded.map(|n| n.l0_qemu.as_str()),
                    Ok(f.l0_qemu),
                );
                inputs.hold(
                    "L1 kernel",
                    recorded.and_then(|n| n.l1_kernel_sha256.as_deref()),
                    Ok(f.l1_kernel_sha256),
                );
            }
            Err(e) => inputs.hold("L0 QEMU and L1 kernel", Some("recorded"), Err(e)),
        }
        let held = [
            (
                "truecold-l1-init",
                &layout.l1_init,
                recorded.and_then(|n| n.l1_init_sha256.as_deref()),
            ),
            (
                "truecold (the bench in L1)",
                &layout.bench,
                recorded.and_then(|n| n.bench_sha256.as_deref()),
            ),
            ("truecold-engines", &layout.engines, None),
        ];
        for (what, p, rec) in held {
            let here = sha256_file(p).map_err(|e| format!("unreadable ({e})"));
            match rec {
                Some(rec) => inputs.hold(what, Some(rec), here),
                None => inputs.unrecorded.push((
                    what.to_string(),
                    p.display().to_string(),
                    here.unwrap_or_else(|e| e),
                )),
            }
        }
    } else {
        let here = kvm_host()
            .map(|(k, _)| k.as_str().to_string())
            .map_err(|e| e.to_string());
        inputs.hold("host kind", Some(r.environment.host_kind.as_str()), here);
    }
    inputs
}
