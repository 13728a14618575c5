//! `truecold-engines`, run inside L1 by the nested harness: boots one guest under several
//! engines (truecold-vmm, Firecracker), interleaved in a seeded shuffled order per round, and
//! times each engine process from fork to exit on L1's CLOCK_MONOTONIC — QEMU's virtual clock
//! there. Writes `<out>/engines.csv` (one row per run, the guest's platform facts when the
//! console is on) and each run's output (stdout then stderr: the console when it is on,
//! truecold-vmm's JSON report) as `<out>/logs/<round>-<arm>.log`.
//! A run that outlives `--deadline-ms` is killed and recorded with no exit code.

use clap::Parser;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use truecold_nested::engines::{
    firecracker_args, firecracker_config, order, record_in, truecold_args, Arm, Engine, Guest,
    RunRow, CSV_HEADER,
};

#[derive(Parser)]
#[command(
    name = "truecold-engines",
    about = "Boot one guest under several engines, interleaved"
)]
struct Cli {
    /// `[LABEL:]KIND=PATH`, KIND one of truecold, firecracker; LABEL names the arm when two
    /// arms share a kind (repeatable).
    #[arg(long = "engine", required = true)]
    engines: Vec<String>,
    #[arg(long)]
    kernel: String,
    #[arg(long)]
    initramfs: String,
    #[arg(long, default_value_t = 1)]
    vcpus: u8,
    #[arg(
        long = "mem-mib",
        value_name = "MEM_MIB",
        default_value = "256",
        value_parser = truecold_proto::limits::GuestMem::parse
    )]
    mem: truecold_proto::limits::GuestMem,
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    cmdline_extra: String,
    #[arg(long)]
    console: bool,
    #[arg(long, default_value_t = 3)]
    rounds: u64,
    /// The shuffle's seed: decimal or 0x hexadecimal, as `truecold --seed`.
    #[arg(long, default_value_t = 1, value_parser = truecold_proto::seed::parse)]
    seed: u64,
    /// Kill an engine process that runs longer than this.
    #[arg(long, default_value_t = 120_000)]
    deadline_ms: u64,
    #[arg(long, default_value = "/out")]
    out: PathBuf,
}

fn main() -> std::process::ExitCode {
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("truecold-engines: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    let arms = cli
        .engines
        .iter()
        .map(|s| Arm::parse(s).map_err(|e| format!("--engine {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, a) in arms.iter().enumerate() {
        if arms[..i].iter().any(|b| b.label == a.label) {
            return Err(format!("--engine: label `{}` given twice", a.label));
        }
    }
    let guest = Guest {
        kernel: cli.kernel.clone(),
        initramfs: cli.initramfs.clone(),
        vcpus: cli.vcpus,
        mem: cli.mem,
        console: cli.console,
        cmdline_extra: cli.cmdline_extra.clone(),
    };
    let fc_config = std::env::temp_dir().join("truecold-firecracker.json");
    std::fs::write(&fc_config, firecracker_config(&guest)?)
        .map_err(|e| format!("{}: {e}", fc_config.display()))?;
    // Firecracker opens its log without creating it; emptied before each run, appended to
    // the run's log after it.
    let fc_log = std::env::temp_dir().join("truecold-firecracker.log");
    let logs = cli.out.join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let mut csv = format!("{CSV_HEADER}\n");
    for (slot, (round, i)) in order(arms.len(), cli.rounds, cli.seed)
        .into_iter()
        .enumerate()
    {
        let arm = &arms[i];
        let (engine, path) = (arm.engine, &arm.path);
        let args = match engine {
            Engine::Truecold => truecold_args(&guest, cli.deadline_ms),
            Engine::Firecracker => {
                std::fs::write(&fc_log, b"").map_err(|e| format!("{}: {e}", fc_log.display()))?;
                firecracker_args(&fc_config, &fc_log)
            }
            other => return Err(format!("--engine {other}: not run by this check")),
        };
        let (elapsed_ns, exit_code, mut output) =
            timed(path, &args, Duration::from_millis(cli.deadline_ms))?;
        if engine == Engine::Firecracker {
            output.extend(std::fs::read(&fc_log).unwrap_or_default());
        }
        let log = logs.join(format!("{round:03}-{}.log", arm.label));
        std::fs::write(&log, &output).map_err(|e| format!("{}: {e}", log.display()))?;
        let row = RunRow {
            round,
            slot,
            arm: arm.label.clone(),
            engine,
            elapsed_ns,
            exit_code,
            platform: record_in(&output).map(|r| r.platform),
        };
        eprintln!("truecold-engines: {}", row.csv());
        csv.push_str(&row.csv());
        csv.push('\n');
    }
    let path = cli.out.join("engines.csv");
    std::fs::write(&path, csv).map_err(|e| format!("{}: {e}", path.display()))
}

/// Runs `program args`, stdin closed, stdout and stderr captured into one buffer; returns the
/// fork-to-exit time, the exit code and the output. Killed at `deadline`.
fn timed(
    program: &str,
    args: &[String],
    deadline: Duration,
) -> Result<(u64, Option<i32>, Vec<u8>), String> {
    let t0 = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{program}: {e}"))?;
    let pid = child.id() as libc::pid_t;
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let killer = std::thread::spawn(move || {
        if done_rx.recv_timeout(deadline).is_err() {
            // SAFETY: kill takes a pid and a signal number, no pointers. The child is reaped
            // only after its output ends; a kill racing that exact moment could reach a reused
            // pid, and L1 runs nothing else.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let mut err = child.stderr.take().ok_or("stderr")?;
    let err_reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        b
    });
    let mut output = Vec::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_end(&mut output);
    }
    let status = child.wait().map_err(|e| format!("wait {program}: {e}"))?;
    let elapsed_ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let _ = done_tx.send(());
    let _ = killer.join();
    output.extend(err_reader.join().unwrap_or_default());
    Ok((elapsed_ns, status.code(), output))
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::Parser;

    #[test]
    fn seed_reads_decimal_or_hex() {
        let seed = |v: &str| {
            Cli::try_parse_from([
                "x",
                "--engine",
                "truecold=/t",
                "--kernel",
                "k",
                "--initramfs",
                "i",
                "--seed",
                v,
            ])
            .map(|c| c.seed)
        };
        assert_eq!(seed("0x10").ok(), Some(16));
        assert_eq!(seed("16").ok(), Some(16));
        assert!(seed("0xg").is_err());
    }
}
