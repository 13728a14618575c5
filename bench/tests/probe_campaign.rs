//! End to end on this host's /dev/kvm with the real `truecold-vmm`: a 20-sample probe-guest
//! campaign whose bundle passes `sha256sum -c --strict` and the verifier, and a Ctrl-C'd
//! campaign that leaves a valid partial bundle marked incomplete.
//!
//! Needs /dev/kvm and the VMM binary built into the same target directory:
//! `cargo build -p truecold-vmm && cargo test -p truecold-bench`. Missing either FAILS.

mod common;
use truecold_proto::kinds::{Engine, RamLayout};

use common::{require_kvm, sha256sum_check};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn truecold() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_truecold"))
}

fn vmm() -> PathBuf {
    common::vmm_next_to(&truecold())
}

fn base_cmd(out: &Path, n: &str) -> Command {
    let mut c = Command::new(truecold());
    // A generous deadline: these tests check the contract and the bundle, not speed.
    c.args([
        "run",
        "--probe",
        "-n",
        n,
        "--vcpus",
        "2",
        "--mem-mib",
        "256",
        "--deadline-ms",
        "60000",
        "--out",
    ])
    .arg(out)
    .arg("--vmm")
    .arg(vmm())
    .env("CI", "true");
    c
}

#[test]
fn twenty_probe_boots_make_a_bundle_that_verifies() {
    require_kvm();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("bundle");
    let o = base_cmd(&out, "20").output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    // The verdict of its own bundle is on stdout (exit 2 when invalid).
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "truecold failed: {stdout}\n{stderr}");
    sha256sum_check(&out);
    let v = truecold_proof::verify::verify_dir(&out);
    assert!(v.is_valid(), "{}", v.render(&out, 10));
    let r = v.result.unwrap();
    assert_eq!(r.summary.attempts, 20);
    assert_eq!(v.rows, Some(20));
    assert_eq!(
        r.summary.successes, 20,
        "{:?} (bad_report: is target/debug/truecold-vmm stale? `cargo build -p truecold-vmm`)",
        r.summary.errors
    );
    assert!(!r.contract.incomplete);
    assert_eq!(r.contract.label, truecold_proof::schema::PROBE_LABEL);
    assert!(r.artifacts.contains_key("vmm"));
    // The probe has no kernel and so no boot id: every row's is empty (its strict-ready is
    // the VMM's verified echo of a fresh nonce, which `ok` already requires). Each row carries
    // the probe's own RAM figure, equal to what the host configured less the default
    // layout's declared hole (`hole-inside`: 384 KiB).
    assert_eq!(r.configuration.ram_layout, RamLayout::HoleInside);
    let ram = Engine::Truecold.expected_firmware_ram(256 << 20, RamLayout::HoleInside);
    assert_eq!(ram, (256 << 20) - (384 << 10));
    let (_, samples) = truecold_proof::bundle::read_bundle(&out).unwrap();
    for s in &samples {
        assert_eq!(s.boot_id, None, "probe sample {} has a boot id", s.index);
        assert_eq!(s.guest_mem_firmware, Some(ram), "sample {}", s.index);
    }
    for f in ["README.md", "result.json", "samples.csv", "cmdline.txt"] {
        let text = std::fs::read_to_string(out.join(f)).unwrap();
        if f != "samples.csv" {
            assert!(
                text.contains("probe"),
                "{f} does not say it is a probe campaign"
            );
        }
    }
    let readme = std::fs::read_to_string(out.join("README.md")).unwrap();
    assert!(readme.contains(truecold_proof::schema::PROBE_LABEL));
    // cmdline.txt: the real deadline in the explicit campaign and in the VMM command of
    // every sample, no placeholder; defaults spelled out.
    let cmdline = std::fs::read_to_string(out.join("cmdline.txt")).unwrap();
    assert!(!cmdline.contains("<DEADLINE_MS>"), "{cmdline}");
    assert!(
        cmdline
            .lines()
            .any(|l| l.contains("truecold-vmm boot --probe")
                && l.ends_with(
                    " --request-ns <actual_request_ns> --deadline-at-ns <actual_request_ns+60000000000>"
                )),
        "{cmdline}"
    );
    assert!(
        cmdline.contains("truecold run --probe --mode sequential --count 20 --vcpus 2 --mem-mib 256 --backing anon --ram-layout hole-inside --deadline-ms 60000 --kill-grace-ms 500"),
        "{cmdline}"
    );
    // The harness's CPU inside the measured windows is recorded, within the windows' wall.
    let h = &r.environment.harness;
    let (cpu, wall) = (h.in_window_cpu_ns.unwrap(), h.in_window_wall_ns.unwrap());
    assert!(wall > 0 && wall <= h.wall_ns, "{h:?}");
    assert!(cpu <= h.cpu_user_ns + h.cpu_sys_ns, "{h:?}");
    assert_eq!(h.page_cache_dropped, None);
}

/// `--drop-caches` (root): the page cache is dropped before every sample, the bundle says so
/// (`environment.harness.page_cache_dropped`, and the flag in cmdline.txt) and verifies.
#[test]
fn drop_caches_arm_is_recorded_in_the_bundle() {
    require_kvm();
    // SAFETY: geteuid(2) has no arguments and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "this test runs a --drop-caches campaign, which needs root (scripts/test.sh runs as root)"
    );
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("cold-host");
    let o = base_cmd(&out, "3").arg("--drop-caches").output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    // The verdict of its own bundle is on stdout (exit 2 when invalid).
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "truecold failed: {stdout}\n{stderr}");
    sha256sum_check(&out);
    let v = truecold_proof::verify::verify_dir(&out);
    assert!(v.is_valid(), "{}", v.render(&out, 10));
    let r = v.result.unwrap();
    assert_eq!(r.summary.successes, 3, "{:?}", r.summary.errors);
    assert_eq!(r.environment.harness.page_cache_dropped, Some(3));
    let cmdline = std::fs::read_to_string(out.join("cmdline.txt")).unwrap();
    assert!(cmdline.contains(" --drop-caches "), "{cmdline}");
    // Not for concurrent modes: a typed error before anything launches.
    let o = base_cmd(&d.path().join("burst"), "3")
        .args(["--drop-caches", "--mode", "burst"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(125), "a usage error");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--drop-caches applies to --mode sequential only"),
        "{err}"
    );
    assert!(!d.path().join("burst").exists());
}

#[test]
fn ctrl_c_writes_a_valid_partial_bundle_marked_incomplete() {
    require_kvm();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("partial");
    // 400 planned: plain progress prints every 40 samples (or after 10 s); interrupt after
    // the first line.
    let mut child = base_cmd(&out, "400")
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let progress = line.starts_with("[probe floor]");
        seen.push(line);
        if progress {
            break;
        }
    }
    assert!(
        seen.last().is_some_and(|l| l.starts_with("[probe floor]")),
        "no progress line before exit: {seen:?}"
    );
    // SAFETY: kill(2) on our own child, which has not been reaped.
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(rc, 0);
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    // stdout holds the verifier's verdict: the reason when the exit is 2 (bundle invalid).
    let mut stdout = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut o, &mut stdout);
    }
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(130),
        "stdout: {stdout}\nstderr: {seen:?} {rest:?}"
    );
    sha256sum_check(&out);
    let v = truecold_proof::verify::verify_dir(&out);
    assert!(v.is_valid(), "{}", v.render(&out, 10));
    let r = v.result.unwrap();
    assert!(r.contract.incomplete);
    // At least the launches the progress line had counted when the interrupt was sent.
    let counted: u64 = seen
        .last()
        .and_then(|l| l.strip_prefix("[probe floor] "))
        .and_then(|l| l.split('/').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in the progress line: {seen:?}"));
    assert!(counted >= 1, "{seen:?}");
    assert!(
        r.summary.attempts >= counted && r.summary.attempts < 400,
        "{} attempts, {counted} counted before the interrupt",
        r.summary.attempts
    );
    // Samples in flight at the interrupt finished normally: none was cut short by it.
    assert_eq!(
        r.summary.failures, 0,
        "{:?} (bad_report: is target/debug/truecold-vmm stale? `cargo build -p truecold-vmm`)",
        r.summary.errors
    );
    let readme = std::fs::read_to_string(out.join("README.md")).unwrap();
    assert!(readme.contains("INCOMPLETE"));
}

#[test]
fn bad_arguments_and_missing_artifacts_fail_clearly_before_launching() {
    require_kvm();
    let d = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let o = Command::new(truecold()).args(args).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["run", "--mode", "open-loop", "--probe"]);
    assert_eq!(code, Some(125), "a usage error: {err}");
    assert!(err.contains("needs --rate"), "{err}");
    let missing = d.path().join("no-vmm");
    let (code, err) = run(&["run", "--probe", "--vmm", missing.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("cargo build --release -p truecold-vmm"),
        "{err}"
    );
    let (code, err) = run(&[
        "run",
        "--linux",
        "--guest-dir",
        d.path().to_str().unwrap(),
        "--vmm",
        vmm().to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1));
    assert!(err.contains("vmlinux") && err.contains("--probe"), "{err}");
    // An empty guest dir: even where the L1 kernel and the static binaries are built, the
    // nested run stops before starting QEMU, naming what is missing.
    let (code, err) = run(&[
        "run",
        "--nested",
        "--guest-dir",
        d.path().to_str().unwrap(),
        "--vmm",
        vmm().to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1));
    // Whichever nested input is missing first, the error names it and how to build it.
    assert!(
        err.contains("is missing") && err.contains("scripts/build-artifacts.sh"),
        "{err}"
    );
    std::fs::create_dir(d.path().join("taken")).unwrap();
    let taken = d.path().join("taken");
    let (code, err) = run(&[
        "run",
        "--probe",
        "--out",
        taken.to_str().unwrap(),
        "--vmm",
        vmm().to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1));
    assert!(err.contains("never overwritten"), "{err}");
}

/// `--attribution K` on the probe guest: K more launches after the measured rows, never rows
/// of samples.csv; attribution.jsonl/csv/svg in the bundle, covered by SHA256SUMS, verified
/// (recomputed) by the verifier; the host stages carry the VMM's exits and page faults. The
/// default instrument is `rip`: the launches carry the VMM's RIP samples, and the explicit run
/// line names the instrument and its period.
#[test]
fn probe_attribution_files_verify() {
    require_kvm();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("bundle");
    let o = base_cmd(&out, "4")
        .args(["--attribution", "3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    // The verdict of its own bundle is on stdout (exit 2 when invalid).
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "truecold failed: {stdout}\n{stderr}");
    sha256sum_check(&out);
    let v = truecold_proof::verify::verify_dir(&out);
    assert!(v.is_valid(), "{}", v.render(&out, 10));
    assert_eq!(v.rows, Some(4));
    let sums = std::fs::read_to_string(out.join("SHA256SUMS")).unwrap();
    for f in ["attribution.jsonl", "attribution.csv", "attribution.svg"] {
        assert!(sums.contains(f), "{f}");
    }
    let jsonl = std::fs::read_to_string(out.join("attribution.jsonl")).unwrap();
    assert_eq!(jsonl.lines().count(), 3);
    for l in jsonl.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["report"]["vmm"]["rip_samples"]["period_us"], 100, "{l}");
    }
    let cmdline = std::fs::read_to_string(out.join("cmdline.txt")).unwrap();
    assert!(
        cmdline
            .contains(" --attribution 3 --attribution-instrument rip --attribution-sample-us 100 "),
        "{cmdline}"
    );
    let csv = std::fs::read_to_string(out.join("attribution.csv")).unwrap();
    let guest_boot = csv
        .lines()
        .find(|l| l.starts_with("host,guest_boot,"))
        .unwrap_or_else(|| panic!("{csv}"));
    let f: Vec<&str> = guest_boot.split(',').collect();
    // The probe rings its init doorbell: one io_out in guest_boot.
    assert_eq!(f[5], "1", "{guest_boot}");
    assert!(csv.contains("reconciliation,"), "{csv}");
    // Tampering with the csv is caught even with SHA256SUMS re-made.
    std::fs::write(
        out.join("attribution.csv"),
        csv.replace("host,spawn", "host,spawn2"),
    )
    .unwrap();
    let mut entries = Vec::new();
    for e in std::fs::read_dir(&out).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if name != "SHA256SUMS" {
            let bytes = std::fs::read(e.path()).unwrap();
            entries.push((name, truecold_proof::digest::sha256_hex(&bytes)));
        }
    }
    std::fs::write(
        out.join("SHA256SUMS"),
        truecold_proof::sums::format_sums(&entries),
    )
    .unwrap();
    let v = truecold_proof::verify::verify_dir(&out);
    assert!(
        v.has(truecold_proof::Check::Attribution),
        "{}",
        v.render(&out, 10)
    );
}

/// `--attribution-instrument rip` on the probe guest: the attribution launches are sampled by
/// the VMM (`--sample-rip-us`), their lines carry the samples, attribution.csv the per-vCPU
/// sample rows and the overhead row; the bundle verifies (the files recomputed) and its
/// explicit run line names the instrument and the period.
#[test]
fn probe_rip_attribution_verifies() {
    require_kvm();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("bundle");
    let o = base_cmd(&out, "3")
        .args([
            "--attribution",
            "2",
            "--attribution-instrument",
            "rip",
            "--attribution-sample-us",
            "10",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "truecold failed: {stdout}\n{stderr}");
    let v = truecold_proof::verify::verify_dir(&out);
    assert!(v.is_valid(), "{}", v.render(&out, 10));
    let jsonl = std::fs::read_to_string(out.join("attribution.jsonl")).unwrap();
    assert_eq!(jsonl.lines().count(), 2);
    for l in jsonl.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let vmm = &v["report"]["vmm"];
        assert_eq!(vmm["config"]["sample_rip_us"], 10, "{l}");
        assert_eq!(vmm["rip_samples"]["period_us"], 10, "{l}");
    }
    let csv = std::fs::read_to_string(out.join("attribution.csv")).unwrap();
    for want in [
        "overhead,sampling_overhead,",
        "rip,vcpu0 samples,",
        "rip,vcpu1 samples,",
    ] {
        assert!(csv.contains(want), "{want} not in {csv}");
    }
    let cmdline = std::fs::read_to_string(out.join("cmdline.txt")).unwrap();
    assert!(
        cmdline.contains("--attribution-instrument rip --attribution-sample-us 10"),
        "{cmdline}"
    );
    // The measured rows were not sampled.
    let reports = std::fs::read_to_string(out.join("reports.jsonl")).unwrap();
    assert!(!reports.contains("rip_samples"));
}

/// `--attribution-instrument initcall` on the probe guest, which has no kernel command line
/// to trace: its launches are the plain ones (no RIP samples), the explicit run line names
/// `initcall` (a line without it would mean the same, `Instrument::ABSENT`, whatever the
/// default), and the bundle verifies, its launches held to that instrument.
#[test]
fn probe_initcall_attribution_is_named_and_unsampled() {
    require_kvm();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("bundle");
    let o = base_cmd(&out, "3")
        .args(["--attribution", "2", "--attribution-instrument", "initcall"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "truecold failed: {stdout}\n{stderr}");
    let v = truecold_proof::verify::verify_dir(&out);
    assert!(v.is_valid(), "{}", v.render(&out, 10));
    let jsonl = std::fs::read_to_string(out.join("attribution.jsonl")).unwrap();
    assert_eq!(jsonl.lines().count(), 2);
    assert!(!jsonl.contains("rip_samples"), "{jsonl}");
    let cmdline = std::fs::read_to_string(out.join("cmdline.txt")).unwrap();
    assert!(
        cmdline.contains(" --attribution 2 --attribution-instrument initcall --stop-after "),
        "{cmdline}"
    );
    assert!(!cmdline.contains("--sample-rip-us"), "{cmdline}");
}

/// `--pin-vcpus` on the probe guest: every launch's VMM command carries it, every report
/// says where its two vCPUs ran (two CPUs of its own each), the explicit run line
/// keeps it, and the bundle verifies.
#[test]
fn probe_campaign_with_pinned_vcpus_verifies() {
    require_kvm();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("bundle");
    let o = base_cmd(&out, "3").arg("--pin-vcpus").output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "truecold failed: {stderr}");
    let v = truecold_proof::verify::verify_dir(&out);
    assert!(v.is_valid(), "{}", v.render(&out, 10));
    let reports = std::fs::read_to_string(out.join("reports.jsonl")).unwrap();
    assert_eq!(reports.lines().count(), 3);
    for l in reports.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["vmm"]["config"]["pin_vcpus"], true, "{l}");
        // Two vCPUs, two CPUs of the VMM's affinity in ascending order.
        let cpus: Vec<u64> = v["vmm"]["vcpu_cpus"]
            .as_array()
            .unwrap_or_else(|| panic!("no vcpu_cpus: {l}"))
            .iter()
            .filter_map(serde_json::Value::as_u64)
            .collect();
        assert!(cpus.len() == 2 && cpus[0] < cpus[1], "{l}");
    }
    let cmdline = std::fs::read_to_string(out.join("cmdline.txt")).unwrap();
    let pinned: Vec<&str> = cmdline
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains(" --pin-vcpus"))
        .collect();
    // The line as typed, the explicit line and the VMM command.
    assert_eq!(pinned.len(), 3, "{cmdline}");
}
