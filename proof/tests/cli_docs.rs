//! `truecold-proof cli-docs DIR` with the built binary (shell completions and man pages from
//! the clap definition), and the help texts they are made of: every positional and flag
//! described, `-h` a summary of `--help`, `--help` ending with the exit statuses of the one
//! table, every line within 100 columns when piped; the completions tried in a real bash,
//! the man pages' EXIT STATUS, EXAMPLES and SEE ALSO.

#[path = "support/cli_docs.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Output;
use support::{files, text};
use truecold_proof::cli_text;

/// The visible subcommands, and every visible long flag of each.
const SUBCOMMANDS: &[(&str, &[&str])] = &[
    (
        "verify",
        &[
            "--max-per-kind",
            "--signature",
            "--allowed-signers",
            "--identity",
            "--json",
            "--quiet",
        ],
    ),
    ("sign", &["--key", "--json", "--quiet"]),
    (
        "compare",
        &[
            "--markdown",
            "--json",
            "--threshold-pct",
            "--alpha",
            "--min-samples",
            "--max-ci-width-pct",
            "--resamples",
            "--seed",
            "--allow-mismatch",
            "--quiet",
        ],
    ),
    ("report", &["--html", "--json", "--quiet"]),
];

const BIN: &str = env!("CARGO_BIN_EXE_truecold-proof");

fn proof(args: &[&std::ffi::OsStr]) -> Output {
    support::run(BIN, args)
}

fn cli_docs(dir: &Path) -> Output {
    support::cli_docs(BIN, dir)
}

fn stdout(args: &[&str]) -> String {
    support::stdout(BIN, args)
}

#[test]
fn cli_docs_writes_every_completion_and_a_man_page_per_visible_subcommand() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("out");
    let o = cli_docs(&dir);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut want: Vec<PathBuf> = vec![
        "completions/truecold-proof.bash".into(),
        "completions/_truecold-proof".into(),
        "completions/truecold-proof.fish".into(),
        "man/truecold-proof.1".into(),
    ];
    want.extend(
        SUBCOMMANDS
            .iter()
            .map(|(s, _)| PathBuf::from(format!("man/truecold-proof-{s}.1"))),
    );
    want.sort();
    let got = files(&dir);
    assert_eq!(got.keys().cloned().collect::<Vec<_>>(), want);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).lines().count(),
        want.len()
    );

    let bash = text(&got[Path::new("completions/truecold-proof.bash")]);
    for (sub, flags) in SUBCOMMANDS {
        assert!(bash.contains(sub), "{sub} not in the bash completion");
        for f in *flags {
            assert!(bash.contains(f), "{sub} {f} not in the bash completion");
        }
    }
    for name in [
        "completions/truecold-proof.bash",
        "completions/_truecold-proof",
        "completions/truecold-proof.fish",
    ] {
        let c = text(&got[Path::new(name)]);
        for (sub, _) in SUBCOMMANDS {
            assert!(c.contains(sub), "{sub} not in {name}");
        }
        assert!(c.contains("threshold-pct"), "{name}");
        assert!(!c.contains("cli-docs"), "the hidden subcommand in {name}");
    }
    for (rel, bytes) in got.iter().filter(|(r, _)| r.starts_with("man")) {
        let page = text(bytes);
        let stem = rel.file_stem().unwrap().to_str().unwrap();
        let th = page
            .lines()
            .find(|l| l.starts_with(".TH "))
            .unwrap_or_else(|| panic!("{}: no .TH line", rel.display()));
        let words: Vec<&str> = th.split_whitespace().collect();
        assert_eq!(words.get(1..3), Some(&[stem, "1"][..]), "{th}");
        assert!(page.contains("\n.SH NAME\n"), "{}", rel.display());
        assert!(!page.contains("cli\\-docs"), "{}", rel.display());
    }
    let compare = text(&got[Path::new("man/truecold-proof-compare.1")]);
    assert!(compare.contains("The baseline bundle (A)"), "{compare}");
    assert!(compare.contains("Mann\\-Whitney U"), "the rule:\n{compare}");
    // The synopsis shows each option's value; the exit statuses are the table's, under EXIT
    // STATUS (never EXTRA); EXAMPLES and SEE ALSO follow.
    assert!(compare.contains("[\\-\\-clock <FIGURE>]"), "{compare}");
    assert!(compare.contains("[\\-q|\\-\\-quiet]"), "{compare}");
    for (rel, bytes) in got.iter().filter(|(r, _)| r.starts_with("man")) {
        let page = text(bytes);
        let stem = rel.file_stem().unwrap().to_str().unwrap();
        assert!(!page.contains(".SH EXTRA"), "{stem}:\n{page}");
        let at = |h: &str| {
            page.find(h)
                .unwrap_or_else(|| panic!("{stem}: no `{h}`:\n{page}"))
        };
        assert!(
            at(".SH \"EXIT STATUS\"") < at(".SH EXAMPLES")
                && at(".SH EXAMPLES") < at(".SH \"SEE ALSO\""),
            "{stem}:\n{page}"
        );
        assert!(page.contains("\\fBtruecold\\fR(1)"), "{stem}: SEE ALSO");
        let typed = stem.replacen("truecold-proof-", "truecold-proof ", 1);
        if let Some(e) = truecold_proof::cli_text::exits(&typed) {
            for c in e.codes {
                assert!(
                    page.contains(&format!(".TP\n\\fB{}\\fR\n", c.code)),
                    "{stem}: exit {}",
                    c.code
                );
            }
        }
    }
    let verify = text(&got[Path::new("man/truecold-proof-verify.1")]);
    assert!(
        verify.contains("truecold\\-proof verify results/<dir>"),
        "{verify}"
    );

    // The completions, in a real bash: a subcommand, a subcommand's flag (clap-rs/clap#6421
    // broke this for a binary whose name holds a `-`).
    let script = dir.join("completions/truecold-proof.bash");
    let c = |w: &[&str]| support::complete_in_bash(&script, "truecold-proof", w);
    assert_eq!(c(&["truecold-proof", "ver"]), ["verify"]);
    assert_eq!(c(&["truecold-proof", "compare", "--st"]), ["--stages"]);
    assert_eq!(c(&["truecold-proof", "verify", "--j"]), ["--json"]);
    assert_eq!(c(&["truecold-proof", "report", "--ht"]), ["--html"]);
}

#[test]
fn cli_docs_refuses_a_directory_it_wrote_before_and_overwrites_nothing() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    assert_eq!(cli_docs(dir).status.code(), Some(0));
    let mine = dir.join("completions/_truecold-proof");
    std::fs::write(&mine, "mine").unwrap();
    let before = files(dir);
    let o = cli_docs(dir);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("truecold-proof.bash already exists") && err.contains("never overwrites"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
    assert_eq!(files(dir), before);
    assert_eq!(std::fs::read_to_string(&mine).unwrap(), "mine");
    assert_eq!(proof(&["cli-docs".as_ref()]).status.code(), Some(125));
}

/// `(entry, description)` of every entry under `Arguments:` and `Options:` of a help text,
/// in either of clap's layouts (description on the same line, or indented below it).
fn entries(help: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = help.lines().collect();
    let mut out = Vec::new();
    let mut inside = false;
    for (i, l) in lines.iter().enumerate() {
        if *l == "Arguments:" || *l == "Options:" {
            inside = true;
            continue;
        }
        if l.is_empty() || !l.starts_with(' ') {
            inside = inside && l.is_empty();
            continue;
        }
        let t = l.trim_start();
        let indent = l.len() - t.len();
        if !inside || indent > 6 || !(t.starts_with('<') || t.starts_with('-')) {
            continue;
        }
        let (entry, same_line) = match t.find("  ") {
            Some(at) => (t[..at].to_owned(), t[at..].trim().to_owned()),
            None => (t.to_owned(), String::new()),
        };
        let desc = if same_line.is_empty() {
            lines
                .get(i + 1)
                .filter(|n| n.len() - n.trim_start().len() > indent + 2)
                .map(|n| n.trim().to_owned())
                .unwrap_or_default()
        } else {
            same_line
        };
        out.push((entry, desc));
    }
    out
}

#[test]
fn every_positional_and_flag_is_described_and_h_summarises_help() {
    for (sub, flags) in SUBCOMMANDS {
        let short = stdout(&[sub, "-h"]);
        let long = stdout(&[sub, "--help"]);
        let e = entries(&short);
        assert!(
            e.len() > flags.len(),
            "{sub} -h: {e:?} (every flag and --help)"
        );
        for (entry, desc) in &e {
            assert!(
                !desc.is_empty(),
                "{sub} -h: `{entry}` has no description:\n{short}"
            );
        }
        for f in *flags {
            assert!(
                // `--json`, or `-q, --quiet` with its short form.
                e.iter()
                    .any(|(en, _)| en.split(", ").any(|name| name.starts_with(f))),
                "{sub} -h lacks {f}"
            );
        }
        // The summary is the first line of --help; -h ends with the exit statuses in a line,
        // --help with the table's (wrapped at 100 columns, as piped).
        let first = short.lines().next().unwrap_or_default();
        assert!(long.starts_with(first), "{sub}:\n{short}\n---\n{long}");
        assert!(first.len() <= 80, "{sub} -h summary: {first}");
        let command = format!("truecold-proof {sub}");
        let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            words(&short).ends_with(&cli_text::short_help(&command)),
            "{sub} -h:\n{short}"
        );
        assert!(
            long.trim_end()
                .ends_with(&cli_text::long_help(&command, 100)),
            "{sub} --help:\n{long}"
        );
        for text in [&short, &long] {
            for l in text.lines() {
                assert!(
                    l.chars().count() <= 100,
                    "{sub}: {} columns: {l}",
                    l.chars().count()
                );
            }
        }
    }
    // compare --help states its rule (unwrapped: one line a rule).
    let rule = support::stdout_unwrapped(BIN, &["compare", "--help"]);
    assert!(
        rule.contains(
            "  3. improved (B faster) / regressed (B slower): p < --alpha and |median \
             difference| >= --threshold-pct of A's median\n"
        ),
        "{rule}"
    );
    let root = stdout(&["--help"]);
    assert!(
        root.trim_end()
            .ends_with(&cli_text::long_help("truecold-proof", 100)),
        "{root}"
    );
    // The positionals, by name.
    for (sub, pos) in [
        ("verify", &["<DIR>"][..]),
        ("sign", &["<DIR>"]),
        ("compare", &["<A>", "<B>"]),
        ("report", &["<DIR>"]),
    ] {
        let e = entries(&stdout(&[sub, "-h"]));
        for p in pos {
            assert!(
                e.iter().any(|(en, d)| en == p && !d.is_empty()),
                "{sub} {p}: {e:?}"
            );
        }
    }
}
