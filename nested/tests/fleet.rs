//! `truecold replay` and `truecold fleet` end to end in the nested harness (virtual clock):
//! the committed replay fixture replays to identical samples, and a campaign and a tune's
//! screen (a Kconfig knob's kernel built by a shard of its own) fan out over a single-node
//! Slurm cluster on this machine (scripts/slurm-local.sh),
//! with a task cancelled on purpose and resubmitted, a task killed for memory, the cluster
//! errors and a foreign shard typed, and a bisect wave over the bisect fixture tree names the
//! regression (docs/fleet.md).
//!
//! Prerequisites (the test fails, naming the command, when one is missing):
//! `scripts/build-artifacts.sh` — out/guest, out/l1 and the static binaries; Slurm and munge
//! (`scripts/slurm-local.sh` installs Debian's `slurm-wlm` and `munge` when missing, as root).
//! The fixture records the digests of the inputs it was made on: a change to the VMM, the
//! guest or the L1 kernel makes its replay refuse them, each named, and this test fail — make
//! a new fixture then (docs/fleet.md, "The replay fixture").

#[path = "../../bench/tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use truecold_nested::Layout;

/// The committed bundle the replay test replays, the one directory of `results/` named
/// `*-replay-fixture-nested-*`: `truecold run --nested -n 3 --vcpus 1 --mem-mib 256 --seed
/// 0x7265706c6179`, made by scripts/replay-fixture.sh (docs/fleet.md).
fn fixture() -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(root().join("results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains("-replay-fixture-nested-"))
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one replay fixture under results/: {found:?}"
    );
    found.into_iter().next().unwrap()
}
/// The campaign the fleet fans out (the fixture's): run once unsharded beside the fleet, it
/// is what the merge rule holds the shards to.
const CAMPAIGN: &[&str] = &[
    "run",
    "--nested",
    "-n",
    "3",
    "--vcpus",
    "1",
    "--mem-mib",
    "256",
    "--seed",
    "0x7265706c6179",
];

fn layout() -> Layout {
    let l = Layout::discover();
    if let Err(e) = l.check() {
        panic!("{e}");
    }
    l
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `truecold <args>` (the static bench), its exit status and everything it printed.
fn truecold(l: &Layout, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let out = Command::new(&l.bench)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// The paths every campaign of this test runs on: the layout's.
fn paths(l: &Layout) -> Vec<String> {
    vec![
        "--vmm".into(),
        l.vmm.display().to_string(),
        "--guest-dir".into(),
        l.guest_dir.display().to_string(),
    ]
}

/// `truecold replay DIR --vmm … --guest-dir … --out OUT`.
fn replay(l: &Layout, dir: &Path, out: &Path, guest_dir: &Path) -> (i32, String) {
    let a = [
        "replay",
        dir.to_str().unwrap(),
        "--vmm",
        l.vmm.to_str().unwrap(),
        "--guest-dir",
        guest_dir.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    truecold(l, &a, &[])
}

/// A bundle made by this build replays to identical samples, every file of the bundle
/// byte for byte; a changed input is refused, named, and nothing runs.
#[test]
fn a_bundle_replays_to_identical_samples_and_a_changed_input_is_refused() {
    let l = layout();
    let t = tempfile::tempdir().unwrap();
    let first = t.path().join("first");
    let mut a: Vec<String> = vec!["run".into(), "--nested".into(), "-n".into(), "1".into()];
    a.extend(["--vcpus", "1", "--mem-mib", "256", "--seed", "0x6f6e65"].map(String::from));
    a.extend(paths(&l));
    a.extend(["--out".into(), first.display().to_string()]);
    let (code, text) = truecold(&l, &a.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    assert_eq!(code, 0, "{text}");
    let again = t.path().join("again");
    let (code, text) = replay(&l, &first, &again, &l.guest_dir);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("replay: IDENTICAL on the virtual clock: 1 samples"),
        "{text}"
    );
    for f in ["samples.csv", "reports.jsonl", "result.json", "SHA256SUMS"] {
        assert_eq!(
            std::fs::read(first.join(f)).unwrap(),
            std::fs::read(again.join(f)).unwrap(),
            "{f}"
        );
    }
    let other = t.path().join("guest");
    std::fs::create_dir(&other).unwrap();
    for f in ["vmlinux", "initramfs.cpio", "init", "config"] {
        std::fs::copy(l.guest_dir.join(f), other.join(f)).unwrap();
    }
    std::fs::write(other.join("config"), b"CONFIG_OTHER=y\n").unwrap();
    let never = t.path().join("never");
    let (code, text) = replay(&l, &first, &never, &other);
    assert_eq!(code, 4, "{text}");
    assert!(text.contains("input config: DIFFERS"), "{text}");
    assert!(!text.contains("input vmlinux: DIFFERS"), "{text}");
    assert!(!never.exists());
}

/// The committed fixture replays to identical samples on a build whose inputs are the ones
/// it records. A build whose bench, VMM, guest or L1 differ cannot reproduce it (the bench
/// alone moves every launch by microseconds: docs/fleet.md): the replay must then refuse,
/// naming exactly the inputs that differ, and this test says so (remake the fixture with
/// scripts/replay-fixture.sh at the commit that changed them).
#[test]
fn the_committed_fixture_replays_identically_or_names_what_changed() {
    let l = layout();
    let t = tempfile::tempdir().unwrap();
    let fixture = fixture();
    let out = t.path().join("replay");
    let (code, text) = replay(&l, &fixture, &out, &l.guest_dir);
    match code {
        0 => {
            assert!(
                text.contains("replay: IDENTICAL on the virtual clock: 3 samples"),
                "{text}"
            );
            assert_eq!(
                std::fs::read(fixture.join("samples.csv")).unwrap(),
                std::fs::read(out.join("samples.csv")).unwrap()
            );
        }
        4 => {
            let differing: Vec<&str> = text
                .lines()
                .filter_map(|x| x.trim().strip_prefix("input "))
                .filter(|x| x.contains(": DIFFERS"))
                .collect();
            assert!(!differing.is_empty(), "{text}");
            // Each named input really differs: its recorded digest is not this build's.
            let r: serde_json::Value =
                serde_json::from_slice(&std::fs::read(fixture.join("result.json")).unwrap())
                    .unwrap();
            let bench = r["environment"]["nested"]["bench_sha256"].as_str().unwrap();
            let here = sha256(&l.bench);
            if differing
                .iter()
                .any(|d| d.starts_with("truecold (the bench in L1)"))
            {
                assert_ne!(bench, here);
            } else {
                assert_eq!(bench, here, "{text}");
            }
            assert!(!out.exists());
            eprintln!(
                "fleet: the committed fixture {} records inputs this build does not have \
                 ({}): its replay was refused as it must be; remake it with \
                 scripts/replay-fixture.sh to replay it here",
                fixture.display(),
                differing.join("; ")
            );
        }
        _ => panic!("replay exited {code}:\n{text}"),
    }
}

fn sha256(p: &Path) -> String {
    let out = Command::new("sha256sum").arg(p).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// The cluster of this test: brought up by the repository's script, stopped when dropped.
struct Cluster {
    dir: PathBuf,
    conf: String,
}

impl Cluster {
    fn start(dir: &Path) -> Cluster {
        let out = Command::new(root().join("scripts/slurm-local.sh"))
            .arg("start")
            .arg(dir)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "scripts/slurm-local.sh start: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let conf = text
            .lines()
            .find_map(|l| l.strip_prefix("export SLURM_CONF="))
            .expect("the script prints SLURM_CONF")
            .to_string();
        Cluster {
            dir: dir.to_path_buf(),
            conf,
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(root().join("scripts/slurm-local.sh"))
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

/// Polls `fleet status` until no shard of `dir` is pending or running; its last output.
fn settle(l: &Layout, env: &[(&str, &str)], dir: &Path, limit: Duration) -> String {
    let start = Instant::now();
    loop {
        let (_, text) = truecold(l, &["fleet", "status", dir.to_str().unwrap()], env);
        if !text.contains("running") && !text.contains("pending") {
            return text;
        }
        assert!(start.elapsed() < limit, "still not settled:\n{text}");
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// Polls until shard `task` of the fleet's array `array` runs.
fn running(env: &[(&str, &str)], array: &str, task: u64) {
    let start = Instant::now();
    loop {
        let out = Command::new("scontrol")
            .args(["show", "job", "-o", &format!("{array}_{task}")])
            .envs(env.iter().copied())
            .output()
            .unwrap();
        if String::from_utf8_lossy(&out.stdout).contains("JobState=RUNNING") {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "task never ran");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn array_of(text: &str) -> String {
    text.split("submitted job array(s) ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap_or_else(|| panic!("no job array in: {text}"))
        .to_string()
}

#[test]
fn a_campaign_and_a_tune_screen_fan_out_over_a_local_slurm_cluster() {
    let l = layout();
    let t = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(&t.path().join("cluster"));
    let env = [("SLURM_CONF", cluster.conf.as_str())];
    let wait = Duration::from_secs(600);
    let mut run = CAMPAIGN.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    run.extend(paths(&l));
    // The unsharded run, beside the fleet (the virtual clock does not see the load).
    let whole = t.path().join("unsharded");
    let unsharded = Command::new(&l.bench)
        .args(&run)
        .arg("--out")
        .arg(&whole)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let submit = |dir: &Path, extra: &[&str], cmd: &[String], env: &[(&str, &str)]| {
        let mut a = vec!["fleet", "submit", dir.to_str().unwrap()];
        a.extend_from_slice(extra);
        a.push("--");
        a.extend(cmd.iter().map(String::as_str));
        truecold(&l, &a, env)
    };

    // Cluster errors are typed and leave nothing behind.
    let dead = t.path().join("dead.conf");
    let conf = std::fs::read_to_string(&cluster.conf).unwrap();
    let conf: String = conf
        .lines()
        .map(|x| {
            if x.starts_with("SlurmctldPort=") {
                "SlurmctldPort=1".to_string()
            } else {
                x.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&dead, conf).unwrap();
    let nowhere = t.path().join("nowhere");
    let (code, text) = submit(
        &nowhere,
        &["--partition", "fleet"],
        &run,
        &[("SLURM_CONF", dead.to_str().unwrap())],
    );
    assert_eq!(code, 4, "{text}");
    assert!(text.contains("no Slurm controller answers"), "{text}");
    let (code, text) = submit(&nowhere, &["--partition", "nosuch"], &run, &env);
    assert_eq!(code, 4, "{text}");
    assert!(text.contains("no partition `nosuch`"), "{text}");
    assert!(!nowhere.exists());

    // A campaign in two shards (launches 0..1 and 1..3); shard 001's task cancelled while it
    // runs, then resubmitted alone.
    let fleet = t.path().join("campaign");
    let (code, text) = submit(
        &fleet,
        &["--partition", "fleet", "--shards", "2"],
        &run,
        &env,
    );
    assert_eq!(code, 0, "{text}");
    let array = array_of(&text);
    running(&env, &array, 1);
    let c = Command::new("scancel")
        .arg(format!("{array}_1"))
        .envs(env.iter().copied())
        .status()
        .unwrap();
    assert!(c.success());
    let s = settle(&l, &env, &fleet, wait);
    assert!(s.contains("000: written"), "{s}");
    assert!(s.contains("001: cancelled"), "{s}");
    let (code, text) = truecold(&l, &["fleet", "gather", fleet.to_str().unwrap()], &env);
    assert_eq!(code, 3, "{text}");
    assert!(text.contains("001: cancelled"), "{text}");
    let kept = std::fs::read(fleet.join("shards/000/samples.csv")).unwrap();
    let (code, text) = submit(
        &fleet,
        &["--partition", "fleet", "--shards", "2", "--resume"],
        &run,
        &env,
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("tasks 1;"), "{text}");
    let s = settle(&l, &env, &fleet, wait);
    assert!(s.contains("001: written"), "{s}");
    let st = unsharded.wait_with_output().unwrap().status;
    assert!(st.success(), "the unsharded run: {st}");
    let (code, text) = truecold(
        &l,
        &[
            "fleet",
            "gather",
            fleet.to_str().unwrap(),
            "--against",
            whole.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(code, 0, "{text}");
    assert_eq!(
        std::fs::read(fleet.join("shards/000/samples.csv")).unwrap(),
        kept
    );
    // The merge rule: shard 000 runs under the campaign's seed, so its one launch is the
    // long campaign's first, cell for cell; shard 001's L1 is its own.
    assert!(
        text.contains("shard 000 (launches 0..1): IDENTICAL"),
        "{text}"
    );
    assert!(
        text.contains("shard 001 (launches 1..3): DIFFERS"),
        "{text}"
    );
    let v = truecold_proof::verify::verify_dir(&fleet);
    assert!(v.is_valid(), "{}", v.render(&fleet, 20));

    // A shard directory of another plan: shard 000's rows in shard 001's place.
    let foreign = t.path().join("foreign");
    let cp = Command::new("cp")
        .arg("-a")
        .arg(&fleet)
        .arg(&foreign)
        .status()
        .unwrap();
    assert!(cp.success());
    std::fs::remove_dir_all(foreign.join("shards/001")).unwrap();
    let cp = Command::new("cp")
        .arg("-a")
        .arg(foreign.join("shards/000"))
        .arg(foreign.join("shards/001"))
        .status()
        .unwrap();
    assert!(cp.success());
    let (code, text) = truecold(&l, &["fleet", "gather", foreign.to_str().unwrap()], &env);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("shard `001` ran under L1 seed"), "{text}");
    assert!(
        text.contains("planned 1 launches, the plan gives it 2"),
        "{text}"
    );

    // A tune's screen, one shard per knob, against the unsharded screen run beside it.
    let build = root().join("kernel-config/build.sh");
    let tune_kernels = t.path().join("tune-kernels");
    let tune: Vec<String> = [
        "tune",
        "--nested",
        "-n",
        "5",
        "--knobs",
        "pin-vcpus,console,x2apic",
        "--vcpus",
        "1",
        "--mem-mib",
        "256",
        "--vmm",
        l.vmm.to_str().unwrap(),
        "--guest-dir",
        l.guest_dir.to_str().unwrap(),
        "--kernel-build",
        build.to_str().unwrap(),
        "--kernel-dir",
        tune_kernels.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let screen = t.path().join("screen");
    let (code, text) = submit(&screen, &["--partition", "fleet"], &tune, &env);
    assert_eq!(code, 0, "{text}");
    let unsharded = t.path().join("tune");
    let mut whole: Vec<&str> = tune.iter().map(String::as_str).collect();
    whole.extend(["--attribution", "0", "--out", unsharded.to_str().unwrap()]);
    let (code, text) = truecold(&l, &whole, &env);
    assert_eq!(code, 0, "{text}");
    let s = settle(&l, &env, &screen, wait);
    // A Kconfig knob's kernel is built by a shard of its own, which its knob's task waits for.
    for k in ["console", "pin-vcpus", "build-x2apic", "x2apic"] {
        assert!(s.contains(&format!("{k}: written")), "{s}");
    }
    let (code, text) = truecold(
        &l,
        &[
            "fleet",
            "gather",
            screen.to_str().unwrap(),
            "--against",
            unsharded.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(code, 0, "{text}");
    for k in ["console", "pin-vcpus", "x2apic"] {
        assert!(text.contains(&format!("knob {k}: Δp50 ")), "{text}");
    }
    let built: truecold_proof::fleet::BuildRecord = serde_json::from_slice(
        &std::fs::read(screen.join("shards/build-x2apic/build.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(built.knob.as_str(), "x2apic");

    // A task above its memory is killed by Slurm, and said so.
    let mem = t.path().join("memory");
    let one: Vec<String> = run
        .iter()
        .map(|w| if w == "3" { "1".to_string() } else { w.clone() })
        .collect();
    let (code, text) = submit(
        &mem,
        &[
            "--partition",
            "fleet",
            "--shards",
            "1",
            "--task-mem-mib",
            "100",
        ],
        &one,
        &env,
    );
    assert_eq!(code, 0, "{text}");
    let s = settle(&l, &env, &mem, wait);
    assert!(s.contains("000: killed for memory"), "{s}");

    // A bisect wave over the fixture tree (scripts/bisect-fixture.sh): from the commit before
    // the regression to the bad one, two probes (the regression and the bad commit) each a
    // task after the good commit's baseline; the wave names the regression as the first bad
    // commit and verifies, and the tree is left on the commit it was on.
    let (tree, ids, _held) = common::bisect_fixture(&root());
    let head = |t: &Path| common::git_head(t);
    let before = head(&tree);
    let kernels = t.path().join("kernels");
    let good = format!("{}~1", ids["regression"]);
    let bisect: Vec<String> = [
        "bisect",
        "run",
        "--nested",
        "--vcpus",
        "1",
        "--mem-mib",
        "256",
        "-n",
        "4",
        "--max-n",
        "4",
        "--alpha",
        "0.05",
        "--kernel-tree",
        tree.to_str().unwrap(),
        "--good",
        &good,
        "--bad",
        &ids["bad"],
        "--vmm",
        l.vmm.to_str().unwrap(),
        "--guest-dir",
        l.guest_dir.to_str().unwrap(),
        "--kernel-dir",
        kernels.to_str().unwrap(),
        "--kernel-build",
        build.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let wave = t.path().join("wave");
    let (code, text) = submit(
        &wave,
        &["--partition", "fleet", "--shards", "2"],
        &bisect,
        &env,
    );
    assert_eq!(code, 0, "{text}");
    // The baseline's array, then the probes' waiting for it.
    assert!(text.contains("submitted job array(s) "), "{text}");
    assert!(text.contains(", tasks 0,1,2;"), "{text}");
    let s = settle(&l, &env, &wave, wait);
    let probe = |c: &str| {
        format!(
            "{}-{}",
            if c == ids["bad"] { "002" } else { "001" },
            &c[..12]
        )
    };
    for name in [
        "baseline".to_string(),
        probe(&ids["regression"]),
        probe(&ids["bad"]),
    ] {
        assert!(s.contains(&format!("{name}: written")), "{s}");
    }
    let (code, text) = truecold(&l, &["fleet", "gather", wave.to_str().unwrap()], &env);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(&format!("First bad commit: `{}`", &ids["regression"][..12])),
        "{text}"
    );
    let v = truecold_proof::verify::verify_dir(&wave);
    assert!(v.is_valid(), "{}", v.render(&wave, 20));
    assert_eq!(head(&tree), before, "the tree was not left as found");
    drop(cluster);
}
