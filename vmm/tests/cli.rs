//! The `truecold-vmm boot` command line: one JSON object on stdout, a readable error chain.
mod common;

use std::process::Command;

use truecold_vmm::BootReport;

fn vmm(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_truecold-vmm"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn probe_boot_prints_one_json_report() {
    common::require_kvm();
    let o = vmm(&[
        "boot",
        "--probe",
        "--vcpus",
        "2",
        "--mem-mib",
        "16384",
        "--request-ns",
        "1",
    ]);
    let stdout = String::from_utf8(o.stdout).unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(stdout.lines().count(), 1);
    let r: BootReport = serde_json::from_str(&stdout).unwrap();
    common::check_probe_report(&r, &r.config.clone());
    assert_eq!(r.config.mem_mib, 16384);
    assert_eq!(r.core.stamps.request, Some(1));
    assert!(r
        .core
        .stamps
        .tile()
        .get(truecold_proto::measure::Stage::Spawn)
        .is_some());
}

#[test]
fn failures_exit_nonzero_with_one_error_chain_and_a_typed_json_error() {
    common::require_kvm();
    for (args, needle, kind) in [
        (
            vec!["boot", "--probe", "--mem-mib", "0"],
            "--mem-mib 0: guest memory below the minimum of 4 MiB",
            "memory-too-small",
        ),
        (
            vec!["boot", "--probe", "--mem-mib", "3"],
            "--mem-mib 3: guest memory below the minimum of 4 MiB",
            "memory-too-small",
        ),
        (
            vec!["boot", "--probe", "--mem-mib", "1048576"],
            "exceeds the host",
            "memory-too-large",
        ),
        (
            vec!["boot", "--probe", "--mem-mib", "1048577"],
            "--mem-mib 1048577: guest memory above the maximum of 1048576 MiB",
            "memory-too-large",
        ),
        (
            vec!["boot", "--probe", "--vcpus", "300"],
            "--vcpus 300: 1 to 32 vCPUs are supported",
            "invalid-vcpus",
        ),
        (
            vec!["boot", "--probe", "--vcpus", "0"],
            "--vcpus 0",
            "invalid-vcpus",
        ),
        (
            vec!["boot", "--probe", "--deadline-ms", "0"],
            "--deadline-ms must be positive",
            "invalid-deadline",
        ),
        (
            vec!["boot", "--kernel", "/nonexistent/vmlinux"],
            "/nonexistent/vmlinux",
            "kernel-missing",
        ),
        (
            vec!["boot", "--probe", "--vcpus", "33"],
            "--vcpus 33",
            "invalid-vcpus",
        ),
    ] {
        let o = vmm(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let stdout = String::from_utf8(o.stdout).unwrap();
        assert_eq!(stdout.lines().count(), 1, "one JSON object: {stdout}");
        let e: truecold_proto::report::ErrorReport = serde_json::from_str(&stdout).unwrap();
        assert_eq!(
            (e.schema, e.error.kind.as_str()),
            (truecold_vmm::report::SCHEMA, kind),
            "{args:?}"
        );
        let err = String::from_utf8(o.stderr).unwrap();
        assert!(err.starts_with("error: "), "{err}");
        assert_eq!(err.matches("error: ").count(), 1, "{err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(format!("error: {}\n", e.error.message), err);
    }
    // Bad arguments (clap): exit 2, the error report says `invalid-arguments`.
    for args in [
        vec!["boot", "--probe", "--vcpus", "two"],
        vec![
            "boot",
            "--probe",
            "--deadline-ms",
            "5",
            "--deadline-at-ns",
            "1",
        ],
        vec!["cpuid", "--vcpus", "33"],
    ] {
        let o = vmm(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e: truecold_proto::report::ErrorReport = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(e.error.kind, "invalid-arguments");
    }
}

#[test]
fn deadline_prints_error_and_report() {
    common::require_kvm();
    let o = vmm(&["boot", "--probe-silent", "--deadline-ms", "200"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(
        err.starts_with(
            "error: the guest failed: the guest did not finish within the 200 ms deadline"
        ),
        "{err}"
    );
    let r: BootReport = serde_json::from_slice(&o.stdout).unwrap();
    assert!(!r.core.outcome.ok);
    assert_eq!(r.core.outcome.failure_kind.as_deref(), Some("deadline"));
}

#[test]
fn past_absolute_deadline_is_the_deadline_error_at_once() {
    common::require_kvm();
    let o = vmm(&[
        "boot",
        "--probe",
        "--host-kind",
        "pvm",
        "--request-ns",
        "1",
        "--deadline-at-ns",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(
        err.starts_with(
            "error: the guest failed: the guest did not finish within the 1 ms deadline"
        ),
        "{err}"
    );
    let r: BootReport = serde_json::from_slice(&o.stdout).unwrap();
    assert!(!r.core.outcome.ok);
    // "At once" is structural, not timed: no vCPU ever entered KVM_RUN.
    assert!(r.core.stamps.first_run.is_none());
    assert_eq!(r.config.deadline, truecold_vmm::config::Deadline::AtNs(2));
    assert_eq!(r.config.host_kind, Some(truecold_vmm::host::HostKind::Pvm));
    assert_eq!(r.host.detected, None);
}
