use super::recorded::{replay_words, ReplayPaths};
use std::path::Path;
use truecold_proof::cmdline::parse_cmdline_txt;
use truecold_proof::schema::HostKind;
use truecold_proto::kinds::Engine;

/// A `cmdline.txt` whose explicit line is `line`.
fn recorded(line: &str) -> truecold_proof::cmdline::Recorded {
    let txt = format!(
        "# Linux boot\n# truecold invocation, as typed\n{line}\n\
         # truecold run, every argument explicit (defaults filled in, paths resolved)\n{line}\n\
         # VMM command, one fresh process per sample\n\
         /bin/truecold-vmm boot --kernel /guest/vmlinux --vcpus 1 --mem-mib 256 --backing thp\n"
    );
    parse_cmdline_txt(txt.as_bytes()).unwrap()
}

fn paths() -> ReplayPaths<'static> {
    ReplayPaths {
        out: Path::new("/r/out"),
        vmm: None,
        guest_dir: None,
    }
}

/// A nested record's inner line (L1's paths, `--linux`) becomes the same campaign in the
/// nested harness, under L1's recorded seed, with the replay's paths: nothing of the
/// recorded paths survives.
#[test]
fn a_nested_record_replays_nested_under_its_seed_and_the_replays_paths() {
    let r = recorded(
        "truecold run --linux --mode sequential --count 3 --vcpus 1 --mem-mib 256 --backing \
         thp --ram-layout hole-inside --deadline-ms 300000 --kill-grace-ms 500 \
         --cmdline-extra '' --stop-after 10 --vmm /bin/truecold-vmm --guest-dir /guest \
         --out /out/bundle",
    );
    let w = replay_words(
        &r,
        HostKind::NestedEmulated,
        Some(0x2a),
        None,
        ReplayPaths {
            out: Path::new("/r/out"),
            vmm: Some(Path::new("/x/truecold-vmm")),
            guest_dir: Some(Path::new("/x/guest")),
        },
    )
    .unwrap();
    let line = w.join(" ");
    assert!(
        line.starts_with("--nested --mode sequential --count 3"),
        "{line}"
    );
    assert!(line.contains("--cmdline-extra  --stop-after 10"), "{line}");
    assert!(
        line.ends_with(
            "--seed 0x000000000000002a --out /r/out --vmm /x/truecold-vmm --guest-dir /x/guest"
        ),
        "{line}"
    );
    for gone in ["/bin/truecold-vmm", "/guest ", "/out/bundle", "--linux"] {
        assert!(!line.contains(gone), "{gone}: {line}");
    }
    // The words parse as `truecold run`'s, into the same campaign.
    let argv = ["truecold", "run"]
        .into_iter()
        .map(String::from)
        .chain(w.iter().cloned());
    let a = crate::cli::Cli::try_parse_run(argv).unwrap();
    let p = crate::plan::campaign_plan::CampaignPlan::from_cli(&a).unwrap();
    assert!(p.nested());
    assert_eq!(p.seed, 0x2a);
    assert_eq!(p.planned().unwrap(), 3);
    assert_eq!(p.out.as_deref(), Some(Path::new("/r/out")));
}

/// A record's own kernel sources and peer binaries are dropped (the replay's inputs are held
/// to the record's digests instead); a reliability fault and the arms' own kernels are
/// refused.
#[test]
fn path_flags_are_dropped_and_faults_refused() {
    let r = recorded(
        "truecold run --linux --count 2 --vcpus 1 --mem-mib 256 --backing thp --deadline-ms 9 \
         --kernel-config /etc/shadow --kernel-source /root --out /etc",
    );
    let line = replay_words(&r, HostKind::Hardware, None, None, paths())
        .unwrap()
        .join(" ");
    assert_eq!(
        line,
        "--linux --count 2 --vcpus 1 --mem-mib 256 --backing thp --deadline-ms 9 --out /r/out"
    );
    for bad in [
        "--inject-tap-name eth0",
        "--arm-guest-dir firecracker=/x",
        "--arm-kernel-config firecracker=/x",
    ] {
        let r = recorded(&format!(
            "truecold run --linux --count 2 --vcpus 1 --mem-mib 256 --backing thp --deadline-ms 9 {bad}"
        ));
        let e = replay_words(&r, HostKind::Hardware, None, None, paths()).unwrap_err();
        assert!(e.contains("a replay does not run"), "{bad}: {e}");
    }
}

/// One arm of an engines campaign replays as that engine alone, its own backing kept.
#[test]
fn an_engines_arm_replays_its_engine_alone() {
    let r = recorded(
        "truecold run --linux --count 2 --vcpus 1 --mem-mib 256 --backing anon --deadline-ms 9 \
         --engines truecold,firecracker --arm-backing truecold=thp --arm-backing \
         firecracker=hugetlb --seed 0x1 --firecracker /bin/firecracker",
    );
    let line = replay_words(
        &r,
        HostKind::Hardware,
        None,
        Some(Engine::Truecold),
        paths(),
    )
    .unwrap()
    .join(" ");
    assert!(line.contains("--arm-backing truecold=thp"), "{line}");
    assert!(!line.contains("firecracker"), "{line}");
    assert!(line.ends_with("--engine truecold --out /r/out"), "{line}");
}

/// A nested record without L1's seed is not replayed.
#[test]
fn a_nested_record_needs_its_seed() {
    let r = recorded("truecold run --linux --count 2 --vcpus 1 --mem-mib 256 --backing thp");
    assert!(replay_words(&r, HostKind::NestedEmulated, None, None, paths()).is_err());
}

/// The committed replay fixture (the one `results/*-replay-fixture-nested-*`).
fn fixture() -> std::path::PathBuf {
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results");
    std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains("-replay-fixture-nested-"))
        })
        .expect("a replay fixture under results/")
}

/// A copy of the fixture in `dir`, with `edit` applied to its `cmdline.txt` and its
/// SHA256SUMS made anew (so only the replay's own checks can refuse it).
fn forged(dir: &Path, edit: impl Fn(&str) -> String) -> std::path::PathBuf {
    let src = fixture();
    let dst = dir.join("forged");
    std::fs::create_dir(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
    let c = std::fs::read_to_string(dst.join("cmdline.txt")).unwrap();
    std::fs::write(dst.join("cmdline.txt"), edit(&c)).unwrap();
    let mut entries = Vec::new();
    for e in std::fs::read_dir(&dst).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if name != "SHA256SUMS" {
            let b = std::fs::read(e.path()).unwrap();
            entries.push((name, truecold_proof::digest::sha256_hex(&b)));
        }
    }
    std::fs::write(
        dst.join("SHA256SUMS"),
        truecold_proof::sums::format_sums(&entries),
    )
    .unwrap();
    dst
}

fn plan(dir: &Path, arm: Option<&str>) -> crate::plan::replay_plan::ReplayPlan {
    crate::plan::replay_plan::ReplayPlan {
        dir: dir.to_path_buf(),
        arm: arm.map(String::from),
        out: Some(dir.join("out")),
        vmm: None,
        guest_dir: None,
        check: true,
        json: false,
    }
}

/// A hostile record: a run line that plans more launches than its verified contract (the
/// verifier does not compare the count: the rows are checked against the contract) is
/// refused before anything is checked or run.
#[test]
fn a_line_planning_more_than_its_contract_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let d = forged(t.path(), |c| c.replace("--count 3 ", "--count 1000000 "));
    assert!(truecold_proof::verify::verify_dir(&d).is_valid());
    let e = super::replay_run::replay(&plan(&d, None), "test").unwrap_err();
    assert!(
        e.to_string()
            .contains("its line plans 1000000 launches and its contract 3"),
        "{e}"
    );
}

/// A record that does not verify is never read for a replay; nor is a path outside the
/// directory (a link, `..`), and a directory of arms needs `--arm`.
#[test]
fn an_unverified_record_or_a_path_out_of_the_directory_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let d = forged(t.path(), |c| c.to_string());
    std::fs::write(d.join("samples.csv"), b"index\n").unwrap();
    let e = super::replay_run::replay(&plan(&d, None), "test").unwrap_err();
    assert!(e.to_string().contains("does not verify"), "{e}");
    let e = super::recorded::load(&d, Some("x")).unwrap_err();
    assert!(e.to_string().contains("is a bundle"), "{e}");
    // A multi-arm directory: its bundles are listed; a link or a missing arm is refused.
    let arms = t.path().join("arms");
    std::fs::create_dir(&arms).unwrap();
    std::fs::write(arms.join("arms.json"), b"{}").unwrap();
    std::os::unix::fs::symlink(fixture(), arms.join("link")).unwrap();
    let e = super::recorded::load(&arms, None).unwrap_err();
    assert!(
        e.to_string()
            .contains("name the bundle to replay with --arm"),
        "{e}"
    );
    let e = super::recorded::load(&arms, Some("link")).unwrap_err();
    assert!(e.to_string().contains("holds no bundle there"), "{e}");
    let a = crate::cli::ReplayArgs {
        dir: arms.clone(),
        arm: Some("../x".into()),
        out: None,
        vmm: None,
        guest_dir: None,
        check: true,
        json: false,
        quiet: false,
    };
    assert!(crate::plan::replay_plan::ReplayPlan::from_cli(&a).is_err());
}
