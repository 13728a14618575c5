//! The parity flags on the command line: typed errors for bad values, and a probe boot
//! with the virtio devices attached (the probe never touches them; the boot still creates
//! them, runs the device thread under its seccomp filter, stops it and cleans up).
mod common;

use std::process::Command;

use truecold_proto::report::ErrorReport;
use truecold_vmm::BootReport;

fn vmm(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_truecold-vmm"))
        .args(args)
        .output()
        .unwrap()
}

fn error_kind(args: &[&str]) -> (String, String) {
    let o = vmm(args);
    assert_eq!(o.status.code(), Some(1), "{args:?}");
    let e: ErrorReport = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&o.stdout)));
    (e.error.kind, e.error.message)
}

#[test]
fn parity_flags_give_typed_errors() {
    let long = format!("/tmp/{}", "x".repeat(100));
    for (args, kind, needle) in [
        (
            vec![
                "boot",
                "--kernel",
                "/nonexistent/vmlinux",
                "--transport",
                "vsock",
            ],
            "invalid-transport",
            "--vsock-uds PATH is required",
        ),
        (
            vec![
                "boot",
                "--probe",
                "--transport",
                "vsock",
                "--vsock-uds",
                "/tmp/v.sock",
            ],
            "invalid-transport",
            "probe",
        ),
        (
            vec![
                "boot",
                "--kernel",
                "/nonexistent/vmlinux",
                "--transport",
                "vsock",
                "--vsock-uds",
                &long,
            ],
            "vsock-uds-invalid",
            "too long",
        ),
        (
            vec!["boot", "--probe", "--vsock-uds", "/tmp/v.sock"],
            "vsock-uds-invalid",
            "only with --transport vsock",
        ),
        (
            vec![
                "boot",
                "--probe",
                "--tap",
                "Bad!",
                "--net-pair",
                "10.0.0.1,10.0.0.2",
            ],
            "invalid-tap",
            "Bad!",
        ),
        (
            vec![
                "boot",
                "--probe",
                "--tap",
                "tc0",
                "--net-pair",
                "10.0.0.1,10.0.0.9",
            ],
            "invalid-net-pair",
            "10.0.0.9",
        ),
        (
            vec!["boot", "--probe", "--tap", "tc0"],
            "invalid-tap",
            "go together",
        ),
        (
            vec!["boot", "--probe", "--net-pair", "10.0.0.1,10.0.0.2"],
            "invalid-tap",
            "go together",
        ),
    ] {
        let (k, msg) = error_kind(&args);
        assert_eq!(k, kind, "{args:?}: {msg}");
        assert!(msg.contains(needle), "{args:?}: {msg}");
    }
    // A transport that does not exist is clap's.
    let o = vmm(&["boot", "--probe", "--transport", "pigeon"]);
    assert_eq!(o.status.code(), Some(2));
    let e: ErrorReport = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        e.error.message.contains("ports, serial, vsock"),
        "{}",
        e.error.message
    );
}

#[test]
fn missing_workspace_image_is_workspace_open_failed() {
    common::require_kvm();
    let (k, msg) = error_kind(&["boot", "--probe", "--workspace", "/nonexistent/w.img"]);
    assert_eq!(k, "workspace-open-failed", "{msg}");
    assert!(msg.contains("/nonexistent/w.img"), "{msg}");
}

#[test]
fn probe_boot_with_a_workspace_runs_the_device_thread_under_seccomp() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("w.img");
    std::fs::write(&img, vec![0x42u8; 1 << 20]).unwrap();
    let o = vmm(&["boot", "--probe", "--workspace", img.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: BootReport = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r.config.virtio.workspace.as_deref(), Some(img.as_path()));
    let s = r.sandbox.expect("the CLI confines itself");
    assert!(s.seccomp.installed);
    // 36 + epoll_wait, epoll_pwait, epoll_ctl + pwrite64, fdatasync.
    assert_eq!(s.seccomp.allowed_syscalls, 41);
    // Jailed as root (the image was opened before, its path is not in the jail); else
    // not, saying why.
    let c = r.core.containment.expect("the CLI reports its containment");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert!(c.contained, "{c:?}");
    } else {
        assert!(!c.contained);
        let why = c.not_contained_because.unwrap_or_default();
        assert!(why.starts_with("not started as root"), "{why}");
    }
    // The image is untouched (the probe never writes it).
    assert_eq!(std::fs::read(&img).unwrap(), vec![0x42u8; 1 << 20]);
}

#[test]
fn probe_boot_with_a_tap_creates_and_removes_it() {
    common::require_kvm();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root && std::path::Path::new("/dev/net/tun").exists(),
        "this test needs root and /dev/net/tun: run it as root on a kernel with the tun \
         module (`modprobe tun`)"
    );
    let name = format!("tcc{}", std::process::id() % 1_000_000);
    let o = vmm(&[
        "boot",
        "--probe",
        "--tap",
        &name,
        "--net-pair",
        "10.200.254.1,10.200.254.2",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: BootReport = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r.config.virtio.tap.as_deref(), Some(name.as_str()));
    // 36 + epoll (3).
    assert_eq!(r.sandbox.unwrap().seccomp.allowed_syscalls, 39);
    // Jailed in a new network namespace: the tap, created before, still works by descriptor.
    assert!(r.core.containment.as_ref().is_some_and(|c| c.contained));
    assert!(
        !std::path::Path::new("/sys/class/net").join(&name).exists(),
        "tap {name} left behind"
    );
}
