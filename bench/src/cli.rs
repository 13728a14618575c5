//! The command line: clap's types and nothing else. Every check and every default that
//! depends on more than one flag is `crate::plan`'s, which turns these into a checked plan
//! once; no other module reads a struct of this file.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use truecold_proof::attribution::Instrument;
use truecold_proto::kinds::{Backing, Engine, RamLayout};
use truecold_proto::limits::{GuestMem, Vcpus};
use truecold_proto::rip::SamplePeriod;

use truecold_proof::cli_text::{long_help, short_help, width};
/// The exit statuses every command shares, from the one table
/// ([`truecold_proof::cli_text::EXITS`]): a usage error (125, as in `truecold-proof`: `git
/// bisect run` reads it as "skip this commit", where clap's default 2 would read as "bad"),
/// and `truecold run`'s bundle written and VALID but some launch failed (3).
pub use truecold_proof::cli_text::{EXIT_LAUNCHES_FAILED, EXIT_USAGE};

#[derive(Parser, Debug)]
#[command(
    name = "truecold",
    version,
    about = "True-cold microVM launches, measured and written as a checksummed proof bundle",
    after_help = short_help("truecold"),
    after_long_help = long_help("truecold", width())
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Run a campaign of true-cold launches and write it as a proof bundle.
    ///
    /// Default: 1,000 sequential 2 vCPU / 16 GiB Linux boots; on a host whose /dev/kvm cannot
    /// boot Linux, the probe-guest campaign, labelled as such.
    #[command(
        after_help = short_help("truecold run"),
        after_long_help = long_help("truecold run", width())
    )]
    Run(Box<RunArgs>),
    /// Tune the boot path: a baseline and one arm per knob, interleaved, winners confirmed.
    ///
    /// A baseline and one arm per knob (kernel command line, Kconfig, VMM), interleaved, each
    /// a complete bundle; the knobs' effects with bootstrap CIs and Mann–Whitney p; the
    /// winners combined and confirmed (final A/B, leave one out); one verifiable directory.
    #[command(
        after_help = short_help("truecold tune"),
        after_long_help = long_help("truecold tune", width())
    )]
    Tune(TuneArgs),
    /// One phase of a tune from its plan file (what `truecold tune --nested` runs in L1).
    #[command(hide = true, after_help = TUNE_PHASE_EXIT)]
    TunePhase(TunePhaseArgs),
    /// Find the kernel commit or config symbols that made a true-cold boot slower.
    ///
    /// Find the commit of a kernel tree (`run`, or `step` under `git bisect run`) or the
    /// symbols of a kernel config (`config`) that made a true-cold boot slower; every step a
    /// bundle, judged by `truecold-proof compare`'s rule, in one verifiable directory.
    #[command(
        after_help = short_help("truecold bisect"),
        after_long_help = long_help("truecold bisect", width())
    )]
    Bisect(BisectArgs),
    /// Run a bundle's campaign again from its record and say whether it reproduced.
    ///
    /// The explicit `truecold run` line of `cmdline.txt`, with the recorded seed, on inputs
    /// whose digests match the record (each mismatch named, nothing run); then a new bundle
    /// and the replay's verdict: sample-by-sample equality on the virtual clock, `compare`'s
    /// verdict on a wall clock (docs/fleet.md).
    #[command(
        after_help = short_help("truecold replay"),
        after_long_help = long_help("truecold replay", width())
    )]
    Replay(ReplayArgs),
    /// Fan a campaign or a tune phase out over a Slurm cluster (docs/fleet.md).
    ///
    /// `submit` turns the plan into a job array of shards (a range of launches with an L1 of
    /// its own, or one tune arm's rounds), each writing its own shard directory; `gather`
    /// verifies and merges them into one fleet directory; `status` says which shard ran
    /// where and why a task failed.
    #[command(
        after_help = short_help("truecold fleet"),
        after_long_help = long_help("truecold fleet", width())
    )]
    Fleet(FleetArgs),
    /// Write shell completions and man pages for `truecold` into a directory (what
    /// scripts/cli-docs.sh runs; docs/building.md).
    #[command(hide = true, after_help = CLI_DOCS_EXIT)]
    CliDocs(CliDocsArgs),
}

/// `truecold cli-docs`.
#[derive(Args, Debug, Clone)]
pub struct CliDocsArgs {
    /// Where to write completions/{truecold.bash,_truecold,truecold.fish} and
    /// man/truecold*.1 (created as needed; an existing file there is refused, never
    /// overwritten).
    pub dir: PathBuf,
}

/// `truecold tune-phase --help`'s (a hidden command, inside L1: not in the table).
const TUNE_PHASE_EXIT: &str = "Exit status: 0 phase directory written and VALID; 2 written but \
    invalid; 130 interrupted; 1 nothing written; 125 usage error.";
/// `truecold cli-docs --help`'s (a hidden command: not in the table).
const CLI_DOCS_EXIT: &str = "Exit status: 0 every file written; 1 refused or failed (the error \
    says why; an existing file is never overwritten); 125 usage error.";

impl Cli {
    /// `truecold run …` from its words: a parse error, or an error when they name another
    /// subcommand.
    pub fn try_parse_run<I, T>(argv: I) -> Result<RunArgs, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        match Cli::try_parse_from(argv)?.cmd {
            Cmd::Run(a) => Ok(*a),
            Cmd::Tune(_)
            | Cmd::TunePhase(_)
            | Cmd::Bisect(_)
            | Cmd::Replay(_)
            | Cmd::Fleet(_)
            | Cmd::CliDocs(_) => Err(clap::Error::raw(
                clap::error::ErrorKind::InvalidSubcommand,
                "not `truecold run`",
            )),
        }
    }
}

/// Campaign shapes (see `truecold_bench::campaign::schedule`); each variant's doc line is its
/// `--help` text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// One launch after another
    Sequential,
    /// Every launch due at once, at most --concurrency in flight (the wait for a lane counts
    /// in the latency)
    Burst,
    /// Arrivals at --rate per second, at most --concurrency in flight (the harness's lateness
    /// counts in the latency)
    OpenLoop,
    /// Closed loops at concurrency 1..=--max-concurrency, -n launches each
    Sweep,
    /// Create, ready, tear down: -n cycles on --concurrency closed-loop lanes
    Churn,
}

/// `--backing`'s value parser: [`Backing::parse`] itself (its values, its error messages),
/// which also tells clap the values and what each means, for `--help` and the completions.
#[derive(Clone, Copy, Debug)]
pub struct BackingParser;

impl BackingParser {
    /// What `--backing VALUE` requests, in one line.
    pub fn meaning(b: Backing) -> &'static str {
        match b {
            Backing::Anon => "anonymous private memory, 4 KiB pages (MAP_NORESERVE)",
            Backing::Thp => {
                "anonymous memory advised for transparent huge pages (madvise MADV_HUGEPAGE)"
            }
            Backing::Hugetlb => {
                "2 MiB pages from the host's hugetlb pool (MAP_HUGETLB, reserved at mmap time)"
            }
        }
    }
}

impl clap::builder::TypedValueParser for BackingParser {
    type Value = Backing;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Backing, clap::Error> {
        let parse: fn(&str) -> Result<Backing, String> = Backing::parse;
        parse.parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(Backing::ALL.into_iter().map(|b| {
            clap::builder::PossibleValue::new(b.as_str()).help(Self::meaning(b))
        })))
    }
}

/// `--arm-kernel-config` / `--arm-guest-dir`'s value: `ENGINE=PATH`.
fn parse_arm_path(s: &str) -> Result<(Engine, PathBuf), String> {
    let (e, p) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not ENGINE=PATH (e.g. firecracker=fc.config)"))?;
    if p.is_empty() {
        return Err(format!("`{s}`: no path after `=`"));
    }
    Ok((Engine::parse(e)?, PathBuf::from(p)))
}

/// `--attribution-sample-us`'s value: [`SamplePeriod::parse`], its error as text.
fn parse_period(s: &str) -> Result<SamplePeriod, String> {
    SamplePeriod::parse(s).map_err(|e| e.to_string())
}

/// `--arm-backing`'s value: `ENGINE=BACKING`.
fn parse_arm_backing(s: &str) -> Result<(Engine, Backing), String> {
    let (e, b) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not ENGINE=BACKING (e.g. firecracker=anon)"))?;
    Ok((Engine::parse(e)?, Backing::parse(b)?))
}

/// The guest every launch boots, as `run`, `tune` and `bisect` all take it (their defaults
/// and help differ: `tune` and `bisect` set theirs on top of these).
#[derive(Args, Debug, Clone, Copy)]
pub struct GuestArgs {
    /// vCPUs per VM (1..=32, the VMM's limit).
    #[arg(long, default_value = "2", value_parser = Vcpus::parse)]
    pub vcpus: Vcpus,
    /// Guest memory per VM, MiB (4..=1048576, the VMM's limit; the VMM also refuses more
    /// than the host's RAM).
    ///
    /// `run`'s default is 16384 MiB; `tune`'s and `bisect`'s is 1024 MiB: they boot every arm
    /// or step many times, and a smaller guest costs less per boot.
    #[arg(
        long = "mem-mib",
        value_name = "MEM_MIB",
        default_value = "16384",
        value_parser = GuestMem::parse
    )]
    pub mem: GuestMem,
}

/// How `--attribution`'s launches measure the boot (`truecold run`, `truecold tune`).
#[derive(Args, Clone, Copy, Debug, PartialEq, Eq)]
pub struct InstrumentArgs {
    /// What the attribution launches measure the boot with (docs/attribution.md).
    ///
    /// `rip` (the default): the VMM samples each vCPU's RIP every --attribution-sample-us
    /// from outside the guest (`truecold-vmm boot --sample-rip-us`), the guest unchanged; a
    /// flat profile per vCPU. `initcall`: the guest's `initcall_debug` trace (a larger log
    /// buffer, `truecold.attribution=1`; the printk per initcall slows the boot it
    /// measures), with guest phases and the longest initcalls. The bundle's run line always
    /// names the instrument; a recorded line without it (written before `rip` became the
    /// default) means `initcall`.
    #[arg(long, value_enum, default_value_t = Instrument::default())]
    pub attribution_instrument: Instrument,
    /// With --attribution-instrument rip: the sampling period, µs (10 to 1000000).
    #[arg(long, value_name = "US", value_parser = parse_period, default_value_t = SamplePeriod::DEFAULT)]
    pub attribution_sample_us: SamplePeriod,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// How launches are scheduled.
    #[arg(long, value_enum, default_value_t = ModeArg::Sequential)]
    pub mode: ModeArg,
    /// Launches (sweep: launches per concurrency level).
    #[arg(short = 'n', long = "count", default_value_t = 1000, value_parser = at_least_one())]
    pub count: u64,
    #[command(flatten)]
    pub guest: GuestArgs,
    /// How guest RAM is backed on the host (default: each engine's own).
    ///
    /// Default: each engine's own — truecold-vmm `thp` for a Linux guest (its tuned default)
    /// and `anon` for the probe guest; Firecracker `anon`; Cloud Hypervisor `thp`; QEMU `anon`
    /// (docs/engines.md). Given, every arm of an engines campaign gets it (the VMMs compared on one backing);
    /// --arm-backing sets one arm's.
    #[arg(long, value_parser = BackingParser)]
    pub backing: Option<Backing>,
    /// One engine arm's backing, `ENGINE=BACKING` (repeatable), over --backing.
    ///
    /// Engines campaigns only: the arm's backing over --backing or the engine's own default,
    /// e.g. `--arm-backing firecracker=hugetlb`.
    #[arg(long, value_name = "ENGINE=BACKING", value_parser = parse_arm_backing)]
    pub arm_backing: Vec<(Engine, Backing)>,
    /// truecold-vmm's guest RAM layout: around-hole, hole-inside or above-4g [default: by memory].
    ///
    /// around-hole: RAM = the configured size, laid around the 640 KiB – 1 MiB hole (it ends
    /// 384 KiB past the size). hole-inside: RAM ends at the configured size, the hole
    /// declared E820 reserved; the memory contract holds configured = RAM + the hole, to the
    /// byte (truecold_proto::layout). above-4g: as hole-inside, with RAM below 4 GiB ending at
    /// 256 MiB and the rest from 4 GiB (Linux initialises the struct pages below 4 GiB on one
    /// CPU, those above in parallel). The default: above-4g from 4096 MiB, hole-inside below
    /// (truecold_proto::layout::RamLayout::default_for, where the tunes measured each the
    /// faster). In an engines or parity campaign, truecold-vmm's arm (the peers lay RAM out
    /// their own way).
    #[arg(long, value_parser = RamLayout::parse)]
    pub ram_layout: Option<RamLayout>,
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
    /// Per-launch deadline, ms (default 2000; 300000 with --nested).
    ///
    /// A launch not strict-ready this long after its request (intended time in burst and
    /// open loop) is a failure, scored at this value.
    /// Default: 2000 ms; 300000 ms with --nested (everything is emulated there).
    #[arg(long, value_parser = at_least_one())]
    pub deadline_ms: Option<u64>,
    /// Grace past the deadline before the VMM is killed, ms.
    ///
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
    /// Appended to the guest kernel command line (a Linux guest's).
    ///
    /// Refused for the probe guest, which has no kernel command line: with --probe, and where
    /// a kvm_pvm host falls back to the probe guest (exit 125).
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub cmdline_extra: String,
    /// Guest serial console to the VMM's stderr (slow: every byte is a VM exit).
    #[arg(long)]
    pub console: bool,
    /// L1's transparent-huge-page mode in the nested harness: always, madvise (the default)
    /// or never.
    ///
    /// The host THP mode of everything in L1: under `always` an engine's anonymous guest
    /// memory gets huge pages without asking for them (Firecracker's, whose `anon` backing
    /// does not advise). Every bundle records the mode it ran under
    /// (`environment.thp_enabled`). --nested only.
    #[arg(long, value_name = "MODE", value_parser = truecold_nested::L1Thp::parse)]
    pub l1_thp: Option<truecold_nested::L1Thp>,
    /// Pin each vCPU of truecold-vmm to a CPU of its own (`truecold-vmm boot --pin-vcpus`).
    ///
    /// vCPU i runs on the i-th CPU the VMM may run on; each report's `vcpu_cpus` says where.
    /// Without it the host's scheduler places the vCPU threads. truecold-vmm only: refused
    /// with --engines and --parity (no peer engine is pinned the same way).
    #[arg(long)]
    pub pin_vcpus: bool,
    /// Split truecold-vmm's vCPUs into N packages (`truecold-vmm boot --packages`).
    ///
    /// N packages (sockets) of vcpus/N single-threaded cores each, a power of two where N >
    /// 1, stated in every CPUID topology leaf; every Linux success's guest must report the
    /// same. Default 1: one package of every vCPU. truecold-vmm only: refused with
    /// --engines and --parity.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub packages: u8,
    /// Tell the guest its TSC is invariant (`truecold-vmm boot --invariant-tsc`).
    ///
    /// CPUID 0x8000_0007 EDX[8] set even where the host's KVM does not report it (the nested
    /// harness's does not; its L1 TSC is the virtual clock): Linux on AMD runs its TSC
    /// synchronisation test across packages only with it. Every Linux success's guest must
    /// report `constant_tsc`. truecold-vmm only.
    #[arg(long)]
    pub invariant_tsc: bool,
    /// Boot the guest directory's `bzImage` instead of `vmlinux` (Linux, truecold-vmm only).
    ///
    /// The 64-bit boot protocol with decompression in the guest, instead of `vmlinux`'s PVH
    /// entry: what `truecold tune`'s `bzimage` knob measures.
    #[arg(long)]
    pub bzimage: bool,
    /// Drop the host page cache before each sample: a cold-host arm (root; sequential only).
    ///
    /// Before each sample's request stamp (outside its measured window), `sync` and drop the
    /// host page cache, so every sample reads the VMM, kernel and initramfs from disk: a
    /// cold-host arm. Root only; --mode sequential only.
    #[arg(long)]
    pub drop_caches: bool,
    /// The parity contract: vsock, a per-launch tap and workspace disk (docs/parity.md).
    ///
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
    ///
    /// With any, the campaign is an engines campaign: the same Linux guest under every
    /// engine, strict-ready observed on each engine's serial port, -n rounds each running
    /// every arm once in a seeded shuffled order; one bundle per arm plus their comparison,
    /// all in one directory. Sequential mode only.
    #[arg(long = "engine", value_parser = Engine::parse)]
    pub engine: Vec<Engine>,
    /// Engine arms as one comma-separated list (the same as repeating --engine).
    #[arg(long, value_parser = Engine::parse, value_delimiter = ',')]
    pub engines: Vec<Engine>,
    /// Seed of an engines campaign's shuffled order; with --nested, also L1's QEMU `-seed`.
    ///
    /// Engines campaign: the seed of the per-round shuffled order (recorded in arms.json).
    /// With --nested (an engines or a plain campaign), also L1's QEMU `-seed`: the nested
    /// campaign's randomness (boot ids, nonces) is a function of it, so campaigns with
    /// distinct seeds draw distinct ones and one seed repeats them. Decimal or 0x hex; the
    /// default is "truecold" in ASCII.
    #[arg(long, default_value = DEFAULT_SEED_ARG, value_parser = parse_seed)]
    pub seed: u64,
    /// The Firecracker binary (default $TRUECOLD_FIRECRACKER).
    ///
    /// Without the flag and the variable: ../shared/peers/bin/firecracker beside the clone,
    /// when present.
    #[arg(long)]
    pub firecracker: Option<PathBuf>,
    /// The Cloud Hypervisor binary (default $TRUECOLD_CLOUD_HYPERVISOR).
    ///
    /// Without the flag and the variable: ../shared/peers/bin/cloud-hypervisor beside the
    /// clone, when present.
    #[arg(long)]
    pub cloud_hypervisor: Option<PathBuf>,
    /// The QEMU binary for the qemu-microvm arm (default qemu-system-x86_64 on PATH).
    #[arg(long)]
    pub qemu: Option<PathBuf>,
    /// Attribution launches after the campaign: where the boot's time goes (0: none).
    ///
    /// After the measured campaign, K more sequential launches measured by
    /// --attribution-instrument (default `rip`: the VMM samples each vCPU's RIP): never rows
    /// of samples.csv; their lines go to attribution.jsonl, and attribution.csv / .svg (where
    /// the time goes, on one clock, reconciled with the measured p50) into the bundle. A
    /// campaign of truecold-vmm alone: refused with --engine/--engines and --parity.
    #[arg(long, default_value_t = 0)]
    pub attribution: u64,
    #[command(flatten)]
    pub instrument: InstrumentArgs,
    #[command(flatten)]
    pub own_kernel: KernelConfigArgs,
    /// With --kernel-config or --kernel-fragment: build this kernel source tree.
    ///
    /// With --kernel-config or --kernel-fragment: build this kernel source tree instead of the
    /// pinned package source: a git work tree's checkout (keyed by its commit), or a tree
    /// without git, whose content truecold commits into a git directory of its own under the
    /// kernel cache (the tree is only read; docs/your-kernel.md). An in-tree build is refused:
    /// `make mrproper` first.
    #[arg(long, value_name = "DIR")]
    pub kernel_source: Option<PathBuf>,
    /// One engine arm boots its own kernel, built from a complete .config (`ENGINE=FILE`).
    ///
    /// Engines campaigns only, repeatable (one per arm): the arm boots a kernel built from
    /// FILE exactly as --kernel-config builds one (the same reproducible, cached recipe, from
    /// --kernel-source or the pinned source; what strict-ready needs of it under that engine
    /// checked before the build, the symbols that did not carry over listed), with the
    /// campaign's initramfs and guest-init. The other arms boot the campaign's kernel.
    /// `arms.json` declares the arm's kernel and `verify` holds the arm to it.
    #[arg(long, value_name = "ENGINE=FILE", value_parser = parse_arm_path)]
    pub arm_kernel_config: Vec<(Engine, PathBuf)>,
    /// One engine arm boots the guest in this directory (`ENGINE=DIR`, as --guest-dir).
    ///
    /// Engines campaigns only, repeatable: a guest directory (vmlinux, config, initramfs,
    /// guest-init) for that arm alone — what `cmdline.txt` records for an arm whose kernel
    /// --arm-kernel-config built.
    #[arg(long, value_name = "ENGINE=DIR", value_parser = parse_arm_path)]
    pub arm_guest_dir: Vec<(Engine, PathBuf)>,
    /// Exit 0 even when some launch failed (without it: 3).
    ///
    /// The bundle is written and VALID either way: failures are data, each a typed row of
    /// samples.csv.
    #[arg(long)]
    pub allow_failures: bool,
    /// Fail fast: stop once K launches in a row failed with one error kind (default 10).
    ///
    /// Fail fast: stop the campaign once K consecutive launches failed with the same error
    /// kind (default 10; a broken host, VMM or guest fails alike every time). The bundle is
    /// written, VALID and marked STOPPED (`contract.stopped`, the kind; the verifier
    /// re-applies the rule to the rows), and the exit status is 3. Sequential campaigns of
    /// truecold alone (not engines or parity campaigns, not the concurrent modes).
    #[arg(long, value_name = "K", value_parser = at_least_one(),
          conflicts_with = "keep_going")]
    pub stop_after: Option<u64>,
    /// Run every planned launch, however many fail (no fail-fast rule).
    #[arg(long)]
    pub keep_going: bool,
    /// The end-of-run summary as one JSON document on stdout (the text goes to stderr).
    ///
    /// One JSON object on stdout and nothing else there: the bundle, its verdict (as
    /// `truecold-proof verify --json`), attempts, ok, failed, the error kinds, the headline
    /// p50/p99/max in ns on its clock, stopped/incomplete/interrupted and the exit status
    /// (docs/verify.md lists the fields). The human summary goes to stderr (none with -q).
    #[arg(long)]
    pub json: bool,
    /// No progress, notes or warnings: errors and the verdict line only (with --json, only
    /// the document).
    #[arg(short, long)]
    pub quiet: bool,
}

/// `truecold run`'s flags that change only its exit status or what it prints, not the
/// campaign: never in `cmdline.txt`'s explicit line, so not in the verifier's flag lists.
pub const EXIT_POLICY_FLAGS: &[&str] = &["--allow-failures", "--json", "--quiet"];

/// The default `--seed` of an engines or nested campaign ("truecold" in ASCII).
pub const DEFAULT_SEED: u64 = truecold_proto::seed::DEFAULT;
/// [`DEFAULT_SEED`] as `--help` shows it (a test holds the two equal).
const DEFAULT_SEED_ARG: &str = "0x74727565636f6c64";

/// The value parser of a count or a duration that must be at least 1 (`-n 0`, `--deadline-ms
/// 0`): a usage error (125) at parse time, as a value out of range always is, in words (`0:
/// at least 1 is needed`), never a Rust range.
fn at_least_one() -> fn(&str) -> Result<u64, String> {
    |s: &str| match s.trim().parse::<u64>() {
        Ok(0) => Err("at least 1 is needed".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a whole number (1 or more)")),
    }
}

/// `--seed`'s value parser: decimal or `0x` hexadecimal.
pub fn parse_seed(s: &str) -> Result<u64, String> {
    truecold_proto::seed::parse(s)
}

/// `truecold tune --help`'s `--mem-mib`: why its default is not `run`'s.
const TUNE_MEM_HELP: &str = "Guest memory per VM, MiB: context, not a knob (4..=1048576). \
    The default is 1024 MiB, where `truecold run`'s is 16384 MiB: a tune screens many knobs \
    and every arm costs a boot each round, so it runs on a smaller guest; give \
    --mem-mib 16384 to tune the size `run` measures.";

/// `truecold bisect run|config --help`'s `--vcpus`: why its default is not `run`'s.
const BISECT_VCPUS_HELP: &str = "vCPUs per VM (1..=32). The default is 1, where `truecold \
    run`'s and `tune`'s is 2: a bisect judges every step by a small interleaved A/B, and one \
    vCPU leaves out the second mode two vCPUs show in the nested harness (a few launches in \
    100 +1 to +3.5 ms, from where L1's scheduler places the vCPU threads), so fewer launches \
    decide a step; give --vcpus 2 to bisect at `run`'s size.";
/// `truecold bisect run|config --help`'s `--mem-mib`: why its default is not `run`'s.
const BISECT_MEM_HELP: &str = "Guest memory per VM, MiB (4..=1048576). The default is 1024 \
    MiB, where `truecold run`'s is 16384 MiB: a bisect boots every step many times, and a \
    smaller guest costs less per boot (as `tune`'s); give --mem-mib 16384 to bisect at \
    `run`'s size.";

/// Default guest memory of a tune, MiB.
pub const DEFAULT_TUNE_MEM_MIB: u64 = 1024;
const DEFAULT_TUNE_MEM_MIB_ARG: &str = "1024";
/// Default launches a side of a bisect step's first look: the fewest at which the first of
/// the default three looks (`--max-n` 4n) can reach its p < 0.01/3
/// ([`truecold_proof::bisect::Looks::smallest_n`]: 7 against 7 fully separated values give
/// p ≈ 0.0022; 6 against 6 never below 0.005).
pub const DEFAULT_N: u64 = 7;

/// Where `truecold tune` builds its Kconfig knobs' kernels unless `--kernel-dir`.
pub const TUNE_KERNEL_DIR: &str = "out/tune-kernels";
/// Where `truecold bisect` builds its kernels unless `--kernel-dir`.
pub const BISECT_KERNEL_DIR: &str = "out/bisect-kernels";

/// `--kernel-dir`'s help in a command whose default is `dir`.
fn kernel_dir_help(dir: &str) -> String {
    format!("Where the kernels are built (default {dir})")
}

/// `truecold tune`.
#[derive(Args, Debug, Clone)]
#[command(mut_arg("kernel_dir", |a| a.help(kernel_dir_help(TUNE_KERNEL_DIR))))]
#[command(mut_arg("mem", |a| a
    .default_value(DEFAULT_TUNE_MEM_MIB_ARG)
    .help("Guest memory per VM, MiB: context, not a knob")
    .long_help(TUNE_MEM_HELP)))]
#[command(mut_arg("vcpus", |a| a.help("vCPUs per VM: context, not a knob")))]
pub struct TuneArgs {
    /// Knobs to try, comma-separated (`--list-knobs` prints the catalogue).
    ///
    /// Default: every catalogue knob that applies to the guest.
    #[arg(long)]
    pub knobs: Option<String>,
    /// Print the knob catalogue and exit.
    ///
    /// Each knob's name, class, what it changes and the source of its expected effect.
    #[arg(long)]
    pub list_knobs: bool,
    /// Attribute the boot first, then screen the knobs proposed from it (docs/tune.md).
    ///
    /// Two attribution campaigns of the baseline (5 launches, then 3 attribution launches
    /// each): `initcall` (each initcall's own duration) and `rip` (each function's self
    /// time), written beside the tune directory (`<out>-attribution-initcall`,
    /// `<out>-attribution-rip`). The knobs proposed from their costliest rows (catalogue
    /// knobs, `initcall-blacklist-<fn>`, `kconfig-off-<SYMBOL>`) are screened with --knobs
    /// (default: the catalogue); tune.json records each proposal's source.
    #[arg(long, conflicts_with = "propose_from")]
    pub propose: bool,
    /// Propose knobs from this attribution bundle and screen them (see --propose).
    ///
    /// A bundle of `truecold run … --attribution K` of the kernel this tune boots. With
    /// --dry-run the proposals are printed and nothing runs.
    #[arg(long, value_name = "BUNDLE")]
    pub propose_from: Option<PathBuf>,
    /// The kernel source tree that maps a function to the Kconfig symbol building it.
    ///
    /// Default: --kernel-source, else the pinned package source in the kernel cache
    /// (`${TRUECOLD_CACHE:-/var/cache/truecold}/src/*/linux-source-*`). Only read.
    #[arg(long, value_name = "DIR")]
    pub propose_source: Option<PathBuf>,
    /// Keep only the proposals of these classes: cmdline, kconfig, vmm (default: every class).
    ///
    /// A command-line proposal needs no kernel build: a screen of those alone gives its
    /// results in the time of its launches, before any Kconfig arm is built (docs/tune.md).
    #[arg(long, value_delimiter = ',', value_name = "CLASS")]
    pub propose_class: Vec<String>,
    /// With --propose-from: print the proposals, each with its source, and exit.
    #[arg(long, requires = "propose_from")]
    pub dry_run: bool,
    /// Tune the VMM floor on the embedded probe guest (only the memory-backing and vCPU-pinning knobs apply).
    #[arg(long, group = "guest")]
    pub probe: bool,
    /// Tune a Linux boot on this host's /dev/kvm.
    #[arg(long, group = "guest")]
    pub linux: bool,
    /// Tune a Linux boot in the nested harness (virtual clock; each phase one L1 boot).
    #[arg(long, group = "guest")]
    pub nested: bool,
    /// Rounds of the screen phase (default: sized from a pilot, or from --noise-from).
    ///
    /// Each round launches every arm once, in a shuffled order. `-n/--count`, as in `run` and
    /// `bisect` (`--rounds` is the same flag).
    #[arg(short = 'n', long = "count", visible_alias = "rounds")]
    pub rounds: Option<u64>,
    /// Size the rounds from this bundle's measured noise.
    ///
    /// The coefficient of variation of this
    /// bundle's successful headlines (the same guest, host and clock), through
    /// `truecold_proof::tune::rounds_for_rule` (enough rounds to find a true 1 % change of the
    /// p50 with 80 % power, family-wise α 0.05 over the knobs). Recorded in tune.json and the
    /// README.
    #[arg(long, conflicts_with = "pilot_rounds")]
    pub noise_from: Option<PathBuf>,
    /// Rounds of the pilot that sizes the screen (default 5 when neither -n nor --noise-from
    /// is given).
    ///
    /// The pilot runs the screen's arms, interleaved as the screen runs them, for this many
    /// rounds (its own `pilot/` phase in the tune directory); the screen's rounds are then
    /// sized from the pilot's noise (the root mean square of each arm's CV) by the same rule
    /// as --noise-from. tune.json records the noise and verify recomputes it from `pilot/`.
    #[arg(long, conflicts_with = "rounds")]
    pub pilot_rounds: Option<u64>,
    /// Rounds of the confirm phase (default: --count).
    #[arg(long)]
    pub confirm_rounds: Option<u64>,
    /// At most this many launches in all.
    ///
    /// Both phases' rounds shrink alike to fit the worst case (every knob a winner); fewer
    /// than the minimum rounds is an error.
    #[arg(long)]
    pub budget: Option<u64>,
    /// The seed of every phase's shuffled order (recorded; decimal or 0x hex).
    #[arg(long, default_value = DEFAULT_SEED_ARG, value_parser = parse_seed)]
    pub seed: u64,
    #[command(flatten)]
    pub guest: GuestArgs,
    /// The baseline's memory backing (backing knobs change it).
    ///
    /// `anon` by default, although `truecold run` boots a Linux guest on `thp`: against 4 KiB
    /// pages the backing knobs (`backing-thp`, `backing-hugetlb`) measure what each backing is
    /// worth; `--backing thp` tunes the other knobs from run's default.
    #[arg(long, default_value_t = Backing::Anon, value_parser = BackingParser)]
    pub backing: Backing,
    /// Per-launch deadline (default 2000 ms; 300000 ms with --nested).
    #[arg(long, value_parser = at_least_one())]
    pub deadline_ms: Option<u64>,
    /// Past the deadline, how long the VMM may take to print its report before it is killed.
    #[arg(long, default_value_t = 500)]
    pub kill_grace_ms: u64,
    /// The tune directory (default `results/<UTC>-tune-<guest>-<v>vcpu-<m>mib`); must not
    /// exist.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Attribution launches for the baseline and recommended arms (0: none).
    ///
    /// Attribution launches for the last phase's `baseline` and `recommended` arms (the
    /// screen's `baseline` when no knob won), measured by --attribution-instrument (default
    /// `rip`), run after the measured rounds, never rows; their attribution.csv / .svg go
    /// into those arms' bundles and side by side into the README. tune.json and each
    /// attributed arm's run line record the instrument. The default is 2, where `truecold
    /// run`'s is 0: a tune's answer is which knobs win, and its README shows where their time
    /// goes beside the baseline's; a campaign's is its latencies alone. 0: none.
    #[arg(long, default_value_t = 2)]
    pub attribution: u64,
    /// The headline figure every arm is judged on: total or parallel.
    ///
    /// `total` (the bundles' own clock) or `parallel` (the nested harness's parallel clock,
    /// which counts work on several L1 CPUs at once as overlapping; needs --nested).
    /// docs/virtual-clock.md says what each measures.
    #[arg(long, value_name = "FIGURE", default_value = "total", value_parser = truecold_proof::schema::Figure::parse)]
    pub clock: truecold_proof::schema::Figure,
    #[command(flatten)]
    pub instrument: InstrumentArgs,
    /// The VMM, the base guest, and where Kconfig knobs' kernels are built.
    #[command(flatten)]
    pub paths: KernelPaths,
    #[command(flatten)]
    pub own_kernel: KernelConfigArgs,
    /// With --kernel-config or --kernel-fragment: build this kernel source tree.
    ///
    /// With --kernel-config or --kernel-fragment: build this kernel source tree instead of the
    /// pinned package source, for the baseline and every Kconfig knob: a git work tree's
    /// checkout, or a tree without git through a snapshot of its content under the kernel
    /// cache (docs/your-kernel.md). An in-tree build is refused: `make mrproper` first. Recorded in tune.json and
    /// recommended/reproduce.sh.
    #[arg(long, value_name = "DIR")]
    pub kernel_source: Option<PathBuf>,
    /// The end-of-tune verdict as one JSON document on stdout (the text goes to stderr).
    ///
    /// One JSON object on stdout and nothing else there: the tune directory, its verdict (as
    /// `truecold-proof verify --json`) and the exit status; an `error` object with `exit`
    /// when nothing was written. The human summary goes to stderr (none with -q).
    #[arg(long)]
    pub json: bool,
    /// No progress, notes or warnings: errors and the verdict line only (with --json, only
    /// the document).
    #[arg(short, long)]
    pub quiet: bool,
}

/// `--kernel-config` / `--kernel-fragment` of `truecold run`, `truecold tune` and `truecold
/// bisect run/step`: the user's kernel, built instead of truecold's base
/// (docs/your-kernel.md); one definition of the flags.
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelConfigArgs {
    /// Your own kernel: a complete .config, checked and built first (docs/your-kernel.md).
    ///
    /// A complete .config (what `make olddefconfig` writes), checked for what strict-ready
    /// needs before anything is built (each missing symbol named) and built by the same
    /// reproducible, cached recipe as truecold's kernels (`kernel-config/build.sh config`:
    /// olddefconfig on the pinned linux-source-6.12, or on --kernel-source / the bisected
    /// tree), beside the base guest's init and initramfs; the symbols that did not carry over
    /// are listed. `run`: into out/run-kernels/<key>/, a Linux campaign (--linux, --nested, or
    /// the host's default), not --parity. `tune`: the baseline boots it and every Kconfig
    /// knob is its fragment appended to it (a knob it already sets is left out, or refused
    /// when listed in --knobs). `bisect`: every commit is built from it (olddefconfig per
    /// commit). `tune` and `bisect` keep the file beside their record (user-kernel.config)
    /// with its digest.
    #[arg(long, value_name = "FILE")]
    pub kernel_config: Option<PathBuf>,
    /// Your own kernel as a fragment over truecold's base (docs/your-kernel.md).
    ///
    /// Kconfig lines (`CONFIG_X=y`, `# CONFIG_Y is not set`) merged over tinyconfig and
    /// truecold's kernel-config/base.config, the way a tune knob is (`kernel-config/build.sh
    /// tune`). Checked, built and recorded as --kernel-config is (what strict-ready needs,
    /// before the build and as resolved; the fragment's symbols that did not carry over
    /// listed). Not with --kernel-config.
    #[arg(long, value_name = "FILE", conflicts_with = "kernel_config")]
    pub kernel_fragment: Option<PathBuf>,
}

/// `truecold tune-phase`: one phase from its plan (what `truecold tune --nested` runs in L1).
#[derive(Args, Debug, Clone)]
pub struct TunePhaseArgs {
    /// The phase plan (JSON, written by `truecold tune`).
    #[arg(long)]
    pub plan: PathBuf,
    /// The phase directory to write; must not exist.
    #[arg(long)]
    pub out: PathBuf,
    /// The truecold-vmm binary (default: next to this binary).
    #[arg(long)]
    pub vmm: Option<PathBuf>,
    /// The base guest directory (default $TRUECOLD_GUEST_DIR, else out/guest).
    #[arg(long)]
    pub guest_dir: Option<PathBuf>,
}

/// `truecold bisect`.
#[derive(Args, Debug, Clone)]
pub struct BisectArgs {
    #[command(subcommand)]
    pub cmd: BisectCmd,
    /// The outcome as one JSON document on stdout (the text goes to stderr).
    ///
    /// One JSON object on stdout and nothing else there: `step`'s outcome (`good`, `bad`,
    /// `skip`) and exit status; `run`'s and `config`'s bisect directory, its verdict (as
    /// `truecold-proof verify --json`) and exit status; an `error` object with `exit` when
    /// nothing was found or written.
    #[arg(long, global = true)]
    pub json: bool,
    /// No progress, notes or warnings: errors and the outcome line only (with --json, only
    /// the document).
    #[arg(short, long, global = true)]
    pub quiet: bool,
}

#[derive(Subcommand, Debug, Clone)]
pub enum BisectCmd {
    /// One step, for `git bisect run`: build, measure, judge against the baseline.
    ///
    /// Build the tree's checkout, measure it, judge it against the baseline: exits as `git
    /// bisect run` reads it (below).
    #[command(
        after_help = short_help("truecold bisect step"),
        after_long_help = long_help("truecold bisect step", width())
    )]
    Step(StepArgs),
    /// A whole `git bisect` session between two commits of a kernel tree.
    #[command(
        after_help = short_help("truecold bisect run"),
        after_long_help = long_help("truecold bisect run", width())
    )]
    Run(RunBisectArgs),
    /// The smallest set of symbols between two kernel configs that explains a slowdown.
    #[command(
        after_help = short_help("truecold bisect config"),
        after_long_help = long_help("truecold bisect config", width())
    )]
    Config(ConfigBisectArgs),
}

/// `truecold replay`.
#[derive(Args, Debug, Clone)]
pub struct ReplayArgs {
    /// The bundle to replay, or a tune, bisect or engines directory (with --arm).
    pub dir: PathBuf,
    /// In a tune, bisect or engines directory: the bundle to replay, as a path inside it.
    ///
    /// E.g. `screen/baseline` in a tune, `steps/01-…` in a bisect, `firecracker` in an
    /// engines directory; without it the error lists the bundles inside.
    #[arg(long, visible_alias = "step", value_name = "PATH")]
    pub arm: Option<String>,
    /// Where the replay's bundle goes (default `results/<UTC>-replay-<name>`); must not exist.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The truecold-vmm binary (default: where the campaign would find it; its digest must
    /// be the record's).
    #[arg(long)]
    pub vmm: Option<PathBuf>,
    /// The guest artifacts (default $TRUECOLD_GUEST_DIR, else out/guest; their digests must
    /// be the record's).
    #[arg(long)]
    pub guest_dir: Option<PathBuf>,
    /// Check the inputs against the record and print the line that would run; run nothing.
    #[arg(long)]
    pub check: bool,
    /// The verdict as one JSON document on stdout (every difference listed).
    #[arg(long)]
    pub json: bool,
    /// No progress or notes: errors and the verdict only.
    #[arg(short, long)]
    pub quiet: bool,
}

/// `truecold fleet`.
#[derive(Args, Debug, Clone)]
pub struct FleetArgs {
    #[command(subcommand)]
    pub cmd: FleetCmd,
    /// One JSON document on stdout and nothing else there, with the exit status.
    ///
    /// `submit`: the fleet directory, its shards, clock, job array and tasks; `shard` and
    /// `gather`: the directory's verdict (as `truecold-proof verify --json`; `gather` with the
    /// merge rule); `status`: each shard's state; an `error` object with `exit` on failure.
    #[arg(long, global = true)]
    pub json: bool,
    /// Errors and the outcome line only (with --json, only the document).
    #[arg(short, long, global = true)]
    pub quiet: bool,
}

#[derive(Subcommand, Debug, Clone)]
pub enum FleetCmd {
    /// Plan the shards into DIR and submit them to Slurm as one job array.
    ///
    /// The command after `--` is `run …` (a campaign: -n launches cut into --shards ranges,
    /// each a campaign of its own with a seed of its own) or `tune …` (a tune's screen phase:
    /// one shard per knob, each the knob's arm beside its own baseline). DIR holds the plan
    /// (fleet.json), one shard directory per task and the task records. With --resume, only
    /// the shards not yet written are submitted again, under the plan already in DIR.
    #[command(
        after_help = short_help("truecold fleet submit"),
        after_long_help = long_help("truecold fleet submit", width())
    )]
    Submit(FleetSubmitArgs),
    /// Run one shard of DIR's plan (what each array task runs) into DIR/shards/<name>.
    #[command(
        after_help = short_help("truecold fleet shard"),
        after_long_help = long_help("truecold fleet shard", width())
    )]
    Shard(FleetShardArgs),
    /// Verify every shard and merge them into DIR's fleet record (SHA256SUMS over all).
    #[command(
        after_help = short_help("truecold fleet gather"),
        after_long_help = long_help("truecold fleet gather", width())
    )]
    Gather(FleetGatherArgs),
    /// Each shard's state: written, running, pending, or why its task failed.
    #[command(
        after_help = short_help("truecold fleet status"),
        after_long_help = long_help("truecold fleet status", width())
    )]
    Status(FleetDirArgs),
}

/// `truecold fleet submit`.
#[derive(Args, Debug, Clone)]
pub struct FleetSubmitArgs {
    /// The fleet directory (created; with --resume, an existing one).
    pub dir: PathBuf,
    /// The Slurm partition every task runs in.
    #[arg(long)]
    pub partition: String,
    /// Shards of a campaign (`run`, default 2); probes of a bisect wave (`bisect run`, default 3).
    ///
    /// `run`: -n is cut into this many ranges of launches. `bisect run`: the wave measures this
    /// many commits of the range at once (the bad one and K − 1 spread before it), each a
    /// task after the good commit's baseline (docs/fleet.md).
    #[arg(long)]
    pub shards: Option<u64>,
    /// Memory each task asks Slurm for, MiB (default: L1's memory and 1 GiB).
    ///
    /// The default is L1's memory (the guest's and 1 GiB) and 1 GiB for the bench and QEMU; a
    /// task above it is killed by Slurm, and `status` says `killed for memory`.
    #[arg(long, value_name = "MIB")]
    pub task_mem_mib: Option<u64>,
    /// Each task's time limit, minutes (default: Slurm's partition default).
    #[arg(long, value_name = "MIN")]
    pub time_min: Option<u64>,
    /// Submit again only the shards DIR does not hold yet, under its plan.
    #[arg(long)]
    pub resume: bool,
    /// Write the plan and the batch script; submit nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The `truecold` command to fan out: `run …`, `tune …` or `bisect run …`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `truecold fleet shard`.
#[derive(Args, Debug, Clone)]
pub struct FleetShardArgs {
    /// The fleet directory.
    pub dir: PathBuf,
    /// The shard's index in the plan (default $SLURM_ARRAY_TASK_ID).
    #[arg(long)]
    pub task: Option<u64>,
}

/// `truecold fleet gather`.
#[derive(Args, Debug, Clone)]
pub struct FleetGatherArgs {
    /// The fleet directory.
    pub dir: PathBuf,
    /// Apply the merge rule against this unsharded run of the same plan (docs/fleet.md).
    ///
    /// A bundle of the whole campaign for `run`; a tune directory or its screen phase for
    /// `tune`. Each shard is held to the same launches (or the same knob) there.
    #[arg(long, value_name = "DIR")]
    pub against: Option<PathBuf>,
}

/// A fleet directory.
#[derive(Args, Debug, Clone)]
pub struct FleetDirArgs {
    /// The fleet directory.
    pub dir: PathBuf,
}

/// How every step is measured and judged.
#[derive(Args, Debug, Clone)]
#[command(mut_arg("kernel_dir", |a| a.help(kernel_dir_help(BISECT_KERNEL_DIR))))]
pub struct JudgeArgs {
    /// Launches a side of a step's first look (and of the baseline `run` measures).
    #[arg(short = 'n', long = "count", default_value_t = DEFAULT_N)]
    pub n: u64,
    /// Most launches a side of an inconclusive step (default 4 × -n).
    ///
    /// Every look is an interleaved A/B against the good kernel; an inconclusive look is
    /// followed by one with twice the launches, up to this many (K looks, each judged at
    /// p < alpha/K, so alpha holds over all of them); still inconclusive: skip (125).
    #[arg(long)]
    pub max_n: Option<u64>,
    /// Smallest slowdown called bad, percent of the good median (`compare --threshold-pct`).
    #[arg(long, default_value_t = 2.0)]
    pub threshold_pct: f64,
    /// Significance level over all looks of a step (`compare --alpha`; each look at alpha/K).
    #[arg(long, default_value_t = 0.01)]
    pub alpha: f64,
    /// The headline figure a step is judged on (`compare --clock`): total or parallel.
    ///
    /// `total` (the bundles' own clock) or `parallel` (the nested harness's parallel clock;
    /// the bisect must run --nested).
    #[arg(long, value_name = "FIGURE", default_value = "total", value_parser = truecold_proof::schema::Figure::parse)]
    pub clock: truecold_proof::schema::Figure,
    #[command(flatten)]
    pub paths: KernelPaths,
}

/// The campaign every step runs (`run` and `config`; `step` takes it from its baseline).
#[derive(Args, Debug, Clone)]
#[command(mut_arg("vcpus", |a| a
    .default_value("1")
    .help("vCPUs per VM")
    .long_help(BISECT_VCPUS_HELP)))]
#[command(mut_arg("mem", |a| a
    .default_value("1024")
    .help("Guest memory per VM, MiB")
    .long_help(BISECT_MEM_HELP)))]
pub struct ContextArgs {
    /// Run in the nested harness (virtual clock) instead of this host's /dev/kvm.
    #[arg(long)]
    pub nested: bool,
    #[command(flatten)]
    pub guest: GuestArgs,
}

#[derive(Args, Debug, Clone)]
pub struct StepArgs {
    /// The good side: a bundle, or a bisect directory (its baseline).
    #[arg(long)]
    pub baseline: PathBuf,
    /// The kernel git work tree whose checkout is built.
    #[arg(long, default_value = ".")]
    pub kernel_tree: PathBuf,
    /// The bisect directory the step is appended to (created with the baseline in it).
    #[arg(long)]
    pub dir: PathBuf,
    #[command(flatten)]
    pub own_kernel: KernelConfigArgs,
    #[command(flatten)]
    pub judge: JudgeArgs,
}

#[derive(Args, Debug, Clone)]
pub struct RunBisectArgs {
    /// The kernel git work tree (must be clean; left on the commit it was on).
    #[arg(long)]
    pub kernel_tree: PathBuf,
    /// A commit that boots fast enough.
    #[arg(long)]
    pub good: String,
    /// A later commit that boots slower.
    #[arg(long)]
    pub bad: String,
    /// The bisect directory (default `results/<UTC>-bisect-commit-…`); must not exist.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Attribution launches a side of the culprit's differential profile (0: none).
    ///
    /// Attaches the first bad commit's differential profile against its parent: a campaign
    /// of each kernel (one measured launch) with this many RIP-sampled attribution launches,
    /// and which functions took the time (docs/bisect.md).
    #[arg(long, value_name = "K", default_value_t = 3)]
    pub profile: u64,
    #[command(flatten)]
    pub own_kernel: KernelConfigArgs,
    #[command(flatten)]
    pub context: ContextArgs,
    #[command(flatten)]
    pub judge: JudgeArgs,
}

#[derive(Args, Debug, Clone)]
pub struct ConfigBisectArgs {
    /// The good kernel config (a complete .config).
    #[arg(long)]
    pub good: PathBuf,
    /// The bad kernel config.
    #[arg(long)]
    pub bad: PathBuf,
    /// Build this kernel source tree (default: the pinned linux-source-6.12).
    ///
    /// A git work tree's checkout, or a tree without git through a snapshot of its content
    /// under the kernel cache (docs/your-kernel.md); an in-tree build is refused.
    #[arg(long)]
    pub kernel_tree: Option<PathBuf>,
    /// The bisect directory (default `results/<UTC>-bisect-config-…`); must not exist.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub context: ContextArgs,
    #[command(flatten)]
    pub judge: JudgeArgs,
}

/// Where a command's kernels come from and go: the flags `truecold tune` and `truecold
/// bisect` share.
#[derive(Args, Debug, Clone, Default)]
pub struct KernelPaths {
    /// The truecold-vmm binary (default: next to this binary).
    #[arg(long)]
    pub vmm: Option<PathBuf>,
    /// The base guest directory (default $TRUECOLD_GUEST_DIR, else out/guest).
    ///
    /// Its initramfs and init go with every kernel.
    #[arg(long)]
    pub guest_dir: Option<PathBuf>,
    /// Where the kernels are built (each command's --help names its default).
    #[arg(long)]
    pub kernel_dir: Option<PathBuf>,
    /// The kernel build script (default kernel-config/build.sh).
    #[arg(long)]
    pub kernel_build: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command tree built with help unwrapped (a test reads a sentence whole, whatever
    /// the terminal).
    fn unwrapped() -> clap::Command {
        use clap::CommandFactory;
        let mut c = Cli::command().term_width(0);
        c.build();
        c
    }

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
            if EXIT_POLICY_FLAGS.contains(&format!("--{long}").as_str()) {
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

    fn run(extra: &[&str]) -> Result<RunArgs, clap::Error> {
        let mut v = vec!["truecold", "run"];
        v.extend_from_slice(extra);
        Cli::try_parse_run(v)
    }

    /// The count of launches is `-n/--count` in every command; tune's old `--rounds` is the
    /// same flag.
    #[test]
    fn the_count_is_one_flag_in_every_command() {
        let rounds = |words: &[&str]| {
            let mut v = vec!["truecold", "tune"];
            v.extend_from_slice(words);
            match Cli::try_parse_from(v).unwrap().cmd {
                Cmd::Tune(t) => t.rounds,
                other => panic!("not a tune: {other:?}"),
            }
        };
        for w in [&["-n", "7"][..], &["--count", "7"], &["--rounds", "7"]] {
            assert_eq!(rounds(w), Some(7), "{w:?}");
        }
        assert_eq!(run(&["--count", "7"]).unwrap().count, 7);
    }

    /// One `GuestArgs` in three commands, each with its own defaults and help.
    #[test]
    fn the_shared_guest_flags_keep_each_commands_defaults() {
        let a = run(&[]).unwrap();
        assert_eq!((a.guest.vcpus.get(), a.guest.mem.mib()), (2, 16384));
        let Cmd::Tune(t) = Cli::try_parse_from(["truecold", "tune"]).unwrap().cmd else {
            panic!("not a tune")
        };
        assert_eq!(
            (t.guest.vcpus.get(), t.guest.mem.mib()),
            (2, DEFAULT_TUNE_MEM_MIB)
        );
        let Cmd::Bisect(b) =
            Cli::try_parse_from(["truecold", "bisect", "config", "--good", "a", "--bad", "b"])
                .unwrap()
                .cmd
        else {
            panic!("not a bisect")
        };
        let BisectCmd::Config(c) = b.cmd else {
            panic!("not bisect config")
        };
        assert_eq!(
            (c.context.guest.vcpus.get(), c.context.guest.mem.mib()),
            (1, 1024)
        );

        let mut cmd = unwrapped();
        let help = |cmd: &mut clap::Command, path: &[&str]| {
            let mut c = cmd.clone();
            let mut at = &mut c;
            for p in path {
                at = at.find_subcommand_mut(p).expect("a subcommand");
            }
            at.render_long_help().to_string()
        };
        let t = help(&mut cmd, &["tune"]);
        assert!(
            t.contains("Guest memory per VM, MiB: context, not a knob"),
            "{t}"
        );
        assert!(t.contains("vCPUs per VM: context, not a knob"), "{t}");
        let r = help(&mut cmd, &["run"]);
        assert!(r.contains("--mem-mib <MEM_MIB>"), "{r}");
        assert!(r.contains("the host's RAM)"), "{r}");
        let b = help(&mut cmd, &["bisect", "run"]);
        assert!(
            b.contains("vCPUs per VM (1..=32). The default is 1, where"),
            "{b}"
        );
        assert!(
            b.contains("Guest memory per VM, MiB (4..=1048576). The default is 1024"),
            "{b}"
        );
        let short = cmd
            .find_subcommand_mut("bisect")
            .and_then(|c| c.find_subcommand_mut("run"))
            .expect("bisect run")
            .render_help()
            .to_string();
        assert!(short.contains("vCPUs per VM [default: 1]"), "{short}");
    }

    /// Every edge of the VMM's limits, rejected by clap before anything launches, with a
    /// message that names the limit.
    #[test]
    fn vcpu_and_memory_limits_at_every_edge() {
        use truecold_proto::limits::{MAX_MEM_MIB, MAX_VCPUS, MIN_MEM_MIB, MIN_VCPUS};
        let ok = |x: &[&str]| run(x).unwrap_or_else(|e| panic!("{x:?}: {e}"));
        let bad = |x: &[&str]| {
            let e = run(x).expect_err("must be rejected");
            assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation, "{x:?}");
            e.to_string()
        };
        let n = |v: u64| v.to_string();
        assert_eq!(ok(&["--vcpus", &n(MIN_VCPUS.into())]).guest.vcpus.get(), 1);
        assert_eq!(ok(&["--vcpus", &n(MAX_VCPUS.into())]).guest.vcpus.get(), 32);
        let e = bad(&["--vcpus", "0"]);
        assert!(e.contains("--vcpus 0: 1 to 32 vCPUs are supported"), "{e}");
        let e = bad(&["--vcpus", &n(u64::from(MAX_VCPUS) + 1)]);
        assert!(e.contains("--vcpus 33: 1 to 32 vCPUs are supported"), "{e}");
        bad(&["--vcpus", "255"]);
        bad(&["--vcpus", "256"]);
        bad(&["--vcpus=-1"]);
        bad(&["--vcpus", "two"]);

        assert_eq!(ok(&["--mem-mib", &n(MIN_MEM_MIB)]).guest.mem.mib(), 4);
        assert_eq!(
            ok(&["--mem-mib", &n(MAX_MEM_MIB)]).guest.mem.mib(),
            MAX_MEM_MIB
        );
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
        // Mutually exclusive guest kinds, unknown modes: clap's own errors.
        assert!(run(&["--probe", "--linux"]).is_err());
        assert!(run(&["--mode", "zigzag"]).is_err());
    }

    /// `--seed` reads decimal or 0x hex, its default is "truecold" in ASCII, and `--help`
    /// shows it in hex.
    #[test]
    fn seeds_read_decimal_or_hex_and_show_in_hex() {
        assert_eq!(DEFAULT_SEED, u64::from_be_bytes(*b"truecold"));
        assert_eq!(parse_seed(DEFAULT_SEED_ARG), Ok(DEFAULT_SEED));
        assert_eq!(run(&[]).unwrap().seed, DEFAULT_SEED);
        assert_eq!(run(&["--seed", "0x10"]).unwrap().seed, 16);
        assert_eq!(run(&["--seed", "16"]).unwrap().seed, 16);
        let e = run(&["--seed", "0xzz"]).expect_err("not a seed");
        assert!(e.to_string().contains("is not a seed"), "{e}");
        let Cmd::Tune(t) = Cli::try_parse_from(["truecold", "tune", "--seed", "0xff"])
            .unwrap()
            .cmd
        else {
            panic!("not a tune")
        };
        assert_eq!(t.seed, 255);

        for sub in ["run", "tune"] {
            let mut cmd = unwrapped();
            let h = cmd
                .find_subcommand_mut(sub)
                .expect("a subcommand")
                .render_long_help()
                .to_string();
            assert!(h.contains("[default: 0x74727565636f6c64]"), "{sub}:\n{h}");
        }
    }

    /// `--kernel-dir` names the default of the command it is in, not both.
    #[test]
    fn kernel_dir_help_names_its_own_commands_default() {
        let help = |path: &[&str]| {
            let mut cmd = unwrapped();
            let mut c = &mut cmd;
            for p in path {
                c = c.find_subcommand_mut(p).expect("a subcommand");
            }
            c.render_long_help().to_string()
        };
        let tune = help(&["tune"]);
        assert!(tune.contains("(default out/tune-kernels)"), "{tune}");
        assert!(!tune.contains("bisect-kernels"), "{tune}");
        for sub in ["step", "run", "config"] {
            let h = help(&["bisect", sub]);
            assert!(h.contains("(default out/bisect-kernels)"), "{sub}: {h}");
            assert!(!h.contains("tune-kernels"), "{sub}: {h}");
        }
    }

    /// `--mem-mib`'s long help says run's default and tune's, and why they differ.
    #[test]
    fn mem_help_says_why_tune_boots_a_smaller_guest() {
        let help = |sub: &str| {
            let mut cmd = unwrapped();
            cmd.find_subcommand_mut(sub)
                .expect("a subcommand")
                .render_long_help()
                .to_string()
        };
        let t = help("tune");
        assert!(t.contains("[default: 1024]"), "{t}");
        assert!(t.contains("`truecold run`'s is 16384 MiB"), "{t}");
        assert!(t.contains("every arm costs a boot"), "{t}");
        let r = help("run");
        assert!(r.contains("[default: 16384]"), "{r}");
        assert!(r.contains("`tune`'s and `bisect`'s is 1024 MiB"), "{r}");
    }

    #[test]
    fn help_documents_the_engine_flags() {
        let mut cmd = unwrapped();
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
