//! `truecold cli-docs DIR` with the built binary (shell completions and man pages from the
//! clap definition), and the help texts they are made of: every argument described,
//! `--backing`'s values each with its meaning, `-h` a summary of `--help`.

#[path = "../../proof/tests/support/cli_docs.rs"]
mod support;

use clap::CommandFactory;
use std::path::{Path, PathBuf};
use std::process::Output;
use support::{files, text};
use truecold_bench::cli::{BackingParser, Cli};
use truecold_proto::kinds::Backing;

const BIN: &str = env!("CARGO_BIN_EXE_truecold");

fn truecold(args: &[&std::ffi::OsStr]) -> Output {
    support::run(BIN, args)
}

fn cli_docs(dir: &Path) -> Output {
    support::cli_docs(BIN, dir)
}

/// `(name, bin-name path)` of every visible subcommand at every level, e.g.
/// `("step", "truecold-bisect-step")`; and the hidden ones' names.
fn subcommands(
    cmd: &clap::Command,
    prefix: &str,
    visible: &mut Vec<(String, String)>,
    hidden: &mut Vec<String>,
) {
    for s in cmd.get_subcommands() {
        if s.is_hide_set() {
            hidden.push(s.get_name().to_owned());
            continue;
        }
        let page = format!("{prefix}-{}", s.get_name());
        visible.push((s.get_name().to_owned(), page.clone()));
        subcommands(s, &page, visible, hidden);
    }
}

fn tree() -> (Vec<(String, String)>, Vec<String>) {
    let (mut v, mut h) = (Vec::new(), Vec::new());
    subcommands(&Cli::command(), "truecold", &mut v, &mut h);
    (v, h)
}

#[test]
fn cli_docs_writes_every_completion_and_a_man_page_per_visible_subcommand() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("docs");
    let o = cli_docs(&dir);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (visible, hidden) = tree();
    let mut want: Vec<PathBuf> = [
        "completions/truecold.bash",
        "completions/_truecold",
        "completions/truecold.fish",
        "man/truecold.1",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    want.extend(
        visible
            .iter()
            .map(|(_, p)| PathBuf::from(format!("man/{p}.1"))),
    );
    // The tree walk is not the only witness: these pages are named here.
    for p in [
        "man/truecold-run.1",
        "man/truecold-tune.1",
        "man/truecold-bisect.1",
        "man/truecold-bisect-step.1",
        "man/truecold-bisect-run.1",
        "man/truecold-bisect-config.1",
    ] {
        assert!(
            want.contains(&PathBuf::from(p)),
            "{p} not expected: {want:?}"
        );
    }
    let got = files(&dir);
    let mut got_names: Vec<PathBuf> = got.keys().cloned().collect();
    got_names.sort();
    want.sort();
    assert_eq!(got_names, want);
    // What it printed: the files it wrote, one a line.
    let printed = String::from_utf8_lossy(&o.stdout);
    assert_eq!(printed.lines().count(), want.len(), "{printed}");
    for w in &want {
        assert!(
            printed.contains(&dir.join(w).display().to_string()),
            "{printed}"
        );
    }

    // Completions: every visible subcommand, every visible long flag of every command,
    // `--backing`'s values; no hidden subcommand, no hidden flag.
    assert!(hidden.contains(&"tune-phase".to_owned()), "{hidden:?}");
    assert!(hidden.contains(&"cli-docs".to_owned()), "{hidden:?}");
    let bash = text(&got[Path::new("completions/truecold.bash")]);
    let mut flags = Vec::new();
    let root = Cli::command();
    let mut stack = vec![root];
    while let Some(c) = stack.pop() {
        for a in c.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(l) = a.get_long() {
                flags.push(format!("--{l}"));
            }
        }
        stack.extend(c.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    }
    assert!(flags.contains(&"--backing".to_owned()), "{flags:?}");
    for f in &flags {
        assert!(bash.contains(f.as_str()), "{f} not in truecold.bash");
    }
    assert!(
        bash.contains("anon thp hugetlb"),
        "--backing's values:\n{bash}"
    );
    for name in [
        "completions/truecold.bash",
        "completions/_truecold",
        "completions/truecold.fish",
    ] {
        let c = text(&got[Path::new(name)]);
        for (sub, _) in &visible {
            assert!(c.contains(sub.as_str()), "{sub} not in {name}");
        }
        assert!(c.contains("backing"), "{name}");
        for h in &hidden {
            assert!(!c.contains(h.as_str()), "hidden {h} in {name}");
        }
        assert!(!c.contains("inject-tap-name"), "hidden flag in {name}");
    }

    // Man pages: roff whose `.TH` names the page, section 1; hidden things left out.
    for (rel, bytes) in &got {
        if !rel.starts_with("man") {
            continue;
        }
        let page = text(bytes);
        let stem = rel.file_stem().unwrap().to_str().unwrap();
        let th = page
            .lines()
            .find(|l| l.starts_with(".TH "))
            .unwrap_or_else(|| panic!("{}: no .TH line:\n{page}", rel.display()));
        let words: Vec<&str> = th.split_whitespace().collect();
        assert_eq!(
            words.get(1..3),
            Some(&[stem, "1"][..]),
            "{}: {th}",
            rel.display()
        );
        assert!(th.contains("\"truecold 0.1.0\""), "{th}");
        assert!(page.contains("\n.SH NAME\n"), "{}", rel.display());
        assert!(page.contains("\n.SH SYNOPSIS\n"), "{}", rel.display());
        for h in &hidden {
            assert!(
                !page.contains(h.as_str()),
                "hidden {h} in {}",
                rel.display()
            );
        }
        assert!(!page.contains("inject\\-tap\\-name"), "{}", rel.display());
    }
    let run = text(&got[Path::new("man/truecold-run.1")]);
    assert!(run.contains("\\-\\-backing"), "{run}");
    assert!(run.contains("hugetlb"), "{run}");
    // The synopsis shows each option's value; the exit statuses are the table's, under EXIT
    // STATUS (never EXTRA), then EXAMPLES (the quick start) and SEE ALSO.
    assert!(run.contains("[\\-\\-mode <MODE>]"), "{run}");
    assert!(run.contains("[\\-n|\\-\\-count <COUNT>]"), "{run}");
    assert!(
        run.contains(".TP\n\\fB3\\fR\nbundle written and VALID, but some launch failed"),
        "exit statuses:\n{run}"
    );
    assert!(
        run.contains("truecold run \\-n 50 \\-\\-probe \\-\\-out /tmp/tc\\-a"),
        "{run}"
    );
    for (rel, bytes) in got.iter().filter(|(r, _)| r.starts_with("man")) {
        let page = text(bytes);
        let stem = rel.file_stem().unwrap().to_str().unwrap();
        assert!(!page.contains(".SH EXTRA"), "{stem}:\n{page}");
        for h in [".SH \"EXIT STATUS\"", ".SH EXAMPLES", ".SH \"SEE ALSO\""] {
            assert!(page.contains(h), "{stem}: no {h}:\n{page}");
        }
        assert!(page.contains("\\fBtruecold\\-proof\\fR(1)"), "{stem}");
        if let Some(e) = truecold_proof::cli_text::exits(&stem.replace('-', " ")) {
            for c in e.codes {
                assert!(
                    page.contains(&format!(".TP\n\\fB{}\\fR\n", c.code)),
                    "{stem}: exit {}",
                    c.code
                );
            }
        }
    }

    // The completions, in a real bash.
    let script = dir.join("completions/truecold.bash");
    let c = |w: &[&str]| support::complete_in_bash(&script, "truecold", w);
    assert_eq!(c(&["truecold", "tu"]), ["tune"]);
    assert_eq!(c(&["truecold", "run", "--back"]), ["--backing"]);
    assert_eq!(c(&["truecold", "run", "--backing", "t"]), ["thp"]);
    assert_eq!(c(&["truecold", "bisect", "st"]), ["step"]);
    assert_eq!(c(&["truecold", "bisect", "step", "--max"]), ["--max-n"]);
    assert_eq!(c(&["truecold", "tune", "--js"]), ["--json"]);
}

#[test]
fn cli_docs_refuses_a_directory_it_wrote_before_and_overwrites_nothing() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    assert_eq!(cli_docs(dir).status.code(), Some(0));
    let mine = dir.join("man/truecold-run.1");
    std::fs::write(&mine, "mine").unwrap();
    let before = files(dir);
    let o = cli_docs(dir);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("already exists") && err.contains("never overwrites"),
        "{err}"
    );
    assert!(
        o.stdout.is_empty(),
        "nothing written: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(files(dir), before, "a second run changed a file");
    assert_eq!(std::fs::read_to_string(&mine).unwrap(), "mine");
    // One file in the way is enough: nothing else is written either.
    let t2 = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t2.path().join("man")).unwrap();
    std::fs::write(t2.path().join("man/truecold-bisect-step.1"), "x").unwrap();
    let o = cli_docs(t2.path());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("truecold-bisect-step.1 already exists"),
        "{err}"
    );
    assert!(!t2.path().join("completions/truecold.bash").exists());
    // Without DIR: a usage error, as every other.
    let o = truecold(&["cli-docs".as_ref()]);
    assert_eq!(o.status.code(), Some(125));
}

/// Every visible argument of every visible command has a description, and its `-h` line
/// (the doc comment's first paragraph) is one short line; so is every command's about.
#[test]
fn every_argument_is_described_and_its_short_help_is_one_line() {
    let mut cmd = Cli::command();
    cmd.build();
    let mut stack = vec![cmd];
    let mut seen = 0;
    while let Some(c) = stack.pop() {
        for a in c.get_arguments().filter(|a| !a.is_hide_set()) {
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            let what = format!("{} {}", c.get_name(), a.get_id());
            assert!(!help.trim().is_empty(), "{what}: no help");
            assert!(!help.contains('\n'), "{what}: -h help spans lines: {help}");
            assert!(
                help.chars().count() <= 110,
                "{what}: -h help too long: {help}"
            );
            seen += 1;
        }
        for s in c.get_subcommands().filter(|s| !s.is_hide_set()) {
            let about = s.get_about().map(|h| h.to_string()).unwrap_or_default();
            assert!(!about.trim().is_empty(), "{}: no about", s.get_name());
            assert!(
                about.chars().count() <= 100,
                "{}: about too long: {about}",
                s.get_name()
            );
            stack.push(s.clone());
        }
    }
    assert!(seen > 50, "{seen} arguments walked");
}

fn stdout(args: &[&str]) -> String {
    support::stdout_unwrapped(BIN, args)
}

/// Every `-h` and `--help` of every visible command fits 100 columns when piped; `-h` ends
/// with the exit statuses in a line, `--help` with the one table's.
#[test]
fn help_fits_100_columns_and_ends_with_the_exit_statuses() {
    use truecold_proof::cli_text::{long_help, short_help};
    let (visible, _) = tree();
    let mut paths: Vec<Vec<String>> = vec![vec![]];
    paths.extend(
        visible
            .iter()
            .map(|(_, p)| p.split('-').skip(1).map(str::to_owned).collect()),
    );
    for path in paths {
        let command = std::iter::once("truecold".to_owned())
            .chain(path.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ");
        let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
        for h in ["-h", "--help"] {
            let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
            args.push(h);
            let out = support::stdout(BIN, &args);
            for l in out.lines() {
                assert!(
                    l.chars().count() <= 100,
                    "{command} {h}: {} columns: {l}",
                    l.chars().count()
                );
            }
            if h == "-h" {
                assert!(
                    words(&out).ends_with(&short_help(&command)),
                    "{command} -h:\n{out}"
                );
            } else {
                assert!(
                    out.trim_end().ends_with(&long_help(&command, 100)),
                    "{command} --help:\n{out}"
                );
            }
        }
    }
}

#[test]
fn backing_lists_its_values_and_h_is_a_summary_of_help() {
    for sub in ["run", "tune"] {
        let short = stdout(&[sub, "-h"]);
        let long = stdout(&[sub, "--help"]);
        assert!(
            short.contains("[possible values: anon, thp, hugetlb]"),
            "{sub} -h:\n{short}"
        );
        for b in Backing::ALL {
            let line = format!("- {}: ", b.as_str());
            let at = long
                .lines()
                .find(|l| l.trim_start().starts_with(&line))
                .unwrap_or_else(|| panic!("{sub} --help has no `{line}` line:\n{long}"));
            assert!(at.contains(BackingParser::meaning(b)), "{at}");
            assert!(
                !short.contains(BackingParser::meaning(b)),
                "{sub} -h: {short}"
            );
        }
        assert!(short.len() < long.len(), "{sub}");
        assert!(
            short.contains("(see more with '--help')"),
            "{sub} -h:\n{short}"
        );
    }
    let short = stdout(&["run", "-h"]);
    let long = stdout(&["run", "--help"]);
    // A summary line in both; the details only in --help.
    assert!(short.contains("Exit 0 even when some launch failed (without it: 3)"));
    assert!(long.contains("Exit 0 even when some launch failed (without it: 3)"));
    assert!(
        !short.contains("each a typed row of samples.csv"),
        "{short}"
    );
    assert!(long.contains("each a typed row of samples.csv"), "{long}");
    // --mode's values each with their meaning in --help.
    for m in ["sequential", "burst", "open-loop", "sweep", "churn"] {
        assert!(long.contains(&format!("- {m}:")), "{m}:\n{long}");
    }
    // A bad --backing is still Backing::parse's message, a usage error.
    let o = truecold(&["run".as_ref(), "--backing".as_ref(), "huge".as_ref()]);
    assert_eq!(o.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`huge` is not one of anon, thp, hugetlb"));
}

/// scripts/cli-docs.sh with a usage error (no OUTDIR, two of them) exits 125 like the
/// binaries, before building anything.
#[test]
fn cli_docs_script_usage_error_exits_125() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/cli-docs.sh");
    for args in [&[][..], &["a", "b"]] {
        let o = std::process::Command::new("bash")
            .arg(&script)
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(125), "{args:?}: {err}");
        assert!(err.contains("usage: scripts/cli-docs.sh OUTDIR"), "{err}");
    }
}
