//! The `truecold-proof` binary: exit codes and output.
mod common;

use common::*;
use std::fs;
use std::process::Command;

fn run(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_truecold-proof"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn verify_exit_codes() {
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::linux(30).write(t.path(), "b");
    let (code, out, _) = run(&["verify".as_ref(), dir.as_os_str()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("VALID"), "{out}");
    fs::write(dir.join("extra"), "x").unwrap();
    let (code, out, _) = run(&["verify".as_ref(), dir.as_os_str()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("[FileUnlisted]"), "{out}");
    let (code, out, _) = run(&["verify".as_ref(), t.path().join("missing").as_os_str()]);
    assert_eq!(code, 2, "{out}");
}

#[test]
fn compare_exit_codes_for_git_bisect() {
    let t = tempfile::tempdir().unwrap();
    let a = Fixture::linux(200).write(t.path(), "a");
    let mut fb = Fixture::linux(200);
    fb.seed = 2;
    fb.median_ns = 30e6 * 1.10;
    let b = fb.write(t.path(), "b");
    let mut fc = Fixture::linux(200);
    fc.seed = 3;
    let c = fc.write(t.path(), "c");
    let (code, out, err) = run(&["compare".as_ref(), a.as_os_str(), b.as_os_str()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("REGRESSION"), "{out}");
    let (code, out, err) = run(&[
        "compare".as_ref(),
        a.as_os_str(),
        c.as_os_str(),
        "--json".as_ref(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["outcome"], "no_regression");
    let (code, out, err) = run(&[
        "compare".as_ref(),
        b.as_os_str(),
        a.as_os_str(),
        "--markdown".as_ref(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("improved"), "{out}");
    // Too few samples: inconclusive.
    let small_a = Fixture::linux(10).write(t.path(), "sa");
    let mut fsb = Fixture::linux(10);
    fsb.seed = 9;
    let small_b = fsb.write(t.path(), "sb");
    let (code, out, err) = run(&["compare".as_ref(), small_a.as_os_str(), small_b.as_os_str()]);
    assert_eq!(code, 125, "{out}{err}");
    // Probe vs Linux: refused with the reason, 125; allowed with the flag.
    let p = Fixture::probe(200).write(t.path(), "p");
    let (code, _, err) = run(&["compare".as_ref(), a.as_os_str(), p.as_os_str()]);
    assert_eq!(code, 125);
    assert!(
        err.contains("not comparable") && err.contains("contract"),
        "{err}"
    );
    let (code, out, err) = run(&[
        "compare".as_ref(),
        a.as_os_str(),
        p.as_os_str(),
        "--allow-mismatch".as_ref(),
    ]);
    assert_ne!(code, 125, "{out}{err}");
    assert!(out.contains("WARNING (allowed mismatch)"), "{out}");
    // An invalid bundle: 125, with the verifier's reasons.
    fs::write(c.join("extra"), "x").unwrap();
    let (code, _, err) = run(&["compare".as_ref(), a.as_os_str(), c.as_os_str()]);
    assert_eq!(code, 125);
    assert!(err.contains("FileUnlisted"), "{err}");
}

#[test]
fn report_regenerates_byte_identical_files() {
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::probe(25).write(t.path(), "b");
    let before = fs::read(dir.join("README.md")).unwrap();
    fs::remove_file(dir.join("README.md")).unwrap();
    let (code, out, err) = run(&["report".as_ref(), dir.as_os_str()]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(fs::read(dir.join("README.md")).unwrap(), before);
    let (code, _, _) = run(&["verify".as_ref(), dir.as_os_str()]);
    assert_eq!(code, 0);
}
