//! A newcomer's first path, with the binaries a user types: `truecold run -n 20 --probe`,
//! `truecold-proof verify` on the bundle, and `truecold-proof compare` — the printed
//! summaries' shape and the exit codes, not the figures (a probe campaign's latencies are
//! the host's).
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
        Some(1) => "REGRESSION (exit 1)",
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
