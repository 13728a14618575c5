//! truecold-vmm's CPU platform (`truecold run --packages/--invariant-tsc`,
//! `configuration.cpu_platform`): a bundle of 2 packages × 1 core with a stated invariant TSC
//! verifies and records it; one whose guests saw another platform, whose reports echo
//! another, whose command lines say another, or whose platform does not split its vCPUs,
//! does not. At the default the field is absent, so older bundles keep their bytes.
mod common;

use common::*;
use std::path::{Path, PathBuf};
use truecold_proof::{verify_dir, Check};
use truecold_proto::platform::CpuPlatform;

const TWO_PACKAGES: CpuPlatform = CpuPlatform {
    packages: 2,
    invariant_tsc: true,
};

fn two_packages(t: &Path, name: &str) -> PathBuf {
    Fixture {
        cpu_platform: TWO_PACKAGES,
        ..Fixture::linux(8)
    }
    .write(t, name)
}

#[test]
fn a_two_package_bundle_verifies_and_records_its_platform() {
    let t = tempfile::tempdir().unwrap();
    let d = two_packages(t.path(), "b");
    let v = verify_dir(&d);
    assert!(v.is_valid(), "{}", v.render(&d, 50));
    let (r, _) = truecold_proof::read_bundle(&d).unwrap();
    assert_eq!(r.configuration.cpu_platform, TWO_PACKAGES);
    let json = std::fs::read_to_string(d.join("result.json")).unwrap();
    assert!(json.contains("\"cpu_platform\""), "{json}");
    let a = Fixture::linux(8).write(t.path(), "a");
    let json = std::fs::read_to_string(a.join("result.json")).unwrap();
    assert!(
        !json.contains("cpu_platform"),
        "absent at the default: {json}"
    );
}

/// The guests saw one package (or no constant_tsc) where the bundle says two packages with
/// an invariant TSC: every success is a platform mismatch.
#[test]
fn a_platform_the_guests_did_not_see_is_caught() {
    let t = tempfile::tempdir().unwrap();
    let d = two_packages(t.path(), "b");
    forge(&d, |_, s| {
        for x in s.iter_mut().filter(|x| x.ok) {
            let p = x.guest_platform.as_mut().unwrap();
            p.packages = 1;
            p.cores_per_package = 2;
        }
    });
    invalid_with(&d, Check::Platform, "configured 2 × 1 × 1");
    let d = two_packages(t.path(), "c");
    forge(&d, |_, s| {
        for x in s.iter_mut().filter(|x| x.ok) {
            x.guest_platform.as_mut().unwrap().constant_tsc = false;
        }
    });
    invalid_with(&d, Check::Platform, "lack constant_tsc or nonstop_tsc");
    // Linux sets constant_tsc on some Intel models without the bit: nonstop_tsc is the bit's.
    let d = two_packages(t.path(), "d");
    forge(&d, |_, s| {
        for x in s.iter_mut().filter(|x| x.ok) {
            x.guest_platform.as_mut().unwrap().nonstop_tsc = false;
        }
    });
    invalid_with(&d, Check::Platform, "lack constant_tsc or nonstop_tsc");
}

/// The reports echo the default platform (the VMM ran one package) under a bundle that
/// records two: caught row by row.
#[test]
fn a_report_that_echoes_another_platform_is_caught() {
    let t = tempfile::tempdir().unwrap();
    let d = two_packages(t.path(), "b");
    edit_reports(&d, |v| {
        v["config"].as_object_mut().unwrap().remove("cpu_platform");
    });
    invalid_with(&d, Check::Reports, "the VMM presented");
}

/// result.json altered alone (rows, reports and command lines untouched): the recorded
/// platform is not the one the command lines and the VMM's reports say.
#[test]
fn an_altered_platform_is_caught() {
    let t = tempfile::tempdir().unwrap();
    let d = two_packages(t.path(), "b");
    forge_with(&d, false, |r, _| {
        r.configuration.cpu_platform = CpuPlatform::ABSENT;
    });
    let v = verify_dir(&d);
    let text = v.render(&d, 50);
    assert_eq!(v.exit_code(), 1, "{text}");
    assert!(text.contains("CPU packages"), "{text}");
    assert!(text.contains("the VMM presented"), "{text}");
    // A platform that does not split the vCPUs is refused as a configuration.
    let d = two_packages(t.path(), "c");
    forge_with(&d, false, |r, _| {
        r.configuration.cpu_platform.packages = 3;
    });
    invalid_with(&d, Check::Configuration, "do not split into 3 packages");
}
