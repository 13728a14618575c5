//! Each arm set up before the first launch: its binary found and its version read
//! ([`resolve`]), the guest every arm boots ([`guest_of`]), and each arm's launch on its
//! backing and guest ([`prepare`]).

use super::engines_error::{io, EnginesError};
use super::engines_spec::EnginesSpec;
use crate::artifacts::guest_files::{self, LinuxGuest};
use crate::plan::campaign_plan::CampaignPlan;
use std::path::{Path, PathBuf};
use truecold_engine::{Guest, Launch};
use truecold_proto::kinds::{Engine, HostKind};

/// The binary of `engine`: the flag, else the variable, else the defaults (see the flags'
/// help); a missing one names how to get it.
pub fn find_binary(engine: Engine, plan: &CampaignPlan) -> Result<PathBuf, EnginesError> {
    let flag = match engine {
        Engine::Truecold => {
            return guest_files::find_vmm(plan.vmm.as_deref()).map_err(|e| {
                EnginesError::BinaryMissing(truecold_engine::locate::Missing {
                    engine,
                    looked: e.to_string(),
                    how: truecold_engine::locate::how_to_get(engine),
                })
            })
        }
        Engine::Firecracker => plan.engine_bins.firecracker.as_deref(),
        Engine::CloudHypervisor => plan.engine_bins.cloud_hypervisor.as_deref(),
        Engine::QemuMicrovm => plan.engine_bins.qemu.as_deref(),
    };
    truecold_engine::locate::peer_binary(engine, flag).map_err(EnginesError::BinaryMissing)
}

/// `p` canonicalized, as text (`p` itself when it cannot be).
pub(super) fn absolute(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

/// The guest every arm boots, from the campaign's plan (with truecold-vmm's backing: each
/// arm's own is set by [`prepare`]).
pub fn guest_of(plan: &CampaignPlan, g: &LinuxGuest) -> Guest {
    Guest {
        kernel: PathBuf::from(absolute(&g.vmlinux)),
        initramfs: PathBuf::from(absolute(&g.initramfs)),
        vcpus: u32::from(plan.guest.vcpus.get()),
        mem: plan.guest.mem,
        backing: plan.backing_of(Engine::Truecold, true),
        cmdline_extra: plan.guest.cmdline_extra.clone(),
        ram_layout: plan.guest.ram_layout,
    }
}

/// One arm, checked and ready to launch.
#[derive(Clone, Debug)]
pub struct PreparedArm {
    pub engine: Engine,
    pub binary: PathBuf,
    /// The first line of `<binary> --version`.
    pub version: String,
    pub launch: Launch,
    /// The guest's kernel command line under this engine.
    pub cmdline: String,
    /// The guest this arm boots and its kernel's config (the campaign's, or the arm's own).
    pub lg: LinuxGuest,
    pub kernel_config: Vec<u8>,
    /// Whether the arm boots a guest of its own (`--arm-guest-dir`).
    pub own_guest: bool,
}

/// An engine's binary and what it says it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    pub engine: Engine,
    pub binary: PathBuf,
    /// The first line of `<binary> --version`, run once here.
    pub version: String,
}

/// Every arm's binary and version, checked before anything else: a missing binary, or one
/// that is not that engine, is an error naming how to get the right one.
pub fn resolve(arms: &[Engine], plan: &CampaignPlan) -> Result<Vec<Resolved>, EnginesError> {
    arms.iter()
        .map(|&e| {
            let binary = find_binary(e, plan)?;
            let version = truecold_engine::version::query(e, &binary)
                .map_err(|source| EnginesError::Version { engine: e, source })?;
            Ok(Resolved {
                engine: e,
                binary,
                version,
            })
        })
        .collect()
}

/// The guest of one arm: the Linux guest it boots (`own`: its own directory, not the
/// campaign's) and its kernel's config.
pub struct ArmGuest {
    pub lg: LinuxGuest,
    pub kernel_config: Vec<u8>,
    pub own: bool,
}

/// Every arm's launch, each on its backing in `spec` and its guest in `guests` (in the order
/// of `resolved`): a backing an engine cannot give is an error before anything runs.
pub fn prepare(
    resolved: &[Resolved],
    guest: &Guest,
    guests: Vec<ArmGuest>,
    spec: &EnginesSpec,
    work: &Path,
    host: HostKind,
) -> Result<Vec<PreparedArm>, EnginesError> {
    let mut out = Vec::new();
    for (r, ag) in resolved.iter().zip(guests) {
        let e = r.engine;
        let guest = &Guest {
            backing: spec.backing(e),
            kernel: PathBuf::from(absolute(&ag.lg.vmlinux)),
            initramfs: PathBuf::from(absolute(&ag.lg.initramfs)),
            ..guest.clone()
        };
        let dir = work.join(e.as_str());
        std::fs::create_dir_all(&dir).map_err(io("create directory", &dir))?;
        let launch = truecold_engine::launch(e, &r.binary, guest, &dir, host)
            .map_err(|source| EnginesError::Launch { engine: e, source })?;
        let cmdline = guest
            .cmdline(e)
            .map_err(|source| EnginesError::Launch { engine: e, source })?;
        out.push(PreparedArm {
            engine: e,
            binary: r.binary.clone(),
            version: r.version.clone(),
            launch,
            cmdline,
            lg: ag.lg,
            kernel_config: ag.kernel_config,
            own_guest: ag.own,
        });
    }
    Ok(out)
}
