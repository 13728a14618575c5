//! One campaign end to end, the machinery every campaign, tune phase and bisect step runs
//! through: what it is ([`spec`]), when each launch starts ([`schedule`]), one fresh
//! `truecold-vmm` per launch ([`process_launcher`]), the VMM's report read
//! ([`vmm_output`]) and turned into a row ([`sample`]), the rows staged as they come
//! ([`record`]), the run itself ([`execute`]), and `result.json` and the bundle
//! ([`bundle_out`]); the nested harness's parallel clock read for each success
//! ([`parallel`]); [`clock`] is the harness's own (sleeps, the UTC stamp of a directory
//! name).

pub mod bundle_out;
pub mod clock;
pub mod execute;
pub mod parallel;
pub mod process_launcher;
pub mod record;
pub mod sample;
pub mod schedule;
pub mod spec;
pub mod vmm_output;

#[cfg(test)]
mod tests;
