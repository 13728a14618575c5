//! Helpers shared by the bench's integration tests and (through `#[path]`) its unit tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The bisect fixture tree (`scripts/bisect-fixture.sh` under `$TRUECOLD_CACHE/bisect-fixture`,
/// made once per version of the script, always at the same path so its incremental kernel
/// build directory is reused), its named commits, and the fixture held: the tree is one per
/// machine and a test that uses it checks its commits out (a bisect session, a fleet's bisect
/// wave), so test processes take turns on it: an exclusive lock on `bisect-fixture.lock`
/// beside it, taken before the script resets the tree and released when the returned file is
/// dropped (bind it for the test's length: `let (tree, ids, _held) = …`). `root` is the
/// repository's.
pub fn bisect_fixture(
    root: &Path,
) -> (
    PathBuf,
    std::collections::BTreeMap<String, String>,
    std::fs::File,
) {
    let cache = std::env::var("TRUECOLD_CACHE").unwrap_or_else(|_| "/var/cache/truecold".into());
    std::fs::create_dir_all(&cache).expect("the kernel cache directory can be made");
    let dir = Path::new(&cache).join("bisect-fixture");
    let lock_path = Path::new(&cache).join("bisect-fixture.lock");
    let held = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .unwrap_or_else(|e| panic!("open {}: {e}", lock_path.display()));
    loop {
        use std::os::fd::AsRawFd;
        // SAFETY: flock(2) on the descriptor `held` owns, open for the whole call; no memory
        // is passed. The lock is released when `held` is closed.
        if unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX) } == 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::Interrupted,
            "lock {}: {e}",
            lock_path.display()
        );
    }
    let out = Command::new("bash")
        .arg(root.join("scripts/bisect-fixture.sh"))
        .arg(&dir)
        .output()
        .expect("bash runs scripts/bisect-fixture.sh");
    assert!(
        out.status.success(),
        "scripts/bisect-fixture.sh failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ids = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (dir.join("linux"), ids, held)
}

/// The commit `tree` has checked out.
pub fn git_head(tree: &Path) -> String {
    let o = Command::new("git")
        .arg("-C")
        .arg(tree)
        .args(["rev-parse", "HEAD"])
        .output()
        .expect("git runs");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// `sha256sum -c --strict SHA256SUMS` in `dir`, the check anyone can run on a bundle.
pub fn sha256sum_check(dir: &Path) {
    let out = Command::new("sha256sum")
        .args(["-c", "--strict", "SHA256SUMS"])
        .current_dir(dir)
        .output()
        .expect("sha256sum (coreutils) must be installed");
    assert!(
        out.status.success(),
        "sha256sum -c --strict failed in {}: {}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The debug `truecold-vmm` next to `truecold` in the same target directory; FAILS, saying how
/// to build it, when it is missing.
pub fn vmm_next_to(truecold: &Path) -> PathBuf {
    let p = truecold
        .parent()
        .expect("binary directory")
        .join("truecold-vmm");
    assert!(
        p.is_file(),
        "{} is missing: build it first with `cargo build -p truecold-vmm` (same CARGO_TARGET_DIR \
         as this test)",
        p.display()
    );
    p
}

/// FAILS when /dev/kvm is missing (these tests boot the probe guest on it).
pub fn require_kvm() {
    assert!(
        Path::new("/dev/kvm").exists(),
        "/dev/kvm is missing: this test boots the probe guest on KVM and cannot run without it"
    );
}

/// Copies the directory tree `from` to `to` (to tamper with a copy of a bundle).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}
