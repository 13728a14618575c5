//! `truecold run --engine …` refusing what it cannot run, before any launch: duplicate arms,
//! other modes, a missing engine binary (naming how to get it), a binary that is not that
//! engine. Nothing is written.

use std::path::Path;
use std::process::Command;

fn truecold() -> Command {
    Command::new(env!("CARGO_BIN_EXE_truecold"))
}

/// A guest directory with the four artifacts (contents irrelevant: nothing boots).
fn guest_dir(d: &Path) -> std::path::PathBuf {
    let g = d.join("guest");
    std::fs::create_dir_all(&g).unwrap();
    for f in ["vmlinux", "initramfs.cpio", "init", "config"] {
        std::fs::write(g.join(f), b"x").unwrap();
    }
    g
}

fn fails(args: &[&str], d: &Path, want: &[&str]) {
    let out = truecold()
        .arg("run")
        .args(args)
        .current_dir(d)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded: {err}");
    for w in want {
        assert!(err.contains(w), "{args:?}: `{w}` not in: {err}");
    }
    assert!(!d.join("out").exists(), "{args:?} wrote something");
}

#[test]
fn bad_engine_campaigns_fail_before_launching() {
    let d = tempfile::tempdir().unwrap();
    let g = guest_dir(d.path());
    let g = g.to_str().unwrap();
    let common = ["--guest-dir", g, "--out", "out", "-n", "2"];
    let with = |extra: &[&'static str]| {
        let mut v: Vec<&str> = common.to_vec();
        v.extend_from_slice(extra);
        v
    };
    fails(
        &with(&["--engines", "firecracker,truecold,firecracker"]),
        d.path(),
        &["--engine firecracker is given twice"],
    );
    fails(
        &with(&["--engine", "truecold", "--mode", "burst"]),
        d.path(),
        &["--mode sequential only"],
    );
    fails(
        &with(&[
            "--engine",
            "firecracker",
            "--firecracker",
            "/nonexistent/fc",
        ]),
        d.path(),
        &[
            "/nonexistent/fc",
            "../shared/peers/README.md",
            "TRUECOLD_FIRECRACKER",
        ],
    );
    fails(
        &with(&[
            "--engine",
            "cloud-hypervisor",
            "--cloud-hypervisor",
            "/nonexistent/ch",
        ]),
        d.path(),
        &["/nonexistent/ch", "TRUECOLD_CLOUD_HYPERVISOR"],
    );
    fails(
        &with(&["--engine", "qemu-microvm", "--qemu", "/nonexistent/qemu"]),
        d.path(),
        &["apt-get install qemu-system-x86"],
    );
    fails(&with(&["--engine", "xen"]), d.path(), &["qemu-microvm"]);
    // A binary that is not the engine its flag names.
    fails(
        &with(&["--engine", "firecracker", "--firecracker", "/bin/echo"]),
        d.path(),
        &["is not firecracker's version line"],
    );
}
