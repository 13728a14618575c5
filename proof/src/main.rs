//! `truecold-proof`: verify, compare and re-report truecold proof bundles.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use truecold_proof::verify::chain;
use truecold_proof::{compare_bundles, regenerate, verify_dir, CompareOptions};

#[derive(Parser)]
#[command(
    name = "truecold-proof",
    version,
    about = "Verify and compare truecold proof bundles"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Check a bundle end to end. Exit 0 valid, 1 invalid (every reason listed), 2 unreadable.
    Verify {
        dir: PathBuf,
        /// Reasons shown per kind (all are counted).
        #[arg(long, default_value_t = 20)]
        max_per_kind: usize,
    },
    /// Compare bundle B against baseline A. Exit 0 no regression, 1 regression,
    /// 125 inconclusive (too few samples, interval too wide, a bundle invalid, or
    /// the bundles not comparable).
    Compare {
        a: PathBuf,
        b: PathBuf,
        /// Markdown table instead of the terminal table.
        #[arg(long, conflicts_with = "json")]
        markdown: bool,
        /// JSON document instead of the terminal table.
        #[arg(long)]
        json: bool,
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
        /// Bootstrap seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Compare even if contracts, modes, deadlines, host kinds or sizes differ.
        #[arg(long)]
        allow_mismatch: bool,
    },
    /// Regenerate README.md, the plots and SHA256SUMS from result.json and samples.csv.
    Report { dir: PathBuf },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Verify { dir, max_per_kind } => {
            let v = verify_dir(&dir);
            print!("{}", v.render(&dir, max_per_kind));
            v.exit_code()
        }
        Cmd::Compare {
            a,
            b,
            markdown,
            json,
            threshold_pct,
            alpha,
            min_samples,
            max_ci_width_pct,
            resamples,
            seed,
            allow_mismatch,
        } => {
            let mut o = CompareOptions {
                threshold_pct,
                alpha,
                min_samples,
                max_ci_width_pct,
                resamples,
                allow_mismatch,
                ..CompareOptions::default()
            };
            if let Some(s) = seed {
                o.seed = s;
            }
            let va = verify_dir(&a);
            let vb = verify_dir(&b);
            let mut bad = false;
            for (dir, v) in [(&a, &va), (&b, &vb)] {
                if !v.is_valid() {
                    eprint!("{}", v.render(dir, 5));
                    bad = true;
                }
            }
            match (bad, &va.result, &vb.result) {
                (false, Some(ra), Some(rb)) => {
                    let sa = truecold_proof::read_bundle(&a).map(|x| x.1);
                    let sb = truecold_proof::read_bundle(&b).map(|x| x.1);
                    match (sa, sb) {
                        (Ok(sa), Ok(sb)) => match compare_bundles((ra, &sa), (rb, &sb), &o) {
                            Ok(c) => {
                                let text = if json {
                                    c.render_json()
                                } else if markdown {
                                    Ok(c.render_markdown())
                                } else {
                                    Ok(c.render_text())
                                };
                                match text {
                                    Ok(t) => {
                                        print!("{t}");
                                        c.outcome.exit_code()
                                    }
                                    Err(e) => {
                                        eprintln!("truecold-proof compare: {}", chain(&e));
                                        125
                                    }
                                }
                            }
                            Err(e) => {
                                eprintln!("truecold-proof compare: {e}");
                                125
                            }
                        },
                        (Err(e), _) | (_, Err(e)) => {
                            eprintln!("truecold-proof compare: {}", chain(&e));
                            125
                        }
                    }
                }
                _ => {
                    eprintln!("truecold-proof compare: cannot compare invalid bundles (exit 125)");
                    125
                }
            }
        }
        Cmd::Report { dir } => match regenerate(&dir) {
            Ok(files) => {
                println!("regenerated in {}: {}", dir.display(), files.join(", "));
                0
            }
            Err(e) => {
                eprintln!("truecold-proof report: {}", chain(&e));
                2
            }
        },
    };
    ExitCode::from(code as u8)
}
