//! `truecold-proof`: verify, compare and re-report truecold proof bundles.

use std::path::PathBuf;
use std::process::ExitCode;
use truecold_proof::schema::Figure;

use clap::{Parser, Subcommand};
use truecold_proof::fmt::escape_untrusted;
use truecold_proof::sign::{sign_bundle, SignError, SshKeygen};
use truecold_proof::verify::{chain, compare_dirs, verify_dir_with, SignatureCheck};
use truecold_proof::{CompareOptions, VerifyOptions};

use truecold_proof::cli_text::{
    long_help, short_help, width, wrap_lines, EXIT_USAGE as USAGE_EXIT,
};

#[derive(Parser)]
#[command(
    name = "truecold-proof",
    version,
    about = "Verify and compare truecold proof bundles",
    after_help = short_help("truecold-proof"),
    after_long_help = long_help("truecold-proof", width())
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// `compare --help`: the rule, word for word what `truecold_proof::compare` does, then its
/// exit statuses (the one table).
fn compare_help() -> String {
    format!(
        "{COMPARE_RULE}\n\n{}",
        long_help("truecold-proof compare", width())
    )
}

/// The rule `compare --help` states.
const COMPARE_RULE: &str = "\
Both bundles are verified first; the rows compared are exactly the rows verify accepted.

Metrics: the headline (successes only; and with failures scored at the deadline, which is \
right-censored: a failure's latency is only known to exceed the deadline) and every stage \
with data, over successful rows only.

Test: Mann-Whitney U, two-sided, normal approximation with tie and continuity correction. \
Effect: the difference of medians, median(B) - median(A), with a percentile-bootstrap 95% \
interval (seeded, deterministic).

Verdict per metric, first rule that applies:
  1. inconclusive: fewer than --min-samples values on a side
  2. no difference: both sides hold exactly the same values
  3. improved (B faster) / regressed (B slower): p < --alpha and |median difference| >= \
--threshold-pct of A's median
  4. inconclusive: the 95% interval is wider than --max-ci-width-pct of A's median (a change \
cannot be ruled out)
  5. inconclusive: p >= --alpha, but |median difference| >= --threshold-pct and the 95% \
interval excludes 0 (a change too few values cannot confirm)
  6. no change: otherwise (not significant, or significant but below the threshold)
Only the two headline metrics set the exit status; an inconclusive one names the n a side \
that would decide at the observed effect (the tune's sizing rule).

Output: each side's path and label, each distinct host warning once with the side(s) that \
recorded it, the headline rows (--stages: every stage's row too; --json: every metric), a \
warning when A and B are the same campaign, and on the outcome line whether a side's host \
was busy. Both bundles are on one clock (contract.clock); every output names it. With \
--json an error is JSON too: an object with error (kind, message), path_a, path_b and exit.";

#[derive(Subcommand)]
enum Cmd {
    /// Check a bundle end to end.
    ///
    /// Check a bundle, a multi-arm (engines), tune or bisect directory end to end: every
    /// figure recomputed from the raw rows, every reason it is invalid listed, and the
    /// headline figures of each arm, phase or step with the host warnings it recorded.
    #[command(
        after_help = short_help("truecold-proof verify"),
        after_long_help = long_help("truecold-proof verify", width())
    )]
    Verify {
        /// The bundle, or a multi-arm, tune or bisect directory.
        dir: PathBuf,
        /// Reasons shown per kind (all are counted).
        #[arg(long, default_value_t = 20)]
        max_per_kind: usize,
        /// Also check SHA256SUMS.sig, the SSH signature over SHA256SUMS (needs ssh-keygen).
        #[arg(long, requires = "allowed_signers")]
        signature: bool,
        /// OpenSSH allowed-signers file: `<principal> <key type> <public key>` per line.
        #[arg(long, requires = "signature")]
        allowed_signers: Option<PathBuf>,
        /// The principal that must have signed (default: any in the allowed-signers file).
        #[arg(long, requires = "signature")]
        identity: Option<String>,
        /// The verdict as one JSON document on stdout (docs/verify.md lists its fields).
        #[arg(long)]
        json: bool,
        /// Only the verdict line and the reasons: no summary lines, no warnings.
        #[arg(short, long)]
        quiet: bool,
    },
    /// Sign a valid bundle's SHA256SUMS with an SSH key into SHA256SUMS.sig.
    ///
    /// `ssh-keygen -Y sign -n truecold-bundle` over SHA256SUMS, with the SSH private key;
    /// the directory must verify first.
    #[command(
        after_help = short_help("truecold-proof sign"),
        after_long_help = long_help("truecold-proof sign", width())
    )]
    Sign {
        /// The SSH private key (e.g. ~/.ssh/id_ed25519).
        #[arg(long)]
        key: PathBuf,
        /// The directory to sign (it must verify): a bundle, or a multi-arm, tune or bisect
        /// directory.
        dir: PathBuf,
        /// The result as one JSON document on stdout (`signed` and `exit`, or an `error`).
        #[arg(long)]
        json: bool,
        /// No notes: the result line only (with --json, only the document); errors on stderr.
        #[arg(short, long)]
        quiet: bool,
    },
    /// Compare bundle B against baseline A.
    ///
    /// Judge bundle B against baseline A: Mann-Whitney U and a bootstrap interval of the
    /// median difference per metric; B improved, regressed (slower) or neither, and when it
    /// cannot tell, the n that would.
    #[command(after_help = short_help("truecold-proof compare"), after_long_help = compare_help())]
    Compare {
        /// The baseline bundle (A).
        a: PathBuf,
        /// The bundle compared against the baseline (B).
        b: PathBuf,
        /// Markdown table instead of the terminal table.
        #[arg(long, conflicts_with = "json")]
        markdown: bool,
        /// JSON document instead of the terminal table (every metric; an error object when
        /// the bundles cannot be compared).
        #[arg(long)]
        json: bool,
        /// Every stage's row too (the full table), not only the headline's.
        #[arg(long)]
        stages: bool,
        /// Smallest |Δmedian| in percent of A's median called a change.
        #[arg(long, default_value_t = 2.0)]
        threshold_pct: f64,
        /// Mann–Whitney significance level.
        #[arg(long, default_value_t = 0.01)]
        alpha: f64,
        /// Fewer values on a side → inconclusive.
        #[arg(long, default_value_t = 20)]
        min_samples: usize,
        /// A 95% interval wider than this percent of A's median → inconclusive.
        #[arg(long, default_value_t = 10.0)]
        max_ci_width_pct: f64,
        /// Bootstrap resamples.
        #[arg(long, default_value_t = 2000)]
        resamples: usize,
        /// Bootstrap seed (decimal or 0x hex).
        #[arg(long, value_parser = truecold_proof::seed::parse)]
        seed: Option<u64>,
        /// Compare even if contracts, modes, deadlines, host kinds or sizes differ (never
        /// across clocks).
        #[arg(long)]
        allow_mismatch: bool,
        /// The headline figure compared: `total` (every bundle's latency: the wall clock, or
        /// the nested harness's virtual clock, which adds the work of L1's CPUs) or
        /// `parallel` (the nested harness's parallel clock, which overlaps it; both bundles
        /// must carry it). The stages stay on the bundles' own clock.
        #[arg(long, value_name = "FIGURE", default_value = "total", value_parser = Figure::parse)]
        clock: Figure,
        /// Only the outcome line (with --json: only the document); errors still on stderr.
        #[arg(short, long)]
        quiet: bool,
        /// Write the differential flame graph of B's attribution launches against A's (both
        /// bundles RIP-sampled) to this SVG file (never overwritten).
        #[arg(long, value_name = "FILE")]
        diff_flame: Option<PathBuf>,
    },
    /// Regenerate a bundle's README.md, plots and SHA256SUMS (--html: report.html too).
    ///
    /// From result.json and samples.csv (a multi-arm directory: each arm's, then
    /// comparison.json, README.md, cdf.svg and the top SHA256SUMS; a tune directory: each
    /// phase's, then README.md, recommended/ and the top SHA256SUMS, never tune.json; a
    /// bisect directory: each bundle's, then README.md and SHA256SUMS; refusing when any
    /// other file changed; report.html where there is one, or with --html).
    #[command(
        after_help = short_help("truecold-proof report"),
        after_long_help = long_help("truecold-proof report", width())
    )]
    Report {
        /// The bundle, or the multi-arm, tune or bisect directory, to regenerate.
        dir: PathBuf,
        /// Also write report.html: one self-contained page (verdict, contract,
        /// environment, plots, samples; no script, nothing loaded from outside), listed in
        /// SHA256SUMS. A page already there is regenerated with or without this flag.
        #[arg(long)]
        html: bool,
        /// The result as one JSON document on stdout (`dir`, `written` and `exit`, or an
        /// `error`).
        #[arg(long)]
        json: bool,
        /// No notes: the result line only (with --json, only the document); errors on stderr.
        #[arg(short, long)]
        quiet: bool,
    },
    /// Write shell completions and man pages for `truecold-proof` into a directory (what
    /// scripts/cli-docs.sh runs; docs/building.md). Exit 0 written, 2 refused (a file
    /// exists: never overwritten) or failed, 125 usage error.
    #[command(hide = true)]
    CliDocs {
        /// Where to write completions/{truecold-proof.bash,_truecold-proof,truecold-proof.fish}
        /// and man/truecold-proof*.1 (created as needed; an existing file there is refused).
        dir: PathBuf,
    },
}

/// `compare --diff-flame FILE`: the differential flame graph, when both sides carry a
/// profile; otherwise, or when the file cannot be written (it exists, …), said on stderr.
fn write_diff_flame(c: &truecold_proof::compare::Comparison, path: &std::path::Path) {
    let Some(p) = &c.profile else {
        eprintln!(
            "truecold-proof compare: no differential flame graph: A and B do not both carry \
             RIP-sampled attribution launches"
        );
        return;
    };
    let r = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, p.flame_svg().as_bytes()));
    if let Err(e) = r {
        eprintln!(
            "truecold-proof compare: cannot write the differential flame graph to {}: {e}",
            path.display()
        );
    }
}

/// `report DIR`: a bundle, a multi-arm directory (it holds `arms.json`), a tune directory
/// (it holds `tune.json`) or a bisect directory (it holds `bisect.json`), refused unless it
/// verifies but for the files `report` regenerates ([`truecold_proof::verify::report_dir`]).
fn report(dir: &std::path::Path, html: bool) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    Ok(truecold_proof::verify::report_dir_with(dir, html)?)
}

/// A JSON document, pretty, one trailing newline.
fn json_text(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| "{}".into()) + "\n"
}

/// A subcommand's `--json` with a usage error: the `error` object a script reads on stdout,
/// as for any other error of the command; `None` without `--json`.
fn usage_error_json(
    args: impl Iterator<Item = std::ffi::OsString>,
    e: &clap::Error,
) -> Option<String> {
    let args: Vec<std::ffi::OsString> = args.collect();
    let sub = args.first()?.to_str()?;
    if !args.iter().any(|a| a == "--json") {
        return None;
    }
    let message = truecold_proof::cli_docs::usage_message(e);
    // The positionals as typed: every word that is neither a flag nor a flag's value.
    use clap::CommandFactory;
    let cmd = Cli::command();
    let takes_value = |flag: &str| {
        cmd.find_subcommand(sub).is_some_and(|c| {
            c.get_arguments().any(|a| {
                a.get_long().is_some_and(|l| flag == format!("--{l}"))
                    && a.get_action().takes_values()
            })
        })
    };
    let mut positional: Vec<String> = Vec::new();
    let mut words = args.iter().skip(1).filter_map(|a| a.to_str());
    while let Some(w) = words.next() {
        if w.starts_with('-') {
            if !w.contains('=') && takes_value(w) {
                words.next();
            }
        } else {
            positional.push(w.to_string());
        }
    }
    let mut v = serde_json::json!({
        "error": { "kind": "usage", "message": message },
        "exit": USAGE_EXIT,
    });
    if sub == "compare" {
        v["path_a"] = positional.first().cloned().into();
        v["path_b"] = positional.get(1).cloned().into();
    }
    Some(json_text(&v))
}

/// The `error` object of a subcommand's `--json` when it did nothing: `{"error": {"kind",
/// "message"}, "dir", "exit"}`.
fn error_json(dir: &std::path::Path, kind: &str, message: &str, exit: u8) -> String {
    json_text(&serde_json::json!({
        "error": { "kind": kind, "message": message },
        "dir": dir.display().to_string(),
        "exit": exit,
    }))
}

/// `sign --json`'s `error.kind`.
fn error_kind_of_sign(e: &SignError) -> &'static str {
    match e {
        SignError::InvalidBundle { .. } => "invalid",
        _ => "not_signed",
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // --help and --version print and succeed; every other parse error is a usage
            // error, exit 125 whatever the subcommand.
            let _ = e.print();
            if e.exit_code() == 0 {
                return ExitCode::SUCCESS;
            }
            if let Some(json) = usage_error_json(std::env::args_os().skip(1), &e) {
                print!("{json}");
            }
            return ExitCode::from(USAGE_EXIT);
        }
    };
    let code = match cli.cmd {
        Cmd::Verify {
            dir,
            max_per_kind,
            signature,
            allowed_signers,
            identity,
            json,
            quiet,
        } => {
            let opts = VerifyOptions {
                signature: match (signature, allowed_signers) {
                    (true, Some(allowed_signers)) => Some(SignatureCheck {
                        allowed_signers,
                        identity,
                        ssh_keygen: SshKeygen::default(),
                    }),
                    _ => None,
                },
            };
            let v = verify_dir_with(&dir, &opts);
            let w = width();
            if json {
                if !quiet {
                    eprint!("{}", wrap_lines(&v.render(&dir, max_per_kind), w));
                }
                print!(
                    "{}",
                    json_text(&truecold_proof::verify::verdict_json(&dir, &v))
                );
            } else if quiet {
                print!("{}", wrap_lines(&v.render_quiet(&dir, max_per_kind), w));
            } else {
                print!("{}", wrap_lines(&v.render(&dir, max_per_kind), w));
            }
            v.exit_code()
        }
        Cmd::Sign {
            key,
            dir,
            json,
            quiet,
        } => {
            let _ = quiet; // sign prints its one result line and nothing else anyway
            match sign_bundle(&dir, &key, &SshKeygen::default()) {
                Ok(p) => {
                    if json {
                        print!(
                            "{}",
                            json_text(&serde_json::json!({
                                "dir": dir.display().to_string(),
                                "signed": p.display().to_string(),
                                "exit": 0,
                            }))
                        );
                    } else {
                        println!("signed: {}", escape_untrusted(&p.display().to_string()));
                    }
                    0
                }
                Err(e) => {
                    if json {
                        print!(
                            "{}",
                            error_json(&dir, error_kind_of_sign(&e), &chain(&e), 2)
                        );
                    }
                    if let SignError::InvalidBundle { report, .. } = &e {
                        // The verifier's report, already escaped, one reason per line.
                        eprint!(
                            "truecold-proof sign: refusing to sign a bundle that does not \
                             verify\n{}",
                            wrap_lines(report, width())
                        );
                    } else {
                        eprintln!("truecold-proof sign: {}", escape_untrusted(&chain(&e)));
                    }
                    2
                }
            }
        }
        Cmd::Compare {
            a,
            b,
            markdown,
            json,
            stages,
            threshold_pct,
            alpha,
            min_samples,
            max_ci_width_pct,
            resamples,
            seed,
            allow_mismatch,
            clock,
            quiet,
            diff_flame,
        } => {
            let mut o = CompareOptions {
                threshold_pct,
                alpha,
                min_samples,
                max_ci_width_pct,
                resamples,
                allow_mismatch,
                figure: clock,
                ..CompareOptions::default()
            };
            if let Some(s) = seed {
                o.seed = s;
            }
            let shown = |dir: &std::path::Path, v: &truecold_proof::Verdict| {
                if quiet {
                    eprint!("{}", v.render_quiet(dir, 5))
                } else {
                    eprint!("{}", v.render(dir, 5))
                }
            };
            let text = compare_dirs(&a, &b, &o, shown).and_then(|c| {
                if let Some(path) = &diff_flame {
                    write_diff_flame(&c, path);
                }
                let t = if json {
                    c.render_json()?
                } else if quiet {
                    c.render_outcome()
                } else if markdown {
                    c.render_markdown(stages)
                } else {
                    c.render_text_at(stages, width())
                };
                Ok((t, c.outcome.exit_code()))
            });
            match text {
                Ok((t, code)) => {
                    print!("{t}");
                    code
                }
                Err(e) => {
                    if json {
                        print!("{}", e.render_json(&a, &b));
                    }
                    let code = e.exit_code();
                    let lines = e.lines();
                    for (i, l) in lines.iter().enumerate() {
                        let head = if i == 0 {
                            "truecold-proof compare: "
                        } else {
                            ""
                        };
                        let tail = if i + 1 == lines.len() {
                            format!(" (exit {code})")
                        } else {
                            String::new()
                        };
                        eprintln!("{head}{l}{tail}");
                    }
                    code
                }
            }
        }
        Cmd::Report {
            dir,
            html,
            json,
            quiet: _,
        } => match report(&dir, html) {
            Ok(files) => {
                if json {
                    print!(
                        "{}",
                        json_text(&serde_json::json!({
                            "dir": dir.display().to_string(),
                            "written": files,
                            "exit": 0,
                        }))
                    );
                } else {
                    println!(
                        "regenerated in {}: {}",
                        escape_untrusted(&dir.display().to_string()),
                        files.join(", ")
                    );
                }
                0
            }
            Err(e) => {
                if json {
                    print!(
                        "{}",
                        error_json(&dir, "not_regenerated", &chain(e.as_ref()), 2)
                    );
                }
                eprintln!(
                    "truecold-proof report: {}",
                    escape_untrusted(&chain(e.as_ref()))
                );
                2
            }
        },
        Cmd::CliDocs { dir } => {
            use clap::CommandFactory;
            match truecold_proof::cli_docs::write(Cli::command(), &dir) {
                Ok(files) => {
                    for f in files {
                        println!("{}", escape_untrusted(&f.display().to_string()));
                    }
                    0
                }
                Err(e) => {
                    eprintln!("truecold-proof cli-docs: {}", escape_untrusted(&chain(&e)));
                    2
                }
            }
        }
    };
    ExitCode::from(code as u8)
}
