//! The I/O of one engine launch: write its files (outside the window), take the request
//! stamp, spawn it with its stdio on pipes (its 8250), watch stdout through the
//! [`Observer`], write the nonce when the guest is ready, read the guest-memory mapping right
//! after strict-ready (outside the headline), kill it at deadline + grace (or right after the
//! record when it does not end by itself), reap it. One call, one attempt: never retried,
//! never blocking past the kill instant.

use crate::observer::{Action, Observer};
use crate::GuestMem;
use crate::{ending, exit_is_clean, guest_exit_code, smaps, stdin_is_tty, Ending, Launch};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use truecold_proto::kinds::{Engine, ErrorKind};
use truecold_proto::measure::{now_ns, Stamps};
use truecold_proto::report::{EngineRun, Outcome, ProcessExit, ReportCore, VmmOutput};

/// Most stderr kept (the tail).
pub const MAX_STDERR_TAIL: usize = 16 << 10;
/// Most of truecold-vmm's report file read.
pub const MAX_REPORT: u64 = 1 << 20;

/// How the engine process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcessEnd {
    Exited(i32),
    /// Killed by a signal the bench did not send.
    Signalled(i32),
    /// Still running at deadline + grace: killed.
    KilledAtDeadline,
    /// Killed right after the record ([`Ending::KillAfterRecord`]).
    KilledAfterRecord,
    SpawnFailed(String),
    /// The bench failed watching it (poll, read, wait); it was killed.
    HarnessIo(String),
}

/// One launch as the bench saw it.
#[derive(Clone, Debug)]
pub struct Launched {
    /// The launch's evidence (its `outcome` is the driver's; the bench replaces it with the
    /// row's classification).
    pub run: EngineRun,
    pub end: ProcessEnd,
    pub request_ns: u64,
    pub reaped_ns: u64,
    /// `request + deadline`: the instant the launch is judged against.
    pub deadline_at_ns: u64,
    /// The argv of this sample (program first).
    pub argv: Vec<String>,
    /// Why no guest-memory mapping was taken after strict-ready.
    pub mapping_error: Option<String>,
    /// Why truecold-vmm's report is missing or unusable.
    pub report_error: Option<String>,
    /// Lines on the serial stream that were not `TC1 ` lines (engine noise): count and tail.
    pub noise_lines: u64,
    pub noise_tail: Vec<String>,
    pub stderr_tail: String,
}

impl Launched {
    /// A launch that never started: `why` (the harness could not prepare it), stamped now.
    pub fn not_launched(engine: Engine, why: String, argv: Vec<String>) -> Self {
        let t = now_ns();
        let mut out = Launched::new(engine, t, t, argv);
        out.end = ProcessEnd::SpawnFailed(why);
        out.reaped_ns = t;
        finish(&mut out, Observer::new(), None);
        out
    }

    fn new(engine: Engine, request_ns: u64, deadline_at_ns: u64, argv: Vec<String>) -> Self {
        Launched {
            run: EngineRun {
                engine,
                stamps: Stamps {
                    request: Some(request_ns),
                    ..Stamps::default()
                },
                ready_boot_id: None,
                liveness: truecold_proto::report::Liveness::new(
                    truecold_proto::report::LivenessKind::Binding,
                ),
                guest_record: None,
                host_memory: None,
                protocol_error_count: 0,
                protocol_errors: Vec::new(),
                exit: None,
                vmm: None,
                outcome: Outcome {
                    ok: false,
                    failure_kind: None,
                    failure: None,
                    guest_exit_code: None,
                },
                network: None,
                cleanup: None,
            },
            end: ProcessEnd::SpawnFailed(String::new()),
            request_ns,
            reaped_ns: request_ns,
            deadline_at_ns,
            argv,
            mapping_error: None,
            report_error: None,
            noise_lines: 0,
            noise_tail: Vec::new(),
            stderr_tail: String::new(),
        }
    }
}

/// Runs `l` once for a guest of `mem`, judged against `deadline_ns` from the request,
/// killed at `deadline_ns + kill_grace_ns`.
pub fn launch_once(l: &Launch, mem: GuestMem, deadline_ns: u64, kill_grace_ns: u64) -> Launched {
    launch_once_with(
        l,
        mem,
        deadline_ns,
        kill_grace_ns,
        &mut || Ok(()),
        &mut |_| Ok(()),
    )
}

/// [`launch_once`], calling `before_spawn` right after the request stamp and `after_spawn`
/// with the engine's pid right after the spawn, both inside the measured window (the parity
/// contract makes a Firecracker launch's tap before the spawn, and commits the launch's
/// RUNNING state after it, before strict-ready can be declared). An error from
/// `before_spawn` ends the launch unspawned, one from `after_spawn` kills the engine: either
/// way the launch ends as a harness failure naming it.
pub fn launch_once_with(
    l: &Launch,
    mem: GuestMem,
    deadline_ns: u64,
    kill_grace_ns: u64,
    before_spawn: &mut dyn FnMut() -> Result<(), String>,
    after_spawn: &mut dyn FnMut(u32) -> Result<(), String>,
) -> Launched {
    let mem_bytes = mem.bytes();
    // Outside the window: the files the engine reads, no stale report.
    let mut prep: Option<String> = None;
    for (p, data) in &l.files {
        if let Err(e) = std::fs::write(p, data) {
            prep.get_or_insert(format!("writing {}: {e}", p.display()));
        }
    }
    if let Some(r) = &l.report_file {
        match std::fs::remove_file(r) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                prep.get_or_insert(format!("removing {}: {e}", r.display()));
            }
            _ => {}
        }
    }
    // The agent channel's socket exists before the spawn (the VMM connects the guest to it).
    let mut agent_listener: Option<UnixListener> = None;
    if let Some(a) = &l.agent {
        match bind_agent(&a.listen) {
            Ok(x) => agent_listener = Some(x),
            Err(e) => {
                prep.get_or_insert(format!("listening on {}: {e}", a.listen.display()));
            }
        }
    }
    let mut cmd = Command::new(&l.program);
    // The nonce goes to the engine's stdin: a pipe, or a raw pseudo-terminal for an engine
    // that reads serial input from a terminal only ([`stdin_is_tty`]).
    let mut tty_master: Option<std::fs::File> = None;
    if stdin_is_tty(l.engine) {
        match raw_pty() {
            Ok((master, sub)) => {
                tty_master = Some(master);
                cmd.stdin(Stdio::from(sub));
            }
            Err(e) => {
                prep.get_or_insert(format!("opening a pseudo-terminal for stdin: {e}"));
            }
        }
    } else {
        cmd.stdin(Stdio::piped());
    }
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Own process group: a terminal's Ctrl-C reaches the bench only; a kill reaches
        // everything the engine started.
        .process_group(0);
    // Everything above is prepared; the stamp is the last thing before the spawn.
    let request_ns = now_ns();
    let deadline_at = request_ns.saturating_add(deadline_ns);
    let args = l.args_for(request_ns, deadline_at);
    cmd.args(&args);
    let mut argv = vec![l.program.to_string_lossy().into_owned()];
    argv.extend(args);
    let mut out = Launched::new(l.engine, request_ns, deadline_at, argv);
    // A launch that ends before it is watched: its end, and no agent socket left behind.
    let ended = |mut out: Launched, end: ProcessEnd| {
        out.end = end;
        out.reaped_ns = now_ns();
        if let Some(a) = &l.agent {
            let _ = std::fs::remove_file(&a.listen);
        }
        finish(&mut out, Observer::new(), None);
        out
    };
    if let Some(why) = prep {
        return ended(out, ProcessEnd::SpawnFailed(why));
    }
    if let Err(e) = before_spawn() {
        return ended(out, ProcessEnd::HarnessIo(format!("before the spawn: {e}")));
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let why = format!("spawning {}: {e}", l.program.display());
            return ended(out, ProcessEnd::SpawnFailed(why));
        }
    };
    if let Err(e) = after_spawn(child.id()) {
        let end = kill_and_reap(
            &mut child,
            ProcessEnd::HarnessIo(format!("after the spawn: {e}")),
        );
        return ended(out, end);
    }
    let kill_at = deadline_at.saturating_add(kill_grace_ns);
    // The engine holds the terminal's other end now; ours is only for writing.
    drop(cmd);
    let obs = watch(
        child,
        tty_master,
        agent_listener,
        l,
        mem_bytes,
        kill_at,
        &mut out,
    );
    if let Some(a) = &l.agent {
        let _ = std::fs::remove_file(&a.listen);
    }
    let report = l.report_file.as_ref().map(|p| read_report(p));
    finish(&mut out, obs, report);
    out
}

/// A fresh non-blocking listener at `path` (a stale socket file from an earlier launch is
/// removed first). Connectable by any user who can reach it (mode 0777): a jailed
/// truecold-vmm connects as its unprivileged user, seeing only this directory (bound into its
/// jail); on the host the directory's parents decide who else can reach it.
fn bind_agent(path: &std::path::Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let l = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777))?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// What the driver knows of the launch it watches.
#[derive(Clone, Copy)]
struct Watched<'a> {
    l: &'a Launch,
    pid: u32,
    mem_bytes: u64,
    kill_at: u64,
}

/// What one chunk from the observed stream asks of the driver (the serial line or the agent
/// channel alike). `reply_to` is where the nonce goes.
fn act(
    actions: Vec<Action>,
    t: u64,
    reply_to: &mut Option<Box<dyn Write>>,
    obs: &Observer,
    w: Watched<'_>,
    out: &mut Launched,
    stderr: &mut Vec<u8>,
) -> bool {
    let Watched {
        l,
        pid,
        mem_bytes,
        kill_at,
    } = w;
    let mut kill_now = false;
    for a in actions {
        match a {
            Action::SerialReady => out.run.stamps.serial_ready = Some(t),
            Action::WriteNonce(line) => {
                if let Some(w) = reply_to.as_mut() {
                    if let Err(e) = w.write_all(&line).and_then(|()| w.flush()) {
                        keep_tail(
                            stderr,
                            format!("\n[bench] writing the nonce: {e}\n").as_bytes(),
                        );
                    }
                }
            }
            Action::StrictReady => {
                // The verified reply was read at `t`; under the parity contract strict-ready
                // is once the network proof verified too (after `t`, when it is done).
                let ready_at = match (&l.agent, obs.ready_boot_id) {
                    (Some(a), Some(id)) => {
                        let p = crate::network::prove(a.tcp, id, rand::random(), kill_at);
                        let ok = p.liveness.verified;
                        out.run.network = Some(p);
                        ok.then(now_ns)
                    }
                    _ => Some(t),
                };
                if let Some(at) = ready_at {
                    out.run.stamps.strict_ready = Some(at);
                    // The engine's mapping as its layout gives it (`Launch::ram_layout`).
                    let size = l.engine.expected_mapping(mem_bytes, l.ram_layout);
                    match smaps::read_guest_mapping(pid, size) {
                        Ok(m) => out.run.host_memory = Some(m),
                        Err(e) => out.mapping_error = Some(e.to_string()),
                    }
                }
            }
            Action::Record => {
                out.run.stamps.record = Some(t);
                if ending(l.engine) == Ending::KillAfterRecord {
                    kill_now = true;
                }
            }
        }
    }
    kill_now
}

fn watch(
    mut child: Child,
    tty_master: Option<std::fs::File>,
    mut listener: Option<UnixListener>,
    l: &Launch,
    mem_bytes: u64,
    kill_at: u64,
    out: &mut Launched,
) -> Observer {
    let pid = child.id();
    let watched = Watched {
        l,
        pid,
        mem_bytes,
        kill_at,
    };
    let mut stdin: Option<Box<dyn Write>> = match tty_master {
        Some(m) => Some(Box::new(m)),
        None => child.stdin.take().map(|s| Box::new(s) as Box<dyn Write>),
    };
    let mut so = child.stdout.take();
    let mut se = child.stderr.take();
    let mut obs = Observer::new();
    let mut stderr = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut killed_after_record = false;
    let mut end: Option<ProcessEnd> = None;
    // The agent channel: the accepted connection (the nonce is written back on it).
    let mut agent: Option<UnixStream> = None;
    let agent_mode = l.agent.is_some();
    while so.is_some() || se.is_some() {
        let now = now_ns();
        if now >= kill_at {
            end = Some(kill_and_reap(&mut child, ProcessEnd::KilledAtDeadline));
            break;
        }
        let wait_ms = ((kill_at - now) / 1_000_000).saturating_add(1);
        let third = match (&listener, &agent) {
            (_, Some(a)) => Some(a.as_raw_fd()),
            (Some(ls), None) => Some(ls.as_raw_fd()),
            (None, None) => None,
        };
        let mut fds: Vec<libc::pollfd> = [
            so.as_ref().map(|s| s.as_raw_fd()),
            se.as_ref().map(|s| s.as_raw_fd()),
            third,
        ]
        .into_iter()
        .map(|fd| libc::pollfd {
            fd: fd.unwrap_or(-1),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
        // SAFETY: `fds` is a valid array of three pollfds (a negative fd is ignored by poll).
        let rc = unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                i32::try_from(wait_ms).unwrap_or(i32::MAX),
            )
        };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            end = Some(kill_and_reap(
                &mut child,
                ProcessEnd::HarnessIo(format!("poll: {e}")),
            ));
            break;
        }
        let ready =
            |p: &libc::pollfd| p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0;
        if ready(&fds[2]) {
            match agent_step(
                &mut listener,
                &mut agent,
                &mut obs,
                &mut buf,
                &mut |obs, actions, t, agent| {
                    let mut w: Option<Box<dyn Write>> = match agent.as_ref().map(|a| a.try_clone())
                    {
                        Some(Ok(a)) => Some(Box::new(a)),
                        Some(Err(e)) => {
                            keep_tail(
                                &mut stderr,
                                format!("\n[bench] the agent socket, for the nonce: {e}\n")
                                    .as_bytes(),
                            );
                            None
                        }
                        None => None,
                    };
                    act(actions, t, &mut w, obs, watched, out, &mut stderr)
                },
            ) {
                Err(e) => {
                    end = Some(kill_and_reap(&mut child, ProcessEnd::HarnessIo(e)));
                    break;
                }
                // The record came on the agent channel of an engine that reboots the guest
                // instead of exiting (Cloud Hypervisor): killed now, as on serial.
                Ok(true) if !killed_after_record => {
                    kill_group(&child);
                    killed_after_record = true;
                }
                Ok(_) => {}
            }
        }
        if ready(&fds[0]) {
            if let Some(s) = so.as_mut() {
                match s.read(&mut buf) {
                    Ok(0) => so = None,
                    // Under the agent channel the engine's stdout is its console: kept as
                    // noise, never observed.
                    Ok(n) if agent_mode => keep_tail(&mut stderr, &buf[..n]),
                    Ok(n) => {
                        let t = now_ns();
                        let actions = obs.feed(&buf[..n], &mut rand::random::<[u8; 16]>);
                        if act(actions, t, &mut stdin, &obs, watched, out, &mut stderr)
                            && !killed_after_record
                        {
                            kill_group(&child);
                            killed_after_record = true;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        end = Some(kill_and_reap(
                            &mut child,
                            ProcessEnd::HarnessIo(format!("reading stdout: {e}")),
                        ));
                        break;
                    }
                }
            }
        }
        if ready(&fds[1]) {
            if let Some(s) = se.as_mut() {
                match s.read(&mut buf) {
                    Ok(0) => se = None,
                    Ok(n) => keep_tail(&mut stderr, &buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        end = Some(kill_and_reap(
                            &mut child,
                            ProcessEnd::HarnessIo(format!("reading stderr: {e}")),
                        ));
                        break;
                    }
                }
            }
        }
    }
    // The VMM has closed its pipes: what its hybrid vsock passed on before it ended is read
    // to the end of the connection (bounded by the kill instant).
    if end.is_none() {
        // A guest that connected but was not accepted before the VMM ended (it failed
        // early and sent only its record): its connection is read too.
        if agent.is_none() {
            if let Some(ls) = listener.take() {
                agent = ls.accept().ok().map(|(s, _)| s);
            }
        }
        if let Some(a) = agent.take() {
            drain_agent(a, &mut obs, &mut buf, kill_at, &mut |obs, actions, t| {
                let mut none: Option<Box<dyn Write>> = None;
                act(actions, t, &mut none, obs, watched, out, &mut stderr);
            });
        }
    }
    let end = match end {
        Some(e) => e,
        None if killed_after_record => match child.wait() {
            Ok(_) => ProcessEnd::KilledAfterRecord,
            Err(e) => ProcessEnd::HarnessIo(format!("reaping a killed engine: {e}")),
        },
        None => reap(&mut child, kill_at),
    };
    out.reaped_ns = now_ns();
    out.end = end;
    drop(stdin);
    obs.finish();
    out.stderr_tail = String::from_utf8_lossy(&stderr).into_owned();
    obs
}

/// What the driver does with the actions of a chunk read on the agent connection (the
/// connection given for writing the nonce back).
type OnAgentActions<'a> = dyn FnMut(&Observer, Vec<Action>, u64, &Option<UnixStream>) -> bool + 'a;

/// One readiness of the agent channel: accept the VMM's connection (one only; the listener is
/// closed then), or read what arrived and hand it to the observer. `true`: the actions ask
/// for the engine to be killed (the record of an engine that does not end by itself).
fn agent_step(
    listener: &mut Option<UnixListener>,
    agent: &mut Option<UnixStream>,
    obs: &mut Observer,
    buf: &mut [u8],
    on: &mut OnAgentActions<'_>,
) -> Result<bool, String> {
    if agent.is_none() {
        let Some(ls) = listener.as_ref() else {
            return Ok(false);
        };
        return match ls.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(true)
                    .map_err(|e| format!("agent socket: {e}"))?;
                *agent = Some(s);
                *listener = None;
                Ok(false)
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(false),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(false),
            Err(e) => Err(format!("accepting the agent: {e}")),
        };
    }
    let Some(a) = agent.as_mut() else {
        return Ok(false);
    };
    match a.read(buf) {
        Ok(0) => {
            obs.finish();
            *agent = None;
            Ok(false)
        }
        Ok(n) => {
            let t = now_ns();
            let actions = obs.feed(&buf[..n], &mut rand::random::<[u8; 16]>);
            let kill = on(obs, actions, t, agent);
            // The record is the channel's last line: the bench closes its end, so the guest
            // (which waits for the close before it writes its exit code) stops at once.
            if obs.record.is_some() {
                if let Some(a) = agent.take() {
                    let _ = a.shutdown(std::net::Shutdown::Both);
                }
                obs.finish();
            }
            Ok(kill)
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
            ) =>
        {
            Ok(false)
        }
        // The guest side reset the connection: the observer judges what it got.
        Err(_) => {
            obs.finish();
            *agent = None;
            Ok(false)
        }
    }
}

/// Reads the agent connection to its end (or `kill_at`), feeding the observer.
fn drain_agent(
    mut a: UnixStream,
    obs: &mut Observer,
    buf: &mut [u8],
    kill_at: u64,
    on: &mut dyn FnMut(&Observer, Vec<Action>, u64),
) {
    if a.set_nonblocking(false).is_err() {
        return;
    }
    loop {
        let now = now_ns();
        if now >= kill_at {
            break;
        }
        let _ = a.set_read_timeout(Some(std::time::Duration::from_nanos(kill_at - now)));
        match a.read(buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let t = now_ns();
                let actions = obs.feed(&buf[..n], &mut rand::random::<[u8; 16]>);
                on(obs, actions, t);
            }
        }
    }
    obs.finish();
}

/// A pseudo-terminal pair whose subordinate side is raw (no echo, no line editing, no
/// newline translation): bytes written to the master reach the reader unchanged.
fn raw_pty() -> std::io::Result<(std::fs::File, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let (mut master, mut sub) = (-1, -1);
    // SAFETY: openpty writes two new fds into the two ints; the name, termios and winsize
    // pointers may be null.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut sub,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: openpty succeeded: both fds are new and owned by nobody else.
    let (master, sub) = unsafe {
        (
            std::fs::File::from_raw_fd(master),
            std::os::fd::OwnedFd::from_raw_fd(sub),
        )
    };
    // SAFETY: a zeroed termios is a valid buffer for tcgetattr to fill.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `sub` is an open terminal fd and `t` a valid termios.
    if unsafe { libc::tcgetattr(sub.as_raw_fd(), &mut t) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: cfmakeraw only edits the struct.
    unsafe { libc::cfmakeraw(&mut t) };
    // SAFETY: `sub` is an open terminal fd and `t` a valid termios.
    if unsafe { libc::tcsetattr(sub.as_raw_fd(), libc::TCSANOW, &t) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((master, sub))
}

fn keep_tail(buf: &mut Vec<u8>, more: &[u8]) {
    buf.extend_from_slice(more);
    if buf.len() > MAX_STDERR_TAIL {
        let cut = buf.len() - MAX_STDERR_TAIL;
        buf.drain(..cut);
    }
}

/// Both pipes closed: the process is exiting. Reap it, killing it if it lingers past
/// `kill_at`.
fn reap(child: &mut Child, kill_at: u64) -> ProcessEnd {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return end_of(status),
            Ok(None) if now_ns() >= kill_at => {
                return kill_and_reap(child, ProcessEnd::KilledAtDeadline)
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_micros(50)),
            Err(e) => return kill_and_reap(child, ProcessEnd::HarnessIo(format!("waiting: {e}"))),
        }
    }
}

fn end_of(status: std::process::ExitStatus) -> ProcessEnd {
    match (status.code(), status.signal()) {
        (Some(c), _) => ProcessEnd::Exited(c),
        (None, Some(s)) => ProcessEnd::Signalled(s),
        (None, None) => ProcessEnd::HarnessIo(format!("unknown exit status {status:?}")),
    }
}

fn kill_group(child: &Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) on the process group the child leads; the child is not reaped yet,
        // so its id cannot have been reused.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
}

fn kill_and_reap(child: &mut Child, why: ProcessEnd) -> ProcessEnd {
    // It may have exited on its own in the meantime; then keep what it said.
    if let Ok(Some(status)) = child.try_wait() {
        return end_of(status);
    }
    kill_group(child);
    let _ = child.kill();
    match child.wait() {
        Ok(_) => why,
        Err(e) => ProcessEnd::HarnessIo(format!("reaping a killed engine: {e}")),
    }
}

/// truecold-vmm's report file: its whole JSON, or why not.
fn read_report(path: &std::path::Path) -> Result<serde_json::Value, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    f.take(MAX_REPORT + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_REPORT {
        return Err(format!(
            "{}: longer than {MAX_REPORT} bytes",
            path.display()
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("{}: not JSON: {e}", path.display()))
}

/// Fills the run from the observer, the end and (truecold) the VMM's report.
fn finish(out: &mut Launched, obs: Observer, report: Option<Result<serde_json::Value, String>>) {
    let engine = out.run.engine;
    out.run.stamps.reaped = Some(out.reaped_ns);
    out.run.ready_boot_id = obs.ready_boot_id;
    out.run.liveness = obs.liveness();
    out.run.guest_record = obs.record.clone();
    out.run.protocol_error_count = obs.protocol_error_count;
    out.run.protocol_errors = obs.protocol_errors.clone();
    out.noise_lines = obs.noise_lines;
    out.noise_tail = obs.noise_tail.iter().cloned().collect();
    out.run.exit = match &out.end {
        ProcessEnd::Exited(c) => Some(ProcessExit {
            code: Some(*c),
            signal: None,
            killed: false,
        }),
        ProcessEnd::Signalled(s) => Some(ProcessExit {
            code: None,
            signal: Some(*s),
            killed: false,
        }),
        ProcessEnd::KilledAtDeadline | ProcessEnd::KilledAfterRecord => Some(ProcessExit {
            code: None,
            signal: Some(libc::SIGKILL),
            killed: true,
        }),
        ProcessEnd::SpawnFailed(_) => None,
        ProcessEnd::HarnessIo(_) => Some(ProcessExit {
            code: None,
            signal: None,
            killed: true,
        }),
    };
    if let ProcessEnd::Exited(c) = out.end {
        out.run.outcome.guest_exit_code = guest_exit_code(engine, c);
    }
    if let Some(report) = report {
        match report {
            Ok(v) => {
                merge_vmm(out, &v);
                out.run.vmm = Some(v);
            }
            Err(e) => out.report_error = Some(e),
        }
    }
    let clean = match out.end {
        ProcessEnd::Exited(c) => exit_is_clean(engine, c),
        ProcessEnd::KilledAfterRecord => true,
        _ => false,
    };
    let failure: Option<(ErrorKind, String)> = match &out.end {
        ProcessEnd::SpawnFailed(m) => Some((ErrorKind::SpawnFailed, m.clone())),
        ProcessEnd::HarnessIo(m) => Some((ErrorKind::HarnessIo, m.clone())),
        ProcessEnd::KilledAtDeadline => {
            Some((ErrorKind::Deadline, "killed at deadline + grace".into()))
        }
        _ if !obs.strict_ready() => Some((ErrorKind::NoStrictReady, "no verified reply".into())),
        _ if out
            .run
            .network
            .as_ref()
            .is_some_and(|p| !p.liveness.verified) =>
        {
            Some((
                ErrorKind::NetworkNotReady,
                out.run
                    .network
                    .as_ref()
                    .and_then(|p| p.error.clone())
                    .unwrap_or_default(),
            ))
        }
        _ if out.run.stamps.strict_ready.is_none() => {
            Some((ErrorKind::NoStrictReady, "no strict-ready stamp".into()))
        }
        _ if obs.record.is_none() => Some((ErrorKind::NoRecord, "no record line".into())),
        _ if !clean => Some((ErrorKind::VmmExit, format!("{:?}", out.end))),
        _ => None,
    };
    out.run.outcome.ok = failure.is_none();
    out.run.outcome.failure_kind = failure.as_ref().map(|f| f.0.as_string());
    out.run.outcome.failure = failure.map(|f| f.1);
}

/// truecold: the VMM's marks (VM exits included) merged with the bench's, its guest exit
/// code, its protocol errors added to the serial line's.
fn merge_vmm(out: &mut Launched, v: &serde_json::Value) {
    match VmmOutput::parse(v.to_string().as_bytes()) {
        Ok(VmmOutput::Boot(core)) => {
            let core: ReportCore = *core;
            let ours = out.run.stamps;
            if core.stamps.request != ours.request {
                out.report_error = Some(format!(
                    "the VMM echoes request {:?}, the bench stamped {:?}",
                    core.stamps.request, ours.request
                ));
            }
            out.run.stamps = Stamps {
                intended: ours.intended,
                request: ours.request,
                serial_ready: ours.serial_ready,
                strict_ready: ours.strict_ready,
                record: ours.record,
                reaped: ours.reaped,
                ..core.stamps
            };
            out.run.outcome.guest_exit_code = core.outcome.guest_exit_code;
            out.run.protocol_error_count = out
                .run
                .protocol_error_count
                .saturating_add(core.protocol_error_count);
            for e in core.protocol_errors {
                if out.run.protocol_errors.len() < ReportCore::PROTOCOL_ERRORS_KEPT {
                    out.run.protocol_errors.push(format!("truecold-vmm: {e}"));
                }
            }
        }
        Ok(VmmOutput::Error(e)) => {
            out.report_error = Some(format!(
                "truecold-vmm failed before its guest ran: {} ({})",
                e.error.kind, e.error.message
            ));
        }
        Err(e) => out.report_error = Some(e.to_string()),
    }
}

#[cfg(test)]
mod tests;
