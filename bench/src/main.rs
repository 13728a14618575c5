//! `truecold`: campaigns of true-cold microVM launches → checksummed proof bundles.
//!
//! Exit status (each subcommand's `--help` says its own): `run` 0 bundle written and
//! verified, every launch strict-ready (or `--allow-failures`); 3 written and verified but
//! some launch failed; 2 bundle written but the verifier found problems (e.g. a repeated boot
//! id: a contract violation); 130 interrupted (a valid partial bundle, marked incomplete, was
//! written); 1 nothing written (the error says why). Any usage error 125 (as
//! `truecold-proof`), `--help` and `--version` 0.

use clap::Parser;
use std::process::ExitCode;
use truecold_bench::cli::{Cli, Cmd, EXIT_LAUNCHES_FAILED, EXIT_USAGE};
use truecold_bench::launch::shell_quote;
use truecold_bench::plan::bisect::{BisectRunPlan, BisectStepPlan, ConfigBisectPlan};
use truecold_bench::plan::tune::{TunePhaseRun, TunePlan};
use truecold_bench::plan::CampaignPlan;
use truecold_bench::run::{failed_kinds, failure_lines, level_lines, run, RunError};
use truecold_proto::measure::error_chain as chain;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // --help and --version print and succeed; every other parse error is a usage
            // error, 125 whatever the subcommand.
            let _ = e.print();
            return ExitCode::from(if e.exit_code() == 0 { 0 } else { EXIT_USAGE });
        }
    };
    let invocation = std::env::args()
        .map(|a| shell_quote(&a))
        .collect::<Vec<_>>()
        .join(" ");
    match cli.cmd {
        Cmd::Run(args) => run_main(&args, &invocation),
        Cmd::Tune(args) => tune_main(&args, &invocation),
        Cmd::TunePhase(args) => tune_phase_main(&args, &invocation),
        Cmd::Bisect(args) => bisect_main(&args, &invocation),
        Cmd::CliDocs(args) => cli_docs_main(&args.dir),
    }
}

/// `truecold cli-docs DIR`: 0 every file written, 1 refused (a file exists) or failed.
fn cli_docs_main(dir: &std::path::Path) -> ExitCode {
    use clap::CommandFactory;
    match truecold_proof::cli_docs::write(Cli::command(), dir) {
        Ok(files) => {
            for f in files {
                println!("{}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("truecold: error: {}", chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// `truecold bisect`: `step` exits as `git bisect run` reads it (0 good, 1 bad, 125 skip,
/// 200 cannot judge: stop); `run` and `config` exit 0 when the directory names a culprit and
/// verifies, 2 when it does not verify, 1 when nothing was found or written.
fn bisect_main(args: &truecold_bench::cli::BisectArgs, invocation: &str) -> ExitCode {
    use truecold_bench::bisect::{self, EXIT_ABORT};
    use truecold_bench::cli::BisectCmd;
    let done = |dir: std::path::PathBuf| {
        let v = truecold_proof::verify_dir(&dir);
        print!("{}", v.render(&dir, 5));
        println!(
            "bisect: {}/README.md; verify: truecold-proof verify {}",
            dir.display(),
            dir.display()
        );
        if v.is_valid() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(2)
        }
    };
    let failed = |e: &dyn std::error::Error, code: ExitCode| {
        eprintln!("truecold: error: {}", chain(e));
        code
    };
    match &args.cmd {
        BisectCmd::Step(a) => match BisectStepPlan::from_cli(a)
            .map_err(bisect::BisectRunError::from)
            .and_then(|p| bisect::step(&p, invocation))
        {
            Ok(o) => {
                println!("truecold bisect step: {}", o.as_str());
                ExitCode::from(o.exit_code() as u8)
            }
            Err(e) => {
                eprintln!("truecold: error: {}", chain(&e));
                ExitCode::from(EXIT_ABORT)
            }
        },
        BisectCmd::Run(a) => match BisectRunPlan::from_cli(a) {
            Err(e) => failed(&e, ExitCode::FAILURE),
            Ok(p) => match bisect::run(&p, invocation) {
                Ok(dir) => done(dir),
                Err(e) => failed(&e, ExitCode::FAILURE),
            },
        },
        BisectCmd::Config(a) => match ConfigBisectPlan::from_cli(a) {
            Err(e) => failed(&e, ExitCode::FAILURE),
            Ok(p) => match truecold_bench::bisect_config::config(&p, invocation) {
                Ok(dir) => done(dir),
                Err(e) => failed(&e, ExitCode::FAILURE),
            },
        },
    }
}

fn run_main(args: &truecold_bench::cli::RunArgs, invocation: &str) -> ExitCode {
    let outcome = CampaignPlan::from_cli(args)
        .map_err(RunError::from)
        .and_then(|plan| run(&plan, invocation));
    match outcome {
        Ok(out) => {
            for w in &out.warnings {
                eprintln!("truecold: warning: {w}");
            }
            for (engine, w) in &out.arms {
                println!("arm {engine}:");
                print!("{}", w.verdict.render(&w.path, 5));
            }
            let v = &out.written.verdict;
            print!("{}", v.render(&out.written.path, 5));
            if let Some(r) = &v.result {
                for l in level_lines(r) {
                    println!("{l}");
                }
            }
            println!(
                "verify: sha256sum -c --strict SHA256SUMS (in {}) and truecold-proof verify {}",
                out.written.path.display(),
                out.written.path.display()
            );
            let failed = failed_kinds(&out);
            for l in failure_lines(&failed) {
                println!("{l}");
            }
            if let Some(c) = v.result.as_ref().map(|r| &r.contract) {
                if let (Some(k), Some(kind)) = (c.stop_after, &c.stopped) {
                    eprintln!(
                        "truecold: stopped after {k} consecutive `{}` failures (fail fast: \
                         --stop-after K, or --keep-going to run every launch)",
                        truecold_proof::verdict::escape_untrusted(kind)
                    );
                }
            }
            if !v.is_valid() || out.arms.iter().any(|(_, w)| !w.verdict.is_valid()) {
                ExitCode::from(2)
            } else if out.interrupted {
                ExitCode::from(130)
            } else if !failed.is_empty() && !args.allow_failures {
                eprintln!(
                    "truecold: {} launch(es) failed (exit {EXIT_LAUNCHES_FAILED}; the bundle is \
                     VALID and keeps them as data; --allow-failures exits 0)",
                    failed.values().sum::<u64>()
                );
                ExitCode::from(EXIT_LAUNCHES_FAILED)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("truecold: error: {}", chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// `truecold tune`: 0 written and verified, 2 written but invalid, 1 nothing written.
fn tune_main(args: &truecold_bench::cli::TuneArgs, invocation: &str) -> ExitCode {
    if args.list_knobs {
        print!("{}", truecold_bench::tune::catalogue_text());
        return ExitCode::SUCCESS;
    }
    let plan = match TunePlan::from_cli(args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("truecold: error: {}", chain(&e));
            return ExitCode::FAILURE;
        }
    };
    match truecold_bench::tune::tune(&plan, invocation) {
        Ok(out) => {
            for w in &out.warnings {
                eprintln!("truecold: warning: {w}");
            }
            let v = &out.written.verdict;
            print!("{}", v.render(&out.written.path, 5));
            println!(
                "tune: {}/README.md; verify: truecold-proof verify {}",
                out.written.path.display(),
                out.written.path.display()
            );
            if v.is_valid() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            }
        }
        Err(e) => {
            eprintln!("truecold: error: {}", chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// `truecold tune-phase`: 0 written and verified, 2 written but invalid, 130 interrupted,
/// 1 nothing written.
fn tune_phase_main(args: &truecold_bench::cli::TunePhaseArgs, invocation: &str) -> ExitCode {
    use truecold_bench::phase::{run_here, PhasePlan};
    let p = TunePhaseRun::from_cli(args);
    let ran = PhasePlan::read(&p.plan_file)
        .and_then(|plan| run_here(&plan, p.vmm.as_deref(), &p.guest_dir, &p.out, invocation));
    match ran {
        Ok((w, interrupted)) => {
            print!("{}", w.verdict.render(&w.path, 5));
            if !w.verdict.is_valid() {
                ExitCode::from(2)
            } else if interrupted {
                ExitCode::from(130)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("truecold: error: {}", chain(&e));
            ExitCode::FAILURE
        }
    }
}
