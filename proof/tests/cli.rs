//! The `truecold-proof` binary: exit codes and output.
mod common;

use common::*;
use std::fs;
use std::process::Command;

#[test]
fn verify_exit_codes() {
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::linux(30).write(t.path(), "b");
    let (code, out, _) = run_cli(&["verify".as_ref(), dir.as_os_str()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("VALID"), "{out}");
    fs::write(dir.join("extra"), "x").unwrap();
    let (code, out, _) = run_cli(&["verify".as_ref(), dir.as_os_str()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("[FileUnlisted]"), "{out}");
    let (code, out, _) = run_cli(&["verify".as_ref(), t.path().join("missing").as_os_str()]);
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
    let (code, out, err) = run_cli(&["compare".as_ref(), a.as_os_str(), b.as_os_str()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("REGRESSION"), "{out}");
    let (code, out, err) = run_cli(&[
        "compare".as_ref(),
        a.as_os_str(),
        c.as_os_str(),
        "--json".as_ref(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["outcome"], "no_regression");
    let (code, out, err) = run_cli(&[
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
    let (code, out, err) = run_cli(&["compare".as_ref(), small_a.as_os_str(), small_b.as_os_str()]);
    assert_eq!(code, 125, "{out}{err}");
    // Probe vs Linux: refused with the reason, 200 (cannot compare); allowed with the flag.
    let p = Fixture::probe(200).write(t.path(), "p");
    let (code, _, err) = run_cli(&["compare".as_ref(), a.as_os_str(), p.as_os_str()]);
    assert_eq!(code, 200, "{err}");
    assert!(
        err.contains("not comparable") && err.contains("contract"),
        "{err}"
    );
    let (code, out, err) = run_cli(&[
        "compare".as_ref(),
        a.as_os_str(),
        p.as_os_str(),
        "--allow-mismatch".as_ref(),
    ]);
    assert_ne!(code, 125, "{out}{err}");
    assert!(out.contains("WARNING (allowed mismatch)"), "{out}");
    // An invalid bundle: 200 (cannot compare), with the verifier's reasons.
    fs::write(c.join("extra"), "x").unwrap();
    let (code, _, err) = run_cli(&["compare".as_ref(), a.as_os_str(), c.as_os_str()]);
    assert_eq!(code, 200, "{err}");
    assert!(err.contains("FileUnlisted"), "{err}");
}

#[test]
fn report_regenerates_byte_identical_files() {
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::probe(25).write(t.path(), "b");
    let before = fs::read(dir.join("README.md")).unwrap();
    fs::remove_file(dir.join("README.md")).unwrap();
    let (code, out, err) = run_cli(&["report".as_ref(), dir.as_os_str()]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(fs::read(dir.join("README.md")).unwrap(), before);
    let (code, _, _) = run_cli(&["verify".as_ref(), dir.as_os_str()]);
    assert_eq!(code, 0);
}

/// Usage errors exit 125 for every subcommand (`git bisect run` skips the commit), never
/// clap's 2; help and version exit 0.
#[test]
fn usage_errors_exit_125() {
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::probe(5).write(t.path(), "b");
    let d = dir.as_os_str();
    for args in [
        vec![],
        vec!["bogus".as_ref()],
        vec!["verify".as_ref()],
        vec!["verify".as_ref(), d, "--bogus".as_ref()],
        vec![
            "verify".as_ref(),
            d,
            "--max-per-kind".as_ref(),
            "x".as_ref(),
        ],
        vec!["verify".as_ref(), d, "--signature".as_ref()],
        vec![
            "verify".as_ref(),
            d,
            "--allowed-signers".as_ref(),
            "f".as_ref(),
        ],
        vec!["compare".as_ref(), d],
        vec!["compare".as_ref(), d, d, "--alpha".as_ref(), "x".as_ref()],
        vec!["report".as_ref()],
        vec!["sign".as_ref(), d],
    ] {
        let (code, out, err) = run_cli(&args);
        assert_eq!(code, 125, "{args:?}: {out}{err}");
        assert!(!err.is_empty(), "{args:?}: a usage error says why");
    }
    for args in [
        vec!["--help".as_ref()],
        vec!["--version".as_ref()],
        vec!["verify".as_ref(), "--help".as_ref()],
    ] {
        let (code, out, err) = run_cli(&args);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
    }
    let (_, out, _) = run_cli(&["--help".as_ref()]);
    assert!(out.contains("usage error") && out.contains("125"), "{out}");
}

/// `verify --json`: one JSON document on stdout with the kind of directory, the verdict,
/// every reason as `{check, message, file}`, the warnings and a bundle's figures.
#[test]
fn verify_json_is_one_document_with_the_verdict_and_the_figures() {
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::linux(30).write(t.path(), "b");
    let json = |dir: &std::path::Path| {
        let (code, out, err) = run_cli(&["verify".as_ref(), "--json".as_ref(), dir.as_os_str()]);
        let j: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("not one JSON: {e}\n{out}"));
        (code, j, err)
    };
    let (code, j, err) = json(&dir);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["path"], dir.display().to_string());
    assert_eq!(j["kind"], "bundle");
    assert_eq!((&j["valid"], &j["exit"]), (&true.into(), &0.into()), "{j}");
    assert_eq!(j["reasons"], serde_json::json!([]));
    assert!(j["warnings"].is_array() && j["unreadable"].is_null(), "{j}");
    assert_eq!(j["signature"], "not_checked");
    assert_eq!(j["rows"], 30);
    let s = &j["summary"];
    assert_eq!(
        (&s["attempts"], &s["contract"]),
        (&30.into(), &"linux".into()),
        "{s}"
    );
    assert_eq!(
        s["ok"].as_u64().unwrap() + s["failed"].as_u64().unwrap(),
        30,
        "{s}"
    );
    // Every 7th sample fails (the fixture): 4 failures, one kind, counted.
    assert_eq!(s["failed"], 4, "{s}");
    assert_eq!(
        s["errors"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum::<u64>(),
        4
    );
    assert!(
        matches!(s["clock"].as_str(), Some("wall" | "virtual")),
        "{s}"
    );
    assert_eq!(s["headline"]["clock"], s["clock"]);
    assert_eq!(s["headline"]["metric"], "request_to_strict_ready");
    let p = |k: &str| s["headline"]["successes"][k].as_u64().unwrap();
    assert!(
        p("p50_ns") <= p("p99_ns") && p("p99_ns") <= p("max_ns"),
        "{s}"
    );
    assert_eq!(s["headline"]["successes"]["n"], 26);
    assert_eq!(
        (&s["stopped"], &s["incomplete"]),
        (&serde_json::Value::Null, &false.into())
    );
    // The human report went to stderr.
    assert!(err.starts_with("VALID "), "{err}");
    // Invalid: exit 1, the reason's check and message.
    fs::write(dir.join("extra"), "x").unwrap();
    let (code, j, _) = json(&dir);
    assert_eq!(code, 1, "{j}");
    assert_eq!((&j["valid"], &j["exit"]), (&false.into(), &1.into()), "{j}");
    let r = j["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["check"] == "FileUnlisted")
        .unwrap_or_else(|| panic!("no FileUnlisted reason: {j}"));
    assert!(r["message"].as_str().unwrap().contains("extra"), "{r}");
    // Unreadable: exit 2, the why, no summary.
    let (code, j, _) = json(&t.path().join("missing"));
    assert_eq!(code, 2, "{j}");
    assert!(j["unreadable"].is_string() && j["summary"].is_null(), "{j}");
    // -q --json: the document only.
    let (code, out, err) = run_cli(&[
        "verify".as_ref(),
        "-q".as_ref(),
        "--json".as_ref(),
        dir.as_os_str(),
    ]);
    assert_eq!(code, 1);
    assert_eq!(err, "");
    serde_json::from_str::<serde_json::Value>(&out).unwrap();
}

/// `--quiet`: verify prints its verdict line and reasons only, compare its outcome line only.
#[test]
fn quiet_prints_the_verdict_line_and_the_reasons_only() {
    let t = tempfile::tempdir().unwrap();
    let a = Fixture::linux(200).write(t.path(), "a");
    let mut fb = Fixture::linux(200);
    fb.seed = 2;
    fb.median_ns = 30e6 * 1.10;
    let b = fb.write(t.path(), "b");
    let (code, out, err) = run_cli(&["verify".as_ref(), "-q".as_ref(), a.as_os_str()]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out,
        format!(
            "VALID {}: Linux boot: request to strict-ready\n",
            a.display()
        )
    );
    assert_eq!(err, "");
    fs::write(a.join("extra"), "x").unwrap();
    let (code, out, _) = run_cli(&["verify".as_ref(), "--quiet".as_ref(), a.as_os_str()]);
    assert_eq!(code, 1, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("INVALID "), "{out}");
    assert!(lines[1..].iter().all(|l| l.starts_with("  - [")), "{out}");
    assert!(
        out.contains("[FileUnlisted]") && !out.contains("contract:"),
        "{out}"
    );
    fs::remove_file(a.join("extra")).unwrap();
    let (code, out, err) = run_cli(&[
        "compare".as_ref(),
        "-q".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(out, "outcome: REGRESSION: B slower than A (exit 1)\n");
    assert_eq!(err, "");
    // The bootstrap seed reads as decimal or 0x hex alike.
    let json = |seed: &str| {
        let (code, out, err) = run_cli(&[
            "compare".as_ref(),
            "--json".as_ref(),
            "--seed".as_ref(),
            seed.as_ref(),
            a.as_os_str(),
            b.as_os_str(),
        ]);
        assert_eq!(code, 1, "{seed}: {out}{err}");
        out
    };
    assert_eq!(json("255"), json("0xff"));
    let (code, _, err) = run_cli(&[
        "compare".as_ref(),
        "--seed".as_ref(),
        "0xfg".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
    ]);
    assert_eq!(code, 125, "{err}");
    assert!(err.contains("not a seed"), "{err}");
    // report -q: its one line.
    let (code, out, _) = run_cli(&["report".as_ref(), "-q".as_ref(), a.as_os_str()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");
}

/// `compare --json` with a usage error still answers with a JSON `error` object on stdout
/// (and exits 125, as every usage error).
#[test]
fn compare_json_usage_errors_are_json_too() {
    let t = tempfile::tempdir().unwrap();
    let a = Fixture::probe(5).write(t.path(), "a");
    let d = a.as_os_str();
    for (args, message, path_b) in [
        (
            vec![
                "compare".as_ref(),
                "--json".as_ref(),
                "--bogus".as_ref(),
                d,
                d,
            ],
            "unexpected argument '--bogus' found",
            Some(a.display().to_string()),
        ),
        (
            vec![
                "compare".as_ref(),
                "--json".as_ref(),
                "--alpha".as_ref(),
                "x".as_ref(),
                d,
            ],
            "invalid value 'x' for '--alpha <ALPHA>'",
            None,
        ),
        (
            vec!["compare".as_ref(), d, "--json".as_ref()],
            "the following required arguments were not provided: <B>",
            None,
        ),
    ] {
        let (code, out, err) = run_cli(&args);
        assert_eq!(code, 125, "{args:?}: {out}{err}");
        let j: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"));
        assert_eq!(j["error"]["kind"], "usage", "{out}");
        assert_eq!(j["exit"], 125, "{out}");
        let m = j["error"]["message"].as_str().unwrap();
        assert!(m.starts_with(message), "{args:?}: {m}");
        assert_eq!(j["path_a"], a.display().to_string(), "{out}");
        assert_eq!(j["path_b"].as_str().map(str::to_string), path_b, "{out}");
        // The human message is still clap's, on stderr.
        assert!(err.starts_with("error: "), "{err}");
    }
    // Without --json, stdout stays empty.
    let (code, out, _) = run_cli(&["compare".as_ref(), "--bogus".as_ref(), d, d]);
    assert_eq!((code, out.as_str()), (125, ""));
}

/// `ssh-keygen`, which the signature commands need (a missing one fails the test: the
/// feature is not silently untested).
fn ssh_keygen(args: &[&std::ffi::OsStr]) {
    let st = Command::new("ssh-keygen")
        .args(args)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("ssh-keygen not found: install openssh-client");
    assert!(st.success(), "ssh-keygen {args:?}");
}

/// A throwaway ed25519 key `dir/name` and its allowed-signers line for `principal`.
fn keypair(dir: &std::path::Path, name: &str, principal: &str) -> (std::path::PathBuf, String) {
    let key = dir.join(name);
    ssh_keygen(&[
        "-q".as_ref(),
        "-t".as_ref(),
        "ed25519".as_ref(),
        "-N".as_ref(),
        "".as_ref(),
        "-C".as_ref(),
        principal.as_ref(),
        "-f".as_ref(),
        key.as_os_str(),
    ]);
    let public = fs::read_to_string(key.with_extension("pub")).unwrap();
    (key, format!("{principal} {}", public.trim()))
}

#[test]
fn sign_and_verify_a_signature() {
    let t = tempfile::tempdir().unwrap();
    let keys = t.path().join("keys");
    fs::create_dir(&keys).unwrap();
    let (alice, alice_line) = keypair(&keys, "alice", "alice@example.org");
    let (mallory, _) = keypair(&keys, "mallory", "mallory@example.org");
    let allowed = keys.join("allowed_signers");
    fs::write(&allowed, format!("{alice_line}\n")).unwrap();
    let dir = Fixture::probe(20).write(t.path(), "b");
    let d = dir.as_os_str();
    let verify_sig = |extra: &[&std::ffi::OsStr]| {
        let mut a: Vec<&std::ffi::OsStr> = vec![
            "verify".as_ref(),
            d,
            "--signature".as_ref(),
            "--allowed-signers".as_ref(),
            allowed.as_os_str(),
        ];
        a.extend_from_slice(extra);
        run_cli(&a)
    };

    // Unsigned: --signature makes it invalid, with its own reason.
    let (code, out, _) = verify_sig(&[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("[Signature]") && out.contains("no SHA256SUMS.sig"),
        "{out}"
    );

    // Signed by alice: good, with or without naming her.
    let (code, out, err) = run_cli(&["sign".as_ref(), "--key".as_ref(), alice.as_os_str(), d]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(dir.join("SHA256SUMS.sig").is_file());
    let (code, out, err) = verify_sig(&[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("signature: good, SHA256SUMS signed by `alice@example.org`"),
        "{out}"
    );
    let (code, out, _) = verify_sig(&["--identity".as_ref(), "alice@example.org".as_ref()]);
    assert_eq!(code, 0, "{out}");
    // Not bob's signature.
    let (code, out, _) = verify_sig(&["--identity".as_ref(), "bob@example.org".as_ref()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("[Signature]"), "{out}");
    // Without --signature the signature is mentioned, not checked, and not "unlisted".
    let (code, out, _) = run_cli(&["verify".as_ref(), d]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("present, not checked"), "{out}");

    // A forger adds a file and regenerates SHA256SUMS: the checksums agree again, the
    // signature does not.
    fs::write(dir.join("notes.txt"), "measured on a quiet host, honest\n").unwrap();
    resum(&dir);
    let (code, out, _) = run_cli(&["verify".as_ref(), d]);
    assert_eq!(code, 0, "checksums alone cannot tell: {out}");
    let (code, out, _) = verify_sig(&[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("[Signature]") && out.contains("does not verify"),
        "{out}"
    );

    // Re-signed by someone not in the allowed signers.
    let (code, out, err) = run_cli(&["sign".as_ref(), "--key".as_ref(), mallory.as_os_str(), d]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = verify_sig(&[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("[Signature]") && out.contains("not allowed"),
        "{out}"
    );

    // An invalid bundle is not signed.
    fs::write(dir.join("unlisted"), "x").unwrap();
    let (code, _, err) = run_cli(&["sign".as_ref(), "--key".as_ref(), alice.as_os_str(), d]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("refusing to sign") && err.contains("[FileUnlisted]"),
        "{err}"
    );
}

#[test]
fn a_missing_ssh_keygen_is_a_typed_error_naming_the_package() {
    use truecold_proof::sign::{SignError, SshKeygen};
    use truecold_proof::verify::{verify_dir_with, SignatureCheck};
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::probe(5).write(t.path(), "b");
    fs::write(dir.join("SHA256SUMS.sig"), "not really").unwrap();
    let ssh = SshKeygen {
        program: t.path().join("no-such-ssh-keygen"),
    };
    let e = ssh
        .sign(&t.path().join("key"), b"data")
        .expect_err("no ssh-keygen");
    assert!(matches!(e, SignError::NoSshKeygen { .. }), "{e:?}");
    assert!(e.to_string().contains("openssh-client"), "{e}");
    let v = verify_dir_with(
        &dir,
        &truecold_proof::VerifyOptions {
            signature: Some(SignatureCheck {
                allowed_signers: t.path().join("allowed"),
                identity: None,
                ssh_keygen: ssh,
            }),
        },
    );
    assert_eq!(v.exit_code(), 2, "{}", v.render(&dir, 5));
    assert!(
        v.unreadable.as_deref().unwrap().contains("openssh-client"),
        "{:?}",
        v.unreadable
    );
}

/// A directory that is no bundle (none of any kind's files) says so in one line, exit 2;
/// `--json` says `kind: none` with `exit`.
#[test]
fn a_directory_that_is_no_bundle_says_so_in_one_line() {
    let t = tempfile::tempdir().unwrap();
    let empty = t.path().join("empty");
    fs::create_dir(&empty).unwrap();
    fs::write(empty.join("notes.txt"), "mine").unwrap();
    let (code, out, err) = run_cli(&["verify".as_ref(), empty.as_os_str()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        out.starts_with(&format!("NOT A BUNDLE {}: ", empty.display())),
        "{out}"
    );
    // One line (wrapped at 100 columns: its continuation indented), not a list of every
    // file missing.
    assert!(!out.contains("RequiredFileMissing"), "{out}");
    assert!(out.lines().skip(1).all(|l| l.starts_with("  ")), "{out}");
    let (code, out, _) = run_cli(&["verify".as_ref(), "--json".as_ref(), empty.as_os_str()]);
    assert_eq!(code, 2, "{out}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&j["kind"], &j["exit"]),
        (&"none".into(), &2.into()),
        "{out}"
    );
    // A bundle missing its SHA256SUMS is still a bundle: INVALID, SHA256SUMS named once.
    let b = Fixture::linux(30).write(t.path(), "b");
    fs::remove_file(b.join("SHA256SUMS")).unwrap();
    let (code, out, _) = run_cli(&["verify".as_ref(), b.as_os_str()]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(out.matches("`SHA256SUMS`").count(), 1, "{out}");
}

/// `verify` shows what a reviewer needs: a bundle's recorded host warnings (text and JSON),
/// and each arm's headline figures in a multi-arm directory.
#[test]
fn verify_shows_recorded_warnings_and_every_arms_figures() {
    let t = tempfile::tempdir().unwrap();
    let real = real_bundle(t.path(), "real");
    let (r, _) = truecold_proof::read_bundle(&real).unwrap();
    assert!(!r.environment.warnings.is_empty(), "the fixture has none");
    let (code, out, _) = run_cli(&["verify".as_ref(), real.as_os_str()]);
    assert_eq!(code, 0, "{out}");
    let words = out.split_whitespace().collect::<Vec<_>>().join(" ");
    for w in &r.environment.warnings {
        let w = w.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(words.contains(&format!("recorded warning: {w}")), "{out}");
    }
    let (_, out, _) = run_cli(&["verify".as_ref(), "--json".as_ref(), real.as_os_str()]);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let recorded: Vec<&str> = j["host_warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["text"].as_str().unwrap())
        .collect();
    assert_eq!(recorded, r.environment.warnings, "{out}");

    let arms = Campaign::four(25).write(t.path(), "arms");
    let (code, out, _) = run_cli(&["verify".as_ref(), arms.as_os_str()]);
    assert_eq!(code, 0, "{out}");
    let (_, json, _) = run_cli(&["verify".as_ref(), "--json".as_ref(), arms.as_os_str()]);
    let j: serde_json::Value = serde_json::from_str(&json).unwrap();
    let parts = j["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 4, "{json}");
    for p in parts {
        let name = p["name"].as_str().unwrap();
        let p50 = p["headline"]["p50_ns"].as_u64().unwrap();
        let failed = match p["failed"].as_u64() {
            Some(0) | None => String::new(),
            Some(f) => format!(" ({f} failed)"),
        };
        let line = format!(
            "  {name}: ok {} of {}{failed}; p50 {} ms",
            p["ok"],
            p["attempts"],
            truecold_proof::fmt::ms(p50)
        );
        assert!(out.contains(&line), "no `{line}` in:\n{out}");
    }
}

/// `-q` and `--json` on every subcommand: `report` and `sign` print one document with
/// `exit` (an `error` object with `exit` when they did nothing), and a usage error of any
/// subcommand given `--json` is a JSON error object with exit 125.
#[test]
fn report_and_sign_take_json_and_quiet_and_every_json_error_carries_exit() {
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::linux(30).write(t.path(), "b");
    let (code, out, err) = run_cli(&["report".as_ref(), "--json".as_ref(), dir.as_os_str()]);
    assert_eq!(code, 0, "{out}{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["exit"], 0, "{out}");
    assert!(
        j["written"].as_array().is_some_and(|w| !w.is_empty()),
        "{out}"
    );
    let (code, out, _) = run_cli(&["report".as_ref(), "-q".as_ref(), dir.as_os_str()]);
    assert_eq!((code, out.lines().count()), (0, 1), "{out}");
    // Refused: a record changed.
    fs::write(dir.join("extra"), "x").unwrap();
    let (code, out, err) = run_cli(&["report".as_ref(), "--json".as_ref(), dir.as_os_str()]);
    assert_eq!(code, 2, "{out}{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["exit"], 2, "{out}");
    assert!(j["error"]["message"].is_string(), "{out}");
    // sign: refused (the directory does not verify), as JSON; -q accepted.
    let (code, out, err) = run_cli(&[
        "sign".as_ref(),
        "-q".as_ref(),
        "--json".as_ref(),
        "--key".as_ref(),
        t.path().join("no-key").as_os_str(),
        dir.as_os_str(),
    ]);
    assert_eq!(code, 2, "{out}{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&j["exit"], &j["error"]["kind"]),
        (&2.into(), &"invalid".into()),
        "{out}"
    );
    for sub in ["verify", "compare", "report", "sign"] {
        let (code, out, _) = run_cli(&[sub.as_ref(), "--json".as_ref(), "--bogus".as_ref()]);
        assert_eq!(code, 125, "{sub}: {out}");
        let j: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{sub}: {e}: {out}"));
        assert_eq!(
            (&j["exit"], &j["error"]["kind"]),
            (&125.into(), &"usage".into()),
            "{sub}"
        );
    }
}
