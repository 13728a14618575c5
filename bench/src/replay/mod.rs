//! `truecold replay`: a bundle's campaign run again from its own record. [`replay_run`] is
//! the entry; [`recorded`] finds, verifies and reads the record and spells its run line for
//! the replay, [`inputs`] holds the replay's files to the record's digests, [`replay_error`]
//! is the layer's one error. The verdict is `truecold_proof::replay`'s.

pub mod inputs;
pub mod recorded;
pub mod replay_error;
pub mod replay_run;

#[cfg(test)]
mod tests;
