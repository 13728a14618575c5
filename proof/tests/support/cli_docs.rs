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

/// What `bin args…` printed on stdout, piped (help wrapped at 100 columns); it must exit 0.
pub fn stdout(bin: &str, args: &[&str]) -> String {
    stdout_at(bin, args, None)
}

/// What `bin args…` printed on stdout with help unwrapped (`COLUMNS` wide enough for any
/// line): a test reads a sentence whole.
pub fn stdout_unwrapped(bin: &str, args: &[&str]) -> String {
    stdout_at(bin, args, Some(100_000))
}

fn stdout_at(bin: &str, args: &[&str], columns: Option<usize>) -> String {
    let mut c = Command::new(bin);
    c.args(args).env_remove("COLUMNS");
    if let Some(w) = columns {
        c.env("COLUMNS", w.to_string());
    }
    let o = c.output().unwrap_or_else(|e| panic!("run {bin}: {e}"));
    assert_eq!(
        o.status.code(),
        Some(0),
        "{bin} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// What bash completes for `words` (the command line so far, the last word the one being
/// completed) with the completion script `script` of the binary `bin`, in a real bash: the
/// script sourced, the function `complete -p bin` names called as bash calls it, `COMPREPLY`
/// printed one a line.
pub fn complete_in_bash(script: &Path, bin: &str, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words
        .iter()
        .map(|w| format!("'{}'", w.replace('\'', "'\\''")))
        .collect();
    let program = format!(
        "set -e\n\
         source '{}'\n\
         spec=$(complete -p {bin})\n\
         fn=$(sed -n 's/.*-F \\([^ ]*\\).*/\\1/p' <<<\"$spec\")\n\
         [ -n \"$fn\" ] || {{ echo \"no -F function in: $spec\" >&2; exit 3; }}\n\
         COMP_WORDS=({})\n\
         COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))\n\
         COMP_LINE=\"${{COMP_WORDS[*]}}\"\n\
         COMP_POINT=${{#COMP_LINE}}\n\
         \"$fn\" {bin} \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\" || true\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        quoted.join(" ")
    );
    let o = Command::new("bash")
        .arg("--norc")
        .arg("--noprofile")
        .arg("-c")
        .arg(&program)
        .output()
        .unwrap_or_else(|e| panic!("run bash: {e}"));
    assert!(
        o.status.success(),
        "bash failed completing {words:?}: {}\n{program}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}
