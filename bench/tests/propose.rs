//! `truecold tune --propose-from BUNDLE --dry-run` with the built binary: the proposals of a
//! recorded attribution, as text and as one JSON document, from a bundle holding its
//! `attribution.jsonl` and `config`; a directory without an attribution exits 1 saying so.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn truecold(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_truecold"))
        .args(args)
        .output()
        .unwrap()
}

/// A bundle directory with the recorded initcall attribution's shown launch and a config
/// with `CONFIG_KALLSYMS`; a source tree with the initcall's file and Makefile line.
fn bundle_and_tree(t: &Path) -> (PathBuf, PathBuf) {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/propose");
    let b = t.join("bundle");
    std::fs::create_dir(&b).unwrap();
    std::fs::copy(data.join("initcall.jsonl"), b.join("attribution.jsonl")).unwrap();
    std::fs::write(b.join("config"), "CONFIG_KALLSYMS=y\nCONFIG_SMP=y\n").unwrap();
    let tree = t.join("linux");
    for (p, s) in [
        ("Makefile", "obj-y += kernel/\n"),
        ("Kconfig", "mainmenu \"Linux\"\n"),
        ("kernel/Makefile", "obj-y = params.o\n"),
        (
            "kernel/params.c",
            "static int __init param_sysfs_builtin_init(void)\n{\n}\nlate_initcall(param_sysfs_builtin_init);\n",
        ),
    ] {
        let f = tree.join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, s).unwrap();
    }
    (b, tree)
}

#[test]
fn dry_run_prints_each_proposal_with_its_source() {
    let t = tempfile::tempdir().unwrap();
    let (b, tree) = bundle_and_tree(t.path());
    let (b, tree) = (b.to_str().unwrap(), tree.to_str().unwrap());
    let o = truecold(&[
        "tune",
        "--nested",
        "--propose-from",
        b,
        "--propose-source",
        tree,
        "--dry-run",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.starts_with("proposals (4; "), "{out}");
    assert!(
        out.contains("  no-crypto-selftests: initcall `blake2s_mod_init` 5.987 ms (initcall, "),
        "{out}"
    );
    assert!(
        out.contains("  initcall-blacklist-param_sysfs_builtin_init: initcall `param_sysfs_builtin_init` 2.394 ms"),
        "{out}"
    );
    assert!(
        out.contains("note: initcall percpu_counter_startup"),
        "{out}"
    );
    let o = truecold(&[
        "tune",
        "--nested",
        "--propose-from",
        b,
        "--propose-source",
        tree,
        "--dry-run",
        "--json",
    ]);
    assert!(o.status.success());
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["exit"], 0);
    assert_eq!(j["total_ns"], 118_343_629);
    assert_eq!(j["proposals"].as_array().unwrap().len(), 4);
    assert_eq!(j["proposals"][0]["knob"], "no-crypto-selftests");
    assert_eq!(j["proposals"][0]["source"]["evidence"], "initcall");
    assert_eq!(j["proposals"][0]["source"]["ns"], 5_987_000);
}

#[test]
fn a_directory_without_an_attribution_exits_1() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().to_str().unwrap();
    let o = truecold(&[
        "tune",
        "--nested",
        "--propose-from",
        d,
        "--dry-run",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no attribution.jsonl"), "{err}");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["exit"], 1);
    // --dry-run asks for --propose-from: a usage error.
    assert_eq!(truecold(&["tune", "--dry-run"]).status.code(), Some(125));
}
