//! The tamper suite: each change to a valid bundle is caught, with its own reason.
mod common;

use common::*;
use std::fs;
use std::path::{Path, PathBuf};
use truecold_proof::{verify_dir, Check, Verdict};

fn fresh(t: &Path, name: &str) -> PathBuf {
    Fixture::linux(40).write(t, name)
}

fn verdict(dir: &Path) -> Verdict {
    let v = verify_dir(dir);
    assert_eq!(v.exit_code(), 1, "expected invalid:\n{}", v.render(dir, 50));
    v
}

fn assert_has(v: &Verdict, dir: &Path, c: Check) {
    assert!(v.has(c), "expected a {c:?} reason:\n{}", v.render(dir, 50));
}

/// Replaces the samples.csv line of sample `i` (0-based row) via `f` on the row list.
fn edit_rows(dir: &Path, f: impl FnOnce(&mut Vec<String>)) {
    let p = dir.join("samples.csv");
    let text = fs::read_to_string(&p).unwrap();
    // Fixture rows put a newline inside a quoted error_detail; keep records whole by
    // splitting on "\n" followed by a digit (every record starts with its index).
    let mut recs: Vec<String> = Vec::new();
    for line in text.split_inclusive('\n') {
        match (recs.last_mut(), line.as_bytes()[0].is_ascii_digit()) {
            (Some(last), false) if !last.starts_with("index,") => last.push_str(line),
            _ => recs.push(line.to_string()),
        }
    }
    let mut rows: Vec<String> = recs.split_off(1);
    f(&mut rows);
    fs::write(&p, recs.concat() + &rows.concat()).unwrap();
}

#[test]
fn one_byte_changed_in_each_file_in_turn() {
    let t = tempfile::tempdir().unwrap();
    let orig = fresh(t.path(), "orig");
    let names: Vec<String> = fs::read_dir(&orig)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.len() >= 8, "{names:?}");
    for (k, name) in names.iter().enumerate() {
        let dir = t.path().join(format!("t{k}"));
        copy_dir(&orig, &dir);
        let p = dir.join(name);
        let mut b = fs::read(&p).unwrap();
        let mid = b.len() / 2;
        b[mid] ^= 0x01;
        fs::write(&p, b).unwrap();
        let v = verify_dir(&dir);
        assert_eq!(v.exit_code(), 1, "{name}: {}", v.render(&dir, 50));
        if name == "SHA256SUMS" {
            assert!(
                v.has(Check::SumsMalformed)
                    || v.has(Check::DigestMismatch)
                    || (v.has(Check::FileMissing) && v.has(Check::FileUnlisted)),
                "{}",
                v.render(&dir, 50)
            );
        } else {
            assert!(
                v.reasons
                    .iter()
                    .any(|r| r.check == Check::DigestMismatch
                        && r.detail.contains(&format!("`{name}`"))),
                "{name}: {}",
                v.render(&dir, 50)
            );
        }
    }
}

#[test]
fn deleted_row() {
    let t = tempfile::tempdir().unwrap();
    let dir = fresh(t.path(), "b");
    edit_rows(&dir, |rows| {
        rows.remove(10);
    });
    // Without re-summing: the digest.
    assert_has(&verdict(&dir), &dir, Check::DigestMismatch);
    // A tamperer who re-sums is still caught: count, indexes, statistics.
    resum(&dir);
    let v = verdict(&dir);
    for c in [Check::AttemptCount, Check::IndexOrder, Check::Statistic] {
        assert_has(&v, &dir, c);
    }
}

#[test]
fn duplicated_boot_id() {
    let t = tempfile::tempdir().unwrap();
    let dir = fresh(t.path(), "b");
    let (a, b) = (boot_id(1).to_string(), boot_id(2).to_string());
    let p = dir.join("samples.csv");
    let text = fs::read_to_string(&p).unwrap().replace(&b, &a);
    fs::write(&p, text).unwrap();
    resum(&dir);
    let v = verdict(&dir);
    assert_has(&v, &dir, Check::DuplicateBootId);
    assert!(v.reasons.iter().any(|r| r.detail.contains(&a)));
}

#[test]
fn altered_statistic() {
    let t = tempfile::tempdir().unwrap();
    let dir = fresh(t.path(), "b");
    let p = dir.join("result.json");
    let mut r: serde_json::Value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
    let p99 = r["summary"]["headline"]["successes"]["p99"]
        .as_u64()
        .unwrap();
    r["summary"]["headline"]["successes"]["p99"] = serde_json::json!(p99 - 1);
    fs::write(&p, serde_json::to_vec_pretty(&r).unwrap()).unwrap();
    resum(&dir);
    let v = verdict(&dir);
    assert_has(&v, &dir, Check::Statistic);
    assert!(
        v.reasons
            .iter()
            .any(|r| r.detail.starts_with("summary.headline.successes.p99:")),
        "{}",
        v.render(&dir, 50)
    );
}

#[test]
fn removed_file() {
    let t = tempfile::tempdir().unwrap();
    let dir = fresh(t.path(), "b");
    fs::remove_file(dir.join("config")).unwrap();
    let v = verdict(&dir);
    assert_has(&v, &dir, Check::FileMissing);
    assert_has(&v, &dir, Check::RequiredFileMissing);
}

#[test]
fn added_file() {
    let t = tempfile::tempdir().unwrap();
    let dir = fresh(t.path(), "b");
    fs::write(dir.join("extra.txt"), "surprise").unwrap();
    let v = verdict(&dir);
    assert_has(&v, &dir, Check::FileUnlisted);
    assert_eq!(v.reasons.len(), 1, "{}", v.render(&dir, 50));
    fs::remove_file(dir.join("extra.txt")).unwrap();
    fs::create_dir(dir.join("sub")).unwrap();
    assert_has(&verdict(&dir), &dir, Check::NotAFile);
}

#[test]
fn reordered_rows() {
    let t = tempfile::tempdir().unwrap();
    let dir = fresh(t.path(), "b");
    edit_rows(&dir, |rows| rows.swap(3, 4));
    resum(&dir);
    let v = verdict(&dir);
    assert_has(&v, &dir, Check::IndexOrder);
}

#[test]
fn every_reason_is_listed_not_just_the_first() {
    let t = tempfile::tempdir().unwrap();
    let dir = fresh(t.path(), "b");
    edit_rows(&dir, |rows| {
        rows.remove(10);
    });
    fs::write(dir.join("extra.txt"), "x").unwrap();
    let v = verdict(&dir);
    for c in [
        Check::DigestMismatch,
        Check::FileUnlisted,
        Check::AttemptCount,
        Check::IndexOrder,
    ] {
        assert_has(&v, &dir, c);
    }
}

#[test]
fn memory_disagreement_and_success_without_boot_id() {
    let t = tempfile::tempdir().unwrap();
    let f = Fixture::linux(20);
    let mut s = f.samples();
    s[0].guest_mem_firmware = Some(MEM - 4096);
    s[1].boot_id = None;
    s[2].latency_ns = Some(s[2].latency_ns.unwrap() + 1);
    s[3].ok = false; // failure without an error kind
    let r = f.result(&s);
    let w = truecold_proof::write_bundle(&t.path().join("b"), &r, &s, &f.inputs()).unwrap();
    for c in [
        Check::Memory,
        Check::SuccessIncomplete,
        Check::Latency,
        Check::ErrorKind,
    ] {
        assert!(w.verdict.has(c), "{c:?}: {}", w.verdict.render(&w.path, 50));
    }
    // The data were still written: failures are data.
    assert!(w.path.join("samples.csv").exists());
}

#[test]
fn bad_artifact_digest_and_stale_readme() {
    let t = tempfile::tempdir().unwrap();
    let dir = fresh(t.path(), "b");
    let p = dir.join("result.json");
    let mut r: serde_json::Value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
    r["artifacts"]["vmlinux"] = serde_json::json!("abc");
    fs::write(&p, serde_json::to_vec_pretty(&r).unwrap()).unwrap();
    fs::write(dir.join("README.md"), "# all good, trust me\n").unwrap();
    resum(&dir);
    let v = verdict(&dir);
    assert_has(&v, &dir, Check::Artifact);
    assert_has(&v, &dir, Check::GeneratedStale);
    // A README edited on its own, SHA256SUMS recomputed: invalid (the README carries the
    // headline a human reads).
    let dir = fresh(t.path(), "c");
    fs::write(dir.join("README.md"), "# all good, trust me\n").unwrap();
    resum(&dir);
    let v = verdict(&dir);
    assert_has(&v, &dir, Check::GeneratedStale);
    assert_eq!(v.reasons.len(), 1, "{}", v.render(&dir, 50));
    assert!(v.render(&dir, 5).contains("README.md"));
}

/// A Linux success whose guest saw another topology than the configured one (two packages of
/// one core for 2 vCPUs: what truecold's guests saw before the platform fix), one with no
/// platform at all, and a probe row carrying a platform: each its own reason.
#[test]
fn wrong_guest_topology_is_caught() {
    let t = tempfile::tempdir().unwrap();
    let dir = fresh(t.path(), "b");
    edit_rows(&dir, |rows| {
        // Columns: guest_cpus (2), then packages, cores per package, threads per core.
        let fix = |row: &mut String, from: &str, to: &str| {
            assert!(row.contains(from), "{row}");
            *row = row.replacen(from, to, 1);
        };
        fix(&mut rows[0], ",2,1,2,1,true,", ",2,2,1,1,true,");
        fix(
            &mut rows[1],
            ",2,1,2,1,true,false,false,false,kvm-clock,",
            ",2,,,,,,,,,",
        );
    });
    resum(&dir);
    let v = verdict(&dir);
    assert_has(&v, &dir, Check::Platform);
    let text = v.render(&dir, 50);
    assert!(
        text.contains("successful sample 0: the guest saw 2 package(s) × 1 core(s)"),
        "{text}"
    );
    assert!(
        text.contains("successful sample 1: the guest reported no platform"),
        "{text}"
    );
    let bad_csv = t.path().join("c");
    copy_dir(&fresh(t.path(), "c0"), &bad_csv);
    edit_rows(&bad_csv, |rows| {
        rows[0] = rows[0].replacen(
            ",true,false,false,false,kvm-clock,",
            ",yes,false,false,false,kvm-clock,",
            1,
        );
    });
    resum(&bad_csv);
    assert_has(&verdict(&bad_csv), &bad_csv, Check::SamplesCsv);
}

#[test]
fn probe_row_with_a_platform_is_caught() {
    let t = tempfile::tempdir().unwrap();
    let f = Fixture::probe(10);
    let mut s = f.samples();
    s[3].guest_platform = Some(truecold_proto::GuestPlatform::default());
    let r = f.result(&s);
    let w = truecold_proof::write_bundle(&t.path().join("b"), &r, &s, &f.inputs()).unwrap();
    assert!(
        w.verdict.has(Check::RowContract),
        "{}",
        w.verdict.render(&w.path, 50)
    );
}
