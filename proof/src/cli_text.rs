//! What every command of `truecold` and `truecold-proof` says the same way: the one table of
//! exit statuses ([`EXITS`], printed at the end of each `--help`, summarised by `-h`, the
//! man pages' EXIT STATUS, the Markdown table of docs/verify.md), each command's examples and
//! the pages it refers to (the man pages' EXAMPLES and SEE ALSO), and the width a terminal
//! text is wrapped to ([`width`]: the terminal's, 100 columns when piped).

use std::fmt::Write as _;

/// Success.
pub const EXIT_OK: u8 = 0;
/// `truecold run`: written and VALID, but some launch failed (or the fail-fast rule stopped
/// the campaign).
pub const EXIT_LAUNCHES_FAILED: u8 = 3;
/// A usage error, whatever the command: an unknown flag, a bad or missing value, a flag
/// combination refused after parsing. `git bisect run` reads 125 as "skip this commit", where
/// clap's default 2 would read as "bad".
pub const EXIT_USAGE: u8 = 125;
/// Ctrl-C: a VALID partial record, marked incomplete.
pub const EXIT_INTERRUPTED: u8 = 130;
/// Cannot judge or compare at all: `git bisect run` stops on it (125 would skip the commit, 1
/// would call it bad).
pub const EXIT_CANNOT: u8 = 200;

/// One exit status of one command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code {
    pub code: u8,
    /// A few words (`-h`'s summary line).
    pub word: &'static str,
    /// What it means, in full (`--help`, the man page, docs/verify.md).
    pub detail: &'static str,
}

/// A command's exit statuses, in the order `--help` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exits {
    /// The command as typed: `truecold run`, `truecold-proof verify`.
    pub command: &'static str,
    pub codes: &'static [Code],
}

const fn c(code: u8, word: &'static str, detail: &'static str) -> Code {
    Code { code, word, detail }
}

/// What every command's usage error means.
const USAGE: &str = "usage error: an unknown flag, a bad or missing value, or a flag \
    combination refused after parsing (`git bisect run` skips the commit); --help and \
    --version exit 0";

/// Every command's exit statuses: the one table (docs/verify.md renders it with
/// [`markdown`]; a test holds the two equal).
pub const EXITS: &[Exits] = &[
    Exits {
        command: "truecold run",
        codes: &[
            c(
                EXIT_OK,
                "VALID",
                "bundle written and VALID, every launch strict-ready (or --allow-failures)",
            ),
            c(
                EXIT_LAUNCHES_FAILED,
                "some launch failed",
                "bundle written and VALID, but some launch failed (the summary's error kinds \
                 say which; failures are rows of samples.csv), or the fail-fast rule stopped \
                 the campaign (--stop-after K launches in a row failed alike: marked STOPPED)",
            ),
            c(
                2,
                "INVALID",
                "bundle written, but the verifier found problems",
            ),
            c(
                EXIT_INTERRUPTED,
                "interrupted",
                "interrupted by Ctrl-C: a VALID partial bundle, marked incomplete",
            ),
            c(
                1,
                "nothing written",
                "nothing launched or written: a check before the first launch failed (the \
                 error says what to do), or an artifact is missing",
            ),
            c(EXIT_USAGE, "usage error", USAGE),
        ],
    },
    Exits {
        command: "truecold tune",
        codes: &[
            c(
                EXIT_OK,
                "VALID",
                "tune directory written and VALID, or --dry-run's proposals printed",
            ),
            c(
                2,
                "INVALID",
                "tune directory written, but the verifier found problems",
            ),
            c(
                1,
                "nothing written",
                "nothing written (the error says why; --dry-run: the attribution could not be \
                 read)",
            ),
            c(EXIT_USAGE, "usage error", USAGE),
        ],
    },
    Exits {
        command: "truecold bisect step",
        codes: &[
            c(EXIT_OK, "good", "good: not slower than the baseline"),
            c(1, "bad", "bad: slower than the baseline"),
            c(
                EXIT_USAGE,
                "skip",
                "skip: the kernel did not build, a launch broke strict-ready, or still \
                 inconclusive at --max-n; also any usage error",
            ),
            c(
                EXIT_CANNOT,
                "cannot judge",
                "cannot judge at all (no baseline, another host kind): `git bisect run` stops",
            ),
        ],
    },
    Exits {
        command: "truecold bisect run",
        codes: &[
            c(
                EXIT_OK,
                "culprit, VALID",
                "a culprit named, the bisect directory VALID",
            ),
            c(
                2,
                "INVALID",
                "bisect directory written, but the verifier found problems",
            ),
            c(
                1,
                "nothing found",
                "nothing found or written (the error says why)",
            ),
            c(EXIT_USAGE, "usage error", USAGE),
        ],
    },
    Exits {
        command: "truecold bisect config",
        codes: &[
            c(
                EXIT_OK,
                "culprit, VALID",
                "the symbols named, the bisect directory VALID",
            ),
            c(
                2,
                "INVALID",
                "bisect directory written, but the verifier found problems",
            ),
            c(
                1,
                "nothing found",
                "nothing found or written (the error says why)",
            ),
            c(EXIT_USAGE, "usage error", USAGE),
        ],
    },
    Exits {
        command: "truecold replay",
        codes: &[
            c(
                EXIT_OK,
                "reproduced",
                "replayed and reproduced (virtual clock: every sample identical; wall clock: \
                 compare finds no regression), or with --check every input matches",
            ),
            c(
                3,
                "not reproduced",
                "replayed, not reproduced (each difference listed)",
            ),
            c(2, "INVALID", "the new bundle does not verify"),
            c(
                4,
                "input differs",
                "refused: an input's digest differs from the record (each named; nothing run)",
            ),
            c(
                1,
                "nothing run",
                "nothing run: the directory is not a valid, replayable record, or the campaign \
                 could not run (the error says why)",
            ),
            c(EXIT_USAGE, "usage error", USAGE),
        ],
    },
    Exits {
        command: "truecold fleet submit",
        codes: &[
            c(
                EXIT_OK,
                "submitted",
                "the plan written and its job array submitted (or every shard written already, \
                 or --dry-run's batch script written)",
            ),
            c(
                4,
                "cluster error",
                "a cluster error: no slurmctld, no such partition, sbatch refused",
            ),
            c(1, "failed", "nothing submitted (the error says why)"),
            c(EXIT_USAGE, "usage error", USAGE),
        ],
    },
    Exits {
        command: "truecold fleet shard",
        codes: &[
            c(
                EXIT_OK,
                "VALID",
                "the shard written and VALID, or written already",
            ),
            c(
                2,
                "INVALID",
                "the shard written, but the verifier found problems",
            ),
            c(1, "failed", "nothing written (the error says why)"),
            c(EXIT_USAGE, "usage error", USAGE),
        ],
    },
    Exits {
        command: "truecold fleet gather",
        codes: &[
            c(
                EXIT_OK,
                "VALID",
                "every shard gathered, the fleet directory VALID",
            ),
            c(2, "INVALID", "gathered, but the verifier found problems"),
            c(
                3,
                "shards missing",
                "a shard is missing or still running (status names it); nothing gathered",
            ),
            c(1, "failed", "nothing gathered (the error says why)"),
            c(EXIT_USAGE, "usage error", USAGE),
        ],
    },
    Exits {
        command: "truecold fleet status",
        codes: &[
            c(EXIT_OK, "no failure", "no shard's task failed"),
            c(
                3,
                "task failed",
                "a shard's task failed (each named: killed for memory, cancelled, out of time, \
                 failed)",
            ),
            c(
                4,
                "cluster error",
                "a cluster error: no slurmctld, no such partition",
            ),
            c(
                1,
                "failed",
                "the directory could not be read (the error says why)",
            ),
            c(EXIT_USAGE, "usage error", USAGE),
        ],
    },
    Exits {
        command: "truecold-proof verify",
        codes: &[
            c(EXIT_OK, "valid", "valid"),
            c(1, "invalid", "invalid (every reason listed)"),
            c(
                2,
                "unreadable",
                "unreadable or not a bundle (nothing to judge), or the signature check could \
                 not run",
            ),
            c(EXIT_USAGE, "usage error", USAGE),
        ],
    },
    Exits {
        command: "truecold-proof compare",
        codes: &[
            c(
                EXIT_OK,
                "no regression",
                "no regression (B improved, or no change)",
            ),
            c(
                1,
                "regression",
                "regression: B is slower on a headline metric",
            ),
            c(
                EXIT_USAGE,
                "inconclusive",
                "inconclusive (the outcome line says which n would decide), or a usage error: \
                 `git bisect run` skips the commit",
            ),
            c(
                EXIT_CANNOT,
                "cannot compare",
                "cannot compare: a bundle invalid or unreadable, a multi-arm, tune or bisect \
                 directory given for a bundle, the bundles not comparable, or on different \
                 clocks (even with --allow-mismatch): `git bisect run` stops",
            ),
        ],
    },
    Exits {
        command: "truecold-proof report",
        codes: &[
            c(EXIT_OK, "done", "regenerated"),
            c(
                2,
                "failed",
                "refused (a file that is not regenerated changed) or failed",
            ),
            c(EXIT_USAGE, "usage error", USAGE),
        ],
    },
    Exits {
        command: "truecold-proof sign",
        codes: &[
            c(EXIT_OK, "signed", "signed: SHA256SUMS.sig written"),
            c(
                2,
                "failed",
                "refused (the directory does not verify) or failed",
            ),
            c(EXIT_USAGE, "usage error", USAGE),
        ],
    },
];

/// The exit statuses of `command` (`truecold run`, …); `None` for a command that has none
/// of its own (a binary, `truecold bisect`).
pub fn exits(command: &str) -> Option<&'static Exits> {
    EXITS.iter().find(|e| e.command == command)
}

/// The commands under `parent` (`truecold`, `truecold bisect`) that have exit statuses.
fn children(parent: &str) -> impl Iterator<Item = &'static Exits> + '_ {
    EXITS.iter().filter(move |e| {
        e.command
            .strip_prefix(parent)
            .is_some_and(|r| r.starts_with(' '))
    })
}

/// `-h`'s last line for `command`: `Exit status: 0 valid, 1 invalid, …` (`--help` explains
/// each); for a parent command, where its subcommands' are.
pub fn short_help(command: &str) -> String {
    match exits(command) {
        Some(e) => {
            let codes: Vec<String> = e
                .codes
                .iter()
                .map(|c| format!("{} {}", c.code, c.word))
                .collect();
            format!("Exit status: {} (--help explains each).", codes.join(", "))
        }
        None => format!(
            "Exit status: each subcommand's --help lists its own; any usage error \
             {EXIT_USAGE}; --help and --version 0."
        ),
    }
}

/// `--help`'s last section for `command`, wrapped at `width` columns: one code a line, its
/// meaning after it (continuation lines indented under it); for a parent command, each
/// subcommand's codes in a line.
pub fn long_help(command: &str, width: usize) -> String {
    let mut s = String::from("Exit status:\n");
    match exits(command) {
        Some(e) => {
            for c in e.codes {
                s += &wrap(&format!("  {:<5}", c.code), c.detail, "       ", width);
            }
        }
        None => {
            for e in children(command) {
                let codes: Vec<String> = e
                    .codes
                    .iter()
                    .map(|c| format!("{} {}", c.code, c.word))
                    .collect();
                s += &wrap(
                    &format!("  {}:", e.command),
                    &codes.join(", "),
                    "    ",
                    width,
                );
            }
            s += &wrap(
                "  ",
                &format!(
                    "Any usage error exits {EXIT_USAGE}; --help and --version 0. Each \
                     subcommand's --help explains its codes."
                ),
                "  ",
                width,
            );
        }
    }
    s.trim_end().to_string()
}

/// The table as Markdown: one row per command, its codes in bold with their meaning
/// (docs/verify.md, "Exit codes").
pub fn markdown() -> String {
    let mut s = String::from("| command | exit status |\n|---|---|\n");
    for e in EXITS {
        let codes: Vec<String> = e
            .codes
            .iter()
            .map(|c| format!("**{}** {}", c.code, c.detail.replace('|', "\\|")))
            .collect();
        let _ = writeln!(s, "| `{}` | {} |", e.command, codes.join("; "));
    }
    s
}

/// A man page's examples: `(what it does, the command line)`, the quick start's first.
pub fn examples(command: &str) -> &'static [(&'static str, &'static str)] {
    match command {
        "truecold" | "truecold run" => &[
            (
                "50 launches of the VMM's probe guest (needs only /dev/kvm), written as a bundle:",
                "truecold run -n 50 --probe --out /tmp/tc-a",
            ),
            (
                "Check it, as anyone can without KVM:",
                "truecold-proof verify /tmp/tc-a",
            ),
            (
                "A second campaign, judged against the first:",
                "truecold run -n 50 --probe --out /tmp/tc-b && truecold-proof compare /tmp/tc-a /tmp/tc-b",
            ),
            (
                "A Linux boot in the nested harness (virtual clock), side by side with Firecracker:",
                "truecold run --nested --engines truecold,firecracker -n 30",
            ),
        ],
        "truecold tune" => &[
            ("The knob catalogue:", "truecold tune --list-knobs"),
            (
                "Two knobs on your own kernel config, in the nested harness:",
                "truecold tune --nested --kernel-config my.config --knobs tsc-reliable,lpj -n 5",
            ),
            (
                "Apply the winners:",
                "sh results/<tune>/recommended/reproduce.sh",
            ),
        ],
        "truecold bisect" | "truecold bisect run" => &[(
            "The commit of a kernel tree that made the boot slower:",
            "truecold bisect run --kernel-tree ~/linux --good v6.12 --bad HEAD --nested",
        )],
        "truecold bisect step" => &[(
            "One step per commit under git bisect, against a baseline bundle:",
            "git bisect run truecold bisect step --baseline results/<bundle> --dir /tmp/bisect",
        )],
        "truecold bisect config" => &[(
            "The symbols between two configs that explain a slowdown:",
            "truecold bisect config --good good.config --bad bad.config --nested",
        )],
        "truecold replay" => &[
            (
                "Run a committed bundle again from its record and judge the replay:",
                "truecold replay results/<bundle>",
            ),
            (
                "Hold the inputs to the record; run nothing:",
                "truecold replay results/<bundle> --check",
            ),
        ],
        "truecold fleet" | "truecold fleet submit" => &[(
            "A campaign of 1,000 nested launches in 4 shards over a Slurm partition:",
            "truecold fleet submit /tmp/fleet --partition debug --shards 4 -- run --nested -n 1000",
        )],
        "truecold fleet shard" => &[(
            "What each array task runs (the batch script writes it):",
            "truecold fleet shard /tmp/fleet --task 0",
        )],
        "truecold fleet status" => &[(
            "Which shard ran where, and why a task failed:",
            "truecold fleet status /tmp/fleet",
        )],
        "truecold fleet gather" => &[(
            "Verify the shards and merge them into one fleet directory:",
            "truecold fleet gather /tmp/fleet",
        )],
        "truecold-proof" | "truecold-proof verify" => &[
            (
                "Check a bundle (or a multi-arm, tune or bisect directory):",
                "truecold-proof verify results/<dir>",
            ),
            (
                "The verdict as JSON:",
                "truecold-proof verify --json results/<dir>",
            ),
        ],
        "truecold-proof compare" => &[
            (
                "Judge bundle B against baseline A:",
                "truecold-proof compare /tmp/tc-a /tmp/tc-b",
            ),
            (
                "Every stage's row too:",
                "truecold-proof compare --stages /tmp/tc-a /tmp/tc-b",
            ),
        ],
        "truecold-proof report" => &[(
            "Regenerate a directory's README and plots, and write report.html:",
            "truecold-proof report --html results/<dir>",
        )],
        "truecold-proof sign" => &[(
            "Sign a directory that verifies:",
            "truecold-proof sign --key ~/.ssh/id_ed25519 results/<dir>",
        )],
        _ => &[],
    }
}

/// The documents a man page refers to besides the other pages.
pub const SEE_ALSO_DOCS: &str = "docs/verify.md (what is checked, the exit codes), \
    docs/bundle-schema.md (what a bundle holds), docs/tune.md, docs/bisect.md, \
    docs/engines.md";

/// The widest line of a terminal text when stdout is not a terminal.
pub const PIPED_WIDTH: usize = 100;
/// The narrowest width a text is wrapped to, however narrow the terminal.
pub const MIN_WIDTH: usize = 40;

/// The width terminal text is wrapped to: stdout's terminal's columns, else `$COLUMNS`, else
/// [`PIPED_WIDTH`] (clap's rule for `--help`, so help and summaries agree); at least
/// [`MIN_WIDTH`].
pub fn width() -> usize {
    use std::io::IsTerminal;
    let w = if std::io::stdout().is_terminal() {
        terminal_size::terminal_size().map(|(w, _)| usize::from(w.0))
    } else {
        None
    };
    w.or_else(|| {
        std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse().ok())
    })
    .unwrap_or(PIPED_WIDTH)
    .max(MIN_WIDTH)
}

/// `text` wrapped at `width` columns: the first line after `first`, the others after
/// `indent` (a space between a prefix and the text unless the prefix ends with one); a word
/// longer than a line is cut.
pub fn wrap(first: &str, text: &str, indent: &str, width: usize) -> String {
    wrap_words(first, text, indent, width, true)
}

/// [`wrap`], but a word longer than any line (a long path) is kept whole where it falls,
/// the line it is on running past `width`: a path to copy is never cut.
pub fn wrap_keeping_words(first: &str, text: &str, indent: &str, width: usize) -> String {
    wrap_words(first, text, indent, width, false)
}

/// The units a figure is never parted from at a line break (`16384 MiB`, `227.5 ms`).
const UNITS: [&str; 9] = ["ms", "s", "µs", "ns", "MiB", "GiB", "KiB", "vCPU", "%"];

/// `text`'s words, each unit kept with the figure before it (`16384 MiB` is one word).
fn words_of(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in text.split(' ').filter(|w| !w.is_empty()) {
        let bare = w.trim_end_matches([',', ';', ')', '.', ':']);
        let after_figure = out
            .last()
            .is_some_and(|p| p.chars().last().is_some_and(|c| c.is_ascii_digit()));
        match out.last_mut() {
            Some(prev) if after_figure && UNITS.contains(&bare) => {
                prev.push(' ');
                prev.push_str(w);
            }
            _ => out.push(w.to_string()),
        }
    }
    out
}

fn wrap_words(first: &str, text: &str, indent: &str, width: usize, cut: bool) -> String {
    let mut out = String::new();
    let mut line = first.to_string();
    let mut bare = true; // the line holds only its prefix
    for word in words_of(text) {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let len = line.chars().count();
            let sep = usize::from(!(line.is_empty() || line.ends_with(' ')));
            let whole = !cut && indent.chars().count() + word.len() > width;
            if len + sep + word.len() <= width || whole {
                if sep == 1 {
                    line.push(' ');
                }
                line.extend(word.iter());
                bare = false;
                break;
            }
            if bare {
                // Not even a line of its own holds it: cut it.
                let room = width.saturating_sub(len + sep).max(1);
                if sep == 1 {
                    line.push(' ');
                }
                let rest = word.split_off(room.min(word.len()));
                line.extend(word.iter());
                word = rest;
            }
            out.push_str(line.trim_end());
            out.push('\n');
            line = indent.to_string();
            bare = true;
            if word.is_empty() {
                break;
            }
        }
    }
    if !(bare && line.trim().is_empty() && !out.is_empty()) {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Every line of `text` wrapped at `width` columns, a continuation indented two columns
/// past its line's own indentation: a verdict, a summary, a list of reasons made to fit.
pub fn wrap_lines(text: &str, width: usize) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.chars().count() <= width {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let body = line.trim_start_matches(' ');
        let lead = &line[..line.len() - body.len()];
        // A list item's marker (`- `, `! `) lines the continuation up under its text.
        let extra = if body.starts_with("- ") || body.starts_with("! ") {
            "    "
        } else {
            "  "
        };
        out += &wrap_keeping_words(lead, body, &format!("{lead}{extra}"), width);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prints the Markdown table (`cargo test -p truecold-proof --lib print_the_exit_table --
    /// --nocapture`), for docs/verify.md.
    #[test]
    fn print_the_exit_table() {
        print!("{}", markdown());
    }

    #[test]
    fn every_command_has_a_usage_row_and_distinct_codes() {
        for e in EXITS {
            assert!(
                e.codes.iter().any(|c| c.code == EXIT_USAGE),
                "{}: no {EXIT_USAGE}",
                e.command
            );
            let mut codes: Vec<u8> = e.codes.iter().map(|c| c.code).collect();
            codes.sort_unstable();
            codes.dedup();
            assert_eq!(codes.len(), e.codes.len(), "{}: a code twice", e.command);
        }
    }

    #[test]
    fn help_texts_fit_their_width() {
        for e in EXITS {
            for w in [40, 80, 100] {
                let h = long_help(e.command, w);
                assert!(h.lines().all(|l| l.chars().count() <= w), "{w}:\n{h}");
                assert!(h.starts_with("Exit status:\n"), "{h}");
            }
            let s = short_help(e.command);
            assert!(s.contains("125 "), "{s}");
        }
        let root = long_help("truecold", 100);
        assert!(
            root.contains("truecold run: 0 VALID, 3 some launch failed"),
            "{root}"
        );
        assert!(!root.contains("truecold-proof"), "{root}");
        let bisect = long_help("truecold bisect", 100);
        assert!(bisect.contains("truecold bisect step: 0 good"), "{bisect}");
        assert!(!bisect.contains("truecold run"), "{bisect}");
    }

    /// The documents whose "Exit codes" section is [`markdown`]'s table.
    const DOCS_WITH_THE_TABLE: &[&str] = &["docs/verify.md"];

    /// Each of [`DOCS_WITH_THE_TABLE`] has an "Exit codes" section whose table is
    /// [`markdown`]'s as it is: one table, rendered once.
    #[test]
    fn the_documented_exit_codes_are_the_table() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let table = markdown();
        for doc in DOCS_WITH_THE_TABLE {
            let text = std::fs::read_to_string(root.join(doc)).unwrap();
            let at = text
                .find("\n## Exit codes\n")
                .unwrap_or_else(|| panic!("{doc} has no `## Exit codes` section"));
            let section = &text[at + 1..];
            let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 4)];
            let rows: String = section
                .lines()
                .filter(|l| l.starts_with('|'))
                .map(|l| format!("{l}\n"))
                .collect();
            assert_eq!(
                rows, table,
                "{doc}'s exit-code table is not cli_text::markdown()"
            );
        }
    }

    #[test]
    fn wrapping_keeps_words_and_indents_continuations() {
        assert_eq!(wrap("a:", "b c d", "  ", 5), "a: b\n  c d\n");
        assert_eq!(wrap("", "abcdefgh", "", 3), "abc\ndef\ngh\n");
        let t = wrap_lines(
            "  contract: probe, host: pvm (wall clock), 2 vCPU, 16384 MiB\n  - [X] a b c\n",
            30,
        );
        assert_eq!(
            t,
            "  contract: probe, host: pvm\n    (wall clock), 2 vCPU,\n    16384 MiB\n  - [X] a b c\n"
        );
        // A figure keeps its unit.
        assert_eq!(wrap("", "a bc 16384 MiB", "", 9), "a bc\n16384 MiB\n");
        assert!(!t.contains("Mi\n"), "{t}");
        // A path longer than a line stays whole, where it falls.
        let long = format!("VALID results/{}: a label", "x".repeat(40));
        assert_eq!(
            wrap_lines(&long, 30),
            format!("VALID results/{}:\n  a label\n", "x".repeat(40))
        );
    }
}
