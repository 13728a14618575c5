//! The jail of `truecold-vmm boot` as root (vmm/src/jail.rs, docs/security.md): the contained
//! boot and its step costs; what the jailed process can no longer reach (a file, a pathname
//! socket outside its socket directory, an abstract socket) and what it still can (a socket
//! in the bound directory, an open tap); the vCPU threads' own filter; the missing user; the
//! opt-out. These run as root with /dev/kvm and the `truecold-vmm` user (scripts/deps.sh
//! creates it): each fails, never skips, without them.
mod common;

use std::ffi::CString;
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};

use truecold_proto::report::Containment;
use truecold_vmm::sandbox::{self, DeviceNeeds, EXIT_SECCOMP_VIOLATION};
use truecold_vmm::BootReport;

const VMM: &str = env!("CARGO_BIN_EXE_truecold-vmm");

fn vmm(args: &[&str]) -> Output {
    common::require_kvm();
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

fn containment(r: &BootReport) -> Containment {
    r.core
        .containment
        .clone()
        .expect("the CLI's report has a containment")
}

/// The jail user's (uid, gid), or a failure naming what creates it.
fn jail_user() -> (u32, u32) {
    truecold_vmm::jail::lookup_user().unwrap_or_else(|e| panic!("{e}"))
}

/// The self-test's `(result, errno)` from the VMM's stderr.
fn selftest_result(o: &Output) -> (i64, i32) {
    let err = String::from_utf8_lossy(&o.stderr);
    let line = err
        .lines()
        .find(|l| l.contains("--sandbox-selftest"))
        .unwrap_or_else(|| panic!("no self-test line: {err}"));
    let rest = line.split("the call returned ").nth(1).unwrap();
    let r: i64 = rest.split(' ').next().unwrap().parse().unwrap();
    let errno: i32 = rest
        .split("(errno ")
        .nth(1)
        .unwrap()
        .trim_end_matches(')')
        .parse()
        .unwrap();
    (r, errno)
}

/// A fresh directory under the target's tmp dir, searchable by every user (the jail user
/// must reach a socket in it).
fn open_dir(tag: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let d = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("jail-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// A listener at `path` that every user may connect to.
fn listen(path: &std::path::Path) -> UnixListener {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::remove_file(path);
    let l = UnixListener::bind(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    l
}

/// As root, by default: contained, as the `truecold-vmm` user, in three new namespaces,
/// each step timed; the filters counted per thread; the probe boots.
#[test]
fn contained_by_default_with_each_step_timed() {
    let (uid, gid) = jail_user();
    let r = report(&vmm(&["boot", "--probe", "--vcpus", "2"]));
    common::check_probe_report(&r, &r.config.clone());
    let c = containment(&r);
    assert!(c.contained, "{c:?}");
    assert_eq!(c.not_contained_because, None);
    assert_eq!(c.user.as_deref(), Some("truecold-vmm"));
    assert_eq!((c.uid, c.gid), (Some(uid), Some(gid)));
    assert_eq!(c.namespaces, ["mnt", "net", "ipc"]);
    assert!(c.binds.is_empty(), "{c:?}");
    let s = c.steps;
    for (name, v) in [
        ("unshare", s.unshare_ns),
        ("mounts", s.mounts_ns),
        ("drop", s.drop_ns),
        ("filters", s.filters_ns),
        ("vcpu filter", s.vcpu_filter_ns),
    ] {
        assert!(v.is_some_and(|v| v > 0), "{name}: {s:?}");
    }
    let pid = std::process::id();
    assert_eq!(
        c.allowed_syscalls,
        Some(sandbox::allowlist(pid).len() as u32)
    );
    assert_eq!(
        c.vcpu_allowed_syscalls,
        Some(sandbox::vcpu_allowlist(pid, DeviceNeeds::default()).len() as u32)
    );
    assert!(c.vcpu_allowed_syscalls < c.allowed_syscalls);
    let sb = r.sandbox.unwrap();
    assert_eq!(sb.user, Some(sandbox::UserDrop { uid, gid }));
    assert_eq!(sb.seccomp.mode_observed, Some(2));
}

/// `/proc/<pid>/status` text of `field`, trimmed.
fn field(status: &str, key: &str) -> Option<String> {
    status.lines().find_map(|l| {
        l.strip_prefix(key)?
            .strip_prefix(':')
            .map(|v| v.trim().to_string())
    })
}

/// Seen from outside while a silent probe runs: other mount, network and IPC namespaces
/// than the host's, a root that is not the host's, the jail user's ids; each vCPU thread
/// holds one filter more than the main thread (its own, stacked).
#[test]
fn the_running_jail_seen_from_outside() {
    common::require_kvm();
    let (uid, _) = jail_user();
    let mut child = Command::new(VMM)
        .args([
            "boot",
            "--probe-silent",
            "--vcpus",
            "2",
            "--deadline-ms",
            "120000",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until both vCPU threads run under their filter. Bounded by the VMM's own deadline
    // (120 s above): a VMM whose filters never show exits then, which ends the wait.
    let vcpus = loop {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the VMM exited before both vCPU threads ran under their filter"
        );
        let mut v = Vec::new();
        if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for t in rd.flatten() {
                let st = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
                v.push((
                    field(&st, "Name").unwrap_or_default(),
                    field(&st, "Seccomp_filters").unwrap_or_default(),
                ));
            }
        }
        let ready = v
            .iter()
            .filter(|(n, f)| n.starts_with("vcpu") && f == "3")
            .count();
        if ready == 2 {
            break v;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    for ns in ["mnt", "net", "ipc"] {
        let ours = std::fs::read_link(format!("/proc/self/ns/{ns}")).unwrap();
        let its = std::fs::read_link(format!("/proc/{pid}/ns/{ns}")).unwrap();
        assert_ne!(ours, its, "{ns}");
    }
    // Its root is the jail's tmpfs: the host's /etc is not under it.
    assert!(!std::path::Path::new(&format!("/proc/{pid}/root/etc")).exists());
    assert_eq!(
        field(&status, "Uid").as_deref(),
        Some(format!("{uid}\t{uid}\t{uid}\t{uid}").as_str())
    );
    assert_eq!(
        field(&status, "CapEff").as_deref(),
        Some("0000000000000000")
    );
    // The main thread: clone3 → ENOSYS and the allowlist; each vCPU its own on top.
    assert_eq!(field(&status, "Seccomp_filters").as_deref(), Some("2"));
    assert!(vcpus.iter().any(|(n, _)| n == "vcpu0"), "{vcpus:?}");
    let _ = child.kill();
    let _ = child.wait();
}

/// As the jail's user, inside its root, a host file is unreachable (without the filter,
/// which would refuse the open itself); without the jail the same open succeeds.
#[test]
fn a_file_outside_the_jail_cannot_be_opened() {
    jail_user();
    let o = vmm(&[
        "boot",
        "--probe",
        "--no-seccomp",
        "--sandbox-selftest",
        "open:/etc/passwd",
    ]);
    report(&o);
    assert_eq!(selftest_result(&o), (-1, libc::ENOENT));
    let o = vmm(&[
        "boot",
        "--probe",
        "--no-seccomp",
        "--no-jail",
        "--sandbox-selftest",
        "open:/etc/passwd",
    ]);
    report(&o);
    let (fd, _) = selftest_result(&o);
    assert!(fd >= 0, "{fd}");
}

/// Under the filter of every device's needs (socket + connect allowed, as for vsock): a
/// pathname socket outside the socket directory does not exist in the jail, an abstract
/// socket of the host is in another network namespace; a socket in the bound directory
/// (the vsock case) connects, from the new network namespace. Without the jail all three
/// connect.
#[test]
fn connect_reaches_only_the_socket_directory() {
    jail_user();
    let bound = open_dir("bound");
    let outside = open_dir("outside");
    let _in_dir = listen(&bound.join("agent.sock_1024"));
    let _out = listen(&outside.join("host.sock"));
    let name = format!("truecold-jail-test-{}", std::process::id());
    let _abstract = {
        use std::os::linux::net::SocketAddrExt;
        let a = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        UnixListener::bind_addr(&a).unwrap()
    };
    let cases = [
        (
            format!("connect:{}", outside.join("host.sock").display()),
            (-1, libc::ENOENT),
        ),
        (format!("connect-abstract:{name}"), (-1, libc::ECONNREFUSED)),
        (
            format!("connect-bound:{}", bound.join("agent.sock_1024").display()),
            (0, 0),
        ),
    ];
    for (t, want) in &cases {
        let o = vmm(&["boot", "--probe", "--sandbox-selftest", t]);
        let r = report(&o);
        assert_eq!(selftest_result(&o), *want, "{t}");
        let c = containment(&r);
        assert!(c.contained);
        if t.starts_with("connect-bound:") {
            assert_eq!(
                c.binds,
                [bound.canonicalize().unwrap().display().to_string()]
            );
        }
        let o = vmm(&["boot", "--probe", "--no-jail", "--sandbox-selftest", t]);
        report(&o);
        assert_eq!(selftest_result(&o), (0, 0), "{t} without the jail");
    }
    let _ = std::fs::remove_dir_all(&bound);
    let _ = std::fs::remove_dir_all(&outside);
}

/// The same process-wide filter (every device's needs): socket(AF_UNIX) from a new thread
/// (as the vsock device thread) succeeds; from vCPU 0, under its own filter, it traps and
/// the VMM says which thread's list refused it.
#[test]
fn a_vcpu_thread_cannot_make_a_socket() {
    let o = vmm(&["boot", "--probe", "--sandbox-selftest", "device-socket"]);
    report(&o);
    let (fd, _) = selftest_result(&o);
    assert!(fd >= 0, "{fd}");
    let o = vmm(&["boot", "--probe", "--sandbox-selftest", "vcpu-socket"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(i32::from(EXIT_SECCOMP_VIOLATION)),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "seccomp refused syscall {} (socket, not in a vCPU thread's allowlist)",
            libc::SYS_socket
        )),
        "{err}"
    );
    assert!(o.stdout.is_empty());
    // Without the filters the call is made and the boot goes on.
    let o = vmm(&[
        "boot",
        "--probe",
        "--no-seccomp",
        "--sandbox-selftest",
        "vcpu-socket",
    ]);
    report(&o);
    assert!(selftest_result(&o).0 >= 0);
}

/// In the child, before exec: a private mount namespace whose /etc/passwd is `passwd`.
fn private_passwd(passwd: &CString) -> std::io::Result<()> {
    let err = std::io::Error::last_os_error;
    // SAFETY: raw syscalls on NUL-terminated paths prepared before the fork.
    unsafe {
        common::private_mount_namespace()?;
        if libc::mount(
            passwd.as_ptr(),
            c"/etc/passwd".as_ptr(),
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

/// Without the `truecold-vmm` user the VMM refuses to boot, typed, naming scripts/deps.sh
/// (never an uncontained boot as root); `--uid/--gid` or `--no-jail` boot.
#[test]
fn a_missing_jail_user_is_a_typed_error() {
    common::require_kvm();
    let dir = open_dir("passwd");
    let passwd = dir.join("passwd");
    std::fs::write(&passwd, "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    let c = CString::new(passwd.to_str().unwrap()).unwrap();
    let run = |extra: &[&str]| {
        let c = c.clone();
        let mut cmd = Command::new(VMM);
        cmd.args(["boot", "--probe"]).args(extra);
        // SAFETY: `private_passwd` makes raw syscalls only, on a path built before the fork.
        unsafe { cmd.pre_exec(move || private_passwd(&c)) };
        cmd.output()
            .expect("spawning the VMM in a private mount namespace (needs root)")
    };
    let o = run(&[]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let e: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(e["error"]["kind"], "jail-user-missing", "{e}");
    let m = e["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("`truecold-vmm` is not in /etc/passwd") && m.contains("scripts/deps.sh"),
        "{m}"
    );
    let r = report(&run(&["--uid", "65534", "--gid", "65534"]));
    let c = containment(&r);
    assert!(c.contained);
    assert_eq!(c.user.as_deref(), Some("--uid/--gid"));
    assert_eq!((c.uid, c.gid), (Some(65534), Some(65534)));
    let r = report(&run(&["--no-jail"]));
    assert!(!containment(&r).contained);
    let _ = std::fs::remove_dir_all(&dir);
    // Dropping to root is no jail either.
    let o = vmm(&["boot", "--probe", "--uid", "0", "--gid", "65534"]);
    let e: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(e["error"]["kind"], "privilege-drop-failed", "{e}");
}

/// `--no-jail`: the boot is the same, recorded as not contained and why, with no jail step
/// and the filters still timed and counted.
#[test]
fn the_opt_out_is_recorded() {
    let r = report(&vmm(&["boot", "--probe", "--vcpus", "2", "--no-jail"]));
    common::check_probe_report(&r, &r.config.clone());
    let c = containment(&r);
    assert!(!c.contained);
    assert_eq!(c.not_contained_because.as_deref(), Some("--no-jail"));
    assert_eq!((c.user.as_deref(), c.uid, c.gid), (None, None, None));
    assert!(c.namespaces.is_empty());
    assert_eq!(
        (c.steps.unshare_ns, c.steps.mounts_ns, c.steps.drop_ns),
        (None, None, None)
    );
    assert!(c.steps.filters_ns.is_some() && c.steps.vcpu_filter_ns.is_some());
    assert!(c.allowed_syscalls.is_some() && c.vcpu_allowed_syscalls.is_some());
    assert_eq!(r.sandbox.unwrap().user, None);
    // Neither jail nor filters: nothing timed, nothing counted.
    let r = report(&vmm(&["boot", "--probe", "--no-jail", "--no-seccomp"]));
    let c = containment(&r);
    assert_eq!(c.steps, Default::default());
    assert_eq!((c.allowed_syscalls, c.vcpu_allowed_syscalls), (None, None));
}

/// The claim the jail rests on for the parity devices: a tap opened before the process
/// enters a new network namespace keeps carrying frames both ways, although the interface
/// is not in that namespace (the VMM's net device uses only the descriptor).
#[test]
fn an_open_tap_works_from_a_new_network_namespace() {
    use std::io::{Read, Write};
    use std::net::{Ipv4Addr, UdpSocket};
    let n = std::process::id() % 10_000;
    let name = format!("tcjail{n}");
    let host = Ipv4Addr::new(10, 254, (n % 250) as u8, 1);
    let guest = Ipv4Addr::new(10, 254, (n % 250) as u8, 2);
    let tap = truecold_host::tap::Tap::create(&name, host, 30)
        .unwrap_or_else(|e| panic!("creating a tap needs root and /dev/net/tun: {e}"));
    let rx = || -> u64 {
        std::fs::read_to_string(format!("/sys/class/net/{name}/statistics/rx_packets"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let before = rx();
    let mut file = tap.file().try_clone().unwrap();
    let cname = CString::new(name.clone()).unwrap();
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    let (sent_tx, sent_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        // SAFETY: integer argument only; this thread alone moves to the new namespace.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
        // SAFETY: a NUL-terminated name.
        let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        // An Ethernet broadcast frame (ARP ethertype, zero payload) behind the vnet header.
        let mut frame = vec![0u8; truecold_host::tap::VNET_HDR_LEN];
        frame.extend_from_slice(&[0xff; 6]);
        frame.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
        frame.extend_from_slice(&[0x08, 0x06]);
        frame.extend_from_slice(&[0u8; 46]);
        let wrote = file.write(&frame).unwrap();
        seen_tx.send(()).unwrap();
        // The host's traffic to the guest address arrives as frames on the descriptor.
        sent_rx.recv().unwrap();
        let mut buf = vec![0u8; 2048];
        let t0 = std::time::Instant::now();
        let got = loop {
            match file.read(&mut buf) {
                Ok(n) if n > 0 => break n,
                _ if t0.elapsed().as_secs() < 10 => {
                    std::thread::sleep(std::time::Duration::from_millis(5))
                }
                other => panic!("no frame from the host: {other:?}"),
            }
        };
        (index, wrote, frame.len(), got)
    });
    seen_rx.recv().unwrap();
    let s = UdpSocket::bind((host, 0)).unwrap();
    let _ = s.send_to(b"x", (guest, 9));
    sent_tx.send(()).unwrap();
    let (index, wrote, len, got) = t.join().unwrap();
    assert_eq!(index, 0, "the tap is not in the new namespace");
    assert_eq!(wrote, len);
    assert!(got > truecold_host::tap::VNET_HDR_LEN, "{got}");
    assert!(rx() > before, "the host saw no frame");
}

/// With vsock the socket directory is bound into the jail: a relative `--vsock-uds` (the
/// working directory is the jail's root after `pivot_root`) is made absolute and its
/// directory, canonical, is the one bind. The probe image booted as a kernel file speaks the
/// ports protocol, so the boot is judged a failure; what matters is that the guest ran,
/// jailed, with the bind.
#[test]
fn the_vsock_socket_directory_is_the_one_bind() {
    common::require_kvm();
    jail_user();
    let dir = open_dir("vsock");
    let kernel = dir.join("probe.elf");
    std::fs::write(&kernel, truecold_vmm::probe::PROBE_ELF).unwrap();
    let o = Command::new(VMM)
        .current_dir(&dir)
        .args([
            "boot",
            "--force",
            "--transport",
            "vsock",
            "--vsock-uds",
            "v.sock",
            "--deadline-ms",
            "2000",
            "--kernel",
        ])
        .arg(&kernel)
        .output()
        .unwrap();
    let r: BootReport = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    let c = containment(&r);
    assert!(c.contained, "{c:?}");
    assert_eq!(c.binds, [dir.canonicalize().unwrap().display().to_string()]);
    // The vsock device's needs: the process-wide list grows, a vCPU thread's does not by
    // socket or connect.
    assert_eq!(
        c.allowed_syscalls,
        Some(sandbox::allowlist_for(0, DeviceNeeds::of(&r.config.virtio)).len() as u32)
    );
    assert_eq!(
        r.config.virtio.vsock_uds.as_deref(),
        Some(dir.canonicalize().unwrap().join("v.sock").as_path())
    );
    let _ = std::fs::remove_dir_all(&dir);
}
