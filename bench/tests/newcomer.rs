//! A newcomer's first path, with the binaries a user types: the README's quick start, its
//! commands run as written ([`the_readmes_quick_start_runs_as_written`]: whatever the README
//! says, read from its fenced `sh` blocks), then `truecold run -n 20 --probe`,
//! `truecold-proof verify` on the bundle, and `truecold-proof compare` — the printed
//! summaries' shape and the exit codes, not the figures (a probe campaign's latencies are
//! the host's); and every `-h` and `--help` of both binaries within 100 columns.
//!
//! Needs /dev/kvm and the debug `truecold-vmm` and `truecold-proof` beside `truecold`
//! (`cargo build --workspace`, which `scripts/test.sh` runs first). Missing any FAILS.

mod common;

use common::{require_kvm, vmm_next_to};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn truecold() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_truecold"))
}

/// The debug `truecold-proof` beside `truecold`; FAILS, naming the build, when missing.
fn proof() -> PathBuf {
    let p = truecold()
        .parent()
        .expect("binary directory")
        .join("truecold-proof");
    assert!(
        p.is_file(),
        "{} is missing: build it first with `cargo build -p truecold-proof` (same \
         CARGO_TARGET_DIR as this test)",
        p.display()
    );
    p
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn run(out: &Path) -> Output {
    Command::new(truecold())
        .args(["run", "-n", "20", "--probe", "--mem-mib", "256"])
        .arg("--deadline-ms")
        .arg("60000")
        .arg("--out")
        .arg(out)
        .arg("--vmm")
        .arg(vmm_next_to(&truecold()))
        .env("CI", "true")
        .output()
        .expect("run truecold")
}

fn proof_cmd(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(proof())
        .args(args)
        .output()
        .expect("run truecold-proof")
}

#[test]
fn run_then_verify_then_compare_say_what_they_did() {
    require_kvm();
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    for dir in [&a, &b] {
        let o = run(dir);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
        // The verdict of its own bundle, the contract in words, the count and the headline.
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].starts_with(&format!("VALID {}: VMM floor (probe guest)", dir.display())),
            "{out}"
        );
        assert!(out.contains("attempts 20, ok 20, failed 0"), "{out}");
        assert!(
            out.contains("request_to_strict_ready (successes): p50 "),
            "{out}"
        );
        assert!(
            out.contains("verify: sha256sum -c --strict SHA256SUMS"),
            "{out}"
        );
        // What it runs, said once before it starts.
        assert!(err.contains("not a Linux boot"), "{err}");
    }
    // verify: VALID, exit 0, the same first line as the run printed.
    let o = proof_cmd(&["verify".as_ref(), a.as_os_str()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.starts_with(&format!("VALID {}: ", a.display())),
        "{out}"
    );
    // compare A with itself: a warning that it is one bundle, and never a regression (no
    // difference, exit 0; or, when the host's noise makes the interval too wide to tell,
    // inconclusive, exit 125).
    let o = proof_cmd(&["compare".as_ref(), a.as_os_str(), a.as_os_str()]);
    let (out, err) = text(&o);
    assert!(matches!(o.status.code(), Some(0 | 125)), "{out}\n{err}");
    assert!(
        out.contains("A and B are the same campaign"),
        "{out}\n{err}"
    );
    // compare A with B: both paths, the headline table, one outcome line whose word is the
    // exit code's (the verdict itself is the host's to decide).
    let o = proof_cmd(&["compare".as_ref(), a.as_os_str(), b.as_os_str()]);
    let (out, err) = text(&o);
    assert!(out.contains(&format!("A: {}", a.display())), "{out}");
    assert!(out.contains(&format!("B: {}", b.display())), "{out}");
    assert!(out.contains("headline"), "{out}");
    let outcome = out
        .lines()
        .find(|l| l.starts_with("outcome: "))
        .unwrap_or_else(|| panic!("no outcome line:\n{out}\n{err}"));
    let want = match o.status.code() {
        Some(0) => "(exit 0)",
        Some(1) => "REGRESSION: B slower than A (exit 1)",
        Some(125) => "inconclusive (exit 125)",
        other => panic!("compare exited {other:?}:\n{out}\n{err}"),
    };
    assert!(outcome.contains(want), "{outcome}");
    assert!(out.lines().all(|l| l.chars().count() <= 100), "{out}");
    // A path that is no bundle: cannot compare, exit 200, and `--json` still answers.
    let missing = t.path().join("missing");
    let o = proof_cmd(&[
        "compare".as_ref(),
        "--json".as_ref(),
        a.as_os_str(),
        missing.as_os_str(),
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(200), "{out}\n{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(j["error"]["message"].is_string(), "{out}");
}

/// The commands of the README's "Quick start" section (from its heading to the next heading
/// of its level): every line of its fenced `sh` blocks, a `\` continuation joined, comments
/// and blank lines left out.
fn quick_start_commands(readme: &str) -> Vec<String> {
    let lines: Vec<&str> = readme.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with('#') && l.trim_start_matches('#').trim() == "Quick start")
        .expect("the README has no `Quick start` heading");
    let level = lines[start].chars().take_while(|&c| c == '#').count();
    let mut out = Vec::new();
    let (mut in_fence, mut in_sh) = (false, false);
    let mut pending = String::new();
    for l in &lines[start + 1..] {
        let t = l.trim_start();
        if !in_fence && t.starts_with('#') && t.chars().take_while(|&c| c == '#').count() <= level {
            break;
        }
        if t.starts_with("```") {
            in_fence = !in_fence;
            in_sh = in_fence && t.trim_start_matches('`').trim() == "sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let code = match l.find(" #") {
            Some(i) if !l[..i].contains('\'') => &l[..i],
            _ => l,
        };
        let code = code.trim();
        if code.is_empty() || code.starts_with('#') {
            continue;
        }
        if let Some(c) = code.strip_suffix('\\') {
            pending.push_str(c.trim_end());
            pending.push(' ');
            continue;
        }
        pending.push_str(code);
        out.push(std::mem::take(&mut pending));
    }
    out
}

/// The README's quick start, run as written with this build's binaries on `PATH` (the
/// repository root the working directory, `/tmp/` a directory of the test's own): every
/// command that runs `truecold` or `truecold-proof` (the ones that build — `scripts/…`,
/// `cargo …`, `export …` — are what made these binaries, and are listed as skipped). Its
/// campaigns must be the probe guest's and small (`--probe`, `-n` at most 100: what runs on
/// any host with a `/dev/kvm`, in a test's time); a campaign must write a VALID bundle (exit
/// 0, or 3 when a launch missed its deadline on a busy host), `verify` exit 0, `compare`
/// give a verdict (0, 1 or 125), any other command exit 0.
#[test]
fn the_readmes_quick_start_runs_as_written() {
    require_kvm();
    proof();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let commands = quick_start_commands(&readme);
    let bin_dir = truecold().parent().unwrap().to_path_buf();
    assert!(
        bin_dir.join("truecold-vmm").is_file(),
        "{} has no truecold-vmm: build it first (`cargo build --workspace`)",
        bin_dir.display()
    );
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let t = tempfile::tempdir().unwrap();
    let tmp = format!("{}/", t.path().display());
    let runs = |c: &str| {
        let first = c.split_whitespace().next().unwrap_or("");
        first == "truecold" || first == "truecold-proof"
    };
    let (run, skipped): (Vec<&String>, Vec<&String>) = commands.iter().partition(|c| runs(c));
    eprintln!("quick start: running {run:?}; skipped (they build): {skipped:?}");
    assert!(
        run.iter().any(|c| c.starts_with("truecold run ")),
        "the quick start runs no campaign: {commands:?}"
    );
    assert!(
        run.iter().any(|c| c.starts_with("truecold-proof verify ")),
        "the quick start verifies nothing: {commands:?}"
    );
    for c in run {
        for part in c.split("&&").map(str::trim) {
            if part.starts_with("truecold run") {
                let words: Vec<&str> = part.split_whitespace().collect();
                assert!(words.contains(&"--probe"), "not the probe guest: {part}");
                let n = words
                    .windows(2)
                    .find(|w| w[0] == "-n" || w[0] == "--count")
                    .and_then(|w| w[1].parse::<u64>().ok());
                assert!(n.is_some_and(|n| n <= 100), "not a small -n: {part}");
            }
        }
        let line = c.replace("/tmp/", &tmp);
        let o = Command::new("sh")
            .arg("-c")
            .arg(&line)
            .current_dir(&root)
            .env("PATH", &path)
            .env("CI", "true")
            .output()
            .expect("run sh");
        let (out, err) = text(&o);
        let code = o.status.code();
        let last = c.split("&&").last().unwrap_or(c).trim();
        let ok = if last.starts_with("truecold run") {
            matches!(code, Some(0 | 3)) && out.starts_with("VALID ")
        } else if last.starts_with("truecold-proof compare") {
            matches!(code, Some(0 | 1 | 125)) && out.contains("outcome: ")
        } else {
            code == Some(0)
        };
        assert!(
            ok,
            "`{c}` (as run: `{line}`) exited {code:?}:\n{out}\n{err}"
        );
    }
}

/// Every `-h` and `--help` of both binaries, of every visible subcommand, fits 100 columns
/// when piped.
#[test]
fn every_help_fits_100_columns() {
    use clap::CommandFactory;
    let mut paths: Vec<Vec<String>> = vec![vec![]];
    fn walk(c: &clap::Command, at: Vec<String>, out: &mut Vec<Vec<String>>) {
        for s in c.get_subcommands().filter(|s| !s.is_hide_set()) {
            let mut p = at.clone();
            p.push(s.get_name().to_owned());
            out.push(p.clone());
            walk(s, p, out);
        }
    }
    walk(&truecold_bench::cli::Cli::command(), vec![], &mut paths);
    let mut checked = 0;
    for (bin, subs) in [
        (truecold(), paths.clone()),
        (
            proof(),
            [
                vec![],
                vec!["verify"],
                vec!["compare"],
                vec!["report"],
                vec!["sign"],
            ]
            .iter()
            .map(|p| p.iter().map(|s| s.to_string()).collect())
            .collect(),
        ),
    ] {
        for sub in subs {
            for h in ["-h", "--help"] {
                let o = Command::new(&bin)
                    .args(&sub)
                    .arg(h)
                    .env_remove("COLUMNS")
                    .output()
                    .unwrap();
                assert_eq!(o.status.code(), Some(0), "{sub:?} {h}");
                let (out, _) = text(&o);
                for l in out.lines() {
                    assert!(
                        l.chars().count() <= 100,
                        "{} {sub:?} {h}: {} columns: {l}",
                        bin.display(),
                        l.chars().count()
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 20, "{checked} helps checked");
}

/// `truecold run` with `extra` flags (5 probe launches into `out`).
fn run_with(out: &Path, extra: &[&str]) -> Output {
    Command::new(truecold())
        .args(["run", "-n", "5", "--probe", "--mem-mib", "256"])
        .args(["--deadline-ms", "60000"])
        .args(extra)
        .arg("--out")
        .arg(out)
        .arg("--vmm")
        .arg(vmm_next_to(&truecold()))
        .env("CI", "true")
        .output()
        .expect("run truecold")
}

/// `run --json`: stdout is one JSON document and nothing else (the human summary goes to
/// stderr), its figures those of the bundle as `truecold-proof verify --json` reads them;
/// `-q` leaves only the verdict line (and, with `--json`, only the document).
#[test]
fn run_json_and_quiet_print_what_a_script_and_a_person_need() {
    require_kvm();
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("j");
    let o = run_with(&dir, &["--json"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let j: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("stdout is not one JSON: {e}\n{out}"));
    assert_eq!(j["bundle"], dir.display().to_string(), "{out}");
    assert_eq!(j["valid"], true, "{out}");
    assert_eq!(j["exit"], 0, "{out}");
    assert_eq!(
        (&j["attempts"], &j["ok"], &j["failed"]),
        (&5.into(), &5.into(), &0.into())
    );
    assert_eq!(j["errors"], serde_json::json!({}), "{out}");
    assert_eq!(j["headline"]["metric"], "request_to_strict_ready", "{out}");
    assert!(
        matches!(j["headline"]["clock"].as_str(), Some("wall" | "virtual")),
        "{out}"
    );
    let h = |k: &str| {
        j["headline"][k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k}: {out}"))
    };
    assert!(
        h("p50_ns") <= h("p99_ns") && h("p99_ns") <= h("max_ns"),
        "{out}"
    );
    assert_eq!(j["stopped"], serde_json::Value::Null, "{out}");
    assert_eq!(
        (&j["incomplete"], &j["interrupted"]),
        (&false.into(), &false.into())
    );
    assert!(j["host_warnings"].is_array(), "{out}");
    let v = &j["verdict"];
    assert_eq!(
        (&v["kind"], &v["valid"], &v["exit"]),
        (&"bundle".into(), &true.into(), &0.into())
    );
    assert_eq!(v["reasons"], serde_json::json!([]), "{out}");
    assert_eq!(
        v["summary"]["headline"]["successes"]["p50_ns"],
        j["headline"]["p50_ns"]
    );
    // The human summary went to stderr.
    assert!(err.contains(&format!("VALID {}: ", dir.display())), "{err}");
    assert!(err.contains("attempts 5, ok 5, failed 0"), "{err}");
    // verify --json reads the same verdict from the bundle.
    let o = proof_cmd(&["verify".as_ref(), "--json".as_ref(), dir.as_os_str()]);
    let (vout, verr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{vout}\n{verr}");
    let vj: serde_json::Value = serde_json::from_str(&vout).unwrap();
    assert_eq!(&vj, v, "run --json's verdict is verify --json's");

    // -q: the verdict line alone on stdout; nothing on stderr (no progress, no notes, no
    // warnings, though this host has some: `host_warnings` above).
    let dir = t.path().join("q");
    let o = run_with(&dir, &["-q"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(
        out.starts_with(&format!("VALID {}: ", dir.display())),
        "{out}"
    );
    assert_eq!(err, "", "-q printed on stderr");
    // -q --json: the document alone.
    let dir = t.path().join("qj");
    let o = run_with(&dir, &["--quiet", "--json"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert_eq!(err, "", "-q --json printed on stderr");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["bundle"], dir.display().to_string());
    // Nothing written (a flag combination the plan refuses: a usage error found after the
    // parse): exit 125, an `error` document of kind `usage`.
    let o = run_with(&t.path().join("none"), &["--json", "--rate", "5"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(125), "{out}\n{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert_eq!(j["error"]["kind"], "usage", "{out}");
    assert_eq!(j["exit"], 125, "{out}");
    // Nothing written for a runtime reason (the bundle's place is taken): exit 1, kind
    // `nothing_written`.
    let taken = t.path().join("taken");
    std::fs::create_dir(&taken).unwrap();
    let o = run_with(&taken, &["--json"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert_eq!(j["error"]["kind"], "nothing_written", "{out}");
    assert_eq!(j["exit"], 1, "{out}");
    assert!(err.contains("truecold: error: "), "{err}");
    // A usage error with --json: exit 125, an `error` document of kind `usage`, clap's text
    // still on stderr.
    let o = run_with(&t.path().join("u"), &["--json", "--bogus"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(125), "{out}\n{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert_eq!(j["error"]["kind"], "usage", "{out}");
    assert!(
        j["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("--bogus")),
        "{out}"
    );
    assert_eq!(j["exit"], 125, "{out}");
    assert!(err.contains("--bogus"), "{err}");
    // Without -q the plain progress (CI set) starts with no rate or ETA before the first
    // launch, and never says `0/5`.
    let dir = t.path().join("p");
    let (_, err) = text(&run_with(&dir, &[]));
    assert!(!err.contains(" 0/5 "), "{err}");
    assert!(err.contains("[probe floor] 5/5 done, "), "{err}");
}

/// A failing campaign with `--json`: exit 3, the document says so, with the error kinds.
#[test]
fn run_json_counts_failures_by_kind() {
    require_kvm();
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("f");
    // A deadline no probe boot meets: every launch fails `deadline`; the fail-fast rule
    // stops after 2.
    let o = Command::new(truecold())
        .args([
            "run",
            "-n",
            "5",
            "--probe",
            "--mem-mib",
            "256",
            "--deadline-ms",
            "1",
        ])
        .args(["--stop-after", "2", "--json", "--out"])
        .arg(&dir)
        .arg("--vmm")
        .arg(vmm_next_to(&truecold()))
        .env("CI", "true")
        .output()
        .expect("run truecold");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{out}\n{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert_eq!(j["exit"], 3, "{out}");
    assert_eq!(j["valid"], true, "{out}");
    assert_eq!(j["failed"], 2, "{out}");
    assert_eq!(j["errors"], serde_json::json!({ "deadline": 2 }), "{out}");
    assert_eq!(
        j["stopped"],
        serde_json::json!({ "after": 2, "kind": "deadline" }),
        "{out}"
    );
    assert_eq!(j["incomplete"], true, "{out}");
    assert_eq!(j["headline"]["p50_ns"], serde_json::Value::Null, "{out}");
    assert!(err.contains("launch(es) failed (exit 3"), "{err}");
}
