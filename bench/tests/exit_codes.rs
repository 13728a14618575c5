//! `truecold`'s exit statuses with the built binary: usage errors 125 in every subcommand
//! (`--help`/`--version` 0); a host limit (RAM, the hugetlb pool) refused before the first
//! launch, nothing written; a finished campaign whose launches failed exits 3 with a VALID
//! bundle, 0 with `--allow-failures`.

mod common;

use common::{require_kvm, vmm_next_to};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn truecold() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_truecold"))
}

fn run(args: &[&str]) -> Output {
    Command::new(truecold()).args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn usage_errors_exit_125_in_every_subcommand_help_and_version_0() {
    for args in [
        &["--bogus"][..],
        &["run", "--bogus"],
        &["run", "--mem-mib", "0"],
        &["run", "-n", "0"],
        &["run", "--deadline-ms", "0"],
        &["tune", "--deadline-ms", "0"],
        &["run", "--mode", "zigzag"],
        &["run", "--probe", "--linux"],
        &["tune", "--vcpus", "33"],
        &["tune-phase"],
        &["bisect", "step", "--bogus"],
        &["bisect", "step", "--dir", "d"],
        &["bisect", "run", "--good", "a"],
        &["bisect", "config", "-n", "x"],
        &["nosuchcommand"],
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(125), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("error:"), "{args:?}: {}", stderr(&o));
    }
    for args in [
        &["--help"][..],
        &["--version"],
        &["run", "--help"],
        &["tune", "-h"],
        &["bisect", "step", "--help"],
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    }
    // The statuses are in each command's --help (the one table; wrapped, so read as words).
    let help = |args: &[&str]| {
        String::from_utf8_lossy(&run(args).stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(help(&["run", "--help"]).contains("3 bundle written and VALID, but some launch failed"));
    assert!(help(&["run", "--help"]).contains("--allow-failures"));
    assert!(help(&["--help"]).contains("125"));
    assert!(help(&["tune", "--help"]).contains("125 usage error"));
    assert!(help(&["bisect", "step", "--help"]).contains("200 cannot judge"));
    assert!(help(&["bisect", "config", "--help"]).contains("125 usage"));
    // A value out of range says so in words, never as a Rust range.
    let e = stderr(&run(&["run", "-n", "0"]));
    assert!(e.contains("at least 1 is needed"), "{e}");
    assert!(!e.contains("18446744073709551615"), "{e}");
}

/// A flag combination the plan refuses after clap's parse (a typed argument error) is a
/// usage error too: 125, the plan's message, nothing written; a runtime failure stays 1.
#[test]
fn flag_combinations_refused_after_parsing_exit_125() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("never");
    let out = out.to_str().unwrap();
    for (args, want) in [
        (&["run", "--rate", "5", "--out", out][..], "--rate"),
        (
            &["run", "--mode", "open-loop", "--out", out],
            "needs --rate",
        ),
        (&["tune", "-n", "2", "--out", out], "must be at least"),
        (
            &["tune", "--confirm-rounds", "1", "--out", out],
            "must be at least",
        ),
        (
            &[
                "bisect",
                "run",
                "--kernel-tree",
                "t",
                "--good",
                "a",
                "--bad",
                "b",
                "-n",
                "2",
                "--out",
                out,
            ],
            "-n must be at least 3",
        ),
        (
            &[
                "bisect", "config", "--good", "a", "--bad", "b", "-n", "2", "--out", out,
            ],
            "-n must be at least 3",
        ),
        // Attribution launches are truecold-vmm's alone, whatever the instrument.
        (
            &[
                "run",
                "--engines",
                "truecold,firecracker",
                "--attribution",
                "2",
                "--out",
                out,
            ],
            "--attribution does not apply to an engines campaign",
        ),
        (
            &[
                "run",
                "--attribution",
                "2",
                "--attribution-instrument",
                "initcall",
                "--attribution-sample-us",
                "50",
                "--out",
                out,
            ],
            "--attribution-instrument initcall samples nothing",
        ),
        (
            &[
                "tune",
                "--attribution-instrument",
                "initcall",
                "--attribution-sample-us",
                "50",
                "--out",
                out,
            ],
            "--attribution-sample-us 50 is the `rip` instrument's sampling period",
        ),
    ] {
        let o = run(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(125), "{args:?}: {err}");
        assert!(err.contains("truecold: error: "), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: `{want}` not in: {err}");
    }
    assert!(!Path::new(out).exists());
    // `run --json`: the error document says `usage`, exit 125.
    let o = run(&["run", "--json", "--rate", "5", "--out", out]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["error"]["kind"], "usage", "{doc}");
    assert_eq!(doc["exit"], 125, "{doc}");
}

/// The host's MemTotal, MiB, as this test reads it.
fn mem_total_mib() -> u64 {
    let m = std::fs::read_to_string("/proc/meminfo").expect("/proc/meminfo");
    let kb: u64 = m
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("MemTotal in /proc/meminfo");
    kb / 1024
}

fn refused_before_launch(args: &[&str], out: &Path, want: &[&str]) {
    let o = run(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
    for w in want {
        assert!(err.contains(w), "{args:?}: `{w}` not in: {err}");
    }
    assert_eq!(
        err.matches("truecold: error:").count(),
        1,
        "printed once: {err}"
    );
    assert!(
        !err.contains("launches,"),
        "a campaign was announced: {err}"
    );
    assert!(!out.exists(), "{args:?} wrote {}", out.display());
}

#[test]
fn a_guest_larger_than_the_host_or_its_hugetlb_pool_is_refused_before_the_first_launch() {
    require_kvm();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("bundle");
    let o = out.to_str().unwrap();
    let vmm = vmm_next_to(&truecold());
    let vmm = vmm.to_str().unwrap();
    let host = mem_total_mib();
    let over = (host + 1).to_string();
    assert!(
        host < truecold_proto::limits::MAX_MEM_MIB,
        "this host has {host} MiB of RAM: no guest within the limits exceeds it"
    );
    refused_before_launch(
        &[
            "run",
            "--probe",
            "-n",
            "2",
            "--mem-mib",
            &over,
            "--vmm",
            vmm,
            "--out",
            o,
        ],
        &out,
        &[
            &format!("--mem-mib {over}"),
            "exceeds the host's RAM",
            "or less",
        ],
    );
    // The pool: one page more than it has free (within the host's RAM).
    let free: u64 =
        std::fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
    let mib = ((free + 1) * 2).max(truecold_proto::limits::MIN_MEM_MIB);
    assert!(
        mib <= host,
        "the hugetlb pool has {free} free pages, more than this host's RAM"
    );
    refused_before_launch(
        &[
            "run",
            "--probe",
            "-n",
            "2",
            "--mem-mib",
            &mib.to_string(),
            "--backing",
            "hugetlb",
            "--vmm",
            vmm,
            "--out",
            o,
        ],
        &out,
        &[
            "--backing hugetlb",
            "/proc/sys/vm/nr_hugepages",
            "--backing anon",
        ],
    );
}

#[test]
fn failed_launches_exit_3_with_a_valid_bundle_unless_allowed() {
    require_kvm();
    let d = tempfile::tempdir().unwrap();
    let real = vmm_next_to(&truecold());
    // A VMM that answers --version and fails every launch.
    let fake = d.path().join("failing-vmm");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\n[ \"$1\" = --version ] && exec {} --version\nexit 7\n",
            real.display()
        ),
    )
    .unwrap();
    let mut perm = std::fs::metadata(&fake).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&fake, perm).unwrap();
    let fake = fake.to_str().unwrap();
    for (allow, code) in [(false, 3), (true, 0)] {
        let out = d.path().join(format!("bundle-{allow}"));
        let mut args = vec![
            "run",
            "--probe",
            "-n",
            "2",
            "--mem-mib",
            "64",
            "--vmm",
            fake,
            "--out",
            out.to_str().unwrap(),
        ];
        if allow {
            args.push("--allow-failures");
        }
        let o = run(&args);
        let text = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(code), "{text}{}", stderr(&o));
        assert!(text.contains("attempts 2, ok 0, failed 2"), "{text}");
        assert!(
            text.contains("failed launches by error kind (2 in all):"),
            "{text}"
        );
        let v = truecold_proof::verify::verify_dir(&out);
        assert!(v.is_valid(), "{}", v.render(&out, 5));
        let (r, _) = truecold_proof::read_bundle(&out).unwrap();
        for (kind, n) in &r.summary.errors {
            assert!(
                text.contains(&format!("  {kind}")) && text.contains(&format!("  {n}")),
                "{kind} {n}: {text}"
            );
        }
    }
}
