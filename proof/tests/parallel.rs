//! The parallel clock's figure (schema 11, docs/virtual-clock.md "The parallel clock"): a
//! nested bundle whose L0 keeps the clock carries a `parallel_latency_ns` on every success,
//! re-derived from the reading in its `reports.jsonl` line; the verifier rejects one that
//! is missing, altered, impossible, or present where the L0 keeps no such clock.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use truecold_proof::reports::ReportLine;
use truecold_proof::schema::{HostKind, ResultJson, Sample};
use truecold_proof::verify::verify_dir;
use truecold_proof::Check;
use truecold_proto::parallel::Reading;

/// An L0 version line of a build that keeps the parallel clock.
const L0_WITH_CLOCK: &str = "QEMU emulator version 10.0.2 (truecold-2: test, parallel clock)";

/// What the clock saved at a row's origin and strict-ready: a third of its latency (two CPUs
/// busy for two thirds of it).
fn reading_for(s: &Sample) -> Option<Reading> {
    let lat = s.latency_ns?;
    let origin = s.intended_request_ns.unwrap_or(s.actual_request_ns);
    Some(Reading {
        offset_ns: 1_000,
        saved_origin_ns: origin / 7,
        saved_ready_ns: origin / 7 + lat / 3,
    })
}

/// Rewrites `reports.jsonl` of `dir` with `edit` applied to each line, then SHA256SUMS.
fn edit_lines(dir: &Path, mut edit: impl FnMut(&mut ReportLine)) {
    let p = dir.join(truecold_proof::names::REPORTS_FILE);
    let text = std::fs::read_to_string(&p).unwrap();
    let mut out = String::new();
    for l in text.lines() {
        let mut line: ReportLine = serde_json::from_str(l).unwrap();
        edit(&mut line);
        out.push_str(&line.to_line().unwrap());
    }
    std::fs::write(&p, out).unwrap();
    resum(dir);
}

/// A nested Linux bundle on an L0 with the parallel clock, every success with its reading and
/// figure, written as the bench writes one (statistics recomputed).
fn nested_bundle(parent: &Path, name: &str) -> PathBuf {
    let f = Fixture {
        host: HostKind::NestedEmulated,
        ..Fixture::linux(21)
    };
    let dir = f.write(parent, name);
    forge(&dir, |r: &mut ResultJson, s: &mut Vec<Sample>| {
        r.environment.nested.as_mut().unwrap().l0_qemu = L0_WITH_CLOCK.into();
        for x in s.iter_mut() {
            x.parallel_latency_ns = match (x.ok, x.latency_ns, reading_for(x)) {
                (true, Some(l), Some(p)) => Some(p.latency(l)),
                _ => None,
            };
        }
    });
    let rows = truecold_proof::read_bundle(&dir).unwrap().1;
    edit_lines(&dir, |line| {
        let s = &rows[line.index as usize];
        line.parallel = if s.ok { reading_for(s) } else { None };
    });
    dir
}

fn reasons(dir: &Path) -> (bool, String) {
    let v = verify_dir(dir);
    (v.is_valid(), v.render(dir, 50))
}

#[test]
fn a_nested_bundle_with_its_parallel_figures_verifies_and_states_them() {
    let t = tempfile::tempdir().unwrap();
    let dir = nested_bundle(t.path(), "b");
    let (ok, text) = reasons(&dir);
    assert!(ok, "{text}");
    let (r, s) = truecold_proof::read_bundle(&dir).unwrap();
    assert_eq!(r.schema_version, truecold_proof::SCHEMA_VERSION);
    let p = r.summary.parallel_latency.expect("a parallel summary");
    assert_eq!(p.missing, 0);
    let ok = s.iter().filter(|x| x.ok && x.latency_ns.is_some()).count() as u64;
    assert_eq!(p.successes.unwrap().n, ok);
    assert!(text.contains("on the parallel clock"), "{text}");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(readme.contains("on the parallel clock"), "{readme}");
    // Every figure is below its total one (a third was saved).
    for x in s.iter().filter(|x| x.ok) {
        assert!(x.parallel_latency_ns.unwrap() < x.latency_ns.unwrap());
    }
}

#[test]
fn an_altered_parallel_figure_is_caught_against_its_reading() {
    let t = tempfile::tempdir().unwrap();
    let dir = nested_bundle(t.path(), "b");
    // A forger lowers every figure and recomputes the statistics, leaving the evidence.
    forge_with(&dir, false, |_, s| {
        for x in s.iter_mut() {
            if let Some(p) = x.parallel_latency_ns.as_mut() {
                *p -= 1_000;
            }
        }
    });
    let v = verify_dir(&dir);
    assert!(!v.is_valid());
    assert!(
        checks(&v).contains(&Check::Reports),
        "{}",
        v.render(&dir, 50)
    );
    assert!(v.render(&dir, 50).contains("its reading gives"));
}

#[test]
fn a_success_without_its_reading_is_caught_unless_the_line_says_why() {
    let t = tempfile::tempdir().unwrap();
    let dir = nested_bundle(t.path(), "b");
    // The readings and figures removed, the statistics recomputed: no reason given.
    forge_with(&dir, false, |_, s| {
        for x in s.iter_mut() {
            x.parallel_latency_ns = None;
        }
    });
    edit_lines(&dir, |l| l.parallel = None);
    let (ok, text) = reasons(&dir);
    assert!(!ok);
    assert!(
        text.contains("a success without a parallel reading"),
        "{text}"
    );
    // The same rows with each line naming why its reading is missing: valid, counted.
    edit_lines(&dir, |l| {
        l.parallel_missing = Some("the L0 had not recorded the time".into())
    });
    let v = verify_dir(&dir);
    // Only the rows that are successes may say so; a failure's line saying it is harmless.
    assert!(v.is_valid(), "{}", v.render(&dir, 50));
}

#[test]
fn an_impossible_reading_is_named() {
    let t = tempfile::tempdir().unwrap();
    let dir = nested_bundle(t.path(), "b");
    // The savings grow by the whole latency: no two-CPU L1 saves more than half of it. The
    // rows are forged to agree with the forged readings.
    let rows = truecold_proof::read_bundle(&dir).unwrap().1;
    edit_lines(&dir, |l| {
        if let (Some(p), Some(lat)) = (l.parallel.as_mut(), rows[l.index as usize].latency_ns) {
            p.saved_ready_ns = p.saved_origin_ns + lat;
        }
    });
    forge_with(&dir, false, |_, s| {
        for x in s.iter_mut() {
            if x.parallel_latency_ns.is_some() {
                x.parallel_latency_ns = Some(0);
            }
        }
    });
    let (ok, text) = reasons(&dir);
    assert!(!ok);
    assert!(text.contains("more than the"), "{text}");
}

#[test]
fn a_parallel_figure_where_the_l0_keeps_no_such_clock_is_caught() {
    let t = tempfile::tempdir().unwrap();
    let dir = nested_bundle(t.path(), "b");
    forge_with(&dir, false, |r, _| {
        r.environment.nested.as_mut().unwrap().l0_qemu =
            "QEMU emulator version 10.0.2 (truecold-1: test)".into();
    });
    let (ok, text) = reasons(&dir);
    assert!(!ok);
    assert!(text.contains("keeps no parallel clock"), "{text}");
}

#[test]
fn compare_reads_the_parallel_figure_when_asked_and_refuses_a_bundle_without_it() {
    let t = tempfile::tempdir().unwrap();
    let a = nested_bundle(t.path(), "a");
    let b = nested_bundle(t.path(), "b");
    let va = verify_dir(&a);
    let vb = verify_dir(&b);
    let o = truecold_proof::CompareOptions {
        figure: truecold_proof::schema::Figure::Parallel,
        ..Default::default()
    };
    let c = truecold_proof::compare::compare_verified(&va, &vb, &o).unwrap();
    assert!(
        c.metrics[0].name.contains("on the parallel clock"),
        "{}",
        c.metrics[0].name
    );
    let (ra, sa) = truecold_proof::read_bundle(&a).unwrap();
    let par =
        truecold_proof::summary::success_figures(&sa, truecold_proof::schema::Figure::Parallel);
    assert_eq!(c.metrics[0].a.n as usize, par.len());
    assert_eq!(
        c.metrics[0].a.p50,
        ra.summary
            .parallel_latency
            .unwrap()
            .successes
            .map(|x| x.p50)
    );
    // A bundle on the same clock whose every reading is missing (each line says why) has no
    // figure to compare.
    let plain = nested_bundle(t.path(), "plain");
    forge_with(&plain, false, |_, s| {
        for x in s.iter_mut() {
            x.parallel_latency_ns = None;
        }
    });
    edit_lines(&plain, |l| {
        l.parallel = None;
        l.parallel_missing = Some("the L0 had not recorded the time".into());
    });
    let vp = verify_dir(&plain);
    assert!(vp.is_valid(), "{}", vp.render(&plain, 50));
    let e = truecold_proof::compare::compare_verified(&va, &vp, &o).unwrap_err();
    assert!(e.to_string().contains("no parallel-clock figure"), "{e}");
}
