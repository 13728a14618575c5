//! The hostile guest (vmm/probe/hostile.S) against the `truecold-vmm` binary. Each case
//! patches what the guest does into its image, boots it as a kernel file (so the VMM judges it
//! exactly like a Linux guest) and checks that the VMM
//! - survives: exits 0 or 1 (never a signal, never a panic: 101), one JSON report on stdout
//!   (or in its report file), one error line on stderr or none;
//! - ends by its deadline plus [`HANG_BOUND`] (a bound against hangs, not a timing);
//! - never reports a success the guest did not earn, and types the failure exactly;
//! - keeps what the guest can grow bounded: the protocol errors kept as text, the unknown
//!   ports and MMIO pages kept by name, the report's size, and (for the floods) its own peak
//!   RSS, read with wait4(2).
//!
//! "Success" is what a bundle row makes of the report: `outcome.ok` with no protocol error
//! (bench/src/campaign/sample.rs; a row with any is `guest_protocol`, proof/src/schema.rs).
//! [`verdict`] is that rule. The honest case is the control: the same image, told to follow the
//! protocol, reaches strict-ready and a clean success, so every failure below is the attack's.
//! These tests fail (never skip) without a usable /dev/kvm.
mod common;

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use truecold_proto::report::ReportCore;
use truecold_vmm::devices::ExitCounts;
use truecold_vmm::probe::{HOSTILE_MAGIC, PROBE_HOSTILE_ELF};
use truecold_vmm::BootReport;

/// How long past its deadline a VMM may take to exit before it counts as hung (teardown of a
/// 128 MiB guest takes milliseconds; the rest is slack for a loaded 2-core host).
const HANG_BOUND: Duration = Duration::from_secs(10);
/// Largest report a hostile guest may cause (a healthy boot's is about 5 KiB).
const REPORT_MAX: usize = 1 << 20;
/// Most a flood may raise the VMM's peak RSS over the honest boot's.
const FLOOD_RSS_SLACK_KIB: i64 = 32 << 10;
/// The deadline of the cases that run into it.
const SHORT_DEADLINE_MS: u64 = 2_000;
/// The deadline of the cases that end on their own (a bound, never reached).
const LONG_DEADLINE_MS: u64 = 60_000;

/// The guest's cases: the table `h_table` in vmm/probe/hostile.S, in its order.
#[derive(Clone, Copy, Debug)]
enum Case {
    Honest = 0,
    Silent = 1,
    Triple = 2,
    ExitEarly = 3,
    Ports = 4,
    Mmio = 5,
    Storm = 6,
    Serial = 7,
    NoEnd = 8,
    Giant = 9,
    Malformed = 10,
    ReplyEarly = 11,
    NonceEarly = 12,
    Const = 13,
    OtherNonce = 14,
    Replay = 15,
    RecordFirst = 16,
    Twice = 17,
    MemLie = 18,
    ReadyFirst = 19,
    ReadyTwice = 20,
    NotRun = 21,
    Wide = 22,
}

/// What the guest does after its case's own steps (`h_next`).
#[derive(Clone, Copy, Debug)]
enum Next {
    /// Writes 0 to the exit port at once.
    Exit0 = 0,
    /// Follows the whole protocol honestly.
    Honest = 1,
}

/// One boot of the hostile guest.
#[derive(Clone, Debug)]
struct Boot {
    case: Case,
    arg: u64,
    next: Next,
    vcpus: u8,
    deadline_ms: u64,
    /// `--transport serial` (stdout is then the guest's serial, the report goes to a file).
    serial: bool,
    /// The binding [`Case::Replay`] sends.
    replay: [u8; 32],
}

impl Boot {
    fn new(case: Case) -> Self {
        Boot {
            case,
            arg: 0,
            next: Next::Exit0,
            vcpus: 1,
            deadline_ms: LONG_DEADLINE_MS,
            serial: false,
            replay: [0; 32],
        }
    }
    fn arg(mut self, arg: u64) -> Self {
        self.arg = arg;
        self
    }
    fn then_honest(mut self) -> Self {
        self.next = Next::Honest;
        self
    }
    fn short_deadline(mut self) -> Self {
        self.deadline_ms = SHORT_DEADLINE_MS;
        self
    }

    /// The guest image with this boot's control block.
    fn image(&self) -> Vec<u8> {
        let mut elf = PROBE_HOSTILE_ELF.to_vec();
        let at = elf
            .windows(HOSTILE_MAGIC.len())
            .position(|w| w == HOSTILE_MAGIC)
            .expect("the hostile guest's control block")
            + HOSTILE_MAGIC.len();
        let mut ctl = Vec::with_capacity(56);
        for q in [self.case as u64, self.arg, self.next as u64] {
            ctl.extend_from_slice(&q.to_le_bytes());
        }
        ctl.extend_from_slice(&self.replay);
        elf[at..at + ctl.len()].copy_from_slice(&ctl);
        elf
    }
}

/// What one boot left behind.
struct Ran {
    boot: Boot,
    report: BootReport,
    report_bytes: usize,
    wall: Duration,
    /// The VMM's peak RSS (wait4's `ru_maxrss`), KiB. It may include the test process's
    /// own until the exec; the report's VmHWM is the VMM's alone.
    maxrss_kib: i64,
}

impl Ran {
    /// The VMM's own VmHWM at teardown (the report's `accounting.rss_peak_bytes`).
    fn vm_hwm(&self) -> u64 {
        self.report
            .core
            .accounting
            .as_ref()
            .and_then(|a| a.rss_peak_bytes)
            .expect("the VMM's peak RSS")
    }
}

fn scratch(what: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    std::env::temp_dir().join(format!(
        "truecold-hostile-{}-{}-{what}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Reads all of `r` on a thread (the VMM must never block on a full pipe).
fn drain(r: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        if let Some(mut r) = r {
            r.read_to_end(&mut out).expect("read the VMM's output");
        }
        out
    })
}

/// Boots `b` and checks what every case must hold (see the module docs).
// The child is reaped by wait4(2), which also gives its rusage; std's `wait` cannot.
#[allow(clippy::zombie_processes)]
fn run(b: &Boot) -> Ran {
    common::require_kvm();
    let kernel = scratch("guest.elf");
    std::fs::write(&kernel, b.image()).expect("write the guest image");
    let report_file = scratch("report.json");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_truecold-vmm"));
    cmd.args(["boot", "--force", "--mem-mib", "128"])
        .arg("--kernel")
        .arg(&kernel)
        .args(["--vcpus", &b.vcpus.to_string()])
        .args(["--deadline-ms", &b.deadline_ms.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    if b.serial {
        cmd.args(["--transport", "serial", "--report-file"])
            .arg(&report_file)
            .stdout(Stdio::null());
    } else {
        cmd.stdout(Stdio::piped());
    }
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn truecold-vmm");
    let pid = child.id() as libc::pid_t;
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let limit = Duration::from_millis(b.deadline_ms) + HANG_BOUND;
    let mut killed = false;
    let (status, rusage) = loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value of this plain C struct.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our unreaped child; `status` and `ru` are live locals.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        assert!(r >= 0, "wait4: {}", std::io::Error::last_os_error());
        if r == pid {
            break (ExitStatus::from_raw(status), ru);
        }
        if !killed && start.elapsed() > limit {
            // Hung: end it so the test reports instead of hanging too.
            // SAFETY: signals our own unreaped child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let wall = start.elapsed();
    let stdout = out.join().expect("stdout reader");
    let stderr = String::from_utf8_lossy(&err.join().expect("stderr reader")).into_owned();
    let _ = std::fs::remove_file(&kernel);
    let text = if b.serial {
        let t = std::fs::read(&report_file).unwrap_or_default();
        let _ = std::fs::remove_file(&report_file);
        t
    } else {
        stdout
    };
    let ctx = format!("{b:?}: status {status:?}, stderr {stderr:?}");
    assert!(
        !killed,
        "{ctx}: still running {limit:?} after its start: hung"
    );
    assert_eq!(status.signal(), None, "{ctx}: killed by a signal");
    assert!(!stderr.contains("panicked"), "{ctx}: the VMM panicked");
    let text = String::from_utf8(text).unwrap_or_else(|e| panic!("{ctx}: report not UTF-8: {e}"));
    assert_eq!(
        text.lines().count(),
        1,
        "{ctx}: one JSON line, got {text:?}"
    );
    let report: BootReport =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{ctx}: report: {e}: {text}"));
    // The bench and the verifier read the same core.
    match truecold_proto::report::VmmOutput::parse(text.as_bytes()) {
        Ok(truecold_proto::report::VmmOutput::Boot(core)) => assert_eq!(*core, report.core),
        other => panic!("{ctx}: the shared reader says {other:?}"),
    }
    let ok = report.core.outcome.ok;
    assert_eq!(status.code(), Some(if ok { 0 } else { 1 }), "{ctx}");
    if ok {
        assert_eq!(stderr, "", "{ctx}");
    } else {
        assert_eq!(stderr.lines().count(), 1, "{ctx}");
        assert!(stderr.starts_with("error: the guest failed: "), "{ctx}");
    }
    let c = &report.core;
    assert!(
        text.len() <= REPORT_MAX,
        "{ctx}: a {} byte report",
        text.len()
    );
    assert!(
        c.protocol_errors.len() <= ReportCore::PROTOCOL_ERRORS_KEPT,
        "{ctx}"
    );
    assert_eq!(
        c.protocol_errors.len() as u64,
        c.protocol_error_count
            .min(ReportCore::PROTOCOL_ERRORS_KEPT as u64),
        "{ctx}"
    );
    assert!(report.exits.unknown_ports.len() <= ExitCounts::DISTINCT_KEPT);
    assert!(report.exits.unknown_mmio_pages.len() <= ExitCounts::DISTINCT_KEPT);
    assert!(
        report.vcpu_errors.is_empty(),
        "{ctx}: {:?}",
        report.vcpu_errors
    );
    Ran {
        boot: b.clone(),
        report_bytes: text.len(),
        report,
        wall,
        maxrss_kib: rusage.ru_maxrss,
    }
}

/// What a bundle row makes of the report: the VMM's failure kind; else `guest_protocol` when
/// the guest made any protocol error (a success must be clean); else `ok`.
fn verdict(r: &BootReport) -> String {
    let c = &r.core;
    match (&c.outcome.failure_kind, c.protocol_error_count) {
        (Some(k), _) => k.clone(),
        (None, 0) => "ok".into(),
        (None, _) => "guest_protocol".into(),
    }
}

/// Boots `b` and checks its verdict and its protocol errors: exactly `errors.len()` of them,
/// each containing the text given, in order.
fn expect(b: Boot, want: &str, errors: &[&str]) -> Ran {
    let r = run(&b);
    let c = &r.report.core;
    let ctx = format!("{b:?}: {:?} / {:?}", c.outcome, c.protocol_errors);
    assert_eq!(verdict(&r.report), want, "{ctx}");
    assert_eq!(c.protocol_error_count, errors.len() as u64, "{ctx}");
    for (got, want) in c.protocol_errors.iter().zip(errors) {
        assert!(got.contains(want), "{ctx}: `{got}` lacks `{want}`");
    }
    // Strict-ready only with a verified answer to this boot's nonce, and never for a report
    // that fails for want of one.
    if c.liveness.verified {
        assert!(c.stamps.strict_ready.is_some(), "{ctx}");
        assert_ne!(c.outcome.failure_kind.as_deref(), Some("not_strict_ready"));
    } else {
        assert_eq!(c.stamps.strict_ready, None, "{ctx}");
        assert!(!c.outcome.ok, "{ctx}");
    }
    r
}

// ---- the control ----

#[test]
fn honest_guest_is_a_clean_success() {
    let r = expect(Boot::new(Case::Honest), "ok", &[]);
    let c = &r.report.core;
    assert!(c.liveness.verified);
    assert!(
        c.memory_figures
            .agree(truecold_proto::kinds::RamLayout::HoleInside),
        "{:?}",
        c.memory_figures
    );
    let rec = c.guest_record.as_ref().expect("the record");
    assert_eq!(rec.workload, truecold_proto::Workload::BenchOk);
    assert_eq!(rec.boot_id, c.liveness.reply_boot_id);
    for m in [
        truecold_proto::measure::Mark::InitDoorbell,
        truecold_proto::measure::Mark::ReadyDoorbell,
        truecold_proto::measure::Mark::StrictReady,
        truecold_proto::measure::Mark::Record,
    ] {
        assert!(c.stamps.get(m).is_some(), "{}", m.name());
    }
    eprintln!(
        "honest: {:?}, {} byte report, peak RSS {} KiB",
        r.wall, r.report_bytes, r.maxrss_kib
    );
}

// ---- guest faults ----

#[test]
fn guest_that_never_rings_meets_the_deadline() {
    let r = expect(Boot::new(Case::Silent).short_deadline(), "deadline", &[]);
    assert_eq!(r.report.core.stamps.init_doorbell, None);
}

#[test]
fn triple_fault_is_a_shutdown() {
    let r = expect(Boot::new(Case::Triple), "shutdown", &[]);
    assert_eq!(r.report.exits.shutdown, 1);
}

#[test]
fn early_exit_is_not_strict_ready() {
    expect(Boot::new(Case::ExitEarly), "not_strict_ready", &[]);
    let r = expect(Boot::new(Case::ExitEarly).arg(41), "exit_code", &[]);
    assert_eq!(r.report.core.outcome.guest_exit_code, Some(41));
}

#[test]
fn aps_that_never_start_fail_the_boot() {
    // Two vCPUs; the guest never sends INIT/SIPI, yet its record claims both CPUs.
    let mut b = Boot::new(Case::Honest);
    b.vcpus = 2;
    let r = expect(b, "vcpus_not_started", &[]);
    assert_eq!(r.report.core.guest_record.as_ref().map(|g| g.cpus), Some(2));
    assert_eq!(
        r.report.failure,
        Some(truecold_vmm::report::GuestFailure::VcpusNotStarted { vcpus: vec![1] })
    );
}

// ---- unexpected addresses ----

#[test]
fn port_sweep_is_counted_within_bounds() {
    // Every port but the truecold block [0xf10, 0xf1f], written and read once. Ports the
    // kernel's own devices take (PIC, PIT …) never reach the VMM.
    let r = expect(Boot::new(Case::Ports), "not_strict_ready", &[]);
    let e = &r.report.exits;
    assert!(e.unknown_io > 100_000, "{e:?}");
    assert_eq!(e.unknown_ports.len(), ExitCounts::DISTINCT_KEPT);
    // … and the VMM is not derailed: the protocol that follows still succeeds.
    let r = expect(Boot::new(Case::Ports).then_honest(), "ok", &[]);
    assert!(r.report.exits.unknown_io > 100_000);
}

#[test]
fn mmio_sweep_is_counted_within_bounds() {
    // The ROM area below 1 MiB and every 64 MiB from the top of RAM to 120 GiB.
    let r = expect(Boot::new(Case::Mmio), "not_strict_ready", &[]);
    let e = &r.report.exits;
    assert!(e.unknown_mmio > 3_000, "{e:?}");
    assert_eq!(e.unknown_mmio_pages.len(), ExitCounts::DISTINCT_KEPT);
    expect(Boot::new(Case::Mmio).then_honest(), "ok", &[]);
}

#[test]
fn wide_accesses_to_the_truecold_ports_are_protocol_errors() {
    let errors = [
        "doorbell write of 2 bytes",
        "write to the challenge port",
        "challenge read before the Ready doorbell",
    ];
    expect(Boot::new(Case::Wide), "not_strict_ready", &errors);
    expect(
        Boot::new(Case::Wide).then_honest(),
        "guest_protocol",
        &errors,
    );
}

// ---- floods: bounded by the deadline and in memory ----

/// Boots `b`, a flood that runs into the deadline, and holds the VMM's peak RSS (both
/// measures) within [`FLOOD_RSS_SLACK_KIB`] of the honest boot's.
fn flood(b: Boot) -> Ran {
    let base = run(&Boot::new(Case::Honest));
    let r = run(&b);
    assert_eq!(
        verdict(&r.report),
        "deadline",
        "{:?}",
        r.report.core.outcome
    );
    let slack = FLOOD_RSS_SLACK_KIB as u64 * 1024;
    assert!(
        r.maxrss_kib <= base.maxrss_kib + FLOOD_RSS_SLACK_KIB,
        "{:?}: peak RSS {} KiB, the honest boot's {} KiB",
        r.boot,
        r.maxrss_kib,
        base.maxrss_kib
    );
    assert!(
        r.vm_hwm() <= base.vm_hwm() + slack,
        "{:?}: VmHWM {} bytes, the honest boot's {}",
        r.boot,
        r.vm_hwm(),
        base.vm_hwm()
    );
    eprintln!(
        "{:?}: {:?}, {} exits, ru_maxrss {} KiB / VmHWM {} KiB (honest: {} / {})",
        r.boot.case,
        r.wall,
        r.report.exits.io_out,
        r.maxrss_kib,
        r.vm_hwm() / 1024,
        base.maxrss_kib,
        base.vm_hwm() / 1024
    );
    r
}

#[test]
fn doorbell_storm_ends_at_the_deadline_with_bounded_errors() {
    let r = flood(Boot::new(Case::Storm).short_deadline());
    let c = &r.report.core;
    assert_eq!(c.protocol_error_count, r.report.exits.truecold);
    assert!(c.protocol_error_count > ReportCore::PROTOCOL_ERRORS_KEPT as u64);
    assert!(c
        .protocol_errors
        .iter()
        .all(|e| e == "unknown doorbell phase 7"));
}

#[test]
fn doorbell_storm_then_honest_is_counted_exactly() {
    let n = 100_000;
    let r = run(&Boot::new(Case::Storm).arg(n).then_honest());
    assert_eq!(verdict(&r.report), "guest_protocol");
    assert_eq!(r.report.core.protocol_error_count, n);
}

#[test]
fn serial_flood_is_bounded() {
    let r = flood(Boot::new(Case::Serial).short_deadline());
    assert!(r.report.exits.serial > 0);
}

#[test]
fn serial_flood_under_the_serial_transport_is_bounded() {
    let mut b = Boot::new(Case::Serial).short_deadline();
    b.serial = true;
    let r = flood(b);
    assert!(r.report.exits.serial > 0);
    assert_eq!(
        r.report.core.transport,
        truecold_proto::kinds::Transport::Serial
    );
}

#[test]
fn record_line_without_end_is_bounded() {
    let r = flood(Boot::new(Case::NoEnd).short_deadline());
    assert_eq!(r.report.core.protocol_error_count, 0);
    // Cut short by the exit port instead: no answer, nothing kept.
    expect(Boot::new(Case::NoEnd).arg(4), "not_strict_ready", &[]);
}

// ---- malformed lines ----

#[test]
fn giant_line_is_one_error() {
    // 64 KiB in one reply line: sixteen times the longest line.
    let long = ["line longer than 4096 bytes"];
    expect(Boot::new(Case::Giant).arg(16), "not_strict_ready", &long);
    expect(
        Boot::new(Case::Giant).arg(16).then_honest(),
        "guest_protocol",
        &long,
    );
}

/// The errors of hostile.S's `s_bad` lines, in order (its first line is well-formed).
const MALFORMED: [&str; 22] = [
    "a second `ksync` line",
    "line does not start with `TC1`",
    "line does not start with `TC1`",
    "unknown message kind ``",
    "unknown message kind `bogus`",
    "malformed field `boot_id`",
    "unknown key `nonsense`",
    "key `boot_id` given twice",
    "missing key `binding`",
    "bad value for `boot_id`: `NOT-A-UUID`",
    "bad value for `binding`",
    "line is not printable ASCII",
    "line is not printable ASCII",
    "line is not printable ASCII",
    "line is not printable ASCII",
    "a serial-transport line on the record port",
    "a serial-transport line on the record port",
    "bad value for `name`: `bogus`",
    "bad value for `dur_us`",
    "missing key `workload`",
    "unknown message kind ``",
    "reply before the Ready doorbell",
];

#[test]
fn malformed_lines_and_invalid_utf8_are_typed_errors() {
    expect(Boot::new(Case::Malformed), "not_strict_ready", &MALFORMED);
    let r = expect(
        Boot::new(Case::Malformed).then_honest(),
        "guest_protocol",
        &MALFORMED,
    );
    // The one well-formed trace line is kept.
    let t = r.report.core.guest_trace.as_ref().expect("the ksync line");
    assert_eq!(t.sync.map(|s| s.kmsg_us), Some(1));
}

// ---- the protocol, out of order and lying ----

#[test]
fn reply_before_the_ready_doorbell() {
    let e = ["reply before the Ready doorbell"];
    expect(Boot::new(Case::ReplyEarly), "not_strict_ready", &e);
    expect(
        Boot::new(Case::ReplyEarly).then_honest(),
        "guest_protocol",
        &e,
    );
}

#[test]
fn answer_read_before_the_nonce_does_not_verify() {
    expect(
        Boot::new(Case::NonceEarly),
        "not_strict_ready",
        &[
            "challenge read before the Ready doorbell",
            "reply binding does not verify",
            "a success record before the verified reply",
        ],
    );
}

/// A wrong answer, then the record a passing guest sends (refused: it claims success).
const WRONG: [&str; 2] = [
    "reply binding does not verify",
    "a success record before the verified reply",
];

#[test]
fn constant_answer_does_not_verify() {
    let r = expect(Boot::new(Case::Const), "not_strict_ready", &WRONG);
    assert_eq!(
        r.report.core.liveness.answer.as_deref(),
        Some("41".repeat(32).as_str())
    );
    assert_eq!(r.report.core.liveness.reply_boot_id, None);
}

#[test]
fn answer_for_another_nonce_does_not_verify() {
    expect(Boot::new(Case::OtherNonce), "not_strict_ready", &WRONG);
}

#[test]
fn replayed_answer_from_an_earlier_boot_does_not_verify() {
    let first = expect(Boot::new(Case::Honest), "ok", &[]);
    let l = &first.report.core.liveness;
    let answer = l.answer.clone().expect("the first boot's answer");
    let mut b = Boot::new(Case::Replay);
    b.replay = truecold_proto::unhex::<32>(&answer).expect("hex");
    let r = expect(b, "not_strict_ready", &WRONG);
    let again = &r.report.core.liveness;
    assert_eq!(again.answer.as_deref(), Some(answer.as_str()), "replayed");
    assert_ne!(again.nonce, l.nonce, "each boot makes its own nonce");
}

#[test]
fn success_record_before_the_reply_is_not_kept() {
    let r = expect(
        Boot::new(Case::RecordFirst),
        "record_missing",
        &["a success record before the verified reply"],
    );
    assert!(r.report.core.liveness.verified);
    assert_eq!(r.report.core.guest_record, None);
}

#[test]
fn second_reply_and_record_are_protocol_errors() {
    let r = expect(
        Boot::new(Case::Twice),
        "guest_protocol",
        &["a reply after the verified one", "second record"],
    );
    assert!(r.report.core.outcome.ok, "the VMM counts, the row fails");
}

#[test]
fn doorbells_out_of_order_are_protocol_errors() {
    let r = expect(
        Boot::new(Case::ReadyFirst),
        "guest_protocol",
        &["Ready doorbell before the InitStart doorbell"],
    );
    assert_eq!(r.report.core.stamps.init_doorbell, None);
    expect(
        Boot::new(Case::ReadyTwice),
        "guest_protocol",
        &["second Ready doorbell"],
    );
    // InitStart after Ready: the answer-before-the-nonce case rings it again in its honest
    // tail, which then answers the real nonce.
    expect(
        Boot::new(Case::NonceEarly).then_honest(),
        "guest_protocol",
        &[
            "challenge read before the Ready doorbell",
            "reply binding does not verify",
            "a success record before the verified reply",
            "InitStart doorbell after the Ready doorbell",
            "second Ready doorbell",
        ],
    );
}

#[test]
fn memory_figure_that_lies_is_caught() {
    for delta in [
        2u64 << 20,
        (2u64 << 20).wrapping_neg(),
        (128u64 << 20).wrapping_neg(),
    ] {
        let r = expect(Boot::new(Case::MemLie).arg(delta), "memory_disagrees", &[]);
        let f = &r.report.core.memory_figures;
        // The RAM the default layout gives 128 MiB (hole-inside: less the declared hole).
        let ram = truecold_proto::kinds::Engine::Truecold
            .expected_firmware_ram(128 << 20, truecold_proto::kinds::RamLayout::HoleInside);
        assert_eq!(f.guest, Some(ram.wrapping_add(delta)));
        assert_eq!(f.e820_ram, ram);
        assert!(
            r.report.core.liveness.verified,
            "it answered: only its memory lies"
        );
    }
}

#[test]
fn record_without_the_workload_is_a_failure() {
    expect(Boot::new(Case::NotRun), "record_failed", &[]);
}

// ---- the serial transport: the port protocol is refused ----

#[test]
fn port_protocol_under_the_serial_transport_is_refused() {
    // The honest port protocol is wrong here: no nonce is made, a challenge read and every
    // record-port line are protocol errors, and the VMM fails the boot itself.
    let mut b = Boot::new(Case::Honest);
    b.serial = true;
    let r = expect(
        b,
        "protocol",
        &[
            "challenge port read under the serial transport",
            "a line on the record port under the serial transport",
            "a line on the record port under the serial transport",
        ],
    );
    assert_eq!(r.report.core.liveness.nonce, None);
    let mut b = Boot::new(Case::ExitEarly);
    b.serial = true;
    expect(b, "exit_before_ready", &[]);
}
