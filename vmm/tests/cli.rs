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
    assert_eq!(r.config.mem.mib(), 16384);
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
        (
            vec!["boot", "--probe", "--vcpus", "6", "--packages", "4"],
            "6 vCPUs do not split into 4 packages",
            "invalid-cpu-platform",
        ),
        (
            vec!["boot", "--probe", "--vcpus", "6", "--packages", "2"],
            "3 cores a package is not a power of two",
            "invalid-cpu-platform",
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
        vec!["boot", "--probe", "--blk-rate-limit", "ops=0"],
        vec!["boot", "--probe", "--net-tx-rate-limit", "frames=3"],
        vec!["boot", "--probe", "--vsock-tx-rate-limit", ""],
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

/// A fresh path for a report file in the target's temporary directory.
fn report_path(name: &str) -> std::path::PathBuf {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let p = dir.join(format!("{name}-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

#[test]
fn report_file_takes_the_report_off_stdout() {
    common::require_kvm();
    let path = report_path("ports-report");
    let o = vmm(&[
        "boot",
        "--probe",
        "--transport",
        "ports",
        "--report-file",
        path.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        o.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 1);
    let r: BootReport = serde_json::from_str(&text).unwrap();
    common::check_probe_report(&r, &r.config.clone());
    assert_eq!(r.core.transport, truecold_proto::kinds::Transport::Ports);
    assert_eq!(r.serial_input, None);
}

#[test]
fn serial_transport_needs_a_report_file_and_a_linux_guest() {
    // Without --report-file: a usage error (exit 2), its JSON on stdout (there is no file).
    let o = vmm(&[
        "boot",
        "--kernel",
        "/nonexistent/vmlinux",
        "--transport",
        "serial",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e: truecold_proto::report::ErrorReport = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(e.error.kind, "invalid-arguments");
    assert!(
        e.error.message.contains("--report-file"),
        "{}",
        e.error.message
    );
    // Not a transport.
    let o = vmm(&["boot", "--probe", "--transport", "pigeon"]);
    assert_eq!(o.status.code(), Some(2));
    let e: truecold_proto::report::ErrorReport = serde_json::from_slice(&o.stdout).unwrap();
    assert!(e.error.message.contains("pigeon"), "{}", e.error.message);
    // Conflicts: the probe guests, --console. The typed error goes to the report file and
    // stdout (the serial line) stays empty.
    for (extra, needle) in [
        (vec!["--probe"], "probe"),
        (vec!["--probe-silent"], "probe"),
        (
            vec!["--kernel", "/nonexistent/vmlinux", "--console"],
            "--console",
        ),
    ] {
        let path = report_path("serial-conflict");
        let mut args = vec![
            "boot",
            "--transport",
            "serial",
            "--report-file",
            path.to_str().unwrap(),
        ];
        args.extend(extra.iter().copied());
        let o = vmm(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}");
        let err = String::from_utf8(o.stderr).unwrap();
        assert!(err.starts_with("error: invalid configuration: --transport serial: "));
        assert!(err.contains(needle), "{args:?}: {err}");
        let e: truecold_proto::report::ErrorReport =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(
            (e.schema, e.error.kind.as_str()),
            (truecold_vmm::report::SCHEMA, "invalid-transport")
        );
    }
    // A pre-guest failure under the serial transport also lands in the report file.
    let path = report_path("serial-no-kernel");
    let o = vmm(&[
        "boot",
        "--transport",
        "serial",
        "--report-file",
        path.to_str().unwrap(),
        "--kernel",
        "/nonexistent/vmlinux",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    let e: truecold_proto::report::ErrorReport =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(e.error.kind, "kernel-missing");
}

#[test]
fn an_unwritable_report_file_fails_the_run() {
    common::require_kvm();
    let o = vmm(&[
        "boot",
        "--probe",
        "--report-file",
        "/nonexistent/dir/report.json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(
        err.contains("cannot write the report to /nonexistent/dir/report.json"),
        "{err}"
    );
}

/// A device rate limit given on the command line is the one the boot runs with: echoed in the
/// report's configuration in the flag syntax (the defaults are left out of it).
#[test]
fn rate_limit_flags_reach_the_configuration() {
    common::require_kvm();
    let o = vmm(&[
        "boot",
        "--probe",
        "--blk-rate-limit",
        "bytes=1048576/65536,ops=8",
        "--vsock-tx-rate-limit",
        "off",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: BootReport = serde_json::from_slice(&o.stdout).unwrap();
    let l = r.config.virtio.limits;
    assert_eq!(l.blk.spec(), "bytes=1048576/65536,ops=8/8");
    assert_eq!(l.vsock_tx, truecold_vmm::virtio::rate::RateLimit::UNLIMITED);
    assert_eq!(l.net_tx, truecold_vmm::virtio::rate::RateLimit::NET_TX);
    let o = vmm(&["boot", "--probe"]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("limits"));
}

/// `--ram-layout hole-inside` (the default) is the layout the boot runs with: echoed in the
/// report's configuration (absent exactly for `around-hole`, `RamLayout::ABSENT`), the hole
/// one E820 reserved entry, RAM + hole = configured in every figure; a misspelt layout is a
/// usage error.
#[test]
fn ram_layout_flag_reaches_the_configuration_and_the_memory_map() {
    use truecold_proto::kinds::RamLayout;
    common::require_kvm();
    let o = vmm(&["boot", "--probe", "--ram-layout", "hole-inside"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["config"]["ram_layout"], "hole-inside");
    let r: BootReport = serde_json::from_value(v).unwrap();
    assert_eq!(r.config.ram_layout, RamLayout::HoleInside);
    common::check_probe_report(&r, &r.config.clone());
    let reserved: Vec<_> = r.memory.e820.iter().filter(|e| e.kind == 2).collect();
    assert_eq!(
        reserved
            .iter()
            .map(|e| (e.addr, e.size))
            .collect::<Vec<_>>(),
        vec![(0xa_0000, 0x6_0000)]
    );
    let o = vmm(&["boot", "--probe"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(d["config"]["ram_layout"], "hole-inside", "the default");
    let o = vmm(&["boot", "--probe", "--ram-layout", "around-hole"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        !out.contains("ram_layout") && !out.contains("e820_hole_reserved"),
        "{out}"
    );
    let o = vmm(&["boot", "--probe", "--ram-layout", "inside"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("around-hole, hole-inside"));
}

/// `--sample-rip-us` under the CLI's jail and seccomp filters: the silent probe spins in
/// its image for 300 ms, so vCPU 0 is sampled there (checked by
/// `common::check_rip_samples`) and the never-started AP is seen waiting; a period below
/// the bound is refused before anything runs.
#[test]
fn sample_rip_us_samples_the_guest_under_the_filters() {
    common::require_kvm();
    let o = vmm(&[
        "boot",
        "--probe-silent",
        "--vcpus",
        "2",
        "--deadline-ms",
        "300",
        "--sample-rip-us",
        "1000",
    ]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: BootReport = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r.core.outcome.failure_kind.as_deref(), Some("deadline"));
    assert!(r.sandbox.as_ref().is_some_and(|s| s.seccomp.installed));
    assert_eq!(r.config.sample_rip_us.map(|p| p.us()), Some(1000));
    let samples = common::check_rip_samples(&r, 1000);
    assert!(
        !samples[0].is_empty(),
        "300 ms of a spinning guest at 1 ms gave vCPU 0 no sample: {:?}",
        r.core.rip_samples
    );
    assert!(samples[0]
        .iter()
        .all(|s| s.state == truecold_proto::rip::VcpuState::Running));
    assert!(samples[1]
        .iter()
        .all(|s| s.state == truecold_proto::rip::VcpuState::WaitingForStart));
    let bad = vmm(&["boot", "--probe", "--sample-rip-us", "5"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("outside 10..=1000000"));
}

/// `--sample-stacks` under the CLI's jail and seccomp filters: each sample also reads the
/// special registers (`KVM_GET_SREGS`, in the vCPU threads' filter) and walks the stack;
/// the probe guest never runs 64-bit kernel code, so every sample's stack is "not walked",
/// one entry of each vCPU's table. Without `--sample-rip-us` the flag is refused.
#[test]
fn sample_stacks_walks_under_the_filters() {
    common::require_kvm();
    let o = vmm(&[
        "boot",
        "--probe-silent",
        "--vcpus",
        "2",
        "--deadline-ms",
        "300",
        "--sample-rip-us",
        "1000",
        "--sample-stacks",
    ]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: BootReport = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r.core.outcome.failure_kind.as_deref(), Some("deadline"));
    assert!(r.config.sample_stacks);
    let samples = common::check_rip_samples(&r, 1000);
    assert!(!samples[0].is_empty());
    let rs = r.core.rip_samples.as_ref().unwrap();
    let stacks = rs.stacks().unwrap();
    for (v, st) in stacks.iter().enumerate() {
        let st = st.as_ref().expect("every vCPU has its stack indices");
        assert_eq!(st.of_sample.len(), samples[v].len());
        assert!(st.table.len() <= 1, "{:?}", st.table);
        assert!(st
            .table
            .iter()
            .all(|s| s.frames.is_empty() && s.end == truecold_proto::rip::StackEnd::NotWalked));
    }
    let bad = vmm(&["boot", "--probe", "--sample-stacks"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// Without `--sample-rip-us` the report has no `rip_samples` key (old reports keep their
/// bytes).
#[test]
fn no_sampling_no_rip_samples_key() {
    common::require_kvm();
    let o = vmm(&["boot", "--probe"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v.get("rip_samples").is_none());
    assert!(v["config"].get("sample_rip_us").is_none());
    assert!(v["config"].get("sample_stacks").is_none());
}

/// `--pin-vcpus` under the CLI's jail and seccomp filters: each vCPU thread pins itself to
/// the next CPU of the process's affinity (the report's `vcpu_cpus`), the process filter has
/// one more syscall for it; with fewer CPUs than vCPUs (`taskset`) the boot is refused,
/// typed, before anything runs.
#[test]
fn pin_vcpus_places_each_vcpu_on_a_cpu_of_its_own() {
    common::require_kvm();
    let allowed = truecold_vmm::pin::allowed_cpus().unwrap();
    let o = vmm(&["boot", "--probe", "--pin-vcpus"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: BootReport = serde_json::from_slice(&o.stdout).unwrap();
    assert!(r.config.pin_vcpus);
    assert_eq!(
        r.vcpu_cpus.as_ref().map(|p| p.cpus().to_vec()),
        Some(vec![allowed[0]])
    );
    let seccomp = &r.sandbox.as_ref().unwrap().seccomp;
    assert!(seccomp.installed);
    assert_eq!(seccomp.allowed_syscalls, 37);
    // Unpinned: no key, the 36 syscalls.
    let o = vmm(&["boot", "--probe"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v.get("vcpu_cpus").is_none() && v["config"].get("pin_vcpus").is_none());
    assert_eq!(v["sandbox"]["seccomp"]["allowed_syscalls"], 36);
    // One CPU for two vCPUs.
    let o = std::process::Command::new("taskset")
        .args(["-c", &allowed[0].to_string()])
        .arg(env!("CARGO_BIN_EXE_truecold-vmm"))
        .args(["boot", "--probe", "--vcpus", "2", "--pin-vcpus"])
        .output()
        .expect("taskset (util-linux) runs");
    assert_eq!(o.status.code(), Some(1));
    let e: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(e["error"]["kind"], "pin-too-few-cpus", "{e}");
    assert!(e["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("2 vCPUs") && m.contains("1 CPU(s)")));
}
