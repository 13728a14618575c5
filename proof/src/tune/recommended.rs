//! `recommended/`: the tune's recommended configuration (every winner) as files a user
//! applies, made from `tune.json` alone ([`recommended_files`]; one definition for the
//! writer, `report` and the verifier, which compares them byte for byte):
//!
//! - `kernel.fragment`: the winners' Kconfig lines, each knob's under a `# <knob>` comment
//!   (merged after `kernel-config/base.config`: `truecold run --kernel-fragment FILE`); only
//!   comment lines when no Kconfig knob won;
//! - `cmdline.txt`: what the winners do to the guest kernel command line, one word a line,
//!   `+WORD` added to truecold's base command line, `-WORD` removed from it, each knob's under
//!   a `# <knob> (<how>)` comment (`--cmdline-extra` for a command-line knob; `--console`
//!   for `console`, which swaps the VMM's base command line for the one with a console);
//! - `vmm-flags.txt`: the `truecold run` / `truecold-vmm boot` flags the winners need, one a
//!   line (`--backing thp`, `--console`, `--bzimage`);
//! - `reproduce.sh`: the `truecold run` that measures the recommended configuration on its
//!   own: the tune's guest (`--probe`, `--linux` or `--nested`), vCPUs, memory, deadline and
//!   kill grace, the confirm phase's rounds, the baseline's backing with the winners applied,
//!   and every winner through its flag.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use truecold_proto::tune::{apply, Change, Knob, VmmChange};

use crate::attribution::Instrument;
use crate::kconfig::{ConfigForm, UserKernel, USER_KERNEL_FILE};
use crate::schema::Backing;
use truecold_proto::rip::SamplePeriod;

/// The directory.
pub const RECOMMENDED_DIR: &str = "recommended";
/// The winners' Kconfig lines.
pub const FRAGMENT_FILE: &str = "kernel.fragment";
/// The winners' command-line words.
pub const CMDLINE_FILE: &str = "cmdline.txt";
/// The winners' VMM flags.
pub const VMM_FLAGS_FILE: &str = "vmm-flags.txt";
/// The `truecold run` that measures the recommended configuration.
pub const REPRODUCE_FILE: &str = "reproduce.sh";
/// Every file of `recommended/`, in the order [`recommended_files`] makes them.
pub const RECOMMENDED_FILES: [&str; 4] =
    [FRAGMENT_FILE, CMDLINE_FILE, VMM_FLAGS_FILE, REPRODUCE_FILE];

/// Where the tune booted its guest: the `truecold run` guest flag that repeats it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunGuest {
    /// The probe guest on this host's /dev/kvm.
    Probe,
    /// Linux on this host's /dev/kvm.
    Linux,
    /// Linux in the nested harness (virtual clock).
    Nested,
}

impl RunGuest {
    /// The `truecold run` flag.
    pub fn flag(self) -> &'static str {
        match self {
            RunGuest::Probe => "--probe",
            RunGuest::Linux => "--linux",
            RunGuest::Nested => "--nested",
        }
    }
}

/// `truecold tune`'s options as resolved (defaults filled in, the guest found) that
/// `tune.json` holds nowhere else.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuneOptions {
    pub guest: RunGuest,
    pub vcpus: u32,
    pub mem_mib: u64,
    /// The baseline's backing.
    pub backing: Backing,
    pub deadline_ms: u64,
    pub kill_grace_ms: u64,
    /// Attribution launches of the last phase's baseline and recommended arms.
    pub attribution: u64,
    /// `--noise-from`, as given.
    pub noise_from: Option<String>,
    /// The user's own kernel (`--kernel-config` / `--kernel-fragment`): the baseline boots
    /// it, each Kconfig knob is its fragment over it; the file as given is
    /// [`USER_KERNEL_FILE`] beside `tune.json`. Absent: truecold's base guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<UserKernel>,
    /// Kconfig knobs of the catalogue left out of the screen because the user's resolved
    /// config already sets every symbol of their fragment (nothing to measure).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub already_set: Vec<Knob>,
    /// The baseline's RAM layout ([`truecold_proto::tune::TUNE_BASELINE_LAYOUT`]), recorded
    /// since truecold-vmm's default became `hole-inside`: `reproduce.sh` then spells the
    /// recommended layout out whatever it is. Absent (a tune written before): the layout is
    /// spelt only off [`truecold_proto::kinds::RamLayout::ABSENT`], as it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram_layout: Option<truecold_proto::kinds::RamLayout>,
    /// How the attribution launches measured the boot (`--attribution-instrument`),
    /// recorded whenever the tune makes them (`attribution` > 0) since `rip` became the
    /// default. Absent: no attribution launches, or a tune written before, whose launches
    /// [`TuneOptions::instrument`] reads as [`Instrument::ABSENT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution_instrument: Option<Instrument>,
    /// With `rip`: the sampling period (`--attribution-sample-us`), recorded with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution_sample_us: Option<SamplePeriod>,
}

impl TuneOptions {
    /// Every way the recorded instrument is not one a tune writes (empty when it is).
    pub fn instrument_problems(&self) -> Vec<String> {
        let mut bad = Vec::new();
        if self.attribution == 0 && self.attribution_instrument.is_some() {
            bad.push(
                "the invocation records an attribution instrument but no attribution launches"
                    .into(),
            );
        }
        match (self.attribution_instrument, self.attribution_sample_us) {
            (Some(Instrument::Rip), None) => bad.push(
                "the invocation records the `rip` instrument without its sampling period".into(),
            ),
            (i, Some(p)) if i != Some(Instrument::Rip) => bad.push(format!(
                "the invocation records a sampling period ({p} µs) without the `rip` instrument"
            )),
            _ => {}
        }
        bad
    }
}

/// How the tune was started (`tune.json` schema 2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Invocation {
    /// `truecold tune`'s argv as typed (the program first).
    pub argv: Vec<String>,
    pub options: TuneOptions,
}

impl Invocation {
    /// The instrument of the tune's attribution launches: `None` when it made none; the one
    /// `options` records; else the one `argv` asked for (a tune written before `options`
    /// carried it, run with `--attribution-instrument`: the argv is what ran); else
    /// [`Instrument::ABSENT`].
    pub fn instrument(&self) -> Option<Instrument> {
        let typed = self
            .options
            .attribution_instrument
            .or_else(|| self.argv_instrument());
        (self.options.attribution > 0).then(|| Instrument::or_absent(typed))
    }

    /// `--attribution-instrument X` (or `=X`) as `argv` gives it, the last one winning as
    /// clap reads it; `None` when absent or unreadable.
    fn argv_instrument(&self) -> Option<Instrument> {
        const FLAG: &str = "--attribution-instrument";
        let mut found = None;
        let mut it = self.argv.iter();
        while let Some(a) = it.next() {
            if a == FLAG {
                found = it.next().and_then(|v| Instrument::parse(v).ok());
            } else if let Some(v) = a.strip_prefix(FLAG).and_then(|r| r.strip_prefix('=')) {
                found = Instrument::parse(v).ok();
            }
        }
        found
    }
}

/// The flag a VMM knob needs (`None` for a command-line or Kconfig knob).
pub fn recommended_flag(k: Knob) -> Option<String> {
    match k.change() {
        Change::Vmm(VmmChange::Backing(b)) => Some(format!("--backing {}", b.as_str())),
        Change::Vmm(VmmChange::Console) => Some("--console".into()),
        Change::Vmm(VmmChange::BzImage) => Some("--bzimage".into()),
        Change::Vmm(VmmChange::RamLayout(l)) => Some(format!("--ram-layout {}", l.as_str())),
        Change::Vmm(VmmChange::PinVcpus) => Some("--pin-vcpus".into()),
        Change::Cmdline(_) | Change::Kconfig(_) => None,
    }
}

fn winners_text(knobs: &[Knob]) -> String {
    if knobs.is_empty() {
        "none: the baseline".into()
    } else {
        knobs
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The Kconfig lines of `knobs` (each Kconfig knob's under a `# <knob>` comment) as
/// `recommended/kernel.fragment` holds them: over truecold's base, or over the user's kernel
/// `own` (the `truecold run` flag and file that apply them named in the header).
pub fn kconfig_fragment(knobs: &[Knob], own: Option<&UserKernel>) -> String {
    let mut s = match own {
        None => String::from(
            "# truecold tune: the winners' Kconfig lines, merged after kernel-config/base.config\n\
             # (truecold run --kernel-fragment FILE)\n",
        ),
        Some(k) => format!(
            "# truecold tune: the winners' Kconfig lines, over your kernel ({USER_KERNEL_FILE},\n\
             # given as {}): appended to that file, the whole is what truecold run {} takes\n\
             # (olddefconfig resolves it); reproduce.sh does exactly that\n",
            k.given_as.replace('\n', " "),
            k.form.flag()
        ),
    };
    let mut any = false;
    for k in knobs {
        if let Change::Kconfig(text) = k.change() {
            let _ = writeln!(s, "# {k}");
            s.push_str(text);
            any = true;
        }
    }
    if !any {
        s.push_str("# none: no Kconfig knob won; the base kernel as it is\n");
    }
    s
}

/// The config file a Kconfig arm over the user's kernel is built from (the `truecold run`
/// flag of `own`'s form takes it): the user's file, a newline, then [`kconfig_fragment`] of
/// the arm's knobs (a later line naming a symbol wins). `reproduce.sh` writes the same bytes
/// for the recommended configuration, so it builds the recommended arm's kernel.
pub fn own_kernel_start(user: &[u8], knobs: &[Knob], own: &UserKernel) -> Vec<u8> {
    let mut v = user.to_vec();
    v.push(b'\n');
    v.extend_from_slice(kconfig_fragment(knobs, Some(own)).as_bytes());
    v
}

/// `s` as one single-quoted shell word.
fn sh_word(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn cmdline(knobs: &[Knob]) -> String {
    let mut s = String::from(
        "# truecold tune: what the winners do to the guest kernel command line, one word a line:\n\
         # +WORD added to truecold's base command line, -WORD removed from it\n",
    );
    let mut any = false;
    for k in knobs {
        let (add, remove) = k.cmdline_delta();
        if add.is_empty() && remove.is_empty() {
            continue;
        }
        let how = match k.change() {
            Change::Cmdline(_) => "truecold run --cmdline-extra",
            Change::Vmm(VmmChange::RamLayout(_)) => {
                "truecold run --ram-layout: the VMM tells the guest its layout"
            }
            _ => "truecold run --console: the VMM's base command line with a console",
        };
        let _ = writeln!(s, "# {k} ({how})");
        for w in add {
            let _ = writeln!(s, "+{w}");
        }
        for w in remove {
            let _ = writeln!(s, "-{w}");
        }
        any = true;
    }
    if !any {
        s.push_str("# none: no winner changes the command line\n");
    }
    s
}

fn vmm_flags(knobs: &[Knob]) -> String {
    let mut s = String::from(
        "# truecold tune: the truecold run / truecold-vmm boot flags the winners need, one a line\n",
    );
    let flags: Vec<String> = knobs.iter().filter_map(|k| recommended_flag(*k)).collect();
    if flags.is_empty() {
        s.push_str("# none: no VMM knob won\n");
    }
    for f in flags {
        s.push_str(&f);
        s.push('\n');
    }
    s
}

/// The `truecold run` argv (after `truecold run`) of the recommended configuration; the
/// fragment, when one is needed, as `"$here/kernel.fragment"` (a shell word).
fn run_words(knobs: &[Knob], o: &TuneOptions, rounds: u64) -> Vec<String> {
    let a = apply(knobs, o.backing);
    let extra = knobs
        .iter()
        .filter_map(|k| match k.change() {
            Change::Cmdline(w) => Some(w),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ");
    let mut v: Vec<String> = vec![o.guest.flag().into()];
    for (f, val) in [
        ("--mode", "sequential".to_string()),
        ("--count", rounds.to_string()),
        ("--vcpus", o.vcpus.to_string()),
        ("--mem-mib", o.mem_mib.to_string()),
        ("--backing", a.backing.as_str().to_string()),
        ("--deadline-ms", o.deadline_ms.to_string()),
        ("--kill-grace-ms", o.kill_grace_ms.to_string()),
    ] {
        v.push(f.into());
        v.push(val);
    }
    if !extra.is_empty() {
        v.push("--cmdline-extra".into());
        // The catalogue's words are plain: no quote in any.
        v.push(format!("'{extra}'"));
    }
    if a.console {
        v.push("--console".into());
    }
    if a.bzimage {
        v.push("--bzimage".into());
    }
    if a.pin_vcpus {
        v.push("--pin-vcpus".into());
    }
    if o.ram_layout.is_some() || !a.ram_layout.is_absent() {
        v.push("--ram-layout".into());
        v.push(a.ram_layout.as_str().into());
    }
    match (&o.kernel, a.fragments.is_empty()) {
        (None, true) => {}
        (None, false) => {
            v.push("--kernel-fragment".into());
            v.push(format!("\"$here/{FRAGMENT_FILE}\""));
        }
        (Some(k), true) => {
            v.push(k.form.flag().into());
            v.push(format!("\"$here/../{USER_KERNEL_FILE}\""));
        }
        (Some(k), false) => {
            v.push(k.form.flag().into());
            v.push("\"$config\"".into());
        }
    }
    if let Some(src) = o.kernel.as_ref().and_then(|k| k.source.as_deref()) {
        v.push("--kernel-source".into());
        v.push(sh_word(src));
    }
    v
}

/// The lines of `reproduce.sh` before its `exec` that write the recommended kernel's config
/// (over the user's kernel, with a Kconfig winner): [`own_kernel_start`]'s bytes.
fn own_kernel_prelude(knobs: &[Knob], o: &TuneOptions) -> String {
    let kconfig = knobs
        .iter()
        .any(|k| matches!(k.change(), Change::Kconfig(_)));
    match &o.kernel {
        Some(k) if kconfig => format!(
            "# your kernel ({}) with the winners' Kconfig lines after it\n\
             config=$(mktemp \"${{TMPDIR:-/tmp}}/truecold-recommended-XXXXXX\")\n\
             {{ cat \"$here/../{USER_KERNEL_FILE}\"; echo; cat \"$here/{FRAGMENT_FILE}\"; }} >\"$config\"\n",
            match k.form {
                ConfigForm::Full => "a complete .config",
                ConfigForm::Fragment => "a fragment over truecold's base",
            }
        ),
        _ => String::new(),
    }
}

fn reproduce(knobs: &[Knob], o: &TuneOptions, rounds: u64) -> String {
    format!(
        "#!/bin/sh\n\
         # truecold tune: measures this tune's recommended configuration ({}) on its own: the\n\
         # tune's guest, vCPUs, memory, deadline and confirm rounds, the baseline's backing with\n\
         # the winners applied, each winner through its flag. Written by truecold-proof from\n\
         # tune.json (truecold-proof verify holds it to that); the bundle goes where truecold\n\
         # run puts one (results/ under the working directory, or add --out DIR).\n\
         set -eu\n\
         here=$(dirname \"$0\")\n\
         {}exec truecold run {} \"$@\"\n",
        winners_text(knobs),
        own_kernel_prelude(knobs, o),
        run_words(knobs, o, rounds).join(" ")
    )
}

/// `recommended/`'s files (`recommended/<file>`, bytes) for the `recommended` knobs
/// (every winner, catalogue order) of a tune started as `inv`, whose confirm phase ran
/// `rounds` rounds.
pub fn recommended_files(knobs: &[Knob], inv: &Invocation, rounds: u64) -> Vec<(String, Vec<u8>)> {
    let o = &inv.options;
    [
        (FRAGMENT_FILE, kconfig_fragment(knobs, o.kernel.as_ref())),
        (CMDLINE_FILE, cmdline(knobs)),
        (VMM_FLAGS_FILE, vmm_flags(knobs)),
        (REPRODUCE_FILE, reproduce(knobs, o, rounds)),
    ]
    .into_iter()
    .map(|(n, t)| (format!("{RECOMMENDED_DIR}/{n}"), t.into_bytes()))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inv(guest: RunGuest) -> Invocation {
        Invocation {
            argv: vec!["truecold".into(), "tune".into(), "--nested".into()],
            options: TuneOptions {
                guest,
                vcpus: 2,
                mem_mib: 1024,
                backing: Backing::Anon,
                deadline_ms: 300_000,
                kill_grace_ms: 500,
                attribution: 0,
                noise_from: None,
                kernel: None,
                already_set: Vec::new(),
                ram_layout: None,
                attribution_instrument: None,
                attribution_sample_us: None,
            },
        }
    }

    /// `tune.json` names the instrument (and `rip`'s period) of a tune's attribution
    /// launches; a tune that records none — written while `initcall` was the default — reads
    /// as `initcall`, and its README's attribution section keeps the words it was written
    /// with; the README of a `rip` tune says what `rip` measured.
    #[test]
    fn a_tune_without_a_recorded_instrument_attributed_with_initcall() {
        use super::super::measure::{Measured, Phase};
        use super::super::readme::attribution_section;
        let mut o = inv(RunGuest::Nested).options;
        o.attribution = 2;
        assert_eq!(with_argv(&o, &[]).instrument(), Some(Instrument::Initcall));
        assert!(o.instrument_problems().is_empty());
        let json = serde_json::to_string(&o).unwrap();
        assert!(!json.contains("attribution_instrument"), "{json}");
        let read: TuneOptions = serde_json::from_str(&json).unwrap();
        assert_eq!(with_argv(&read, &[]).instrument(), Some(Instrument::ABSENT));
        let m = Measured {
            pilot: None,
            screen: Phase {
                verdict: Default::default(),
                arms: None,
                rounds: 0,
                data: Default::default(),
                attributed: [crate::arms::BASELINE_ARM.to_string()].into(),
            },
            confirm: None,
        };
        let old = attribution_section(&m, Some(&with_argv(&o, &[])));
        assert!(
            old.contains("measured rounds with `initcall_debug` (never rows"),
            "{old}"
        );
        assert_eq!(attribution_section(&m, None), old, "a schema-1 tune");
        o.attribution_instrument = Some(Instrument::Initcall);
        assert_eq!(attribution_section(&m, Some(&with_argv(&o, &[]))), old);
        o.attribution_instrument = Some(Instrument::Rip);
        o.attribution_sample_us = Some(SamplePeriod::DEFAULT);
        assert_eq!(with_argv(&o, &[]).instrument(), Some(Instrument::Rip));
        assert!(o.instrument_problems().is_empty());
        let json = serde_json::to_string(&o).unwrap();
        assert!(
            json.contains("\"attribution_instrument\":\"rip\",\"attribution_sample_us\":100"),
            "{json}"
        );
        let rip = attribution_section(&m, Some(&with_argv(&o, &[])));
        assert!(
            rip.contains("sampling each vCPU's RIP every 100 µs"),
            "{rip}"
        );
        assert!(!rip.contains("initcall"), "{rip}");
        // What a tune does not write.
        o.attribution_sample_us = None;
        assert_eq!(o.instrument_problems().len(), 1);
        o.attribution_instrument = Some(Instrument::Initcall);
        o.attribution_sample_us = Some(SamplePeriod::DEFAULT);
        assert_eq!(o.instrument_problems().len(), 1);
        o.attribution = 0;
        assert_eq!(with_argv(&o, &[]).instrument(), None);
        assert_eq!(o.instrument_problems().len(), 2);
    }

    fn with_argv(o: &TuneOptions, argv: &[&str]) -> Invocation {
        Invocation {
            argv: argv.iter().map(|a| a.to_string()).collect(),
            options: o.clone(),
        }
    }

    /// A tune written before `tune.json` recorded the instrument, run with
    /// `--attribution-instrument rip`: its argv is what ran, so it reads as `rip` (its README
    /// says so); without the flag, as `initcall`; what `options` records comes first.
    #[test]
    fn a_tune_recording_no_instrument_reads_the_one_its_argv_asked_for() {
        let mut o = inv(RunGuest::Nested).options;
        o.attribution = 2;
        let t = ["truecold", "tune", "--nested"];
        assert_eq!(with_argv(&o, &t).instrument(), Some(Instrument::Initcall));
        let rip = [
            "truecold",
            "tune",
            "--attribution-instrument",
            "rip",
            "-n",
            "7",
        ];
        assert_eq!(with_argv(&o, &rip).instrument(), Some(Instrument::Rip));
        let eq = ["truecold", "tune", "--attribution-instrument=rip"];
        assert_eq!(with_argv(&o, &eq).instrument(), Some(Instrument::Rip));
        let last = [
            "truecold",
            "tune",
            "--attribution-instrument",
            "rip",
            "--attribution-instrument",
            "initcall",
        ];
        assert_eq!(
            with_argv(&o, &last).instrument(),
            Some(Instrument::Initcall)
        );
        let bad = ["truecold", "tune", "--attribution-instrument", "perf"];
        assert_eq!(with_argv(&o, &bad).instrument(), Some(Instrument::ABSENT));
        o.attribution_instrument = Some(Instrument::Initcall);
        assert_eq!(with_argv(&o, &rip).instrument(), Some(Instrument::Initcall));
        o.attribution = 0;
        o.attribution_instrument = None;
        assert_eq!(with_argv(&o, &rip).instrument(), None);
    }

    fn file(v: &[(String, Vec<u8>)], name: &str) -> String {
        let p = format!("{RECOMMENDED_DIR}/{name}");
        String::from_utf8(v.iter().find(|(n, _)| *n == p).unwrap().1.clone()).unwrap()
    }

    /// A tune that recorded its baseline's layout spells the recommended layout out in
    /// `reproduce.sh` whatever it is (`truecold run`'s default is `hole-inside`); one written
    /// before spells it only off `RamLayout::ABSENT`, byte for byte as it did.
    #[test]
    fn reproduce_spells_the_layout_once_the_tune_recorded_it() {
        let old = inv(RunGuest::Nested);
        let mut new = old.clone();
        new.options.ram_layout = Some(truecold_proto::tune::TUNE_BASELINE_LAYOUT);
        let r = |i: &Invocation, k: &[Knob]| file(&recommended_files(k, i, 10), REPRODUCE_FILE);
        assert!(!r(&old, &[Knob::TscReliable]).contains("--ram-layout"));
        assert!(r(&new, &[Knob::TscReliable]).contains(" --ram-layout around-hole "));
        for i in [&old, &new] {
            assert!(r(i, &[Knob::RamLayoutHoleInside]).contains(" --ram-layout hole-inside "));
        }
        let j = serde_json::to_string(&new.options).unwrap();
        assert!(j.contains("\"ram_layout\":\"around-hole\""), "{j}");
        assert!(!serde_json::to_string(&old.options)
            .unwrap()
            .contains("ram_layout"));
    }

    /// Proposed winners are applied as their names say: the word through `--cmdline-extra`,
    /// the fragment in `kernel.fragment`.
    #[test]
    fn proposed_winners_are_expressed_as_their_change() {
        let knobs = [
            Knob::TscReliable,
            Knob::parse("initcall-blacklist-i8042_init").unwrap(),
            Knob::parse("kconfig-off-SERIO_I8042").unwrap(),
        ];
        let v = recommended_files(&knobs, &inv(RunGuest::Nested), 10);
        let frag = file(&v, FRAGMENT_FILE);
        assert!(
            frag.ends_with("# kconfig-off-SERIO_I8042\n# CONFIG_SERIO_I8042 is not set\n"),
            "{frag}"
        );
        let c = file(&v, CMDLINE_FILE);
        assert!(
            c.contains(
                "# initcall-blacklist-i8042_init (truecold run --cmdline-extra)\n\
                 +initcall_blacklist=i8042_init\n"
            ),
            "{c}"
        );
        let r = file(&v, REPRODUCE_FILE);
        assert!(
            r.contains(
                "--cmdline-extra 'tsc=reliable initcall_blacklist=i8042_init' --kernel-fragment \
                 \"$here/kernel.fragment\""
            ),
            "{r}"
        );
    }

    #[test]
    fn every_kind_of_winner_is_expressed() {
        let knobs = [
            Knob::TscReliable,
            Knob::RcuExpedited,
            Knob::Hz100,
            Knob::BackingThp,
            Knob::Console,
            Knob::BzImage,
        ];
        let v = recommended_files(&knobs, &inv(RunGuest::Nested), 10);
        assert_eq!(
            v.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            RECOMMENDED_FILES.map(|f| format!("{RECOMMENDED_DIR}/{f}"))
        );
        let frag = file(&v, FRAGMENT_FILE);
        assert!(
            frag.ends_with("# hz-100\nCONFIG_HZ_100=y\n# CONFIG_HZ_250 is not set\n"),
            "{frag}"
        );
        let c = file(&v, CMDLINE_FILE);
        assert!(
            c.contains("# tsc-reliable (truecold run --cmdline-extra)\n+tsc=reliable\n"),
            "{c}"
        );
        assert!(
            c.contains("+console=ttyS0\n+8250.nr_uarts=1\n-8250.nr_uarts=0\n-quiet\n"),
            "{c}"
        );
        assert_eq!(
            file(&v, VMM_FLAGS_FILE).lines().skip(1).collect::<Vec<_>>(),
            ["--backing thp", "--console", "--bzimage"]
        );
        let r = file(&v, REPRODUCE_FILE);
        assert!(
            r.contains(
                "exec truecold run --nested --mode sequential --count 10 --vcpus 2 --mem-mib 1024 \
                 --backing thp --deadline-ms 300000 --kill-grace-ms 500 --cmdline-extra \
                 'tsc=reliable rcupdate.rcu_expedited=1' --console --bzimage --kernel-fragment \
                 \"$here/kernel.fragment\" \"$@\"\n"
            ),
            "{r}"
        );
    }

    #[test]
    fn no_winner_is_the_baseline_and_the_backing_is_the_tunes() {
        let mut i = inv(RunGuest::Probe);
        i.options.backing = Backing::Thp;
        let v = recommended_files(&[], &i, 7);
        assert!(file(&v, FRAGMENT_FILE).contains("# none: no Kconfig knob won"));
        assert!(file(&v, CMDLINE_FILE).contains("# none"));
        assert!(file(&v, VMM_FLAGS_FILE).contains("# none"));
        let r = file(&v, REPRODUCE_FILE);
        assert!(r.contains("(none: the baseline)"), "{r}");
        assert!(r.contains("run --probe --mode sequential --count 7 --vcpus 2 --mem-mib 1024 --backing thp --deadline-ms"), "{r}");
        assert!(
            !r.contains("--kernel-fragment") && !r.contains("--cmdline-extra"),
            "{r}"
        );
    }

    /// Over the user's kernel: with no Kconfig winner reproduce.sh boots the file beside
    /// tune.json as given; with one it appends the winners' fragment to it first, the bytes
    /// [`own_kernel_start`] gives the recommended arm; `--kernel-source` repeated, quoted.
    #[test]
    fn over_the_users_kernel_reproduce_builds_the_recommended_arms_kernel() {
        let mut i = inv(RunGuest::Nested);
        let own = UserKernel {
            form: ConfigForm::Full,
            sha256: "00".repeat(32),
            given_as: "fc.config".into(),
            source: Some("/src/linux it's".into()),
            not_carried: Vec::new(),
        };
        i.options.kernel = Some(own.clone());
        let v = recommended_files(&[Knob::TscReliable], &i, 3);
        let r = file(&v, REPRODUCE_FILE);
        assert!(
            r.contains(
                "--cmdline-extra 'tsc=reliable' --kernel-config \"$here/../user-kernel.config\" \
                 --kernel-source '/src/linux it'\\''s' \"$@\"\n"
            ),
            "{r}"
        );
        assert!(!r.contains("mktemp"), "{r}");
        let frag = file(&v, FRAGMENT_FILE);
        assert!(
            frag.contains("over your kernel (user-kernel.config,\n# given as fc.config)"),
            "{frag}"
        );
        let v = recommended_files(&[Knob::Hz100], &i, 3);
        let r = file(&v, REPRODUCE_FILE);
        assert!(
            r.contains(
                "{ cat \"$here/../user-kernel.config\"; echo; cat \"$here/kernel.fragment\"; } >\"$config\"\n"
            ) && r.contains("--kernel-config \"$config\" --kernel-source"),
            "{r}"
        );
        // What the shell writes is what the arm was built from.
        let user = b"CONFIG_64BIT=y\nCONFIG_HZ_250=y";
        let mut shell = user.to_vec();
        shell.push(b'\n');
        shell.extend_from_slice(file(&v, FRAGMENT_FILE).as_bytes());
        assert_eq!(own_kernel_start(user, &[Knob::Hz100], &own), shell);
        // A fragment over the base: the same, through --kernel-fragment.
        i.options.kernel = Some(UserKernel {
            form: ConfigForm::Fragment,
            source: None,
            ..own
        });
        let r = file(&recommended_files(&[Knob::Hz100], &i, 3), REPRODUCE_FILE);
        assert!(r.contains("--kernel-fragment \"$config\" \"$@\""), "{r}");
    }
}
