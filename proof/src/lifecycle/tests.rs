use super::*;
use crate::digest::sha256_hex;

fn ran(idx: u64) -> LaunchRow {
    LaunchRow {
        idx,
        launch_id: format!("l{idx}"),
        state: LaunchState::Destroyed,
        created_ns: Some(1000 + idx * 100),
        running_ns: Some(1010 + idx * 100),
        destroyed_ns: Some(1050 + idx * 100),
        tap: format!("tc{idx}"),
        image: format!("/run/tc/{idx}.img"),
        outcome: Some(OUTCOME_OK.into()),
    }
}

fn whole(n: u64) -> Vec<LaunchRow> {
    (0..n).map(ran).collect()
}

#[test]
fn legal_transitions_are_exactly_the_lifecycle() {
    use LaunchState::*;
    let all = [None, Some(Created), Some(Running), Some(Destroyed)];
    let legal: Vec<_> = all
        .iter()
        .flat_map(|&f| [Created, Running, Destroyed].map(move |t| (f, t)))
        .filter(|&(f, t)| LaunchState::legal(f, t))
        .collect();
    assert_eq!(
        legal,
        vec![
            (None, Created),
            (Some(Created), Running),
            (Some(Created), Destroyed),
            (Some(Running), Destroyed)
        ]
    );
    for s in [Created, Running, Destroyed] {
        assert_eq!(LaunchState::parse(s.as_str()), Some(s));
    }
    assert_eq!(LaunchState::parse("created"), None);
}

#[test]
fn a_whole_lifecycle_has_no_finding_and_failed_before_running_is_legal() {
    let mut rows = whole(4);
    assert_eq!(check_lifecycle(&rows, 4), vec![]);
    // Launch 2 failed before its VMM was spawned: CREATED → DESTROYED with a failure.
    rows[2].running_ns = None;
    rows[2].outcome = Some("workspace_clone".into());
    assert_eq!(check_lifecycle(&rows, 4), vec![]);
    // Rows in any order.
    rows.reverse();
    assert_eq!(check_lifecycle(&rows, 4), vec![]);
    // Equal stamps are not reversed (non-decreasing).
    let mut r = ran(0);
    r.running_ns = r.created_ns;
    r.destroyed_ns = r.created_ns;
    assert_eq!(check_lifecycle(&[r], 1), vec![]);
}

#[test]
fn a_missing_row_an_extra_row_and_a_duplicate_are_found() {
    let mut rows = whole(4);
    rows.remove(1);
    assert_eq!(
        check_lifecycle(&rows, 4),
        vec![LifecycleFinding::Missing { idx: 1 }]
    );
    let rows = whole(4);
    assert_eq!(
        check_lifecycle(&rows, 3),
        vec![LifecycleFinding::Unexpected {
            idx: 3,
            n_launches: 3
        }]
    );
    let mut rows = whole(2);
    let mut dup = ran(1);
    dup.launch_id = "other".into();
    rows.push(dup);
    assert_eq!(
        check_lifecycle(&rows, 2),
        vec![LifecycleFinding::Duplicate { idx: 1, count: 2 }]
    );
    let mut rows = whole(2);
    rows[1].launch_id = "l0".into();
    assert_eq!(
        check_lifecycle(&rows, 2),
        vec![LifecycleFinding::DuplicateLaunchId {
            launch_id: "l0".into(),
            first: 0,
            second: 1
        }]
    );
}

#[test]
fn a_skipped_running_on_success_and_an_unfinished_launch_are_found() {
    let mut rows = whole(2);
    rows[1].running_ns = None;
    assert_eq!(
        check_lifecycle(&rows, 2),
        vec![LifecycleFinding::SkippedRunning { idx: 1 }]
    );
    let mut rows = whole(2);
    rows[0].state = LaunchState::Running;
    rows[0].destroyed_ns = None;
    rows[0].outcome = None;
    assert_eq!(
        check_lifecycle(&rows, 2),
        vec![
            LifecycleFinding::NotDestroyed {
                idx: 0,
                state: LaunchState::Running
            },
            LifecycleFinding::MissingStamp {
                idx: 0,
                stamp: "destroyed_ns"
            }
        ]
    );
    let mut rows = whole(1);
    rows[0].outcome = None;
    assert_eq!(
        check_lifecycle(&rows, 1),
        vec![LifecycleFinding::NoOutcome { idx: 0 }]
    );
    rows[0].outcome = Some("Bad Kind".into());
    assert_eq!(
        check_lifecycle(&rows, 1),
        vec![LifecycleFinding::BadOutcome {
            idx: 0,
            outcome: "Bad Kind".into()
        }]
    );
    rows[0].outcome = Some("ok".into());
    rows[0].launch_id.clear();
    assert_eq!(
        check_lifecycle(&rows, 1),
        vec![LifecycleFinding::EmptyLaunchId { idx: 0 }]
    );
}

#[test]
fn reversed_timestamps_are_found() {
    let mut r = ran(0);
    r.running_ns = Some(900); // before created (1000)
    assert_eq!(
        check_lifecycle(&[r], 1),
        vec![LifecycleFinding::Reversed {
            idx: 0,
            earlier: "created_ns",
            earlier_ns: 1000,
            later: "running_ns",
            later_ns: 900
        }]
    );
    let mut r = ran(0);
    r.destroyed_ns = Some(1005); // after created, before running (1010)
    assert_eq!(
        check_lifecycle(&[r], 1),
        vec![LifecycleFinding::Reversed {
            idx: 0,
            earlier: "running_ns",
            earlier_ns: 1010,
            later: "destroyed_ns",
            later_ns: 1005
        }]
    );
    // Without RUNNING, destroyed is judged against created.
    let mut r = ran(0);
    r.running_ns = None;
    r.outcome = Some("spawn_failed".into());
    r.destroyed_ns = Some(999);
    assert_eq!(
        check_lifecycle(&[r], 1),
        vec![LifecycleFinding::Reversed {
            idx: 0,
            earlier: "created_ns",
            earlier_ns: 1000,
            later: "destroyed_ns",
            later_ns: 999
        }]
    );
}

#[test]
fn csv_is_canonical_round_trips_and_its_digest_moves_with_a_row() {
    let rows = whole(3);
    let a = csv_bytes(&rows).expect("csv");
    let mut shuffled = rows.clone();
    shuffled.swap(0, 2);
    assert_eq!(csv_bytes(&shuffled).expect("csv"), a, "ordered by idx");
    let text = std::str::from_utf8(&a).expect("utf8");
    assert!(text.starts_with(
        "idx,launch_id,state,created_ns,running_ns,destroyed_ns,tap,image,outcome\n0,l0,DESTROYED,1000,1010,1050,tc0,/run/tc/0.img,ok\n"
    ), "{text}");
    assert!(!text.contains('\r'));
    assert_eq!(read_csv(&a).expect("read"), rows);
    let d = sha256_hex(&a);
    assert_eq!(d.len(), 64);
    assert_eq!(sha256_hex(&csv_bytes(&rows).expect("csv")), d, "stable");
    let mut changed = rows.clone();
    changed[1].destroyed_ns = Some(1151);
    assert_ne!(sha256_hex(&csv_bytes(&changed).expect("csv")), d);
    let mut unset = rows.clone();
    unset[2].running_ns = None;
    let b = csv_bytes(&unset).expect("csv");
    assert!(std::str::from_utf8(&b)
        .expect("utf8")
        .contains("2,l2,DESTROYED,1200,,1250,"));
    assert_eq!(read_csv(&b).expect("read"), unset);
    // A field that needs quoting survives.
    let mut odd = whole(1);
    odd[0].image = "/a dir/with,comma\"quote.img".into();
    assert_eq!(read_csv(&csv_bytes(&odd).expect("csv")).expect("read"), odd);
}

#[test]
fn read_csv_refuses_a_foreign_header_and_bad_fields() {
    assert!(matches!(
        read_csv(b"idx,state\n0,CREATED\n"),
        Err(CsvError::Header(_))
    ));
    let head = HEADER.join(",");
    for bad in [
        "x,l0,DESTROYED,1,2,3,t,i,ok",
        "0,l0,GONE,1,2,3,t,i,ok",
        "0,l0,DESTROYED,-1,2,3,t,i,ok",
        ",l0,DESTROYED,1,2,3,t,i,ok",
    ] {
        let r = read_csv(format!("{head}\n{bad}\n").as_bytes());
        assert!(matches!(r, Err(CsvError::Read(_))), "{bad}: {r:?}");
    }
    let r = read_csv(format!("{head}\n0,l0\n").as_bytes());
    assert!(matches!(r, Err(CsvError::Read(_))), "{r:?}");
}

#[test]
fn the_required_journal_is_wal_and_full_as_spelled() {
    assert_eq!(journal("wal", 2), JOURNAL);
    assert_ne!(journal("delete", 2), JOURNAL);
}
