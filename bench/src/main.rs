//! `truecold`: campaigns of true-cold microVM launches → checksummed proof bundles.
//!
//! Exit status: the one table, `truecold_proof::cli_text::EXITS`, which each subcommand's
//! `--help` ends with. Any usage error 125 (as `truecold-proof`), a flag combination the plan
//! refuses after parsing too (a typed `ArgError`); `--help` and `--version` 0.

use clap::Parser;
use std::process::ExitCode;
use truecold_bench::campaign::process_launcher::shell_quote;
use truecold_bench::cli::{Cli, Cmd, EXIT_LAUNCHES_FAILED, EXIT_USAGE};
use truecold_bench::plan::bisect_plan::{BisectRunPlan, BisectStepPlan, ConfigBisectPlan};
use truecold_bench::plan::campaign_plan::CampaignPlan;
use truecold_bench::plan::tune_plan::{TunePhaseRun, TunePlan};
use truecold_bench::run::dispatch::run;
use truecold_bench::run::outcome::RunOutcome;
use truecold_bench::run::outcome::{failed_kinds, failure_lines, level_lines};
use truecold_bench::run::run_error::RunError;
use truecold_bench::terminal::output;
use truecold_bench::tune::tune_run;
use truecold_proto::measure::error_chain as chain;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // --help and --version print and succeed; every other parse error is a usage
            // error, 125 whatever the subcommand.
            let _ = e.print();
            if e.exit_code() != 0 {
                if let Some(doc) = run_usage_error_json(std::env::args_os().skip(1), &e) {
                    print!("{doc}");
                }
            }
            return ExitCode::from(if e.exit_code() == 0 { 0 } else { EXIT_USAGE });
        }
    };
    let invocation = std::env::args()
        .map(|a| shell_quote(&a))
        .collect::<Vec<_>>()
        .join(" ");
    output::set_quiet(match &cli.cmd {
        Cmd::Run(a) => a.quiet,
        Cmd::Tune(a) => a.quiet,
        Cmd::Bisect(a) => a.quiet,
        Cmd::Replay(a) => a.quiet || a.json,
        Cmd::Fleet(_) | Cmd::TunePhase(_) | Cmd::CliDocs(_) => false,
    });
    match cli.cmd {
        Cmd::Run(args) => run_main(&args, &invocation),
        Cmd::Tune(args) => tune_main(&args, &invocation),
        Cmd::TunePhase(args) => tune_phase_main(&args, &invocation),
        Cmd::Bisect(args) => bisect_main(&args, &invocation),
        Cmd::Replay(args) => replay_main(&args, &invocation),
        Cmd::Fleet(args) => fleet_main(&args, &invocation),
        Cmd::CliDocs(args) => cli_docs_main(&args.dir),
    }
}

/// `truecold replay`: the exit statuses of its `--help` (0 reproduced, 3 not, 2 the new
/// bundle invalid, 4 an input differs from the record, 1 nothing run, 125 usage).
fn replay_main(args: &truecold_bench::cli::ReplayArgs, invocation: &str) -> ExitCode {
    use truecold_bench::plan::replay_plan::ReplayPlan;
    use truecold_bench::replay::replay_error::ReplayError;
    use truecold_bench::replay::replay_run::{replay, ReplayOutcome};
    let done = ReplayPlan::from_cli(args)
        .map_err(ReplayError::from)
        .and_then(|p| replay(&p, invocation));
    let out: ReplayOutcome = match done {
        Ok(o) => o,
        Err(e) => {
            eprintln!("truecold: error: {}", chain(&e));
            let usage = e.usage().is_some();
            if args.json {
                let exit = if usage { EXIT_USAGE } else { 1 };
                print!("{}", error_json("replay", &chain(&e), exit));
            }
            return exit_of(usage);
        }
    };
    let code: u8 = match &out.ran {
        _ if !out.inputs.mismatches.is_empty() => 4,
        None => 0,
        Some(r) => match &r.judged {
            None => 2,
            Some(j) if j.reproduced() => 0,
            Some(_) => 3,
        },
    };
    if args.json {
        let doc = serde_json::json!({
            "record": out.record.display().to_string(),
            "line": out.line,
            "inputs": out.inputs,
            "notes": out.notes,
            "replay": out.ran.as_ref().map(|r| serde_json::json!({
                "bundle": r.bundle.display().to_string(),
                "verdict": truecold_proof::verify::verdict_json(&r.bundle, &r.verdict),
                "judged": r.judged.as_ref().map(|j| j.to_json()),
            })),
            "exit": code,
        });
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return ExitCode::from(code);
    }
    let esc = truecold_proof::fmt::escape_untrusted;
    println!("replay of {}", out.record.display());
    for (what, v) in &out.inputs.matched {
        println!("  input {what}: matches the record ({v})");
    }
    for m in &out.inputs.mismatches {
        println!(
            "  input {}: DIFFERS: recorded {}, here {}",
            m.what,
            m.recorded,
            esc(&m.here)
        );
    }
    for (what, path, d) in &out.inputs.unrecorded {
        println!("  input {what}: not recorded by the bundle; here {path} sha256 {d}");
    }
    for n in &out.notes {
        println!("  note: {n}");
    }
    println!(
        "  run: truecold run {}",
        out.line
            .iter()
            .map(|w| shell_quote(w))
            .collect::<Vec<_>>()
            .join(" ")
    );
    match &out.ran {
        None if code == 4 => {
            eprintln!(
                "truecold: replay refused: {} input(s) differ from the record; nothing was run",
                out.inputs.mismatches.len()
            );
        }
        None => println!("replay: inputs checked (--check); nothing run"),
        Some(r) => {
            print!("{}", r.verdict.render(&r.bundle, 5));
            match &r.judged {
                Some(j) => print!("{}", j.render_text()),
                None => println!("replay: the new bundle does not verify; not judged"),
            }
        }
    }
    ExitCode::from(code)
}

/// `truecold fleet`: the exit statuses of its `--help`.
fn fleet_main(args: &truecold_bench::cli::FleetArgs, invocation: &str) -> ExitCode {
    use truecold_bench::cli::FleetCmd;
    use truecold_bench::fleet::fleet_error::FleetError;
    use truecold_bench::fleet::{gather, shard, status, submit};
    use truecold_bench::plan::fleet_plan::FleetSubmitPlan;
    let (json, quiet) = (args.json, args.quiet);
    let failed = |e: FleetError| {
        eprintln!("truecold: error: {}", chain(&e));
        let code = e.exit_code();
        if json {
            print!("{}", error_json("fleet", &chain(&e), code));
        }
        ExitCode::from(code)
    };
    // A directory's verdict: the document, its first line, or all of it.
    let verdict = |dir: &std::path::Path, v: &truecold_proof::Verdict, code: u8| {
        if json {
            let doc = serde_json::json!({
                "dir": dir.display().to_string(),
                "verdict": truecold_proof::verify::verdict_json(dir, v),
                "exit": code,
            });
            println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        } else if quiet {
            println!("{}", v.render(dir, 5).lines().next().unwrap_or_default());
        } else {
            print!("{}", v.render(dir, 5));
        }
    };
    let valid_code = |v: &truecold_proof::Verdict| if v.is_valid() { 0 } else { 2 };
    match &args.cmd {
        FleetCmd::Submit(a) => {
            let s = match FleetSubmitPlan::from_cli(a)
                .map_err(FleetError::from)
                .and_then(|p| submit::submit(&p))
            {
                Ok(s) => s,
                Err(e) => return failed(e),
            };
            let root = s.dir.root.display().to_string();
            if json {
                let doc = serde_json::json!({
                    "fleet": root,
                    "shards": s.plan.shards.len(),
                    "clock": s.plan.clock.as_str(),
                    "task_mem_mib": s.plan.task_mem_mib,
                    "exclusive": s.plan.exclusive,
                    "array_job_ids": s.array_job_ids,
                    "tasks": s.tasks,
                    "sbatch": s.sbatch,
                    "exit": 0,
                });
                println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
                return ExitCode::SUCCESS;
            }
            let outcome = if !s.array_job_ids.is_empty() {
                format!(
                    "fleet: submitted job array(s) {}, tasks {}; `truecold fleet status {root}` \
                     then `truecold fleet gather {root}`",
                    s.array_job_ids.join(", "),
                    s.tasks
                        .iter()
                        .map(|t| t.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                )
            } else if s.tasks.is_empty() {
                "fleet: every shard is written; nothing to submit".to_string()
            } else {
                s.sbatch
                    .iter()
                    .map(|a| format!("fleet: dry run: sbatch {}", a.join(" ")))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            if !quiet {
                println!(
                    "fleet: {root} ({} shard(s), {} clock, {} MiB a task{})",
                    s.plan.shards.len(),
                    s.plan.clock.as_str(),
                    s.plan.task_mem_mib,
                    if s.plan.exclusive {
                        ", exclusive nodes"
                    } else {
                        ""
                    }
                );
            }
            println!("{outcome}");
            ExitCode::SUCCESS
        }
        FleetCmd::Shard(a) => match shard::run_shard(&a.dir, a.task, invocation) {
            Ok(shard::ShardDone::AlreadyThere(n)) => {
                if json {
                    let doc = serde_json::json!({ "shard": n, "written_already": true, "exit": 0 });
                    println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
                } else {
                    println!("fleet: shard `{n}` is written already; nothing run");
                }
                ExitCode::SUCCESS
            }
            Ok(shard::ShardDone::Written { name, written }) => {
                let code = valid_code(&written.verdict);
                if !json && !quiet {
                    println!("fleet: shard `{name}`:");
                }
                verdict(&written.path, &written.verdict, code);
                ExitCode::from(code)
            }
            Err(e) => failed(e),
        },
        FleetCmd::Status(a) => match status::status(&a.dir) {
            Ok(v) => {
                let code: u8 = if v.iter().any(|(_, s)| s.failed()) {
                    3
                } else {
                    0
                };
                if json {
                    let states: serde_json::Map<String, serde_json::Value> = v
                        .iter()
                        .map(|(n, s)| (n.to_string(), serde_json::Value::from(s.to_string())))
                        .collect();
                    let doc = serde_json::json!({ "shards": states, "exit": code });
                    println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
                } else {
                    for (name, s) in v.iter().filter(|(_, s)| !quiet || s.failed()) {
                        println!("{name}: {s}");
                    }
                }
                ExitCode::from(code)
            }
            Err(e) => failed(e),
        },
        FleetCmd::Gather(a) => match gather::gather(&a.dir, a.against.as_deref()) {
            Ok(g) => {
                let code = valid_code(&g.verdict);
                if json {
                    let doc = serde_json::json!({
                        "fleet": g.dir.display().to_string(),
                        "verdict": truecold_proof::verify::verdict_json(&g.dir, &g.verdict),
                        "merge": g.merge,
                        "leftovers": g.leftovers.as_ref().map(|p| p.display().to_string()),
                        "wave": g.wave,
                        "exit": code,
                    });
                    println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
                } else {
                    verdict(&g.dir, &g.verdict, code);
                    if !quiet {
                        if let Some(m) = &g.merge {
                            print!("{}", m.render_text());
                        }
                        if let Some(w) = &g.wave {
                            print!("{}", w.trim_start());
                        }
                        if let Some(l) = &g.leftovers {
                            println!(
                                "fleet: failed tasks' partial output is kept in {} (not part \
                                 of the fleet)",
                                l.display()
                            );
                        }
                    }
                }
                ExitCode::from(code)
            }
            Err(e) => failed(e),
        },
    }
}

/// A usage error of a subcommand given `--json`: the `error` object a script reads on stdout
/// (as `--json` prints one for any other failure), clap's text still on stderr; `None`
/// without `--json`.
fn run_usage_error_json(
    args: impl Iterator<Item = std::ffi::OsString>,
    e: &clap::Error,
) -> Option<String> {
    let args: Vec<std::ffi::OsString> = args.collect();
    if !args.iter().any(|a| a == "--json") {
        return None;
    }
    let message = truecold_proof::cli_docs::usage_message(e);
    Some(error_json("usage", &message, EXIT_USAGE))
}

/// The `error` object of `--json` when nothing was written: `{"error": {"kind", "message"},
/// "exit"}`.
fn error_json(kind: &str, message: &str, exit: u8) -> String {
    let v = serde_json::json!({
        "error": { "kind": kind, "message": message },
        "exit": exit,
    });
    serde_json::to_string_pretty(&v).unwrap_or_else(|_| "{}".into()) + "\n"
}

/// A human summary made to fit the terminal (100 columns when piped): long lines wrap at
/// words, continuations indented.
fn fit(text: &str) -> String {
    use truecold_proof::cli_text::{width, wrap_lines};
    wrap_lines(text, width())
}

/// A directory's verdict as `--json` prints it (`tune`, `bisect run|config`): the directory,
/// whether it is valid, `verify --json`'s object for it and the exit status.
fn dir_json(key: &str, dir: &std::path::Path, v: &truecold_proof::Verdict, exit: u8) -> String {
    let doc = serde_json::json!({
        key: dir.display().to_string(),
        "valid": v.is_valid(),
        "verdict": truecold_proof::verify::verdict_json(dir, v),
        "exit": exit,
    });
    serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".into()) + "\n"
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
    use truecold_bench::bisect::bisect_error::BisectRunError;
    use truecold_bench::bisect::commit_bisect::{self, EXIT_ABORT};
    use truecold_bench::bisect::config_bisect;
    use truecold_bench::cli::BisectCmd;
    let (quiet, json) = (args.quiet, args.json);
    let done = |dir: std::path::PathBuf| {
        let v = truecold_proof::verify_dir(&dir);
        let code: u8 = if v.is_valid() { 0 } else { 2 };
        let mut text = if quiet {
            v.render_quiet(&dir, 5)
        } else {
            v.render_without_recorded(&dir, 5)
        };
        if !quiet {
            text += &format!(
                "bisect: {}/README.md; verify: truecold-proof verify {}\n",
                dir.display(),
                dir.display()
            );
        }
        if json {
            if !quiet {
                eprint!("{}", fit(&text));
            }
            print!("{}", dir_json("bisect", &dir, &v, code));
        } else {
            print!("{}", fit(&text));
        }
        ExitCode::from(code)
    };
    // An argument error (the plan refused the flags, before or during the search) is a
    // usage error: 125; any other failure 1 (`step`: 200, which stops `git bisect run`).
    let failed = |e: &BisectRunError, other: u8| {
        eprintln!("truecold: error: {}", chain(e));
        let code = if e.usage().is_some() {
            EXIT_USAGE
        } else {
            other
        };
        if json {
            let kind = if code == EXIT_USAGE {
                "usage"
            } else {
                "nothing_written"
            };
            print!("{}", error_json(kind, &chain(e), code));
        }
        ExitCode::from(code)
    };
    match &args.cmd {
        BisectCmd::Step(a) => match BisectStepPlan::from_cli(a)
            .map_err(BisectRunError::from)
            .and_then(|p| commit_bisect::step(&p, invocation))
        {
            Ok(o) => {
                let code = o.exit_code() as u8;
                if json {
                    let doc = serde_json::json!({ "outcome": o.as_str(), "exit": code });
                    print!(
                        "{}",
                        serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".into()) + "\n"
                    );
                } else {
                    println!("truecold bisect step: {}", o.as_str());
                }
                ExitCode::from(code)
            }
            Err(e) => failed(&e, EXIT_ABORT),
        },
        BisectCmd::Run(a) => match BisectRunPlan::from_cli(a)
            .map_err(BisectRunError::from)
            .and_then(|p| commit_bisect::run(&p, invocation))
        {
            Ok(dir) => done(dir),
            Err(e) => failed(&e, 1),
        },
        BisectCmd::Config(a) => match ConfigBisectPlan::from_cli(a)
            .map_err(BisectRunError::from)
            .and_then(|p| config_bisect::config(&p, invocation))
        {
            Ok(dir) => done(dir),
            Err(e) => failed(&e, 1),
        },
    }
}

fn run_main(args: &truecold_bench::cli::RunArgs, invocation: &str) -> ExitCode {
    let outcome = CampaignPlan::from_cli(args)
        .map_err(RunError::from)
        .and_then(|plan| run(&plan, invocation));
    match outcome {
        Ok(out) => {
            // The campaign's warnings on stderr, each once: what was printed before the first
            // launch is not repeated.
            for w in &out.warnings {
                output::note_once(w, &format!("truecold: warning: {w}"));
            }
            let code = run_exit(&out, args.allow_failures);
            // The human summary: stdout, or stderr when stdout carries the JSON document.
            let mut text = String::new();
            summary_text(&out, args.quiet, &mut text);
            if args.json {
                if !args.quiet {
                    eprint!("{}", fit(&text));
                }
                print!("{}", run_json(&out, code));
            } else {
                print!("{}", fit(&text));
            }
            let v = &out.written.verdict;
            if let Some(c) = v.result.as_ref().map(|r| &r.contract) {
                if let (Some(k), Some(kind)) = (c.stop_after, &c.stopped) {
                    truecold_bench::note!(
                        "truecold: stopped after {k} consecutive `{}` failures (fail fast: \
                         --stop-after K, or --keep-going to run every launch)",
                        truecold_proof::fmt::escape_untrusted(kind)
                    );
                }
            }
            if code == EXIT_LAUNCHES_FAILED {
                eprintln!(
                    "truecold: {} launch(es) failed (exit {EXIT_LAUNCHES_FAILED}; the bundle is \
                     VALID and keeps them as data; --allow-failures exits 0)",
                    failed_kinds(&out).values().sum::<u64>()
                );
            }
            ExitCode::from(code)
        }
        Err(e) => {
            eprintln!("truecold: error: {}", chain(&e));
            // A flag combination the plan refuses is a usage error (125), found after clap.
            let usage = e.usage().is_some();
            if args.json {
                let (kind, exit) = if usage {
                    ("usage", EXIT_USAGE)
                } else {
                    ("nothing_written", 1)
                };
                print!("{}", error_json(kind, &chain(&e), exit));
            }
            exit_of(usage)
        }
    }
}

/// The bundle's attribution launches whose vCPUs obtained under 90 % of the samples asked
/// for (`truecold_proof::attribution::rate_warnings`), one line each; none without an
/// attribution.
fn attribution_rate_lines(bundle: &std::path::Path) -> Vec<String> {
    let p = bundle.join(truecold_proof::attribution::JSONL_FILE);
    std::fs::read(&p)
        .map(|b| truecold_proof::attribution::rate_warnings(&b))
        .unwrap_or_default()
        .into_iter()
        .map(|w| format!("WARNING: {w}"))
        .collect()
}

/// `truecold run`'s exit status for a written campaign (the table of `--help`).
fn run_exit(out: &RunOutcome, allow_failures: bool) -> u8 {
    let v = &out.written.verdict;
    if !v.is_valid() || out.arms.iter().any(|(_, w)| !w.verdict.is_valid()) {
        2
    } else if out.interrupted {
        130
    } else if !failed_kinds(out).is_empty() && !allow_failures {
        EXIT_LAUNCHES_FAILED
    } else {
        0
    }
}

/// The end-of-run summary a person reads: each arm's and the bundle's verdict, the levels,
/// how to verify, the error-kind table. With `quiet`, the verdict lines and their reasons
/// only.
fn summary_text(out: &RunOutcome, quiet: bool, s: &mut String) {
    use std::fmt::Write as _;
    let v = &out.written.verdict;
    let path = &out.written.path;
    if quiet {
        for (engine, w) in &out.arms {
            let _ = write!(s, "arm {engine}: {}", w.verdict.render_quiet(&w.path, 5));
        }
        s.push_str(&v.render_quiet(path, 5));
        return;
    }
    for (engine, w) in &out.arms {
        let _ = writeln!(s, "arm {engine}:");
        s.push_str(&w.verdict.render_without_recorded(&w.path, 5));
    }
    s.push_str(&v.render_without_recorded(path, 5));
    if let Some(r) = &v.result {
        for l in level_lines(r) {
            let _ = writeln!(s, "{l}");
        }
    }
    for l in attribution_rate_lines(path) {
        let _ = writeln!(s, "{l}");
    }
    let _ = writeln!(
        s,
        "verify: sha256sum -c --strict SHA256SUMS (in {}) and truecold-proof verify {}",
        path.display(),
        path.display()
    );
    for l in failure_lines(&failed_kinds(out)) {
        let _ = writeln!(s, "{l}");
    }
}

/// `truecold run --json`'s document (docs/verify.md lists the fields).
fn run_json(out: &RunOutcome, exit: u8) -> String {
    use serde_json::json;
    let v = &out.written.verdict;
    let path = &out.written.path;
    // An engines campaign's directory has no result of its own: its arms' figures add up.
    let results: Vec<&truecold_proof::schema::ResultJson> = match &v.result {
        Some(r) => vec![r],
        None => out
            .arms
            .iter()
            .filter_map(|(_, w)| w.verdict.result.as_ref())
            .collect(),
    };
    let sum = |f: fn(&truecold_proof::schema::ResultJson) -> u64| -> u64 {
        results.iter().map(|r| f(r)).sum()
    };
    let headline = v.result.as_ref().map(|r| {
        let h = r.summary.headline.successes.as_ref();
        json!({
            "metric": truecold_proof::schema::HEADLINE,
            "over": "successes",
            "clock": r.contract.clock.as_str(),
            "p50_ns": h.map(|h| h.p50),
            "p99_ns": h.map(|h| h.p99),
            "max_ns": h.map(|h| h.max),
        })
    });
    let stopped = results
        .iter()
        .find_map(|r| {
            r.contract
                .stopped
                .as_ref()
                .map(|k| (r.contract.stop_after, k))
        })
        .map(|(after, kind)| json!({ "after": after, "kind": kind }));
    let doc = json!({
        "bundle": path.display().to_string(),
        "valid": v.is_valid() && out.arms.iter().all(|(_, w)| w.verdict.is_valid()),
        "verdict": truecold_proof::verify::verdict_json(path, v),
        "arms": out.arms.iter().map(|(engine, w)| json!({
            "engine": engine.to_string(),
            "path": w.path.display().to_string(),
            "verdict": truecold_proof::verify::verdict_json(&w.path, &w.verdict),
        })).collect::<Vec<_>>(),
        "attempts": sum(|r| r.summary.attempts),
        "ok": sum(|r| r.summary.successes),
        "failed": sum(|r| r.summary.failures),
        "errors": failed_kinds(out),
        "headline": headline,
        "stopped": stopped,
        "incomplete": results.iter().any(|r| r.contract.incomplete),
        "interrupted": out.interrupted,
        "host_warnings": out.warnings,
        "exit": exit,
    });
    serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".into()) + "\n"
}

/// `truecold tune`: 0 written and verified, 2 written but invalid, 1 nothing written.
fn tune_main(args: &truecold_bench::cli::TuneArgs, invocation: &str) -> ExitCode {
    if args.list_knobs {
        print!("{}", tune_run::catalogue_text());
        return ExitCode::SUCCESS;
    }
    let failed = |e: &dyn std::error::Error, usage: bool| {
        eprintln!("truecold: error: {}", chain(e));
        if args.json {
            let (kind, exit) = if usage {
                ("usage", EXIT_USAGE)
            } else {
                ("nothing_written", 1)
            };
            print!("{}", error_json(kind, &chain(e), exit));
        }
        exit_of(usage)
    };
    let plan = match TunePlan::from_cli(args) {
        Ok(p) => p,
        Err(e) => return failed(&e, true),
    };
    if let Some(pp) = plan.propose.as_ref().filter(|p| p.dry_run) {
        return propose_dry_run(&plan, pp, args.json);
    }
    match tune_run::tune(&plan, invocation) {
        Ok(out) => {
            for w in &out.warnings {
                output::note_once(w, &format!("truecold: warning: {w}"));
            }
            let v = &out.written.verdict;
            let path = &out.written.path;
            let code: u8 = if v.is_valid() { 0 } else { 2 };
            let mut text = if args.quiet {
                v.render_quiet(path, 5)
            } else {
                v.render_without_recorded(path, 5)
            };
            if !args.quiet {
                text += &format!(
                    "tune: {}/README.md; verify: truecold-proof verify {}\n",
                    path.display(),
                    path.display()
                );
            }
            if args.json {
                if !args.quiet {
                    eprint!("{}", fit(&text));
                }
                print!("{}", dir_json("tune", path, v, code));
            } else {
                print!("{}", fit(&text));
            }
            ExitCode::from(code)
        }
        Err(e) => failed(&e, e.usage().is_some()),
    }
}

/// `truecold tune --propose-from BUNDLE --dry-run`: the proposals, each with its source, and
/// what was left out; 0 printed, 1 when the bundle cannot be read.
fn propose_dry_run(
    plan: &TunePlan,
    pp: &truecold_bench::plan::tune_plan::ProposePlan,
    json: bool,
) -> ExitCode {
    use truecold_bench::plan::tune_plan::ProposeFrom;
    use truecold_bench::tune::propose::proposals_text;
    let ProposeFrom::Bundle(b) = &pp.from else {
        return ExitCode::SUCCESS;
    };
    let tree = tune_run::proposal_tree(plan, pp);
    match tune_run::proposals_of(std::slice::from_ref(b), tree.as_deref(), &pp.classes) {
        Ok(p) => {
            if json {
                let doc = serde_json::json!({
                    "attribution": b.display().to_string(),
                    "source_tree": tree.map(|t| t.display().to_string()),
                    "total_ns": p.total_ns,
                    "proposals": p.proposals,
                    "notes": p.notes,
                    "exit": 0,
                });
                print!(
                    "{}",
                    serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".into()) + "\n"
                );
            } else {
                print!("{}", proposals_text(&p));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("truecold: error: {}", chain(&e));
            if json {
                print!("{}", error_json("nothing_written", &chain(&e), 1));
            }
            ExitCode::FAILURE
        }
    }
}

/// A failure's exit status: 125 when it is about the arguments (a typed argument error,
/// found after clap's parse), else 1.
fn exit_of(usage: bool) -> ExitCode {
    if usage {
        ExitCode::from(EXIT_USAGE)
    } else {
        ExitCode::FAILURE
    }
}

/// `truecold tune-phase`: 0 written and verified, 2 written but invalid, 130 interrupted,
/// 1 nothing written.
fn tune_phase_main(args: &truecold_bench::cli::TunePhaseArgs, invocation: &str) -> ExitCode {
    use truecold_bench::tune::nested_phase::run_here;
    use truecold_bench::tune::phase_plan::PhasePlan;
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
