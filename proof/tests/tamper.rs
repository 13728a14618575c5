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
    s[4].guest_cpus = Some(s[4].guest_cpus.unwrap() + 1);
    s[5].guest_cpus = None;
    let r = f.result(&s);
    let w = truecold_proof::write_bundle(&t.path().join("b"), &r, &s, &f.inputs_for(&s)).unwrap();
    for c in [
        Check::Memory,
        Check::SuccessIncomplete,
        Check::Latency,
        Check::ErrorKind,
        Check::Configuration,
    ] {
        assert!(w.verdict.has(c), "{c:?}: {}", w.verdict.render(&w.path, 50));
    }
    // The messages show values, never Rust's debug text (`Some(..)`, `None`).
    let text = w.verdict.render(&w.path, 50);
    let cpus = s[4].guest_cpus.unwrap();
    for want in [
        format!("guest firmware map {}, the engine gives", MEM - 4096),
        format!("successful sample 4: guest saw {cpus} CPUs, configured"),
        "successful sample 5: the guest reported no CPU count".to_string(),
    ] {
        assert!(text.contains(&want), "`{want}` not in:\n{text}");
    }
    assert!(!text.contains("Some(") && !text.contains("None"), "{text}");
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
    let w = truecold_proof::write_bundle(&t.path().join("b"), &r, &s, &f.inputs_for(&s)).unwrap();
    assert!(
        w.verdict.has(Check::RowContract),
        "{}",
        w.verdict.render(&w.path, 50)
    );
}

// ---- Issue 8 §4: tampered copies of the committed real bundle ----------------------------

/// The committed bundle verifies as it is (the rules below hold for real data).
#[test]
fn the_committed_bundle_verifies() {
    let t = tempfile::tempdir().unwrap();
    let dir = real_bundle(t.path(), "real");
    let v = verify_dir(&dir);
    assert!(v.is_valid(), "{}", v.render(&dir, 50));
    // A forger's rewrite that changes nothing is still valid: the harness below is exact.
    forge(&dir, |_, _| {});
    let v = verify_dir(&dir);
    assert!(v.is_valid(), "{}", v.render(&dir, 50));
}

/// A row edited without its evidence: `reports.jsonl` still holds what the VMM reported, so
/// the edited figures disagree with it (here a latency shaved by 10 ms, stages and ready
/// stamp moved to match, every statistic recomputed).
#[test]
fn a_row_edited_without_its_evidence() {
    let t = tempfile::tempdir().unwrap();
    let dir = real_bundle(t.path(), "r");
    forge_with(&dir, false, |_, s| {
        let x = &mut s[7];
        let g = x.stages.get(truecold_proof::Stage::GuestInit).unwrap();
        x.stages
            .set(truecold_proof::Stage::GuestInit, Some(g - 10_000_000));
        x.ready_ns = x.ready_ns.map(|r| r - 10_000_000);
        x.latency_ns = x.latency_ns.map(|l| l - 10_000_000);
    });
    let v = verdict(&dir);
    assert_eq!(
        checks(&v),
        [Check::Reports].into_iter().collect(),
        "{}",
        v.render(&dir, 50)
    );
    let text = v.render(&dir, 50);
    assert!(text.contains("row 7: stage guest_init"), "{text}");
    // The figures as numbers in ns, never Rust's `Some(…)`.
    assert!(text.contains(" ns in the row, "), "{text}");
    assert!(!text.contains("Some("), "{text}");
    // And a line of the evidence edited on its own: the same check.
    let dir = real_bundle(t.path(), "e");
    let p = dir.join(truecold_proof::names::REPORTS_FILE);
    let text = fs::read_to_string(&p).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut l: serde_json::Value = serde_json::from_str(&lines[3]).unwrap();
    let sr = l["vmm"]["stamps"]["strict_ready"].as_u64().unwrap();
    l["vmm"]["stamps"]["strict_ready"] = serde_json::json!(sr + 1);
    lines[3] = l.to_string();
    fs::write(&p, lines.join("\n") + "\n").unwrap();
    resum(&dir);
    let v = verdict(&dir);
    assert_eq!(checks(&v), [Check::Reports].into_iter().collect());
}

/// Forges a copy of the real bundle with `f` and returns its verdict, which must be invalid
/// with exactly the checks `want`.
fn forged(
    name: &str,
    want: &[Check],
    f: impl FnOnce(&mut truecold_proof::ResultJson, &mut Vec<truecold_proof::Sample>),
) -> (Verdict, tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let dir = real_bundle(t.path(), name);
    forge(&dir, f);
    // Invalid when any wanted finding is a reason; valid (its findings warnings) otherwise.
    let v = verify_dir(&dir);
    let invalid = want.iter().any(|c| !c.is_warning());
    assert_eq!(v.exit_code(), i32::from(invalid), "{}", v.render(&dir, 50));
    let want: std::collections::BTreeSet<Check> = want.iter().copied().collect();
    assert_eq!(checks(&v), want, "{}", v.render(&dir, 50));
    (v, t, dir)
}

/// Moves a row (all its stamps) by `delta` ns.
fn shift(s: &mut truecold_proof::Sample, delta: i64) {
    s.actual_request_ns = s.actual_request_ns.checked_add_signed(delta).unwrap();
    s.ready_ns = s.ready_ns.and_then(|x| x.checked_add_signed(delta));
}

#[test]
fn sequential_rows_that_overlap() {
    let (v, _t, _) = forged("overlap", &[Check::SequentialOverlap], |_, s| {
        // Row 501 requested 1 ms before row 500 was reaped.
        let delta = last_stamp(&s[500]) as i64 - 1_000_000 - s[501].actual_request_ns as i64;
        shift(&mut s[501], delta);
    });
    assert!(
        v.reasons[0].detail.contains("sample 501"),
        "{:?}",
        v.reasons
    );
}

#[test]
fn sequential_rows_in_reverse_order() {
    let (v, _t, _) = forged("reverse", &[Check::SequentialOrder], |_, s| {
        s.reverse();
        for (i, x) in s.iter_mut().enumerate() {
            x.index = i as u64;
        }
    });
    assert_eq!(v.reasons.len(), 999, "every pair is out of order");
}

#[test]
fn rows_spanning_more_than_the_harness_wall_time() {
    forged("wall", &[Check::WallTime], |r, s| {
        let span = last_stamp(&s[s.len() - 1]) - s[0].actual_request_ns;
        r.environment.harness.wall_ns = span - 1;
    });
}

/// The trace of a dropped row: one row removed, the rest renumbered and the planned count
/// lowered to match, every statistic recomputed.
#[test]
fn a_dropped_and_renumbered_row_leaves_a_gap() {
    let (v, _t, _) = forged("dropped", &[Check::SequentialGap], |r, s| {
        s.remove(500);
        for (i, x) in s.iter_mut().enumerate() {
            x.index = i as u64;
        }
        r.contract.mode = truecold_proof::Mode::Sequential { count: 999 };
    });
    // A warning, not a reason: a descheduled harness leaves the same gap.
    assert!(v.is_valid(), "{:?}", v.reasons);
    assert_eq!(v.warnings.len(), 1);
    assert!(
        v.warnings[0].detail.contains("end of sample 499"),
        "{:?}",
        v.warnings
    );
}

#[test]
fn a_success_at_one_or_zero_ns() {
    use truecold_proof::{Stage, StageTimes};
    // The row no longer agrees with any evidence a forger could write for it: Reports too.
    let (v, _t, _) = forged("floor", &[Check::StageFloor, Check::Reports], |_, s| {
        for (k, lat) in [(5usize, 1u64), (6, 0)] {
            let x = &mut s[k];
            let end = last_stamp(x);
            let teardown = x.stages.get(Stage::Teardown).unwrap();
            let mut st = StageTimes::default();
            st.set(Stage::Spawn, Some(lat));
            // The row still ends where it ended: workload absorbs the difference.
            st.set(
                Stage::Workload,
                Some(end - x.actual_request_ns - lat - teardown),
            );
            st.set(Stage::Teardown, Some(teardown));
            x.stages = st;
            x.ready_ns = Some(x.actual_request_ns + lat);
            x.latency_ns = Some(lat);
        }
    });
    let text = v.render(Path::new("b"), 50);
    assert!(
        text.contains("successful sample 5: no `kvm_open` stage"),
        "{text}"
    );
    assert!(
        text.contains("successful sample 6: `spawn` took 0 ns"),
        "{text}"
    );
}

#[test]
fn a_success_with_a_host_stage_missing_or_zero() {
    use truecold_proof::Stage;
    let (v, _t, _) = forged("stage", &[Check::StageFloor], |_, s| {
        for (k, zero) in [(7usize, true), (8, false)] {
            let x = &mut s[k];
            let d = x.stages.get(Stage::KvmOpen).unwrap();
            let vm = x.stages.get(Stage::VmCreate).unwrap();
            // The time moves to the next stage: the tiling still holds.
            x.stages.set(Stage::VmCreate, Some(vm + d));
            x.stages.set(Stage::KvmOpen, zero.then_some(0));
        }
    });
    assert_eq!(v.reasons.len(), 2, "{:?}", v.reasons);
}

#[test]
fn a_deadline_failure_ready_inside_the_deadline() {
    let (v, _t, _) = forged("deadline", &[Check::DeadlineKind], |_, s| {
        s[9].ok = false;
        s[9].error_kind = "deadline".into();
        s[9].error_detail = "killed at the deadline".into();
    });
    assert!(v.reasons[0].detail.contains("sample 9"), "{:?}", v.reasons);
}

#[test]
fn vcpus_edited_in_result_json() {
    let (v, _t, _) = forged("vcpus", &[Check::Cmdline], |r, _| {
        r.configuration.vcpus = 4;
    });
    // Both recorded commands disagree.
    assert_eq!(v.reasons.len(), 2, "{:?}", v.reasons);
    assert!(v.reasons[0].detail.contains("vCPUs"), "{:?}", v.reasons);
}

#[test]
fn backing_and_deadline_edited_in_result_json() {
    let (v, _t, _) = forged("backing", &[Check::Cmdline], |r, _| {
        r.configuration.backing = "hugetlb (obtained: hugetlb-2m ×1000)".into();
        r.contract.deadline_ns = 3_000_000_000;
    });
    let text = v.render(Path::new("b"), 50);
    assert!(text.contains("backing"), "{text}");
    assert!(
        text.contains("deadline (ms): the recorded `truecold run` command says 2000"),
        "{text}"
    );
}

#[test]
fn cmdline_txt_edited_to_disagree() {
    let t = tempfile::tempdir().unwrap();
    for (k, (from, to, says)) in [
        // Memory in the explicit invocation (not the as-typed one, which is not evidence).
        (
            "--mem-mib 16384 --backing anon --deadline-ms",
            "--mem-mib 8192 --backing anon --deadline-ms",
            "memory (MiB)",
        ),
        // Memory in the recorded VMM command.
        (
            "--mem-mib 16384 --backing anon --host-kind",
            "--mem-mib 8192 --backing anon --host-kind",
            "memory (MiB)",
        ),
        // Another deadline in the invocation.
        ("--deadline-ms 2000", "--deadline-ms 5000", "deadline (ms)"),
        // Another deadline instant given to the VMM.
        (
            "+2000000000>",
            "+3000000000>",
            "deadline (ns after the origin)",
        ),
        // The VMM command boots a kernel in a probe bundle.
        ("boot --probe", "boot --kernel vmlinux", "boots a kernel"),
        // The explicit invocation is not there at all.
        (
            "# truecold run, every argument explicit",
            "# something else",
            "no `# truecold run",
        ),
        // A flag left to a default: nothing is read from a default.
        (
            " --vcpus 2 --mem-mib 16384 --backing anon --deadline-ms",
            " --mem-mib 16384 --backing anon --deadline-ms",
            "`--vcpus` is not spelled out",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let dir = real_bundle(t.path(), &format!("c{k}"));
        let p = dir.join("cmdline.txt");
        let text = fs::read_to_string(&p).unwrap();
        assert!(text.contains(from), "{text}");
        fs::write(&p, text.replacen(from, to, 1)).unwrap();
        resum(&dir);
        let v = verdict(&dir);
        assert_eq!(
            checks(&v),
            [Check::Cmdline].into_iter().collect(),
            "{}",
            v.render(&dir, 50)
        );
        assert!(v.render(&dir, 50).contains(says), "{}", v.render(&dir, 50));
    }
}

#[test]
fn result_json_with_a_duplicate_key() {
    let t = tempfile::tempdir().unwrap();
    let dir = real_bundle(t.path(), "dup");
    let p = dir.join("result.json");
    let text = fs::read_to_string(&p).unwrap();
    // A reader who stops at the first key sees 10 s; serde keeps the last (the real one).
    let forged = text.replacen(
        "\"deadline_ns\": ",
        "\"deadline_ns\": 10000000000,\n    \"deadline_ns\": ",
        1,
    );
    assert_ne!(forged, text);
    fs::write(&p, forged).unwrap();
    resum(&dir);
    let v = verdict(&dir);
    assert_eq!(
        checks(&v),
        [Check::ResultNotCanonical].into_iter().collect(),
        "{}",
        v.render(&dir, 50)
    );
    assert!(
        v.reasons[0]
            .detail
            .contains("line 11: the file has `    \"deadline_ns\": 10000000000,`"),
        "{:?}",
        v.reasons
    );
    // Compact JSON with the same content: not the writer's bytes either.
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    fs::write(&p, serde_json::to_vec(&r).unwrap()).unwrap();
    resum(&dir);
    let v = verdict(&dir);
    assert_eq!(
        checks(&v),
        [Check::ResultNotCanonical].into_iter().collect()
    );
}

/// Nothing from the bundle reaches the terminal raw: an ANSI sequence and a carriage return
/// in a file name and in an error kind are printed escaped, so an INVALID report cannot
/// print a line that reads "VALID".
#[test]
fn control_characters_are_printed_escaped() {
    let t = tempfile::tempdir().unwrap();
    let dir = real_bundle(t.path(), "ansi");
    let evil = "\u{1b}[2K\rVALID all good\u{202e}";
    forge(&dir, |_, s| {
        s[3].ok = false;
        s[3].error_kind = format!("vmm_exit{evil}");
        s[3].error_detail = evil.into();
    });
    fs::write(dir.join(format!("x{evil}")), "surprise").unwrap();
    let v = verdict(&dir);
    assert!(v.has(Check::FileUnlisted), "{:?}", v.reasons);
    let text = v.render(&dir, 50);
    assert!(
        text.chars().all(|c| c == '\n' || !c.is_control()),
        "a control character reached the report: {text:?}"
    );
    assert!(!text.contains('\u{202e}'), "{text:?}");
    assert!(text.contains("\\u{1b}[2K\\rVALID"), "{text}");
    assert!(text.starts_with("INVALID"), "{text}");
    assert!(text.lines().all(|l| !l.starts_with("VALID")), "{text}");
    // The stored reason keeps the bytes; only what is printed is escaped.
    assert!(v.reasons.iter().any(|r| r.detail.contains(evil)));
    assert_eq!(
        truecold_proof::fmt::escape_untrusted("a\tb\u{7f}c\u{85}ü"),
        "a\\tb\\u{7f}c\\u{85}ü"
    );
}

/// result.json and cmdline.txt are read into memory only up to a cap; beyond it, a reason.
#[test]
fn parsed_files_over_the_cap_are_a_typed_reason() {
    let t = tempfile::tempdir().unwrap();
    for (k, name) in ["result.json", "cmdline.txt"].into_iter().enumerate() {
        let dir = Fixture::probe(5).write(t.path(), &format!("b{k}"));
        let f = fs::OpenOptions::new()
            .append(true)
            .open(dir.join(name))
            .unwrap();
        f.set_len(truecold_proof::fsio::MAX_PARSED_BYTES + 1)
            .unwrap();
        resum(&dir);
        let v = verify_dir(&dir);
        assert_eq!(v.exit_code(), 1, "{}", v.render(&dir, 50));
        assert!(v.has(Check::TooLarge), "{}", v.render(&dir, 50));
        assert!(
            v.reasons
                .iter()
                .any(|r| r.check == Check::TooLarge && r.detail.contains(name)),
            "{:?}",
            v.reasons
        );
    }
}

/// samples.csv must be the writer's bytes: CRLF line ends, or a field quoted that the writer
/// would not quote, make it INVALID even though every value still parses the same.
#[test]
fn samples_csv_not_in_its_canonical_form() {
    let t = tempfile::tempdir().unwrap();
    for (k, edit) in [
        |s: String| s.replace('\n', "\r\n"),
        |s: String| s.replacen("\n0,probe,1,", "\n\"0\",probe,1,", 1),
    ]
    .into_iter()
    .enumerate()
    {
        let dir = real_bundle(t.path(), &format!("c{k}"));
        let p = dir.join("samples.csv");
        let text = fs::read_to_string(&p).unwrap();
        let edited = edit(text.clone());
        assert_ne!(edited, text, "edit {k} changed nothing");
        fs::write(&p, edited).unwrap();
        resum(&dir);
        let v = verdict(&dir);
        assert_has(&v, &dir, Check::SamplesCsv);
    }
}

/// Forges a fixture bundle (not the committed one) with `f`; its verdict must be invalid with
/// exactly the checks `want`.
fn forged_fixture(
    fixture: Fixture,
    want: &[Check],
    f: impl FnOnce(&mut truecold_proof::ResultJson, &mut Vec<truecold_proof::Sample>),
) -> Verdict {
    let t = tempfile::tempdir().unwrap();
    let dir = fixture.write(t.path(), "b");
    forge(&dir, f);
    let v = verify_dir(&dir);
    let want: std::collections::BTreeSet<Check> = want.iter().copied().collect();
    assert_eq!(checks(&v), want, "{}", v.render(&dir, 50));
    v
}

#[test]
fn a_clock_that_is_not_the_host_kinds() {
    use truecold_proof::schema::{Clock, HostKind};
    // Wall-time data relabelled as the virtual clock.
    let v = forged_fixture(Fixture::linux(40), &[Check::Clock], |r, _| {
        r.contract.clock = Clock::Virtual;
    });
    assert!(
        v.reasons[0]
            .detail
            .contains("contract.clock is `virtual`, but a `hardware` host measures on the wall"),
        "{:?}",
        v.reasons
    );
    // The host relabelled nested-emulated, the clock left on wall.
    forged_fixture(Fixture::linux(40), &[Check::Clock], |r, _| {
        r.environment.host_kind = HostKind::NestedEmulated;
        r.environment.nested = Some(truecold_proof::schema::NestedHarness {
            l1_seed: 1,
            l0_qemu: "QEMU".into(),
            l1_kernel_sha256: Some("0".repeat(64)),
            l1_init_sha256: None,
            bench_sha256: None,
        });
    });
    // Both relabelled together agree with each other: no clock reason.
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::linux(40).write(t.path(), "b");
    forge(&dir, |r, _| {
        r.environment.host_kind = HostKind::NestedEmulated;
        r.contract.clock = Clock::Virtual;
    });
    let v = verify_dir(&dir);
    assert!(!v.has(Check::Clock), "{}", v.render(&dir, 50));
}

#[test]
fn knobs_out_of_order_twice_conflicting_or_not_for_the_guest() {
    use truecold_proof::schema::Knob;
    // A valid set (the fixture's backing is thp): the bundle stays valid.
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::linux(40).write(t.path(), "ok");
    forge(&dir, |r, _| {
        r.configuration.knobs = vec![Knob::TscReliable, Knob::Hz100, Knob::BackingThp];
    });
    let v = verify_dir(&dir);
    assert!(v.is_valid(), "{}", v.render(&dir, 50));
    assert!(fs::read_to_string(dir.join("README.md"))
        .unwrap()
        .contains("- tune knobs: `tsc-reliable`, `hz-100`, `backing-thp`"),);
    let cases: [(Vec<Knob>, &str); 5] = [
        (
            vec![Knob::Hz100, Knob::TscReliable],
            "lists `hz-100` before `tsc-reliable`",
        ),
        (vec![Knob::Lpj, Knob::Lpj], "knob `lpj` is given twice"),
        (
            vec![Knob::Hz100, Knob::Hz1000],
            "knobs `hz-100` and `hz-1000` change the same thing",
        ),
        (
            vec![Knob::BackingHugetlb],
            "knob `backing-hugetlb` backs guest memory with `hugetlb`, configuration.backing is",
        ),
        (
            vec![Knob::BackingThp, Knob::BackingHugetlb],
            "knobs `backing-thp` and `backing-hugetlb` change the same thing",
        ),
    ];
    for (knobs, why) in cases {
        let v = forged_fixture(Fixture::linux(40), &[Check::Knobs], |r, _| {
            r.configuration.knobs = knobs.clone();
        });
        assert!(
            v.reasons.iter().any(|r| r.detail.contains(why)),
            "{knobs:?}: {:?}",
            v.reasons
        );
    }
    // A command-line knob on the probe guest (no kernel): not for this guest.
    let v = forged_fixture(Fixture::probe(40), &[Check::Knobs], |r, _| {
        r.configuration.knobs = vec![Knob::TscReliable];
    });
    assert!(
        v.reasons[0]
            .detail
            .contains("knob `tsc-reliable` does not apply to this guest"),
        "{:?}",
        v.reasons
    );
}

/// A dropped row in a fixture: row `k` removed, the rest renumbered, the plan lowered.
fn drop_row(r: &mut truecold_proof::ResultJson, s: &mut Vec<truecold_proof::Sample>, k: usize) {
    s.remove(k);
    for (i, x) in s.iter_mut().enumerate() {
        x.index = i as u64;
    }
    r.contract.mode = truecold_proof::Mode::Sequential {
        count: s.len() as u64,
    };
}

#[test]
fn the_gap_rule_is_keyed_on_interleaved_not_on_the_observer() {
    let plain = Fixture {
        fail_every: None,
        ..Fixture::linux(40)
    };
    // A plain bundle: a dropped row's gap is reported (a warning: the bundle stays valid).
    let v = forged_fixture(plain.clone(), &[Check::SequentialGap], |r, s| {
        drop_row(r, s, 20)
    });
    assert!(v.is_valid() && v.warnings.len() == 1, "{:?}", v.warnings);
    // The same bundle claiming to be an interleaved arm: the gap is the directory's to judge.
    let t = tempfile::tempdir().unwrap();
    let dir = plain.write(t.path(), "arm");
    forge(&dir, |r, s| {
        drop_row(r, s, 20);
        r.contract.interleaved = true;
    });
    let v = verify_dir(&dir);
    assert!(
        v.is_valid() && v.warnings.is_empty(),
        "{}",
        v.render(&dir, 50)
    );
    // An engines-campaign arm (serial observer) that is not interleaved: judged alone (and
    // its recorded command, which names engine arms, contradicts it).
    let arm = Fixture {
        fail_every: None,
        ..Fixture::engine(truecold_proof::schema::Engine::Firecracker, 40)
    };
    let v = forged_fixture(arm, &[Check::SequentialGap, Check::Cmdline], |r, s| {
        drop_row(r, s, 20);
        r.contract.interleaved = false;
    });
    assert!(
        v.reasons.iter().any(|x| x
            .detail
            .contains("names engine arms, but the bundle is not interleaved")),
        "{:?}",
        v.reasons
    );
}

#[test]
fn residue_is_required_and_its_leaks_recomputed() {
    use truecold_proof::residue::{leaks, Reading, Residue};
    let t = tempfile::tempdir().unwrap();
    let reading = |children| Reading {
        children: Some(children),
        ..Default::default()
    };
    // A leak the readings show but the bundle does not state.
    let dir = fresh(t.path(), "hidden");
    forge(&dir, |r, _| {
        r.environment.residue = Some(Residue {
            before: reading(0),
            after: reading(1),
            leaks: vec![],
        })
    });
    resum(&dir);
    let v = verdict(&dir);
    assert_has(&v, &dir, Check::Residue);
    // Stated, but not among the warnings.
    let dir = fresh(t.path(), "unwarned");
    forge(&dir, |r, _| {
        r.environment.residue = Some(Residue::new(reading(0), reading(1)));
    });
    resum(&dir);
    let v = verdict(&dir);
    assert_eq!(checks(&v).into_iter().collect::<Vec<_>>(), [Check::Residue]);
    // Stated and warned: valid.
    let dir = fresh(t.path(), "warned");
    forge(&dir, |r, _| {
        r.environment.residue = Some(Residue::new(reading(0), reading(1)));
        r.environment
            .warnings
            .extend(leaks(&reading(0), &reading(1)));
    });
    resum(&dir);
    assert_eq!(verify_dir(&dir).exit_code(), 0);
    // Removed from a schema-6 bundle.
    let dir = fresh(t.path(), "removed");
    forge(&dir, |r, _| r.environment.residue = None);
    resum(&dir);
    let v = verdict(&dir);
    assert_eq!(checks(&v).into_iter().collect::<Vec<_>>(), [Check::Residue]);
}

#[test]
fn the_nested_harness_inputs_are_in_exactly_the_nested_bundles() {
    use truecold_proof::schema::{HostKind, NestedHarness};
    let facts = NestedHarness {
        l1_seed: 1,
        l0_qemu: "QEMU emulator version 10.0.2".into(),
        l1_kernel_sha256: Some("0".repeat(64)),
        l1_init_sha256: None,
        bench_sha256: None,
    };
    // A nested-emulated bundle without them.
    let nested = Fixture {
        host: HostKind::NestedEmulated,
        ..Fixture::linux(10)
    };
    forged_fixture(nested, &[Check::NestedHarness], |r, _| {
        r.environment.nested = None
    });
    // A wall-clock bundle with them.
    forged_fixture(Fixture::linux(10), &[Check::NestedHarness], |r, _| {
        r.environment.nested = Some(facts.clone())
    });
    // A schema-6 bundle with them (schema 7 added them).
    forged_fixture(Fixture::linux(10), &[Check::NestedHarness], |r, _| {
        r.schema_version = 6;
        r.environment.host_kind = HostKind::NestedEmulated;
        r.contract.clock = truecold_proof::schema::Clock::Virtual;
        r.environment.nested = Some(facts.clone())
    });
    // Schema 9: the L1 kernel's digest, present and a digest; absent before schema 9.
    let nested = || Fixture {
        host: HostKind::NestedEmulated,
        ..Fixture::linux(10)
    };
    for (digest, want) in [
        (None, "l1_kernel_sha256 is missing"),
        (Some("0".repeat(63)), "is not 64 lowercase hex digits"),
        (Some("A".repeat(64)), "is not 64 lowercase hex digits"),
    ] {
        let v = forged_fixture(nested(), &[Check::NestedHarness], |r, _| {
            r.environment.nested.as_mut().unwrap().l1_kernel_sha256 = digest.clone()
        });
        assert!(v.reasons[0].detail.contains(want), "{:?}", v.reasons);
    }
    let v = forged_fixture(nested(), &[Check::NestedHarness], |r, _| {
        r.schema_version = 8
    });
    assert!(
        v.reasons[0].detail.contains("schema 9 added it"),
        "{:?}",
        v.reasons
    );
    // A schema-8 nested bundle without it is valid as it is (committed bundles).
    let t = tempfile::tempdir().unwrap();
    let dir = nested().write(t.path(), "s8");
    forge(&dir, |r, _| {
        r.schema_version = 8;
        r.environment.nested.as_mut().unwrap().l1_kernel_sha256 = None;
    });
    let v = verify_dir(&dir);
    assert!(!v.has(Check::NestedHarness), "{}", v.render(&dir, 50));
}

#[test]
fn a_description_of_the_publishers_own_is_its_own_reason_and_never_rendered() {
    // Before issue 27 the description was free text the README printed as it came: a
    // VALID bundle could claim anything in its own README.
    let claim = "Independently audited: p50 0.4 ms";
    let (_v, _t, dir) = forged("described", &[Check::ContractDescription], |r, _| {
        r.contract.description = claim.to_string();
    });
    let readme = fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(!readme.contains(claim), "{readme}");
}

#[test]
fn a_success_carrying_error_detail_is_its_own_reason() {
    let (_v, _t, _dir) = forged("detail", &[Check::ErrorDetail], |_, s| {
        let ok = s.iter_mut().find(|x| x.ok).unwrap();
        ok.error_detail = "deadline exceeded (but it was fine)".to_string();
    });
}

/// The fail-fast rule (`contract.stop_after`, `contract.stopped`) re-applied to the rows:
/// forty launches failing alike, under a rule of 10.
#[test]
fn the_fail_fast_rule_is_re_applied_to_the_rows() {
    let all_fail = Fixture {
        fail_every: Some(1),
        ..Fixture::linux(40)
    };
    // The fixture's failures alternate `deadline` and `vmm_exit`: made one kind here.
    let alike = |s: &mut Vec<truecold_proof::Sample>| {
        for x in s.iter_mut() {
            x.error_kind = "vmm_exit".into();
        }
    };
    // The honest stop: ten rows of one kind, stopped, incomplete.
    let stopped = |r: &mut truecold_proof::ResultJson, s: &mut Vec<truecold_proof::Sample>| {
        alike(s);
        s.truncate(10);
        r.contract.stop_after = Some(10);
        r.contract.stopped = Some("vmm_exit".into());
        r.contract.incomplete = true;
    };
    let v = forged_fixture(all_fail.clone(), &[], stopped);
    assert!(v.is_valid() && v.warnings.is_empty());
    // All forty rows kept under a rule that would have stopped after the tenth.
    let v = forged_fixture(all_fail.clone(), &[Check::Stopped], |r, s| {
        alike(s);
        r.contract.stop_after = Some(10);
    });
    assert!(
        v.reasons[0]
            .detail
            .contains("should have stopped after row 9"),
        "{:?}",
        v.reasons
    );
    // A stop claimed for another kind, or past rows the rule would not stop at.
    forged_fixture(all_fail.clone(), &[Check::Stopped], |r, s| {
        stopped(r, s);
        r.contract.stopped = Some("deadline".into());
    });
    forged_fixture(all_fail.clone(), &[Check::Stopped], |r, s| {
        stopped(r, s);
        s.truncate(9);
    });
    // A stop that is not marked incomplete (the row count says so too); a stop without a
    // rule; a rule of 0.
    forged_fixture(
        all_fail.clone(),
        &[Check::Stopped, Check::AttemptCount],
        |r, s| {
            stopped(r, s);
            r.contract.incomplete = false;
        },
    );
    forged_fixture(all_fail.clone(), &[Check::Stopped], |r, s| {
        stopped(r, s);
        r.contract.stop_after = None;
    });
    forged_fixture(all_fail.clone(), &[Check::Stopped], |r, _| {
        r.contract.stop_after = Some(0);
    });
    // A rule where none runs: an interleaved arm.
    forged_fixture(all_fail.clone(), &[Check::Stopped], |r, _| {
        r.contract.stop_after = Some(50);
        r.contract.interleaved = true;
    });
    // The rule firing at the last planned row stops nothing: not a reason.
    let ten = Fixture {
        fail_every: Some(1),
        ..Fixture::linux(10)
    };
    let v = forged_fixture(ten, &[], |r, _| r.contract.stop_after = Some(10));
    assert!(v.is_valid());
    // Failures that never run ten alike (every seventh fails): the rule never fires.
    forged_fixture(Fixture::linux(40), &[], |r, _| {
        r.contract.stop_after = Some(2)
    });
}

/// Schema 11: every Linux success's zone figures obey the zone rule, re-checked from the row
/// alone (the forger rewrites the records to agree, so only the rule can catch it): a hidden
/// hole (the firmware RAM right, Σpresent short), a reservation that does not add up (more
/// present than the map gives), MemTotal that is not the managed pages, more managed than
/// present, a figure missing. Each is a `Memory` reason that states the figures.
#[test]
fn zone_figures_that_do_not_add_up() {
    use truecold_proof::Sample;
    const MIB: u64 = 1 << 20;
    type Edit = fn(&mut Sample);
    let cases: [(Edit, &str); 4] = [
        (
            |s| *s.guest_mem_present.as_mut().unwrap() -= 2 * MIB,
            "zone rule: the kernel's zones hold 17177767936 bytes (Σpresent × 4096), expected \
             17179865088 (firmware RAM 17179869184 − T 4096)",
        ),
        (
            |s| *s.guest_mem_present.as_mut().unwrap() += 4096,
            "the kernel's zones hold 17179869184 bytes (Σpresent × 4096), expected 17179865088",
        ),
        (
            |s| *s.guest_mem_managed.as_mut().unwrap() -= 4096,
            "zone rule: MemTotal 16865296384 ≠ Σmanaged × 4096 = 16865292288",
        ),
        (
            |s| {
                let over = s.guest_mem_present.unwrap() + 4096;
                s.guest_mem_managed = Some(over);
                s.guest_mem_total = Some(over);
            },
            "zone rule: Σmanaged × 4096 = 17179869184 exceeds Σpresent × 4096 = 17179865088",
        ),
    ];
    for (edit, want) in cases {
        let v = forged_fixture(Fixture::linux(10), &[Check::Memory], |r, s| {
            assert_eq!(r.schema_version, 11);
            edit(&mut s[3]);
        });
        let text = v.render(std::path::Path::new("b"), 50);
        assert!(text.contains("successful sample 3"), "{text}");
        assert!(text.contains(want), "`{want}` not in:\n{text}");
    }
    // A figure missing from the row (the record, which always carries it, then disagrees).
    let v = forged_fixture(
        Fixture::linux(10),
        &[Check::Memory, Check::Reports],
        |_, s| s[3].guest_mem_present = None,
    );
    let text = v.render(std::path::Path::new("b"), 50);
    let want = "the guest's zone figures are incomplete: present none, managed 16865296384";
    assert!(text.contains(want), "`{want}` not in:\n{text}");
    // Figures of 0 (the record's "not read") are as incomplete, even where they agree.
    let v = forged_fixture(Fixture::linux(10), &[Check::Memory], |_, s| {
        s[3].guest_mem_managed = Some(0);
        s[3].guest_mem_total = Some(0);
    });
    let text = v.render(std::path::Path::new("b"), 50);
    let want =
        "the guest's zone figures are incomplete: present 17179865088, managed 0, MemTotal 0";
    assert!(text.contains(want), "`{want}` not in:\n{text}");
}

/// A kernel that keeps more than truecold's own (a mainstream kernel's ~53 MiB at 1 GiB, here
/// 400 MiB of 16 GiB) is valid under the zone rule, while a bundle of schema 10, whose rows
/// have no zone figures, is still held to the calibrated MemTotal bound its guests checked.
#[test]
fn the_calibrated_bound_holds_only_before_schema_11() {
    let mainstream = |s: &mut Vec<truecold_proof::Sample>| {
        for x in s.iter_mut().filter(|x| x.ok) {
            let kept = (16u64 << 30) - (400 << 20);
            x.guest_mem_managed = Some(kept);
            x.guest_mem_total = Some(kept);
        }
    };
    forged_fixture(Fixture::linux(10), &[], |_, s| mainstream(s));
    let v = forged_fixture(Fixture::linux(10), &[Check::Memory], |r, s| {
        r.schema_version = 10;
        mainstream(s);
    });
    let text = v.render(std::path::Path::new("b"), 50);
    assert!(
        text.contains("guest MemTotal 16760438784 not in ["),
        "{text}"
    );
    // Schema 10 as it was (MemTotal inside the bound) is valid: its rows lack the columns.
    forged_fixture(Fixture::linux(10), &[], |r, _| r.schema_version = 10);
}
