//! `truecold run …`: arguments, their checks, and the campaign they describe.

use crate::schedule::{Schedule, ScheduleError};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use truecold_proto::kinds::{Backing, Engine};
use truecold_proto::limits::{GuestMem, LimitError, Vcpus};

/// `--vcpus`: a count within the VMM's limits (`truecold_proto::limits`), else an argument
/// error naming the limit.
pub(crate) fn vcpus_arg(s: &str) -> Result<u32, String> {
    Vcpus::parse(s).map(|v| u32::from(v.get()))
}

/// `--mem-mib`: a size within the VMM's limits (`truecold_proto::limits`), else an argument
/// error naming the limit.
pub(crate) fn mem_mib_arg(s: &str) -> Result<u64, String> {
    GuestMem::parse(s).map(GuestMem::mib)
}

#[derive(Parser, Debug)]
#[command(
    name = "truecold",
    version,
    about = "True-cold microVM launches, measured and written as a checksummed proof bundle"
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Run a campaign (default: 1,000 sequential 2 vCPU / 16 GiB Linux boots; on a host whose
    /// /dev/kvm cannot boot Linux, the probe-guest campaign, labelled as such).
    Run(RunArgs),
    /// Tune the boot path: a baseline and one arm per knob (kernel command line, Kconfig,
    /// VMM), interleaved, each a complete bundle; the knobs' effects with bootstrap CIs and
    /// Mann–Whitney p; the winners combined and confirmed (final A/B, leave one out); one
    /// verifiable directory.
    Tune(crate::tune::TuneArgs),
    /// One phase of a tune from its plan file (what `truecold tune --nested` runs in L1).
    #[command(hide = true)]
    TunePhase(crate::tune::TunePhaseArgs),
    /// Find the commit of a kernel tree (`run`, or `step` under `git bisect run`) or the
    /// symbols of a kernel config (`config`) that made a true-cold boot slower; every step a
    /// bundle, judged by `truecold-proof compare`'s rule, in one verifiable directory.
    Bisect(crate::bisect::BisectArgs),
}

impl Cli {
    /// `truecold run …` from its words: a parse error, or an error when they name another
    /// subcommand.
    pub fn try_parse_run<I, T>(argv: I) -> Result<RunArgs, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        match Cli::try_parse_from(argv)?.cmd {
            Cmd::Run(a) => Ok(a),
            Cmd::Tune(_) | Cmd::TunePhase(_) | Cmd::Bisect(_) => Err(clap::Error::raw(
                clap::error::ErrorKind::InvalidSubcommand,
                "not `truecold run`",
            )),
        }
    }
}

/// Campaign shapes (see `truecold_bench::schedule`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Sequential,
    Burst,
    OpenLoop,
    Sweep,
    Churn,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// How launches are scheduled.
    #[arg(long, value_enum, default_value_t = ModeArg::Sequential)]
    pub mode: ModeArg,
    /// Launches (sweep: launches per concurrency level).
    #[arg(short = 'n', long = "count", default_value_t = 1000)]
    pub count: u64,
    /// vCPUs per VM (1..=32, the VMM's limit).
    #[arg(long, default_value_t = 2, value_parser = vcpus_arg)]
    pub vcpus: u32,
    /// Guest memory per VM, MiB (4..=1048576, the VMM's limit; the VMM also refuses more
    /// than the host's RAM).
    #[arg(long, default_value_t = 16384, value_parser = mem_mib_arg)]
    pub mem_mib: u64,
    #[arg(long, default_value_t = Backing::Anon, value_parser = Backing::parse)]
    pub backing: Backing,
    /// Concurrency (burst, churn; default 2) or the most launches in flight (open loop;
    /// default 64).
    #[arg(long)]
    pub concurrency: Option<u32>,
    /// Open loop: arrivals per second (e.g. 20 or 2.5).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Sweep: concurrency levels 1..=K (default 4).
    #[arg(long)]
    pub max_concurrency: Option<u32>,
    /// A launch not strict-ready this long after its request (intended time in burst and
    /// open loop) is a failure, scored at this value.
    /// Default: 2000 ms; 300000 ms with --nested (everything is emulated there).
    #[arg(long)]
    pub deadline_ms: Option<u64>,
    /// Past the deadline, how long the VMM may take to print its own report before it is
    /// killed (the sample is a failure either way).
    #[arg(long, default_value_t = 500)]
    pub kill_grace_ms: u64,
    /// Boot the VMM's embedded probe guest: the VMM floor, not a Linux boot.
    #[arg(long, group = "guest")]
    pub probe: bool,
    /// Boot Linux (the default where /dev/kvm can).
    #[arg(long, group = "guest")]
    pub linux: bool,
    /// Run a Linux campaign inside the nested harness (functional, slow).
    #[arg(long, group = "guest")]
    pub nested: bool,
    /// Bundle directory (default `results/<UTC timestamp>-<label>/`); must not exist.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The truecold-vmm binary (default: next to this binary).
    #[arg(long)]
    pub vmm: Option<PathBuf>,
    /// Guest artifacts (default $TRUECOLD_GUEST_DIR, else out/guest).
    #[arg(long)]
    pub guest_dir: Option<PathBuf>,
    /// Appended to the guest kernel command line.
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub cmdline_extra: String,
    /// Guest serial console to the VMM's stderr (slow: every byte is a VM exit).
    #[arg(long)]
    pub console: bool,
    /// Before each sample's request stamp (outside its measured window), `sync` and drop the
    /// host page cache, so every sample reads the VMM, kernel and initramfs from disk: a
    /// cold-host arm. Root only; --mode sequential only.
    #[arg(long)]
    pub drop_caches: bool,
    /// The parity contract (docs/parity.md): the engine with virtio-vsock, virtio-net on a
    /// per-launch tap and a per-launch workspace disk; strict-ready when the guest agent
    /// answered on vsock and a TCP round trip to the guest verified; each launch's state
    /// persisted (SQLite) and its cleanup verified. A Linux campaign, sequential only; needs
    /// root (taps) and the parity guest (`<guest-dir>/workspace.img`, the parity kernel).
    /// truecold-vmm alone (one bundle), or with --engine/--engines (truecold, firecracker,
    /// cloud-hypervisor) every arm under the parity contract, interleaved (one directory).
    #[arg(long)]
    pub parity: bool,
    /// Reliability tests only: every parity launch's tap gets this name instead of its own
    /// (an existing interface's name makes the VMM's tap creation fail, typed). Never on a
    /// measured campaign.
    #[arg(long, hide = true)]
    pub inject_tap_name: Option<String>,
    /// An engine arm (repeatable): truecold, firecracker, cloud-hypervisor, qemu-microvm.
    /// With any, the campaign is an engines campaign: the same Linux guest under every
    /// engine, strict-ready observed on each engine's serial port, -n rounds each running
    /// every arm once in a seeded shuffled order; one bundle per arm plus their comparison,
    /// all in one directory. Sequential mode only.
    #[arg(long = "engine", value_parser = Engine::parse)]
    pub engine: Vec<Engine>,
    /// Engine arms as one comma-separated list (the same as repeating --engine).
    #[arg(long, value_parser = Engine::parse, value_delimiter = ',')]
    pub engines: Vec<Engine>,
    /// Engines campaign: the seed of the per-round shuffled order (recorded in arms.json).
    /// With --nested (an engines or a plain campaign), also L1's QEMU `-seed`: the nested
    /// campaign's randomness (boot ids, nonces) is a function of it, so campaigns with
    /// distinct seeds draw distinct ones and one seed repeats them.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// The Firecracker binary (default $TRUECOLD_FIRECRACKER, else
    /// ../shared/peers/bin/firecracker beside the clone when present).
    #[arg(long)]
    pub firecracker: Option<PathBuf>,
    /// The Cloud Hypervisor binary (default $TRUECOLD_CLOUD_HYPERVISOR, else
    /// ../shared/peers/bin/cloud-hypervisor beside the clone when present).
    #[arg(long)]
    pub cloud_hypervisor: Option<PathBuf>,
    /// The QEMU binary for the qemu-microvm arm (default qemu-system-x86_64 on PATH).
    #[arg(long)]
    pub qemu: Option<PathBuf>,
    /// After the measured campaign, K more sequential launches with the attribution command
    /// line (`initcall_debug`, a larger log buffer, `truecold.attribution=1`): never rows of
    /// samples.csv; their lines go to attribution.jsonl, and attribution.csv / .svg (where
    /// the time goes, on one clock, reconciled with the measured p50) into the bundle.
    #[arg(long, default_value_t = 0)]
    pub attribution: u64,
}

/// The default `--seed` of an engines or nested campaign ("truecold" in ASCII).
pub const DEFAULT_SEED: u64 = 0x7472_7565_636f_6c64;

/// Argument errors.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ArgError {
    #[error("--{flag} applies to --mode {applies_to} only (this campaign is --mode {mode})")]
    NotForMode {
        flag: &'static str,
        applies_to: &'static str,
        mode: &'static str,
    },
    #[error("--mode open-loop needs --rate (arrivals per second)")]
    RateMissing,
    #[error(transparent)]
    Limit(#[from] LimitError),
    #[error("--deadline-ms must be at least 1")]
    DeadlineZero,
    #[error("--rate {0}/s rounds to 0 arrivals per 1,000 s")]
    RateTooLow(f64),
    #[error("invalid campaign")]
    Schedule(#[from] ScheduleError),
    #[error("--engine {0} is given twice: each engine is one arm")]
    DuplicateEngine(Engine),
    #[error("an engines campaign runs --mode sequential only (rounds of every arm, one launch at a time)")]
    EnginesMode,
    #[error("--{0} does not apply to an engines campaign (the guest is Linux; its serial port is the transport)")]
    NotForEngines(&'static str),
    #[error("--{0} applies to an engines campaign only (--engine …)")]
    EnginesOnly(&'static str),
    #[error("--seed applies to an engines campaign (--engine …) or a --nested one only")]
    SeedNotUsed,
    #[error("--parity: {0}")]
    Parity(&'static str),
}

fn mode_name(m: ModeArg) -> &'static str {
    match m {
        ModeArg::Sequential => "sequential",
        ModeArg::Burst => "burst",
        ModeArg::OpenLoop => "open-loop",
        ModeArg::Sweep => "sweep",
        ModeArg::Churn => "churn",
    }
}

/// Default concurrency of burst and churn.
pub const DEFAULT_CONCURRENCY: u32 = 2;
/// Default in-flight cap of the open loop.
pub const DEFAULT_OPEN_LOOP_IN_FLIGHT: u32 = 64;
/// Default top level of the sweep.
pub const DEFAULT_SWEEP_MAX: u32 = 4;

/// Default deadline of a campaign on a real host.
pub const DEFAULT_DEADLINE_MS: u64 = 2_000;
/// Default deadline inside the nested harness, where L1 and L2 both run under emulation.
pub const DEFAULT_NESTED_DEADLINE_MS: u64 = 300_000;

impl RunArgs {
    /// `--deadline-ms`, or the default for this kind of campaign.
    pub fn deadline_ms(&self) -> u64 {
        self.deadline_ms.unwrap_or(if self.nested {
            DEFAULT_NESTED_DEADLINE_MS
        } else {
            DEFAULT_DEADLINE_MS
        })
    }

    /// The engine arms, in the order given (`--engine` then `--engines`); empty for a
    /// truecold-only campaign. Checked: no engine twice, and the flags of the other kind of
    /// campaign absent.
    pub fn arms(&self) -> Result<Vec<Engine>, ArgError> {
        let mut arms: Vec<Engine> = Vec::new();
        for e in self.engine.iter().chain(&self.engines) {
            if arms.contains(e) {
                return Err(ArgError::DuplicateEngine(*e));
            }
            arms.push(*e);
        }
        if arms.is_empty() {
            for (set, flag) in [
                (self.firecracker.is_some(), "firecracker"),
                (self.cloud_hypervisor.is_some(), "cloud-hypervisor"),
                (self.qemu.is_some(), "qemu"),
            ] {
                if set {
                    return Err(ArgError::EnginesOnly(flag));
                }
            }
            // With --nested the seed is L1's QEMU `-seed` (any campaign there).
            if self.seed != DEFAULT_SEED && !self.nested {
                return Err(ArgError::SeedNotUsed);
            }
            return Ok(arms);
        }
        if self.mode != ModeArg::Sequential {
            return Err(ArgError::EnginesMode);
        }
        if self.probe {
            return Err(ArgError::NotForEngines("probe"));
        }
        if self.console {
            return Err(ArgError::NotForEngines("console"));
        }
        if self.attribution > 0 {
            return Err(ArgError::NotForEngines("attribution"));
        }
        Ok(arms)
    }

    /// The schedule these arguments describe, checked.
    pub fn schedule(&self) -> Result<Schedule, ArgError> {
        let arms = self.arms()?;
        if self.inject_tap_name.is_some() && !self.parity {
            return Err(ArgError::Parity(
                "--inject-tap-name applies to --parity only",
            ));
        }
        if self.parity {
            if let Some(why) = arms.iter().find_map(|e| e.no_parity_launch()) {
                return Err(ArgError::Parity(why));
            }
            for (bad, why) in [
                (
                    self.drop_caches,
                    "the page cache is not dropped between parity launches (no --drop-caches)",
                ),
                (self.probe, "the parity contract boots Linux (no --probe)"),
                (
                    self.mode != ModeArg::Sequential,
                    "sequential only (one tap at a time)",
                ),
                (
                    self.console,
                    "the serial console is not part of the contract (no --console)",
                ),
                (
                    self.attribution > 0,
                    "attribution launches are not parity launches",
                ),
            ] {
                if bad {
                    return Err(ArgError::Parity(why));
                }
            }
        }
        let mode = mode_name(self.mode);
        let not_for = |flag, applies_to| ArgError::NotForMode {
            flag,
            applies_to,
            mode,
        };
        if self.rate.is_some() && self.mode != ModeArg::OpenLoop {
            return Err(not_for("rate", "open-loop"));
        }
        if self.max_concurrency.is_some() && self.mode != ModeArg::Sweep {
            return Err(not_for("max-concurrency", "sweep"));
        }
        if self.concurrency.is_some() && matches!(self.mode, ModeArg::Sequential | ModeArg::Sweep) {
            return Err(not_for("concurrency", "burst, churn or open-loop"));
        }
        // Clap's value parsers check these too; arguments built in code are checked here.
        Vcpus::new(u64::from(self.vcpus))?;
        GuestMem::from_mib(self.mem_mib)?;
        if self.deadline_ms() == 0 {
            return Err(ArgError::DeadlineZero);
        }
        let n = self.count;
        let s = match self.mode {
            ModeArg::Sequential => Schedule::Sequential { n },
            ModeArg::Burst => Schedule::Burst {
                n,
                concurrency: self.concurrency.unwrap_or(DEFAULT_CONCURRENCY),
            },
            ModeArg::Churn => Schedule::Churn {
                n,
                concurrency: self.concurrency.unwrap_or(DEFAULT_CONCURRENCY),
            },
            ModeArg::Sweep => Schedule::Sweep {
                n_per_level: n,
                max_concurrency: self.max_concurrency.unwrap_or(DEFAULT_SWEEP_MAX),
            },
            ModeArg::OpenLoop => {
                let rate = self.rate.ok_or(ArgError::RateMissing)?;
                if !rate.is_finite() || rate <= 0.0 {
                    return Err(ScheduleError::BadRate(rate).into());
                }
                // The schema records integer arrivals per 1,000 s; the interval follows it.
                let per_ks = (rate * 1000.0).round();
                if per_ks < 1.0 {
                    return Err(ArgError::RateTooLow(rate));
                }
                let interval_ns = crate::schedule::interval_for_rate(per_ks / 1000.0)?;
                Schedule::OpenLoop {
                    n,
                    interval_ns,
                    max_in_flight: self.concurrency.unwrap_or(DEFAULT_OPEN_LOOP_IN_FLIGHT),
                }
            }
        };
        s.validate()?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The verifier reads `cmdline.txt` with its own list of `truecold run`'s flags
    /// (`truecold_proof::cmdline`); every flag this parser has is there, with its arity, and
    /// nothing else is.
    #[test]
    fn the_verifiers_flag_lists_are_this_parsers_flags() {
        use clap::CommandFactory;
        use truecold_proof::cmdline::{RUN_SWITCHES, RUN_VALUE_FLAGS};
        let cmd = Cli::command();
        let run = cmd
            .get_subcommands()
            .find(|c| c.get_name() == "run")
            .expect("a run subcommand");
        let mut values: Vec<String> = Vec::new();
        let mut switches: Vec<String> = Vec::new();
        for a in run.get_arguments() {
            let Some(long) = a.get_long() else { continue };
            if long == "help" {
                continue;
            }
            if a.get_action().takes_values() {
                values.push(format!("--{long}"));
                if a.get_short() == Some('n') {
                    values.push("-n".into());
                }
            } else {
                switches.push(format!("--{long}"));
            }
        }
        let sorted = |v: &[&str]| {
            let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
            v.sort();
            v
        };
        values.sort();
        switches.sort();
        assert_eq!(values, sorted(RUN_VALUE_FLAGS));
        assert_eq!(switches, sorted(RUN_SWITCHES));
    }

    fn args(extra: &[&str]) -> Result<RunArgs, clap::Error> {
        let mut v = vec!["truecold", "run"];
        v.extend_from_slice(extra);
        Cli::try_parse_run(v)
    }

    #[test]
    fn defaults_are_the_headline_campaign() {
        let a = args(&[]).unwrap();
        assert_eq!(a.schedule().unwrap(), Schedule::Sequential { n: 1000 });
        assert_eq!((a.vcpus, a.mem_mib), (2, 16384));
        assert!(!a.probe && !a.linux && !a.nested);
    }

    #[test]
    fn modes_and_their_flags() {
        let a = args(&["--mode", "burst", "-n", "50", "--concurrency", "8"]).unwrap();
        assert_eq!(
            a.schedule().unwrap(),
            Schedule::Burst {
                n: 50,
                concurrency: 8
            }
        );
        let a = args(&["--mode", "open-loop", "-n", "10", "--rate", "2.5"]).unwrap();
        assert_eq!(
            a.schedule().unwrap(),
            Schedule::OpenLoop {
                n: 10,
                interval_ns: 400_000_000,
                max_in_flight: DEFAULT_OPEN_LOOP_IN_FLIGHT
            }
        );
        let a = args(&["--mode", "sweep", "-n", "5", "--max-concurrency", "3"]).unwrap();
        assert_eq!(
            a.schedule().unwrap(),
            Schedule::Sweep {
                n_per_level: 5,
                max_concurrency: 3
            }
        );
        let a = args(&["--mode", "churn", "-n", "9"]).unwrap();
        assert_eq!(
            a.schedule().unwrap(),
            Schedule::Churn {
                n: 9,
                concurrency: 2
            }
        );
    }

    #[test]
    fn bad_arguments_are_clear_errors() {
        let e = |x: &[&str]| args(x).unwrap().schedule().unwrap_err();
        assert_eq!(e(&["--mode", "open-loop"]), ArgError::RateMissing);
        assert_eq!(
            e(&["--rate", "3"]),
            ArgError::NotForMode {
                flag: "rate",
                applies_to: "open-loop",
                mode: "sequential"
            }
        );
        assert!(matches!(
            e(&["--concurrency", "3"]),
            ArgError::NotForMode { .. }
        ));
        assert!(matches!(
            e(&["--mode", "burst", "--max-concurrency", "3"]),
            ArgError::NotForMode { .. }
        ));
        assert_eq!(e(&["--deadline-ms", "0"]), ArgError::DeadlineZero);
        assert_eq!(
            e(&["-n", "0"]),
            ArgError::Schedule(ScheduleError::NoSamples)
        );
        assert_eq!(
            e(&["--mode", "burst", "--concurrency", "0"]),
            ArgError::Schedule(ScheduleError::ZeroConcurrency)
        );
        assert_eq!(
            e(&["--mode", "open-loop", "--rate", "0.0001"]),
            ArgError::RateTooLow(0.0001)
        );
        assert!(matches!(
            e(&["--mode", "open-loop", "--rate=-1"]),
            ArgError::Schedule(ScheduleError::BadRate(_))
        ));
        // Mutually exclusive guest kinds, unknown modes: clap's own errors.
        assert!(args(&["--probe", "--linux"]).is_err());
        assert!(args(&["--mode", "zigzag"]).is_err());
    }

    /// Every edge of the VMM's limits, rejected by clap before anything launches, with a
    /// message that names the limit.
    #[test]
    fn vcpu_and_memory_limits_at_every_edge() {
        use truecold_proto::limits::{MAX_MEM_MIB, MAX_VCPUS, MIN_MEM_MIB, MIN_VCPUS};
        let ok = |x: &[&str]| args(x).unwrap_or_else(|e| panic!("{x:?}: {e}"));
        let bad = |x: &[&str]| {
            let e = args(x).expect_err("must be rejected");
            assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation, "{x:?}");
            e.to_string()
        };
        let n = |v: u64| v.to_string();
        assert_eq!(ok(&["--vcpus", &n(MIN_VCPUS.into())]).vcpus, 1);
        assert_eq!(ok(&["--vcpus", &n(MAX_VCPUS.into())]).vcpus, 32);
        let e = bad(&["--vcpus", "0"]);
        assert!(e.contains("--vcpus 0: 1 to 32 vCPUs are supported"), "{e}");
        let e = bad(&["--vcpus", &n(u64::from(MAX_VCPUS) + 1)]);
        assert!(e.contains("--vcpus 33: 1 to 32 vCPUs are supported"), "{e}");
        bad(&["--vcpus", "255"]);
        bad(&["--vcpus", "256"]);
        bad(&["--vcpus=-1"]);
        bad(&["--vcpus", "two"]);

        assert_eq!(ok(&["--mem-mib", &n(MIN_MEM_MIB)]).mem_mib, 4);
        assert_eq!(ok(&["--mem-mib", &n(MAX_MEM_MIB)]).mem_mib, MAX_MEM_MIB);
        let e = bad(&["--mem-mib", "0"]);
        assert!(
            e.contains("--mem-mib 0: guest memory below the minimum of 4 MiB"),
            "{e}"
        );
        let e = bad(&["--mem-mib", &n(MIN_MEM_MIB - 1)]);
        assert!(
            e.contains("--mem-mib 3: guest memory below the minimum of 4 MiB"),
            "{e}"
        );
        let e = bad(&["--mem-mib", &n(MAX_MEM_MIB + 1)]);
        assert!(
            e.contains("--mem-mib 1048577: guest memory above the maximum of 1048576 MiB"),
            "{e}"
        );
        bad(&["--mem-mib", "18446744073709551615"]);
        bad(&["--mem-mib", "16G"]);

        // Arguments built in code (not through clap) meet the same limits.
        let mut a = ok(&[]);
        a.vcpus = 33;
        assert_eq!(
            a.schedule().unwrap_err(),
            ArgError::Limit(LimitError::Vcpus { got: 33 })
        );
        a.vcpus = 0;
        assert_eq!(
            a.schedule().unwrap_err(),
            ArgError::Limit(LimitError::Vcpus { got: 0 })
        );
        a.vcpus = 32;
        a.mem_mib = 3;
        assert_eq!(
            a.schedule().unwrap_err(),
            ArgError::Limit(LimitError::MemTooSmall { got: 3 })
        );
        a.mem_mib = MAX_MEM_MIB + 1;
        assert_eq!(
            a.schedule().unwrap_err(),
            ArgError::Limit(LimitError::MemTooLarge {
                got: MAX_MEM_MIB + 1
            })
        );
        a.mem_mib = MAX_MEM_MIB;
        assert!(a.schedule().is_ok());
    }

    #[test]
    fn engine_arms_repeatable_or_listed_never_twice() {
        let a = args(&["--engine", "truecold", "--engine", "firecracker"]).unwrap();
        assert_eq!(
            a.arms().unwrap(),
            vec![Engine::Truecold, Engine::Firecracker]
        );
        assert_eq!(a.seed, DEFAULT_SEED);
        let a = args(&[
            "--engines",
            "qemu-microvm,cloud-hypervisor",
            "--engine",
            "truecold",
        ])
        .unwrap();
        assert_eq!(
            a.arms().unwrap(),
            vec![
                Engine::Truecold,
                Engine::QemuMicrovm,
                Engine::CloudHypervisor
            ]
        );
        assert!(a.schedule().is_ok());
        let a = args(&["--engines", "firecracker,firecracker"]).unwrap();
        assert_eq!(
            a.schedule().unwrap_err(),
            ArgError::DuplicateEngine(Engine::Firecracker)
        );
        let a = args(&["--engine", "truecold", "--engines", "truecold"]).unwrap();
        assert_eq!(
            a.arms().unwrap_err(),
            ArgError::DuplicateEngine(Engine::Truecold)
        );
        // Unknown engines are clap's errors, naming the choices.
        let e = args(&["--engine", "xen"]).unwrap_err().to_string();
        assert!(
            e.contains("truecold, firecracker, cloud-hypervisor, qemu-microvm"),
            "{e}"
        );
        assert!(args(&["--engines", "truecold,"]).is_err());
    }

    #[test]
    fn engines_campaigns_are_sequential_linux_without_console() {
        let e = |x: &[&str]| args(x).unwrap().schedule().unwrap_err();
        assert_eq!(
            e(&["--engine", "truecold", "--mode", "burst"]),
            ArgError::EnginesMode
        );
        assert_eq!(
            e(&["--engine", "truecold", "--probe"]),
            ArgError::NotForEngines("probe")
        );
        assert_eq!(
            e(&["--engine", "firecracker", "--console"]),
            ArgError::NotForEngines("console")
        );
        assert_eq!(
            e(&["--firecracker", "/x"]),
            ArgError::EnginesOnly("firecracker")
        );
        assert_eq!(e(&["--seed", "3"]), ArgError::SeedNotUsed);
        assert_eq!(e(&["--linux", "--seed", "3"]), ArgError::SeedNotUsed);
        let a = args(&[
            "--engine",
            "firecracker",
            "--nested",
            "--seed",
            "3",
            "-n",
            "3",
        ])
        .unwrap();
        assert_eq!(a.schedule().unwrap(), Schedule::Sequential { n: 3 });
        assert_eq!(a.seed, 3);
    }

    #[test]
    fn a_plain_nested_campaign_takes_a_seed_for_l1() {
        let a = args(&["--nested", "--seed", "3", "-n", "2"]).unwrap();
        assert_eq!(a.schedule().unwrap(), Schedule::Sequential { n: 2 });
        assert!(a.arms().unwrap().is_empty());
        assert_eq!(a.seed, 3);
        // The default seed stays accepted everywhere (it is not "given").
        let a = args(&["--nested", "-n", "2"]).unwrap();
        assert_eq!(a.seed, DEFAULT_SEED);
        assert!(a.schedule().is_ok());
        // The other engines-only flags stay engines-only with --nested.
        let e = args(&["--nested", "--qemu", "/x"])
            .unwrap()
            .schedule()
            .unwrap_err();
        assert_eq!(e, ArgError::EnginesOnly("qemu"));
    }

    #[test]
    fn help_documents_the_engine_flags() {
        use clap::CommandFactory;
        let mut cmd = Cli::command();
        let run = cmd.find_subcommand_mut("run").expect("a run subcommand");
        let help = run.render_long_help().to_string();
        for flag in [
            "--engine <ENGINE>",
            "--engines <ENGINES>",
            "--seed <SEED>",
            "--firecracker <FIRECRACKER>",
            "--cloud-hypervisor <CLOUD_HYPERVISOR>",
            "--qemu <QEMU>",
            "TRUECOLD_FIRECRACKER",
            "TRUECOLD_CLOUD_HYPERVISOR",
            "../shared/peers/bin/firecracker",
            "qemu-system-x86_64 on PATH",
            "seeded shuffled order",
            "L1's QEMU `-seed`",
        ] {
            assert!(
                help.contains(flag),
                "`truecold run --help` lacks {flag}:\n{help}"
            );
        }
    }
}
