//! Reproducibility: two builds of vmlinux (the cached build against a fresh, uncached one
//! in a temporary directory), of init + initramfs (the one `scripts/build-artifacts.sh` built
//! against a fresh one in a temporary target dir) and of the workspace image (two e2fsprogs
//! runs, a second apart) are byte-identical.
//! Slow (a full kernel build, ~3–6 min on 2 cores), so `#[ignore]`d: run it explicitly with
//! `cargo test -p xtask --test repro -- --ignored` (it is `cargo run -p xtask -- repro-check`;
//! `repro-check --skip-kernel` checks init, initramfs and the image alone, by hand: this test
//! covers them).

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
