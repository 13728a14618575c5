use super::*;
use crate::campaign::schedule::Slot;
use truecold_proto::kinds::ErrorKind;
use truecold_proto::measure::Stage;

const MIB: u64 = 1 << 20;

fn boot_id(n: u8) -> BootId {
    BootId::parse(&format!("{n:08x}-0000-4000-8000-000000000000")).unwrap()
}

/// A healthy attempt: request at 1000, stamps every 100 ns after, reaped at 5000.
fn attempt(index: u64, intended: u64) -> Attempt {
    Attempt {
        slot: Slot {
            index,
            level: 2,
            intended_ns: intended,
        },
        request_ns: 1000,
        reaped_ns: 5000,
        deadline_ns: 10_000,
        end: End::Exited(0),
        stdout: Vec::new(),
        stdout_truncated: false,
        stderr_tail: String::new(),
    }
}

fn observed(linux: bool, id: u8) -> Observed {
    Observed {
        stamps: Stamps {
            boot_start: Some(1100),
            kvm_open: Some(1200),
            vm_created: Some(1300),
            memory_ready: Some(1400),
            kernel_loaded: Some(1500),
            first_run: Some(1600),
            init_doorbell: Some(1700),
            ready_doorbell: Some(1800),
            strict_ready: Some(1900),
            record: Some(2000),
            exit: Some(2100),
            teardown_done: Some(2200),
            ..Stamps::default()
        },
        strict_ready_verified: true,
        memslots: Some(128 * MIB),
        e820_usable: Some(128 * MIB),
        guest_ram: Some(128 * MIB),
        boot_id: linux.then(|| boot_id(id)),
        guest: linux.then(|| GuestRecord {
            boot_id: Some(boot_id(id)),
            t_init_ns: 40_000,
            t_ready_ns: 55_000,
            t_reply_ns: 56_000,
            t_record_ns: 60_000,
            mem_configured: 128 * MIB,
            mem_firmware_ram: 128 * MIB,
            mem_total: 100 * MIB,
            mem_present: 128 * MIB - 4096,
            mem_managed: 100 * MIB,
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
        guest_exit_code: Some(0),
        protocol_errors: 0,
        error: None,
        cmdline: None,
        backing: None,
        host_mapping: None,
        mapping_error: None,
    }
}

fn ctx(contract: ContractKind, intended: bool) -> RowContext {
    RowContext {
        contract,
        intended,
        concurrency_override: None,
        mem_bytes: 128 * MIB,
        vcpus: 1,
        observer: truecold_proto::kinds::Observer::VmExit,
        engine: truecold_proto::kinds::Engine::Truecold,
        backing: truecold_proto::kinds::Backing::Anon,
        ram_layout: truecold_proto::kinds::RamLayout::AroundHole,
        cpu_platform: truecold_proto::platform::CpuPlatform::ABSENT,
    }
}

#[test]
fn success_stages_tile_the_headline() {
    let s = to_sample(
        &attempt(3, 1000),
        Some(&observed(true, 1)),
        None,
        &ctx(ContractKind::Linux, false),
    );
    assert!(s.ok, "{} {}", s.error_kind, s.error_detail);
    assert_eq!(s.index, 3);
    assert_eq!(s.concurrency, 2);
    assert_eq!(s.intended_request_ns, None);
    assert_eq!(s.latency_ns, Some(900));
    assert_eq!(s.latency_ns, s.derived_latency());
    assert_eq!(s.host_stage_sum(), 900);
    assert_eq!(s.stages.get(Stage::Queue), None);
    assert_eq!(s.stages.get(Stage::Spawn), Some(100));
    assert_eq!(s.stages.get(Stage::Vcpus), Some(100));
    assert_eq!(s.stages.get(Stage::Workload), Some(100));
    assert_eq!(s.stages.get(Stage::Teardown), Some(3000));
    assert_eq!(s.stages.get(Stage::GuestKernelToInit), Some(40_000));
    assert_eq!(s.stages.get(Stage::GuestInitToReady), Some(15_000));
    assert_eq!(s.workload, "BENCH_OK");
    assert_eq!(s.guest_cpus, Some(1));
    assert_eq!(s.boot_id, Some(boot_id(1)));
}

#[test]
fn intended_time_adds_the_queue_stage_and_moves_the_origin() {
    // Due at 400, spawned at 1000: 600 ns of the harness's queueing count.
    let s = to_sample(
        &attempt(0, 400),
        Some(&observed(false, 1)),
        None,
        &ctx(ContractKind::Probe, true),
    );
    assert!(s.ok, "{}", s.error_detail);
    assert_eq!(s.intended_request_ns, Some(400));
    assert_eq!(s.stages.get(Stage::Queue), Some(600));
    assert_eq!(s.latency_ns, Some(1500));
    assert_eq!(s.host_stage_sum(), 1500);
    // A probe row carries no Linux guest data and no boot id, but the probe's RAM figure.
    assert_eq!(s.stages.get(Stage::GuestKernelToInit), None);
    assert_eq!(s.guest_mem_total, None);
    assert_eq!(s.workload, "");
    assert_eq!(s.boot_id, None);
    assert_eq!(s.guest_mem_firmware, Some(128 * MIB));
}

#[test]
fn open_loop_concurrency_column_is_overridden() {
    let mut c = ctx(ContractKind::Probe, true);
    c.concurrency_override = Some(0);
    let s = to_sample(&attempt(0, 1000), Some(&observed(false, 1)), None, &c);
    assert_eq!(s.concurrency, 0);
}

fn kind_of(a: &Attempt, o: Option<&Observed>, rep: Option<&str>, c: &RowContext) -> (bool, String) {
    let s = to_sample(a, o, rep, c);
    assert_eq!(s.ok, s.error_kind.is_empty());
    assert_eq!(s.latency_ns, s.derived_latency());
    assert_eq!(
        s.host_mem_configured,
        128 * MIB,
        "every row carries the configured size"
    );
    (s.ok, s.error_kind)
}

#[test]
fn every_failure_is_kept_with_a_typed_kind() {
    let linux = ctx(ContractKind::Linux, false);
    let good = observed(true, 1);
    let k = |a: &Attempt, o: Option<&Observed>| kind_of(a, o, None, &linux).1;

    let mut a = attempt(0, 1000);
    a.end = End::SpawnFailed("no such file".into());
    assert_eq!(k(&a, None), "spawn_failed");
    a.end = End::KilledAtDeadline;
    assert_eq!(k(&a, None), "deadline");
    a.end = End::Signalled(11);
    assert_eq!(k(&a, None), "vmm_signal");
    a.end = End::HarnessIo("poll".into());
    assert_eq!(k(&a, None), "harness_io");
    a.end = End::Exited(1);
    assert_eq!(
        kind_of(&a, None, Some("expected value at line 1"), &linux).1,
        "bad_report"
    );

    let a = attempt(0, 1000);
    let mut o = good.clone();
    o.error = Some((
        ErrorKind::vmm("kvm_run").unwrap(),
        "KVM_RUN: internal error".into(),
    ));
    assert_eq!(k(&a, Some(&o)), "vmm_kvm_run");

    // The VMM's deadline: before strict-ready it is `deadline`; after a verified
    // strict-ready in time, the overrun is post-ready and typed as such.
    let mut o = good.clone();
    o.error = Some((ErrorKind::Deadline, "the guest did not finish".into()));
    assert_eq!(k(&a, Some(&o)), "post_ready_overrun");
    o.stamps.strict_ready = None;
    assert_eq!(k(&a, Some(&o)), "deadline");
    let mut killed = attempt(0, 1000);
    killed.end = End::KilledAtDeadline;
    assert_eq!(k(&killed, Some(&good)), "post_ready_overrun");

    // A guest that wrote a failing code to the exit port is typed by its code.
    let mut o = good.clone();
    o.guest_exit_code = Some(ErrorCode::MemFirmwareMismatch as u8);
    o.error = Some((ErrorKind::vmm("exit_code").unwrap(), "exit code 41".into()));
    assert_eq!(k(&a, Some(&o)), "guest_mem_firmware_mismatch");

    // Protocol errors fail an otherwise good row.
    let mut o = good.clone();
    o.protocol_errors = 2;
    assert_eq!(k(&a, Some(&o)), "guest_protocol");

    let mut o = good.clone();
    o.stamps.strict_ready = None;
    assert_eq!(k(&a, Some(&o)), "no_strict_ready");

    // Ready, but after the deadline: a failure scored at the deadline.
    let mut o = good.clone();
    o.stamps.strict_ready = Some(1000 + 10_001);
    assert_eq!(k(&a, Some(&o)), "deadline");
    let mut o = good.clone();
    o.stamps.strict_ready = Some(1000 + 10_000);
    o.stamps.record = Some(1000 + 10_100);
    assert!(
        kind_of(&a, Some(&o), None, &linux).0,
        "exactly at the deadline is in time"
    );

    let mut o = good.clone();
    o.guest.as_mut().unwrap().code = ErrorCode::MemFirmwareMismatch;
    assert_eq!(k(&a, Some(&o)), "guest_mem_firmware_mismatch");

    let mut o = good.clone();
    o.guest.as_mut().unwrap().workload = Workload::Failed(ErrorCode::WorkloadDigest);
    assert_eq!(k(&a, Some(&o)), "workload");

    let mut o = good.clone();
    o.guest = None;
    assert_eq!(k(&a, Some(&o)), "no_record");

    let mut ex = attempt(0, 1000);
    ex.end = End::Exited(2);
    assert_eq!(k(&ex, Some(&good)), "vmm_exit");

    let mut o = good.clone();
    o.memslots = Some(127 * MIB);
    assert_eq!(k(&a, Some(&o)), "memory_mismatch");

    let mut o = good.clone();
    o.boot_id = None;
    assert_eq!(
        k(&a, Some(&o)),
        "no_boot_id",
        "the record's boot id alone is not the verified reply's"
    );

    // A VMM that failed before the guest ran: its kebab-case kind, typed.
    let mut ex = attempt(0, 1000);
    ex.end = End::Exited(1);
    let o = Observed {
        error: Some((
            ErrorKind::vmm("kernel-missing").unwrap(),
            "cannot open kernel".into(),
        )),
        ..Observed::default()
    };
    assert_eq!(k(&ex, Some(&o)), "vmm_kernel_missing");
}

/// Every success criterion of the verifier is applied by `classify` too: a row that fails
/// one is a typed failure, never `ok`.
#[test]
fn rows_failing_a_verifier_criterion_are_never_ok() {
    let linux = ctx(ContractKind::Linux, false);
    let probe = ctx(ContractKind::Probe, false);
    let a = attempt(0, 1000);
    let k = |o: &Observed, c: &RowContext| kind_of(&a, Some(o), None, c).1;
    let good = observed(true, 1);
    assert_eq!(k(&good, &linux), "");
    assert_eq!(k(&observed(false, 1), &probe), "");

    // Strict-ready needs the verified liveness answer, not just a stamp.
    for c in [&linux, &probe] {
        let mut o = observed(c.contract == ContractKind::Linux, 1);
        o.strict_ready_verified = false;
        assert_eq!(k(&o, c), "no_strict_ready");
    }

    // Memory: the guest's own figure (the probe's too), memslots, E820, MemTotal.
    let mut o = good.clone();
    o.guest.as_mut().unwrap().mem_firmware_ram = 127 * MIB;
    assert_eq!(k(&o, &linux), "memory_mismatch");
    let mut o = observed(false, 1);
    o.guest_ram = Some(127 * MIB);
    assert_eq!(k(&o, &probe), "memory_mismatch");
    let mut o = observed(false, 1);
    o.e820_usable = Some(129 * MIB);
    assert_eq!(k(&o, &probe), "memory_mismatch");
    // The zone rule: Σpresent = the firmware RAM less page 0, MemTotal = Σmanaged, managed
    // ≤ present. A kernel that keeps far more than the old calibrated bound allowed (93 of
    // 128 MiB managed) passes when its figures add up.
    let zones = |present: u64, managed: u64, total: u64| {
        let mut o = good.clone();
        let g = o.guest.as_mut().unwrap();
        (g.mem_present, g.mem_managed, g.mem_total) = (present, managed, total);
        o
    };
    let fw_less_t = 128 * MIB - 4096;
    assert_eq!(k(&zones(fw_less_t, 93 * MIB, 93 * MIB), &linux), "");
    for (present, managed, total) in [
        (fw_less_t - 4096, 100 * MIB, 100 * MIB),
        (128 * MIB, 100 * MIB, 100 * MIB),
        (fw_less_t, 100 * MIB, 100 * MIB + 4096),
        (fw_less_t, 128 * MIB, 128 * MIB),
        (0, 0, 0),
    ] {
        assert_eq!(
            k(&zones(present, managed, total), &linux),
            "memory_mismatch",
            "present {present}, managed {managed}, MemTotal {total}"
        );
    }

    // CPUs: the guest saw what was configured.
    let mut o = good.clone();
    o.guest.as_mut().unwrap().cpus = 2;
    assert_eq!(k(&o, &linux), "cpu_mismatch");

    // Timeline: host stages tile the headline, Linux has both guest-clock stages.
    let mut o = good.clone();
    o.stamps.init_doorbell = None;
    assert_eq!(k(&o, &linux), "incomplete_timeline");
    let mut o = observed(false, 1);
    o.stamps.boot_start = None;
    assert_eq!(k(&o, &probe), "incomplete_timeline");
    let mut o = good.clone();
    o.guest.as_mut().unwrap().t_init_ns = 0;
    assert_eq!(k(&o, &linux), "incomplete_timeline");
}

#[test]
fn error_detail_is_one_bounded_line() {
    let mut a = attempt(0, 1000);
    a.end = End::Exited(1);
    a.stderr_tail = format!("{}\nroot cause: bad\n", "x".repeat(2000));
    let s = to_sample(&a, None, None, &ctx(ContractKind::Probe, false));
    assert!(!s.error_detail.contains('\n'));
    assert!(s.error_detail.chars().count() <= MAX_DETAIL + 1);
    assert!(s.error_detail.ends_with("root cause: bad"));
}

#[test]
fn repeated_boot_id_is_a_contract_violation() {
    let c = ctx(ContractKind::Linux, false);
    let mut rows: Vec<Sample> = [1u8, 2, 1, 3, 2]
        .iter()
        .enumerate()
        .map(|(i, id)| {
            to_sample(
                &attempt(i as u64, 1000),
                Some(&observed(true, *id)),
                None,
                &c,
            )
        })
        .collect();
    assert!(rows.iter().all(|s| s.ok));
    assert_eq!(mark_repeated_boot_ids(&mut rows), 2);
    let kinds: Vec<&str> = rows.iter().map(|s| s.error_kind.as_str()).collect();
    assert_eq!(kinds, ["", "", "repeated_boot_id", "", "repeated_boot_id"]);
    assert!(rows[2].error_detail.contains("sample 0"));
    assert!(rows[4].error_detail.contains("sample 1"));
    assert_eq!(
        rows[2].boot_id,
        Some(boot_id(1)),
        "the row keeps the evidence"
    );
}
