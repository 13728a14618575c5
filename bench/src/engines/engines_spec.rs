//! What an engines campaign is ([`EnginesSpec`]): its arms and their backings, rounds, seed,
//! guest, deadline and observer; each arm's campaign and row context, and the run order.

use crate::campaign::sample::RowContext;
use crate::campaign::schedule::Schedule;
use crate::campaign::spec::CampaignSpec;
use crate::plan::campaign_plan::CampaignPlan;
use truecold_proof::arms::ArmRef;
use truecold_proof::schema::{ContractKind, Observer};
use truecold_proto::kinds::{Backing, Engine, RamLayout};
use truecold_proto::limits::{GuestMem, Vcpus};

/// What the campaign is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnginesSpec {
    pub arms: Vec<Engine>,
    pub rounds: u64,
    pub seed: u64,
    pub vcpus: Vcpus,
    pub mem: GuestMem,
    /// Each arm's backing, in the order of `arms` ([`CampaignPlan::backing_of`]).
    pub backings: Vec<Backing>,
    /// truecold-vmm's RAM layout (`--ram-layout`): its arm's; a peer's arm records
    /// [`RamLayout::ABSENT`] ([`EnginesSpec::layout`]).
    pub ram_layout: RamLayout,
    pub deadline_ns: u64,
    pub kill_grace_ns: u64,
    /// Who stamps strict-ready: `serial` (an engines campaign) or `agent` (the parity
    /// contract: truecold-vmm alone, or engine arms interleaved like an engines campaign).
    pub observer: Observer,
    /// Engine arms were named (`--engine`/`--engines`): the campaign is a multi-arm
    /// directory whose arms take turns launch by launch (even one arm). Not for truecold-vmm
    /// alone under the parity contract: one plain sequential bundle.
    pub interleaved: bool,
}

impl EnginesSpec {
    /// The campaign `plan` describes, of `rounds` rounds of `arms`, observed by `observer`.
    pub fn of_plan(
        plan: &CampaignPlan,
        arms: Vec<Engine>,
        rounds: u64,
        observer: Observer,
    ) -> Self {
        EnginesSpec {
            rounds,
            seed: plan.seed,
            vcpus: plan.guest.vcpus,
            mem: plan.guest.mem,
            backings: arms.iter().map(|&e| plan.backing_of(e, true)).collect(),
            ram_layout: plan.guest.ram_layout,
            arms,
            deadline_ns: plan.deadline_ns(),
            kill_grace_ns: plan.kill_grace_ns(),
            observer,
            interleaved: !plan.engines.is_empty(),
        }
    }

    /// `engine`'s backing ([`EnginesSpec::backings`]; an engine that is not an arm: its own
    /// default).
    pub fn backing(&self, engine: Engine) -> Backing {
        self.arms
            .iter()
            .position(|&e| e == engine)
            .and_then(|i| self.backings.get(i).copied())
            .unwrap_or(Backing::linux_default(engine))
    }

    /// `engine`'s RAM layout, as its bundle records it: truecold-vmm's
    /// [`EnginesSpec::ram_layout`]; a peer's own ([`RamLayout::ABSENT`]: the layout is
    /// truecold-vmm's).
    pub fn layout(&self, engine: Engine) -> RamLayout {
        match engine {
            Engine::Truecold => self.ram_layout,
            _ => RamLayout::ABSENT,
        }
    }

    /// Whether every arm has the same backing.
    pub fn one_backing(&self) -> bool {
        self.backings.windows(2).all(|w| w[0] == w[1])
    }

    /// The arms as `arms.json` records them: each arm's backing declared where they differ.
    pub fn arm_refs(&self) -> Vec<ArmRef> {
        let one = self.one_backing();
        self.arms
            .iter()
            .zip(&self.backings)
            .map(|(&e, &b)| {
                let a = ArmRef::engine(e);
                if one {
                    a
                } else {
                    a.with_backing(b)
                }
            })
            .collect()
    }

    /// The backings, described for a person: one word when every arm has the same, else
    /// `engine backing` per arm.
    pub fn backings_label(&self) -> String {
        match self.backings.first() {
            Some(b) if self.backings.iter().all(|x| x == b) => b.as_str().to_string(),
            _ => self
                .arms
                .iter()
                .zip(&self.backings)
                .map(|(e, b)| format!("{e} {b}"))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// `engine`'s arm's campaign (a sequential Linux campaign of `rounds` launches), for
    /// `result.json`.
    pub fn campaign(&self, engine: Engine) -> CampaignSpec {
        CampaignSpec {
            schedule: Schedule::Sequential { n: self.rounds },
            contract: ContractKind::Linux,
            vcpus: self.vcpus,
            mem: self.mem,
            backing: self.backing(engine),
            ram_layout: self.layout(engine),
            cpu_platform: truecold_proto::platform::CpuPlatform::ABSENT,
            deadline_ns: self.deadline_ns,
            kill_grace_ns: self.kill_grace_ns,
            observer: self.observer,
            interleaved: self.interleaved,
            stop_after: None,
        }
    }

    /// What every row of `engine`'s arm shares.
    pub fn row_context(&self, engine: Engine) -> RowContext {
        RowContext {
            engine,
            ..self.campaign(engine).row_context()
        }
    }

    /// The run order, by arm name: `(round, engine)` in launch order.
    pub fn order(&self) -> Vec<(u64, Engine)> {
        truecold_engine::order(self.arms.len(), self.rounds, self.seed)
            .into_iter()
            .map(|(r, i)| (r, self.arms[i]))
            .collect()
    }
}
