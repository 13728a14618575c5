//! The host a campaign runs on, checked and read: before the first launch ([`preflight`]:
//! KVM and its kind, the VMM's per-launch rules checked once, the page cache), around the
//! campaign ([`snapshot`]: load, CPU time, the harness's residue), and as the bundle records
//! it ([`environment`]: the machine, the load, the warnings). Everything is read from /proc
//! and /sys; anything unreadable is recorded as such, never guessed.

pub mod environment;
pub mod preflight;
pub mod snapshot;

#[cfg(test)]
mod tests;
