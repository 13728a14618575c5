//! After a launch: [`verify_cleanup`] judges that nothing of it is left, and
//! [`remove_run_dir`] removes the launch's sockets and run directory (verified).
//!
//! What is judged ([`CleanupPlan`] names the launch's things; the harness's counts come from
//! the [`Snapshot`] taken before the launch):
//! - the VMM process is reaped: `/proc/<pid>` is gone, or belongs to a process that is not
//!   the harness's child (the pid was reused); a child still running or a zombie fails;
//! - the tap is gone: `/sys/class/net/<tap>` is absent (the VMM's tap dies with its fd);
//! - the per-launch image, each Unix socket and the run directory are absent (`lstat`);
//! - the harness holds no more descriptors (`/proc/self/fd`), threads (`Threads:`) and
//!   memory mappings (`/proc/self/maps` lines) than in the before-snapshot. A thread count
//!   above it is read again every 2 ms for up to 100 ms before it stands (as
//!   [`Snapshot::take_after`]: a thread just joined can still be listed). A count unreadable
//!   in either reading is not judged (the residue rule of `truecold_proof::residue`).
//!
//! The harness-wide counts are only meaningful when the before-snapshot was taken with the
//! harness in the same state as after this launch: with one launch in flight at a time
//! (sequential), a snapshot taken just before it. With concurrent launches, another
//! launch's descriptors and threads are counted too. glibc keeps the stacks of exited
//! threads mapped for reuse (its stack cache) and a thread's malloc arena stays mapped:
//! the first launch that starts a thread can raise the mappings for good, so take the
//! before-snapshot after the launcher's threads have run once (a warm-up launch) or judge
//! mappings from the second launch on.

use super::workspace_clone::{verify_gone, RemoveError};
use crate::checks::snapshot::{maps_count, stat_parent_and_state, Snapshot};
use std::io;
use std::path::{Path, PathBuf};
use truecold_proto::measure::now_ns;

/// What one launch made that must be gone after it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanupPlan {
    /// The VMM process (`None`: never spawned).
    pub vmm_pid: Option<u32>,
    /// The launch's tap (`None`: no network).
    pub tap: Option<String>,
    /// The per-launch workspace image.
    pub image: Option<PathBuf>,
    /// The launch's run directory.
    pub run_dir: Option<PathBuf>,
    /// The Unix sockets the launch listened on (e.g. `<run_dir>/v.sock_1024`).
    pub sockets: Vec<PathBuf>,
}

/// One thing left behind.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CleanupFailure {
    #[error("the VMM (pid {pid}) is still a child of the harness (state {state}): not reaped")]
    VmmNotReaped { pid: u32, state: char },
    #[error("the tap `{tap}` is still present (/sys/class/net/{tap})")]
    TapPresent { tap: String },
    #[error("`{tap}` is not an interface name: its absence cannot be checked")]
    BadTapName { tap: String },
    #[error("the per-launch image {} is still present", path.display())]
    ImagePresent { path: PathBuf },
    #[error("the socket {} is still present", path.display())]
    SocketPresent { path: PathBuf },
    #[error("the run directory {} is still present", path.display())]
    RunDirPresent { path: PathBuf },
    #[error("the harness holds {after} descriptors after the launch, {before} before")]
    FdsLeaked { before: u64, after: u64 },
    #[error("the harness has {after} threads after the launch, {before} before")]
    ThreadsLeaked { before: u64, after: u64 },
    #[error("the harness has {after} memory mappings after the launch, {before} before")]
    MapsLeaked { before: u64, after: u64 },
    #[error("cannot check that {} is gone: {error}", path.display())]
    Unreadable { path: PathBuf, error: String },
}

impl CleanupFailure {
    /// A short stable name (a column's spelling).
    pub fn name(&self) -> &'static str {
        match self {
            CleanupFailure::VmmNotReaped { .. } => "vmm_not_reaped",
            CleanupFailure::TapPresent { .. } => "tap_present",
            CleanupFailure::BadTapName { .. } => "bad_tap_name",
            CleanupFailure::ImagePresent { .. } => "image_present",
            CleanupFailure::SocketPresent { .. } => "socket_present",
            CleanupFailure::RunDirPresent { .. } => "run_dir_present",
            CleanupFailure::FdsLeaked { .. } => "fds_leaked",
            CleanupFailure::ThreadsLeaked { .. } => "threads_leaked",
            CleanupFailure::MapsLeaked { .. } => "maps_leaked",
            CleanupFailure::Unreadable { .. } => "unreadable",
        }
    }
}

/// The verdict on one launch's cleanup (the row's `cleanup_ok`, `cleanup_ns`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CleanupOutcome {
    /// No failure.
    pub ok: bool,
    /// The verification's own duration, ns (the thread re-reads included).
    pub ns: u64,
    pub failures: Vec<CleanupFailure>,
}

/// The harness's own counts (`None`: unreadable).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HarnessCounts {
    pub fds: Option<u64>,
    pub threads: Option<u64>,
    pub maps: Option<u64>,
}

impl HarnessCounts {
    /// The before-snapshot's counts.
    pub fn of(s: &Snapshot) -> HarnessCounts {
        HarnessCounts {
            fds: s.residue.harness_fds,
            threads: s.residue.harness_threads,
            maps: s.harness_maps,
        }
    }

    /// Reads the counts now, by the same rules as [`crate::checks::snapshot::residue_reading`] and
    /// [`maps_count`] (without its scan of every process).
    pub fn now() -> HarnessCounts {
        HarnessCounts {
            fds: fd_count(),
            threads: thread_count(),
            maps: maps_count(),
        }
    }
}

/// Entries of `/proc/self/fd`, less the directory handle being read (as
/// [`crate::checks::snapshot::residue_reading`] counts them).
fn fd_count() -> Option<u64> {
    std::fs::read_dir("/proc/self/fd")
        .ok()
        .map(|rd| rd.count().saturating_sub(1) as u64)
}

/// `Threads:` of `/proc/self/status`.
fn thread_count() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    truecold_proof::residue::proc_field(&status, "Threads", false)
}

/// The counts that grew from `before` to `after` (pure, for tests). Unreadable in either:
/// not judged.
pub fn judge_counts(before: &HarnessCounts, after: &HarnessCounts) -> Vec<CleanupFailure> {
    let mut out = Vec::new();
    let grew = |b: Option<u64>, a: Option<u64>| match (b, a) {
        (Some(b), Some(a)) if a > b => Some((b, a)),
        _ => None,
    };
    if let Some((before, after)) = grew(before.fds, after.fds) {
        out.push(CleanupFailure::FdsLeaked { before, after });
    }
    if let Some((before, after)) = grew(before.threads, after.threads) {
        out.push(CleanupFailure::ThreadsLeaked { before, after });
    }
    if let Some((before, after)) = grew(before.maps, after.maps) {
        out.push(CleanupFailure::MapsLeaked { before, after });
    }
    out
}

/// The state of `pid` when it is a child of this process (`None`: gone, or someone else's).
fn our_child_state(pid: u32) -> Option<char> {
    // Gone (ENOENT, or ESRCH while it exits): not ours any more.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (ppid, state) = stat_parent_and_state(&stat)?;
    (ppid == std::process::id()).then_some(state)
}

/// `Ok(true)` when `lstat(path)` finds something, `Ok(false)` when not.
fn present(path: &Path) -> Result<bool, CleanupFailure> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(CleanupFailure::Unreadable {
            path: path.into(),
            error: e.to_string(),
        }),
    }
}

/// Judges one launch's cleanup (see the module doc). Reads only; removes nothing.
pub fn verify_cleanup(plan: &CleanupPlan, before: &Snapshot) -> CleanupOutcome {
    let t0 = now_ns();
    let mut failures = Vec::new();
    if let Some(pid) = plan.vmm_pid {
        if let Some(state) = our_child_state(pid) {
            failures.push(CleanupFailure::VmmNotReaped { pid, state });
        }
    }
    if let Some(tap) = &plan.tap {
        if truecold_proto::parity::check_ifname(tap).is_err() {
            failures.push(CleanupFailure::BadTapName { tap: tap.clone() });
        } else {
            match present(&Path::new("/sys/class/net").join(tap)) {
                Ok(true) => failures.push(CleanupFailure::TapPresent { tap: tap.clone() }),
                Ok(false) => {}
                Err(f) => failures.push(f),
            }
        }
    }
    let mut check = |path: &Path, left: fn(PathBuf) -> CleanupFailure| match present(path) {
        Ok(true) => failures.push(left(path.into())),
        Ok(false) => {}
        Err(f) => failures.push(f),
    };
    if let Some(image) = &plan.image {
        check(image, |path| CleanupFailure::ImagePresent { path });
    }
    for s in &plan.sockets {
        check(s, |path| CleanupFailure::SocketPresent { path });
    }
    if let Some(dir) = &plan.run_dir {
        check(dir, |path| CleanupFailure::RunDirPresent { path });
    }
    let base = HarnessCounts::of(before);
    let mut now = HarnessCounts::now();
    for _ in 0..50 {
        match (now.threads, base.threads) {
            (Some(n), Some(b)) if n > b => {}
            _ => break,
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        now.threads = thread_count();
    }
    failures.extend(judge_counts(&base, &now));
    CleanupOutcome {
        ok: failures.is_empty(),
        ns: now_ns().saturating_sub(t0),
        failures,
    }
}

/// Removes the launch's `sockets` (each a file in `dir`, already gone is fine) and then
/// `dir` itself (which must then be empty: anything else left in it makes this fail), and
/// verifies both are gone.
pub fn remove_run_dir(dir: &Path, sockets: &[PathBuf]) -> Result<(), RemoveError> {
    for s in sockets {
        match std::fs::remove_file(s) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(RemoveError::Remove {
                    path: s.clone(),
                    source,
                })
            }
        }
        verify_gone(s)?;
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(RemoveError::Remove {
                path: dir.into(),
                source,
            })
        }
    }
    verify_gone(dir)
}

#[cfg(test)]
mod tests;
