//! [`CampaignPlan`]: one campaign, checked — what `truecold run` runs
//! ([`CampaignPlan::from_cli`]), and what a tune arm, a bisect step or a phase in L1 builds
//! in code ([`CampaignPlan::sequential`] and its builders).

use super::arg_error::ArgError;
use super::common_flags::{deadline_ms, instrumentation};
use super::guest::{GuestSpec, Target};
use super::run_flags::{
    arm_backing, arm_guests, arms, check_parity, own_kernel, schedule, stop_after,
};
use crate::artifacts::own_kernel::OwnKernel;
use crate::attribution::instrumentation::Instrumentation;
use crate::campaign::schedule::{Schedule, ScheduleError};
use crate::cli::{RunArgs, DEFAULT_SEED};
use std::path::PathBuf;
use truecold_proto::kinds::{Backing, Engine, RamLayout};

/// The peer engines' binaries as given (each located by `crate::engines::arm_setup::find_binary`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineBins {
    pub firecracker: Option<PathBuf>,
    pub cloud_hypervisor: Option<PathBuf>,
    pub qemu: Option<PathBuf>,
}

/// One campaign, checked: what `truecold run` runs.
#[derive(Clone, Debug, PartialEq)]
pub struct CampaignPlan {
    pub target: Target,
    pub guest: GuestSpec,
    pub schedule: Schedule,
    /// The per-launch deadline in effect, ms.
    pub deadline_ms: u64,
    /// Past the deadline, how long the VMM may take to print its report, ms.
    pub kill_grace_ms: u64,
    pub drop_caches: bool,
    /// Attribution launches after the measured campaign (0: none).
    pub attribution: u64,
    /// How they measure the boot.
    pub instrument: Instrumentation,
    /// The parity contract.
    pub parity: bool,
    /// Reliability tests only: every parity launch's tap name.
    pub inject_tap_name: Option<String>,
    /// Engine arms, in the order given; empty for a truecold-only campaign.
    pub engines: Vec<Engine>,
    /// Arms whose backing is set on its own (`--arm-backing`), over [`GuestSpec::backing`].
    pub arm_backing: Vec<(Engine, Backing)>,
    /// Arms that boot a kernel of their own (`--arm-kernel-config`): built before the
    /// campaign into a guest directory, which then becomes the arm's `arm_guest_dir`.
    pub arm_kernel: Vec<(Engine, OwnKernel)>,
    /// Arms that boot the guest of their own directory (`--arm-guest-dir`), not the
    /// campaign's.
    pub arm_guest_dir: Vec<(Engine, PathBuf)>,
    /// The engines campaign's order seed; with `Target::Nested`, L1's QEMU `-seed` too.
    pub seed: u64,
    pub engine_bins: EngineBins,
    /// The bundle directory (`None`: the default under `results/`).
    pub out: Option<PathBuf>,
    /// The truecold-vmm binary (`None`: next to this binary).
    pub vmm: Option<PathBuf>,
    /// The guest artifacts (`None`: $TRUECOLD_GUEST_DIR, else out/guest).
    pub guest_dir: Option<PathBuf>,
    /// The user's own kernel (`--kernel-config`): built into a guest directory of its own
    /// before the campaign, which then runs from it.
    pub own_kernel: Option<OwnKernel>,
    /// The fail-fast rule's K (`--stop-after`, default
    /// [`truecold_proof::StopRule::DEFAULT_AFTER`]): `None` under `--keep-going` and where no
    /// rule runs (engines campaigns, the concurrent modes, tune arms, bisect steps).
    pub stop_after: Option<u64>,
    /// L1's THP mode (`--l1-thp`, nested only; `None`: the harness's `madvise`).
    pub l1_thp: Option<truecold_nested::L1Thp>,
}

impl CampaignPlan {
    /// The plan `truecold run`'s arguments describe, every check made.
    pub fn from_cli(a: &RunArgs) -> Result<CampaignPlan, ArgError> {
        let engines = arms(a)?;
        let arm_backing = arm_backing(a, &engines)?;
        let (arm_kernel, arm_guest_dir) = arm_guests(a, &engines)?;
        check_parity(a, &engines)?;
        if a.probe && !a.cmdline_extra.is_empty() {
            return Err(ArgError::CmdlineExtraProbe);
        }
        if a.bzimage {
            for (bad, why) in [
                (a.probe, "the probe guest has no kernel (no --probe)"),
                (
                    !engines.is_empty(),
                    "not in an engines campaign (no --engine)",
                ),
                (a.parity, "not under the parity contract (no --parity)"),
            ] {
                if bad {
                    return Err(ArgError::BzImage(why));
                }
            }
        }
        let schedule = schedule(a)?;
        let stop_after = stop_after(a, &schedule, &engines)?;
        let target = match (a.probe, a.linux, a.nested) {
            (true, _, _) => Target::Probe,
            (_, true, _) => Target::Linux,
            (_, _, true) => Target::Nested,
            _ => Target::Auto,
        };
        if a.l1_thp.is_some() && target != Target::Nested {
            return Err(ArgError::L1ThpNeedsNested);
        }
        let cpu_platform = truecold_proto::platform::CpuPlatform {
            packages: a.packages,
            invariant_tsc: a.invariant_tsc,
        };
        cpu_platform
            .check(a.guest.vcpus.get())
            .map_err(ArgError::Platform)?;
        Ok(CampaignPlan {
            target,
            guest: GuestSpec {
                vcpus: a.guest.vcpus,
                mem: a.guest.mem,
                backing: a.backing,
                cmdline_extra: a.cmdline_extra.clone(),
                console: a.console,
                bzimage: a.bzimage,
                ram_layout: a
                    .ram_layout
                    .unwrap_or_else(|| RamLayout::default_for(a.guest.mem)),
                pin_vcpus: a.pin_vcpus,
                cpu_platform,
            },
            schedule,
            deadline_ms: deadline_ms(a.deadline_ms, a.nested),
            kill_grace_ms: a.kill_grace_ms,
            drop_caches: a.drop_caches,
            attribution: a.attribution,
            instrument: instrumentation(&a.instrument)?,
            parity: a.parity,
            inject_tap_name: a.inject_tap_name.clone(),
            engines,
            arm_backing,
            arm_kernel,
            arm_guest_dir,
            seed: a.seed,
            engine_bins: EngineBins {
                firecracker: a.firecracker.clone(),
                cloud_hypervisor: a.cloud_hypervisor.clone(),
                qemu: a.qemu.clone(),
            },
            out: a.out.clone(),
            vmm: a.vmm.clone(),
            guest_dir: a.guest_dir.clone(),
            own_kernel: own_kernel(a)?,
            stop_after,
            l1_thp: a.l1_thp,
        })
    }

    /// The plan of `truecold run <words>` (tests: the words as a user types them).
    #[cfg(test)]
    pub(crate) fn of_words(words: &[&str]) -> Result<CampaignPlan, ArgError> {
        let mut v = vec!["truecold", "run"];
        v.extend_from_slice(words);
        let a = crate::cli::Cli::try_parse_run(v)
            .unwrap_or_else(|e| panic!("`truecold run {}`: {e}", words.join(" ")));
        CampaignPlan::from_cli(&a)
    }

    /// `n` sequential launches of `guest` (a tune arm, a bisect step, a phase in L1): no
    /// engine arms, no parity, no attribution, the default seed and paths until set.
    pub fn sequential(
        target: Target,
        guest: GuestSpec,
        n: u64,
        deadline_ms: u64,
        kill_grace_ms: u64,
    ) -> Result<CampaignPlan, ArgError> {
        if deadline_ms == 0 {
            return Err(ArgError::DeadlineZero);
        }
        let schedule = Schedule::Sequential { n };
        schedule.validate()?;
        Ok(CampaignPlan {
            target,
            guest,
            schedule,
            deadline_ms,
            kill_grace_ms,
            drop_caches: false,
            attribution: 0,
            instrument: Instrumentation::default(),
            parity: false,
            inject_tap_name: None,
            engines: Vec::new(),
            arm_backing: Vec::new(),
            arm_kernel: Vec::new(),
            arm_guest_dir: Vec::new(),
            seed: DEFAULT_SEED,
            engine_bins: EngineBins::default(),
            out: None,
            vmm: None,
            guest_dir: None,
            own_kernel: None,
            stop_after: None,
            l1_thp: None,
        })
    }

    /// The same plan with these paths.
    pub fn at(
        mut self,
        vmm: Option<PathBuf>,
        guest_dir: Option<PathBuf>,
        out: Option<PathBuf>,
    ) -> CampaignPlan {
        self.vmm = vmm;
        self.guest_dir = guest_dir;
        self.out = out;
        self
    }

    /// The same plan with `seed` (L1's QEMU seed in the nested harness).
    pub fn seeded(mut self, seed: u64) -> CampaignPlan {
        self.seed = seed;
        self
    }

    /// The same plan with `k` attribution launches.
    pub fn attributed(mut self, k: u64) -> CampaignPlan {
        self.attribution = k;
        self
    }

    pub fn nested(&self) -> bool {
        self.target.is_nested()
    }

    /// The backing `engine`'s launches get (`linux`: the guest is Linux, not the probe): its
    /// `--arm-backing`, else `--backing`, else the engine's own default
    /// ([`Backing::default_for`], one definition).
    pub fn backing_of(&self, engine: Engine, linux: bool) -> Backing {
        self.arm_backing
            .iter()
            .find(|(e, _)| *e == engine)
            .map(|(_, b)| *b)
            .or(self.guest.backing)
            .unwrap_or(Backing::default_for(engine, linux))
    }

    /// Every backing an arm of this campaign may get, whichever guest it boots (for the host
    /// checks made before the guest is known: only an asked-for backing can be `hugetlb`).
    pub fn asked_backings(&self) -> Vec<Backing> {
        self.guest
            .backing
            .into_iter()
            .chain(self.arm_backing.iter().map(|(_, b)| *b))
            .collect()
    }

    /// The per-launch deadline, ns.
    pub fn deadline_ns(&self) -> u64 {
        self.deadline_ms.saturating_mul(1_000_000)
    }

    /// The kill grace, ns.
    pub fn kill_grace_ns(&self) -> u64 {
        self.kill_grace_ms.saturating_mul(1_000_000)
    }

    /// The launches the schedule makes.
    pub fn planned(&self) -> Result<u64, ScheduleError> {
        self.schedule.validate()
    }
}
