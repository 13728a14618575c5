//! End to end on this host's /dev/kvm: `truecold tune --probe` of the VMM's memory-backing
//! knobs (anon baseline vs THP vs hugetlb) at 2 GiB, small n. The tune directory (both phases'
//! arm bundles, tune.json, README.md) must pass `sha256sum -c --strict` and the verifier, and
//! an edited effect in tune.json is caught. Times are not asserted.
//!
//! Needs /dev/kvm, root (the hugetlb arm's pool) and the VMM built into the same target
//! directory: `cargo build -p truecold-vmm && cargo test -p truecold-bench`.

mod common;

#[path = "../../vmm/tests/support/hugepool.rs"]
mod hugepool;

use common::{copy_dir, require_kvm, sha256sum_check};
use std::path::PathBuf;
use std::process::Command;

fn truecold() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_truecold"))
}

#[test]
fn a_probe_tune_of_the_backing_knobs_gives_a_verifiable_directory() {
    require_kvm();
    // The hugetlb arm's pool (one VM at a time: truecold maps its 2 GiB rounded up to whole
    // 2 MiB pages past the low hole), restored afterwards.
    let mapping = truecold_proto::kinds::Engine::Truecold
        .expected_mapping(2048 << 20, truecold_proto::kinds::RamLayout::AroundHole);
    let _pool = hugepool::HugePool::set(mapping.div_ceil(2 << 20));
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("tune");
    let o = Command::new(truecold())
        .args([
            "tune",
            "--probe",
            "--knobs",
            "backing-thp,backing-hugetlb",
            "-n",
            "5",
            "--vcpus",
            "2",
            "--mem-mib",
            "2048",
            // Generous: the contract and the directory are checked here, not speed.
            "--deadline-ms",
            "60000",
            "--out",
        ])
        .arg(&out)
        .arg("--vmm")
        .arg(common::vmm_next_to(&truecold()))
        .env("CI", "true")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(out.is_dir(), "nothing written: {stderr}");
    sha256sum_check(&out);
    let v = truecold_proof::verify::verify_dir(&out);
    assert!(v.is_valid(), "{}", v.render(&out, 20));
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    // Every screen arm is a complete probe bundle with every launch strict-ready.
    for arm in ["baseline", "backing-thp", "backing-hugetlb"] {
        let (r, rows) = truecold_proof::read_bundle(&out.join("screen").join(arm)).unwrap();
        assert_eq!(rows.len(), 5, "{arm}");
        assert!(rows.iter().all(|s| s.ok), "{arm}: {rows:#?}");
        assert_eq!(r.contract.kind.as_str(), "probe", "{arm}");
    }
    let tune: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("tune.json")).unwrap()).unwrap();
    let text = tune.to_string();
    for k in ["backing-thp", "backing-hugetlb"] {
        assert!(text.contains(k), "{k}: {text}");
    }
    let readme = std::fs::read_to_string(out.join("README.md")).unwrap();
    assert!(readme.contains("backing-hugetlb"), "{readme}");
    // The attribution launches (after the measured rounds, never rows) of the last phase's
    // baseline: in its bundle and linked from the README.
    let last = if out.join("confirm").is_dir() {
        "confirm"
    } else {
        "screen"
    };
    assert!(
        out.join(last).join("baseline/attribution.svg").is_file(),
        "{readme}"
    );
    assert!(readme.contains("## Attribution"), "{readme}");
    // tune.json edited (one knob's screen row dropped): caught.
    let bad = d.path().join("edited");
    copy_dir(&out, &bad);
    let edited = std::fs::read_to_string(bad.join("tune.json"))
        .unwrap()
        .replacen("backing-thp", "backing-thq", 1);
    std::fs::write(bad.join("tune.json"), edited).unwrap();
    let v = truecold_proof::verify::verify_dir(&bad);
    assert!(!v.is_valid(), "an edited tune.json must be caught");
}

/// Without -n, the tune sizes its screen from a pilot: the screen's arms interleaved for
/// `--pilot-rounds` rounds in its own `pilot/` phase, whose noise tune.json records and the
/// verifier recomputes from `pilot/` (a forged noise is caught).
#[test]
fn a_probe_tune_sized_by_its_pilot_records_the_pilot_and_verifies() {
    require_kvm();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("tune");
    let o = Command::new(truecold())
        .args([
            "tune",
            "--probe",
            "--knobs",
            "backing-thp",
            "--pilot-rounds",
            "5",
            "--budget",
            "60",
            "--attribution",
            "0",
            "--vcpus",
            "1",
            "--mem-mib",
            "256",
            "--deadline-ms",
            "60000",
            "--out",
        ])
        .arg(&out)
        .arg("--vmm")
        .arg(common::vmm_next_to(&truecold()))
        .env("CI", "true")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(out.is_dir(), "nothing written: {stderr}");
    sha256sum_check(&out);
    let v = truecold_proof::verify::verify_dir(&out);
    assert!(v.is_valid(), "{}", v.render(&out, 20));
    for arm in ["baseline", "backing-thp"] {
        let (_, rows) = truecold_proof::read_bundle(&out.join("pilot").join(arm)).unwrap();
        assert_eq!(rows.len(), 5, "pilot {arm}");
    }
    let tune: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("tune.json")).unwrap()).unwrap();
    assert_eq!(tune["noise"]["pilot_rounds"], 5, "{tune:#}");
    let cv = tune["noise"]["cv_ppm"].as_u64().unwrap();
    let screen = tune["rounds"]["screen"].as_u64().unwrap();
    assert_eq!(
        screen,
        truecold_proof::tune::rounds_for_rule(
            truecold_proof::tune::RuleVersion::CURRENT,
            cv,
            truecold_proof::tune::MIN_EFFECT_PPM,
            1
        )
        .min((60 - 10) / 5),
        "{tune:#}"
    );
    let readme = std::fs::read_to_string(out.join("README.md")).unwrap();
    assert!(readme.contains("the noise is the pilot's"), "{readme}");
    // A forged noise figure (and the README made to agree) is caught against `pilot/`.
    let bad = d.path().join("forged");
    copy_dir(&out, &bad);
    let text = std::fs::read_to_string(bad.join("tune.json")).unwrap();
    let forged = text.replacen(
        &format!("\"cv_ppm\": {cv}"),
        &format!("\"cv_ppm\": {}", cv + 1),
        1,
    );
    assert_ne!(forged, text);
    std::fs::write(bad.join("tune.json"), forged).unwrap();
    let v = truecold_proof::verify::verify_dir(&bad);
    assert!(!v.is_valid());
    assert!(
        v.render(&bad, 50)
            .contains("the pilot's verified rows give"),
        "{}",
        v.render(&bad, 50)
    );
}
