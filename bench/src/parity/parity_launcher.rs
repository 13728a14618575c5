//! One parity launch, in the contract's order: the lifecycle row CREATED, the per-launch
//! workspace clone, the per-launch run directory (agent socket) and tap name, the engine's
//! parity launch ([`truecold_engine::parity::launch`]) — after the request stamp the tap
//! where the bench makes it (Firecracker), the spawn, the RUNNING row committed right after
//! it (inside the window, before strict-ready can be declared) — the agent channel and the
//! network proof ([`truecold_engine::driver`]), then DESTROYED, the removal of everything
//! per-launch and the check that nothing is left ([`super::cleanup::verify_cleanup`]).
//!
//! Anything the harness fails at is typed on the row: `workspace_clone` (no image, so no
//! launch), `tap_create` (a tap the bench makes), `state_failed` (a lifecycle commit),
//! `cleanup_failed` (something left).

use super::cleanup::{remove_run_dir, verify_cleanup, CleanupPlan};
use super::state::StateDb;
use super::workspace_clone::{clone_image, remove_image};
use crate::checks::snapshot::Snapshot;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use truecold_engine::driver::{launch_once_with, Launched};
use truecold_engine::parity::tap_by_harness;
use truecold_engine::PerLaunch;
use truecold_engine::{Guest, Launch};
use truecold_host::Tap;
use truecold_proof::schema::Sample;
use truecold_proto::kinds::{Engine, ErrorKind};
use truecold_proto::measure::now_ns;
use truecold_proto::parity::{check_ifname, NetPair};
use truecold_proto::report::{CleanupReport, EngineRun};

/// What every parity launch of one arm shares.
pub struct ParityLauncher {
    /// The arm's strict launch (`truecold_engine::launch`); each launch is its parity form
    /// ([`truecold_engine::parity::launch`]).
    pub base: Launch,
    /// The parity guest (the parity kernel).
    pub guest: Guest,
    /// The workspace image each launch gets a clone of.
    pub base_image: PathBuf,
    /// Where the run directories are made (`<root>/<idx>/`).
    pub run_root: PathBuf,
    /// The network pair (sequential launches share slot 0: one tap at a time).
    pub pair: NetPair,
    pub state: RefCell<StateDb>,
    /// Reliability tests: every launch's tap name (`--inject-tap-name`).
    pub tap_override: Option<String>,
    pub mem: truecold_proto::limits::GuestMem,
    pub deadline_ns: u64,
    pub kill_grace_ns: u64,
}

/// One parity launch as it ran: the driver's view, and its row and evidence, final (the
/// harness's own failure applied, the cleanup in both).
pub struct ParityLaunched {
    pub launched: Launched,
    pub row: (Sample, EngineRun),
}

/// The per-launch tap name: `tc<pid mod 10^5><engine's initial><idx>` (at most 15 bytes for
/// idx < 10^7), so the arms of one campaign never share a name.
pub fn tap_name(engine: Engine, idx: u64) -> String {
    let tag = engine.as_str().chars().next().unwrap_or('x');
    format!(
        "tc{}{tag}{}",
        std::process::id() % 100_000,
        idx % 10_000_000
    )
}

/// Whether an interface named `name` exists.
fn interface_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

impl ParityLauncher {
    /// The launch's parity form, for `run_dir` and `tap`.
    pub fn launch_for(
        &self,
        run_dir: &Path,
        tap: &str,
    ) -> Result<Launch, truecold_engine::EngineError> {
        truecold_engine::parity::launch(
            &self.base,
            &self.guest,
            &PerLaunch {
                run_dir,
                tap,
                pair: self.pair,
            },
        )
    }

    /// Runs launch `idx`: see the module's order. Never panics; every failure is typed.
    /// `row` makes the reaped launch's row (and its evidence): its kind is the lifecycle's
    /// DESTROYED outcome (committed before the cleanup check, which can still fail the row).
    pub fn launch(
        &self,
        idx: u64,
        row: &dyn Fn(&Launched) -> (Sample, EngineRun),
    ) -> ParityLaunched {
        let before = Snapshot::take();
        let engine = self.base.engine;
        let run_dir = self.run_root.join(idx.to_string());
        let per = PerLaunch {
            run_dir: &run_dir,
            tap: "",
            pair: self.pair,
        };
        let image = per.image();
        let sockets = per.sockets();
        let tap = self
            .tap_override
            .clone()
            .unwrap_or_else(|| tap_name(engine, idx));
        // An interface of that name before the launch is not the launch's: there is no tap
        // of this launch to be gone after it (`--inject-tap-name lo`).
        let tap_preexisting = interface_exists(&tap);
        let launch_id = format!("{}-{}-{idx}", std::process::id(), engine.as_str());
        let mut commits: Vec<u64> = Vec::new();
        let state_err = |e: &dyn std::error::Error| {
            (
                ErrorKind::StateFailed,
                format!("lifecycle: {}", truecold_proto::measure::error_chain(e)),
            )
        };
        // CREATED (committed) before anything of the launch exists.
        if let Err(e) = self
            .state
            .borrow_mut()
            .created(idx, &launch_id, &tap, &image.display().to_string())
            .map(|t| commits.push(t.total_ns))
        {
            let launched =
                Launched::not_launched(engine, format!("lifecycle CREATED: {e}"), Vec::new());
            return ParityLaunched {
                row: failed_row(row(&launched), state_err(&e)),
                launched,
            };
        }
        let prepared = std::fs::create_dir_all(&run_dir)
            .and_then(|()| {
                // Searchable by a jailed truecold-vmm's user (bound into its jail), whatever
                // the umask.
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&run_dir, std::fs::Permissions::from_mode(0o755))
            })
            .map_err(|e| format!("run directory {}: {e}", run_dir.display()))
            .and_then(|()| check_ifname(&tap).map_err(|e| e.to_string()));
        let ready = prepared
            .clone()
            .map_err(|e| (ErrorKind::HarnessIo, e))
            .and_then(|()| {
                // The launch's own name taken (a tap some earlier process left): no launch
                // (an engine could attach to it; it would not be the launch's). Only the
                // reliability tests name an existing interface on purpose.
                if tap_preexisting && self.tap_override.is_none() {
                    return Err((
                        ErrorKind::TapCreate,
                        format!("the interface {tap} exists before the launch"),
                    ));
                }
                Ok(())
            })
            .and_then(|()| {
                self.launch_for(&run_dir, &tap).map_err(|e| {
                    (
                        ErrorKind::HarnessIo,
                        truecold_proto::measure::error_chain(&e),
                    )
                })
            })
            .and_then(|l| {
                clone_image(&self.base_image, &image)
                    .map(|c| (l, c))
                    .map_err(|e| {
                        (
                            ErrorKind::WorkspaceClone,
                            format!("workspace clone ({}): {e}", e.name()),
                        )
                    })
            });
        let mut vmm_pid: Option<u32> = None;
        let mut harness_tap = false;
        let (launched, clone_mode, clone_ns, mut harness_failure) = match ready {
            Err((kind, why)) => (
                Launched::not_launched(engine, why.clone(), Vec::new()),
                String::new(),
                0,
                Some((kind, why)),
            ),
            Ok((l, c)) => {
                let state = &self.state;
                let mut before_err: Option<(ErrorKind, String)> = None;
                let mut running_err: Option<String> = None;
                let launched = launch_once_with(
                    &l,
                    self.mem,
                    self.deadline_ns,
                    self.kill_grace_ns,
                    &mut || {
                        if !tap_by_harness(engine) {
                            return Ok(());
                        }
                        match Tap::create_persistent(&tap, self.pair.host(), NetPair::PREFIX) {
                            Ok(()) => {
                                harness_tap = true;
                                Ok(())
                            }
                            Err(e) => {
                                let m = truecold_proto::measure::error_chain(&e);
                                before_err = Some((ErrorKind::TapCreate, m.clone()));
                                Err(format!("the launch's tap: {m}"))
                            }
                        }
                    },
                    &mut |pid| {
                        vmm_pid = Some(pid);
                        match state.borrow_mut().running(idx) {
                            Ok(t) => {
                                commits.push(t.total_ns);
                                Ok(())
                            }
                            Err(e) => {
                                let m = truecold_proto::measure::error_chain(&e);
                                running_err = Some(m.clone());
                                Err(format!("lifecycle RUNNING: {m}"))
                            }
                        }
                    },
                );
                let failure = before_err
                    .or(running_err.map(|m| (ErrorKind::StateFailed, format!("lifecycle: {m}"))));
                (launched, c.mode.as_str().to_string(), c.ns, failure)
            }
        };
        // After the reap: DESTROYED, then everything per-launch removed and checked.
        let t0 = launched.reaped_ns;
        // The harness's own failure names the launch's end first (it is why the driver saw
        // none, or a killed one), then the driver's.
        let made = row(&launched);
        let outcome = harness_failure
            .as_ref()
            .map(|(k, _)| k.as_string())
            .or_else(|| (!made.0.ok).then(|| made.0.error_kind.clone()))
            .unwrap_or_else(|| super::lifecycle::OUTCOME_OK.to_string());
        let mut failures: Vec<String> = Vec::new();
        match self.state.borrow_mut().destroyed(idx, &outcome) {
            Ok(t) => commits.push(t.total_ns),
            Err(e) => {
                let f = state_err(&e);
                failures.push(f.1.clone());
                harness_failure.get_or_insert(f);
            }
        }
        if harness_tap {
            if let Err(e) = Tap::remove_persistent(&tap) {
                failures.push(format!(
                    "removing the launch's tap: {}",
                    truecold_proto::measure::error_chain(&e)
                ));
            }
        }
        if let Err(e) = remove_image(&image) {
            failures.push(format!("removing the workspace clone: {e}"));
        }
        if prepared.is_ok() {
            if let Err(e) = remove_run_dir(&run_dir, &sockets) {
                failures.push(format!("removing the run directory: {e}"));
            }
        }
        let checked = verify_cleanup(
            &CleanupPlan {
                vmm_pid,
                tap: (!tap_preexisting).then(|| tap.clone()),
                image: Some(image),
                run_dir: Some(run_dir),
                sockets,
            },
            &before,
        );
        failures.extend(
            checked
                .failures
                .iter()
                .map(|f| format!("{}: {f}", f.name())),
        );
        let ok = failures.is_empty();
        if !ok {
            harness_failure.get_or_insert((ErrorKind::CleanupFailed, failures.join("; ")));
        }
        let cleanup = CleanupReport {
            ok,
            ns: now_ns().saturating_sub(t0),
            failures,
            tap,
            clone_mode,
            clone_ns,
            state_commit_ns: commits,
        };
        let (mut s, mut run) = made;
        s.cleanup_ok = Some(cleanup.ok);
        s.cleanup_ns = Some(cleanup.ns);
        run.cleanup = Some(cleanup);
        let mut launched = launched;
        launched.run.cleanup = run.cleanup.clone();
        ParityLaunched {
            row: match harness_failure {
                Some(f) => failed_row((s, run), f),
                None => (s, run),
            },
            launched,
        }
    }
}

/// A row failed by the harness's own `failure`: it wins over the row's classification, but a
/// failed cleanup does not hide why a failed launch failed.
fn failed_row(
    (mut s, mut run): (Sample, EngineRun),
    (kind, why): (ErrorKind, String),
) -> (Sample, EngineRun) {
    if s.ok || kind != ErrorKind::CleanupFailed {
        s.ok = false;
        s.error_kind = kind.as_string();
        s.error_detail = why;
    }
    run.outcome.ok = s.ok;
    run.outcome.failure_kind = (!s.ok).then(|| s.error_kind.clone());
    run.outcome.failure = (!s.ok).then(|| s.error_detail.clone());
    (s, run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tap_names_are_interface_names() {
        for e in Engine::ALL {
            for idx in [0, 9, 123_456, 9_999_999, u64::MAX] {
                let t = tap_name(e, idx);
                assert!(check_ifname(&t).is_ok(), "{t}");
            }
        }
        assert_ne!(
            tap_name(Engine::Truecold, 3),
            tap_name(Engine::Firecracker, 3)
        );
    }
}
