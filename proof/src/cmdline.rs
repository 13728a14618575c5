//! `cmdline.txt`: the bench's record of how a campaign was started, written by
//! [`format_cmdline_txt`] (the one writer) and read back so the verifier can hold it against
//! `result.json`.
//!
//! The file is the contract label, then sections of `# <heading>` lines, each followed by
//! exactly one line:
//! - `# truecold invocation, as typed`: the command line as the user typed it (not parsed:
//!   it may rely on defaults, a relative path or a wrapper);
//! - `# truecold run, every argument explicit`: the same campaign as a `truecold run …` argv
//!   with every flag spelled out (defaults filled in, paths resolved), one POSIX-shell word
//!   per argument (required; this is the line the verifier reads);
//! - `# VMM command…`: the `truecold-vmm boot …` argv every sample ran (required); a value
//!   written `<like_this>` is per sample (`<actual_request_ns>`, and the absolute deadline
//!   `<origin+N>` whose `N` must be the contract's deadline in ns);
//! - `# guest kernel command line…`: the kernel command line the VMM reported (optional).
//!
//! An engines-campaign arm (serial observer) has `# engine command: <engine>, …` instead of
//! the VMM section ([`format_engine_cmdline_txt`]): the engine's argv every sample ran, its
//! per-sample values written `<like_this>` (a config file, a report file, the deadline). It
//! must run the configured binary (`configuration.vmm_path`) and name the configured engine;
//! for the truecold engine it is a `truecold-vmm boot …` line, checked as the VMM line is.
//! The run line of such an arm names the engine (`--engine`, repeatable, or `--engines
//! a,b,…`); the engine's binary flag (`--vmm`, `--firecracker`, `--cloud-hypervisor`,
//! `--qemu`), when given, is `configuration.vmm_path`.
//!
//! What the argv must agree with (see [`Recorded::disagreements`]): vCPUs, memory, backing
//! (the first word of `configuration.backing`), deadline, the guest kind, and
//! `configuration.cmdline` (the guest kernel command line when recorded, else the VMM
//! command). Both commands must spell out `--vcpus`, `--mem-mib` and `--backing` (and the
//! run line `--deadline-ms`): nothing is read from a default, so no default is copied here.
//! The mode and count are not compared: the rows themselves are checked against the mode.

use crate::attribution::Instrument;
use crate::schema::{ContractKind, Engine, ResultJson};
use truecold_proto::kinds::RamLayout;

/// The as-typed section's heading.
pub const TYPED_HEADING: &str = "# truecold invocation, as typed";
/// The explicit `truecold run` section's heading.
pub const INVOCATION_HEADING: &str = "# truecold run, every argument explicit";
/// The VMM command's heading.
pub const VMM_HEADING: &str = "# VMM command";
/// The guest kernel command line's heading.
pub const GUEST_HEADING: &str = "# guest kernel command line";
/// An engine arm's per-sample command heading: `# engine command: <engine>, …`.
pub const ENGINE_HEADING: &str = "# engine command: ";

/// `truecold run`'s flags that take a value (a bench test holds this and [`RUN_SWITCHES`] to
/// `truecold run`'s own argument parser, flag by flag).
pub const RUN_VALUE_FLAGS: &[&str] = &[
    "--mode",
    "-n",
    "--count",
    "--vcpus",
    "--mem-mib",
    "--backing",
    "--arm-backing",
    "--ram-layout",
    "--concurrency",
    "--rate",
    "--max-concurrency",
    "--deadline-ms",
    "--kill-grace-ms",
    "--out",
    "--vmm",
    "--guest-dir",
    "--cmdline-extra",
    "--engine",
    "--engines",
    "--firecracker",
    "--cloud-hypervisor",
    "--qemu",
    "--seed",
    "--attribution",
    "--attribution-instrument",
    "--attribution-sample-us",
    "--inject-tap-name",
    "--kernel-config",
    "--kernel-source",
    "--kernel-fragment",
    "--stop-after",
    "--arm-kernel-config",
    "--arm-guest-dir",
    "--l1-thp",
    "--packages",
];
/// `truecold run`'s flags that may be given more than once (each time adds a value).
pub const RUN_REPEATABLE: &[&str] = &[
    "--engine",
    "--arm-backing",
    "--arm-kernel-config",
    "--arm-guest-dir",
];
/// `truecold run`'s flags that take none.
pub const RUN_SWITCHES: &[&str] = &[
    "--probe",
    "--linux",
    "--nested",
    "--console",
    "--bzimage",
    "--pin-vcpus",
    "--invariant-tsc",
    "--drop-caches",
    "--parity",
    "--keep-going",
];
/// `truecold-vmm boot`'s flags that take a value (any other flag is read as a switch).
pub const VMM_VALUE_FLAGS: &[&str] = &[
    "--kernel",
    "--initramfs",
    "--vcpus",
    "--mem-mib",
    "--backing",
    "--ram-layout",
    "--cmdline-extra",
    "--deadline-ms",
    "--request-ns",
    "--host-kind",
    "--packages",
];

/// Why `cmdline.txt` cannot be read as a record of the campaign.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CmdlineError {
    #[error("not UTF-8")]
    NotUtf8,
    #[error("no `{0}` section")]
    MissingSection(&'static str),
    #[error("section `{0}` appears twice")]
    DuplicateSection(&'static str),
    #[error("heading `{0}` is not followed by its line")]
    EmptySection(&'static str),
    #[error("{section}: unbalanced quote")]
    Quote { section: &'static str },
    #[error("{section}: not a `{want}` command")]
    NotTheCommand {
        section: &'static str,
        want: &'static str,
    },
    #[error("{section}: `{flag}` needs a value")]
    NoValue { section: &'static str, flag: String },
    #[error("{section}: `{flag}` given twice")]
    Repeated { section: &'static str, flag: String },
    #[error("{section}: unknown argument `{arg}` (not a `truecold run` flag this verifier knows)")]
    Unknown { section: &'static str, arg: String },
    #[error("{section}: `{flag}` is not spelled out")]
    Missing {
        section: &'static str,
        flag: &'static str,
    },
    #[error("{section}: `{flag}` has the unreadable value `{value}`")]
    BadValue {
        section: &'static str,
        flag: String,
        value: String,
    },
    #[error("both a `{VMM_HEADING}` and an `{ENGINE_HEADING}…` section: one per-sample command")]
    TwoCommands,
    #[error("`{ENGINE_HEADING}…`: `{0}` is not an engine")]
    UnknownEngine(String),
}

/// One parsed command: `flag → value` (switches map to `""`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Argv {
    /// The words after the program and subcommand.
    pub flags: Vec<(String, String)>,
}

impl Argv {
    /// The value of `flag`, if given.
    pub fn get(&self, flag: &str) -> Option<&str> {
        self.flags
            .iter()
            .find(|(f, _)| f == flag)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the switch `flag` is given.
    pub fn has(&self, flag: &str) -> bool {
        self.get(flag).is_some()
    }

    /// Every value of `flag` (a [`RUN_REPEATABLE`] flag), in order.
    pub fn all<'a>(&'a self, flag: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.flags
            .iter()
            .filter(move |(f, _)| f == flag)
            .map(|(_, v)| v.as_str())
    }

    /// The engines a `truecold run` line names: every `--engine` and the `--engines` list, in
    /// order; `None` when it names none (a truecold-only campaign).
    pub fn engines(&self) -> Option<Result<Vec<Engine>, String>> {
        let mut names: Vec<&str> = self.all("--engine").collect();
        if let Some(list) = self.get("--engines") {
            names.extend(list.split(','));
        }
        (!names.is_empty()).then(|| names.into_iter().map(Engine::parse).collect())
    }
}

/// The `truecold run` flag that names `engine`'s binary.
pub fn binary_flag(engine: Engine) -> &'static str {
    match engine {
        Engine::Truecold => "--vmm",
        Engine::Firecracker => "--firecracker",
        Engine::CloudHypervisor => "--cloud-hypervisor",
        Engine::QemuMicrovm => "--qemu",
    }
}

/// `cmdline.txt`, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The `truecold run` line verbatim, and its flags.
    pub invocation_line: String,
    pub invocation: Argv,
    /// The per-sample command verbatim: the `truecold-vmm boot` line, or an engine arm's
    /// engine line.
    pub vmm_line: String,
    /// Its flags when it is a `truecold-vmm boot` line (empty for another engine's argv).
    pub vmm: Argv,
    /// Its program (first word).
    pub program: String,
    /// An engine arm: the engine its `# engine command: <engine>` heading names.
    pub engine: Option<Engine>,
    /// The guest kernel command line, when recorded.
    pub guest_cmdline: Option<String>,
}

/// Writes `cmdline.txt` in the format [`parse_cmdline_txt`] reads: `label` (the contract's),
/// the invocation `as_typed`, the `explicit` `truecold run` line, the VMM command and
/// (Linux) the guest kernel command line. The lines are already shell-quoted.
pub fn format_cmdline_txt(
    label: &str,
    as_typed: &str,
    explicit: &str,
    vmm_command: &str,
    guest_cmdline: Option<&str>,
) -> String {
    let mut s = format!(
        "# {label}\n{TYPED_HEADING}\n{as_typed}\n\
         {INVOCATION_HEADING} (defaults filled in, paths resolved)\n{explicit}\n\
         {VMM_HEADING}, one fresh process per sample (<…>: that sample's values)\n\
         {vmm_command}\n"
    );
    if let Some(c) = guest_cmdline {
        s.push_str(&format!("{GUEST_HEADING} (as the VMM reported it)\n{c}\n"));
    }
    s
}

/// Writes an engines-campaign arm's `cmdline.txt` in the format [`parse_cmdline_txt`] reads:
/// as [`format_cmdline_txt`], with `engine_command` (the argv every sample of `engine` ran,
/// shell-quoted, per-sample values as `<placeholders>`) under `# engine command: <engine>, …`
/// instead of the VMM section, and (Linux) the guest kernel command line the engine was
/// given.
pub fn format_engine_cmdline_txt(
    label: &str,
    as_typed: &str,
    explicit: &str,
    engine: Engine,
    engine_command: &str,
    guest_cmdline: Option<&str>,
) -> String {
    let mut s = format!(
        "# {label}\n{TYPED_HEADING}\n{as_typed}\n\
         {INVOCATION_HEADING} (defaults filled in, paths resolved)\n{explicit}\n\
         {ENGINE_HEADING}{engine}, one fresh process per sample (<…>: that sample's values)\n\
         {engine_command}\n"
    );
    if let Some(c) = guest_cmdline {
        s.push_str(&format!("{GUEST_HEADING} (as given to the engine)\n{c}\n"));
    }
    s
}

/// Splits a line into POSIX-shell words: blanks separate words; `'…'` is literal; `"…"`
/// is literal except `\"`, `\\`, `\$` and `` \` ``; outside quotes `\x` is `x`.
pub fn shell_words(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut it = line.chars();
    while let Some(c) = it.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match it.next()? {
                        '\'' => break,
                        x => cur.push(x),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match it.next()? {
                        '"' => break,
                        '\\' => match it.next()? {
                            x @ ('"' | '\\' | '$' | '`') => cur.push(x),
                            x => {
                                cur.push('\\');
                                cur.push(x);
                            }
                        },
                        x => cur.push(x),
                    }
                }
            }
            '\\' => {
                in_word = true;
                cur.push(it.next()?);
            }
            x => {
                in_word = true;
                cur.push(x);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    Some(out)
}

/// Parses `cmdline.txt`.
pub fn parse_cmdline_txt(bytes: &[u8]) -> Result<Recorded, CmdlineError> {
    let text = std::str::from_utf8(bytes).map_err(|_| CmdlineError::NotUtf8)?;
    let mut invocation: Option<&str> = None;
    let mut vmm: Option<&str> = None;
    let mut guest: Option<&str> = None;
    let mut engine_line: Option<&str> = None;
    let mut engine: Option<Engine> = None;
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        let (name, slot) = if l.starts_with(INVOCATION_HEADING) {
            (INVOCATION_HEADING, &mut invocation)
        } else if let Some(rest) = l.strip_prefix(ENGINE_HEADING) {
            let e = rest.split(',').next().unwrap_or_default();
            engine = Some(Engine::parse(e).map_err(|_| CmdlineError::UnknownEngine(e.into()))?);
            (ENGINE_HEADING, &mut engine_line)
        } else if l.starts_with(VMM_HEADING) {
            (VMM_HEADING, &mut vmm)
        } else if l.starts_with(GUEST_HEADING) {
            (GUEST_HEADING, &mut guest)
        } else {
            continue;
        };
        if slot.is_some() {
            return Err(CmdlineError::DuplicateSection(name));
        }
        match lines.next() {
            Some(v) if !v.starts_with('#') && !v.trim().is_empty() => *slot = Some(v),
            _ => return Err(CmdlineError::EmptySection(name)),
        }
    }
    let invocation_line = invocation.ok_or(CmdlineError::MissingSection(INVOCATION_HEADING))?;
    let (vmm_line, vmm) = match (vmm, engine_line, engine) {
        (Some(_), Some(_), _) => return Err(CmdlineError::TwoCommands),
        (Some(l), None, _) | (None, Some(l), Some(Engine::Truecold)) => (l, parse_vmm(l)?),
        (None, Some(l), Some(_)) => (l, Argv::default()),
        _ => return Err(CmdlineError::MissingSection(VMM_HEADING)),
    };
    let program = shell_words(vmm_line)
        .ok_or(CmdlineError::Quote {
            section: VMM_HEADING,
        })?
        .into_iter()
        .next()
        .unwrap_or_default();
    Ok(Recorded {
        invocation: parse_run(invocation_line)?,
        invocation_line: invocation_line.to_string(),
        vmm,
        vmm_line: vmm_line.to_string(),
        program,
        engine,
        guest_cmdline: guest.map(str::to_string),
    })
}

/// Splits `--flag=value` (and, for `truecold run`, `-nVALUE` / `-n=VALUE`) into the flag
/// and its inline value; `-n` is reported as `--count`.
fn split_inline(w: &str, run: bool) -> (String, Option<String>) {
    if let Some(rest) = w.strip_prefix("--") {
        if let Some((f, v)) = rest.split_once('=') {
            return (format!("--{f}"), Some(v.to_string()));
        }
    } else if let Some(rest) = w.strip_prefix("-n").filter(|_| run) {
        let v = rest.strip_prefix('=').unwrap_or(rest);
        return ("--count".into(), (!rest.is_empty()).then(|| v.to_string()));
    }
    (w.to_string(), None)
}

/// Reads flags. `truecold run` (`run`): every flag must be in `value_flags` or
/// [`RUN_SWITCHES`]. `truecold-vmm boot`: a flag not in `value_flags` takes the next word
/// as its value when that word does not start with `-`, else it is a switch.
fn parse_flags(
    section: &'static str,
    words: &[String],
    value_flags: &[&str],
    run: bool,
) -> Result<Argv, CmdlineError> {
    let mut argv = Argv::default();
    let mut it = words.iter().peekable();
    while let Some(w) = it.next() {
        let (flag, inline) = split_inline(w, run);
        let unknown = || CmdlineError::Unknown {
            section,
            arg: w.clone(),
        };
        if !flag.starts_with("--") {
            return Err(unknown());
        }
        let known_value = value_flags.contains(&flag.as_str());
        let value = match inline {
            Some(v) if known_value || !run => v,
            Some(_) => return Err(unknown()),
            None if known_value => it.next().cloned().ok_or_else(|| CmdlineError::NoValue {
                section,
                flag: flag.clone(),
            })?,
            None if run && !RUN_SWITCHES.contains(&flag.as_str()) => return Err(unknown()),
            None if run => String::new(),
            None => match it.peek() {
                Some(v) if !v.starts_with('-') => it.next().cloned().unwrap_or_default(),
                _ => String::new(),
            },
        };
        if argv.has(&flag) && !(run && RUN_REPEATABLE.contains(&flag.as_str())) {
            return Err(CmdlineError::Repeated { section, flag });
        }
        argv.flags.push((flag, value));
    }
    Ok(argv)
}

fn command_words(
    section: &'static str,
    line: &str,
    sub: &'static str,
    want: &'static str,
) -> Result<Vec<String>, CmdlineError> {
    let words = shell_words(line).ok_or(CmdlineError::Quote { section })?;
    if words.len() < 2 || words[1] != sub {
        return Err(CmdlineError::NotTheCommand { section, want });
    }
    Ok(words[2..].to_vec())
}

/// Parses the `truecold run …` line strictly: every flag must be one of `truecold run`'s.
pub fn parse_run(line: &str) -> Result<Argv, CmdlineError> {
    let s = INVOCATION_HEADING;
    let words = command_words(s, line, "run", "truecold run")?;
    parse_flags(s, &words, RUN_VALUE_FLAGS, true)
}

/// Parses the `truecold-vmm boot …` line (flags it does not know are tolerated).
pub fn parse_vmm(line: &str) -> Result<Argv, CmdlineError> {
    let s = VMM_HEADING;
    let words = command_words(s, line, "boot", "truecold-vmm boot")?;
    parse_flags(s, &words, VMM_VALUE_FLAGS, false)
}

fn num<T: std::str::FromStr>(
    section: &'static str,
    a: &Argv,
    flag: &'static str,
) -> Result<T, CmdlineError> {
    let v = a.get(flag).ok_or(CmdlineError::Missing { section, flag })?;
    v.parse().map_err(|_| CmdlineError::BadValue {
        section,
        flag: flag.to_string(),
        value: v.to_string(),
    })
}

fn word<'a>(
    section: &'static str,
    a: &'a Argv,
    flag: &'static str,
) -> Result<&'a str, CmdlineError> {
    a.get(flag).ok_or(CmdlineError::Missing { section, flag })
}

/// The backing `truecold run`'s words give `engine`'s arm: its `--arm-backing ENGINE=B`, else
/// `--backing` (a recorded line spells one of them out: `truecold run` resolves each engine's
/// default before it writes the line).
fn run_backing(inv: &Argv, engine: Engine) -> Result<&str, CmdlineError> {
    let own = inv
        .all("--arm-backing")
        .filter_map(|v| v.split_once('='))
        .filter(|(e, _)| *e == engine.as_str())
        .map(|(_, b)| b)
        .last();
    match own {
        Some(b) => Ok(b),
        None => word(INVOCATION_HEADING, inv, "--backing"),
    }
}

/// A per-sample placeholder such as `<DEADLINE_MS>`.
fn is_placeholder(v: &str) -> bool {
    v.len() > 2 && v.starts_with('<') && v.ends_with('>')
}

impl Recorded {
    /// The instrument of the attribution launches the `truecold run` line asks for: `None`
    /// when it asks for none (no `--attribution`, or 0); its `--attribution-instrument`, or
    /// [`Instrument::ABSENT`] when the line leaves that out (written while `initcall` was the
    /// default; every line written since names it).
    pub fn attribution_instrument(&self) -> Result<Option<Instrument>, CmdlineError> {
        let s = INVOCATION_HEADING;
        let inv = &self.invocation;
        if inv.get("--attribution").is_none() || num::<u64>(s, inv, "--attribution")? == 0 {
            return Ok(None);
        }
        let flag = "--attribution-instrument";
        inv.get(flag)
            .map(|v| {
                Instrument::parse(v).map_err(|_| CmdlineError::BadValue {
                    section: s,
                    flag: flag.into(),
                    value: v.into(),
                })
            })
            .transpose()
            .map(|i| Some(Instrument::or_absent(i)))
    }

    /// Every way this record and `r` disagree (empty when they agree), or why the
    /// recorded values cannot be read.
    pub fn disagreements(&self, r: &ResultJson) -> Result<Vec<String>, CmdlineError> {
        // Read here so an unreadable instrument is this record's reason; the attribution
        // check holds the launches to it.
        self.attribution_instrument()?;
        let cfg = &r.configuration;
        let mut bad = Vec::new();
        // The configured backing is `name` or `name (obtained: …)`.
        let backing = cfg.backing.split(" (").next().unwrap_or_default();
        let (inv, vmm) = (&self.invocation, &self.vmm);
        let (si, sv) = (INVOCATION_HEADING, VMM_HEADING);
        // Whether the per-sample command is a `truecold-vmm boot` line.
        let truecold_vmm = self.engine.is_none_or(|e| e == Engine::Truecold);
        let mut facts: Vec<(&str, &str, String, String)> = vec![
            (
                "vCPUs",
                "truecold run",
                num::<u32>(si, inv, "--vcpus")?.to_string(),
                cfg.vcpus.to_string(),
            ),
            (
                "memory (MiB)",
                "truecold run",
                num::<u64>(si, inv, "--mem-mib")?.to_string(),
                mib(cfg.mem_bytes),
            ),
            (
                "backing",
                "truecold run",
                run_backing(inv, self.engine.unwrap_or(Engine::Truecold))?.to_string(),
                backing.to_string(),
            ),
            (
                "deadline (ms)",
                "truecold run",
                num::<u64>(si, inv, "--deadline-ms")?.to_string(),
                ms(r.contract.deadline_ns),
            ),
        ];
        if truecold_vmm {
            facts.extend([
                // Absent from both lines: `RamLayout::ABSENT` (lines written before the
                // layouts, and every line since that ran it). The layout is truecold-vmm's: a
                // peer's arm records none whatever the run line says (bundle_verify).
                (
                    "RAM layout",
                    "truecold run",
                    inv.get("--ram-layout")
                        .unwrap_or(RamLayout::ABSENT.as_str())
                        .to_string(),
                    cfg.ram_layout.as_str().to_string(),
                ),
                (
                    "vCPUs",
                    "truecold-vmm",
                    num::<u32>(sv, vmm, "--vcpus")?.to_string(),
                    cfg.vcpus.to_string(),
                ),
                (
                    "memory (MiB)",
                    "truecold-vmm",
                    num::<u64>(sv, vmm, "--mem-mib")?.to_string(),
                    mib(cfg.mem_bytes),
                ),
                (
                    "backing",
                    "truecold-vmm",
                    word(sv, vmm, "--backing")?.to_string(),
                    backing.to_string(),
                ),
                (
                    "RAM layout",
                    "truecold-vmm",
                    vmm.get("--ram-layout")
                        .unwrap_or(RamLayout::ABSENT.as_str())
                        .to_string(),
                    cfg.ram_layout.as_str().to_string(),
                ),
            ]);
            // Absent from a line: `CpuPlatform::ABSENT` (one package, the host's TSC bit).
            let p = cfg.cpu_platform;
            for (who, section, line) in [("truecold run", si, inv), ("truecold-vmm", sv, vmm)] {
                let packages = match line.get("--packages") {
                    Some(_) => num::<u8>(section, line, "--packages")?,
                    None => 1,
                };
                facts.extend([
                    (
                        "CPU packages",
                        who,
                        packages.to_string(),
                        p.packages.to_string(),
                    ),
                    (
                        "invariant TSC stated",
                        who,
                        line.has("--invariant-tsc").to_string(),
                        p.invariant_tsc.to_string(),
                    ),
                ]);
            }
        }
        if let Some(d) = vmm.get("--deadline-ms").filter(|d| !is_placeholder(d)) {
            let d: u64 = d.parse().map_err(|_| CmdlineError::BadValue {
                section: sv,
                flag: "--deadline-ms".into(),
                value: d.into(),
            })?;
            facts.push((
                "deadline (ms)",
                "truecold-vmm",
                d.to_string(),
                ms(r.contract.deadline_ns),
            ));
        }
        if let Some(d) = vmm.get("--deadline-at-ns") {
            // `<origin+N>`: N ns after each sample's latency origin.
            let n = d
                .strip_prefix('<')
                .and_then(|d| d.strip_suffix('>'))
                .and_then(|d| d.rsplit_once('+'))
                .and_then(|(_, n)| n.parse::<u64>().ok())
                .ok_or_else(|| CmdlineError::BadValue {
                    section: sv,
                    flag: "--deadline-at-ns".into(),
                    value: d.into(),
                })?;
            facts.push((
                "deadline (ns after the origin)",
                "truecold-vmm",
                n.to_string(),
                r.contract.deadline_ns.to_string(),
            ));
        }
        for (what, who, said, stored) in facts {
            if said != stored {
                bad.push(format!(
                    "{what}: the recorded `{who}` command says {said}, result.json says {stored}"
                ));
            }
        }
        self.engine_disagreements(r, &mut bad)?;
        // The fail-fast rule (schema 10+): what the command chose is what the contract ran.
        let stop = r.contract.stop_after;
        if inv.has("--keep-going") && stop.is_some() {
            bad.push(
                "the recorded `truecold run` command has `--keep-going`, but \
                 `contract.stop_after` is set"
                    .into(),
            );
        }
        if inv.get("--stop-after").is_some() {
            let k = num::<u64>(si, inv, "--stop-after")?;
            if stop != Some(k) {
                bad.push(format!(
                    "the recorded `truecold run` command has `--stop-after {k}`, \
                     `contract.stop_after` is {}",
                    stop.map_or("absent".to_string(), |s| s.to_string())
                ));
            }
        }
        let kind = r.contract.kind;
        let forced = if inv.has("--probe") {
            Some(ContractKind::Probe)
        } else if inv.has("--linux") || inv.has("--nested") {
            Some(ContractKind::Linux)
        } else {
            None
        };
        if forced.is_some_and(|f| f != kind) {
            bad.push(format!(
                "guest: the recorded `truecold run` command forces a non-`{}` campaign, \
                 result.json is a `{}` bundle",
                kind.as_str(),
                kind.as_str()
            ));
        }
        let vmm_kind = if !truecold_vmm || vmm.has("--kernel") {
            // Every other engine boots a kernel (there is no probe guest but truecold's).
            ContractKind::Linux
        } else {
            ContractKind::Probe
        };
        if vmm_kind != kind {
            bad.push(format!(
                "guest: the recorded VMM command boots {}, result.json is a `{}` bundle",
                if vmm_kind == ContractKind::Linux {
                    "a kernel"
                } else {
                    "the probe guest"
                },
                kind.as_str()
            ));
        }
        let (want, from) = match &self.guest_cmdline {
            Some(g) => (g.as_str(), "guest kernel command line"),
            None => (self.vmm_line.as_str(), "VMM command"),
        };
        if cfg.cmdline != want {
            bad.push(format!(
                "configuration.cmdline is not the recorded {from} (`{}` vs `{want}`)",
                cfg.cmdline
            ));
        }
        Ok(bad)
    }

    /// The engine facts: the section matches the observer, names the configured engine and
    /// runs its binary; the run line names the engine and its binary.
    fn engine_disagreements(
        &self,
        r: &ResultJson,
        bad: &mut Vec<String>,
    ) -> Result<(), CmdlineError> {
        let cfg = &r.configuration;
        let configured = cfg.engine.kind;
        let named = match self.invocation.engines() {
            None => None,
            Some(Ok(v)) => Some(v),
            Some(Err(e)) => {
                return Err(CmdlineError::BadValue {
                    section: INVOCATION_HEADING,
                    flag: "--engine".into(),
                    value: e,
                })
            }
        };
        if named.as_ref().is_some_and(|v| !v.contains(&configured)) {
            bad.push(format!(
                "engine: the recorded `truecold run` command names {:?}, not the configured \
                 `{configured}`",
                named
                    .unwrap_or_default()
                    .iter()
                    .map(|e| e.as_str())
                    .collect::<Vec<_>>()
            ));
        }
        if !r.contract.observer.bench_reads_lines() {
            if let Some(e) = self.engine {
                bad.push(format!(
                    "an `{ENGINE_HEADING}{e}` section in a vm-exit bundle: only engines \
                     campaigns (serial observer) record an engine command"
                ));
            }
            return Ok(());
        }
        match self.engine {
            None => bad.push(format!(
                "a serial-observer bundle records a `{VMM_HEADING}`, not the \
                 `{ENGINE_HEADING}{configured}` it ran"
            )),
            Some(e) if e != configured => bad.push(format!(
                "engine: the recorded engine command is `{e}`'s, result.json's engine is \
                 `{configured}`"
            )),
            Some(_) => {}
        }
        let parity = r.contract.observer == crate::schema::Observer::Agent;
        match (parity, self.invocation.has("--parity")) {
            (true, false) => bad.push(
                "the recorded `truecold run` command of a parity bundle has no `--parity`".into(),
            ),
            (false, true) => bad.push(format!(
                "the recorded `truecold run` command has `--parity`, but the observer is `{}`",
                r.contract.observer.as_str()
            )),
            _ => {}
        }
        // Every engine but truecold-vmm alone under the parity contract is an arm the
        // command names (a parity run without `--engine` runs truecold-vmm only).
        let named_any = self.invocation.has("--engine") || self.invocation.has("--engines");
        if !named_any && (!parity || configured != Engine::Truecold) {
            bad.push(format!(
                "engine: the recorded `truecold run` command names no `--engine`, but the \
                 bundle's engine is `{configured}` under the `{}` observer",
                r.contract.observer.as_str()
            ));
        }
        if named_any != r.contract.interleaved {
            bad.push(format!(
                "the recorded `truecold run` command {} engine arms, but the bundle {} \
                 interleaved",
                if named_any { "names" } else { "names no" },
                if r.contract.interleaved {
                    "is"
                } else {
                    "is not"
                }
            ));
        }
        if self.program != cfg.vmm_path {
            bad.push(format!(
                "the recorded engine command runs `{}`, configuration.vmm_path is `{}`",
                self.program, cfg.vmm_path
            ));
        }
        let flag = binary_flag(configured);
        if let Some(b) = self.invocation.get(flag).filter(|b| *b != cfg.vmm_path) {
            bad.push(format!(
                "the recorded `truecold run` command gives `{flag} {b}`, \
                 configuration.vmm_path is `{}`",
                cfg.vmm_path
            ));
        }
        Ok(())
    }
}

fn mib(bytes: u64) -> String {
    match truecold_proto::limits::GuestMem::from_bytes(bytes) {
        Ok(m) => m.mib().to_string(),
        Err(e) => format!("{bytes} bytes ({e})"),
    }
}

fn ms(ns: u64) -> String {
    if ns % 1_000_000 == 0 {
        (ns / 1_000_000).to_string()
    } else {
        format!("{ns} ns (not whole ms)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_undo_posix_quoting() {
        assert_eq!(
            shell_words("/x/truecold-vmm --cmdline-extra 'quiet a=b c' 'it'\\''s'").unwrap(),
            vec!["/x/truecold-vmm", "--cmdline-extra", "quiet a=b c", "it's"]
        );
        assert_eq!(
            shell_words(r#"a "b \"c\"" d\ e"#).unwrap(),
            vec!["a", "b \"c\"", "d e"]
        );
        assert_eq!(shell_words("a 'b"), None);
        assert_eq!(shell_words("''").unwrap(), vec![""]);
    }

    #[test]
    fn run_flags_parse_in_every_spelling() {
        let a =
            parse_run("truecold run -n5 --vcpus=4 --mem-mib 64 --probe --cmdline-extra --vcpus")
                .unwrap();
        assert_eq!(a.get("--count"), Some("5"));
        assert_eq!(a.get("--vcpus"), Some("4"));
        assert_eq!(a.get("--mem-mib"), Some("64"));
        assert_eq!(a.get("--cmdline-extra"), Some("--vcpus"));
        assert!(a.has("--probe"));
        assert!(matches!(
            parse_run("truecold run --vcpus 2 --vcpus 4"),
            Err(CmdlineError::Repeated { .. })
        ));
        assert!(matches!(
            parse_run("truecold run --frobnicate"),
            Err(CmdlineError::Unknown { .. })
        ));
        assert!(matches!(
            parse_run("truecold run --vcpus"),
            Err(CmdlineError::NoValue { .. })
        ));
        assert!(matches!(
            parse_run("truecold-vmm boot --vcpus 2"),
            Err(CmdlineError::NotTheCommand { .. })
        ));
    }

    /// The run line's attribution instrument: none without attribution launches; the
    /// named one; [`Instrument::ABSENT`] (`initcall`) when a line with launches leaves it out,
    /// as lines written under that default did; an unknown one is the record's error.
    #[test]
    fn a_run_line_without_the_instrument_means_initcall() {
        let rec = |run: &str| {
            let t = format_cmdline_txt(
                "label",
                run,
                run,
                "truecold-vmm boot --probe --vcpus 2 --mem-mib 64 --backing anon",
                None,
            );
            parse_cmdline_txt(t.as_bytes()).unwrap()
        };
        let i = |run: &str| rec(run).attribution_instrument();
        assert_eq!(i("truecold run --probe"), Ok(None));
        assert_eq!(i("truecold run --probe --attribution 0"), Ok(None));
        assert_eq!(
            i("truecold run --probe --attribution 3"),
            Ok(Some(Instrument::Initcall))
        );
        assert_eq!(
            i("truecold run --probe --attribution 3 --attribution-instrument rip"),
            Ok(Some(Instrument::Rip))
        );
        assert_eq!(
            i("truecold run --probe --attribution=3 --attribution-instrument=initcall"),
            Ok(Some(Instrument::Initcall))
        );
        assert!(matches!(
            i("truecold run --probe --attribution 3 --attribution-instrument perf"),
            Err(CmdlineError::BadValue { .. })
        ));
        assert!(matches!(
            i("truecold run --probe --attribution x"),
            Err(CmdlineError::BadValue { .. })
        ));
    }

    #[test]
    fn an_engine_arms_format_round_trips() {
        let t = format_engine_cmdline_txt(
            "label",
            "truecold run --engine firecracker --engine qemu-microvm",
            "truecold run --engine firecracker --engine qemu-microvm --engines truecold \
             --firecracker /fc --seed 7",
            Engine::Firecracker,
            "/fc --no-api --config-file <config_file>",
            Some("console=none"),
        );
        let r = parse_cmdline_txt(t.as_bytes()).unwrap();
        assert_eq!(r.engine, Some(Engine::Firecracker));
        assert_eq!(r.program, "/fc");
        assert_eq!(r.vmm_line, "/fc --no-api --config-file <config_file>");
        assert_eq!(r.vmm, Argv::default());
        assert_eq!(r.guest_cmdline.as_deref(), Some("console=none"));
        assert_eq!(
            r.invocation.engines(),
            Some(Ok(vec![
                Engine::Firecracker,
                Engine::QemuMicrovm,
                Engine::Truecold
            ]))
        );
        assert_eq!(r.invocation.get("--firecracker"), Some("/fc"));
        // The truecold engine's line is a `truecold-vmm boot` line, read as one.
        let t = format_engine_cmdline_txt(
            "label",
            "x",
            "truecold run --engine truecold",
            Engine::Truecold,
            "/v boot --vcpus 2 --transport serial --report-file <report_file>",
            None,
        );
        let r = parse_cmdline_txt(t.as_bytes()).unwrap();
        assert_eq!(r.vmm.get("--vcpus"), Some("2"));
        // Both a VMM and an engine section, or an engine that does not exist.
        let both = format!("{t}{VMM_HEADING}\n/v boot\n");
        assert_eq!(
            parse_cmdline_txt(both.as_bytes()),
            Err(CmdlineError::TwoCommands)
        );
        let bad = t.replace("command: truecold", "command: vmware");
        assert!(matches!(
            parse_cmdline_txt(bad.as_bytes()),
            Err(CmdlineError::UnknownEngine(_))
        ));
        // Only `--engine` repeats.
        assert!(matches!(
            parse_run("truecold run --engines a --engines b"),
            Err(CmdlineError::Repeated { .. })
        ));
        assert_eq!(
            parse_run("truecold run --engines truecold,vmware")
                .unwrap()
                .engines()
                .map(|r| r.is_err()),
            Some(true)
        );
    }

    #[test]
    fn the_format_round_trips() {
        let t = format_cmdline_txt(
            "label",
            "./truecold run --probe",
            "truecold run --probe --vcpus 2",
            "truecold-vmm boot --probe --vcpus 2 --deadline-at-ns <actual_request_ns+5>",
            None,
        );
        let r = parse_cmdline_txt(t.as_bytes()).unwrap();
        assert!(r.invocation.has("--probe"));
        assert_eq!(r.invocation_line, "truecold run --probe --vcpus 2");
        assert_eq!(r.vmm.get("--deadline-at-ns"), Some("<actual_request_ns+5>"));
        assert_eq!(r.guest_cmdline, None);
        let only_typed = format!("{TYPED_HEADING}\ntruecold run\n");
        assert!(matches!(
            parse_cmdline_txt(only_typed.as_bytes()),
            Err(CmdlineError::MissingSection(INVOCATION_HEADING))
        ));
    }
}
