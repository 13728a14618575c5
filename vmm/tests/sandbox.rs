//! The `truecold-vmm boot` process's confinement (vmm/src/sandbox.rs, docs/security.md):
//! the seccomp filter on by default and refusing what it must, seen from outside the process
//! too; no-new-privileges; inherited descriptors closed; `--uid/--gid`. These tests fail
//! (never skip) without a usable /dev/kvm, or without root for the mount-namespace ones.
mod common;

use std::ffi::CString;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output, Stdio};

use truecold_vmm::sandbox::{self, EXIT_SECCOMP_VIOLATION};
use truecold_vmm::BootReport;

const VMM: &str = env!("CARGO_BIN_EXE_truecold-vmm");

fn vmm(args: &[&str]) -> Output {
    Command::new(VMM).args(args).output().unwrap()
}

fn report(o: &Output) -> BootReport {
    assert!(
        o.status.success(),
        "{:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A `Field:` line of /proc/<pid>/status (or a task's), its value trimmed.
fn status_field(status: &str, key: &str) -> Option<String> {
    status.lines().find_map(|l| {
        l.strip_prefix(key)?
            .strip_prefix(':')
            .map(|v| v.trim().to_string())
    })
}

/// Polls /proc/<pid>/status until its `Seccomp:` is 2 (the filter is in) and returns that
/// text; panics if the process exits first. Its own deadline bounds the wait.
fn wait_for_filter(child: &mut Child) -> String {
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("the VMM exited ({st:?}) before its filter was seen: {err}");
        }
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        if status_field(&status, "Seccomp").as_deref() == Some("2") {
            return status;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Each thread of `pid`: (name, Seccomp field).
fn threads(pid: u32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let st = std::fs::read_to_string(t.unwrap().path().join("status")).unwrap();
        out.push((
            status_field(&st, "Name").unwrap(),
            status_field(&st, "Seccomp").unwrap(),
        ));
    }
    out
}

fn kill(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// The probe boots to strict-ready through the CLI with the filter on (the default), and the
/// report says what confined the process, the report going to --report-file, opened before
/// the filter.
#[test]
fn probe_strict_ready_with_the_filter_on_by_default() {
    common::require_kvm();
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join(format!("sandbox-report-{}.json", std::process::id()));
    let o = vmm(&[
        "boot",
        "--probe",
        "--vcpus",
        "2",
        "--report-file",
        file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stdout.is_empty());
    let r: BootReport = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let _ = std::fs::remove_file(&file);
    common::check_probe_report(&r, &r.config.clone());
    let s = r.sandbox.expect("the CLI's report has a sandbox");
    assert!(s.prelude.no_new_privs);
    // As root the jail drops to its user (vmm/tests/jail.rs has the rest).
    let (uid, gid) = truecold_vmm::jail::lookup_user().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.user, Some(sandbox::UserDrop { uid, gid }));
    assert!(s.seccomp.installed);
    assert_eq!(s.seccomp.mode_observed, Some(2), "{s:?}");
    assert_eq!(s.seccomp.allowed_syscalls, sandbox::allowlist(0).len());
    assert_eq!(s.seccomp.on_violation, "trap");
}

/// Every probe variant, up to 32 vCPUs (glibc's allocator creates arenas as the threads
/// contend: it must not need a file then), THP, the console on stderr, and a deadline (the
/// vCPUs kicked out of KVM_RUN) under the filter: each ends as without it, with the filter
/// observed in place.
#[test]
fn every_probe_variant_under_the_filter() {
    common::require_kvm();
    let cases: [(&[&str], bool); 7] = [
        (&["--probe", "--vcpus", "32", "--mem-mib", "256"], true),
        (&["--probe", "--vcpus", "32", "--mem-mib", "256"], true),
        (&["--probe", "--vcpus", "16", "--mem-mib", "256"], true),
        (
            &["--probe-linux64", "--vcpus", "32", "--mem-mib", "256"],
            true,
        ),
        (&["--probe", "--vcpus", "2", "--backing", "thp"], true),
        (&["--probe", "--vcpus", "2", "--console"], true),
        (
            &["--probe-silent", "--vcpus", "3", "--deadline-ms", "300"],
            false,
        ),
    ];
    for (args, ok) in cases {
        let o = Command::new(VMM).arg("boot").args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(if ok { 0 } else { 1 }),
            "{args:?}: {err}"
        );
        let r: BootReport = serde_json::from_slice(&o.stdout).unwrap();
        if ok {
            common::check_probe_report(&r, &r.config.clone());
        } else {
            assert_eq!(r.failure.as_ref().map(|f| f.kind()), Some("deadline"));
        }
        let s = r.sandbox.unwrap();
        assert_eq!(s.seccomp.mode_observed, Some(2), "{args:?}");
    }
}

/// The serial transport's code under the filter (stdin duplicated, the input thread, its
/// eventfds and polls, stdout): the probe image booted as a kernel file with `--transport
/// serial` (the probe speaks the ports protocol, so the VMM judges it a protocol failure; what
/// matters is that it gets there, filter in place, with the input thread's figures).
#[test]
fn serial_transport_paths_under_the_filter() {
    common::require_kvm();
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let kernel = dir.join(format!("probe-as-kernel-{}.elf", std::process::id()));
    std::fs::write(&kernel, truecold_vmm::probe::PROBE_ELF).unwrap();
    let input = dir.join(format!("serial-input-{}", std::process::id()));
    std::fs::write(&input, vec![b'x'; 20_000]).unwrap();
    for (stdin, want_end) in [(Some(&input), "stopped"), (None, "eof")] {
        let report = dir.join(format!("serial-report-{}.json", std::process::id()));
        let o = Command::new(VMM)
            .args(["boot", "--transport", "serial", "--force", "--kernel"])
            .arg(&kernel)
            .arg("--report-file")
            .arg(&report)
            .stdin(match stdin {
                Some(p) => Stdio::from(std::fs::File::open(p).unwrap()),
                None => Stdio::null(),
            })
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        let _ = std::fs::remove_file(&report);
        assert_eq!(r["outcome"]["failure_kind"], "protocol", "{r}");
        assert_eq!(r["sandbox"]["seccomp"]["mode_observed"], 2, "{r}");
        let si = &r["serial_input"];
        assert_eq!(si["end"], want_end, "{si}");
        if stdin.is_some() {
            assert!(si["read"].as_u64().unwrap() > 0 && si["delivered"].as_u64().unwrap() > 0);
        }
    }
    let _ = std::fs::remove_file(&kernel);
    let _ = std::fs::remove_file(&input);
}

/// `--no-seccomp` boots without the filter and the report says so; the library's boot
/// confines nothing and says that too.
#[test]
fn no_seccomp_is_recorded() {
    common::require_kvm();
    let r = report(&vmm(&["boot", "--probe", "--no-seccomp"]));
    common::check_probe_report(&r, &r.config.clone());
    let s = r.sandbox.unwrap();
    assert!(!s.seccomp.installed);
    assert_eq!(s.seccomp.mode_observed, Some(0));
    assert!(s.prelude.no_new_privs);
    // A report without the field (written before it existed) still reads.
    let mut json: serde_json::Value = serde_json::to_value(
        truecold_vmm::boot(&truecold_vmm::BootConfig::probe(
            1,
            truecold_proto::limits::GuestMem::from_mib(64).unwrap(),
            truecold_vmm::memory::Backing::Anon,
        ))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(json["sandbox"], serde_json::Value::Null);
    json.as_object_mut().unwrap().remove("sandbox");
    let back: BootReport = serde_json::from_value(json).unwrap();
    assert_eq!(back.sandbox, None);
}

/// The real VMM, filter installed, makes a forbidden syscall from a new thread (the hidden
/// --sandbox-selftest hook, right after the installation): it ends with status 159 and names
/// the syscall. The same hook without the filter makes the call and boots: the refusal is
/// the filter's.
#[test]
fn the_installed_filter_refuses_forbidden_syscalls() {
    common::require_kvm();
    for (name, nr) in [
        ("socket", libc::SYS_socket),
        ("openat", libc::SYS_openat),
        ("execve", libc::SYS_execve),
        ("fork", libc::SYS_fork),
    ] {
        let o = vmm(&["boot", "--probe", "--sandbox-selftest", name]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(i32::from(EXIT_SECCOMP_VIOLATION)),
            "{name}: {:?} {err}",
            o.status
        );
        assert!(
            err.contains(&format!(
                "seccomp refused syscall {nr} ({name}, not in the allowlist)"
            )),
            "{name}: {err}"
        );
        assert!(o.stdout.is_empty(), "{name}: a report after the refusal");

        let o = vmm(&[
            "boot",
            "--probe",
            "--no-seccomp",
            "--sandbox-selftest",
            name,
        ]);
        let r = report(&o);
        assert!(r.core.outcome.ok);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("the call returned"), "{name}: {err}");
    }
}

/// What the child does after installing the filter.
#[derive(Clone, Copy, Debug)]
enum Call {
    Socket,
    Openat,
    Execve,
    Fork,
    CloneProcess,
    IoctlTcgets,
    MmapExec,
    PrctlDumpable,
    Ptrace,
    SigactionSigsys,
    Getpid,
    IoctlKvmRunBadFd,
    Clone3,
    GetrusageSelf,
    GetrusageChildren,
    TgkillInit,
}

/// Makes `c` (raw syscalls only: this runs in a forked child of a multi-threaded process);
/// returns (result, errno).
fn make(c: Call) -> (i64, i32) {
    // SAFETY: every call either is refused before it runs or is harmless to the child
    // (bad descriptors, a fork/clone whose child exits at once, an anonymous mapping).
    let r = unsafe {
        match c {
            Call::Socket => libc::syscall(libc::SYS_socket, libc::AF_UNIX, libc::SOCK_STREAM, 0),
            Call::Openat => libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                c"/dev/null".as_ptr(),
                libc::O_RDONLY,
            ),
            Call::Execve => {
                let argv = [std::ptr::null::<libc::c_char>()];
                libc::syscall(
                    libc::SYS_execve,
                    c"/bin/true".as_ptr(),
                    argv.as_ptr(),
                    argv.as_ptr(),
                )
            }
            Call::Fork => {
                let p = libc::syscall(libc::SYS_fork);
                if p == 0 {
                    libc::_exit(0);
                }
                p
            }
            Call::CloneProcess => {
                let p = libc::syscall(libc::SYS_clone, libc::SIGCHLD, 0, 0, 0, 0);
                if p == 0 {
                    libc::_exit(0);
                }
                p
            }
            Call::IoctlTcgets => libc::syscall(libc::SYS_ioctl, 0, libc::TCGETS, 0),
            Call::MmapExec => libc::syscall(
                libc::SYS_mmap,
                0,
                4096,
                libc::PROT_READ | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            ),
            Call::PrctlDumpable => libc::syscall(libc::SYS_prctl, libc::PR_SET_DUMPABLE, 1),
            Call::Ptrace => libc::syscall(libc::SYS_ptrace, libc::PTRACE_TRACEME, 0, 0, 0),
            Call::SigactionSigsys => libc::syscall(libc::SYS_rt_sigaction, libc::SIGSYS, 0, 0, 8),
            Call::Getpid => libc::syscall(libc::SYS_getpid),
            Call::IoctlKvmRunBadFd => libc::syscall(libc::SYS_ioctl, -1, 0xae80, 0),
            Call::Clone3 => libc::syscall(libc::SYS_clone3, 0, 0),
            Call::GetrusageSelf => {
                let mut ru: libc::rusage = std::mem::zeroed();
                libc::syscall(libc::SYS_getrusage, libc::RUSAGE_SELF, &mut ru)
            }
            // Signal 0: nothing is sent, only checked.
            Call::TgkillInit => libc::syscall(libc::SYS_tgkill, 1, 1, 0),
            Call::GetrusageChildren => {
                let mut ru: libc::rusage = std::mem::zeroed();
                libc::syscall(libc::SYS_getrusage, libc::RUSAGE_CHILDREN, &mut ru)
            }
        }
    };
    // SAFETY: reads this thread's errno.
    (r, unsafe { *libc::__errno_location() })
}

/// How the forked child ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    Signal(i32),
    Exit(i32),
}

/// Forks a child that installs the filters the pure function built from the allowlist (no
/// SIGSYS handler: a refusal kills it with SIGSYS) and makes `c`; it exits 0 when the call
/// returned as `ok` says, 3 otherwise.
fn in_child(f: &sandbox::Filters, c: Call, ok: fn(i64, i32) -> bool) -> End {
    // SAFETY: the child only makes raw syscalls (the filters are built before the fork; their
    // installation allocates nothing) and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let code = match sandbox::install(f) {
            Err(_) => 2,
            Ok(()) => {
                let (r, errno) = make(c);
                if ok(r, errno) {
                    0
                } else {
                    3
                }
            }
        };
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    let mut st = 0;
    // SAFETY: waits for the child just forked.
    assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
    if libc::WIFSIGNALED(st) {
        End::Signal(libc::WTERMSIG(st))
    } else {
        End::Exit(libc::WEXITSTATUS(st))
    }
}

/// The filter the pure function builds from the typed allowlist, installed in a forked
/// child: what the VMM must never do dies with SIGSYS; what it does passes (with the result
/// the kernel gives); clone3 fails with ENOSYS so that the C library falls back to clone.
#[test]
fn the_pure_filter_refuses_and_allows_in_a_child() {
    // Built for this process: a child's tgkill (not made here) would be refused.
    let f = sandbox::filters(&sandbox::allowlist(std::process::id())).unwrap();
    let any = |_: i64, _: i32| true;
    for c in [
        Call::Socket,
        Call::Openat,
        Call::Execve,
        Call::Fork,
        Call::CloneProcess,
        Call::IoctlTcgets,
        Call::MmapExec,
        Call::PrctlDumpable,
        Call::Ptrace,
        Call::SigactionSigsys,
        Call::GetrusageChildren,
        Call::TgkillInit,
    ] {
        assert_eq!(in_child(&f, c, any), End::Signal(libc::SIGSYS), "{c:?}");
    }
    assert_eq!(
        in_child(&f, Call::Getpid, |r, _| r > 0),
        End::Exit(0),
        "getpid"
    );
    assert_eq!(
        in_child(&f, Call::IoctlKvmRunBadFd, |r, e| r == -1
            && e == libc::EBADF),
        End::Exit(0),
        "KVM_RUN reaches the kernel"
    );
    assert_eq!(
        in_child(&f, Call::Clone3, |r, e| r == -1 && e == libc::ENOSYS),
        End::Exit(0),
        "clone3 → ENOSYS"
    );
    assert_eq!(
        in_child(&f, Call::GetrusageSelf, |r, _| r == 0),
        End::Exit(0),
        "getrusage(RUSAGE_SELF)"
    );
    // Without the filter the same calls are made: the refusals above are the filter's.
    // SAFETY: as in `in_child`, without the installation.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let (r, _) = make(Call::Socket);
        // SAFETY: ends the child.
        unsafe { libc::_exit(if r >= 0 { 0 } else { 3 }) };
    }
    let mut st = 0;
    // SAFETY: waits for that child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
    assert!(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0);
}

/// Where the VMM inherits a descriptor in [`sandbox_seen_from_outside_the_running_vmm`].
const INHERITED: i32 = 900;

/// Seen from outside the running VMM (the silent probe, which never finishes; killed once
/// seen): a descriptor it inherited is closed at once (the pipe's reader gets end of file
/// while the VMM runs), no-new-privileges is set, and the filter is in the process and in
/// every vCPU thread.
#[test]
fn sandbox_seen_from_outside_the_running_vmm() {
    common::require_kvm();
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just created and are owned here only.
    let (mut reader, writer) = unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            OwnedFd::from_raw_fd(fds[1]),
        )
    };
    let w = fds[1];
    let mut cmd = Command::new(VMM);
    cmd.args([
        "boot",
        "--probe-silent",
        "--vcpus",
        "2",
        "--deadline-ms",
        "120000",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    // SAFETY: dup2 is async-signal-safe; the copy at 900 (above anything the VMM opens)
    // has no close-on-exec: the VMM inherits the pipe's write end there.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(w, INHERITED) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    drop(writer);
    // The VMM holds the only write end: end of file means it closed it.
    let mut buf = Vec::new();
    reader.read_to_end(&mut buf).unwrap();
    assert!(
        child.try_wait().unwrap().is_none(),
        "end of file only when the VMM exited: the inherited descriptor was not closed"
    );
    let status = wait_for_filter(&mut child);
    assert_eq!(
        status_field(&status, "NoNewPrivs").as_deref(),
        Some("1"),
        "{status}"
    );
    let ts = threads(child.id());
    let vcpus: Vec<_> = ts.iter().filter(|(n, _)| n.starts_with("vcpu")).collect();
    // The vCPU threads may not all have started yet: wait for both.
    let ts = if vcpus.len() < 2 {
        let mut t = ts.clone();
        while t.iter().filter(|(n, _)| n.starts_with("vcpu")).count() < 2 {
            assert!(child.try_wait().unwrap().is_none(), "the VMM exited");
            std::thread::sleep(std::time::Duration::from_millis(1));
            t = threads(child.id());
        }
        t
    } else {
        ts
    };
    for (name, mode) in &ts {
        assert_eq!(mode, "2", "thread {name}: {ts:?}");
    }
    let open: Vec<String> = std::fs::read_dir(format!("/proc/{}/fd", child.id()))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !open.contains(&INHERITED.to_string()),
        "fd {INHERITED} still open: {open:?}"
    );
    kill(child);
}

/// A descriptor the VMM inherits is named in its report (and closed: see above).
#[test]
fn inherited_descriptors_are_listed_in_the_report() {
    common::require_kvm();
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just created and are owned here only.
    let (_r, _w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let w = fds[1];
    let mut cmd = Command::new(VMM);
    cmd.args(["boot", "--probe"]);
    // SAFETY: dup2 is async-signal-safe; the copy has no close-on-exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(w, INHERITED) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let r = report(&cmd.output().unwrap());
    let s = r.sandbox.unwrap();
    assert!(
        s.prelude.inherited_fds_closed.contains(&INHERITED),
        "{:?}",
        s.prelude
    );
}

/// Paths prepared before the fork for [`private_kvm`].
struct KvmNode {
    dir: CString,
    node: CString,
    owner: u32,
    mode: u32,
}

/// In the child, before exec: a private mount namespace in which /dev/kvm is a fresh node of
/// the same device owned by `owner` with `mode` (the host's /dev/kvm is untouched).
fn private_kvm(k: &KvmNode) -> std::io::Result<()> {
    let err = std::io::Error::last_os_error;
    // SAFETY: raw syscalls on NUL-terminated paths prepared before the fork.
    unsafe {
        common::private_mount_namespace()?;
        libc::mkdir(k.dir.as_ptr(), 0o700);
        libc::unlink(k.node.as_ptr());
        if libc::mknod(
            k.node.as_ptr(),
            libc::S_IFCHR | k.mode,
            libc::makedev(10, 232),
        ) != 0
        {
            return Err(err());
        }
        if libc::chown(k.node.as_ptr(), k.owner, k.owner) != 0
            || libc::chmod(k.node.as_ptr(), k.mode) != 0
        {
            return Err(err());
        }
        if libc::mount(
            k.node.as_ptr(),
            c"/dev/kvm".as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        ) != 0
        {
            return Err(err());
        }
    }
    Ok(())
}

/// `truecold-vmm` with `args`, in a mount namespace whose /dev/kvm is owned by `owner` with
/// `mode`.
fn vmm_with_kvm(tag: &str, owner: u32, mode: u32, args: &[&str]) -> Command {
    common::require_kvm();
    let dir = format!(
        "{}/kvm-{tag}-{}",
        env!("CARGO_TARGET_TMPDIR"),
        std::process::id()
    );
    let k = KvmNode {
        node: CString::new(format!("{dir}/kvm")).unwrap(),
        dir: CString::new(dir).unwrap(),
        owner,
        mode,
    };
    let mut cmd = Command::new(VMM);
    cmd.args(args);
    // SAFETY: `private_kvm` makes raw syscalls only, on paths built before the fork.
    unsafe { cmd.pre_exec(move || private_kvm(&k)) };
    cmd
}

const NOBODY: u32 = 65534;

/// `--no-jail --uid/--gid` (the early drop, before /dev/kvm is opened) to a user who cannot
/// use /dev/kvm (root's, mode 0600): a typed error that says who, what /dev/kvm is, and what
/// to do; before anything is booted. Jailed, the same user boots: the drop comes after
/// /dev/kvm is open.
#[test]
fn drop_to_a_user_without_kvm_access_is_a_typed_error() {
    let o = vmm_with_kvm(
        "denied-jailed",
        0,
        0o600,
        &["boot", "--probe", "--uid", "65534", "--gid", "65534"],
    )
    .output()
    .expect("spawning the VMM in a private mount namespace (needs root)");
    let r = report(&o);
    assert_eq!(
        r.sandbox.unwrap().user,
        Some(sandbox::UserDrop {
            uid: NOBODY,
            gid: NOBODY
        })
    );
    let o = vmm_with_kvm(
        "denied",
        0,
        0o600,
        &[
            "boot",
            "--probe",
            "--no-jail",
            "--uid",
            "65534",
            "--gid",
            "65534",
        ],
    )
    .output()
    .expect("spawning the VMM in a private mount namespace (needs root)");
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let e: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(e["error"]["kind"], "kvm-access-denied", "{e}");
    let m = e["error"]["message"].as_str().unwrap();
    assert!(
        m.contains(
            "uid 65534 gid 65534 cannot read and write /dev/kvm (owner 0, group 0, mode 600)"
        ) && m.contains("--gid"),
        "{m}"
    );
    // Dropping to root is refused, typed.
    let o = vmm(&["boot", "--probe", "--uid", "0", "--gid", "65534"]);
    let e: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(e["error"]["kind"], "privilege-drop-failed", "{e}");
    // One without the other is an argument error.
    let o = vmm(&["boot", "--probe", "--uid", "65534"]);
    assert_eq!(o.status.code(), Some(2));
}

/// `--uid/--gid` to a user who may use /dev/kvm (a node owned by it, in a private mount
/// namespace): the probe boots to strict-ready; from outside, while a silent probe runs,
/// every uid and gid is the user's, no supplementary group, no capability.
#[test]
fn drop_to_a_user_with_kvm_access_boots() {
    let o = vmm_with_kvm(
        "ok",
        NOBODY,
        0o600,
        &[
            "boot", "--probe", "--vcpus", "2", "--uid", "65534", "--gid", "65534",
        ],
    )
    .output()
    .expect("spawning the VMM in a private mount namespace (needs root)");
    let r = report(&o);
    common::check_probe_report(&r, &r.config.clone());
    let s = r.sandbox.unwrap();
    assert_eq!(
        s.user,
        Some(sandbox::UserDrop {
            uid: NOBODY,
            gid: NOBODY
        })
    );
    assert!(s.seccomp.installed);

    let mut child = vmm_with_kvm(
        "ok-silent",
        NOBODY,
        0o600,
        &[
            "boot",
            "--probe-silent",
            "--deadline-ms",
            "120000",
            "--uid",
            "65534",
            "--gid",
            "65534",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawning the VMM in a private mount namespace (needs root)");
    let status = wait_for_filter(&mut child);
    for (key, want) in [
        ("Uid", "65534\t65534\t65534\t65534"),
        ("Gid", "65534\t65534\t65534\t65534"),
        ("Groups", ""),
        ("CapInh", "0000000000000000"),
        ("CapPrm", "0000000000000000"),
        ("CapEff", "0000000000000000"),
        ("NoNewPrivs", "1"),
    ] {
        assert_eq!(
            status_field(&status, key).as_deref(),
            Some(want),
            "{key}: {status}"
        );
    }
    kill(child);
}
