//! The committed parity bundle (nested, virtual clock) verifies as it is, and each edit of
//! the parity contract's evidence is caught: a lifecycle row removed, the journal settings
//! restated, a cleanup column forged, a network proof's answer changed, state.csv replaced.

mod common;

use common::{copy_dir, forge_with, resum};
use std::path::{Path, PathBuf};
use truecold_proof::verify::{verify_dir, Check};

const BUNDLE: &str = "20261201T1120Z-nested-parity-sequential-2vcpu-1024mib";

fn fresh(t: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../results")
        .join(BUNDLE);
    let dst = t.join(name);
    copy_dir(&src, &dst);
    dst
}

fn caught(dir: &Path, c: Check) {
    let v = verify_dir(dir);
    assert_eq!(v.exit_code(), 1, "expected invalid:\n{}", v.render(dir, 50));
    assert!(v.has(c), "expected a {c:?} reason:\n{}", v.render(dir, 50));
}

#[test]
fn the_committed_parity_bundle_verifies() {
    let t = tempfile::tempdir().unwrap();
    let dir = fresh(t.path(), "as-is");
    let v = verify_dir(&dir);
    assert!(v.is_valid(), "{}", v.render(&dir, 50));
    let r = v.result.unwrap();
    assert_eq!(r.contract.observer.as_str(), "agent");
    assert_eq!(r.summary.successes, 10);
}

#[test]
fn a_lifecycle_row_removed_is_caught() {
    let t = tempfile::tempdir().unwrap();
    let dir = fresh(t.path(), "row");
    let p = dir.join("state.csv");
    let text = std::fs::read_to_string(&p).unwrap();
    let kept: Vec<&str> = text.lines().filter(|l| !l.starts_with("3,")).collect();
    std::fs::write(&p, kept.join("\n") + "\n").unwrap();
    resum(&dir);
    caught(&dir, Check::Lifecycle);
}

#[test]
fn journal_settings_restated_are_caught() {
    let t = tempfile::tempdir().unwrap();
    let dir = fresh(t.path(), "journal");
    forge_with(&dir, false, |r, _| {
        if let Some(p) = r.environment.parity.as_mut() {
            p.journal = truecold_proof::lifecycle::journal("delete", 0);
        }
    });
    caught(&dir, Check::Lifecycle);
}

#[test]
fn a_forged_cleanup_column_is_caught() {
    let t = tempfile::tempdir().unwrap();
    let dir = fresh(t.path(), "cleanup");
    forge_with(&dir, false, |_, s| s[4].cleanup_ns = Some(1));
    caught(&dir, Check::Reports);
}

#[test]
fn a_network_answer_changed_is_caught() {
    let t = tempfile::tempdir().unwrap();
    let dir = fresh(t.path(), "network");
    let p = dir.join("reports.jsonl");
    let text = std::fs::read_to_string(&p).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut j: serde_json::Value = serde_json::from_str(&lines[2]).unwrap();
    j["engine"]["network"]["liveness"]["answer"] = serde_json::Value::String("00".repeat(32));
    lines[2] = serde_json::to_string(&j).unwrap();
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    resum(&dir);
    caught(&dir, Check::Reports);
}

#[test]
fn state_csv_removed_is_caught() {
    let t = tempfile::tempdir().unwrap();
    let dir = fresh(t.path(), "gone");
    std::fs::remove_file(dir.join("state.csv")).unwrap();
    resum(&dir);
    caught(&dir, Check::Lifecycle);
}

/// The peer engines as parity arms (nested, virtual clock): the committed directory verifies
/// as it is, every arm under the agent observer.
const ENGINES_DIR: &str =
    "20261201T135023Z-nested-parity-engines-truecold-firecracker-cloud-hypervisor-2vcpu-1024mib";

#[test]
fn the_committed_parity_engines_directory_verifies() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../results")
        .join(ENGINES_DIR);
    let v = verify_dir(&src);
    assert!(v.is_valid(), "{}", v.render(&src, 50));
    for e in ["truecold", "firecracker", "cloud-hypervisor"] {
        let (r, s) = truecold_proof::read_bundle(&src.join(e)).unwrap();
        assert_eq!(r.contract.observer.as_str(), "agent", "{e}");
        assert_eq!(r.configuration.engine.kind.as_str(), e);
        assert!(r.contract.interleaved, "{e}");
        assert!(s.iter().all(|x| x.cleanup_ok == Some(true)), "{e}");
    }
}

/// A peer engine's parity bundle whose recorded command names no engine arm (such a command
/// runs truecold-vmm only) is caught.
#[test]
fn a_peer_parity_bundle_without_its_engine_arm_is_caught() {
    let t = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../results")
        .join(ENGINES_DIR)
        .join("firecracker");
    let dir = t.path().join("fc");
    copy_dir(&src, &dir);
    let p = dir.join("cmdline.txt");
    let text = std::fs::read_to_string(&p).unwrap();
    let edited = text.replace(" --engines truecold,firecracker,cloud-hypervisor", "");
    assert_ne!(edited, text);
    std::fs::write(&p, edited).unwrap();
    resum(&dir);
    caught(&dir, Check::Cmdline);
}
