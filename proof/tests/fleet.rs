//! A fleet directory (`fleet.json`): verified whole — its plan, its tree's sums, every shard
//! by its own kind's verifier, each shard against the plan and each task record against the
//! plan it ran under — and tampered with: a missing shard, a shard of another plan, a task
//! record of another plan, a stray directory.

mod common;

use common::Fixture;
use std::path::{Path, PathBuf};
use truecold_proof::fleet::*;
use truecold_proof::schema::{Clock, HostKind};
use truecold_proof::verify::{verify_dir, Check};

/// A campaign's fleet of `n` launches a shard in `shards` shards, written and gathered.
fn fleet(root: &Path, shards: u64, n: u64, host: HostKind) -> (PathBuf, FleetPlan) {
    let dir = root.join("fleet");
    std::fs::create_dir_all(dir.join(SHARDS_DIR)).unwrap();
    std::fs::create_dir_all(dir.join(TASKS_DIR)).unwrap();
    std::fs::create_dir_all(dir.join(LOGS_DIR)).unwrap();
    let seed = 7;
    let plan = FleetPlan {
        schema: FLEET_SCHEMA,
        kind: FleetKind::Campaign,
        command: vec!["run".into(), "-n".into(), (n * shards).to_string()],
        seed,
        clock: host.clock(),
        partition: "fleet".into(),
        exclusive: host.clock() == Clock::Wall,
        task_mem_mib: 2048,
        shards: (0..shards)
            .map(|i| ShardPlan {
                name: shard_name(i, None),
                args: vec!["run".into()],
                seed: shard_seed(seed, i),
                launches: Some([i * n, (i + 1) * n]),
                knob: None,
                ..Default::default()
            })
            .collect(),
        bisect: None,
    };
    let bytes = plan_bytes(&plan);
    std::fs::write(dir.join(truecold_proof::names::FLEET_FILE), &bytes).unwrap();
    let digest = truecold_proof::digest::sha256_hex(&bytes);
    for s in &plan.shards {
        let f = Fixture {
            fail_every: None,
            host,
            ..Fixture::linux(n)
        };
        f.write(&dir.join(SHARDS_DIR), &s.name);
        let t = TaskRecord {
            shard: s.name.clone(),
            plan_sha256: digest.clone(),
            job_id: Some("12".into()),
            array_job_id: Some("11".into()),
            array_task_id: Some(0),
            node: "node-a".into(),
            started_unix_s: 100,
            ended_unix_s: 160,
        };
        std::fs::write(
            dir.join(TASKS_DIR).join(format!("{}.json", s.name)),
            task_bytes(&t),
        )
        .unwrap();
        std::fs::write(
            dir.join(LOGS_DIR).join(format!("{}.12.out", s.name)),
            b"ok\n",
        )
        .unwrap();
    }
    let v = write_fleet(&dir).unwrap();
    assert!(v.is_valid(), "{}", v.render(&dir, 20));
    (dir, plan)
}

fn has(v: &truecold_proof::Verdict, c: Check, text: &str) -> bool {
    v.reasons
        .iter()
        .any(|r| r.check == c && r.detail.contains(text))
}

fn resum(dir: &Path) {
    std::fs::remove_file(dir.join("SHA256SUMS")).unwrap();
    truecold_proof::fleet::write_fleet(dir).unwrap();
}

#[test]
fn a_gathered_fleet_verifies_and_its_kind_is_known() {
    let t = tempfile::tempdir().unwrap();
    let (dir, plan) = fleet(t.path(), 2, 4, HostKind::Hardware);
    let v = verify_dir(&dir);
    assert!(v.is_valid(), "{}", v.render(&dir, 20));
    assert_eq!(v.rows, Some(8));
    assert!(
        v.label.as_deref().unwrap().contains("fleet"),
        "{:?}",
        v.label
    );
    assert_eq!(
        truecold_proof::kind::Kind::of(&dir),
        truecold_proof::kind::Kind::Fleet
    );
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(readme.contains("| `shards/001` | 4..8 |"), "{readme}");
    assert!(readme.contains("node-a"), "{readme}");
    assert!(plan_problems(&plan).is_empty());
}

#[test]
fn a_missing_shard_or_a_stray_one_is_a_reason() {
    let t = tempfile::tempdir().unwrap();
    let (dir, _) = fleet(t.path(), 2, 3, HostKind::Hardware);
    std::fs::rename(dir.join("shards/001"), dir.join("shards/009")).unwrap();
    resum(&dir);
    let v = verify_dir(&dir);
    assert!(
        has(&v, Check::FleetShard, "shard `001` is missing"),
        "{}",
        v.render(&dir, 20)
    );
    assert!(
        has(&v, Check::FleetShard, "`shards/009` is no shard"),
        "{}",
        v.render(&dir, 20)
    );
}

/// A shard directory that belongs to another plan: more launches than its range.
#[test]
fn a_shard_of_another_plan_is_a_reason() {
    let t = tempfile::tempdir().unwrap();
    let (dir, _) = fleet(t.path(), 2, 3, HostKind::Hardware);
    std::fs::remove_dir_all(dir.join("shards/001")).unwrap();
    Fixture {
        fail_every: None,
        ..Fixture::linux(5)
    }
    .write(&dir.join("shards"), "001");
    resum(&dir);
    let v = verify_dir(&dir);
    assert!(
        has(
            &v,
            Check::FleetShard,
            "shard `001` planned 5 launches, the plan gives it 3"
        ),
        "{}",
        v.render(&dir, 20)
    );
}

#[test]
fn a_task_record_of_another_plan_is_a_reason() {
    let t = tempfile::tempdir().unwrap();
    let (dir, _) = fleet(t.path(), 2, 3, HostKind::Hardware);
    let p = dir.join("tasks/000.json");
    let mut rec: TaskRecord = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    rec.plan_sha256 = "0".repeat(64);
    std::fs::write(&p, task_bytes(&rec)).unwrap();
    resum(&dir);
    let v = verify_dir(&dir);
    assert!(
        has(&v, Check::FleetTask, "ran under another plan"),
        "{}",
        v.render(&dir, 20)
    );
}

/// A nested shard's L1 seed is the plan's for it.
#[test]
fn a_nested_shard_is_held_to_its_seed() {
    let t = tempfile::tempdir().unwrap();
    // The fixture's nested bundles record L1 seed 7, the plan's seed for shard 0 only.
    let (dir, _) = fleet(t.path(), 1, 3, HostKind::NestedEmulated);
    assert!(verify_dir(&dir).is_valid());
    let t2 = tempfile::tempdir().unwrap();
    let dir2 = t2.path().join("x");
    std::fs::create_dir_all(&dir2).unwrap();
    let (d2, mut plan) = fleet(&dir2, 1, 3, HostKind::NestedEmulated);
    plan.seed = 8;
    plan.shards[0].seed = shard_seed(8, 0);
    std::fs::write(d2.join("fleet.json"), plan_bytes(&plan)).unwrap();
    resum(&d2);
    let v = verify_dir(&d2);
    assert!(
        has(
            &v,
            Check::FleetShard,
            "ran under L1 seed 0x0000000000000007"
        ),
        "{}",
        v.render(&d2, 20)
    );
}

#[test]
fn shard_seeds_keep_the_first_and_differ_for_the_rest() {
    assert_eq!(shard_seed(42, 0), 42);
    let s: std::collections::BTreeSet<u64> = (0..64).map(|i| shard_seed(42, i)).collect();
    assert_eq!(s.len(), 64);
    assert_ne!(shard_seed(42, 1), shard_seed(43, 1));
}

#[test]
fn plan_problems_name_a_gap_a_repeat_and_a_wrong_seed() {
    let t = tempfile::tempdir().unwrap();
    let (_, mut plan) = fleet(t.path(), 2, 3, HostKind::Hardware);
    plan.shards[1].launches = Some([4, 6]);
    plan.shards[1].seed = 1;
    let p = plan_problems(&plan).join("; ");
    assert!(p.contains("not the next range of launches from 3"), "{p}");
    assert!(p.contains("is not the plan's shard seed"), "{p}");
    plan.shards[1].name = "000".into();
    assert!(plan_problems(&plan)
        .join(" ")
        .contains("invalid or repeated"));
}

/// The merge rule on a campaign: a shard whose rows are the unsharded run's launches is
/// identical; another is listed by its differences.
#[test]
fn the_merge_rule_says_which_shard_is_the_long_campaigns_launches() {
    let t = tempfile::tempdir().unwrap();
    let (dir, _) = fleet(t.path(), 2, 3, HostKind::Hardware);
    let (_, verified) = verify_fleet(&dir, &Default::default());
    // The unsharded run: shard 000's rows, then shard 001's, renumbered: on a wall clock the
    // rule is compare's; make it the virtual clock's by hand below.
    let mut rows = verified.shards[0].verdict.samples.clone().unwrap();
    let mut second = verified.shards[1].verdict.samples.clone().unwrap();
    for (i, s) in second.iter_mut().enumerate() {
        s.index = 3 + i as u64;
    }
    second[1].latency_ns = second[1].latency_ns.map(|l| l + 5);
    second[1].ready_ns = second[1].ready_ns.map(|l| l + 5);
    rows.extend(second);
    let mut un = verified.shards[0].verdict.clone();
    un.samples = Some(rows);
    let mut vf = verified;
    vf.plan.as_mut().unwrap().clock = Clock::Virtual;
    let m = campaign_merge(&vf, &un).unwrap();
    assert!(m.campaign[0].identical(), "{m:?}");
    assert!(!m.campaign[1].identical());
    assert_eq!(m.campaign[1].latency_delta_ns[1], Some(-5));
    let text = m.render_text();
    assert!(
        text.contains("shard 000 (launches 0..3): IDENTICAL"),
        "{text}"
    );
    assert!(
        text.contains(
            "shard 001 (launches 3..6): DIFFERS in 1 of 3 launches (latency Δ -5 … +0 ns"
        ),
        "{text}"
    );
}
