//! The bench's side of the parity contract (issue 12; docs/parity.md): per-launch state,
//! workspace and cleanup, as library pieces the parity launcher calls.
//!
//! - [`state`]: the lifecycle table (SQLite, WAL + `synchronous = FULL`): each launch's row
//!   `CREATED → RUNNING → DESTROYED`, one committed transaction per transition, timed;
//!   exported as `state.csv` with its SHA-256.
//! - [`lifecycle`]: the rows, the canonical CSV and [`lifecycle::check_lifecycle`], the rule
//!   the verifier shares (pure).
//! - [`workspace_clone`]: the per-launch clone of the workspace image (reflink, else a sparse
//!   copy) and its verified removal.
//! - [`cleanup`]: after a launch, [`cleanup::verify_cleanup`] judges that nothing of it is
//!   left: the VMM reaped, the tap gone, the image, sockets and run directory removed, and
//!   the harness holding no more descriptors, threads or mappings than before.
//!
//! One launch, in order (the spec's "Bench" section): [`state::StateDb::created`] →
//! [`workspace_clone::clone_image`] → listen → spawn → [`state::StateDb::running`] → … →
//! reap → [`state::StateDb::destroyed`] → remove the image
//! ([`workspace_clone::remove_image`]), sockets and run directory
//! ([`cleanup::remove_run_dir`]) → [`cleanup::verify_cleanup`] (the row's
//! `cleanup_ok`, `cleanup_ns`).
//! - [`parity_launcher`]: the launch itself, in that order, one [`parity_launcher::ParityLauncher`]
//!   per arm (the parity and engines campaigns call it).

pub mod cleanup;
/// The lifecycle rows and rule, shared with the verifier (`truecold_proof::lifecycle`).
pub use truecold_proof::lifecycle;
pub mod parity_launcher;
pub mod state;
pub mod workspace_clone;
