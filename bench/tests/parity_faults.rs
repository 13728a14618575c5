//! The parity contract's harness faults on this host, without a Linux boot: a workspace image
//! that cannot be cloned is a typed failure row (`workspace_clone`) for every launch, the
//! lifecycle table records each launch CREATED → DESTROYED with that outcome, each launch's
//! cleanup is verified, the bundle verifies, and the campaign leaves nothing behind — with
//! truecold-vmm alone and with the peer engines as parity arms.
//!
//! Needs the guest artifacts (`scripts/build-artifacts.sh`: out/guest with its parity/
//! kernel) and the VMM next to the bench binary; missing either FAILS.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn truecold() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_truecold"))
}

fn guest_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../out/guest");
    assert!(
        d.join("parity/vmlinux").is_file(),
        "{} has no parity kernel: run scripts/build-artifacts.sh",
        d.display()
    );
    d
}

/// The parity guest with a workspace "image" that is a directory (every clone fails), in
/// `t`; the kernel, init and initramfs are the built ones.
fn guest_that_cannot_be_cloned(t: &Path) -> PathBuf {
    let src = guest_dir();
    let g = t.join("guest");
    std::fs::create_dir_all(g.join("parity")).unwrap();
    for f in [
        "vmlinux",
        "initramfs.cpio",
        "init",
        "config",
        "manifest.json",
    ] {
        std::os::unix::fs::symlink(src.join(f), g.join(f)).unwrap();
    }
    for f in ["vmlinux", "config"] {
        std::os::unix::fs::symlink(src.join("parity").join(f), g.join("parity").join(f)).unwrap();
    }
    std::fs::create_dir(g.join("workspace.img")).unwrap();
    g
}

/// `truecold run --linux --parity -n 2 <extra>` with that guest and its own TMPDIR: the
/// output's path (checked: `sha256sum -c` and the verifier pass) and the TMPDIR.
fn parity_campaign(t: &Path, extra: &[&str]) -> (PathBuf, PathBuf) {
    let g = guest_that_cannot_be_cloned(t);
    let tmp = t.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let out = t.join("bundle");
    let o = Command::new(truecold())
        .args(["run", "--linux", "--parity", "-n", "2", "--mem-mib", "256"])
        .args(extra)
        .args(["--deadline-ms", "60000", "--out"])
        .arg(&out)
        .arg("--guest-dir")
        .arg(&g)
        .arg("--vmm")
        .arg(common::vmm_next_to(&truecold()))
        .env("TMPDIR", &tmp)
        .env("CI", "true")
        .output()
        .unwrap();
    let say = format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.is_dir(), "nothing written: {say}");
    common::sha256sum_check(&out);
    let v = truecold_proof::verify::verify_dir(&out);
    assert!(v.is_valid(), "{}", v.render(&out, 20));
    (out, tmp)
}

/// One arm's bundle: 2 `workspace_clone` rows, each launch CREATED → DESTROYED with that
/// outcome, each cleanup verified, no leak.
fn every_launch_failed_to_clone(bundle: &Path) {
    let (r, s) = truecold_proof::read_bundle(bundle).unwrap();
    assert_eq!(r.contract.observer.as_str(), "agent");
    assert_eq!(r.summary.attempts, 2);
    for row in &s {
        assert!(!row.ok);
        assert_eq!(row.error_kind, "workspace_clone", "{row:?}");
        assert!(row.error_detail.contains("base_not_file"), "{row:?}");
    }
    let rows =
        truecold_proof::lifecycle::read_csv(&std::fs::read(bundle.join("state.csv")).unwrap())
            .unwrap();
    assert!(truecold_proof::lifecycle::check_lifecycle(&rows, 2).is_empty());
    for row in &rows {
        assert_eq!(row.running_ns, None, "{row:?}");
        assert_eq!(row.outcome.as_deref(), Some("workspace_clone"), "{row:?}");
    }
    let reports = std::fs::read_to_string(bundle.join("reports.jsonl")).unwrap();
    for line in reports.lines() {
        let j: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(j["engine"]["cleanup"]["ok"], true, "{line}");
    }
    assert!(r.environment.residue.unwrap().leaks.is_empty());
}

#[test]
fn an_image_that_cannot_be_cloned_is_a_typed_row_and_nothing_leaks() {
    let t = tempfile::tempdir().unwrap();
    let (out, tmp) = parity_campaign(t.path(), &[]);
    every_launch_failed_to_clone(&out);
    // The campaign's work directory (state database, run directories) is gone.
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The same under every engine that runs the parity contract, interleaved: one directory
/// whose every arm is a parity bundle of typed rows with its own lifecycle table; QEMU's
/// microvm is refused with the reason.
#[test]
fn engine_arms_under_the_parity_contract_fail_alike_and_leave_nothing() {
    let t = tempfile::tempdir().unwrap();
    let engines = ["truecold", "firecracker", "cloud-hypervisor"];
    let (out, tmp) = parity_campaign(t.path(), &["--engines", &engines.join(",")]);
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("arms.json")).unwrap()).unwrap();
    assert_eq!(plan["order"].as_array().unwrap().len(), 6, "{plan}");
    for e in engines {
        let (r, _) = truecold_proof::read_bundle(&out.join(e)).unwrap();
        assert_eq!(r.configuration.engine.kind.as_str(), e);
        assert!(r.contract.interleaved);
        every_launch_failed_to_clone(&out.join(e));
    }
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    // No parity launch for QEMU: refused before anything runs.
    let o = Command::new(truecold())
        .args([
            "run",
            "--linux",
            "--parity",
            "--engines",
            "truecold,qemu-microvm",
        ])
        .arg("--out")
        .arg(t.path().join("qemu"))
        .output()
        .unwrap();
    // An argument combination refused: a usage error (125), nothing written.
    assert_eq!(o.status.code(), Some(125), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("vhost-vsock"), "{err}");
    assert!(!t.path().join("qemu").exists());
}
