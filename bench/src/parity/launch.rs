//! One parity launch, in the contract's order: the lifecycle row CREATED, the per-launch
//! workspace clone, the per-launch run directory (agent socket) and tap name, the spawn of
//! truecold-vmm under `--transport vsock` with its RUNNING row committed right after the
//! spawn (inside the window, before strict-ready can be declared), the agent channel and the
//! network proof ([`truecold_engine::driver`]), then DESTROYED, the removal of everything
//! per-launch and the check that nothing is left ([`super::cleanup::verify_cleanup`]).
//!
//! Anything the harness fails at is typed on the row: `workspace_clone` (no image, so no
//! launch), `state_failed` (a lifecycle commit), `cleanup_failed` (something left).

use super::cleanup::{remove_run_dir, verify_cleanup, CleanupPlan};
use super::state::StateDb;
use super::workspace::{clone_image, remove_image};
use crate::host::Snapshot;
use std::cell::RefCell;
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use truecold_engine::driver::{launch_once_with, Launched};
use truecold_engine::{Agent, Launch};
use truecold_proof::schema::Sample;
use truecold_proto::kinds::ErrorKind;
use truecold_proto::measure::now_ns;
use truecold_proto::parity::{check_ifname, uds_port_path, NetPair, AGENT_PORT, TCP_PORT};
use truecold_proto::report::{CleanupReport, EngineRun, VmmOutput};
use truecold_vmm::virtio::setup::TAP_CREATE_FAILED;

/// The name of the hybrid vsock's socket in a launch's run directory (the agent listens on
/// `<it>_<AGENT_PORT>`).
pub const VSOCK_UDS: &str = "v.sock";
/// The per-launch workspace clone's name in the run directory.
pub const WORKSPACE_CLONE: &str = "workspace.img";

/// What every parity launch of a campaign shares.
pub struct ParityLauncher {
    /// truecold-vmm's launch (`truecold_engine::truecold::launch`): its `--transport` is set
    /// to `vsock` and the per-launch flags appended.
    pub base: Launch,
    /// The workspace image each launch gets a clone of.
    pub base_image: PathBuf,
    /// Where the run directories are made (`<root>/<idx>/`).
    pub run_root: PathBuf,
    /// The network pair (sequential launches share slot 0: one tap at a time).
    pub pair: NetPair,
    pub state: RefCell<StateDb>,
    /// Reliability tests: every launch's tap name (`--inject-tap-name`).
    pub tap_override: Option<String>,
    pub mem_bytes: u64,
    pub deadline_ns: u64,
    pub kill_grace_ns: u64,
}

/// One parity launch as it ran: the driver's view, and the harness's own failure if any
/// (typed; it wins over the row's classification).
pub struct ParityLaunched {
    pub launched: Launched,
    /// The launch's row and its evidence as `row` classified them (the evidence with the
    /// cleanup); the harness's own failure is not applied yet.
    pub row: (Sample, EngineRun),
    pub harness_failure: Option<(ErrorKind, String)>,
}

/// The per-launch tap name: `tc<pid mod 10^5>x<idx>` (at most 15 bytes for idx < 10^7).
pub fn tap_name(idx: u64) -> String {
    format!("tc{}x{}", std::process::id() % 100_000, idx % 10_000_000)
}

impl ParityLauncher {
    /// The VMM's arguments for one launch.
    pub fn args_for(&self, run_dir: &Path, tap: &str, image: &Path) -> Vec<String> {
        let mut args = self.base.args.clone();
        if let Some(i) = args.iter().position(|a| a == "--transport") {
            if let Some(v) = args.get_mut(i + 1) {
                *v = "vsock".into();
            }
        }
        for (k, v) in [
            ("--vsock-uds", run_dir.join(VSOCK_UDS).display().to_string()),
            ("--tap", tap.to_string()),
            ("--net-pair", self.pair.to_string()),
            ("--workspace", image.display().to_string()),
        ] {
            args.push(k.into());
            args.push(v);
        }
        args
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
        let run_dir = self.run_root.join(idx.to_string());
        let image = run_dir.join(WORKSPACE_CLONE);
        let tap = self.tap_override.clone().unwrap_or_else(|| tap_name(idx));
        let launch_id = format!("{}-{idx}", std::process::id());
        let engine = self.base.engine;
        let mut commits: Vec<u64> = Vec::new();
        let mut harness_failure: Option<(ErrorKind, String)> = None;
        let state_err = |e: &dyn std::error::Error| {
            (
                ErrorKind::StateFailed,
                format!("lifecycle: {}", truecold_proto::measure::error_chain(e)),
            )
        };
        // CREATED (committed) before anything of the launch exists.
        match self
            .state
            .borrow_mut()
            .created(idx, &launch_id, &tap, &image.display().to_string())
        {
            Ok(t) => commits.push(t.total_ns),
            Err(e) => {
                let launched =
                    Launched::not_launched(engine, format!("lifecycle CREATED: {e}"), Vec::new());
                return ParityLaunched {
                    row: row(&launched),
                    launched,
                    harness_failure: Some(state_err(&e)),
                };
            }
        }
        let prepared = std::fs::create_dir_all(&run_dir)
            .map_err(|e| format!("run directory {}: {e}", run_dir.display()))
            .and_then(|()| check_ifname(&tap).map_err(|e| e.to_string()));
        let cloned = prepared
            .clone()
            .map_err(|e| (ErrorKind::HarnessIo, e))
            .and_then(|()| {
                clone_image(&self.base_image, &image).map_err(|e| {
                    (
                        ErrorKind::WorkspaceClone,
                        format!("workspace clone ({}): {e}", e.name()),
                    )
                })
            });
        let mut vmm_pid: Option<u32> = None;
        let (mut launched, clone_mode, clone_ns) = match cloned {
            Err((kind, why)) => {
                harness_failure = Some((kind, why.clone()));
                (
                    Launched::not_launched(engine, why, Vec::new()),
                    String::new(),
                    0,
                )
            }
            Ok(c) => {
                let l = Launch {
                    args: self.args_for(&run_dir, &tap, &image),
                    agent: Some(Agent {
                        listen: uds_port_path(&run_dir.join(VSOCK_UDS), AGENT_PORT),
                        tcp: SocketAddrV4::new(self.pair.guest(), TCP_PORT),
                    }),
                    ..self.base.clone()
                };
                let state = &self.state;
                let mut running_err: Option<String> = None;
                let launched = launch_once_with(
                    &l,
                    self.mem_bytes,
                    self.deadline_ns,
                    self.kill_grace_ns,
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
                if let Some(m) = running_err {
                    harness_failure = Some((ErrorKind::StateFailed, format!("lifecycle: {m}")));
                }
                (launched, c.mode.as_str().to_string(), c.ns)
            }
        };
        // After the reap: DESTROYED, then everything per-launch removed and checked.
        let t0 = launched.reaped_ns;
        // The harness's own failure names the launch's end first (it is why the driver saw
        // none, or a killed one), then the driver's.
        let mut made = row(&launched);
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
        if let Err(e) = remove_image(&image) {
            failures.push(format!("removing the workspace clone: {e}"));
        }
        let sockets = vec![
            uds_port_path(&run_dir.join(VSOCK_UDS), AGENT_PORT),
            run_dir.join(VSOCK_UDS),
        ];
        if prepared.is_ok() {
            if let Err(e) = remove_run_dir(&run_dir, &sockets) {
                failures.push(format!("removing the run directory: {e}"));
            }
        }
        // A tap the VMM could not create is not its own (the name may be another
        // interface's): there is no tap of this launch to be gone.
        let made_no_tap = launched
            .run
            .vmm
            .as_ref()
            .and_then(|v| VmmOutput::parse(v.to_string().as_bytes()).ok())
            .is_some_and(|o| matches!(o, VmmOutput::Error(e) if e.error.kind == TAP_CREATE_FAILED));
        let checked = verify_cleanup(
            &CleanupPlan {
                vmm_pid,
                tap: (!made_no_tap).then(|| tap.clone()),
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
        launched.run.cleanup = Some(CleanupReport {
            ok,
            ns: now_ns().saturating_sub(t0),
            failures,
            tap,
            clone_mode,
            clone_ns,
            state_commit_ns: commits,
        });
        made.1.cleanup = launched.run.cleanup.clone();
        ParityLaunched {
            launched,
            row: made,
            harness_failure,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tap_names_are_interface_names() {
        for idx in [0, 9, 123_456, 9_999_999, u64::MAX] {
            let t = tap_name(idx);
            assert!(check_ifname(&t).is_ok(), "{t}");
        }
    }
}
