//! The checked plans, each built once from its command's clap arguments (every cross-flag
//! check, default and parse here; an error is an [`arg_error::ArgError`]): a campaign's
//! ([`campaign_plan::CampaignPlan::from_cli`], or, for a tune arm or a bisect step, from
//! code: [`campaign_plan::CampaignPlan::sequential`]), a tune's and a tune phase's
//! ([`tune_plan`]), and the three bisect commands' ([`bisect_plan`]). Everything downstream
//! (the plain, engines, parity and nested campaigns, `tune`, `bisect`) reads a plan, never
//! the command line; [`explicit_args`] spells a campaign plan back as the `truecold run`
//! arguments that run it again.
//!
//! By concern: [`arg_error`] (the one error), [`guest`] (target and guest),
//! [`common_flags`] (the deadline, the instrumentation), [`run_flags`] (`truecold run`'s
//! cross-flag checks), [`campaign_plan`], [`kernel_plan`] (where kernels come from and go),
//! [`explicit_args`] (a plan spelt back as a command line), [`tune_plan`], [`bisect_plan`].

pub mod arg_error;
pub mod bisect_plan;
pub mod campaign_plan;
pub mod common_flags;
pub mod explicit_args;
pub mod fleet_plan;
pub mod guest;
pub mod kernel_plan;
pub mod replay_plan;
pub mod run_flags;
pub mod tune_plan;

#[cfg(test)]
mod tests;
