//! The one vocabulary of a measured boot, used by the VMM (which takes most stamps), the bench
//! (which adds its own and builds the row) and the verifier (which re-derives the row):
//!
//! - a [`Mark`] is a point on CLOCK_MONOTONIC ([`now_ns`]), the same clock in every host
//!   process, so a parent's request stamp and a child's VM-exit stamp subtract;
//! - [`Stamps`] holds one optional value per mark (`None` = not reached);
//! - a [`Stage`] is a named duration; [`Stage::TABLE`] is the one table of stage names and
//!   boundaries (docs/architecture.md prints it);
//! - [`Stamps::tile`] is the one function that turns stamps into stage durations.
//!
//! # Tiling rule
//! Each host stage runs from the previous *present* mark to its own end mark, so the host
//! stages of a success sum exactly to request → strict-ready (the headline); a missing mark
//! leaves its stage empty and the next present stage absorbs the gap. A stamp earlier than its
//! predecessor gives an empty stage, never a made-up one (the verifier then reports the broken
//! tiling). The post stages (workload, teardown) run from strict-ready onwards and are empty
//! when strict-ready was not reached. The guest stages come from the guest's own clock.

use serde::{Deserialize, Serialize};

/// Now on CLOCK_MONOTONIC, in nanoseconds: the clock of every host stamp. (The crate's one
/// `unsafe`: std has no raw CLOCK_MONOTONIC reading.)
#[allow(unsafe_code)]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    u64::try_from(ts.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(ts.tv_nsec).unwrap_or(0))
}

/// `e` and its sources, `: `-separated: the one way every binary prints an error chain.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

/// Who takes a mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taker {
    /// The bench (harness), outside the VMM process.
    Bench,
    /// The VMM process, in its own code.
    Vmm,
    /// The VMM, on the VM exit of a guest's port write.
    VmExit,
}

/// The one table of marks: each variant of [`Mark`] (its doc, in timeline order) and its field
/// of [`Stamps`] (the snake_case JSON name, with any serde attributes). [`Mark::ALL`],
/// [`Mark::name`] and the field of each mark are generated from it, so a new mark is one line.
macro_rules! marks {
    ($(
        $(#[doc = $doc:literal])*
        $mark:ident => $(#[$field_attr:meta])* $field:ident;
    )+) => {
        /// A point of one launch, in timeline order.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Mark {
            $($(#[doc = $doc])* $mark,)+
        }

        /// How many marks there are.
        pub const MARK_COUNT: usize = [$(stringify!($mark)),+].len();

        impl Mark {
            /// Every mark, in timeline order.
            pub const ALL: [Mark; MARK_COUNT] = [$(Mark::$mark),+];

            /// The snake_case name: the field of [`Stamps`] in JSON.
            pub fn name(self) -> &'static str {
                match self {
                    $(Mark::$mark => stringify!($field),)+
                }
            }
        }

        /// One CLOCK_MONOTONIC stamp (ns) per [`Mark`]; `None` = not reached. The VMM fills its
        /// marks (and echoes `request`, which the bench hands it); the bench adds `intended`,
        /// `request` and `reaped`.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct Stamps {
            $($(#[$field_attr])* pub $field: Option<u64>,)+
        }

        impl Stamps {
            fn slot(&self, m: Mark) -> &Option<u64> {
                match m {
                    $(Mark::$mark => &self.$field,)+
                }
            }

            fn slot_mut(&mut self, m: Mark) -> &mut Option<u64> {
                match m {
                    $(Mark::$mark => &mut self.$field,)+
                }
            }
        }
    };
}

marks! {
    /// When the launch was due (burst, open loop); the latency origin when present.
    Intended => intended;
    /// Taken by the bench just before it spawns the VMM process.
    Request => request;
    /// The VMM's `boot::run` entered, after argument parsing and validation.
    BootStart => boot_start;
    /// `/dev/kvm` opened, its API version and capabilities checked.
    KvmOpen => kvm_open;
    /// VM created (irqchip, PIT, TSS / identity map).
    VmCreated => vm_created;
    /// Guest memory mapped, every memslot registered.
    MemoryReady => memory_ready;
    /// Kernel (or probe), initramfs, boot parameters, command line and MP table in memory.
    KernelLoaded => kernel_loaded;
    /// The VMM's sandbox applied: its seccomp filter installed (the last step before the
    /// vCPUs are created). Absent when the VMM ran without the filter, and in bundles of
    /// schema 5 and earlier.
    /// (Left out of the JSON when `None`, so those reports keep their canonical bytes.)
    Sandboxed => #[serde(default, skip_serializing_if = "Option::is_none")] sandboxed;
    /// Every vCPU created and set up, its thread started, the first `KVM_RUN` entered.
    FirstRun => first_run;
    /// VM exit of the guest's init-start doorbell (PID 1 running; Linux guests).
    InitDoorbell => init_doorbell;
    /// VM exit of the guest's ready doorbell (its checks passed).
    ReadyDoorbell => ready_doorbell;
    /// Serial observer: the bench read the guest's `TC1 ready` line on the engine's serial
    /// output (and wrote the nonce right after).
    SerialReady => serial_ready;
    /// The answer to the fresh nonce completed and verified: strict-ready. Taken at the VM
    /// exit ([`crate::kinds::Observer::VmExit`]) or by the bench reading the answer on the
    /// engine's serial output ([`crate::kinds::Observer::Serial`]).
    StrictReady => strict_ready;
    /// The guest's record (Linux) or summary (probe) completed: at the VM exit, or read on
    /// serial by the bench (serial observer).
    Record => record;
    /// The guest stopped (exit port, reset, shutdown) or the deadline fired.
    Exit => exit;
    /// vCPU threads joined, fds closed, memory unmapped: the VMM's teardown done.
    TeardownDone => teardown_done;
    /// The bench reaped the VMM process.
    Reaped => reaped;
}

impl Mark {
    /// Who takes it under the VM-exit observer (under the serial observer the bench takes
    /// `serial_ready`, `strict_ready` and `record` from the serial output: [`Mark::taker_under`]).
    pub fn taker(self) -> Taker {
        match self {
            Mark::Intended | Mark::Request | Mark::SerialReady | Mark::Reaped => Taker::Bench,
            Mark::InitDoorbell | Mark::ReadyDoorbell | Mark::StrictReady | Mark::Record => {
                Taker::VmExit
            }
            _ => Taker::Vmm,
        }
    }

    /// Who takes it when strict-ready is observed by `observer`.
    pub fn taker_under(self, observer: crate::kinds::Observer) -> Taker {
        match (observer, self) {
            (o, Mark::StrictReady | Mark::Record) if o.bench_reads_lines() => Taker::Bench,
            _ => self.taker(),
        }
    }
}

impl Stamps {
    /// The stamp of `m`.
    pub fn get(&self, m: Mark) -> Option<u64> {
        *self.slot(m)
    }

    /// Sets the stamp of `m`.
    pub fn set(&mut self, m: Mark, ns: Option<u64>) {
        *self.slot_mut(m) = ns;
    }

    /// The latency origin: the intended time where there is one, else the request.
    pub fn origin(&self) -> Option<u64> {
        self.intended.or(self.request)
    }

    /// The headline: origin → strict-ready; `None` when not ready (or out of order).
    pub fn latency(&self) -> Option<u64> {
        self.strict_ready?.checked_sub(self.origin()?)
    }

    /// The host and post stages (see the module's tiling rule); guest stages are left empty
    /// (see [`StageTimes::set_guest`]). Each stage is the difference of the stamps of its
    /// span ([`Stamps::spans`]).
    pub fn tile(&self) -> StageTimes {
        let mut st = StageTimes::default();
        for (stage, span) in Stage::ALL.iter().zip(self.spans()) {
            st.set(
                *stage,
                span.and_then(|(a, b)| self.get(b)?.checked_sub(self.get(a)?)),
            );
        }
        st
    }

    /// The one tiling rule as marks: for each stage of [`Stage::ALL`], the (start, end) marks
    /// it runs between, both present, or `None` when the stage is empty (its end mark, or
    /// every earlier mark, missing; a post stage before strict-ready; a guest stage). Any
    /// counter sampled at the marks (exit counts, page faults) is split into stages by the
    /// same spans, so durations and counters always cover the same interval.
    pub fn spans(&self) -> [Option<(Mark, Mark)>; STAGE_COUNT] {
        let mut out = [None; STAGE_COUNT];
        if self.intended.is_some() && self.request.is_some() {
            out[Stage::Queue.index()] = Some((Mark::Intended, Mark::Request));
        }
        let mut prev = self.request.map(|_| Mark::Request);
        for row in Stage::TABLE {
            let Boundary::Host { end } = row.boundary else {
                continue;
            };
            if row.stage == Stage::Queue {
                continue;
            }
            if row.kind == StageKind::Post && self.strict_ready.is_none() {
                break;
            }
            let present = self.get(end).is_some();
            if let (Some(p), true) = (prev, present) {
                out[row.stage.index()] = Some((p, end));
            }
            if present {
                prev = Some(end);
            }
        }
        out
    }
}

/// Where a stage's duration comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageKind {
    /// Host clock; the host stages tile the headline (their sum equals it for a success).
    Host,
    /// The guest's own clock (Linux guests only).
    Guest,
    /// Host clock, after strict-ready: not part of the headline.
    Post,
}

/// How a stage is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Boundary {
    /// Host clock: from the previous present mark (see the tiling rule) to `end`.
    Host { end: Mark },
    /// The guest's CLOCK_MONOTONIC, from its record: `from`/`to` name the record's fields
    /// (`kernel_start` is the guest clock's zero).
    Guest {
        from: &'static str,
        to: &'static str,
    },
}

/// One row of the stage table.
#[derive(Clone, Copy, Debug)]
pub struct StageDef {
    pub stage: Stage,
    pub name: &'static str,
    pub kind: StageKind,
    pub boundary: Boundary,
    /// What the stage covers, in plain words.
    pub covers: &'static str,
}

/// The stages, in timeline order. The CSV has one column `<name>_ns` per stage, in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    Queue,
    Spawn,
    KvmOpen,
    VmCreate,
    Memory,
    KernelLoad,
    Seccomp,
    Vcpus,
    GuestBoot,
    GuestInit,
    SerialReady,
    Challenge,
    GuestKernelToInit,
    GuestInitToReady,
    Workload,
    Teardown,
}

/// Number of stages.
pub const STAGE_COUNT: usize = 16;

const fn host(stage: Stage, name: &'static str, end: Mark, covers: &'static str) -> StageDef {
    StageDef {
        stage,
        name,
        kind: StageKind::Host,
        boundary: Boundary::Host { end },
        covers,
    }
}

impl Stage {
    /// The one stage table: name, clock, boundaries and meaning of every stage.
    pub const TABLE: [StageDef; STAGE_COUNT] = [
        StageDef {
            stage: Stage::Queue,
            name: "queue",
            kind: StageKind::Host,
            boundary: Boundary::Host { end: Mark::Request },
            covers: "intended → request: the harness's own lateness (burst, open loop only)",
        },
        host(
            Stage::Spawn,
            "spawn",
            Mark::BootStart,
            "request → boot_start: fork/exec of the VMM, its argument parsing and validation",
        ),
        host(
            Stage::KvmOpen,
            "kvm_open",
            Mark::KvmOpen,
            "→ /dev/kvm opened, API version and capabilities checked",
        ),
        host(
            Stage::VmCreate,
            "vm_create",
            Mark::VmCreated,
            "→ VM created: irqchip, PIT, TSS and identity map",
        ),
        host(
            Stage::Memory,
            "memory",
            Mark::MemoryReady,
            "→ guest memory mapped and every memslot registered",
        ),
        host(
            Stage::KernelLoad,
            "kernel_load",
            Mark::KernelLoaded,
            "→ kernel, initramfs, boot parameters, command line and MP table in guest memory",
        ),
        host(
            Stage::Seccomp,
            "seccomp",
            Mark::Sandboxed,
            "→ the VMM's seccomp filter installed (empty when it ran without one; new in \
             schema 6)",
        ),
        host(
            Stage::Vcpus,
            "vcpus",
            Mark::FirstRun,
            "→ every vCPU created, its registers and CPUID set, threads started, first KVM_RUN",
        ),
        host(
            Stage::GuestBoot,
            "guest_boot",
            Mark::InitDoorbell,
            "first KVM_RUN → the init-start doorbell's VM exit (kernel boot to PID 1)",
        ),
        host(
            Stage::GuestInit,
            "guest_init",
            Mark::ReadyDoorbell,
            "→ the ready doorbell's VM exit (PID 1's checks: memory, loopback, boot id)",
        ),
        host(
            Stage::SerialReady,
            "serial_ready",
            Mark::SerialReady,
            "→ the bench read the guest's ready line on the engine's serial output (serial \
             observer only; for another engine, from the request: its inner marks are unseen)",
        ),
        host(
            Stage::Challenge,
            "challenge",
            Mark::StrictReady,
            "→ the answer to the fresh nonce verified: strict-ready (at the VM exit, or read \
             on serial by the bench)",
        ),
        StageDef {
            stage: Stage::GuestKernelToInit,
            name: "guest_kernel_to_init",
            kind: StageKind::Guest,
            boundary: Boundary::Guest {
                from: "kernel_start",
                to: "t_init_ns",
            },
            covers: "guest clock: kernel start → PID 1 running",
        },
        StageDef {
            stage: Stage::GuestInitToReady,
            name: "guest_init_to_ready",
            kind: StageKind::Guest,
            boundary: Boundary::Guest {
                from: "t_init_ns",
                to: "t_ready_ns",
            },
            covers: "guest clock: PID 1 running → its checks passed (ready)",
        },
        StageDef {
            stage: Stage::Workload,
            name: "workload",
            kind: StageKind::Post,
            boundary: Boundary::Host { end: Mark::Record },
            covers: "strict-ready → the guest's record received (post-ready workload)",
        },
        StageDef {
            stage: Stage::Teardown,
            name: "teardown",
            kind: StageKind::Post,
            boundary: Boundary::Host { end: Mark::Reaped },
            covers: "record → the VMM process reaped (guest exit, VMM teardown, process exit)",
        },
    ];

    /// Every stage, in column order.
    pub const ALL: [Stage; STAGE_COUNT] = [
        Stage::Queue,
        Stage::Spawn,
        Stage::KvmOpen,
        Stage::VmCreate,
        Stage::Memory,
        Stage::KernelLoad,
        Stage::Seccomp,
        Stage::Vcpus,
        Stage::GuestBoot,
        Stage::GuestInit,
        Stage::SerialReady,
        Stage::Challenge,
        Stage::GuestKernelToInit,
        Stage::GuestInitToReady,
        Stage::Workload,
        Stage::Teardown,
    ];

    /// Position in [`Stage::ALL`] and [`Stage::TABLE`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Its row of the table.
    pub fn def(self) -> &'static StageDef {
        &Self::TABLE[self.index()]
    }

    /// Stable snake_case name (CSV column is `<name>_ns`).
    pub fn name(self) -> &'static str {
        self.def().name
    }

    /// Where the duration comes from.
    pub fn kind(self) -> StageKind {
        self.def().kind
    }

    /// Looks a stage up by name.
    /// Whether a success must have this host stage, given where strict-ready was observed
    /// and which engine booted: under the VM-exit observer (truecold only) every host stage
    /// but `queue` (decided by the intended time) and `serial_ready`; under the serial
    /// observer truecold adds `serial_ready`, and another engine, whose inner marks nobody
    /// sees, has exactly `serial_ready` and `challenge`. Never true for guest or post stages.
    pub fn host_required(
        self,
        observer: crate::kinds::Observer,
        engine: crate::kinds::Engine,
    ) -> bool {
        use crate::kinds::{Engine, Observer};
        // `queue` is decided by the intended time; `seccomp` is empty without a filter.
        if self.kind() != StageKind::Host || matches!(self, Stage::Queue | Stage::Seccomp) {
            return false;
        }
        match (observer, self) {
            (Observer::VmExit, Stage::SerialReady) => false,
            (Observer::VmExit, _) => true,
            (Observer::Serial | Observer::Agent, Stage::SerialReady | Stage::Challenge) => true,
            (Observer::Serial | Observer::Agent, _) => engine == Engine::Truecold,
        }
    }

    pub fn from_name(name: &str) -> Option<Stage> {
        Stage::ALL.iter().copied().find(|s| s.name() == name)
    }
}

/// The stage table as Markdown rows (`| stage | clock | ends at mark | covers |`), as
/// docs/architecture.md prints it (a test keeps the two equal).
pub fn stage_table_markdown() -> String {
    let mut out = String::new();
    for d in Stage::TABLE {
        let (clock, end) = match (d.kind, d.boundary) {
            (StageKind::Guest, Boundary::Guest { to, .. }) => ("guest", format!("record `{to}`")),
            (StageKind::Post, Boundary::Host { end }) => {
                ("host, post-ready", format!("`{}`", end.name()))
            }
            (_, Boundary::Host { end }) => ("host", format!("`{}`", end.name())),
            (_, Boundary::Guest { to, .. }) => ("guest", format!("record `{to}`")),
        };
        out.push_str(&format!(
            "| `{}` | {clock} | {end} | {} |\n",
            d.name, d.covers
        ));
    }
    out
}

/// One duration per stage (ns); `None` = not reached / not applicable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageTimes(pub [Option<u64>; STAGE_COUNT]);

impl StageTimes {
    /// The duration of `stage`.
    pub fn get(&self, stage: Stage) -> Option<u64> {
        self.0[stage.index()]
    }

    /// Sets the duration of `stage`.
    pub fn set(&mut self, stage: Stage, ns: Option<u64>) {
        self.0[stage.index()] = ns;
    }

    /// Sets the guest-clock stages from the guest record's `t_init_ns` and `t_ready_ns`
    /// (`0` = not reached).
    pub fn set_guest(&mut self, t_init_ns: u64, t_ready_ns: u64) {
        let init = (t_init_ns > 0).then_some(t_init_ns);
        self.set(Stage::GuestKernelToInit, init);
        self.set(
            Stage::GuestInitToReady,
            match init {
                Some(i) if t_ready_ns > 0 => t_ready_ns.checked_sub(i),
                _ => None,
            },
        );
    }

    /// Sum of the host stages (those that tile the headline), in u128 so it cannot overflow.
    pub fn host_sum(&self) -> u128 {
        Stage::ALL
            .iter()
            .filter(|st| st.kind() == StageKind::Host)
            .filter_map(|st| self.get(*st))
            .map(u128::from)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_in_order_and_names_are_unique() {
        for (i, d) in Stage::TABLE.iter().enumerate() {
            assert_eq!(d.stage.index(), i);
            assert_eq!(Stage::ALL[i], d.stage);
            assert_eq!(Stage::from_name(d.name), Some(d.stage));
        }
        // Host end marks strictly increase along the table: the tiling is in timeline order.
        let ends: Vec<Mark> = Stage::TABLE
            .iter()
            .filter_map(|d| match d.boundary {
                Boundary::Host { end } => Some(end),
                Boundary::Guest { .. } => None,
            })
            .collect();
        assert!(ends.windows(2).all(|w| w[0] < w[1]), "{ends:?}");
    }

    #[test]
    fn the_architecture_doc_prints_this_stage_table() {
        let doc = include_str!("../../docs/architecture.md");
        let want = stage_table_markdown();
        assert!(
            doc.contains(&want),
            "docs/architecture.md must contain the stage table exactly:\n{want}"
        );
    }

    #[test]
    fn marks_round_trip_through_get_and_set() {
        let mut s = Stamps::default();
        for (i, m) in Mark::ALL.iter().enumerate() {
            s.set(*m, Some(i as u64 + 1));
        }
        for (i, m) in Mark::ALL.iter().enumerate() {
            assert_eq!(s.get(*m), Some(i as u64 + 1), "{}", m.name());
        }
        // The canonical bytes: one field per mark, named by Mark::name, in timeline order.
        let want: Vec<String> = Mark::ALL
            .iter()
            .enumerate()
            .map(|(i, m)| format!("\"{}\":{}", m.name(), i + 1))
            .collect();
        let json = serde_json::to_string(&s).expect("stamps serialize");
        assert_eq!(json, format!("{{{}}}", want.join(",")));
        // An absent sandboxed mark is left out (reports of schema 5 and earlier keep their bytes).
        s.set(Mark::Sandboxed, None);
        let json = serde_json::to_string(&s).expect("stamps serialize");
        assert!(
            !json.contains("sandboxed") && json.contains("\"first_run\""),
            "{json}"
        );
        assert_eq!(MARK_COUNT, 17);
    }

    #[test]
    fn stamps_tile_the_headline_with_intended_time_and_missing_stamps() {
        let st = Stamps {
            intended: Some(1_000),
            request: Some(1_500),
            boot_start: Some(2_000),
            kvm_open: Some(2_100),
            vm_created: None, // absorbed by memory
            memory_ready: Some(2_600),
            kernel_loaded: Some(3_000),
            sandboxed: Some(3_040),
            first_run: Some(3_100),
            init_doorbell: None, // probe guest: no init doorbell
            ready_doorbell: Some(9_000),
            serial_ready: None,
            strict_ready: Some(9_300),
            record: Some(9_800),
            exit: Some(9_850),
            teardown_done: Some(9_900),
            reaped: Some(10_000),
        };
        let t = st.tile();
        assert_eq!(st.latency(), Some(8_300)); // 9_300 - intended 1_000
        assert_eq!(t.get(Stage::Queue), Some(500));
        assert_eq!(t.get(Stage::Spawn), Some(500));
        assert_eq!(t.get(Stage::VmCreate), None);
        assert_eq!(t.get(Stage::Memory), Some(500));
        assert_eq!(t.get(Stage::Seccomp), Some(40));
        assert_eq!(t.get(Stage::Vcpus), Some(60));
        assert_eq!(t.get(Stage::GuestBoot), None);
        assert_eq!(t.get(Stage::GuestInit), Some(5_900));
        assert_eq!(t.get(Stage::Workload), Some(500));
        assert_eq!(t.get(Stage::Teardown), Some(200));
        assert_eq!(t.host_sum(), 8_300);
        // Without the filter (or in a schema-5 report) vcpus absorbs the seccomp stage.
        let bare = Stamps {
            sandboxed: None,
            ..st
        };
        let t = bare.tile();
        assert_eq!(t.get(Stage::Seccomp), None);
        assert_eq!(t.get(Stage::Vcpus), Some(100));
        assert_eq!(t.host_sum(), 8_300);
    }

    #[test]
    fn serial_observer_tiles_through_serial_ready() {
        // truecold under the serial observer: the VM-exit ready doorbell, then the bench's
        // reading of the ready line, then the verified answer read on serial.
        let st = Stamps {
            request: Some(100),
            boot_start: Some(150),
            first_run: Some(400),
            init_doorbell: Some(1_000),
            ready_doorbell: Some(1_500),
            serial_ready: Some(1_560),
            strict_ready: Some(1_700),
            record: Some(2_000),
            reaped: Some(2_100),
            ..Stamps::default()
        };
        let t = st.tile();
        assert_eq!(t.get(Stage::GuestInit), Some(500));
        assert_eq!(
            t.get(Stage::SerialReady),
            Some(60),
            "the cost of observing from outside"
        );
        assert_eq!(t.get(Stage::Challenge), Some(140));
        assert_eq!(t.host_sum(), 1_600);
        // Another engine: only the bench's marks; serial_ready absorbs the unseen inner marks.
        let fc = Stamps {
            request: Some(100),
            serial_ready: Some(1_560),
            strict_ready: Some(1_700),
            record: Some(2_000),
            reaped: Some(2_100),
            ..Stamps::default()
        };
        let t = fc.tile();
        assert_eq!(t.get(Stage::Spawn), None);
        assert_eq!(t.get(Stage::SerialReady), Some(1_460));
        assert_eq!(t.host_sum(), 1_600);
        assert_eq!(t.get(Stage::Teardown), Some(100));
        assert_eq!(
            Mark::Record.taker_under(crate::kinds::Observer::Serial),
            Taker::Bench
        );
        assert_eq!(
            Mark::Record.taker_under(crate::kinds::Observer::VmExit),
            Taker::VmExit
        );
    }

    #[test]
    fn failed_attempt_has_no_post_stages_and_no_latency() {
        let st = Stamps {
            request: Some(100),
            boot_start: Some(150),
            reaped: Some(900),
            ..Stamps::default()
        };
        let t = st.tile();
        assert_eq!(st.latency(), None);
        assert_eq!(t.get(Stage::Spawn), Some(50));
        assert_eq!(t.get(Stage::Teardown), None);
        assert_eq!(t.get(Stage::Queue), None);
    }

    #[test]
    fn backwards_stamp_gives_an_empty_stage_not_a_made_up_one() {
        let st = Stamps {
            request: Some(100),
            boot_start: Some(90),
            strict_ready: Some(200),
            ..Stamps::default()
        };
        let t = st.tile();
        assert_eq!(t.get(Stage::Spawn), None);
        assert_eq!(t.get(Stage::Challenge), Some(110));
        assert_eq!(st.latency(), Some(100));
        assert_ne!(t.host_sum(), 100); // the verifier will report the broken tiling
    }

    #[test]
    fn guest_stages_from_the_record() {
        let mut t = StageTimes::default();
        t.set_guest(15_000, 18_000);
        assert_eq!(t.get(Stage::GuestKernelToInit), Some(15_000));
        assert_eq!(t.get(Stage::GuestInitToReady), Some(3_000));
        t.set_guest(15_000, 0);
        assert_eq!(t.get(Stage::GuestInitToReady), None);
        t.set_guest(0, 18_000);
        assert_eq!(t.get(Stage::GuestKernelToInit), None);
        assert_eq!(t.get(Stage::GuestInitToReady), None);
    }

    #[test]
    fn error_chain_joins_sources() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::other("inner"));
        assert_eq!(error_chain(&e), "outer: inner");
    }

    #[test]
    fn clock_moves_forward() {
        let a = now_ns();
        let b = now_ns();
        assert!(b >= a && a > 0);
    }
}
