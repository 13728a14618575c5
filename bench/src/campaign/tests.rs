use super::bundle_out::*;
use super::execute::*;
use super::process_launcher::{Attempt, End};
use super::sample::Observed;
use super::schedule::*;
use super::spec::*;
use crate::terminal::progress::{Progress, Style};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use truecold_proof::bundle::{BundleError, BundleInputs, Written};
use truecold_proof::schema::{Configuration, ContractKind, Environment, Mode};
use truecold_proof::schema::{HostKind, Stage};
use truecold_proto::limits::{GuestMem, Vcpus};
use truecold_proto::measure::{now_ns, Stamps};
use truecold_proto::{BootId, ErrorCode, GuestRecord, Workload};

const MIB: u64 = 1 << 20;

/// A launcher that launches nothing: it invents a consistent timeline per slot. Samples whose
/// index is in `fail_at` never reach strict-ready (killed at the deadline); `dup_at` repeats
/// the boot id of sample 0; `stop_after` sets the stop flag after that many launches.
struct Fake<'a> {
    /// Report Linux-shaped observations (a guest record and its boot id).
    linux: bool,
    fail_at: Vec<u64>,
    dup_at: Vec<u64>,
    stop_after: u64,
    stop: &'a AtomicBool,
    launched: AtomicU64,
    /// How long each launch takes (real time), to overload a schedule.
    takes: std::time::Duration,
    /// The campaign's deadline (the attempt carries it).
    deadline_ns: u64,
    /// Advanced by `burn_ns` inside each launch: the fake harness CPU clock.
    cpu: Option<&'a AtomicU64>,
    burn_ns: u64,
    /// Every launch appends `launch <index>`.
    log: Option<&'a Mutex<Vec<String>>>,
    /// The latency origin is the intended time (burst, open loop); set by `run_with`.
    from_intended: AtomicBool,
}

impl Launcher for Fake<'_> {
    type Output = Attempt;
    fn launch(&self, slot: Slot) -> Attempt {
        if let Some(log) = self.log {
            log.lock().unwrap().push(format!("launch {}", slot.index));
        }
        if let Some(cpu) = self.cpu {
            cpu.fetch_add(self.burn_ns, Ordering::SeqCst);
        }
        let k = self.launched.fetch_add(1, Ordering::SeqCst) + 1;
        if self.stop_after != 0 && k >= self.stop_after {
            self.stop.store(true, Ordering::SeqCst);
        }
        let request_ns = now_ns().max(slot.intended_ns);
        // The "boot": at least as long as its stamps (the last, `record`, is 1.006 ms after
        // the request), so a sequential campaign's rows never overlap.
        std::thread::sleep(self.takes.max(std::time::Duration::from_micros(1_100)));
        let failed = self.fail_at.contains(&slot.index);
        let id = if self.dup_at.contains(&slot.index) {
            0
        } else {
            slot.index
        };
        // The "report": the JSON a real VMM prints, read by the real adapter.
        let origin = if self.from_intended.load(Ordering::SeqCst) {
            slot.intended_ns
        } else {
            request_ns
        };
        let stdout = fake_report(
            request_ns,
            id,
            failed,
            self.linux,
            origin + self.deadline_ns,
        );
        Attempt {
            slot,
            request_ns,
            reaped_ns: now_ns(),
            deadline_ns: self.deadline_ns,
            end: if failed {
                End::KilledAtDeadline
            } else {
                End::Exited(0)
            },
            stdout,
            stdout_truncated: false,
            stderr_tail: String::new(),
        }
    }
}

/// What a VMM would print for this fake launch: a report core (stamps every 100 µs from
/// the request, strict-ready unless `failed`) plus the `config.deadline` the verifier reads.
fn fake_report(r: u64, id: u64, failed: bool, linux: bool, deadline_at: u64) -> Vec<u8> {
    use truecold_proto::report::{Liveness, LivenessKind, MemoryFigures, Outcome, ReportCore};
    let boot_id = BootId::parse(&format!("{id:08x}-1111-4222-8333-444444444444"));
    let at = |us: u64| Some(r + us * 1000);
    let mut liveness = Liveness::new(if linux {
        LivenessKind::Binding
    } else {
        LivenessKind::ProbeEcho
    });
    liveness.verified = !failed;
    // Only a Linux guest has a boot id (and a record); the probe has neither.
    liveness.reply_boot_id = if linux && !failed { boot_id } else { None };
    let core = ReportCore {
        schema: truecold_proto::report::REPORT_SCHEMA,
        transport: truecold_proto::kinds::Transport::Ports,
        stamps: Stamps {
            request: Some(r),
            boot_start: at(100),
            kvm_open: at(200),
            vm_created: at(300),
            memory_ready: at(400 + id % 7),
            kernel_loaded: at(500 + id % 7),
            first_run: at(600 + id % 7),
            init_doorbell: at(700 + id % 7),
            ready_doorbell: at(800 + id % 7),
            strict_ready: if failed { None } else { at(900 + id % 7) },
            record: if failed { None } else { at(1000 + id % 7) },
            ..Stamps::default()
        },
        memory_figures: MemoryFigures {
            configured: 64 * MIB,
            memslots: 64 * MIB,
            e820_ram: 64 * MIB,
            e820_hole_reserved: 0,
            guest: Some(64 * MIB),
        },
        backing_obtained: truecold_proto::kinds::ObtainedBacking::Anon4k,
        vmm_rss_bytes: None,
        liveness,
        guest_record: linux.then_some(GuestRecord {
            boot_id,
            t_init_ns: 30_000_000,
            t_ready_ns: 40_000_000,
            t_reply_ns: 40_100_000,
            t_record_ns: 41_000_000,
            mem_configured: 64 * MIB,
            mem_firmware_ram: 64 * MIB,
            mem_total: 50 * MIB,
            mem_present: 64 * MIB - 4096,
            mem_managed: 50 * MIB,
            mem_probe: 4 * MIB,
            cpus: 1,
            platform: truecold_proto::GuestPlatform {
                packages: 1,
                cores_per_package: 1,
                threads_per_core: 1,
                tsc_deadline_timer: true,
                clocksource: truecold_proto::Clocksource::parse("kvm-clock"),
                ..Default::default()
            },
            workload: Workload::BenchOk,
            code: ErrorCode::Ok,
        }),
        protocol_error_count: 0,
        protocol_errors: vec![],
        guest_cmdline: None,
        accounting: None,
        guest_trace: None,
        rip_samples: None,
        containment: None,
        outcome: Outcome {
            ok: !failed,
            failure_kind: failed.then(|| "deadline".to_string()),
            failure: failed.then(|| "the guest did not finish".to_string()),
            guest_exit_code: (!failed).then_some(0),
        },
    };
    let mut v = serde_json::to_value(core).expect("a report serializes");
    v["config"] = serde_json::json!({ "deadline": { "at-ns": deadline_at } });
    v.to_string().into_bytes()
}

/// The real adapter, as the bench uses it.
fn observe(a: &Attempt) -> Result<Observed, String> {
    crate::campaign::vmm_output::observe_attempt(a)
}

fn spec(schedule: Schedule) -> CampaignSpec {
    CampaignSpec {
        observer: truecold_proof::schema::Observer::VmExit,
        interleaved: false,
        stop_after: None,
        schedule,
        contract: ContractKind::Probe,
        vcpus: Vcpus::new(1).unwrap(),
        mem: GuestMem::from_mib(64).unwrap(),
        backing: truecold_proto::kinds::Backing::Anon,
        ram_layout: truecold_proto::kinds::RamLayout::AroundHole,
        cpu_platform: truecold_proto::platform::CpuPlatform::ABSENT,
        deadline_ns: 1_000_000_000,
        kill_grace_ns: 500_000_000,
    }
}

fn facts(contract: ContractKind) -> Environment {
    // A Linux campaign on a kvm_pvm host is a contradiction the verifier reports.
    let kind = match contract {
        ContractKind::Linux => HostKind::Hardware,
        ContractKind::Probe => HostKind::Pvm,
    };
    Environment {
        cpu_model: "test".into(),
        cores: 2,
        host_kernel: "test".into(),
        thp_enabled: "[madvise]".into(),
        thp_defrag: "[madvise]".into(),
        hugepages: "2048kB:0".into(),
        governor: None,
        ..crate::checks::environment::empty_environment(kind)
    }
}

fn run_and_write(
    sp: &CampaignSpec,
    fake: &Fake,
    stop: &AtomicBool,
) -> (Executed, Written, tempfile::TempDir) {
    run_with(sp, fake, stop, &observe, &Harness::plain())
}

fn run_with(
    sp: &CampaignSpec,
    fake: &Fake,
    stop: &AtomicBool,
    observe: &Observe<'_>,
    harness: &Harness<'_>,
) -> (Executed, Written, tempfile::TempDir) {
    fake.from_intended
        .store(sp.mode().has_intended_time(), Ordering::SeqCst);
    let mut progress = Progress::new(Vec::new(), Style::Plain, "t", 0);
    let ex = execute(sp, fake, observe, stop, &mut progress, harness).unwrap();
    let cfg = Configuration {
        vcpus: u32::from(sp.vcpus.get()),
        mem_bytes: sp.mem.bytes(),
        backing: sp.backing.to_string(),
        ram_layout: truecold_proto::kinds::RamLayout::AroundHole,
        cpu_platform: truecold_proto::platform::CpuPlatform::ABSENT,
        cmdline: FAKE_VMM_LINE.into(),
        vmm_path: "/fake/truecold-vmm".into(),
        kernel_path: None,
        initramfs_path: None,
        engine: truecold_proof::schema::EngineInfo {
            kind: truecold_proof::schema::Engine::Truecold,
            version: "truecold-vmm 0.1.0".into(),
        },
        knobs: vec![],
    };
    let mut artifacts = BTreeMap::new();
    artifacts.insert("vmm".into(), "0".repeat(64));
    let result = result_json(sp, &ex, cfg, artifacts, &facts(sp.contract), vec![]);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("results").join("bundle");
    let inputs = BundleInputs {
        // A Linux bundle carries its kernel's config; a probe bundle never does.
        kernel_config: (sp.contract == ContractKind::Linux).then(|| b"CONFIG_X=y\n".to_vec()),
        cmdline: fake_cmdline_txt(sp),
        extra_files: vec![],
        staged_files: vec![],
    };
    let mut inputs = inputs;
    ex.reports
        .add_to(truecold_proof::names::REPORTS_FILE, &mut inputs)
        .unwrap();
    let w = write(&dest, &result, &ex.samples, &inputs).unwrap();
    (ex, w, dir)
}

/// The VMM command the fake campaign "ran".
const FAKE_VMM_LINE: &str = "truecold-vmm boot --probe --vcpus 1 --mem-mib 64 --backing anon";

/// `cmdline.txt` of a fake campaign, in the one format, agreeing with `sp`.
fn fake_cmdline_txt(sp: &CampaignSpec) -> String {
    let explicit = format!(
        "truecold run --{} --vcpus {} --mem-mib {} --backing {} --deadline-ms {}",
        sp.contract.as_str(),
        sp.vcpus,
        sp.mem.mib(),
        sp.backing,
        sp.deadline_ns / 1_000_000
    );
    let vmm = match sp.contract {
        ContractKind::Probe => FAKE_VMM_LINE.to_string(),
        ContractKind::Linux => FAKE_VMM_LINE.replace("--probe", "--kernel /fake/vmlinux"),
    };
    truecold_proof::cmdline::format_cmdline_txt(
        sp.contract.label(),
        &explicit,
        &explicit,
        &vmm,
        None,
    )
}

#[path = "../../tests/common/mod.rs"]
mod common;
use common::sha256sum_check;

fn fake(stop: &AtomicBool) -> Fake<'_> {
    Fake {
        linux: false,
        fail_at: vec![],
        dup_at: vec![],
        stop_after: 0,
        stop,
        launched: AtomicU64::new(0),
        takes: std::time::Duration::ZERO,
        deadline_ns: 1_000_000_000,
        cpu: None,
        burn_ns: 0,
        log: None,
        from_intended: AtomicBool::new(false),
    }
}

#[test]
fn sequential_campaign_writes_a_bundle_that_verifies() {
    let stop = AtomicBool::new(false);
    let f = fake(&stop);
    let sp = spec(Schedule::Sequential { n: 20 });
    let (ex, w, _d) = run_and_write(&sp, &f, &stop);
    assert_eq!(ex.samples.len(), 20);
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 5));
    sha256sum_check(&w.path);
    let r = w.verdict.result.as_ref().unwrap();
    assert_eq!(r.summary.attempts, 20);
    assert_eq!(r.summary.successes, 20);
    assert!(!r.contract.incomplete);
    // The probe label is in the README and result.json.
    let readme = std::fs::read_to_string(w.path.join("README.md")).unwrap();
    assert!(readme.contains("VMM floor (probe guest), not a Linux boot"));
    let rj = std::fs::read_to_string(w.path.join("result.json")).unwrap();
    assert!(rj.contains("VMM floor (probe guest), not a Linux boot"));
    // No temporary directory left next to the bundle.
    let siblings: Vec<_> = std::fs::read_dir(w.path.parent().unwrap())
        .unwrap()
        .collect();
    assert_eq!(siblings.len(), 1);
}

#[test]
fn failures_stay_in_the_data_and_are_scored_at_the_deadline() {
    let stop = AtomicBool::new(false);
    let mut f = fake(&stop);
    f.fail_at = vec![3, 11];
    let sp = spec(Schedule::Burst {
        n: 20,
        concurrency: 2,
    });
    let (ex, w, _d) = run_and_write(&sp, &f, &stop);
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 5));
    sha256sum_check(&w.path);
    assert_eq!(ex.samples.len(), 20, "failed samples are never dropped");
    let r = w.verdict.result.unwrap();
    assert_eq!((r.summary.successes, r.summary.failures), (18, 2));
    assert_eq!(r.summary.errors.get("deadline"), Some(&2));
    let wf = r.summary.headline.with_failures.unwrap();
    assert_eq!(wf.n, 20);
    // 2 of 20 at the deadline: p95 (rank 19) and p99 (rank 20) are the deadline.
    assert_eq!(
        (wf.p95, wf.p99, wf.max),
        (sp.deadline_ns, sp.deadline_ns, sp.deadline_ns)
    );
    let ok = r.summary.headline.successes.unwrap();
    assert_eq!(ok.n, 18);
    assert!(ok.max < sp.deadline_ns);
    // Burst: every sample due at t0, the queue stage present.
    let t0 = ex.samples[0].intended_request_ns.unwrap();
    assert!(ex.samples.iter().all(|s| s.intended_request_ns == Some(t0)));
    assert!(ex.run_facts.max_start_lag_ns.is_some());
}

#[test]
fn interrupted_campaign_writes_a_valid_partial_bundle_marked_incomplete() {
    let stop = AtomicBool::new(false);
    let mut f = fake(&stop);
    f.stop_after = 7;
    let sp = spec(Schedule::Churn {
        n: 1000,
        concurrency: 2,
    });
    let (ex, w, _d) = run_and_write(&sp, &f, &stop);
    assert!(ex.interrupted);
    assert!((7..=8).contains(&ex.samples.len()), "{}", ex.samples.len());
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 5));
    sha256sum_check(&w.path);
    let r = w.verdict.result.unwrap();
    assert!(r.contract.incomplete);
    let readme = std::fs::read_to_string(w.path.join("README.md")).unwrap();
    assert!(readme.contains("INCOMPLETE"), "{readme}");
    assert!(r
        .environment
        .warnings
        .iter()
        .any(|w| w.contains("interrupted")));
}

#[test]
fn repeated_boot_id_is_written_and_flagged_by_the_verifier() {
    let stop = AtomicBool::new(false);
    let mut f = fake(&stop);
    f.linux = true;
    f.dup_at = vec![5];
    let mut sp = spec(Schedule::Sequential { n: 8 });
    sp.contract = ContractKind::Linux;
    let (ex, w, _d) = run_and_write(&sp, &f, &stop);
    assert_eq!(ex.repeated_boot_ids, 1);
    assert_eq!(ex.samples[5].error_kind, "repeated_boot_id");
    assert!(!w.verdict.is_valid());
    assert!(w
        .verdict
        .has(truecold_proof::verify::Check::DuplicateBootId));
    sha256sum_check(&w.path);
    let r = w.verdict.result.unwrap();
    assert!(r
        .environment
        .warnings
        .iter()
        .any(|w| w.contains("CONTRACT VIOLATION")));
}

#[test]
fn sweep_and_open_loop_bundles_verify() {
    let stop = AtomicBool::new(false);
    let f = fake(&stop);
    let sp = spec(Schedule::Sweep {
        n_per_level: 4,
        max_concurrency: 3,
    });
    let (_ex, w, _d) = run_and_write(&sp, &f, &stop);
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 5));
    let r = w.verdict.result.unwrap();
    assert_eq!(r.summary.by_concurrency.len(), 3);
    // The knee is truecold-proof's definition over these levels (none, or one of them).
    assert_eq!(
        r.summary.knee_concurrency,
        truecold_proof::summary::knee(&r.summary.by_concurrency)
    );

    let f = fake(&stop);
    let sp = spec(Schedule::OpenLoop {
        n: 10,
        interval_ns: 1_000_000,
        max_in_flight: 2,
    });
    let (ex, w, _d) = run_and_write(&sp, &f, &stop);
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 5));
    assert!(ex.samples.iter().all(|s| s.concurrency == 0));
    let t0 = ex.samples[0].intended_request_ns.unwrap();
    for s in &ex.samples {
        assert_eq!(s.intended_request_ns, Some(t0 + s.index * 1_000_000));
    }
    assert_eq!(
        w.verdict.result.unwrap().contract.mode,
        Mode::OpenLoop {
            count: 10,
            rate_per_ks: 1_000_000
        }
    );
}

#[test]
fn rate_and_slug() {
    assert_eq!(rate_per_ks(1_000_000_000), 1000);
    assert_eq!(rate_per_ks(400_000_000), 2500);
    assert_eq!(rate_per_ks(3), 333_333_333_333);
    assert_eq!(rate_per_ks(0), 0);
    let mut sp = spec(Schedule::Sequential { n: 1 });
    assert_eq!(sp.slug(), "probe-floor-sequential-1vcpu-64mib");
    sp.contract = ContractKind::Linux;
    sp.vcpus = Vcpus::new(2).unwrap();
    sp.mem = GuestMem::from_mib(16384).unwrap();
    assert_eq!(sp.slug(), "linux-sequential-2vcpu-16384mib");
}

#[test]
fn a_bundle_is_never_overwritten_and_no_temporary_directory_is_left() {
    let stop = AtomicBool::new(false);
    let f = fake(&stop);
    let sp = spec(Schedule::Sequential { n: 3 });
    let (ex, w, _d) = run_and_write(&sp, &f, &stop);
    let before = std::fs::read(w.path.join("SHA256SUMS")).unwrap();
    let r = w.verdict.result.clone().unwrap();
    let inputs = BundleInputs {
        kernel_config: None,
        cmdline: "again".into(),
        extra_files: vec![],
        staged_files: vec![],
    };
    let e = write(&w.path, &r, &ex.samples, &inputs).unwrap_err();
    assert!(matches!(e, BundleError::Exists(_)), "{e:?}");
    assert_eq!(std::fs::read(w.path.join("SHA256SUMS")).unwrap(), before);
    let names: Vec<String> = std::fs::read_dir(w.path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["bundle".to_string()]);
    sha256sum_check(&w.path);
}

#[test]
fn interrupted_before_any_launch_still_writes_a_valid_empty_bundle() {
    let stop = AtomicBool::new(true);
    let f = fake(&stop);
    let sp = spec(Schedule::Sequential { n: 10 });
    let (ex, w, _d) = run_and_write(&sp, &f, &stop);
    assert!(ex.interrupted);
    assert!(ex.samples.is_empty());
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 5));
    sha256sum_check(&w.path);
    assert!(w.verdict.result.unwrap().contract.incomplete);
}

/// Open loop under overload: each launch takes 300 ms, arrivals come every 1 ms, one in
/// flight, deadline 100 ms + 50 ms kill grace. Arrival 0 is launched; by the time a lane is
/// free again every other arrival is more than 150 ms late: none of them is launched, each is
/// a `deadline` row at once, and the bundle verifies.
#[test]
fn overloaded_open_loop_arrivals_past_deadline_and_grace_are_not_launched() {
    let stop = AtomicBool::new(false);
    let mut f = fake(&stop);
    f.takes = std::time::Duration::from_millis(300);
    f.deadline_ns = 100_000_000;
    let mut sp = spec(Schedule::OpenLoop {
        n: 10,
        interval_ns: 1_000_000,
        max_in_flight: 1,
    });
    sp.deadline_ns = 100_000_000;
    sp.kill_grace_ns = 50_000_000;
    let (ex, w, _d) = run_and_write(&sp, &f, &stop);
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 5));
    assert_eq!(ex.samples.len(), 10, "every arrival is a row");
    let launched = f.launched.load(Ordering::SeqCst);
    assert_eq!(launched, 1, "only arrival 0 came up in time");
    assert_eq!(ex.expired, 9);
    assert!(ex.samples[0].ok, "{:?}", ex.samples[0]);
    for s in &ex.samples[1..] {
        assert!(!s.ok);
        assert_eq!(s.error_kind, "deadline", "{s:?}");
        assert!(
            s.error_detail.starts_with("not launched: its turn came "),
            "{}",
            s.error_detail
        );
        assert!(s
            .error_detail
            .contains("100 ms deadline + 50 ms kill grace"));
        assert_eq!((s.ready_ns, s.latency_ns), (None, None));
        let late = s.actual_request_ns - s.intended_request_ns.unwrap();
        assert!(
            late >= 150_000_000,
            "sample {} only {late} ns late",
            s.index
        );
        assert_eq!(s.stages.get(Stage::Queue), Some(late));
        assert_eq!(s.stages.get(Stage::Spawn), None, "nothing was spawned");
    }
    let r = w.verdict.result.unwrap();
    assert_eq!(r.summary.errors.get("deadline"), Some(&9));
    assert!(r
        .environment
        .warnings
        .iter()
        .any(|w| w.contains("9 arrival(s)") && w.contains("were not launched")));
}

/// The same overload in a burst (every sample due at t0) is cut the same way; a closed loop
/// has no intended time to fall behind, so a slow one launches everything.
#[test]
fn expiry_applies_to_intended_times_only() {
    let stop = AtomicBool::new(false);
    let mut f = fake(&stop);
    f.takes = std::time::Duration::from_millis(300);
    f.deadline_ns = 100_000_000;
    let mut sp = spec(Schedule::Burst {
        n: 4,
        concurrency: 1,
    });
    sp.deadline_ns = 100_000_000;
    sp.kill_grace_ns = 50_000_000;
    let (ex, w, _d) = run_and_write(&sp, &f, &stop);
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 5));
    assert_eq!(f.launched.load(Ordering::SeqCst), 1);
    assert_eq!(ex.expired, 3);

    let mut f = fake(&stop);
    f.takes = std::time::Duration::from_millis(300);
    f.deadline_ns = 100_000_000;
    sp.schedule = Schedule::Sequential { n: 3 };
    let (ex, w, _d) = run_and_write(&sp, &f, &stop);
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 5));
    assert_eq!(f.launched.load(Ordering::SeqCst), 3);
    assert_eq!(ex.expired, 0);
    assert!(ex.samples.iter().all(|s| s.ok));
}

/// Sequential: sample i's bookkeeping (its report parsed into a row) happens before sample
/// i+1 is launched, and the harness CPU in the measured windows counts what the launches
/// burned (7 ms each on a fake CPU clock), not the bookkeeping (11 ms each).
#[test]
fn sequential_bookkeeping_is_outside_the_windows_and_their_cpu_is_recorded() {
    let stop = AtomicBool::new(false);
    let cpu = AtomicU64::new(1_000);
    let log = Mutex::new(Vec::new());
    let mut f = fake(&stop);
    f.cpu = Some(&cpu);
    f.burn_ns = 7_000_000;
    f.log = Some(&log);
    let observe_logged = |a: &Attempt| {
        log.lock().unwrap().push(format!("row {}", a.slot.index));
        cpu.fetch_add(11_000_000, Ordering::SeqCst);
        observe(a)
    };
    let cpu_ns = || cpu.load(Ordering::SeqCst);
    let harness = Harness {
        before_each: None,
        cpu_ns: &cpu_ns,
        staging: None,
        parallel: None,
    };
    let sp = spec(Schedule::Sequential { n: 5 });
    let (ex, w, _d) = run_with(&sp, &f, &stop, &observe_logged, &harness);
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 5));
    let want: Vec<String> = (0..5)
        .flat_map(|i| [format!("launch {i}"), format!("row {i}")])
        .collect();
    assert_eq!(*log.lock().unwrap(), want);
    let (in_cpu, in_wall) = ex.run_facts.in_window.unwrap();
    assert_eq!(in_cpu, 5 * 7_000_000);
    assert!(in_wall > 0);
    let h = &w.verdict.result.unwrap().environment.harness;
    assert_eq!(h.in_window_cpu_ns, Some(5 * 7_000_000));
    assert_eq!(h.in_window_wall_ns, Some(in_wall));
    assert_eq!(h.page_cache_dropped, None, "not asked");
}

/// Concurrent lanes: overlapping windows count once, and every launch's CPU is inside them.
#[test]
fn overlapping_windows_count_their_cpu_once() {
    let stop = AtomicBool::new(false);
    let cpu = AtomicU64::new(0);
    let mut f = fake(&stop);
    f.cpu = Some(&cpu);
    f.burn_ns = 7_000_000;
    f.takes = std::time::Duration::from_millis(2);
    let cpu_ns = || cpu.load(Ordering::SeqCst);
    let harness = Harness {
        before_each: None,
        cpu_ns: &cpu_ns,
        staging: None,
        parallel: None,
    };
    let sp = spec(Schedule::Churn {
        n: 12,
        concurrency: 3,
    });
    let (ex, w, _d) = run_with(&sp, &f, &stop, &observe, &harness);
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 5));
    // No bookkeeping burns CPU here: all of it happened inside some window, once.
    assert_eq!(ex.run_facts.in_window.unwrap().0, 12 * 7_000_000);
}

/// `--drop-caches` as the campaign sees it: the hook runs before every launch and after the
/// previous row, its count is recorded in the bundle, and a failure is a warning naming it.
#[test]
fn before_each_runs_outside_the_window_and_is_recorded() {
    let stop = AtomicBool::new(false);
    let cpu = AtomicU64::new(0);
    let log = Mutex::new(Vec::new());
    let calls = AtomicU64::new(0);
    let mut f = fake(&stop);
    f.cpu = Some(&cpu);
    f.burn_ns = 1_000;
    f.log = Some(&log);
    let prep = || {
        log.lock().unwrap().push("drop".to_string());
        // The drop's own (system) CPU must not land in any window.
        cpu.fetch_add(50_000_000, Ordering::SeqCst);
        match calls.fetch_add(1, Ordering::SeqCst) {
            2 => Err(std::io::Error::other("refused")),
            _ => Ok(()),
        }
    };
    let cpu_ns = || cpu.load(Ordering::SeqCst);
    let harness = Harness {
        before_each: Some(&prep),
        cpu_ns: &cpu_ns,
        staging: None,
        parallel: None,
    };
    let sp = spec(Schedule::Sequential { n: 4 });
    let (ex, w, _d) = run_with(&sp, &f, &stop, &observe, &harness);
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 5));
    let want: Vec<String> = (0..4)
        .flat_map(|i| ["drop".to_string(), format!("launch {i}")])
        .collect();
    assert_eq!(*log.lock().unwrap(), want);
    assert_eq!(ex.run_facts.in_window.unwrap().0, 4 * 1_000);
    let r = w.verdict.result.unwrap();
    assert_eq!(r.environment.harness.page_cache_dropped, Some(3));
    assert!(
        r.environment.warnings.iter().any(|w| w
            .contains("dropped before only 3 of 4 launched samples (before sample 2: refused)")),
        "{:?}",
        r.environment.warnings
    );
}

#[test]
fn the_contract_is_on_the_host_kinds_clock_and_says_whether_it_is_interleaved() {
    use truecold_proof::schema::Clock;
    let stop = AtomicBool::new(false);
    let f = fake(&stop);
    let mut sp = spec(Schedule::Sequential { n: 3 });
    let (ex, w, _d) = run_and_write(&sp, &f, &stop);
    // A plain campaign: the host kind's clock (the probe fixture's host is pvm: wall), not
    // interleaved, no knobs; and the bundle verifies.
    let r = w.verdict.result.as_ref().unwrap();
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 5));
    assert_eq!(r.environment.host_kind, HostKind::Pvm);
    assert_eq!(r.contract.clock, Clock::Wall);
    assert!(!r.contract.interleaved);
    assert!(r.configuration.knobs.is_empty());
    let cfg = r.configuration.clone();
    // The clock follows the host kind, one per kind.
    for kind in HostKind::ALL {
        let facts = Environment {
            host_kind: kind,
            ..facts(ContractKind::Probe)
        };
        let got = result_json(&sp, &ex, cfg.clone(), BTreeMap::new(), &facts, vec![]);
        assert_eq!(got.contract.clock, kind.clock(), "{kind}");
    }
    let nested = Environment {
        host_kind: HostKind::NestedEmulated,
        ..facts(ContractKind::Probe)
    };
    let got = result_json(&sp, &ex, cfg.clone(), BTreeMap::new(), &nested, vec![]);
    assert_eq!(got.contract.clock, Clock::Virtual);
    // One arm of an interleaved run says so.
    sp.interleaved = true;
    let got = result_json(&sp, &ex, cfg, BTreeMap::new(), &nested, vec![]);
    assert!(got.contract.interleaved);
}

/// The fail-fast rule: K consecutive failures of one kind stop a sequential campaign; the
/// bundle is written, VALID, marked STOPPED with that kind, and not "interrupted".
#[test]
fn k_identical_failures_in_a_row_stop_the_campaign_and_the_bundle_verifies() {
    let stop = AtomicBool::new(false);
    let mut f = fake(&stop);
    f.fail_at = (5..1000).collect();
    let mut sp = spec(Schedule::Sequential { n: 50 });
    sp.stop_after = Some(3);
    let (ex, w, _d) = run_and_write(&sp, &f, &stop);
    // Rows 0–4 succeed, 5, 6 and 7 fail alike: nothing after row 7 is launched.
    assert_eq!(ex.samples.len(), 8);
    assert_eq!(f.launched.load(Ordering::SeqCst), 8);
    assert!(!ex.interrupted);
    let kind = ex.samples[7].error_kind.clone();
    assert!(!kind.is_empty());
    assert_eq!(ex.stopped.as_deref(), Some(kind.as_str()));
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 5));
    sha256sum_check(&w.path);
    let r = w.verdict.result.as_ref().unwrap();
    assert!(r.contract.incomplete);
    assert_eq!(r.contract.stop_after, Some(3));
    assert_eq!(r.contract.stopped.as_deref(), Some(kind.as_str()));
    let readme = std::fs::read_to_string(w.path.join("README.md")).unwrap();
    assert!(
        readme.contains("**STOPPED:** 3 consecutive launches"),
        "{readme}"
    );
    assert!(w.verdict.render(&w.path, 5).contains("STOPPED after 3"));
    assert!(r
        .environment
        .warnings
        .iter()
        .any(|w| w.starts_with("stopped:")));
}

/// Failures that never come K alike in a row, a run that ends at the last planned launch,
/// and no rule at all (`--keep-going`): every launch is made.
#[test]
fn the_fail_fast_rule_stops_nothing_else() {
    let stop = AtomicBool::new(false);
    for (fail_at, stop_after) in [
        (
            (0..20).filter(|i| i % 2 == 1).collect::<Vec<u64>>(),
            Some(2),
        ),
        ((17..20).collect(), Some(3)),
        ((0..20).collect(), None),
    ] {
        let mut f = fake(&stop);
        f.fail_at = fail_at.clone();
        let mut sp = spec(Schedule::Sequential { n: 20 });
        sp.stop_after = stop_after;
        let (ex, w, _d) = run_and_write(&sp, &f, &stop);
        assert_eq!(ex.samples.len(), 20, "{fail_at:?} {stop_after:?}");
        assert!(ex.stopped.is_none() && !ex.interrupted);
        assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 5));
        let r = w.verdict.result.as_ref().unwrap();
        assert_eq!(r.contract.stop_after, stop_after);
        assert!(r.contract.stopped.is_none() && !r.contract.incomplete);
    }
}

/// Rows finishing out of order (a burst of 4 lanes) are staged in index order: the bundle's
/// `samples.csv` is the canonical writer's bytes for the rows read back, and its
/// `reports.jsonl` is the staged evidence, one line per row, index 0 to n − 1.
#[test]
fn staged_rows_and_evidence_are_the_bundles_bytes_in_index_order() {
    let stop = AtomicBool::new(false);
    let f = fake(&stop);
    let sp = spec(Schedule::Burst {
        n: 12,
        concurrency: 4,
    });
    let (ex, w, _d) = run_and_write(&sp, &f, &stop);
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 5));
    let csv = std::fs::read(w.path.join("samples.csv")).unwrap();
    assert_eq!(
        csv,
        truecold_proof::csv::write_samples(&ex.samples).into_bytes()
    );
    let reports = std::fs::read(w.path.join("reports.jsonl")).unwrap();
    assert_eq!(reports, ex.reports.to_vec().unwrap());
    let idx: Vec<u64> = reports
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            serde_json::from_slice::<truecold_proof::reports::ReportLine>(l)
                .unwrap()
                .index
        })
        .collect();
    assert_eq!(idx, (0..12).collect::<Vec<u64>>());
    assert!(ex.staging_notes.is_empty(), "{:?}", ex.staging_notes);
}
