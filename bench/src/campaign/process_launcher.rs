//! The per-sample launcher: one fresh `truecold-vmm` process per sample, never reused,
//! never retried. The request stamp is taken immediately before the spawn. The sample's
//! deadline is one instant on CLOCK_MONOTONIC (its latency origin + the deadline), passed to
//! the VMM as `--deadline-at-ns`: the VMM's own timer, this launcher's kill (that instant
//! plus a short grace for the VMM to print its own report) and the classifier all judge
//! from the same origin.
//!
//! The launcher only runs the process and keeps what it printed; turning that into a
//! bundle row is [`crate::campaign::sample`]'s job, so another launcher (the nested harness) can
//! produce the same [`Attempt`].

use super::schedule::{Launcher, Slot};
use std::ffi::OsString;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use truecold_proto::measure::now_ns;

/// Most stdout kept: a report is a few KiB; more is a broken VMM (kept truncated, flagged).
pub const MAX_STDOUT: usize = 1 << 20;
/// Most stderr kept (the tail): the VMM's error chain and any console output (one limit
/// for every engine).
pub use truecold_engine::driver::MAX_STDERR_TAIL;

/// How the process ended: one type for the VMM launcher and the engines' driver.
pub use truecold_engine::driver::ProcessEnd as End;

/// One attempt as the launcher saw it.
#[derive(Clone, Debug)]
pub struct Attempt {
    pub slot: Slot,
    /// CLOCK_MONOTONIC ns taken right before the spawn (also passed as `--request-ns`).
    pub request_ns: u64,
    /// When the process was reaped (or the spawn failed).
    pub reaped_ns: u64,
    /// Deadline from the sample's latency origin, ns.
    pub deadline_ns: u64,
    pub end: End,
    /// Everything printed on stdout (the VMM's JSON report), at most [`MAX_STDOUT`] bytes.
    pub stdout: Vec<u8>,
    /// True when stdout exceeded [`MAX_STDOUT`].
    pub stdout_truncated: bool,
    /// The last [`MAX_STDERR_TAIL`] bytes of stderr, lossily decoded.
    pub stderr_tail: String,
}

pub use truecold_engine::{DEADLINE_FLAG, REQUEST_FLAG};

/// The fixed part of the VMM command line (everything but the per-sample flags).
#[derive(Clone, Debug)]
pub struct VmmCommand {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

impl VmmCommand {
    /// The command line as one shell-readable string (for `cmdline.txt`), with the
    /// per-sample flags ([`REQUEST_FLAG`], [`DEADLINE_FLAG`]) shown symbolically: each
    /// sample's real values are its row's `actual_request_ns` and its latency origin
    /// (`intended_request_ns` when `intended`, else `actual_request_ns`) + `deadline_ns`, and
    /// `reports.jsonl` keeps the VMM's own record of both.
    pub fn display(&self, deadline_ns: u64, intended: bool) -> String {
        let mut s = shell_quote(&self.program.to_string_lossy());
        for a in &self.args {
            s.push(' ');
            s.push_str(&shell_quote(&a.to_string_lossy()));
        }
        let origin = if intended {
            "intended_request_ns"
        } else {
            "actual_request_ns"
        };
        s.push_str(&format!(
            " {REQUEST_FLAG} <actual_request_ns> {DEADLINE_FLAG} <{origin}+{deadline_ns}>"
        ));
        s
    }
}

pub use truecold_engine::shell_quote;

/// Spawns `truecold-vmm` once per sample.
#[derive(Clone, Debug)]
pub struct ProcessLauncher {
    pub command: VmmCommand,
    /// Per-sample deadline from the latency origin (intended time where there is one).
    pub deadline_ns: u64,
    /// Extra time past the deadline before the kill, for the VMM to print its own report.
    /// The sample is a failure either way.
    pub kill_grace_ns: u64,
    /// Whether the deadline runs from the slot's intended time (burst, open loop) rather
    /// than from the request stamp (closed loops).
    pub from_intended: bool,
}

impl Launcher for ProcessLauncher {
    type Output = Attempt;

    fn launch(&self, slot: Slot) -> Attempt {
        let mut cmd = Command::new(&self.command.program);
        cmd.args(&self.command.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Own process group: a terminal's Ctrl-C reaches the harness only, which then
            // lets in-flight samples finish instead of losing them.
            .process_group(0);
        // Everything above is prepared; the stamp is the last thing before the spawn.
        let request_ns = now_ns();
        let origin = if self.from_intended {
            slot.intended_ns.min(request_ns)
        } else {
            request_ns
        };
        let deadline_at = origin.saturating_add(self.deadline_ns);
        cmd.arg(REQUEST_FLAG)
            .arg(request_ns.to_string())
            .arg(DEADLINE_FLAG)
            .arg(deadline_at.to_string());
        let mut attempt = Attempt {
            slot,
            request_ns,
            reaped_ns: 0,
            deadline_ns: self.deadline_ns,
            end: End::SpawnFailed(String::new()),
            stdout: Vec::new(),
            stdout_truncated: false,
            stderr_tail: String::new(),
        };
        match cmd.spawn() {
            Ok(child) => {
                let kill_at = deadline_at.saturating_add(self.kill_grace_ns);
                watch(child, kill_at, &mut attempt);
            }
            Err(e) => {
                attempt.end =
                    End::SpawnFailed(format!("spawning {}: {e}", self.command.program.display()));
                attempt.reaped_ns = now_ns();
            }
        }
        attempt
    }
}

/// Collects the child's output until it exits or `kill_at` passes, then reaps it.
fn watch(mut child: Child, kill_at: u64, a: &mut Attempt) {
    let mut stderr = Vec::new();
    let outcome = pump(
        &mut child,
        kill_at,
        &mut a.stdout,
        &mut stderr,
        &mut a.stdout_truncated,
    );
    let end = match outcome {
        Ok(true) => reap(&mut child, kill_at),
        Ok(false) => kill_and_reap(&mut child, End::KilledAtDeadline),
        Err(e) => kill_and_reap(&mut child, End::HarnessIo(e)),
    };
    a.reaped_ns = now_ns();
    // Whatever was still buffered in the pipes after the exit/kill.
    drain(&mut child, &mut a.stdout, &mut stderr, a.stdout_truncated);
    if a.stdout.len() > MAX_STDOUT {
        a.stdout.truncate(MAX_STDOUT);
        a.stdout_truncated = true;
    }
    a.end = end;
    a.stderr_tail = String::from_utf8_lossy(&stderr).into_owned();
}

/// Reads stdout/stderr until both reach EOF (`Ok(true)`) or `kill_at` passes (`Ok(false)`).
fn pump(
    child: &mut Child,
    kill_at: u64,
    out: &mut Vec<u8>,
    err: &mut Vec<u8>,
    truncated: &mut bool,
) -> Result<bool, String> {
    let (Some(so), Some(se)) = (child.stdout.as_mut(), child.stderr.as_mut()) else {
        return Err("child pipes missing".into());
    };
    let mut open = [true, true];
    let mut chunk = vec![0u8; 64 << 10];
    while open[0] || open[1] {
        let now = now_ns();
        if now >= kill_at {
            return Ok(false);
        }
        let timeout_ms = (kill_at - now).div_ceil(1_000_000).min(i32::MAX as u64) as i32;
        let mut fds = [
            libc::pollfd {
                fd: if open[0] { so.as_raw_fd() } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: if open[1] { se.as_raw_fd() } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid array of two pollfd structs that outlives the call;
        // negative fds are ignored by poll(2).
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout_ms) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("poll on the VMM's pipes: {e}"));
        }
        for (i, fd) in fds.iter().enumerate() {
            if !open[i] || fd.revents == 0 {
                continue;
            }
            let r = if i == 0 {
                so.read(&mut chunk)
            } else {
                se.read(&mut chunk)
            };
            match r {
                Ok(0) => open[i] = false,
                Ok(k) if i == 0 => {
                    if out.len() < MAX_STDOUT + 1 {
                        out.extend_from_slice(&chunk[..k]);
                    } else {
                        *truncated = true;
                    }
                }
                Ok(k) => keep_tail(err, &chunk[..k]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("reading the VMM's output: {e}")),
            }
        }
    }
    Ok(true)
}

fn keep_tail(buf: &mut Vec<u8>, more: &[u8]) {
    buf.extend_from_slice(more);
    if buf.len() > MAX_STDERR_TAIL {
        let cut = buf.len() - MAX_STDERR_TAIL;
        buf.drain(..cut);
    }
}

/// The pipes are closed: the process is exiting. Reap it, killing it if it lingers
/// past `kill_at`.
fn reap(child: &mut Child, kill_at: u64) -> End {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return end_of(status),
            Ok(None) if now_ns() >= kill_at => return kill_and_reap(child, End::KilledAtDeadline),
            Ok(None) => std::thread::sleep(std::time::Duration::from_micros(50)),
            Err(e) => return kill_and_reap(child, End::HarnessIo(format!("waiting: {e}"))),
        }
    }
}

fn end_of(status: std::process::ExitStatus) -> End {
    match (status.code(), status.signal()) {
        (Some(c), _) => End::Exited(c),
        (None, Some(s)) => End::Signalled(s),
        (None, None) => End::HarnessIo(format!("unknown exit status {status}")),
    }
}

fn kill_and_reap(child: &mut Child, why: End) -> End {
    // The child may have exited on its own in the meantime; then keep what it said.
    if let Ok(Some(status)) = child.try_wait() {
        return end_of(status);
    }
    // The child leads its own process group (see `launch`): kill the group, so nothing it
    // may have started outlives the sample holding its pipes.
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: plain kill(2) on the process group the child leads; not yet reaped, so
        // the id cannot have been reused.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    let _ = child.kill();
    match child.wait() {
        Ok(_) => why,
        Err(e) => End::HarnessIo(format!("reaping a killed VMM: {e}")),
    }
}

/// Reads whatever is left in the pipes without blocking (the writer is gone).
fn drain(child: &mut Child, out: &mut Vec<u8>, err: &mut Vec<u8>, truncated: bool) {
    let mut chunk = vec![0u8; 64 << 10];
    if let Some(so) = child.stdout.as_mut() {
        while !truncated && out.len() <= MAX_STDOUT && readable_now(so.as_raw_fd()) {
            match so.read(&mut chunk) {
                Ok(k) if k > 0 => out.extend_from_slice(&chunk[..k]),
                _ => break,
            }
        }
    }
    if let Some(se) = child.stderr.as_mut() {
        while readable_now(se.as_raw_fd()) {
            match se.read(&mut chunk) {
                Ok(k) if k > 0 => keep_tail(err, &chunk[..k]),
                _ => break,
            }
        }
    }
}

fn readable_now(fd: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd; a zero timeout never blocks.
    let rc = unsafe { libc::poll(&mut p, 1, 0) };
    rc == 1 && p.revents & libc::POLLIN != 0
}

#[cfg(test)]
mod tests;
