//! The verifier's memory does not grow with the bundle's extra files: they are hashed as a
//! stream. In its own test binary so no other test's allocations share the process's peak.
mod common;

use common::*;
use std::fs;
use truecold_proof::verify_dir;

/// `VmHWM` or `VmRSS` of this process, in bytes.
fn status_kib(field: &str) -> u64 {
    let s = fs::read_to_string("/proc/self/status").unwrap();
    let line = s
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib << 10
}

/// Resets the peak RSS to the current RSS (Linux ≥ 4.0) and returns the current RSS.
fn reset_peak() -> u64 {
    fs::write("/proc/self/clear_refs", "5").expect("reset the peak RSS via /proc/self/clear_refs");
    status_kib("VmRSS:")
}

/// Larger than any bound below by a wide margin (hashing it in a debug build takes seconds).
const BIG: u64 = 96 << 20;

#[test]
fn a_large_extra_file_is_hashed_in_constant_memory() {
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::probe(20).write(t.path(), "b");
    let big = dir.join("big.bin");
    fs::File::create(&big).unwrap().set_len(BIG).unwrap();
    resum(&dir);

    let before = reset_peak();
    let v = verify_dir(&dir);
    let grew = status_kib("VmHWM:").saturating_sub(before);
    assert!(v.is_valid(), "{}", v.render(&dir, 50));
    assert!(
        grew < 32 << 20,
        "verifying a bundle with a {BIG}-byte extra file raised the peak RSS by {grew} bytes"
    );

    // The control: reading the file whole does show up in the measurement, so the bound
    // above can fail.
    let before = reset_peak();
    let whole = fs::read(&big).unwrap();
    let grew_whole = status_kib("VmHWM:").saturating_sub(before);
    assert_eq!(whole.len() as u64, BIG);
    drop(whole);
    assert!(
        grew_whole > BIG / 2,
        "reading {BIG} bytes whole raised the peak by only {grew_whole} bytes"
    );
}
