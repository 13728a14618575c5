use super::*;
use crate::schema::ContractKind;

fn row(i: u64, latency: u64) -> Sample {
    let mut s = Sample::new(i, ContractKind::Linux, 1, 1 << 28);
    s.actual_request_ns = 1_000_000 * (i + 1);
    s.ready_ns = Some(s.actual_request_ns + latency);
    s.latency_ns = Some(latency);
    s.ok = true;
    s.workload = "BENCH_OK".into();
    s
}

#[test]
fn identical_rows_are_identical_in_every_column() {
    let a: Vec<Sample> = (0..3).map(|i| row(i, 50_000_000 + i)).collect();
    let e = sample_equality((&a, crate::SCHEMA_VERSION), (&a, crate::SCHEMA_VERSION)).unwrap();
    assert!(e.identical(), "{e:?}");
    assert_eq!(e.columns, crate::csv::columns());
    assert!(e.columns.iter().any(|c| c == "parallel_latency_ns"));
    assert_eq!((e.rows_recorded, e.rows_replayed), (3, 3));
    let text = ReplayVerdict::Virtual(e).render_text();
    assert!(
        text.contains("IDENTICAL") && text.contains("3 samples"),
        "{text}"
    );
}

/// Each difference names its launch, its column and, in a nanosecond column, the
/// difference in ns; a text field differs without a delta; a missing row is a difference
/// in every column.
#[test]
fn every_difference_is_listed_with_launch_field_and_ns() {
    let a: Vec<Sample> = (0..3).map(|i| row(i, 50_000_000)).collect();
    let mut b = a.clone();
    b[1].latency_ns = Some(50_000_007);
    b[1].ready_ns = b[1].ready_ns.map(|r| r + 7);
    b[2].workload = "other".into();
    b.push(row(3, 1));
    let e = sample_equality((&a, crate::SCHEMA_VERSION), (&b, crate::SCHEMA_VERSION)).unwrap();
    assert!(!e.identical());
    let lat = e
        .differences
        .iter()
        .find(|d| d.launch == 1 && d.field == "latency_ns")
        .expect("the latency difference");
    assert_eq!(lat.delta_ns, Some(7));
    assert_eq!(lat.recorded.as_deref(), Some("50000000"));
    let w = e
        .differences
        .iter()
        .find(|d| d.launch == 2 && d.field == "workload")
        .expect("the workload difference");
    assert_eq!(w.delta_ns, None);
    let extra: Vec<&Difference> = e.differences.iter().filter(|d| d.launch == 3).collect();
    assert_eq!(extra.len(), e.columns.len(), "{extra:?}");
    assert!(extra.iter().all(|d| d.recorded.is_none()));
    assert_eq!(e.launches_differing(), 3);
    let text = ReplayVerdict::Virtual(e.clone()).render_text();
    assert!(text.contains("DIFFERS"), "{text}");
    assert!(
        text.contains("launch 1 latency_ns: 50000000 → 50000007 (+7 ns)"),
        "{text}"
    );
    assert!(text.contains("launch 3 index: (no row) → 3"), "{text}");
    let j = ReplayVerdict::Virtual(e).to_json();
    assert_eq!(j["reproduced"], false);
    assert!(j["equality"]["differences"].as_array().unwrap().len() > 3);
}

/// A record of an earlier schema is compared on the columns both have, and the missing
/// columns are named: never called identical.
#[test]
fn an_older_schema_is_compared_on_shared_columns_and_named() {
    let a: Vec<Sample> = (0..2).map(|i| row(i, 40)).collect();
    let e = sample_equality((&a, 10), (&a, crate::SCHEMA_VERSION)).unwrap();
    assert!(e.differences.is_empty());
    assert_eq!(
        e.only_replayed,
        [
            "parallel_latency_ns",
            "guest_mem_present",
            "guest_mem_managed"
        ]
    );
    assert!(!e.identical());
    let t = ReplayVerdict::Virtual(e).render_text();
    assert!(
        t.contains(
            "only the replay's schema has: parallel_latency_ns, guest_mem_present, \
             guest_mem_managed"
        ),
        "{t}"
    );
}

/// Untrusted cells never put a control sequence on the terminal.
#[test]
fn untrusted_cells_are_escaped_in_the_text() {
    let a = vec![row(0, 40)];
    let mut b = a.clone();
    b[0].error_detail = "\u{1b}[2Jboom".into();
    let e = sample_equality((&a, crate::SCHEMA_VERSION), (&b, crate::SCHEMA_VERSION)).unwrap();
    let t = ReplayVerdict::Virtual(e).render_text();
    assert!(!t.contains('\u{1b}'), "{t:?}");
}

/// Only valid verdicts are judged.
#[test]
fn an_invalid_side_is_not_judged() {
    let v = Verdict::default();
    let e = judge(&v, &v, &CompareOptions::default()).unwrap_err();
    assert!(
        matches!(e, ReplayJudgeError::Invalid { side: "record" }),
        "{e}"
    );
}
