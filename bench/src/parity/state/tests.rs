use super::*;
use crate::parity::lifecycle::{check_lifecycle, read_csv, OUTCOME_OK};
use truecold_proof::digest::sha256_hex;

fn db() -> (tempfile::TempDir, StateDb) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = StateDb::open(&dir.path().join("state.sqlite")).expect("open");
    (dir, db)
}

#[test]
fn wal_and_full_are_read_back_and_survive_a_reopen() {
    let (dir, db) = db();
    assert_eq!(
        db.pragmas().expect("pragmas"),
        Pragmas {
            journal_mode: "wal".into(),
            synchronous: SYNCHRONOUS_FULL
        }
    );
    drop(db);
    // journal_mode=WAL is persistent in the file; a fresh connection reads it back, and
    // open() sets synchronous again (it is per connection).
    let db = StateDb::open(&dir.path().join("state.sqlite")).expect("reopen");
    assert_eq!(db.pragmas().expect("pragmas").journal_mode, "wal");
    assert_eq!(db.pragmas().expect("pragmas").synchronous, SYNCHRONOUS_FULL);
    // A plain connection to the same file sees WAL too (it is the file's mode).
    let c = Connection::open(dir.path().join("state.sqlite")).expect("plain");
    let jm: String = c
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .expect("jm");
    assert_eq!(jm, "wal");
}

#[test]
fn legal_transitions_commit_with_stamps_and_timings() {
    let (_dir, mut db) = db();
    let c = db.created(0, "a", "tc0", "/r/0.img").expect("created");
    assert_eq!((c.from, c.to), (None, LaunchState::Created));
    let r = db.running(0).expect("running");
    assert_eq!(
        (r.from, r.to),
        (Some(LaunchState::Created), LaunchState::Running)
    );
    let d = db.destroyed(0, OUTCOME_OK).expect("destroyed");
    assert_eq!(
        (d.from, d.to),
        (Some(LaunchState::Running), LaunchState::Destroyed)
    );
    for t in [c, r, d] {
        assert!(t.at_ns <= t.committed_at_ns);
        assert!(t.commit_ns > 0 && t.commit_ns <= t.total_ns, "{t:?}");
    }
    assert!(c.committed_at_ns <= r.at_ns && r.committed_at_ns <= d.at_ns);
    // A launch that failed before running: CREATED → DESTROYED.
    db.created(1, "b", "tc1", "/r/1.img").expect("created");
    db.destroyed(1, "spawn_failed").expect("destroyed");
    let rows = db.rows().expect("rows");
    assert_eq!(rows.len(), 2);
    assert_eq!(
        rows[0],
        LaunchRow {
            idx: 0,
            launch_id: "a".into(),
            state: LaunchState::Destroyed,
            created_ns: Some(c.at_ns),
            running_ns: Some(r.at_ns),
            destroyed_ns: Some(d.at_ns),
            tap: "tc0".into(),
            image: "/r/0.img".into(),
            outcome: Some("ok".into()),
        }
    );
    assert_eq!(rows[1].running_ns, None);
    assert_eq!(rows[1].outcome.as_deref(), Some("spawn_failed"));
    assert_eq!(check_lifecycle(&rows, 2), vec![]);
}

#[test]
fn illegal_transitions_are_refused_typed_and_change_nothing() {
    let (_dir, mut db) = db();
    let illegal = |r: Result<Transition, StateError>, from, to| match r {
        Err(StateError::Illegal { from: f, to: t, .. }) => {
            assert_eq!((f, t), (from, to));
        }
        other => panic!("expected Illegal {from:?} → {to:?}, got {other:?}"),
    };
    // No row yet.
    illegal(db.running(0), None, LaunchState::Running);
    illegal(db.destroyed(0, "ok"), None, LaunchState::Destroyed);
    db.created(0, "a", "t", "i").expect("created");
    illegal(
        db.created(0, "z", "t", "i"),
        Some(LaunchState::Created),
        LaunchState::Created,
    );
    db.running(0).expect("running");
    illegal(
        db.running(0),
        Some(LaunchState::Running),
        LaunchState::Running,
    );
    illegal(
        db.created(0, "z", "t", "i"),
        Some(LaunchState::Running),
        LaunchState::Created,
    );
    db.destroyed(0, "ok").expect("destroyed");
    illegal(
        db.destroyed(0, "ok"),
        Some(LaunchState::Destroyed),
        LaunchState::Destroyed,
    );
    illegal(
        db.running(0),
        Some(LaunchState::Destroyed),
        LaunchState::Running,
    );
    // A second launch may not reuse the id.
    match db.created(1, "a", "t", "i") {
        Err(StateError::DuplicateLaunchId {
            idx: 1, other: 0, ..
        }) => {}
        other => panic!("expected DuplicateLaunchId, got {other:?}"),
    }
    // An outcome that is not a kind.
    db.created(2, "c", "t", "i").expect("created");
    assert!(matches!(
        db.destroyed(2, "Not OK"),
        Err(StateError::BadOutcome { idx: 2, .. })
    ));
    assert!(matches!(
        db.destroyed(2, ""),
        Err(StateError::BadOutcome { .. })
    ));
    // Nothing of the refusals was written.
    let rows = db.rows().expect("rows");
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0].launch_id, "a");
    assert_eq!(rows[0].state, LaunchState::Destroyed);
    assert_eq!(rows[1].state, LaunchState::Created);
    assert_eq!(rows[1].destroyed_ns, None);
    // The refusal names the launch and both states.
    let e = db.running(7).expect_err("illegal");
    assert_eq!(
        e.to_string(),
        "launch 7: (no row) → RUNNING is not a legal lifecycle transition"
    );
}

#[test]
fn the_check_constraint_refuses_a_foreign_state() {
    let (dir, mut db) = db();
    db.created(0, "a", "t", "i").expect("created");
    let c = Connection::open(dir.path().join("state.sqlite")).expect("plain");
    let r = c.execute("UPDATE launches SET state = 'LOST' WHERE idx = 0", []);
    assert!(r.is_err(), "CHECK(state IN …) must refuse LOST");
    // A row written behind the library's back with a bad stamp reads as Corrupt.
    c.execute("UPDATE launches SET created_ns = -5 WHERE idx = 0", [])
        .expect("update");
    assert!(matches!(
        db.rows(),
        Err(StateError::Corrupt {
            what: "created_ns",
            ..
        })
    ));
}

#[test]
fn export_writes_state_csv_with_a_stable_digest_that_moves_with_a_row() {
    let (dir, mut db) = db();
    for i in 0..3u64 {
        db.created(i, &format!("l{i}"), &format!("tc{i}"), "img")
            .expect("created");
        db.running(i).expect("running");
        db.destroyed(i, "ok").expect("destroyed");
    }
    let out = dir.path().join("bundle");
    std::fs::create_dir(&out).expect("mkdir");
    let e1 = db.export(&out).expect("export");
    assert_eq!(e1.path, out.join("state.csv"));
    let bytes = std::fs::read(&e1.path).expect("read");
    assert_eq!(sha256_hex(&bytes), e1.sha256);
    assert_eq!(read_csv(&bytes).expect("parse"), e1.rows);
    assert_eq!(check_lifecycle(&e1.rows, 3), vec![]);
    assert!(!out.join("state.csv.tmp").exists());
    let e2 = db.export(&out).expect("export again");
    assert_eq!(e2.sha256, e1.sha256, "same rows, same digest");
    db.created(3, "l3", "tc3", "img").expect("created");
    let e3 = db.export(&out).expect("export with a row more");
    assert_ne!(e3.sha256, e1.sha256);
    // And the verifier's rule sees the unfinished launch.
    assert!(!check_lifecycle(&e3.rows, 4).is_empty());
}

#[test]
fn transition_commit_cost_is_visible() {
    // Not a benchmark: prints what a committed transition costs here (WAL + FULL: one
    // fsync of the WAL per commit). `-- --nocapture` shows it.
    let (_dir, mut db) = db();
    let mut by = [Vec::new(), Vec::new(), Vec::new()];
    for i in 0..20u64 {
        let c = db.created(i, &format!("l{i}"), "t", "i").expect("c");
        let r = db.running(i).expect("r");
        let d = db.destroyed(i, "ok").expect("d");
        for (k, t) in [c, r, d].into_iter().enumerate() {
            by[k].push((t.commit_ns, t.total_ns));
        }
    }
    for (name, v) in ["created", "running", "destroyed"]
        .iter()
        .zip(by.iter_mut())
    {
        v.sort_unstable();
        let mut tot: Vec<u64> = v.iter().map(|x| x.1).collect();
        tot.sort_unstable();
        eprintln!(
            "state: {name}: {} commits, COMMIT median {} µs (min {}, max {}), whole \
             transition median {} µs",
            v.len(),
            v[v.len() / 2].0 / 1000,
            v[0].0 / 1000,
            v[v.len() - 1].0 / 1000,
            tot[tot.len() / 2] / 1000
        );
        assert!(v[v.len() / 2].0 > 0);
    }
}
