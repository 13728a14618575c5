//! The exact-accounting memory rule under truecold-vmm's RAM layouts
//! (`truecold_proto::layout`): a `hole-inside` bundle (RAM = configured − the 384 KiB hole,
//! the hole declared E820 reserved) verifies; one whose hole is not declared, whose
//! RAM + hole ≠ configured, or whose recorded layout is not the one that ran, does not.
mod common;

use common::*;
use std::path::{Path, PathBuf};
use truecold_proof::{verify_dir, Check};
use truecold_proto::kinds::RamLayout;

const HOLE: u64 = 0x6_0000;

fn hole_inside(t: &Path, name: &str) -> PathBuf {
    Fixture {
        ram_layout: RamLayout::HoleInside,
        ..Fixture::linux(8)
    }
    .write(t, name)
}

#[test]
fn a_hole_inside_bundle_verifies_and_records_its_layout() {
    let t = tempfile::tempdir().unwrap();
    let d = hole_inside(t.path(), "b");
    let v = verify_dir(&d);
    assert!(v.is_valid(), "{}", v.render(&d, 50));
    let (r, s) = truecold_proof::read_bundle(&d).unwrap();
    assert_eq!(r.configuration.ram_layout, RamLayout::HoleInside);
    let ok = s.iter().find(|s| s.ok).unwrap();
    assert_eq!(ok.host_e820_usable, Some(MEM - HOLE));
    assert_eq!(ok.guest_mem_firmware, Some(MEM - HOLE));
    let json = std::fs::read_to_string(d.join("result.json")).unwrap();
    assert!(json.contains("\"ram_layout\": \"hole-inside\""), "{json}");
    // At the default the field is absent: old bundles keep their bytes.
    let a = Fixture::linux(8).write(t.path(), "a");
    let json = std::fs::read_to_string(a.join("result.json")).unwrap();
    assert!(!json.contains("ram_layout"), "{json}");
}

/// The VMM's E820 map left the hole undeclared (no reserved entry), the RAM being right.
#[test]
fn an_undeclared_hole_is_caught() {
    let t = tempfile::tempdir().unwrap();
    let d = hole_inside(t.path(), "b");
    edit_reports(&d, |v| v["memory_figures"]["e820_hole_reserved"] = 0.into());
    invalid_with(&d, Check::Reports, "declared reserved in the hole");
}

/// RAM + declared hole ≠ configured: the rows (and their evidence) say RAM is the whole
/// configured size while the hole is declared too.
#[test]
fn ram_plus_hole_not_configured_is_caught() {
    let t = tempfile::tempdir().unwrap();
    let d = hole_inside(t.path(), "b");
    forge(&d, |_, s| {
        for x in s.iter_mut().filter(|x| x.ok) {
            x.host_memslots = Some(MEM);
            x.host_e820_usable = Some(MEM);
            x.guest_mem_firmware = Some(MEM);
        }
    });
    invalid_with(&d, Check::Memory, &format!("memslots {MEM}"));
    invalid_with(&d, Check::Reports, "hole-inside");
    assert!(!verify_dir(&d).render(&d, 50).contains("Some("));
}

/// An around-hole run recorded as hole-inside (and the other way round): the rows' RAM is not
/// the recorded layout's, and the VMM's configuration names another layout.
#[test]
fn a_layout_recorded_that_did_not_run_is_caught() {
    let t = tempfile::tempdir().unwrap();
    let d = Fixture::linux(8).write(t.path(), "a");
    forge_with(&d, false, |r, _| {
        r.configuration.ram_layout = RamLayout::HoleInside
    });
    invalid_with(&d, Check::Memory, "E820 usable");
    let d = hole_inside(t.path(), "b");
    edit_reports(&d, |v| {
        v["config"].as_object_mut().unwrap().remove("ram_layout");
    });
    invalid_with(
        &d,
        Check::Reports,
        "the VMM ran the `around-hole` RAM layout",
    );
}
