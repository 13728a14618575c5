//! What the two `cli-docs` tests share (this crate's `tests/cli_docs.rs` for `truecold-proof`,
//! `bench/tests/cli_docs.rs` for `truecold`), written once: each includes this file as a
//! module by `#[path]`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the binary `bin` with `args`.
pub fn run(bin: &str, args: &[&std::ffi::OsStr]) -> Output {
    Command::new(bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {bin}: {e}"))
}

/// `bin cli-docs DIR`.
pub fn cli_docs(bin: &str, dir: &Path) -> Output {
    run(bin, &["cli-docs".as_ref(), dir.as_os_str()])
}

/// Every file `cli-docs` wrote under `dir` (its `completions/` and `man/`), relative path →
/// bytes.
pub fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for sub in ["completions", "man"] {
        for e in std::fs::read_dir(dir.join(sub)).unwrap() {
            let e = e.unwrap();
            out.insert(
                PathBuf::from(sub).join(e.file_name()),
                std::fs::read(e.path()).unwrap(),
            );
        }
    }
    out
}

/// `b` as UTF-8 text (a test failure when it is not).
pub fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).expect("UTF-8")
}

/// What `bin args…` printed on stdout; it must exit 0.
pub fn stdout(bin: &str, args: &[&str]) -> String {
    let a: Vec<&std::ffi::OsStr> = args.iter().map(|s| s.as_ref()).collect();
    let o = run(bin, &a);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{bin} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}
