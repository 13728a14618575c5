//! Tune directories: a synthetic tune (screen of four command-line knobs with injected
//! effects, then the confirmation of its winners) is written, verifies, regenerates, and every
//! tampering is caught with its own reason.
mod common;

use common::*;
use std::fs;
use std::path::{Path, PathBuf};
use truecold_proof::arms::{self, ArmRef, ArmsPlan};
use truecold_proof::schema::{Backing, HostKind, ResultJson, Sample, Stage};
use truecold_proof::tune::{self, KnobVerdict, TuneArm, TunePlan};
use truecold_proof::{names, verify_dir, Check, Verdict};
use truecold_proto::tune::{Knob, TuneGuest};

const ROUNDS: u64 = 20;
const MEDIAN: f64 = 300e6;

/// Marks an arm bundle as one arm of an interleaved directory (schema 5's
/// `contract.interleaved`) applying `knobs` (`configuration.knobs`).
fn mark_tune_arm(r: &mut ResultJson, knobs: &[Knob]) {
    r.contract.interleaved = true;
    r.configuration.knobs = knobs.to_vec();
}

/// The guest command line of an arm applying `knobs`: the fixture's with the knobs' words.
fn arm_cmdline(knobs: &[Knob]) -> String {
    let mut v: Vec<&str> = GUEST_CMDLINE.split(' ').collect();
    for k in knobs {
        let (add, remove) = k.cmdline_delta();
        v.retain(|w| !remove.contains(w));
        v.extend(add);
    }
    v.join(" ")
}

/// The VMM command of an arm applying `knobs`: the fixture's, with `--console`,
/// `--pin-vcpus` and the bzImage when they are among them.
fn arm_vmm_command(f: &Fixture, knobs: &[Knob]) -> String {
    let mut c = f.vmm_command();
    if knobs.contains(&Knob::BzImage) {
        c = c.replace("out/guest/vmlinux", "out/guest/bzImage");
    }
    if knobs.contains(&Knob::Console) {
        c = c.replace(" --request-ns", " --console --request-ns");
    }
    if knobs.contains(&Knob::PinVcpus) {
        c = c.replace(" --request-ns", " --pin-vcpus --request-ns");
    }
    c
}

/// The kernel config of an arm applying `knobs`: the fixture's, with its Kconfig knobs'
/// fragments after it, each fragment line replacing the symbol's earlier line (as a resolved
/// config holds one line a symbol).
fn arm_config(f: &Fixture, knobs: &[Knob]) -> Option<Vec<u8>> {
    let mut c = String::from_utf8(f.config_bytes()?).ok()?;
    for k in knobs {
        if let truecold_proto::tune::Change::Kconfig(text) = k.change() {
            for line in text.lines() {
                let sym = line
                    .trim_start_matches("# ")
                    .split(['=', ' '])
                    .next()
                    .unwrap_or("");
                c = c
                    .lines()
                    .filter(|l| !l.starts_with(&format!("{sym}=")))
                    .map(|l| format!("{l}\n"))
                    .collect();
                c.push_str(line);
                c.push('\n');
            }
        }
    }
    Some(c.into_bytes())
}

/// The median of an arm's headline: the baseline's times each knob's injected factor.
fn median_of(knobs: &[Knob]) -> f64 {
    knobs.iter().fold(MEDIAN, |m, k| {
        m * match k {
            Knob::RcuExpedited => 0.92,
            Knob::MitigationsOff => 0.95,
            Knob::TscReliable => 1.06,
            _ => 1.0,
        }
    })
}

/// Writes one phase: every arm `rounds` launches, interleaved in a shuffled order per round,
/// each arm a bundle, then the multi-arm files. `breaks` arms fail every 7th launch.
fn write_phase(dir: &Path, arms: &[ArmRef], rounds: u64, seed: u64, breaks: &[&str]) {
    fs::create_dir(dir).unwrap();
    let mut rng = Rng(seed);
    let mut order = Vec::new();
    for r in 0..rounds {
        let mut names: Vec<&str> = arms.iter().map(|a| a.name.as_str()).collect();
        for k in (1..names.len()).rev() {
            names.swap(k, (rng.next() % (k as u64 + 1)) as usize);
        }
        order.extend(names.into_iter().map(|n| (r, n.to_string())));
    }
    let plan = ArmsPlan {
        seed,
        rounds,
        arms: arms.to_vec(),
        order,
    };
    let mut state: Vec<(Fixture, Rng, Vec<Sample>)> = arms
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let f = Fixture {
                n: rounds,
                fail_every: breaks.contains(&a.name.as_str()).then_some(7),
                median_ns: median_of(&a.knobs),
                sigma: 0.01,
                seed: seed * 100 + i as u64,
                host: HostKind::NestedEmulated,
                ..Fixture::linux(rounds)
            };
            let rng = Rng(f.seed);
            (f, rng, Vec::new())
        })
        .collect();
    let mut t = START;
    for (_, name) in &plan.order {
        let k = arms.iter().position(|a| a.name == *name).unwrap();
        let (f, rng, rows) = &mut state[k];
        let s = f.sample(rows.len() as u64, rng, t);
        t = last_stamp(&s) + GAP;
        rows.push(s);
    }
    let all: Vec<Sample> = state.iter().flat_map(|(_, _, s)| s.clone()).collect();
    let wall = wall_ns(&all);
    for (a, (f, _, rows)) in arms.iter().zip(&state) {
        let mut r = f.result(rows);
        r.environment.harness.wall_ns = wall;
        mark_tune_arm(&mut r, &a.knobs);
        let cmdline = arm_cmdline(&a.knobs);
        r.configuration.cmdline = cmdline.clone();
        let mut inputs = f.inputs_for(rows);
        inputs.cmdline = truecold_proof::cmdline::format_cmdline_txt(
            f.kind.label(),
            &format!("./{}", f.invocation()),
            &f.invocation(),
            &arm_vmm_command(f, &a.knobs),
            Some(&cmdline),
        );
        if a.knobs.contains(&Knob::BzImage) {
            r.configuration.kernel_path = Some("out/guest/bzImage".into());
        }
        inputs.kernel_config = arm_config(f, &a.knobs);
        if let Some(c) = &inputs.kernel_config {
            r.artifacts
                .insert("config".into(), truecold_proof::digest::sha256_hex(c));
        }
        let dest = dir.join(&a.name);
        let w = truecold_proof::write_bundle(&dest, &r, rows, &inputs).unwrap();
        assert!(w.verdict.is_valid(), "{}", w.verdict.render(&dest, 50));
    }
    let v = arms::write_arms(dir, &plan).unwrap();
    assert!(v.is_valid(), "{}", v.render(dir, 50));
}

fn plan() -> TunePlan {
    TunePlan {
        seed: 0x7e57,
        guest: TuneGuest::Linux,
        knobs: vec![
            Knob::TscReliable,
            Knob::RcuExpedited,
            Knob::MitigationsOff,
            Knob::Nokaslr,
        ],
        vcpus: 2,
        mem_bytes: MEM,
        backing: Backing::Thp,
        rounds_screen: ROUNDS,
        rounds_confirm: ROUNDS,
        budget: Some(1000),
        noise: Some(tune::Noise {
            cv_ppm: 10_000,
            source: "a pilot of the baseline".into(),
            pilot_rounds: None,
        }),
        rule: tune::RuleVersion::CURRENT,
        invocation: Some(invocation()),
        figure: truecold_proof::schema::Figure::Total,
        kernel_builds: Vec::new(),
        proposals: Vec::new(),
        unbuilt: Vec::new(),
    }
}

fn invocation() -> tune::Invocation {
    tune::Invocation {
        argv: [
            "truecold",
            "tune",
            "--nested",
            "--knobs",
            "tsc-reliable,rcu-expedited",
        ]
        .map(String::from)
        .to_vec(),
        options: tune::TuneOptions {
            guest: tune::RunGuest::Nested,
            vcpus: 2,
            mem_mib: MEM >> 20,
            backing: Backing::Thp,
            deadline_ms: DEADLINE / 1_000_000,
            kill_grace_ms: 500,
            attribution: 0,
            noise_from: None,
            kernel: None,
            already_set: Vec::new(),
            ram_layout: None,
            attribution_instrument: None,
            attribution_sample_us: None,
        },
    }
}

/// The arms of a phase as the bench holds them while it runs (from its rows).
fn tune_arms(dir: &Path, arms: &[ArmRef]) -> Vec<TuneArm> {
    arms.iter()
        .map(|a| {
            let (_, s) = truecold_proof::read_bundle(&dir.join(&a.name)).unwrap();
            TuneArm::new(a.name.clone(), a.knobs.clone(), &s)
        })
        .collect()
}

/// The bench's path: screen, winners, confirm, `write_tune`.
fn write_tune(parent: &Path, name: &str) -> PathBuf {
    write_tune_of(parent, name, plan(), |_| {})
}

/// [`write_tune`] of the plan `p`; `before` adds files to the directory before `write_tune`.
fn write_tune_of(parent: &Path, name: &str, p: TunePlan, before: impl FnOnce(&Path)) -> PathBuf {
    let dir = parent.join(name);
    fs::create_dir(&dir).unwrap();
    let screen_arms = tune::screen_arms(&p.knobs);
    write_phase(
        &dir.join(tune::SCREEN_DIR),
        &screen_arms,
        p.rounds_screen,
        3,
        &["nokaslr"],
    );
    let t = tune_arms(&dir.join(tune::SCREEN_DIR), &screen_arms);
    let s = tune::screen(p.rule, p.seed, &t[0], &t[1..]);
    assert_eq!(s.winners, [Knob::RcuExpedited, Knob::MitigationsOff]);
    let confirm_arms = tune::confirm_arms(&s.recommended);
    write_phase(
        &dir.join(tune::CONFIRM_DIR),
        &confirm_arms,
        p.rounds_confirm,
        4,
        &[],
    );
    before(&dir);
    let v = tune::write_tune(&dir, &p).unwrap();
    assert!(v.is_valid(), "{}", v.render(&dir, 50));
    dir
}

fn read(dir: &Path, name: &str) -> String {
    fs::read_to_string(dir.join(name)).unwrap()
}

fn invalid(dir: &Path) -> Verdict {
    let v = verify_dir(dir);
    assert_eq!(v.exit_code(), 1, "expected invalid:\n{}", v.render(dir, 50));
    v
}

fn assert_reason(v: &Verdict, dir: &Path, c: Check, words: &str) {
    assert!(
        v.reasons
            .iter()
            .any(|r| r.check == c && r.detail.contains(words)),
        "expected a {c:?} reason with `{words}`:\n{}",
        v.render(dir, 50)
    );
}

/// Rewrites a tune directory's top SHA256SUMS over every file of the tree.
fn resum_tune(dir: &Path) {
    fn walk(d: &Path, prefix: &str, out: &mut Vec<(String, String)>) {
        for e in fs::read_dir(d).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().unwrap().is_dir() {
                walk(&e.path(), &format!("{prefix}{name}/"), out);
            } else if !(prefix.is_empty() && (name == "SHA256SUMS" || name == "SHA256SUMS.sig")) {
                let f = fs::File::open(e.path()).unwrap();
                out.push((
                    format!("{prefix}{name}"),
                    truecold_proof::digest::sha256_reader(f).unwrap().0,
                ));
            }
        }
    }
    let mut entries = Vec::new();
    walk(dir, "", &mut entries);
    fs::write(
        dir.join("SHA256SUMS"),
        truecold_proof::sums::format_sums(&entries),
    )
    .unwrap();
}

fn edit_tune_json(dir: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let p = dir.join(names::TUNE_FILE);
    let mut v: serde_json::Value = serde_json::from_str(&read(dir, names::TUNE_FILE)).unwrap();
    f(&mut v);
    let mut b = serde_json::to_vec_pretty(&v).unwrap();
    b.push(b'\n');
    fs::write(p, b).unwrap();
    resum_tune(dir);
}

#[test]
fn a_tune_is_written_verified_and_says_what_it_found() {
    let t = tempfile::tempdir().unwrap();
    let dir = write_tune(t.path(), "t");
    let v = verify_dir(&dir);
    assert!(v.is_valid(), "{}", v.render(&dir, 50));
    assert_eq!(v.rows, Some((5 + 4) * ROUNDS as usize));
    let j: serde_json::Value = serde_json::from_str(&read(&dir, names::TUNE_FILE)).unwrap();
    assert_eq!(
        j["screen"]["winners"],
        serde_json::json!(["rcu-expedited", "mitigations-off"])
    );
    assert_eq!(
        j["screen"]["ranking"],
        serde_json::json!([
            "rcu-expedited",
            "mitigations-off",
            "tsc-reliable",
            "nokaslr"
        ])
    );
    let verdicts: Vec<&str> = j["screen"]["effects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["slower", "faster", "faster", "breaks"]);
    assert_eq!(j["confirm"]["final_ab"]["verdict"], "faster");
    assert_eq!(j["confirm"]["leave_one_out"].as_array().unwrap().len(), 2);
    assert_eq!(j["confirm"]["not_confirmed"], serde_json::json!([]));
    let readme = read(&dir, "README.md");
    for want in [
        "- clock: virtual (QEMU icount: 1 ns per emulated instruction",
        "- host kind: nested-emulated",
        "| 1 | [rcu-expedited](screen/rcu-expedited/README.md) | cmdline |",
        "- nokaslr: breaks strict-ready: deadline ×",
        "Command line (appended to the base): `rcupdate.rcu_expedited=1 mitigations=off`",
        "## Final A/B: recommended against baseline",
        "## Leave-one-out",
        "Every winner is confirmed in the combination.",
        "- sized from cv 10000 ppm (a pilot of the baseline): n = 29",
        "| tsc-reliable | cmdline | timed waits | marks the TSC reliable",
    ] {
        assert!(readme.contains(want), "{want}:\n{readme}");
    }
    let sums = read(&dir, "SHA256SUMS");
    assert!(sums.contains("  screen/baseline/samples.csv\n"), "{sums}");
    assert!(sums.contains("  confirm/SHA256SUMS\n"), "{sums}");
    assert!(sums.contains("  tune.json\n"), "{sums}");
    let out = std::process::Command::new("sha256sum")
        .args(["-c", "--strict", "--quiet", "SHA256SUMS"])
        .current_dir(&dir)
        .output()
        .expect("sha256sum (coreutils) runs");
    assert!(out.status.success(), "{out:?}");
    // The CLI verifies it; `report` regenerates a hand-edited README to the same bytes.
    let (code, out, _) = run_cli(&["verify".as_ref(), dir.as_os_str()]);
    assert_eq!(code, 0, "{out}");
    fs::write(dir.join("README.md"), "edited\n").unwrap();
    resum_tune(&dir);
    assert_reason(&invalid(&dir), &dir, Check::GeneratedStale, "README.md");
    let (code, out, err) = run_cli(&["report".as_ref(), dir.as_os_str()]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(read(&dir, "README.md"), readme);
    assert!(verify_dir(&dir).is_valid());
}

#[test]
fn the_same_tune_writes_the_same_bytes() {
    let t = tempfile::tempdir().unwrap();
    let a = write_tune(t.path(), "a");
    let b = write_tune(t.path(), "b");
    for f in [names::TUNE_FILE, "README.md", "SHA256SUMS"] {
        assert_eq!(read(&a, f), read(&b, f), "{f}");
    }
}

#[test]
fn tune_json_edited() {
    let t = tempfile::tempdir().unwrap();
    // A winner that is not faster.
    let dir = write_tune(t.path(), "w");
    edit_tune_json(&dir, |j| {
        j["screen"]["winners"]
            .as_array_mut()
            .unwrap()
            .push("tsc-reliable".into())
    });
    assert_reason(
        &invalid(&dir),
        &dir,
        Check::TuneResults,
        "names `tsc-reliable` a winner; its screen verdict is slower",
    );
    // An effect's figure.
    let dir = write_tune(t.path(), "e");
    edit_tune_json(&dir, |j| {
        j["screen"]["effects"][0]["delta_p50_ns"] = (-1).into()
    });
    assert_reason(
        &invalid(&dir),
        &dir,
        Check::TuneResults,
        "effect of `tsc-reliable`",
    );
    // The plan: an unknown knob, a seed, non-canonical bytes, not JSON.
    let dir = write_tune(t.path(), "k");
    edit_tune_json(&dir, |j| j["knobs"][0] = "turbo".into());
    assert_reason(&invalid(&dir), &dir, Check::TunePlan, "does not parse");
    let dir = write_tune(t.path(), "s");
    edit_tune_json(&dir, |j| j["seed"] = 1.into());
    assert_reason(&invalid(&dir), &dir, Check::TuneResults, "differs");
    let dir = write_tune(t.path(), "c");
    let text = read(&dir, names::TUNE_FILE).replacen("{\n", "{ \n", 1);
    fs::write(dir.join(names::TUNE_FILE), text).unwrap();
    resum_tune(&dir);
    assert_reason(&invalid(&dir), &dir, Check::TunePlan, "canonical");
    let dir = write_tune(t.path(), "j");
    fs::write(dir.join(names::TUNE_FILE), b"\x1b[2Jnot json").unwrap();
    resum_tune(&dir);
    let v = invalid(&dir);
    assert_reason(&v, &dir, Check::TunePlan, "does not parse");
    assert!(!v.render(&dir, 50).contains('\u{1b}'));
    // The rule: a rule-2 tune claimed as rule 1 (its version removed) is recomputed by rule
    // 1, and its figures differ; a rule this verifier does not know does not parse.
    let dir = write_tune(t.path(), "r1");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&read(&dir, names::TUNE_FILE)).unwrap()["rule"]
            ["version"],
        2
    );
    edit_tune_json(&dir, |j| {
        j["rule"].as_object_mut().unwrap().remove("version");
    });
    assert_reason(&invalid(&dir), &dir, Check::TuneResults, "differs");
    let dir = write_tune(t.path(), "r3");
    edit_tune_json(&dir, |j| j["rule"]["version"] = 3.into());
    assert_reason(&invalid(&dir), &dir, Check::TunePlan, "verdict rule 3");
    // Without the SHA256SUMS rewritten, the digest says so.
    let dir = write_tune(t.path(), "d");
    fs::write(dir.join(names::TUNE_FILE), b"{}").unwrap();
    assert!(invalid(&dir).has(Check::DigestMismatch));
    // Over the budget.
    let dir = write_tune(t.path(), "b");
    edit_tune_json(&dir, |j| j["budget"] = 10.into());
    assert_reason(
        &invalid(&dir),
        &dir,
        Check::TunePlan,
        "over the budget of 10",
    );
}

/// Lowers one row's strict-ready by 30 ms (its guest_boot stage with it).
fn faster_row(s: &mut [Sample]) {
    let x = &mut s[3];
    assert!(x.ok);
    let g = x.stages.get(Stage::GuestBoot).unwrap();
    x.stages.set(Stage::GuestBoot, Some(g - 30_000_000));
    x.ready_ns = x.ready_ns.map(|r| r - 30_000_000);
    x.latency_ns = x.latency_ns.map(|l| l - 30_000_000);
}

#[test]
fn a_row_altered_is_caught_by_its_phase_and_the_results() {
    let t = tempfile::tempdir().unwrap();
    let dir = write_tune(t.path(), "t");
    let screen = dir.join(tune::SCREEN_DIR);
    for i in 0..12 {
        forge(&screen.join("tsc-reliable"), |_, s| {
            faster_row(&mut s[i..]);
        });
    }
    resum_arms(&screen);
    resum_tune(&dir);
    let v = invalid(&dir);
    assert_reason(&v, &dir, Check::Comparison, "screen: ");
    assert_reason(&v, &dir, Check::TuneResults, "effect of `tsc-reliable`");
}

#[test]
fn a_phase_missing_or_unasked_for() {
    let t = tempfile::tempdir().unwrap();
    let dir = write_tune(t.path(), "t");
    fs::remove_dir_all(dir.join(tune::CONFIRM_DIR)).unwrap();
    assert!(invalid(&dir).has(Check::FileMissing));
    resum_tune(&dir);
    assert_reason(
        &invalid(&dir),
        &dir,
        Check::TunePhase,
        "the confirm phase `confirm/` is missing: the screen's winners are [rcu-expedited, \
         mitigations-off]",
    );
    let dir = write_tune(t.path(), "s");
    fs::remove_dir_all(dir.join(tune::SCREEN_DIR)).unwrap();
    resum_tune(&dir);
    assert_reason(&invalid(&dir), &dir, Check::TunePhase, "screen phase");
    // A knob screened that the plan does not list.
    let dir = write_tune(t.path(), "k");
    edit_tune_json(&dir, |j| {
        j["knobs"].as_array_mut().unwrap().pop();
    });
    assert_reason(
        &invalid(&dir),
        &dir,
        Check::TunePhase,
        "the plan's knobs make",
    );
    // A stray directory.
    let dir = write_tune(t.path(), "x");
    fs::create_dir(dir.join("extra")).unwrap();
    assert_reason(&invalid(&dir), &dir, Check::NotAFile, "`extra`");
}

#[test]
fn write_tune_refuses_phases_that_are_not_the_plan() {
    let t = tempfile::tempdir().unwrap();
    let dir = write_tune(t.path(), "t");
    let mut p = plan();
    p.knobs.pop();
    let e = tune::write_tune(&dir, &p).unwrap_err();
    assert!(e.to_string().contains("screen"), "{e}");
    fs::remove_dir_all(dir.join(tune::CONFIRM_DIR)).unwrap();
    let e = tune::write_tune(&dir, &plan()).unwrap_err();
    assert!(e.to_string().contains("confirm"), "{e}");
    let mut p = plan();
    p.knobs = vec![Knob::Console, Knob::TscReliable];
    assert!(matches!(
        tune::write_tune(&dir, &p),
        Err(tune::TuneError::Plan(_))
    ));
}

#[test]
fn effects_at_run_time_match_the_verified_directory() {
    let t = tempfile::tempdir().unwrap();
    let dir = write_tune(t.path(), "t");
    let p = plan();
    let screen_arms = tune::screen_arms(&p.knobs);
    let arms = tune_arms(&dir.join(tune::SCREEN_DIR), &screen_arms);
    let s = tune::screen(p.rule, p.seed, &arms[0], &arms[1..]);
    let j: serde_json::Value = serde_json::from_str(&read(&dir, names::TUNE_FILE)).unwrap();
    assert_eq!(serde_json::to_value(&s).unwrap(), j["screen"]);
    assert_eq!(s.effects[3].verdict, KnobVerdict::Breaks);
}

#[test]
fn a_truncated_or_mangled_tune_json_is_a_reason_never_a_panic() {
    let t = tempfile::tempdir().unwrap();
    let dir = write_tune(t.path(), "t");
    let good = fs::read(dir.join(names::TUNE_FILE)).unwrap();
    let mangled: Vec<Vec<u8>> = vec![
        good[..good.len() / 3].to_vec(),
        good[..good.len() - 2].to_vec(),
        Vec::new(),
        b"null".to_vec(),
        b"[]".to_vec(),
        String::from_utf8(good.clone())
            .unwrap()
            .replacen("\"schema\": 2", "\"schema\": 99", 1)
            .into_bytes(),
        String::from_utf8(good.clone())
            .unwrap()
            .replacen("\"seed\": ", "\"seed\": -", 1)
            .into_bytes(),
        String::from_utf8(good.clone())
            .unwrap()
            .replacen("\"guest\": \"linux\"", "\"guest\": \"probe\"", 1)
            .into_bytes(),
    ];
    for (i, m) in mangled.into_iter().enumerate() {
        fs::write(dir.join(names::TUNE_FILE), &m).unwrap();
        resum_tune(&dir);
        let v = invalid(&dir);
        assert!(v.has(Check::TunePlan), "case {i}:\n{}", v.render(&dir, 50));
    }
}

#[test]
fn tune_arms_run_alike_except_what_their_knobs_change() {
    let t = tempfile::tempdir().unwrap();
    let dir = write_tune(t.path(), "t");
    let screen = dir.join(tune::SCREEN_DIR);
    // A command-line knob's arm on another kernel, on another backing, observed on serial.
    forge(&screen.join("rcu-expedited"), |r, _| {
        r.artifacts.insert(
            "vmlinux".into(),
            truecold_proof::digest::sha256_hex(b"another vmlinux"),
        );
    });
    forge(&screen.join("mitigations-off"), |r, _| {
        r.configuration.backing = "anon".into();
    });
    forge_with(&screen.join("tsc-reliable"), false, |r, _| {
        r.contract.observer = truecold_proof::schema::Observer::Serial;
    });
    // A bundle that applied other knobs than its arm's.
    forge(&screen.join("nokaslr"), |r, _| {
        r.configuration.knobs = vec![Knob::TscReliable];
    });
    resum_arms(&screen);
    let v = invalid(&screen);
    assert_reason(
        &v,
        &screen,
        Check::ArmsMismatch,
        "arm `nokaslr`'s bundle applied knobs [tsc-reliable], the plan says [nokaslr]",
    );
    assert_reason(
        &v,
        &screen,
        Check::ArmsMismatch,
        "arm `rcu-expedited`: vmlinux digest",
    );
    assert_reason(
        &v,
        &screen,
        Check::ArmsMismatch,
        "arm `mitigations-off`: backing anon, the baseline's with its knobs applied is thp",
    );
    assert_reason(
        &v,
        &screen,
        Check::ArmsMismatch,
        "every arm of a tune phase is observed at `vm-exit`",
    );
    // The tune directory reports them under its phase.
    resum_tune(&dir);
    assert_reason(
        &invalid(&dir),
        &dir,
        Check::ArmsMismatch,
        "screen: arm `rcu-expedited`: vmlinux digest",
    );
}

#[test]
fn recommended_is_what_the_winners_make_and_report_regenerates_it() {
    let t = tempfile::tempdir().unwrap();
    let dir = write_tune(t.path(), "t");
    let rd = dir.join(tune::RECOMMENDED_DIR);
    let files: Vec<String> = {
        let mut v: Vec<String> = fs::read_dir(&rd)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        files,
        [
            "cmdline.txt",
            "kernel.fragment",
            "reproduce.sh",
            "vmm-flags.txt"
        ]
    );
    let sums = read(&dir, "SHA256SUMS");
    for f in tune::RECOMMENDED_FILES {
        assert!(
            sums.contains(&format!("  recommended/{f}\n")),
            "{f}: {sums}"
        );
    }
    let cmd = read(&rd, tune::CMDLINE_FILE);
    assert!(
        cmd.contains(
            "# rcu-expedited (truecold run --cmdline-extra)\n+rcupdate.rcu_expedited=1\n\
             # mitigations-off (truecold run --cmdline-extra)\n+mitigations=off\n"
        ),
        "{cmd}"
    );
    assert!(read(&rd, tune::FRAGMENT_FILE).contains("# none: no Kconfig knob won"));
    assert!(read(&rd, tune::VMM_FLAGS_FILE).contains("# none: no VMM knob won"));
    let sh = read(&rd, tune::REPRODUCE_FILE);
    assert!(
        sh.contains(
            "exec truecold run --nested --mode sequential --count 20 --vcpus 2 --mem-mib 16384 \
             --backing thp --deadline-ms 1000 --kill-grace-ms 500 --cmdline-extra \
             'rcupdate.rcu_expedited=1 mitigations=off' \"$@\"\n"
        ),
        "{sh}"
    );
    let j: serde_json::Value = serde_json::from_str(&read(&dir, names::TUNE_FILE)).unwrap();
    assert_eq!(j["schema"], 2);
    assert_eq!(j["invocation"]["argv"][1], "tune");
    assert_eq!(j["invocation"]["options"]["guest"], "nested");
    assert!(read(&dir, "README.md").contains("`sh recommended/reproduce.sh`"));
    // Edited (and re-summed): not what the winners make; `report` makes it again.
    fs::write(rd.join(tune::CMDLINE_FILE), "+nokaslr\n").unwrap();
    resum_tune(&dir);
    assert_reason(
        &invalid(&dir),
        &dir,
        Check::TuneRecommended,
        "`recommended/cmdline.txt` is not what the winners [rcu-expedited, mitigations-off] make",
    );
    let (code, out, err) = run_cli(&["report".as_ref(), dir.as_os_str()]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(read(&rd, tune::CMDLINE_FILE), cmd);
    assert!(verify_dir(&dir).is_valid());
    // Not re-summed: the digest says so.
    fs::write(rd.join(tune::REPRODUCE_FILE), "#!/bin/sh\n").unwrap();
    assert!(invalid(&dir).has(Check::DigestMismatch));
    // Missing, or a file too many.
    let dir = write_tune(t.path(), "m");
    let rd = dir.join(tune::RECOMMENDED_DIR);
    fs::remove_file(rd.join(tune::VMM_FLAGS_FILE)).unwrap();
    fs::write(rd.join("notes.txt"), "x\n").unwrap();
    resum_tune(&dir);
    let v = invalid(&dir);
    assert_reason(
        &v,
        &dir,
        Check::TuneRecommended,
        "`recommended/vmm-flags.txt` is missing",
    );
    assert_reason(
        &v,
        &dir,
        Check::TuneRecommended,
        "`recommended/notes.txt` is not a file",
    );
    let dir = write_tune(t.path(), "d");
    fs::remove_dir_all(dir.join(tune::RECOMMENDED_DIR)).unwrap();
    resum_tune(&dir);
    assert_reason(
        &invalid(&dir),
        &dir,
        Check::TuneRecommended,
        "`recommended/` is missing",
    );
    // An invocation whose options are not the tune's context.
    let dir = write_tune(t.path(), "i");
    edit_tune_json(&dir, |j| j["invocation"]["options"]["vcpus"] = 4.into());
    assert_reason(&invalid(&dir), &dir, Check::TunePlan, "are not the context");
}

#[test]
fn a_schema_1_tune_has_no_recommended_directory() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("old");
    fs::create_dir(&dir).unwrap();
    let mut p = plan();
    p.invocation = None;
    let screen_arms = tune::screen_arms(&p.knobs);
    write_phase(
        &dir.join(tune::SCREEN_DIR),
        &screen_arms,
        p.rounds_screen,
        3,
        &["nokaslr"],
    );
    let t2 = tune_arms(&dir.join(tune::SCREEN_DIR), &screen_arms);
    let s = tune::screen(p.rule, p.seed, &t2[0], &t2[1..]);
    write_phase(
        &dir.join(tune::CONFIRM_DIR),
        &tune::confirm_arms(&s.recommended),
        p.rounds_confirm,
        4,
        &[],
    );
    let v = tune::write_tune(&dir, &p).unwrap();
    assert!(v.is_valid(), "{}", v.render(&dir, 50));
    let j: serde_json::Value = serde_json::from_str(&read(&dir, names::TUNE_FILE)).unwrap();
    assert_eq!(j["schema"], 1);
    assert!(j.get("invocation").is_none());
    assert!(!dir.join(tune::RECOMMENDED_DIR).exists());
    // Claiming schema 2 without an invocation, or a recommended/ in a schema-1 tune.
    let original = fs::read(dir.join(names::TUNE_FILE)).unwrap();
    edit_tune_json(&dir, |j| j["schema"] = 2.into());
    assert_reason(
        &invalid(&dir),
        &dir,
        Check::TunePlan,
        "schema 2 without an invocation",
    );
    fs::write(dir.join(names::TUNE_FILE), original).unwrap();
    resum_tune(&dir);
    assert!(verify_dir(&dir).is_valid());
    fs::create_dir(dir.join(tune::RECOMMENDED_DIR)).unwrap();
    fs::write(dir.join("recommended/cmdline.txt"), "+x\n").unwrap();
    resum_tune(&dir);
    assert_reason(&invalid(&dir), &dir, Check::TuneRecommended, "of schema 1");
}

/// Rewrites the guest command line an arm's bundle records (`result.json` and
/// `cmdline.txt` alike) to `to`.
fn set_guest_cmdline(arm: &Path, to: &str) {
    let (r, _) = truecold_proof::read_bundle(arm).unwrap();
    let old = r.configuration.cmdline.clone();
    let c = read(arm, "cmdline.txt").replace(&format!("\n{old}\n"), &format!("\n{to}\n"));
    fs::write(arm.join("cmdline.txt"), c).unwrap();
    let to = to.to_string();
    forge(arm, move |r, _| r.configuration.cmdline = to);
}

#[test]
fn each_arm_applies_exactly_its_knobs() {
    let t = tempfile::tempdir().unwrap();
    // A phase with one knob of each kind: every arm as its knobs make it verifies.
    let arms = tune::screen_arms(&[Knob::Hz100, Knob::Console, Knob::BzImage, Knob::PinVcpus]);
    let phase = t.path().join("p");
    write_phase(&phase, &arms, 6, 5, &[]);
    let v = verify_dir(&phase);
    assert!(v.is_valid(), "{}", v.render(&phase, 50));
    // The command-line tune: an arm with a word no knob names, a knob that did nothing.
    let dir = write_tune(t.path(), "t");
    let screen = dir.join(tune::SCREEN_DIR);
    set_guest_cmdline(
        &screen.join("rcu-expedited"),
        &format!("{} rcupdate.rcu_expedited=1 quiet", GUEST_CMDLINE),
    );
    set_guest_cmdline(&screen.join("mitigations-off"), GUEST_CMDLINE);
    resum_arms(&screen);
    let v = invalid(&screen);
    assert_reason(
        &v,
        &screen,
        Check::KnobApplied,
        "arm `rcu-expedited`: its guest command line is not the baseline's with its knobs' \
         words [rcu-expedited]: +quiet against that",
    );
    assert_reason(
        &v,
        &screen,
        Check::KnobApplied,
        "arm `mitigations-off`: its guest command line is not the baseline's with its knobs' \
         words [mitigations-off]: -mitigations=off against that",
    );
    resum_tune(&dir);
    assert_reason(
        &invalid(&dir),
        &dir,
        Check::KnobApplied,
        "screen: arm `mitigations-off`",
    );
    // A Kconfig knob whose arm booted the baseline's config, and one that did nothing (the
    // baseline's config already sets its fragment); a VMM knob missing from the command
    // that ran (no `--console`, vmlinux instead of the bzImage).
    let hz = phase.join("hz-100");
    let base_config = fs::read(phase.join("baseline/config")).unwrap();
    let hz_config = fs::read(hz.join("config")).unwrap();
    for (arm, config) in [(&hz, &base_config), (&phase.join("baseline"), &hz_config)] {
        fs::write(arm.join("config"), config).unwrap();
        let digest = truecold_proof::digest::sha256_hex(config);
        forge(arm, |r, _| {
            r.artifacts.insert("config".into(), digest);
        });
    }
    for (arm, from, to) in [
        ("console", " --console --request-ns", " --request-ns"),
        ("bzimage", "out/guest/bzImage", "out/guest/vmlinux"),
        ("pin-vcpus", " --pin-vcpus --request-ns", " --request-ns"),
        // The baseline pinned: a flag no knob of it asks for.
        ("baseline", " --request-ns", " --pin-vcpus --request-ns"),
    ] {
        let d = phase.join(arm);
        let c = read(&d, "cmdline.txt").replace(from, to);
        fs::write(d.join("cmdline.txt"), c).unwrap();
        forge(&d, |_, _| {});
    }
    resum_arms(&phase);
    let v = invalid(&phase);
    for want in [
        "arm `hz-100`: knob `hz-100` sets CONFIG_HZ_100=y; the arm's config has (not set)",
        "arm `hz-100`: knob `hz-100` did nothing",
        "arm `console`: knob `console`: its VMM command has no `--console`",
        "arm `bzimage`: knob `bzimage`: its VMM command boots `out/guest/vmlinux`, not the bzImage",
        "arm `pin-vcpus`: knob `pin-vcpus`: its VMM command has no `--pin-vcpus`",
        "arm `baseline`: the baseline's VMM command has `--pin-vcpus`",
    ] {
        assert_reason(&v, &phase, Check::KnobApplied, want);
    }
}

/// The user's config of [`write_own_tune`]: the fixture's baseline config holds all but
/// `CONFIG_GONE`.
const USER_CONFIG: &[u8] = b"CONFIG_64BIT=y\nCONFIG_PVH=y\nCONFIG_GONE=y\n";

/// A tune over the user's kernel: `tune.json` records it, `user-kernel.config` beside it.
fn write_own_tune(parent: &Path, name: &str) -> PathBuf {
    use truecold_proof::kconfig::{ConfigForm, UserKernel, USER_KERNEL_FILE};
    let mut p = plan();
    let inv = p.invocation.as_mut().unwrap();
    inv.argv
        .extend(["--kernel-config".to_string(), "fc.config".to_string()]);
    inv.options.kernel = Some(UserKernel {
        form: ConfigForm::Full,
        sha256: truecold_proof::digest::sha256_hex(USER_CONFIG),
        given_as: "fc.config".into(),
        source: None,
        not_carried: vec!["CONFIG_GONE: given y, gone".into()],
    });
    write_tune_of(parent, name, p, |d| {
        fs::write(d.join(USER_KERNEL_FILE), USER_CONFIG).unwrap()
    })
}

#[test]
fn a_tune_over_the_users_kernel_records_it_and_every_tampering_is_caught() {
    use truecold_proof::kconfig::USER_KERNEL_FILE;
    let t = tempfile::tempdir().unwrap();
    let dir = write_own_tune(t.path(), "own");
    let r = read(&dir, "recommended/reproduce.sh");
    assert!(
        r.contains("--kernel-config \"$here/../user-kernel.config\""),
        "{r}"
    );
    let readme = read(&dir, "README.md");
    assert!(
        readme.contains("- kernel: yours, `user-kernel.config` (`--kernel-config` fc.config")
            && readme
                .contains("1 symbol(s) did not carry over into the resolved config: CONFIG_GONE"),
        "{readme}"
    );
    let fresh = |n: &str| {
        let d = t.path().join(n);
        let src = dir.clone();
        copy_tree(&src, &d);
        d
    };
    // The file changed (and re-summed): not the recorded digest, and its not-carried list
    // is no longer the record's.
    let d = fresh("edited");
    fs::write(d.join(USER_KERNEL_FILE), b"CONFIG_64BIT=y\nCONFIG_PVH=y\n").unwrap();
    resum_tune(&d);
    let v = invalid(&d);
    assert_reason(&v, &d, Check::UserKernel, "the record says");
    assert_reason(&v, &d, Check::UserKernel, "did not carry over");
    // The file gone.
    let d = fresh("gone");
    fs::remove_file(d.join(USER_KERNEL_FILE)).unwrap();
    resum_tune(&d);
    assert_reason(&invalid(&d), &d, Check::UserKernel, "is missing");
    // The record's not-carried list edited.
    let d = fresh("list");
    edit_tune_json(&d, |j| {
        j["invocation"]["options"]["kernel"]["not_carried"] = serde_json::json!([]);
    });
    assert_reason(&invalid(&d), &d, Check::UserKernel, "did not carry over");
    // The digest edited.
    let d = fresh("digest");
    edit_tune_json(&d, |j| {
        j["invocation"]["options"]["kernel"]["sha256"] = "11".repeat(32).into();
    });
    assert_reason(&invalid(&d), &d, Check::UserKernel, "the record says");
    // A knob recorded as already set that the baseline's config does not set, and one that
    // is screened too.
    let d = fresh("already");
    edit_tune_json(&d, |j| {
        j["invocation"]["options"]["already_set"] = serde_json::json!(["hz-100", "tsc-reliable"]);
    });
    let v = invalid(&d);
    assert_reason(
        &v,
        &d,
        Check::UserKernel,
        "knob `hz-100` is recorded as already set",
    );
    assert_reason(&v, &d, Check::UserKernel, "both screened and recorded");
    // The record removed: the file is there without one (and reproduce.sh no longer what the
    // record makes).
    let d = fresh("norecord");
    edit_tune_json(&d, |j| {
        j["invocation"]["options"]
            .as_object_mut()
            .unwrap()
            .remove("kernel");
    });
    let v = invalid(&d);
    assert_reason(&v, &d, Check::UserKernel, "names no user's kernel");
    assert_reason(&v, &d, Check::TuneRecommended, "reproduce.sh");
    // A tune without a user's kernel with the file added.
    let plain = write_tune(t.path(), "plain");
    fs::write(plain.join(USER_KERNEL_FILE), USER_CONFIG).unwrap();
    resum_tune(&plain);
    assert_reason(
        &invalid(&plain),
        &plain,
        Check::UserKernel,
        "names no user's kernel",
    );
}

/// The boot-hash knobs and `rodata-off` (command-line knobs of issue 25): a phase of them
/// verifies, each arm's command line the baseline's plus its one word, and an arm without
/// its word is caught.
#[test]
fn the_boot_hash_and_rodata_knobs_verify_as_their_words() {
    let t = tempfile::tempdir().unwrap();
    let knobs = [
        Knob::DhashEntries,
        Knob::IhashEntries,
        Knob::ThashEntries,
        Knob::UhashEntries,
        Knob::RodataOff,
    ];
    let arms = tune::screen_arms(&knobs);
    let phase = t.path().join("p");
    write_phase(&phase, &arms, 6, 5, &[]);
    let v = verify_dir(&phase);
    assert!(v.is_valid(), "{}", v.render(&phase, 50));
    set_guest_cmdline(&phase.join("dhash-entries"), GUEST_CMDLINE);
    set_guest_cmdline(
        &phase.join("rodata-off"),
        &format!("{GUEST_CMDLINE} rodata=off ihash_entries=65536"),
    );
    resum_arms(&phase);
    let v = invalid(&phase);
    assert_reason(
        &v,
        &phase,
        Check::KnobApplied,
        "arm `dhash-entries`: its guest command line is not the baseline's with its knobs' \
         words [dhash-entries]: -dhash_entries=131072 against that",
    );
    assert_reason(
        &v,
        &phase,
        Check::KnobApplied,
        "arm `rodata-off`: its guest command line is not the baseline's with its knobs' \
         words [rodata-off]: +ihash_entries=65536 against that",
    );
}

/// A tune with a proposal (schema 3): it verifies, its README says where each proposal came
/// from and what the screen made of it, and a proposal that is not a screened knob, or a
/// schema that does not hold proposals, is caught.
#[test]
fn proposals_are_recorded_with_their_sources_and_checked() {
    let t = tempfile::tempdir().unwrap();
    let mut p = plan();
    p.proposals = vec![tune::Proposal {
        knob: Knob::TscReliable,
        source: tune::ProposalSource {
            attribution: "results/x-attribution-rip".into(),
            instrument: truecold_proof::attribution::Instrument::Rip,
            evidence: tune::Evidence::Function,
            name: "check_tsc_sync_source".into(),
            ns: 4_200_000,
            why: "TSC synchronisation and watchdog checks, which tsc=reliable skips".into(),
        },
    }];
    // A proposal the contract catches: the fixture's `nokaslr` arm fails every 7th launch.
    let mut breaks = p.proposals[0].clone();
    breaks.knob = Knob::Nokaslr;
    breaks.source.name = "kaslr_init".into();
    p.proposals.push(breaks);
    let mut off = p.proposals[0].clone();
    off.knob = Knob::parse("kconfig-off-SERIO_I8042").unwrap();
    off.source.name = "i8042_init".into();
    p.unbuilt = vec![tune::Unbuilt {
        proposal: off,
        why: "the kernel for kconfig-off-SERIO_I8042: a symbol did not end up as requested".into(),
    }];
    // Each Kconfig arm's kernel: built (its wall time) or found in the cache, said so.
    p.kernel_builds = vec![
        tune::KernelBuild {
            knobs: "no-printk".into(),
            wall_ms: 61_234,
            cached: false,
        },
        tune::KernelBuild {
            knobs: "hz-100".into(),
            wall_ms: 15,
            cached: true,
        },
    ];
    let dir = write_tune_of(t.path(), "t", p, |_| {});
    let j: serde_json::Value = serde_json::from_str(&read(&dir, names::TUNE_FILE)).unwrap();
    assert_eq!(j["schema"], 3);
    assert!(j["kernel_builds"][0].get("cached").is_none());
    assert_eq!(j["kernel_builds"][1]["cached"], true);
    let readme = read(&dir, "README.md");
    assert!(
        readme.contains("| `no-printk` | 61.2 s |\n| `hz-100` | 0.0 s (cached) |"),
        "{readme}"
    );
    assert!(read(&dir, "README.md").contains(
        "- `kconfig-off-SERIO_I8042` (from function `i8042_init`, 4.200 ms) was proposed but not \
         screened: its kernel could not be got: the kernel for kconfig-off-SERIO_I8042"
    ));
    assert_eq!(j["proposals"][0]["knob"], "tsc-reliable");
    assert_eq!(j["proposals"][0]["source"]["name"], "check_tsc_sync_source");
    let readme = read(&dir, "README.md");
    assert!(readme.contains("## Proposals"), "{readme}");
    assert!(
        readme.contains(
            "| tsc-reliable | function `check_tsc_sync_source` (rip, results/x-attribution-rip) | 4.200 ms |"
        ),
        "{readme}"
    );
    // The plan's tsc-reliable is slower (×1.06): the screen's verdict is in the row.
    assert!(readme.contains("| slower |"), "{readme}");
    assert!(
        readme.contains("| nokaslr | function `kaslr_init` (rip, results/x-attribution-rip) | 4.200 ms | TSC synchronisation and watchdog checks, which tsc=reliable skips | the proposal broke strict-ready (breaks strict-ready: "),
        "{readme}"
    );
    let original = fs::read(dir.join(names::TUNE_FILE)).unwrap();
    edit_tune_json(&dir, |j| j["proposals"][0]["knob"] = "hz-100".into());
    assert_reason(
        &invalid(&dir),
        &dir,
        Check::TunePlan,
        "proposal `hz-100` is not a screened knob",
    );
    fs::write(dir.join(names::TUNE_FILE), &original).unwrap();
    edit_tune_json(&dir, |j| {
        j["unbuilt"][0]["proposal"]["knob"] = "tsc-reliable".into();
    });
    let v = invalid(&dir);
    for words in [
        "proposal `tsc-reliable` is recorded as not built but was screened",
        "proposal `tsc-reliable` is recorded as not built: only a Kconfig knob's kernel",
    ] {
        assert_reason(&v, &dir, Check::TunePlan, words);
    }
    fs::write(dir.join(names::TUNE_FILE), &original).unwrap();
    edit_tune_json(&dir, |j| j["schema"] = 2.into());
    assert_reason(
        &invalid(&dir),
        &dir,
        Check::TunePlan,
        "schema 2 with an invocation and 3 proposals",
    );
    fs::write(dir.join(names::TUNE_FILE), &original).unwrap();
    resum_tune(&dir);
    assert!(verify_dir(&dir).is_valid());
}

/// Proposed knobs outside the catalogue run as their names say: `initcall_blacklist=` on
/// the arm's command line, `# CONFIG_X is not set` in its kernel's config; an arm that did
/// not apply its proposal is caught like any knob's. (The fixture's kernel config has two
/// symbols, `64BIT` and `PVH`: a Kconfig arm must change the baseline's config, so the
/// proposal turns one off; the verifier holds the arm to its fragment whatever the symbol.)
#[test]
fn proposed_knobs_verify_as_their_change() {
    let t = tempfile::tempdir().unwrap();
    let knobs = [
        Knob::parse("initcall-blacklist-i8042_init").unwrap(),
        Knob::parse("kconfig-off-PVH").unwrap(),
    ];
    let arms = tune::screen_arms(&knobs);
    let phase = t.path().join("p");
    write_phase(&phase, &arms, 6, 5, &[]);
    let v = verify_dir(&phase);
    assert!(v.is_valid(), "{}", v.render(&phase, 50));
    set_guest_cmdline(&phase.join("initcall-blacklist-i8042_init"), GUEST_CMDLINE);
    resum_arms(&phase);
    assert_reason(
        &invalid(&phase),
        &phase,
        Check::KnobApplied,
        "-initcall_blacklist=i8042_init against that",
    );
}
