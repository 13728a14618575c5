//! `truecold fleet`: a campaign or a tune's screen fanned out over a Slurm cluster as one
//! job array (docs/fleet.md). [`submit`] plans the shards and submits them, each array task
//! runs its [`shard`], [`status`] says what became of each, [`gather`] verifies and merges
//! them into one fleet directory (`truecold_proof::fleet`) and applies the merge rule;
//! [`slurm`] is the cluster through its own commands, [`fleet_dir`] the directory's paths,
//! [`fleet_error`] the layer's one error.

pub mod fleet_dir;
pub mod fleet_error;
pub mod gather;
pub mod shard;
pub mod slurm;
pub mod status;
pub mod submit;
