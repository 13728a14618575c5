//! Regressions for the review findings: host kind vs contract, probe boot ids, the error
//! histogram, stale generated files.
mod common;

use common::*;
use std::fs;
use truecold_proof::schema::*;
use truecold_proof::{verify_dir, write_bundle, Check};

#[test]
fn linux_success_on_a_pvm_host_is_mislabelled_data() {
    let t = tempfile::tempdir().unwrap();
    let mut f = Fixture::linux(14);
    f.host = HostKind::Pvm;
    let s = f.samples();
    let w = write_bundle(&t.path().join("b"), &f.result(&s), &s, &f.inputs_for(&s)).unwrap();
    assert!(!w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 50));
    assert!(w.verdict.has(Check::HostKindContract));
    // Only failures on a PVM host: honest data (Linux cannot boot there), valid.
    let mut s = f.samples();
    for x in &mut s {
        if x.ok {
            // What a Linux launch that never got ready looks like: spawned, then nothing.
            x.ok = false;
            x.ready_ns = None;
            x.latency_ns = None;
            x.boot_id = None;
            x.stages = StageTimes::default();
            x.stages.set(Stage::Spawn, Some(3_000_000));
            x.guest_mem_firmware = None;
            x.guest_mem_total = None;
            x.guest_mem_present = None;
            x.guest_mem_managed = None;
            x.guest_cpus = None;
            x.guest_platform = None;
            x.workload = String::new();
            x.error_kind = "deadline".into();
        }
    }
    let w = write_bundle(&t.path().join("c"), &f.result(&s), &s, &f.inputs_for(&s)).unwrap();
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 50));
}

#[test]
fn probe_bundles_verify_on_every_host_kind() {
    let t = tempfile::tempdir().unwrap();
    for (k, host) in [HostKind::Hardware, HostKind::Pvm, HostKind::NestedEmulated]
        .into_iter()
        .enumerate()
    {
        let mut f = Fixture::probe(10);
        f.host = host;
        let mut s = f.samples();
        for x in &mut s {
            x.boot_id = None;
        }
        let w = write_bundle(
            &t.path().join(format!("p{k}")),
            &f.result(&s),
            &s,
            &f.inputs_for(&s),
        )
        .unwrap();
        assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 50));
    }
}

#[test]
fn probe_rows_must_not_carry_a_boot_id() {
    let t = tempfile::tempdir().unwrap();
    let f = Fixture::probe(10);
    let mut s = f.samples();
    for x in &mut s {
        x.boot_id = None;
    }
    s[3].boot_id = Some(boot_id(3));
    let w = write_bundle(&t.path().join("b"), &f.result(&s), &s, &f.inputs_for(&s)).unwrap();
    assert!(!w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 50));
    assert!(w.verdict.has(Check::ProbeBootId));
}

#[test]
fn linux_success_needs_a_unique_boot_id() {
    let t = tempfile::tempdir().unwrap();
    let f = Fixture::linux(10);
    let mut s = f.samples();
    s[1].boot_id = None;
    s[2].boot_id = s[0].boot_id;
    let w = write_bundle(&t.path().join("b"), &f.result(&s), &s, &f.inputs_for(&s)).unwrap();
    assert!(w.verdict.has(Check::SuccessIncomplete));
    assert!(w.verdict.has(Check::DuplicateBootId));
}

#[test]
fn error_histogram_accounts_for_every_failure() {
    let f = Fixture::linux(20);
    let mut s = f.samples();
    // "ok" but no latency: scored as a failure, so it must be in the histogram too.
    s[0].latency_ns = None;
    s[0].ready_ns = None;
    let r = f.result(&s);
    assert_eq!(r.summary.errors.values().sum::<u64>(), r.summary.failures);
    assert_eq!(r.summary.errors.get("ok_without_latency"), Some(&1));
}

#[test]
fn error_histogram_short_of_the_failures_is_caught() {
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::linux(40).write(t.path(), "b");
    let p = dir.join("result.json");
    let mut r: serde_json::Value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
    r["summary"]["errors"]["deadline"] = serde_json::json!(0);
    fs::write(&p, serde_json::to_vec_pretty(&r).unwrap()).unwrap();
    truecold_proof::regenerate(&dir).unwrap_err(); // result.json no longer matches its sum
    resum(&dir);
    let v = verify_dir(&dir);
    assert!(v.has(Check::ErrorHistogram), "{}", v.render(&dir, 50));
}

#[test]
fn hand_edited_readme_with_recomputed_sums_is_invalid() {
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::linux(20).write(t.path(), "b");
    let p = dir.join("README.md");
    let text = fs::read_to_string(&p)
        .unwrap()
        .replace("20 attempts", "20 attempts, all fast");
    fs::write(&p, text).unwrap();
    resum(&dir);
    let v = verify_dir(&dir);
    assert_eq!(v.exit_code(), 1, "{}", v.render(&dir, 50));
    assert!(v.has(Check::GeneratedStale));
    // `report` regenerates it from the data, and the bundle verifies again.
    truecold_proof::regenerate(&dir).unwrap();
    assert!(verify_dir(&dir).is_valid());
}

/// The probe README names the files that carry the label; the claim is exactly true.
#[test]
fn probe_label_claim_names_exactly_the_files_that_carry_it() {
    let t = tempfile::tempdir().unwrap();
    let f = Fixture::probe(12);
    let mut s = f.samples();
    for x in &mut s {
        x.boot_id = None;
    }
    let w = write_bundle(&t.path().join("p"), &f.result(&s), &s, &f.inputs_for(&s)).unwrap();
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 50));
    let read = |n: &str| fs::read_to_string(w.path.join(n)).unwrap();
    let readme = read("README.md");
    for n in truecold_proof::bundle::LABELLED_FILES {
        assert!(read(n).contains(PROBE_LABEL), "{n} lacks the label");
        assert!(
            readme.contains(&format!("`{n}`")),
            "README does not name {n}"
        );
    }
    for n in ["samples.csv", "reports.jsonl", "SHA256SUMS"] {
        assert!(!read(n).contains(PROBE_LABEL), "{n} carries the label");
        assert!(
            readme.contains(&format!("`{n}`")),
            "README does not name {n}"
        );
    }
    assert!(readme.contains("carry no label"));
    // Every file of the bundle is one of the two lists.
    let mut all: Vec<String> = fs::read_dir(&w.path)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    all.sort();
    let mut named: Vec<String> = truecold_proof::bundle::LABELLED_FILES
        .iter()
        .chain(&["samples.csv", "reports.jsonl", "SHA256SUMS"])
        .map(|s| s.to_string())
        .collect();
    named.sort();
    assert_eq!(all, named);
}

#[test]
fn readme_says_the_host_is_warm_and_censors_only_the_headline() {
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::linux(30).write(t.path(), "b");
    let readme = fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(
        readme.contains("the VM is cold, the host is not")
            && readme.contains("page cache holds the VMM binary, the kernel and the initramfs"),
        "{readme}"
    );
    assert!(readme.contains("(with failures, right-censored at the 1000.000 ms deadline)"));
    // Stage rows: successes only; no stage row scored at the deadline.
    let stages = readme.split("## Stages").nth(1).unwrap();
    let stages = stages.split("\n## ").next().unwrap();
    assert!(stages.contains("| spawn |"), "{stages}");
    assert!(!stages.contains("deadline)"), "{stages}");
    assert!(!stages.contains("with failures |"), "{stages}");
    let p = Fixture::probe(10);
    let mut s = p.samples();
    for x in &mut s {
        x.boot_id = None;
    }
    let w = write_bundle(&t.path().join("p"), &p.result(&s), &s, &p.inputs_for(&s)).unwrap();
    let readme = fs::read_to_string(w.path.join("README.md")).unwrap();
    assert!(readme.contains("page cache holds the VMM binary (the probe guest is inside it)"));
}
