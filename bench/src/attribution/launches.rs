//! The attribution launches themselves: K sequential launches after the measured campaign,
//! through the same launcher, classifier and `reports.jsonl` line as every campaign, turned
//! into `attribution.jsonl`.

use super::symbols::{function_table, lines};
use crate::campaign::execute::{execute, ExecuteError, Harness};
use crate::campaign::process_launcher::{ProcessLauncher, VmmCommand};
use crate::campaign::schedule::Schedule;
use crate::campaign::spec::CampaignSpec;
use crate::campaign::vmm_output;
use crate::terminal::progress::{Progress, Style};
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// Runs `k` sequential launches of `command` (already instrumented, see
/// [`super::instrumentation::Instrumentation`]) under `spec`'s contract, deadline and guest,
/// and returns `attribution.jsonl`: one [`truecold_proof::attribution::AttributionLine`] per
/// launch, in order, with the names of the initcall addresses read from `vmlinux`'s symbol
/// table (when given and readable; an address without a name stays as the guest sent it),
/// and the functions the RIP samples fall in (the same table).
pub fn run_for(
    spec: &CampaignSpec,
    command: &VmmCommand,
    k: u64,
    vmlinux: Option<&Path>,
    stop: &AtomicBool,
) -> Result<Vec<u8>, ExecuteError> {
    let mut aspec = spec.clone();
    aspec.schedule = Schedule::Sequential { n: k };
    let launcher = ProcessLauncher {
        command: command.clone(),
        deadline_ns: aspec.deadline_ns,
        kill_grace_ns: aspec.kill_grace_ns,
        from_intended: false,
    };
    let mut progress = Progress::new(std::io::stderr(), Style::detect(), "attribution", k);
    let harness = Harness::plain();
    let ex = execute(
        &aspec,
        &launcher,
        &vmm_output::observe_attempt,
        stop,
        &mut progress,
        &harness,
    )?;
    let table = vmlinux.map(function_table).unwrap_or_default();
    let reports = ex.reports.to_vec()?;
    Ok(lines(&reports, &table))
}
