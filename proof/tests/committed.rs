//! Every directory committed under results/ verifies with this verifier as it is (a format
//! change that leaves one stale — a README rendered from a catalogue text that changed, say —
//! fails here, not later in a reviewer's hands).

use std::path::Path;
use truecold_proof::verify::verify_dir;

#[test]
fn every_committed_results_directory_verifies() {
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results");
    let mut n = 0;
    for e in std::fs::read_dir(&results).unwrap() {
        let dir = e.unwrap().path();
        if !dir.join("SHA256SUMS").is_file() {
            continue;
        }
        let v = verify_dir(&dir);
        assert!(v.is_valid(), "{}", v.render(&dir, 20));
        n += 1;
    }
    assert!(
        n >= 10,
        "only {n} committed directories with a SHA256SUMS under {results:?}"
    );
}

/// Every file under `dir` (relative path, bytes), sorted.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, d: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// `report` on a committed tune directory whose `tune.json` spells its knobs the legacy way
/// (`hz100`) rewrites nothing but its generated files, and those to the same bytes: the
/// record (`tune.json`) keeps its spelling, every file is what was committed.
#[test]
fn report_on_a_legacy_tune_directory_changes_no_byte() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../results/20261202T054549Z-tune-nested-linux-2vcpu-16384mib");
    let tune = std::fs::read_to_string(src.join("tune.json")).unwrap();
    assert!(
        tune.contains("\"hz100\""),
        "the fixture no longer has a legacy-spelled knob"
    );
    let t = tempfile::tempdir().unwrap();
    let dst = t.path().join("d");
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(&dst)
        .status()
        .unwrap();
    assert!(st.success());
    let written = truecold_proof::verify::report_dir(&dst).unwrap();
    assert!(written.iter().any(|n| n == "README.md"), "{written:?}");
    assert!(!written.iter().any(|n| n == "tune.json"), "{written:?}");
    let (before, after) = (tree(&src), tree(&dst));
    let names = |t: &[(String, Vec<u8>)]| t.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&before), names(&after));
    for ((n, a), (_, b)) in before.iter().zip(&after) {
        assert!(a == b, "{n} changed under report");
    }
}
