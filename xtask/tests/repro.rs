//! Reproducibility: two builds of vmlinux (the cached build against a fresh, uncached one
//! in a temporary directory), of init + initramfs (two target dirs) and of the workspace image
//! (two e2fsprogs runs, a second apart) are byte-identical.
//! Slow (a full kernel build, ~3–6 min on 2 cores), so `#[ignore]`d: run it explicitly with
//! `cargo test -p xtask --test repro -- --ignored` (the first test is `cargo run -p xtask --
//! repro-check`; the second, init + initramfs only, is `repro-check --skip-kernel`).

#[test]
#[ignore = "builds the kernel from scratch (minutes); run with --ignored"]
fn kernel_and_initramfs_build_byte_identical() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("repro-check")
        .output()
        .expect("running xtask repro-check");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "repro-check failed:\n{text}");
    for f in [
        "vmlinux",
        "bzImage",
        "config",
        "init",
        "initramfs.cpio",
        "workspace.img",
    ] {
        assert!(
            text.contains(&format!("repro-check: {f}: ")),
            "{f} not compared:\n{text}"
        );
    }
    assert!(text.contains("repro-check: all identical"), "{text}");
}

#[test]
#[ignore = "builds init twice from scratch (1-2 min); run with --ignored"]
fn initramfs_is_byte_identical_across_builds() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["repro-check", "--skip-kernel"])
        .output()
        .expect("running xtask repro-check --skip-kernel");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "repro-check --skip-kernel failed:\n{text}"
    );
    assert!(text.contains("repro-check: initramfs.cpio: "), "{text}");
    assert!(text.contains("repro-check: workspace.img: "), "{text}");
    assert!(text.contains("repro-check: all identical"), "{text}");
}
