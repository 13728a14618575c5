//! The parity contract's harness faults on this host, without a Linux boot: a workspace image
//! that cannot be cloned is a typed failure row (`workspace_clone`) for every launch, the
//! lifecycle table records each launch CREATED → DESTROYED with that outcome, each launch's
//! cleanup is verified, the bundle verifies, and the campaign leaves nothing behind.
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

#[test]
fn an_image_that_cannot_be_cloned_is_a_typed_row_and_nothing_leaks() {
    let src = guest_dir();
    let t = tempfile::tempdir().unwrap();
    // The parity guest, but its workspace "image" is a directory: every clone fails.
    let g = t.path().join("guest");
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
    let tmp = t.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let out = t.path().join("bundle");
    let o = Command::new(truecold())
        .args(["run", "--linux", "--parity", "-n", "2", "--mem-mib", "256"])
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
    assert!(out.is_dir(), "no bundle: {say}");
    common::sha256sum_check(&out);
    let v = truecold_proof::verify::verify_dir(&out);
    assert!(v.is_valid(), "{}", v.render(&out, 20));
    let (r, s) = truecold_proof::read_bundle(&out).unwrap();
    assert_eq!(r.contract.observer.as_str(), "agent");
    assert_eq!(r.summary.attempts, 2);
    for row in &s {
        assert!(!row.ok);
        assert_eq!(row.error_kind, "workspace_clone", "{row:?}");
        assert!(row.error_detail.contains("base_not_file"), "{row:?}");
    }
    let rows = truecold_proof::lifecycle::read_csv(&std::fs::read(out.join("state.csv")).unwrap())
        .unwrap();
    assert!(truecold_proof::lifecycle::check_lifecycle(&rows, 2).is_empty());
    for row in &rows {
        assert_eq!(row.running_ns, None, "{row:?}");
        assert_eq!(row.outcome.as_deref(), Some("workspace_clone"), "{row:?}");
    }
    let reports = std::fs::read_to_string(out.join("reports.jsonl")).unwrap();
    for line in reports.lines() {
        let j: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(j["engine"]["cleanup"]["ok"], true, "{line}");
    }
    assert!(r.environment.residue.unwrap().leaks.is_empty());
    // The campaign's work directory (state database, run directories) is gone.
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}
