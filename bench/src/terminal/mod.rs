//! What the person at the terminal sees and does while `truecold` runs: notes and warnings
//! on stderr and `--quiet` ([`output`], with the crate's `note!` macro), the live progress
//! of a campaign ([`progress`]), and Ctrl-C ([`interrupt`]), which stops launching.

pub mod interrupt;
pub mod output;
pub mod progress;
