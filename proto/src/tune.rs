//! The knob catalogue of `truecold tune`: each knob is one typed variant that changes exactly
//! one thing relative to the baseline (today's tuned base: `boot_params::base_cmdline`,
//! `kernel-config/base.config`, truecold-vmm's defaults), with what it changes and where its
//! expected effect comes from. vCPUs and memory are the tune's context, never knobs.
//!
//! One definition: the bench applies a knob through [`Knob::change`], the proof verifier
//! checks an arm's configuration against the same, and the README tables are written from
//! [`Knob::what`] and [`Knob::source`].

use crate::kinds::{Backing, ContractKind, RamLayout};
use serde::{Deserialize, Serialize};

/// The three places a knob acts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KnobClass {
    /// Appended to the guest kernel's command line.
    Cmdline,
    /// One Kconfig fragment merged after `base.config` (a kernel build, cached by content).
    Kconfig,
    /// A truecold-vmm flag.
    Vmm,
}

/// docs/fidelity.md's THP row, in a sentence (the tune README quotes it for a winner).
pub const FIDELITY_THP: &str = "Firecracker PR #6003 measured guest boot −19.3 to −22.8 % on bare metal and −46.7 to −54.5 % in a VM; this clock gave −18.1 % at 1 vCPU / 128 MiB and −25.6 % at 2 vCPU / 2 GiB on Firecracker's guest config: 0.8 to 1.3 times the bare-metal effect";
/// docs/fidelity.md's serial-console row.
pub const FIDELITY_CONSOLE: &str = "Firecracker issue #792 measured the console at +130 % (126 → 290 ms) on bare metal; this clock gave +86.5 % on Firecracker's guest config and +214.9 % on truecold's at 1 vCPU / 128 MiB, and +205.3 % in Firecracker's own arm at 2 vCPU / 256 MiB: 0.67 to 1.65 times the relative effect";
/// docs/fidelity.md's `CONFIG_SMP=n` row.
pub const FIDELITY_NO_SMP: &str = "Ventura (2024) measured −68 to −74 % at 1 vCPU / 128 MiB on Linux 6.7 on bare metal; this clock gave −15.5 % there: 0.21 to 0.23 times, because Linux 6.12 removed most of the rcu_barrier waits the source measured";
/// docs/fidelity.md's bzImage row.
pub const FIDELITY_BZIMAGE: &str = "Garzarella (2019) measured bzImage +65.5 ms to start_kernel under QEMU with KVM; this clock gave +838.4 ms at 1 vCPU / 128 MiB: 12.8 times, decompression being compute (and XZ here)";
/// docs/fidelity.md's `CONFIG_FTRACE=y` row.
pub const FIDELITY_FTRACE: &str = "Yinan Liu (2021) timed ftrace_init at 15.763 ms on hardware, 7.114 ms once its sort and NOPs moved to build time as in Linux 6.12; this clock gave the whole option +109.5 % (+108.3 ms) at 2 vCPU / 1 GiB, of which the ftrace functions 2.25 ms: the rest is the tracing core's event setup and stop_machine, which the source did not time";

impl KnobClass {
    /// Every class, in the table's order.
    pub const ALL: [KnobClass; 3] = [KnobClass::Cmdline, KnobClass::Kconfig, KnobClass::Vmm];

    /// The class named `s` ([`KnobClass::as_str`]).
    pub fn parse(s: &str) -> Option<KnobClass> {
        KnobClass::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The JSON / table name.
    pub fn as_str(self) -> &'static str {
        match self {
            KnobClass::Cmdline => "cmdline",
            KnobClass::Kconfig => "kconfig",
            KnobClass::Vmm => "vmm",
        }
    }
}

/// The kind of cost a knob changes, which decides how its effect on the nested harness's
/// virtual clock reads on hardware (docs/fidelity.md, "What the clock charges").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CostClass {
    /// Sleeps, timers, TSC-bounded busy loops: the same length on both clocks.
    TimedWaits,
    /// Instructions: 1 ns each on the virtual clock, several times faster on hardware.
    Compute,
    /// Host page faults, zeroing, struct pages: about a nested host's price.
    MemoryTouched,
    /// Port I/O and MMIO exits: only L1's handling instructions on the virtual clock.
    VmExits,
    /// Work on several vCPUs at once: added on the total clock, overlapped on the parallel one.
    ParallelWork,
}

impl CostClass {
    /// The table name.
    pub fn as_str(self) -> &'static str {
        match self {
            CostClass::TimedWaits => "timed waits",
            CostClass::Compute => "compute",
            CostClass::MemoryTouched => "memory touched",
            CostClass::VmExits => "VM exits",
            CostClass::ParallelWork => "parallel work",
        }
    }

    /// How a virtual-clock effect of this kind reads on hardware (docs/fidelity.md).
    pub fn reads(self) -> &'static str {
        match self {
            CostClass::TimedWaits => "its real size",
            CostClass::Compute => "the right sign, inflated several times",
            CostClass::MemoryTouched => "the right sign, about a nested host's size",
            CostClass::VmExits => "the right sign, under-priced",
            CostClass::ParallelWork => {
                "as if serial on the total clock; overlapped on the parallel one"
            }
        }
    }
}

/// What a VMM knob sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmmChange {
    /// `--backing <b>` instead of anon.
    Backing(Backing),
    /// `--console`: the guest's 8250 carries the kernel console (every byte a VM exit).
    Console,
    /// Boot the `bzImage` (the 64-bit boot protocol's compressed image) instead of the PVH
    /// entry of `vmlinux`.
    BzImage,
    /// `--ram-layout <l>` instead of the tune baseline's ([`TUNE_BASELINE_LAYOUT`]).
    RamLayout(RamLayout),
    /// `--pin-vcpus`: each vCPU thread on a CPU of its own.
    PinVcpus,
}

/// The one change a knob makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Words appended to the guest command line (after the base, so they win).
    Cmdline(&'static str),
    /// A Kconfig fragment (merged after `base.config`).
    Kconfig(&'static str),
    Vmm(VmmChange),
}

/// Every knob of the catalogue. Its one spelling is [`Knob::as_str`] (the CLI's, the arm
/// directory's, every JSON file's); JSON written before that also reads
/// ([`Knob::parse_legacy`], the one place the old spellings live).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Knob {
    // Command line.
    TscReliable,
    Lpj,
    RcuExpedited,
    MitigationsOff,
    RandomTrustCpu,
    Nokaslr,
    NoKvmclock,
    IdlePoll,
    Nowatchdog,
    NoLegacyPtys,
    DhashEntries,
    IhashEntries,
    ThashEntries,
    UhashEntries,
    KernelHashSizes,
    RodataOff,
    // Kconfig.
    Hz100,
    Hz1000,
    NoDeferredStructPageInit,
    NoPrintk,
    X2apic,
    PreemptVoluntary,
    NoSmp,
    NoCryptoSelftests,
    JumpLabel,
    OptimizeForPerformance,
    FramePointer,
    Ftrace,
    // VMM.
    BackingThp,
    BackingHugetlb,
    Console,
    BzImage,
    RamLayoutHoleInside,
    RamLayoutAbove4g,
    PinVcpus,
    // Proposed from an attribution (`truecold tune --propose`), after the catalogue.
    Proposed(&'static Proposed),
}

/// What a proposed knob ([`Proposed`]) changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProposedKind {
    /// `initcall_blacklist=<fn>` on the command line: the kernel skips the initcall (a kernel
    /// without `CONFIG_KALLSYMS` ignores the word: it matches initcalls by symbol name).
    InitcallBlacklist,
    /// `# CONFIG_<SYMBOL> is not set`: the kernel built without the symbol.
    KconfigOff,
}

impl ProposedKind {
    /// The prefix of its knobs' names; the rest of the name is the target.
    pub fn prefix(self) -> &'static str {
        match self {
            ProposedKind::InitcallBlacklist => "initcall-blacklist-",
            ProposedKind::KconfigOff => "kconfig-off-",
        }
    }
}

/// The longest target (function or Kconfig symbol) a proposed knob names.
pub const MAX_PROPOSED_TARGET: usize = 64;

/// The most distinct proposed knobs one process holds ([`Knob::proposed`] refuses more): each
/// is interned once, for the process's life, so that [`Knob`] stays `Copy`.
pub const MAX_PROPOSED: usize = 4096;

/// A knob that is not in the catalogue: proposed by `truecold tune --propose` from an
/// attribution of the boot. Its name is its kind's prefix and its target (a function, or a
/// Kconfig symbol without `CONFIG_`), and its change follows from the two, so the name alone
/// is the knob (in `--knobs`, arm directories and every JSON file); why it was proposed is
/// recorded beside it (`tune.json`'s `proposals`).
#[derive(Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Proposed {
    pub kind: ProposedKind,
    pub target: String,
    name: String,
    text: String,
    what: String,
}

static PROPOSED: std::sync::Mutex<
    std::collections::BTreeMap<(ProposedKind, String), &'static Proposed>,
> = std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Whether `t` can be a proposed knob's target of `kind`: 1 to [`MAX_PROPOSED_TARGET`] bytes of
/// `[A-Za-z0-9_]` (a C identifier; a Kconfig symbol without its `CONFIG_` prefix).
fn valid_target(kind: ProposedKind, t: &str) -> bool {
    let ident = !t.is_empty()
        && t.len() <= MAX_PROPOSED_TARGET
        && t.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_');
    match kind {
        ProposedKind::InitcallBlacklist => ident && !t.as_bytes()[0].is_ascii_digit(),
        ProposedKind::KconfigOff => ident && !t.starts_with("CONFIG_"),
    }
}

impl Proposed {
    fn new(kind: ProposedKind, target: &str) -> Proposed {
        let (text, what) = match kind {
            ProposedKind::InitcallBlacklist => (
                format!("initcall_blacklist={target}"),
                format!(
                    "the kernel skips the initcall `{target}` (initcall_blacklist={target}; a \
                     kernel without CONFIG_KALLSYMS ignores it): proposed from an attribution, \
                     not in the catalogue"
                ),
            ),
            ProposedKind::KconfigOff => (
                format!("# CONFIG_{target} is not set\n"),
                format!(
                    "the kernel built without CONFIG_{target}: proposed from an attribution, \
                     not in the catalogue"
                ),
            ),
        };
        Proposed {
            kind,
            target: target.to_string(),
            name: format!("{}{target}", kind.prefix()),
            text,
            what,
        }
    }
}

/// The guest a tune boots (the campaign's contract).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TuneGuest {
    /// The embedded probe guest: only memory-backing knobs mean anything.
    Probe,
    /// The Linux guest.
    Linux,
}

impl From<ContractKind> for TuneGuest {
    /// The tune guest a contract boots (what knobs are judged against).
    fn from(kind: ContractKind) -> Self {
        match kind {
            ContractKind::Linux => TuneGuest::Linux,
            ContractKind::Probe => TuneGuest::Probe,
        }
    }
}

impl Knob {
    /// The catalogue, in its documented order.
    pub const ALL: [Knob; 35] = [
        Knob::TscReliable,
        Knob::Lpj,
        Knob::RcuExpedited,
        Knob::MitigationsOff,
        Knob::RandomTrustCpu,
        Knob::Nokaslr,
        Knob::NoKvmclock,
        Knob::IdlePoll,
        Knob::Nowatchdog,
        Knob::NoLegacyPtys,
        Knob::DhashEntries,
        Knob::IhashEntries,
        Knob::ThashEntries,
        Knob::UhashEntries,
        Knob::KernelHashSizes,
        Knob::RodataOff,
        Knob::Hz100,
        Knob::Hz1000,
        Knob::NoDeferredStructPageInit,
        Knob::NoPrintk,
        Knob::X2apic,
        Knob::PreemptVoluntary,
        Knob::NoSmp,
        Knob::NoCryptoSelftests,
        Knob::JumpLabel,
        Knob::OptimizeForPerformance,
        Knob::FramePointer,
        Knob::Ftrace,
        Knob::BackingThp,
        Knob::BackingHugetlb,
        Knob::Console,
        Knob::BzImage,
        Knob::RamLayoutHoleInside,
        Knob::RamLayoutAbove4g,
        Knob::PinVcpus,
    ];

    /// The knob's name (arm directory, `--knobs`, JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            Knob::TscReliable => "tsc-reliable",
            Knob::Lpj => "lpj",
            Knob::RcuExpedited => "rcu-expedited",
            Knob::MitigationsOff => "mitigations-off",
            Knob::RandomTrustCpu => "random-trust-cpu",
            Knob::Nokaslr => "nokaslr",
            Knob::NoKvmclock => "no-kvmclock",
            Knob::IdlePoll => "idle-poll",
            Knob::Nowatchdog => "nowatchdog",
            Knob::NoLegacyPtys => "no-legacy-ptys",
            Knob::DhashEntries => "dhash-entries",
            Knob::IhashEntries => "ihash-entries",
            Knob::ThashEntries => "thash-entries",
            Knob::UhashEntries => "uhash-entries",
            Knob::KernelHashSizes => "kernel-hash-sizes",
            Knob::RodataOff => "rodata-off",
            Knob::Hz100 => "hz-100",
            Knob::Hz1000 => "hz-1000",
            Knob::NoDeferredStructPageInit => "no-deferred-struct-page-init",
            Knob::NoPrintk => "no-printk",
            Knob::X2apic => "x2apic",
            Knob::PreemptVoluntary => "preempt-voluntary",
            Knob::NoSmp => "no-smp",
            Knob::NoCryptoSelftests => "no-crypto-selftests",
            Knob::JumpLabel => "jump-label",
            Knob::OptimizeForPerformance => "cc-optimize-for-performance",
            Knob::FramePointer => "frame-pointer",
            Knob::Ftrace => "ftrace",
            Knob::BackingThp => "backing-thp",
            Knob::BackingHugetlb => "backing-hugetlb",
            Knob::Console => "console",
            Knob::BzImage => "bzimage",
            Knob::RamLayoutHoleInside => "ram-layout-hole-inside",
            Knob::RamLayoutAbove4g => "ram-layout-above-4g",
            Knob::PinVcpus => "pin-vcpus",
            Knob::Proposed(p) => &p.name,
        }
    }

    /// Parses [`Knob::as_str`]: a catalogue knob, or a proposed one ([`Proposed`]).
    pub fn parse(s: &str) -> Option<Knob> {
        Self::ALL
            .iter()
            .copied()
            .find(|k| k.as_str() == s)
            .or_else(|| {
                [ProposedKind::InitcallBlacklist, ProposedKind::KconfigOff]
                    .into_iter()
                    .find_map(|kind| Knob::proposed(kind, s.strip_prefix(kind.prefix())?))
            })
    }

    /// The proposed knob of `kind` on `target` (`None`: not a valid target, or
    /// [`MAX_PROPOSED`] distinct ones already held).
    pub fn proposed(kind: ProposedKind, target: &str) -> Option<Knob> {
        if !valid_target(kind, target) {
            return None;
        }
        // A poisoned lock still holds a consistent map (every insert is one call).
        let mut map = PROPOSED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = map.get(&(kind, target.to_string())) {
            return Some(Knob::Proposed(p));
        }
        if map.len() >= MAX_PROPOSED {
            return None;
        }
        let p: &'static Proposed = Box::leak(Box::new(Proposed::new(kind, target)));
        map.insert((kind, target.to_string()), p);
        Some(Knob::Proposed(p))
    }

    /// The proposal this knob is, when it is not a catalogue knob.
    pub fn as_proposed(self) -> Option<&'static Proposed> {
        match self {
            Knob::Proposed(p) => Some(p),
            _ => None,
        }
    }

    /// The legacy spelling a JSON file may hold where it is not [`Knob::as_str`] (serde's
    /// kebab case of the variant: `hz100`, `hz1000`, `bz-image`); every other knob is
    /// spelt the same in both.
    pub fn legacy_str(self) -> &'static str {
        match self {
            Knob::Hz100 => "hz100",
            Knob::Hz1000 => "hz1000",
            Knob::BzImage => "bz-image",
            k => k.as_str(),
        }
    }

    /// Parses [`Knob::as_str`] or [`Knob::legacy_str`] (what a JSON file may hold).
    pub fn parse_legacy(s: &str) -> Option<Knob> {
        Self::parse(s).or_else(|| Self::ALL.iter().copied().find(|k| k.legacy_str() == s))
    }

    /// The one change.
    pub fn change(self) -> Change {
        use Change::{Cmdline, Kconfig, Vmm};
        match self {
            Knob::TscReliable => Cmdline("tsc=reliable"),
            Knob::Lpj => Cmdline("lpj=4000000"),
            Knob::RcuExpedited => Cmdline("rcupdate.rcu_expedited=1"),
            Knob::MitigationsOff => Cmdline("mitigations=off"),
            Knob::RandomTrustCpu => Cmdline("random.trust_cpu=on"),
            Knob::Nokaslr => Cmdline("nokaslr"),
            Knob::NoKvmclock => Cmdline("no-kvmclock"),
            Knob::IdlePoll => Cmdline("idle=poll"),
            Knob::Nowatchdog => Cmdline("nowatchdog"),
            Knob::NoLegacyPtys => Cmdline("pty.legacy_count=0"),
            // The sizes the kernel itself gives a 1 GiB guest (alloc_large_system_hash, see
            // `what`): a null control at 1 GiB, 1/16 of a 16 GiB guest's tables; above 1 GiB
            // the base command line has them (`boot_cmdline::hash_caps`), so a null control
            // there too, and `kernel-hash-sizes` measures them.
            Knob::DhashEntries => Cmdline(crate::boot_cmdline::DHASH_CAP),
            Knob::IhashEntries => Cmdline(crate::boot_cmdline::IHASH_CAP),
            Knob::ThashEntries => Cmdline(crate::boot_cmdline::THASH_CAP),
            Knob::UhashEntries => Cmdline(crate::boot_cmdline::UHASH_CAP),
            Knob::KernelHashSizes => Cmdline(crate::boot_cmdline::HASH_SIZES_BY_MEMORY),
            Knob::RodataOff => Cmdline("rodata=off"),
            Knob::Hz100 => Kconfig("CONFIG_HZ_100=y\n# CONFIG_HZ_250 is not set\n"),
            Knob::Hz1000 => Kconfig("CONFIG_HZ_1000=y\n# CONFIG_HZ_250 is not set\n"),
            Knob::NoDeferredStructPageInit => {
                Kconfig("# CONFIG_DEFERRED_STRUCT_PAGE_INIT is not set\n")
            }
            Knob::NoPrintk => Kconfig("# CONFIG_PRINTK is not set\n"),
            Knob::X2apic => Kconfig("CONFIG_X86_X2APIC=y\n"),
            Knob::PreemptVoluntary => {
                Kconfig("CONFIG_PREEMPT_VOLUNTARY=y\n# CONFIG_PREEMPT_NONE is not set\n")
            }
            // Kconfig forces NR_CPUS=1 and (a dependency on SMP) no deferred struct-page
            // init without SMP; the fragment states them so the build's check holds.
            Knob::NoSmp => Kconfig(
                "# CONFIG_SMP is not set\nCONFIG_NR_CPUS=1\n# CONFIG_DEFERRED_STRUCT_PAGE_INIT is not set\n",
            ),
            // The switch lives in the crypto menu (`if CRYPTO`): without the menu the
            // library's self-tests run however it defaults, so the fragment opens the menu for
            // it. `base.config` has both lines (a null control there).
            Knob::NoCryptoSelftests => {
                Kconfig("CONFIG_CRYPTO=y\nCONFIG_CRYPTO_MANAGER_DISABLE_TESTS=y\n")
            }
            Knob::JumpLabel => Kconfig("CONFIG_JUMP_LABEL=y\n"),
            Knob::OptimizeForPerformance => Kconfig(
                "CONFIG_CC_OPTIMIZE_FOR_PERFORMANCE=y\n# CONFIG_CC_OPTIMIZE_FOR_SIZE is not set\n",
            ),
            // x86's frame-pointer unwinder selects FRAME_POINTER (and ARCH_WANT_FRAME_POINTERS);
            // the base's unwinder (tinyconfig's choice, the guess unwinder) is unset for it.
            Knob::FramePointer => Kconfig(
                "CONFIG_UNWINDER_FRAME_POINTER=y\n# CONFIG_UNWINDER_GUESS is not set\nCONFIG_FRAME_POINTER=y\n",
            ),
            // The function tracer, patched at run time (DYNAMIC_FTRACE, its default); it
            // selects KALLSYMS and the tracing core, which the fragment states so the build's
            // check holds.
            Knob::Ftrace => Kconfig(
                "CONFIG_FTRACE=y\nCONFIG_FUNCTION_TRACER=y\nCONFIG_DYNAMIC_FTRACE=y\nCONFIG_KALLSYMS=y\n",
            ),
            Knob::BackingThp => Vmm(VmmChange::Backing(Backing::Thp)),
            Knob::BackingHugetlb => Vmm(VmmChange::Backing(Backing::Hugetlb)),
            Knob::Console => Vmm(VmmChange::Console),
            Knob::BzImage => Vmm(VmmChange::BzImage),
            Knob::RamLayoutHoleInside => Vmm(VmmChange::RamLayout(RamLayout::HoleInside)),
            Knob::RamLayoutAbove4g => Vmm(VmmChange::RamLayout(RamLayout::Above4g)),
            Knob::PinVcpus => Vmm(VmmChange::PinVcpus),
            Knob::Proposed(p) => match p.kind {
                ProposedKind::InitcallBlacklist => Cmdline(&p.text),
                ProposedKind::KconfigOff => Kconfig(&p.text),
            },
        }
    }

    /// Where it acts.
    pub fn class(self) -> KnobClass {
        match self.change() {
            Change::Cmdline(_) => KnobClass::Cmdline,
            Change::Kconfig(_) => KnobClass::Kconfig,
            Change::Vmm(_) => KnobClass::Vmm,
        }
    }

    /// Whether the knob means anything for `guest` (the probe guest has no kernel: only the
    /// memory backing and where its vCPU threads run change its boot).
    pub fn applies_to(self, guest: TuneGuest) -> bool {
        match guest {
            TuneGuest::Linux => true,
            TuneGuest::Probe => matches!(
                self.change(),
                Change::Vmm(VmmChange::Backing(_) | VmmChange::PinVcpus)
            ),
        }
    }

    /// What the knob changes, in a sentence.
    pub fn what(self) -> &'static str {
        match self {
            Knob::TscReliable => "marks the TSC reliable: no clocksource watchdog, no TSC sync checks",
            Knob::Lpj => "presets loops_per_jiffy (4000000), skipping the delay-loop calibration",
            Knob::RcuExpedited => "every RCU grace period is expedited (IPIs instead of waiting for ticks)",
            Knob::MitigationsOff => "turns off the CPU vulnerability mitigations the kernel would patch in at boot",
            Knob::RandomTrustCpu => "credits RDRAND/RDSEED when seeding the kernel's RNG",
            Knob::Nokaslr => "disables kernel address randomisation (the base kernel is not RELOCATABLE: a null control)",
            Knob::NoKvmclock => "the guest ignores the kvm-clock paravirtual clocksource",
            Knob::IdlePoll => "idle vCPUs poll instead of HLT (no HLT exits; burns the host CPU)",
            Knob::Nowatchdog => "disables the lockup detectors (the base has none built: a null control)",
            Knob::DhashEntries => "the dentry-cache hash at 131072 buckets (1 MiB, the size the kernel gives a 1 GiB guest) instead of one per 8 KiB of RAM: 2097152 (16 MiB, zeroed at boot) for a 16 GiB guest",
            Knob::IhashEntries => "the inode-cache hash at 65536 buckets (512 KiB, the size the kernel gives a 1 GiB guest) instead of one per 16 KiB of RAM: 1048576 (8 MiB, zeroed at boot) for a 16 GiB guest",
            Knob::ThashEntries => "the TCP established hash at 8192 buckets (the size the kernel gives a 1 GiB guest) instead of one per 128 KiB of RAM: 131072 for a 16 GiB guest (the bind and listen tables follow it)",
            Knob::UhashEntries => "the UDP hash at 512 slots (the size the kernel gives a 1 GiB guest) instead of one per 2 MiB of RAM: 8192 for a 16 GiB guest",
            Knob::KernelHashSizes => "the four boot hash tables (dentry, inode, TCP, UDP) sized by the kernel from the guest's memory (`=0`: its own rule) instead of the base command line's 1 GiB caps, which it has above 1 GiB of guest memory since 2026-12-05 (a null control at 1 GiB and below, where the base has none)",
            Knob::RodataOff => "leaves the kernel's read-only data and text writable (no mark_rodata_ro: no page-attribute changes at the end of boot); SECURITY TRADE-OFF: never adopted as a default, whatever it measures",
            Knob::NoLegacyPtys => "registers no BSD legacy PTYs (LEGACY_PTYS makes pty_init register 256 pairs: 512 devices, each waking kdevtmpfs); measured faster, so the base command line has had it since 2026-12-01: a null control against today's base",
            Knob::Hz100 => "timer tick 100 Hz instead of 250 Hz",
            Knob::Hz1000 => "timer tick 1000 Hz instead of 250 Hz",
            Knob::NoDeferredStructPageInit => "initialises every struct page before init instead of in parallel kthreads",
            Knob::NoPrintk => "compiles printk out (no kernel log at all)",
            Knob::X2apic => "builds x2APIC support (MSR-based APIC access when the vCPU offers it)",
            Knob::PreemptVoluntary => "voluntary kernel preemption instead of none",
            Knob::NoSmp => "a uniprocessor kernel (NR_CPUS=1, and so no deferred struct-page init; one CPU whatever the VM has: breaks strict-ready with 2 vCPUs)",
            Knob::NoCryptoSelftests => "skips the crypto library's boot self-tests (in the base kernel only BLAKE2s's, which the RNG needs: `blake2s_mod_init` took 5.6 ms of a 2 vCPU / 16 GiB nested boot) by building the crypto menu with CRYPTO_MANAGER_DISABLE_TESTS, its default; measured faster at 2 vCPU / 1 and 16 GiB, so `base.config` has had it since 2026-12-05: a null control against today's base",
            Knob::JumpLabel => "static keys as patched jumps (JUMP_LABEL) instead of tinyconfig's memory read, test and branch at every `static_branch_*` site: the page allocator reads one for every page of every block it frees at boot (4 Mi pages at 16 GiB); the kernel patches its sites once at boot; measured faster at 2 vCPU / 16 GiB and no effect at 1 GiB, so `base.config` has had it since 2026-12-05: a null control against today's base",
            Knob::OptimizeForPerformance => "the kernel compiled with -O2 (CC_OPTIMIZE_FOR_PERFORMANCE, the kernel's default and Firecracker's guest configs') instead of tinyconfig's -Os: small functions inlined, among them the ones the boot's per-page loops call for every struct page (`__init_single_page`, `is_check_pages_enabled`); a larger text for the VMM to load; measured faster at 2 vCPU / 1 and 16 GiB, so `base.config` has had it since 2026-12-05: a null control against today's base",
            Knob::FramePointer => "the kernel compiled with frame pointers (UNWINDER_FRAME_POINTER, which selects FRAME_POINTER) instead of the base's guess unwinder without them: every non-leaf function keeps its caller's frame pointer (a push, a mov and a pop more per call, RBP no longer a free register), which is what the RIP sampler's call stacks walk (`--sample-stacks`, docs/attribution.md): the knob's boot cost is the price of the attribution's call stacks",
            Knob::Ftrace => "the function tracer built in (FTRACE, FUNCTION_TRACER, DYNAMIC_FTRACE, with the KALLSYMS and the tracing core they select), as distribution kernels have it: a 5-byte NOP at every function's entry, and at boot `ftrace_init` allocating and walking one record per traceable function (on x86 in Linux 6.12 the records' sort and the NOPs are made at build time: HAVE_BUILDTIME_MCOUNT_SORT, HAVE_OBJTOOL_NOP_MCOUNT) and the tracing core's init; a slower knob, measured for the fidelity study",
            Knob::BackingThp => "guest memory on anonymous memory with MADV_HUGEPAGE (THP)",
            Knob::BackingHugetlb => "guest memory on 2 MiB hugetlbfs pages (MAP_HUGETLB)",
            Knob::Console => "the kernel console on the 8250 (console=ttyS0; every byte a VM exit)",
            Knob::BzImage => "boots bzImage through the 64-bit boot protocol (decompression in the guest) instead of vmlinux's PVH entry",
            Knob::RamLayoutHoleInside => "truecold-vmm's --ram-layout hole-inside: RAM ends at the configured size (the 640 KiB – 1 MiB hole declared E820 reserved, counted in it) instead of 384 KiB past it in a fresh 128 MiB memory section",
            Knob::RamLayoutAbove4g => "truecold-vmm's --ram-layout above-4g: as hole-inside, but RAM below 4 GiB ends at 256 MiB and the rest starts at 4 GiB, so the struct pages Linux initialises on the boot CPU before SMP (the DMA32 zone: all RAM below 4 GiB) are 256 MiB's instead of 3 GiB's, the rest initialised in parallel (deferred struct-page init)",
            Knob::Proposed(p) => &p.what,
            Knob::PinVcpus => "truecold-vmm's --pin-vcpus: vCPU i's thread pinned to the i-th CPU the VMM may run on (one CPU per vCPU; refused with fewer), instead of wherever the host's scheduler wakes it; a campaign of truecold alone (no peer engine pins the same way)",
        }
    }

    /// The kind of cost it changes (docs/fidelity.md).
    pub fn cost_class(self) -> CostClass {
        use CostClass::*;
        match self {
            Knob::TscReliable
            | Knob::Lpj
            | Knob::RcuExpedited
            | Knob::NoKvmclock
            | Knob::Hz100
            | Knob::Hz1000
            | Knob::NoSmp => TimedWaits,
            Knob::MitigationsOff
            | Knob::RandomTrustCpu
            | Knob::Nokaslr
            | Knob::Nowatchdog
            | Knob::NoLegacyPtys
            | Knob::RodataOff
            | Knob::NoPrintk
            | Knob::PreemptVoluntary
            | Knob::NoCryptoSelftests
            | Knob::JumpLabel
            | Knob::OptimizeForPerformance
            | Knob::FramePointer
            | Knob::Ftrace
            | Knob::BzImage => Compute,
            // Whatever the initcall or the driver does at boot; most of it is compute.
            Knob::Proposed(_) => Compute,
            Knob::DhashEntries
            | Knob::IhashEntries
            | Knob::ThashEntries
            | Knob::UhashEntries
            | Knob::KernelHashSizes
            | Knob::BackingThp
            | Knob::BackingHugetlb
            | Knob::RamLayoutHoleInside
            | Knob::RamLayoutAbove4g => MemoryTouched,
            Knob::IdlePoll | Knob::X2apic | Knob::Console => VmExits,
            Knob::NoDeferredStructPageInit | Knob::PinVcpus => ParallelWork,
        }
    }

    /// The row of docs/fidelity.md that held this lever against a published hardware
    /// measurement, in a sentence; `None` for a knob no published figure covers.
    pub fn fidelity(self) -> Option<&'static str> {
        match self {
            Knob::BackingThp => Some(FIDELITY_THP),
            Knob::Console => Some(FIDELITY_CONSOLE),
            Knob::NoSmp => Some(FIDELITY_NO_SMP),
            Knob::BzImage => Some(FIDELITY_BZIMAGE),
            Knob::Ftrace => Some(FIDELITY_FTRACE),
            _ => None,
        }
    }

    /// Where its expected effect comes from.
    pub fn source(self) -> &'static str {
        match self {
            Knob::TscReliable
            | Knob::Lpj
            | Knob::RcuExpedited
            | Knob::MitigationsOff
            | Knob::RandomTrustCpu
            | Knob::Nokaslr
            | Knob::NoKvmclock
            | Knob::IdlePoll
            | Knob::Nowatchdog => "Documentation/admin-guide/kernel-parameters.txt (Linux 6.12)",
            Knob::DhashEntries | Knob::IhashEntries => "Documentation/admin-guide/kernel-parameters.txt (Linux 6.12); fs/dcache.c, fs/inode.c and mm/mm_init.c (alloc_large_system_hash: scale 13 and 14, memblock-allocated and zeroed at boot); issue 25 (memory-proportional boot work at 16 GiB)",
            Knob::ThashEntries | Knob::UhashEntries => "Documentation/admin-guide/kernel-parameters.txt (Linux 6.12); net/ipv4/tcp.c (scale 17), net/ipv4/udp.c (scale 21); issue 25 (memory-proportional boot work at 16 GiB)",
            Knob::KernelHashSizes => "fs/dcache.c, fs/inode.c, net/ipv4/tcp.c, net/ipv4/udp.c (Linux 6.12: a zero count leaves the size to alloc_large_system_hash in mm/mm_init.c); the caps it undoes: results/20261204T2031Z-tune-nested-linux-2vcpu-16384mib-thp-hash-knobs",
            Knob::RodataOff => "Documentation/admin-guide/kernel-parameters.txt (Linux 6.12); init/main.c (rodata=, mark_readonly); arch/Kconfig (STRICT_KERNEL_RWX, always on x86); issue 25",
            Knob::NoLegacyPtys => "drivers/tty/pty.c (module parameter legacy_count, LEGACY_PTY_COUNT); measured: pty_init 21–46 ms of a 2-vCPU nested boot (docs/virtual-clock.md)",
            Knob::Hz100 | Knob::Hz1000 => "kernel/Kconfig.hz",
            Knob::NoDeferredStructPageInit => "mm/Kconfig (DEFERRED_STRUCT_PAGE_INIT); the 384 KiB section lead in README",
            Knob::NoPrintk => "init/Kconfig (PRINTK)",
            Knob::X2apic => "arch/x86/Kconfig (X86_X2APIC)",
            Knob::PreemptVoluntary => "kernel/Kconfig.preempt",
            Knob::NoSmp => "arch/x86/Kconfig (SMP)",
            Knob::NoCryptoSelftests => "crypto/Kconfig (CRYPTO_MANAGER_DISABLE_TESTS, default y inside `if CRYPTO`); lib/crypto/blake2s.c, chacha20poly1305.c, curve25519.c (the self-test in each module_init unless it is set); measured: docs/virtual-clock.md finding 9",
            Knob::JumpLabel => "arch/Kconfig (JUMP_LABEL), include/linux/jump_label.h; mm/page_alloc.c (free_pages_prepare: `is_check_pages_enabled()` for every tail page); Firecracker's microvm-kernel-ci-x86_64-6.1.config has it; measured: docs/virtual-clock.md finding 11",
            Knob::OptimizeForPerformance => "init/Kconfig (CC_OPTIMIZE_FOR_PERFORMANCE, the default; kernel/configs/tiny.config selects CC_OPTIMIZE_FOR_SIZE); Firecracker's microvm-kernel-ci-x86_64-6.1.config has -O2; measured: docs/virtual-clock.md finding 11",
            Knob::FramePointer => "arch/x86/Kconfig.debug (UNWINDER_FRAME_POINTER selects FRAME_POINTER), lib/Kconfig.debug (FRAME_POINTER), arch/x86/include/asm/frame.h (ENCODE_FRAME_POINTER: an entry's frame); docs/attribution.md (call stacks)",
            Knob::Ftrace => "kernel/trace/Kconfig (FTRACE, FUNCTION_TRACER, DYNAMIC_FTRACE), kernel/trace/ftrace.c (ftrace_init, ftrace_process_locs); Yinan Liu, \"ftrace: improve ftrace during compiling\", LKML, 2021-09-11 (ftrace_init 15.763 ms at boot, 8.352 ms with the sort at build time, 7.114 ms with the NOPs too)",
            Knob::BackingThp | Knob::BackingHugetlb => {
                "Documentation/admin-guide/mm/transhuge.rst, hugetlbpage.rst: fewer page faults and TLB misses"
            }
            Knob::Console => "Firecracker docs/prod-host-setup.md: a serial console slows boot",
            Knob::BzImage => "Documentation/arch/x86/boot.rst; arch/x86/platform/pvh",
            Knob::RamLayoutHoleInside => "issue 25 (RAM layout): 32,672 struct pages initialised as unavailable in the partly used section; −25.7 ms at 2 vCPU / 1 GiB when tried; the layout Firecracker and Cloud Hypervisor use",
            Knob::RamLayoutAbove4g => "mm/mm_init.c (Linux 6.12): defer_init() always initialises the low zones in full and defers only the highest zone's pages, which deferred_init_memmap spreads over the node's CPUs; measured: 2 vCPU / 16 GiB THP p50 338.2 → 329.9 ms with the gap at 1 GiB, 328.1 ms at 256 MiB (n = 6 each, 2026-12-05)",
            Knob::Proposed(p) => match p.kind {
                ProposedKind::InitcallBlacklist => "init/main.c (initcall_blacklist=, Linux 6.12: matched by symbol name, so only with CONFIG_KALLSYMS); proposed from an attribution of this boot: tune.json's `proposals` names the row and its cost",
                ProposedKind::KconfigOff => "the Makefile line that builds the function's file (`obj-$(CONFIG_…)`); proposed from an attribution of this boot: tune.json's `proposals` names the row and its cost",
            },
            Knob::PinVcpus => "sched_setaffinity(2); Firecracker docs/prod-host-setup.md (pinning a microVM's threads to dedicated cores); measured: docs/virtual-clock.md finding 12 (a 2-vCPU guest's second boot mode in the nested harness, a vCPU thread waiting behind another on one L1 CPU)",
        }
    }

    /// The trade-off that keeps a knob out of truecold's defaults whatever it measures
    /// (`None`: none; such a knob may still be recommended by a tune, for a user to weigh).
    pub fn trade_off(self) -> Option<&'static str> {
        match self {
            Knob::RodataOff => Some(
                "security: the kernel's text and read-only data stay writable (no \
                 STRICT_KERNEL_RWX protection)",
            ),
            Knob::IdlePoll => Some(
                "host CPU: an idle vCPU spins instead of halting, a host core busy for as long \
                 as the guest idles, a cost no boot-time figure shows",
            ),
            _ => None,
        }
    }

    /// What the knob does to the guest kernel command line truecold-vmm builds: the words
    /// it adds and the words it removes, each in order. A command-line knob adds its words;
    /// `console` swaps the VMM's base command line for the one with a console
    /// ([`crate::boot_cmdline::base_cmdline`]: the words only one of the two has); every
    /// other knob leaves the command line alone.
    pub fn cmdline_delta(self) -> (Vec<&'static str>, Vec<&'static str>) {
        use crate::boot_cmdline::{base_cmdline, SerialUse};
        match self.change() {
            Change::Cmdline(w) => (w.split_whitespace().collect(), Vec::new()),
            Change::Vmm(VmmChange::Console) => {
                let off: Vec<&'static str> =
                    base_cmdline(SerialUse::Off).split_whitespace().collect();
                let on: Vec<&'static str> = base_cmdline(SerialUse::Console)
                    .split_whitespace()
                    .collect();
                (
                    on.iter().copied().filter(|w| !off.contains(w)).collect(),
                    off.iter().copied().filter(|w| !on.contains(w)).collect(),
                )
            }
            // truecold-vmm tells the guest its layout (`boot_cmdline::ram_layout_key`).
            Change::Vmm(VmmChange::RamLayout(l)) => (
                crate::boot_cmdline::ram_layout_word(l)
                    .into_iter()
                    .collect(),
                Vec::new(),
            ),
            Change::Kconfig(_) | Change::Vmm(_) => (Vec::new(), Vec::new()),
        }
    }

    /// The Kconfig fragment's file name in the kernel cache key and in bundles
    /// (`tune-<knob>.config`), for Kconfig knobs.
    pub fn fragment_name(self) -> Option<String> {
        matches!(self.change(), Change::Kconfig(_))
            .then(|| format!("tune-{}.config", self.as_str()))
    }
}

thread_local! {
    static LEGACY_SPELLING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with knobs serialised in [`Knob::legacy_str`]: how a verifier re-derives the
/// canonical bytes of a file written in the legacy spelling ([`is_canonical_either`]). Writers never call it.
pub fn with_legacy_spelling<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            LEGACY_SPELLING.with(|c| c.set(self.0));
        }
    }
    let _reset = Reset(LEGACY_SPELLING.with(|c| c.replace(true)));
    f()
}

/// Whether `bytes` are what `write` gives, with knobs in [`Knob::as_str`]'s spelling or in
/// [`Knob::legacy_str`]'s.
pub fn is_canonical_either(bytes: &[u8], write: impl Fn() -> Vec<u8>) -> bool {
    write() == bytes || with_legacy_spelling(&write) == bytes
}

impl Serialize for Knob {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if LEGACY_SPELLING.with(std::cell::Cell::get) {
            s.serialize_str(self.legacy_str())
        } else {
            s.serialize_str(self.as_str())
        }
    }
}

impl<'de> Deserialize<'de> for Knob {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Knob::parse_legacy(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown knob `{s}` (see `truecold tune --list-knobs`)"
            ))
        })
    }
}

impl std::fmt::Display for Knob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a set of knobs cannot be one arm.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KnobSetError {
    #[error("`{0}` is not a knob (see `truecold tune --list-knobs`)")]
    Unknown(String),
    #[error("knob `{0}` is given twice")]
    Twice(Knob),
    #[error("knobs `{0}` and `{1}` change the same thing")]
    Conflict(Knob, Knob),
    #[error("knob `{0}` does not apply to this guest")]
    NotForGuest(Knob),
}

/// Two knobs that set the same thing (both backings, both HZ values) cannot be combined.
pub fn conflicts(a: Knob, b: Knob) -> bool {
    use Knob::{
        BackingHugetlb, BackingThp, DhashEntries, Hz100, Hz1000, IhashEntries, KernelHashSizes,
        RamLayoutAbove4g, RamLayoutHoleInside, ThashEntries, UhashEntries,
    };
    let one_way = |a, b| {
        matches!(
            (a, b),
            (BackingThp, BackingHugetlb)
                | (Hz100, Hz1000)
                | (RamLayoutHoleInside, RamLayoutAbove4g)
                | (
                    KernelHashSizes,
                    DhashEntries | IhashEntries | ThashEntries | UhashEntries
                )
        )
    };
    one_way(a, b) || one_way(b, a)
}

/// Parses a comma-separated `--knobs` list into knobs in catalogue order, checked: each known,
/// once, no two conflicting, each applying to `guest`.
pub fn parse_knobs(list: &str, guest: TuneGuest) -> Result<Vec<Knob>, KnobSetError> {
    let mut v: Vec<Knob> = Vec::new();
    for w in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let k = Knob::parse(w).ok_or_else(|| KnobSetError::Unknown(w.to_string()))?;
        if v.contains(&k) {
            return Err(KnobSetError::Twice(k));
        }
        if !k.applies_to(guest) {
            return Err(KnobSetError::NotForGuest(k));
        }
        v.push(k);
    }
    v.sort();
    Ok(v)
}

/// A combination of knobs that can run as one arm: every knob applies, no conflicts.
pub fn check_set(knobs: &[Knob], guest: TuneGuest) -> Result<(), KnobSetError> {
    for (i, a) in knobs.iter().enumerate() {
        if !a.applies_to(guest) {
            return Err(KnobSetError::NotForGuest(*a));
        }
        for b in &knobs[i + 1..] {
            if a == b {
                return Err(KnobSetError::Twice(*a));
            }
            if conflicts(*a, *b) {
                return Err(KnobSetError::Conflict(*a, *b));
            }
        }
    }
    Ok(())
}

/// What an arm made of `knobs` runs: the command line words (in catalogue order), the Kconfig
/// fragments (name, text), the backing, console and image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub cmdline_extra: String,
    pub fragments: Vec<(String, &'static str)>,
    pub backing: Backing,
    pub console: bool,
    pub bzimage: bool,
    pub ram_layout: RamLayout,
    pub pin_vcpus: bool,
}

/// The RAM layout of a tune's baseline: `around-hole` ([`Knob::RamLayoutHoleInside`] changes
/// it), the layout of every tune written before the default became `hole-inside`.
pub const TUNE_BASELINE_LAYOUT: RamLayout = RamLayout::AroundHole;

/// Applies `knobs` (already checked with [`check_set`]) to the baseline (`backing`, no console,
/// PVH vmlinux, no extra command line).
pub fn apply(knobs: &[Knob], backing: Backing) -> Applied {
    let mut sorted = knobs.to_vec();
    sorted.sort();
    let mut a = Applied {
        cmdline_extra: String::new(),
        fragments: Vec::new(),
        backing,
        console: false,
        bzimage: false,
        // The tune's baseline lays RAM around the hole, although truecold-vmm's default is
        // `hole-inside` (as its backing stays anon against run's THP): the layout knob
        // measures `hole-inside` against it.
        ram_layout: TUNE_BASELINE_LAYOUT,
        pin_vcpus: false,
    };
    for k in sorted {
        match k.change() {
            Change::Cmdline(w) => {
                if !a.cmdline_extra.is_empty() {
                    a.cmdline_extra.push(' ');
                }
                a.cmdline_extra.push_str(w);
            }
            Change::Kconfig(text) => {
                if let Some(name) = k.fragment_name() {
                    a.fragments.push((name, text));
                }
            }
            Change::Vmm(VmmChange::Backing(b)) => a.backing = b,
            Change::Vmm(VmmChange::Console) => a.console = true,
            Change::Vmm(VmmChange::BzImage) => a.bzimage = true,
            Change::Vmm(VmmChange::RamLayout(l)) => a.ram_layout = l,
            Change::Vmm(VmmChange::PinVcpus) => a.pin_vcpus = true,
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_fidelity_sentence_quotes_figures_of_the_fidelity_table() {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/fidelity.md"),
        )
        .unwrap();
        let mut quoted = 0;
        for k in Knob::ALL {
            let Some(text) = k.fidelity() else { continue };
            // Every signed figure of the sentence is in the table it summarises.
            for w in text.split([' ', ';', ':', ',']) {
                if w.starts_with(['−', '+']) && w.chars().nth(1).is_some_and(|c| c.is_ascii_digit())
                {
                    assert!(doc.contains(w), "{k}: {w} is not in docs/fidelity.md");
                    quoted += 1;
                }
            }
            assert!(k.cost_class().reads().len() > 10);
        }
        assert!(quoted >= 8, "{quoted}");
    }

    #[test]
    fn names_round_trip_and_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for k in Knob::ALL {
            assert_eq!(Knob::parse(k.as_str()), Some(k));
            assert!(seen.insert(k.as_str()), "{k} twice");
            assert!(!k.what().is_empty() && !k.source().is_empty());
        }
        // The catalogue order is the enum order (apply sorts by it).
        let mut sorted = Knob::ALL;
        sorted.sort();
        assert_eq!(sorted, Knob::ALL);
    }

    #[test]
    fn json_spells_knobs_as_the_cli_and_reads_the_legacy_spelling() {
        for k in Knob::ALL {
            let j = serde_json::to_string(&k).unwrap();
            assert_eq!(j, format!("\"{}\"", k.as_str()));
            assert_eq!(serde_json::from_str::<Knob>(&j).unwrap(), k);
            let old = format!("\"{}\"", k.legacy_str());
            assert_eq!(serde_json::from_str::<Knob>(&old).unwrap(), k);
            assert_eq!(
                with_legacy_spelling(|| serde_json::to_string(&k).unwrap()),
                old
            );
        }
        assert_eq!(Knob::Hz100.legacy_str(), "hz100");
        assert_eq!(Knob::BzImage.legacy_str(), "bz-image");
        assert!(serde_json::from_str::<Knob>("\"hz_100\"").is_err());
        // The legacy mode ends with its closure.
        assert_eq!(serde_json::to_string(&Knob::Hz100).unwrap(), "\"hz-100\"");
        let v = vec![Knob::Hz1000, Knob::BzImage];
        let old = br#"["hz1000","bz-image"]"#;
        assert!(is_canonical_either(old, || serde_json::to_vec(&v).unwrap()));
        assert!(is_canonical_either(br#"["hz-1000","bzimage"]"#, || {
            serde_json::to_vec(&v).unwrap()
        }));
        assert!(!is_canonical_either(br#"["hz-1000","bz-image"]"#, || {
            serde_json::to_vec(&v).unwrap()
        }));
    }

    #[test]
    fn each_knob_changes_one_thing() {
        for k in Knob::ALL {
            let a = apply(&[k], Backing::Anon);
            let changed = usize::from(!a.cmdline_extra.is_empty())
                + a.fragments.len()
                + usize::from(a.backing != Backing::Anon)
                + usize::from(a.console)
                + usize::from(a.bzimage)
                + usize::from(a.ram_layout != TUNE_BASELINE_LAYOUT)
                + usize::from(a.pin_vcpus);
            assert_eq!(changed, 1, "{k}");
            if let Change::Kconfig(text) = k.change() {
                assert!(text
                    .lines()
                    .all(|l| l.starts_with("CONFIG_") || l.starts_with("# CONFIG_")));
            }
        }
    }

    #[test]
    fn command_line_deltas() {
        // The layout knob: the VMM flag, and the word the VMM then gives the guest.
        assert_eq!(
            Knob::RamLayoutHoleInside.change(),
            Change::Vmm(VmmChange::RamLayout(RamLayout::HoleInside))
        );
        assert_eq!(
            Knob::RamLayoutHoleInside.cmdline_delta(),
            (vec!["truecold.ram_layout=hole-inside"], vec![])
        );
        assert_eq!(
            apply(&[Knob::RamLayoutHoleInside], Backing::Thp).ram_layout,
            RamLayout::HoleInside
        );
        assert_eq!(Knob::RamLayoutHoleInside.class(), KnobClass::Vmm);
        assert!(!Knob::RamLayoutHoleInside.applies_to(TuneGuest::Probe));
        assert_eq!(
            Knob::parse("ram-layout-hole-inside"),
            Some(Knob::RamLayoutHoleInside)
        );
        assert_eq!(
            Knob::TscReliable.cmdline_delta(),
            (vec!["tsc=reliable"], vec![])
        );
        assert_eq!(
            Knob::Console.cmdline_delta(),
            (
                vec!["console=ttyS0", "8250.nr_uarts=1"],
                vec!["8250.nr_uarts=0", "quiet", "loglevel=0"]
            )
        );
        // Pinning: the VMM flag alone, for the probe guest too; no guest word.
        assert_eq!(Knob::PinVcpus.change(), Change::Vmm(VmmChange::PinVcpus));
        assert_eq!(Knob::PinVcpus.cmdline_delta(), (vec![], vec![]));
        assert!(apply(&[Knob::PinVcpus], Backing::Thp).pin_vcpus);
        assert!(!apply(&[Knob::Console], Backing::Thp).pin_vcpus);
        assert!(Knob::PinVcpus.applies_to(TuneGuest::Probe));
        assert_eq!(Knob::parse("pin-vcpus"), Some(Knob::PinVcpus));
        assert_eq!(Knob::PinVcpus.trade_off(), None);
        for k in [Knob::Hz100, Knob::BackingThp, Knob::BzImage] {
            assert_eq!(k.cmdline_delta(), (vec![], vec![]), "{k}");
        }
    }

    /// Issue 25's memory-proportional command-line knobs: one word each, the sizes the
    /// kernel gives a 1 GiB guest; `rodata-off` flagged as a security trade-off (the only
    /// knob that is).
    #[test]
    fn boot_hash_and_rodata_knobs() {
        for (k, name, word) in [
            (Knob::DhashEntries, "dhash-entries", "dhash_entries=131072"),
            (Knob::IhashEntries, "ihash-entries", "ihash_entries=65536"),
            (Knob::ThashEntries, "thash-entries", "thash_entries=8192"),
            (Knob::UhashEntries, "uhash-entries", "uhash_entries=512"),
            (Knob::RodataOff, "rodata-off", "rodata=off"),
        ] {
            assert_eq!(Knob::parse(name), Some(k));
            assert_eq!(k.class(), KnobClass::Cmdline, "{k}");
            assert_eq!(k.cmdline_delta(), (vec![word], vec![]), "{k}");
            assert_eq!(apply(&[k], Backing::Anon).cmdline_extra, word, "{k}");
            assert!(k.applies_to(TuneGuest::Linux) && !k.applies_to(TuneGuest::Probe));
            assert!(k.source().contains("kernel-parameters.txt"), "{k}");
        }
        let all = apply(
            &[Knob::RodataOff, Knob::DhashEntries, Knob::TscReliable],
            Backing::Anon,
        );
        assert_eq!(
            all.cmdline_extra,
            "tsc=reliable dhash_entries=131072 rodata=off"
        );
        assert!(Knob::RodataOff.trade_off().unwrap().starts_with("security"));
        assert!(Knob::RodataOff.what().contains("SECURITY TRADE-OFF"));
        assert!(Knob::IdlePoll.trade_off().unwrap().starts_with("host CPU"));
        for k in Knob::ALL {
            assert_eq!(
                k.trade_off().is_some(),
                matches!(k, Knob::RodataOff | Knob::IdlePoll),
                "{k}"
            );
        }
    }

    /// `kernel-hash-sizes` undoes the base command line's caps: its words come after them and
    /// each sets a size of zero (the kernel's own rule); it cannot run beside a cap knob.
    #[test]
    fn kernel_hash_sizes_undoes_the_base_caps() {
        use crate::boot_cmdline::{cmdline, hash_caps, SerialUse, HASH_CAPS};
        use crate::limits::GuestMem;
        let k = Knob::KernelHashSizes;
        assert_eq!(Knob::parse("kernel-hash-sizes"), Some(k));
        assert_eq!(k.class(), KnobClass::Cmdline);
        let (add, remove) = k.cmdline_delta();
        assert!(remove.is_empty());
        let mem = GuestMem::from_mib(16384).unwrap();
        let line = cmdline(
            SerialUse::Off,
            mem,
            &apply(&[k], Backing::Thp).cmdline_extra,
        )
        .unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(hash_caps(mem).len(), HASH_CAPS.len());
        for cap in HASH_CAPS {
            let key = cap.split('=').next().unwrap();
            // The knob names every capped table, with 0, once.
            assert_eq!(
                add.iter().filter(|w| w.starts_with(key)).count(),
                1,
                "{key}"
            );
            let last = words
                .iter()
                .rev()
                .find(|w| w.starts_with(&format!("{key}=")));
            assert_eq!(last, Some(&format!("{key}=0").as_str()), "{line}");
        }
        for cap in [
            Knob::DhashEntries,
            Knob::IhashEntries,
            Knob::ThashEntries,
            Knob::UhashEntries,
        ] {
            assert_eq!(
                check_set(&[cap, k], TuneGuest::Linux),
                Err(KnobSetError::Conflict(cap, k))
            );
            assert!(conflicts(k, cap) && conflicts(cap, k));
        }
        assert!(!conflicts(k, Knob::RodataOff));
        assert_eq!(
            check_set(
                &[Knob::RamLayoutHoleInside, Knob::RamLayoutAbove4g],
                TuneGuest::Linux
            ),
            Err(KnobSetError::Conflict(
                Knob::RamLayoutHoleInside,
                Knob::RamLayoutAbove4g
            ))
        );
        assert_eq!(
            Knob::RamLayoutAbove4g.cmdline_delta(),
            (vec!["truecold.ram_layout=above-4g"], vec![])
        );
        assert!(conflicts(Knob::Hz1000, Knob::Hz100));
    }

    /// A proposed knob is its name: parsed, spelt, applied and serialised like a catalogue
    /// knob, after the catalogue in order, interned once.
    #[test]
    fn proposed_knobs_are_their_names() {
        let k = Knob::parse("initcall-blacklist-i8042_init").unwrap();
        assert_eq!(
            k,
            Knob::proposed(ProposedKind::InitcallBlacklist, "i8042_init").unwrap()
        );
        assert_eq!(k.as_str(), "initcall-blacklist-i8042_init");
        assert_eq!(k.change(), Change::Cmdline("initcall_blacklist=i8042_init"));
        assert_eq!(k.class(), KnobClass::Cmdline);
        assert_eq!(
            k.cmdline_delta(),
            (vec!["initcall_blacklist=i8042_init"], vec![])
        );
        assert!(k.applies_to(TuneGuest::Linux) && !k.applies_to(TuneGuest::Probe));
        assert!(k.what().contains("i8042_init") && k.source().contains("KALLSYMS"));
        let off = Knob::parse("kconfig-off-SERIO_I8042").unwrap();
        assert_eq!(
            off.change(),
            Change::Kconfig("# CONFIG_SERIO_I8042 is not set\n")
        );
        assert_eq!(
            off.fragment_name().as_deref(),
            Some("tune-kconfig-off-SERIO_I8042.config")
        );
        // Interned: the same reference each time.
        let (Knob::Proposed(a), Knob::Proposed(b)) =
            (off, Knob::parse("kconfig-off-SERIO_I8042").unwrap())
        else {
            panic!("not proposed")
        };
        assert!(std::ptr::eq(a, b));
        // After the catalogue, kinds in order; apply puts the word after the catalogue's.
        assert!(Knob::ALL.iter().all(|c| *c < k && *c < off));
        assert!(k < off);
        let a = apply(&[k, Knob::TscReliable, off], Backing::Anon);
        assert_eq!(
            a.cmdline_extra,
            "tsc=reliable initcall_blacklist=i8042_init"
        );
        assert_eq!(a.fragments.len(), 1);
        assert_eq!(
            parse_knobs("kconfig-off-SERIO_I8042,tsc-reliable", TuneGuest::Linux),
            Ok(vec![Knob::TscReliable, off])
        );
        let j = serde_json::to_string(&vec![off, k]).unwrap();
        assert_eq!(
            j,
            r#"["kconfig-off-SERIO_I8042","initcall-blacklist-i8042_init"]"#
        );
        assert_eq!(serde_json::from_str::<Vec<Knob>>(&j).unwrap(), vec![off, k]);
        // What is not a target is no knob.
        for bad in [
            "initcall-blacklist-",
            "initcall-blacklist-a,b",
            "initcall-blacklist-9x",
            "kconfig-off-CONFIG_X",
            "kconfig-off-A=y",
            "kconfig-off-",
        ] {
            assert_eq!(Knob::parse(bad), None, "{bad}");
        }
        let long = format!("initcall-blacklist-{}", "a".repeat(MAX_PROPOSED_TARGET + 1));
        assert_eq!(Knob::parse(&long), None);
        assert!(Knob::ALL.iter().all(|k| k.as_proposed().is_none()));
    }

    #[test]
    fn knob_lists_are_checked() {
        let g = TuneGuest::Linux;
        assert_eq!(
            parse_knobs("rcu-expedited, console", g),
            Ok(vec![Knob::RcuExpedited, Knob::Console])
        );
        assert_eq!(
            parse_knobs("nope", g),
            Err(KnobSetError::Unknown("nope".into()))
        );
        assert_eq!(
            parse_knobs("console,console", g),
            Err(KnobSetError::Twice(Knob::Console))
        );
        assert_eq!(
            parse_knobs("console", TuneGuest::Probe),
            Err(KnobSetError::NotForGuest(Knob::Console))
        );
        assert!(parse_knobs("backing-thp,backing-hugetlb", TuneGuest::Probe).is_ok());
        assert_eq!(
            check_set(&[Knob::BackingThp, Knob::BackingHugetlb], g),
            Err(KnobSetError::Conflict(
                Knob::BackingThp,
                Knob::BackingHugetlb
            ))
        );
        let a = apply(
            &[Knob::Console, Knob::RcuExpedited, Knob::TscReliable],
            Backing::Anon,
        );
        assert_eq!(a.cmdline_extra, "tsc=reliable rcupdate.rcu_expedited=1");
        assert!(a.console);
    }
}
