use super::arm_rows::*;
use super::arm_setup::*;
use super::arms_dir::*;
use super::engines_error::*;
use super::engines_spec::*;
use super::rounds::*;
use crate::artifacts::guest_files::LinuxGuest;
use crate::campaign::sample::RowContext;
use crate::plan::campaign_plan::CampaignPlan;
use crate::terminal::progress::Progress;
use crate::terminal::progress::Style;
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use truecold_engine::driver::{Launched, ProcessEnd};
use truecold_engine::{Guest, Launch};
use truecold_proof::reports::ReportLine;
use truecold_proof::schema::{Environment, Sample};
use truecold_proto::kinds::RamLayout;
use truecold_proto::kinds::{Backing, Engine, HostKind, ObtainedBacking};
use truecold_proto::limits::{GuestMem, Vcpus};
use truecold_proto::measure::now_ns;
use truecold_proto::measure::Stamps;
use truecold_proto::report::EngineRun;
use truecold_proto::report::{
    HostMapping, Liveness, LivenessKind, MemoryFigures, Outcome, ProcessExit, ReportCore,
};
use truecold_proto::{BootId, ErrorCode, GuestRecord, Workload};

const MIB: u64 = 1 << 20;
const MEM: u64 = 256 * MIB;
const DEADLINE: u64 = 1_000_000_000;

fn spec(arms: &[Engine], rounds: u64) -> EnginesSpec {
    EnginesSpec {
        arms: arms.to_vec(),
        rounds,
        seed: 11,
        vcpus: Vcpus::new(2).unwrap(),
        mem: GuestMem::from_bytes(MEM).unwrap(),
        backings: vec![Backing::Anon; arms.len()],
        ram_layout: RamLayout::ABSENT,
        deadline_ns: DEADLINE,
        kill_grace_ns: 100_000_000,
        observer: truecold_proof::schema::Observer::Serial,
        interleaved: true,
    }
}

fn boot_id(n: u64) -> BootId {
    BootId::parse(&format!("{n:08x}-1111-4222-8333-444444444444")).expect("valid")
}

/// `engine`'s record when truecold-vmm lays RAM out `layout` (a peer's layout is its own).
fn record_in(engine: Engine, layout: RamLayout, id: BootId) -> GuestRecord {
    let layout = if engine == Engine::Truecold {
        layout
    } else {
        RamLayout::ABSENT
    };
    GuestRecord {
        boot_id: Some(id),
        t_init_ns: 30_000_000,
        t_ready_ns: 40_000_000,
        t_reply_ns: 40_100_000,
        t_record_ns: 41_000_000,
        mem_configured: MEM,
        mem_firmware_ram: engine.expected_firmware_ram(MEM, layout),
        mem_total: MEM - 20 * MIB,
        mem_present: engine.expected_firmware_ram(MEM, layout) - engine.kernel_trim(layout),
        mem_managed: MEM - 20 * MIB,
        mem_probe: 4 * MIB,
        cpus: 2,
        platform: truecold_proto::GuestPlatform {
            packages: 1,
            cores_per_package: 2,
            threads_per_core: 1,
            tsc_deadline_timer: true,
            clocksource: truecold_proto::Clocksource::parse("kvm-clock"),
            ..Default::default()
        },
        workload: Workload::BenchOk,
        code: ErrorCode::Ok,
    }
}

/// What one engine launch would look like, at `r` (its request), the guest `id`; `us` gives
/// the stamp `us` µs after the request.
fn launched(engine: Engine, r: u64, id: u64, failed: bool) -> Launched {
    launched_in(engine, RamLayout::ABSENT, r, id, failed)
}

/// [`launched`] with truecold-vmm laying RAM out `layout` (its figures, its echo, its
/// mapping; a peer's are its own).
fn launched_in(engine: Engine, layout: RamLayout, r: u64, id: u64, failed: bool) -> Launched {
    let layout = if engine == Engine::Truecold {
        layout
    } else {
        RamLayout::ABSENT
    };
    let ram = Engine::Truecold.expected_firmware_ram(MEM, layout);
    let at = |us: u64| Some(r + us * 1000);
    let bid = boot_id(id);
    let mut lv = Liveness::new(LivenessKind::Binding);
    lv.nonce = Some("00".repeat(16));
    lv.verified = !failed;
    lv.reply_boot_id = (!failed).then_some(bid);
    lv.answer = (!failed).then(|| "11".repeat(32));
    let mut stamps = Stamps {
        request: Some(r),
        serial_ready: at(800),
        strict_ready: if failed { None } else { at(900) },
        record: if failed { None } else { at(1000) },
        reaped: at(1050),
        ..Stamps::default()
    };
    let end = match (failed, engine) {
        (true, _) => ProcessEnd::KilledAtDeadline,
        (false, Engine::CloudHypervisor) => ProcessEnd::KilledAfterRecord,
        (false, Engine::QemuMicrovm) => ProcessEnd::Exited(1),
        (false, _) => ProcessEnd::Exited(0),
    };
    let mut vmm = None;
    if engine == Engine::Truecold {
        let vm = Stamps {
            request: Some(r),
            boot_start: at(100),
            kvm_open: at(200),
            vm_created: at(300),
            memory_ready: at(400),
            kernel_loaded: at(500),
            first_run: at(600),
            init_doorbell: at(700),
            ready_doorbell: at(790),
            exit: if failed { None } else { at(1010) },
            teardown_done: if failed { None } else { at(1020) },
            ..Stamps::default()
        };
        stamps = Stamps {
            request: stamps.request,
            serial_ready: stamps.serial_ready,
            strict_ready: stamps.strict_ready,
            record: stamps.record,
            reaped: stamps.reaped,
            ..vm
        };
        let core = ReportCore {
            schema: truecold_proto::report::REPORT_SCHEMA,
            stamps: vm,
            memory_figures: MemoryFigures {
                configured: MEM,
                memslots: ram,
                e820_ram: ram,
                e820_hole_reserved: layout.hole().map_or(0, |h| h.len()),
                guest: (!failed).then_some(ram),
            },
            backing_obtained: ObtainedBacking::Anon4k,
            vmm_rss_bytes: None,
            liveness: Liveness::new(LivenessKind::Binding),
            guest_record: (!failed).then(|| record_in(engine, layout, bid)),
            protocol_error_count: 0,
            protocol_errors: vec![],
            guest_cmdline: Some("the one command line".into()),
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
            transport: truecold_proto::kinds::Transport::Serial,
        };
        let mut v = serde_json::to_value(core).expect("serializes");
        v["config"] = serde_json::json!({ "deadline": { "at-ns": r + DEADLINE } });
        if !layout.is_absent() {
            v["config"]["ram_layout"] = serde_json::json!(layout.as_str());
        }
        vmm = Some(v);
    }
    Launched {
        run: EngineRun {
            engine,
            stamps,
            ready_boot_id: Some(bid),
            liveness: lv,
            guest_record: (!failed).then(|| record_in(engine, layout, bid)),
            host_memory: (!failed).then(|| HostMapping {
                sizes: vec![engine.expected_mapping(MEM, layout)],
                kernel_page_size: 4096,
                anon_huge_bytes: 0,
            }),
            protocol_error_count: 0,
            protocol_errors: vec![],
            exit: Some(ProcessExit {
                code: match end {
                    ProcessEnd::Exited(c) => Some(c),
                    _ => None,
                },
                signal: None,
                killed: !matches!(end, ProcessEnd::Exited(_)),
            }),
            vmm,
            outcome: Outcome {
                ok: !failed,
                failure_kind: None,
                failure: None,
                guest_exit_code: None,
            },
            network: None,
            cleanup: None,
        },
        end,
        request_ns: r,
        reaped_ns: r + 1_050_000,
        deadline_at_ns: r + DEADLINE,
        argv: vec![engine.as_str().into()],
        mapping_error: None,
        report_error: None,
        noise_lines: 0,
        noise_tail: vec![],
        stderr_tail: String::new(),
    }
}

/// A launcher that launches nothing: a consistent launch per call, `failing` (arm, round)
/// pairs killed at the deadline, boot ids unique unless `dup` names an (arm, round) that
/// repeats the first launch's.
struct Fake {
    arms: Vec<Engine>,
    failing: Vec<(usize, u64)>,
    dup: Option<(usize, u64)>,
    n: Cell<u64>,
    log: std::cell::RefCell<Vec<(u64, usize)>>,
    /// truecold-vmm's layout in the launches it fakes.
    layout: RamLayout,
}

impl ArmLauncher for Fake {
    fn launch(&self, arm: usize, round: u64, row: &RowOf<'_>) -> (Launched, Sample, EngineRun) {
        self.log.borrow_mut().push((round, arm));
        let k = self.n.get();
        self.n.set(k + 1);
        let r = now_ns();
        // At least as long as the stamps, so rows never overlap.
        std::thread::sleep(std::time::Duration::from_micros(1_200));
        let id = if self.dup == Some((arm, round)) { 0 } else { k };
        let l = launched_in(
            self.arms[arm],
            self.layout,
            r,
            id,
            self.failing.contains(&(arm, round)),
        );
        let (s, run) = row(&l);
        (l, s, run)
    }
}

fn fake(arms: &[Engine]) -> Fake {
    Fake {
        arms: arms.to_vec(),
        failing: vec![],
        dup: None,
        n: Cell::new(0),
        log: Default::default(),
        layout: RamLayout::ABSENT,
    }
}

fn run(sp: &EnginesSpec, f: &Fake, stop: &AtomicBool) -> EnginesRun {
    let mut progress = Progress::new(Vec::new(), Style::Plain, "t", 0);
    let cmdlines: Vec<String> = sp.arms.iter().map(|e| format!("cmdline of {e}")).collect();
    let dir = tempfile::tempdir().unwrap();
    execute(
        sp,
        &cmdlines,
        f,
        stop,
        &mut progress,
        None,
        &|| 0,
        dir.path(),
        None,
    )
    .unwrap()
}

#[test]
fn rounds_interleave_every_arm_in_the_seeded_order() {
    let arms = Engine::ALL.to_vec();
    let sp = spec(&arms, 4);
    let f = fake(&arms);
    let ran = run(&sp, &f, &AtomicBool::new(false));
    assert!(!ran.interrupted);
    let launched: Vec<(u64, Engine)> = f.log.borrow().iter().map(|(r, i)| (*r, arms[*i])).collect();
    assert_eq!(launched, sp.order());
    assert_eq!(ran.order, sp.order());
    for (i, a) in ran.arms.iter().enumerate() {
        assert_eq!(a.samples.len(), 4);
        let idx: Vec<u64> = a.samples.iter().map(|s| s.index).collect();
        assert_eq!(idx, vec![0, 1, 2, 3], "an arm's rows are its rounds");
        for s in &a.samples {
            assert!(s.ok, "{}: {} {}", arms[i], s.error_kind, s.error_detail);
            assert_eq!(
                s.host_mapping_bytes,
                Some(arms[i].expected_mapping(MEM, RamLayout::AroundHole))
            );
            assert_eq!(s.host_page_size, Some(4096));
        }
        assert!(a.runs().iter().all(|r| r.outcome.ok && r.engine == arms[i]));
    }
    // truecold: its VMM's marks and memory figures are in the row; the others have none.
    let tc = &ran.arms[0].samples[0];
    assert!(tc
        .stages
        .get(truecold_proof::schema::Stage::Vcpus)
        .is_some());
    assert_eq!(tc.host_memslots, Some(MEM));
    let fc = &ran.arms[1].samples[0];
    assert_eq!(fc.host_memslots, None);
    assert_eq!(
        fc.guest_mem_firmware,
        Some(Engine::Firecracker.expected_firmware_ram(MEM, RamLayout::AroundHole))
    );
}

#[test]
fn failures_are_rows_and_stop_ends_between_launches() {
    let arms = vec![Engine::Firecracker, Engine::QemuMicrovm];
    let sp = spec(&arms, 3);
    let mut f = fake(&arms);
    f.failing = vec![(1, 1)];
    let ran = run(&sp, &f, &AtomicBool::new(false));
    let q = &ran.arms[1].samples[1];
    assert!(!q.ok);
    assert_eq!(q.error_kind, "deadline");
    assert_eq!(
        q.latency_ns, None,
        "scored at the deadline by the summaries"
    );
    assert_eq!(
        ran.arms[1].runs()[1].outcome.failure_kind.as_deref(),
        Some("deadline")
    );
    // Stopped before the first launch: nothing runs, the campaign says so.
    let ran = run(&sp, &fake(&arms), &AtomicBool::new(true));
    assert!(ran.interrupted && ran.order.is_empty());
}

#[test]
fn a_boot_id_seen_in_another_arm_is_a_contract_violation() {
    let arms = vec![Engine::Firecracker, Engine::CloudHypervisor];
    let sp = spec(&arms, 2);
    let mut f = fake(&arms);
    let first = sp.order()[0];
    let later = sp.order()[1];
    assert_ne!(first.1, later.1, "round 0 runs both arms");
    let later_arm = arms.iter().position(|e| *e == later.1).unwrap();
    f.dup = Some((later_arm, later.0));
    let ran = run(&sp, &f, &AtomicBool::new(false));
    let s = &ran.arms[later_arm].samples[0];
    assert_eq!(s.error_kind, "repeated_boot_id", "{}", s.error_detail);
    assert_eq!(ran.arms[later_arm].repeated_boot_ids, 1);
    assert!(
        !ran.arms[later_arm].runs()[0].outcome.ok,
        "the evidence agrees"
    );
    // The marked row's line was rewritten from the staged one: every line re-serializes to
    // its own bytes (what the in-memory path would have written for the agreeing run).
    for a in &ran.arms {
        let text = String::from_utf8(a.reports.to_vec().unwrap()).unwrap();
        for l in text.split_inclusive('\n') {
            let r: ReportLine = serde_json::from_str(l).unwrap();
            assert_eq!(r.to_line().unwrap(), l);
        }
    }
}

fn ctx(engine: Engine) -> RowContext {
    spec(&[engine], 1).row_context(engine)
}

fn kind(l: &Launched) -> String {
    let (s, run) = row(l, 0, &ctx(l.run.engine), DEADLINE, "x");
    assert_eq!(run.outcome.ok, s.ok);
    s.error_kind
}

#[test]
fn row_classification_per_engine() {
    for e in Engine::ALL {
        assert_eq!(kind(&launched(e, 1_000_000, 1, false)), "", "{e}");
    }
    // Memory: the guest saw the configured size under an engine with a hole, the mapping is
    // not the configured size, or its page size is not the backing's.
    let mut l = launched(Engine::Firecracker, 1_000_000, 1, false);
    l.run.guest_record.as_mut().unwrap().mem_firmware_ram = MEM;
    assert_eq!(kind(&l), "memory_mismatch");
    let mut l = launched(Engine::CloudHypervisor, 1_000_000, 1, false);
    l.run.host_memory = None;
    l.mapping_error = Some("no anonymous/memfd mapping".into());
    let (s, _) = row(&l, 0, &ctx(Engine::CloudHypervisor), DEADLINE, "x");
    assert_eq!(s.error_kind, "memory_mismatch");
    assert!(
        s.error_detail.contains("no anonymous/memfd mapping"),
        "{}",
        s.error_detail
    );
    assert_eq!(s.host_mapping_bytes, None);
    let mut l = launched(Engine::QemuMicrovm, 1_000_000, 1, false);
    l.run.host_memory.as_mut().unwrap().kernel_page_size = 2 << 20;
    assert_eq!(kind(&l), "memory_mismatch");
    // A guest protocol error fails an otherwise good row.
    let mut l = launched(Engine::Firecracker, 1_000_000, 1, false);
    l.run.protocol_error_count = 1;
    assert_eq!(kind(&l), "guest_protocol");
    // The guest's own failing code, from its record.
    let mut l = launched(Engine::QemuMicrovm, 1_000_000, 1, false);
    l.run.guest_record.as_mut().unwrap().code = ErrorCode::ALL[2];
    assert!(kind(&l).starts_with("guest_"), "{}", kind(&l));
    // An engine that exits unclean after a good guest.
    let mut l = launched(Engine::Firecracker, 1_000_000, 1, false);
    l.end = ProcessEnd::Exited(1);
    assert_eq!(kind(&l), "vmm_exit");
    let mut l = launched(Engine::QemuMicrovm, 1_000_000, 1, false);
    l.end = ProcessEnd::Exited(0);
    assert_eq!(kind(&l), "", "QEMU's reset end (-no-reboot) is clean");
    // Strict-ready in time but still running at the deadline.
    let mut l = launched(Engine::Firecracker, 1_000_000, 1, false);
    l.end = ProcessEnd::KilledAtDeadline;
    assert_eq!(kind(&l), "post_ready_overrun");
    // Past the deadline.
    let mut l = launched(Engine::Firecracker, 1_000_000, 1, false);
    l.run.stamps.strict_ready = Some(1_000_000 + DEADLINE + 1);
    l.run.stamps.record = Some(1_000_000 + DEADLINE + 2);
    l.run.stamps.reaped = Some(1_000_000 + DEADLINE + 3);
    assert_eq!(kind(&l), "deadline");
    // Reply and record from different boots.
    let mut l = launched(Engine::CloudHypervisor, 1_000_000, 1, false);
    l.run.guest_record.as_mut().unwrap().boot_id = Some(boot_id(99));
    assert_eq!(kind(&l), "boot_id_mismatch");
    // truecold without its report, or with a pre-guest error report.
    let mut l = launched(Engine::Truecold, 1_000_000, 1, false);
    l.run.vmm = None;
    l.report_error = Some("no such file".into());
    assert_eq!(kind(&l), "bad_report");
    let mut l = launched(Engine::Truecold, 1_000_000, 1, false);
    l.run.vmm = Some(serde_json::json!({
        "schema": truecold_proto::report::REPORT_SCHEMA,
        "error": {"kind": "kernel-missing", "message": "x"}
    }));
    assert_eq!(kind(&l), "vmm_kernel_missing");
    // A spawn failure.
    let mut l = launched(Engine::QemuMicrovm, 1_000_000, 1, true);
    l.end = ProcessEnd::SpawnFailed("spawning qemu: not found".into());
    assert_eq!(kind(&l), "spawn_failed");
}

#[test]
fn reports_lines_carry_the_engine_run_only() {
    let arms = vec![Engine::Truecold, Engine::CloudHypervisor];
    let sp = spec(&arms, 2);
    let ran = run(&sp, &fake(&arms), &AtomicBool::new(false));
    for a in &ran.arms {
        let text = String::from_utf8(a.reports.to_vec().unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        for (i, l) in lines.iter().enumerate() {
            let r: ReportLine = serde_json::from_str(l).unwrap();
            assert_eq!(r.index, i as u64);
            assert!(r.vmm.is_none() && r.vmm_missing.is_none());
            let run = r.engine.expect("an engine run");
            assert_eq!(Some(r.harness.request), run.stamps.request);
            assert_eq!(r.harness.reaped, run.stamps.reaped);
        }
    }
}

/// The whole campaign through the real writer: one bundle per arm under one directory,
/// placed atomically, each arm's files and verdict.
/// Under either RAM layout of truecold-vmm's arm (the peers' their own), recorded on its
/// bundle and verified there.
#[test]
fn the_campaign_directory_has_a_bundle_per_arm() {
    for layout in RamLayout::ALL {
        campaign_directory(layout);
    }
}

fn campaign_directory(layout: RamLayout) {
    let arms = vec![Engine::Truecold, Engine::Firecracker, Engine::QemuMicrovm];
    // Each engine's own default backing (truecold thp, the others anon): arms.json declares
    // them, each arm's bundle has its own.
    let mut sp = spec(&arms, 3);
    sp.backings = arms.iter().map(|&e| Backing::linux_default(e)).collect();
    sp.ram_layout = layout;
    let f = Fake {
        layout,
        ..fake(&arms)
    };
    let ran = run(&sp, &f, &AtomicBool::new(false));
    let d = tempfile::tempdir().unwrap();
    let guest = LinuxGuest {
        vmlinux: d.path().join("vmlinux"),
        initramfs: d.path().join("initramfs.cpio"),
        init: d.path().join("init"),
        config: d.path().join("config"),
        symbols: d.path().join("vmlinux"),
    };
    for p in [&guest.vmlinux, &guest.initramfs, &guest.init] {
        std::fs::write(p, b"x").unwrap();
    }
    std::fs::write(&guest.config, b"CONFIG_X=y\n").unwrap();
    // Firecracker's arm boots a kernel of its own (--arm-guest-dir): the same initramfs and
    // init, another vmlinux and config.
    let own_dir = d.path().join("own");
    std::fs::create_dir(&own_dir).unwrap();
    let own = LinuxGuest {
        vmlinux: own_dir.join("vmlinux"),
        initramfs: own_dir.join("initramfs.cpio"),
        init: own_dir.join("init"),
        config: own_dir.join("config"),
        symbols: own_dir.join("vmlinux"),
    };
    for p in [&own.initramfs, &own.init] {
        std::fs::write(p, b"x").unwrap();
    }
    std::fs::write(&own.vmlinux, b"y").unwrap();
    std::fs::write(&own.config, b"CONFIG_Y=y\n").unwrap();
    let own_arm = |e: &Engine| *e == Engine::Firecracker;
    let bin = d.path().join("engine-bin");
    std::fs::write(&bin, b"#!/bin/sh\n").unwrap();
    let g = Guest {
        kernel: guest.vmlinux.clone(),
        initramfs: guest.initramfs.clone(),
        vcpus: 2,
        mem: GuestMem::from_bytes(MEM).unwrap(),
        backing: Backing::Anon,
        cmdline_extra: String::new(),
        ram_layout: layout,
    };
    let launches: Vec<Launch> = arms
        .iter()
        .map(|e| {
            let g = Guest {
                backing: sp.backing(*e),
                kernel: if own_arm(e) {
                    own.vmlinux.clone()
                } else {
                    g.kernel.clone()
                },
                ..g.clone()
            };
            truecold_engine::launch(*e, &bin, &g, d.path(), HostKind::Hardware).unwrap()
        })
        .collect();
    let bundles: Vec<ArmBundle<'_>> = arms
        .iter()
        .zip(&launches)
        .map(|(e, l)| ArmBundle {
            engine: *e,
            binary: bin.clone(),
            version: format!("{e} 1.0"),
            launch: l,
            guest_cmdline: g.cmdline(*e).unwrap(),
            guest: if own_arm(e) { &own } else { &guest },
            kernel_config: if own_arm(e) {
                b"CONFIG_Y=y\n"
            } else {
                b"CONFIG_X=y\n"
            },
            own_guest: own_arm(e),
        })
        .collect();
    let facts = Environment {
        cpu_model: "test".into(),
        cores: 2,
        host_kernel: "test".into(),
        thp_enabled: "[madvise]".into(),
        thp_defrag: "[madvise]".into(),
        hugepages: "2048kB:0".into(),
        governor: None,
        ..crate::checks::environment::empty_environment(HostKind::Hardware)
    };
    let shared = Shared {
        spec: &sp,
        facts: &facts,
        warnings: vec![],
        invocation: "truecold run --engines truecold,firecracker,qemu-microvm -n 3",
        explicit: {
            let a = CampaignPlan::of_words(&[
                "--engines",
                "truecold,firecracker,qemu-microvm",
                "-n",
                "3",
                "--mem-mib",
                "256",
                "--deadline-ms",
                "1000",
                "--seed",
                "11",
                "--arm-guest-dir",
                &format!("firecracker={}", own_dir.display()),
                "--ram-layout",
                layout.as_str(),
            ])
            .unwrap();
            let bins: Vec<(Engine, PathBuf)> = arms.iter().map(|e| (*e, bin.clone())).collect();
            crate::plan::explicit_args::explicit_args(
                &a,
                "--linux",
                crate::plan::explicit_args::ArgPaths {
                    vmm: &bin,
                    guest_dir: Some(d.path()),
                    out: &d.path().join("results").join("campaign"),
                    engines: &bins,
                },
            )
        },
    };
    let dest = d.path().join("results").join("campaign");
    let w = write_dir(&dest, &shared, &bundles, &ran, Vec::new()).unwrap();
    assert_eq!(w.written.path, dest);
    assert_eq!(w.record.rounds, 3);
    assert_eq!(w.record.seed, 11);
    assert_eq!(
        w.record.order,
        sp.order()
            .iter()
            .map(|(r, e)| (*r, e.as_str().to_string()))
            .collect::<Vec<_>>()
    );
    for e in &arms {
        let dir = dest.join(e.as_str());
        for f in [
            "result.json",
            "samples.csv",
            "reports.jsonl",
            "cmdline.txt",
            "SHA256SUMS",
        ] {
            assert!(dir.join(f).is_file(), "{e}: {f}");
        }
        let result: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("result.json")).unwrap()).unwrap();
        assert_eq!(result["contract"]["observer"], "serial");
        // One arm of an interleaved directory, on the host kind's clock, no knobs.
        assert_eq!(result["contract"]["interleaved"], true);
        assert_eq!(result["contract"]["clock"], "wall");
        assert_eq!(result["configuration"]["knobs"], serde_json::json!([]));
        assert_eq!(result["configuration"]["engine"]["kind"], e.as_str());
        let cmd = std::fs::read_to_string(dir.join("cmdline.txt")).unwrap();
        assert!(
            cmd.contains(&launches[arms.iter().position(|x| x == e).unwrap()].display(DEADLINE)),
            "{cmd}"
        );
    }
    assert!(dest.join("firecracker").join(ENGINE_CONFIG_FILE).is_file());
    assert!(!dest.join("truecold").join(ENGINE_CONFIG_FILE).exists());
    // Nothing temporary is left beside it, and it is never overwritten.
    let left: Vec<_> = std::fs::read_dir(dest.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("campaign")]);
    assert!(matches!(
        write_dir(&dest, &shared, &bundles, &ran, Vec::new()),
        Err(EnginesError::Place(_))
    ));
    // Every arm bundle is valid on its own, and the directory as a whole (the order against
    // the rows, the comparison recomputed, the top SHA256SUMS).
    for (e, aw) in &w.arms {
        assert_eq!(aw.path, dest.join(e.as_str()));
        let v = truecold_proof::verify::verify_dir(&aw.path);
        assert!(v.is_valid(), "{e}: {}", v.render(&aw.path, 20));
    }
    assert!(
        w.written.verdict.is_valid(),
        "{}",
        w.written.verdict.render(&dest, 20)
    );
    let v = truecold_proof::verify::verify_dir(&dest);
    assert!(v.is_valid(), "{}", v.render(&dest, 20));
    for e in &arms {
        let (r, _) = truecold_proof::read_bundle(&dest.join(e.as_str())).unwrap();
        let want = if *e == Engine::Truecold {
            layout
        } else {
            RamLayout::ABSENT
        };
        assert_eq!(r.configuration.ram_layout, want, "{e}");
    }
    for f in ["arms.json", "comparison.json", "README.md", "SHA256SUMS"] {
        assert!(dest.join(f).is_file(), "{f}");
    }
    let arms_json = std::fs::read_to_string(dest.join("arms.json")).unwrap();
    assert!(arms_json.contains("\"backing\": \"thp\""), "{arms_json}");
    let readme = std::fs::read_to_string(dest.join("README.md")).unwrap();
    assert!(readme.contains("backing per arm"), "{readme}");
    assert!(
        readme.contains("| `truecold 1.0` | the campaign's | thp | 3 | 3 |"),
        "{readme}"
    );
    let own_digest = truecold_proof::digest::sha256_hex(b"CONFIG_Y=y\n");
    assert!(
        arms_json.contains(&format!("\"kernel\": \"{own_digest}\"")),
        "{arms_json}"
    );
    assert!(readme.contains("| own (config sha256 "), "{readme}");
    assert!(readme.contains("| the campaign's |"), "{readme}");
    // An arm whose bundle has another backing than arms.json declares: a mismatch.
    let forged = arms_json.replacen("\"backing\": \"thp\"", "\"backing\": \"anon\"", 1);
    std::fs::write(dest.join("arms.json"), forged).unwrap();
    let v = truecold_proof::verify::verify_dir(&dest);
    assert!(
        v.render(&dest, 40).contains("arms.json declares anon"),
        "{}",
        v.render(&dest, 40)
    );
    // An arm's own kernel other than the one declared: a mismatch.
    let forged = arms_json.replacen(&own_digest, &"0".repeat(64), 1);
    std::fs::write(dest.join("arms.json"), forged).unwrap();
    let v = truecold_proof::verify::verify_dir(&dest);
    assert!(
        v.render(&dest, 40)
            .contains("arms.json declares its own kernel's config 0000"),
        "{}",
        v.render(&dest, 40)
    );
}

fn parse(extra: &[&str]) -> CampaignPlan {
    CampaignPlan::of_words(extra).unwrap()
}

#[test]
fn a_missing_engine_binary_names_how_to_get_it() {
    let msg = |e: Engine, a: &CampaignPlan| find_binary(e, a).unwrap_err().to_string();
    let a = parse(&[
        "--engines",
        "firecracker,cloud-hypervisor,qemu-microvm",
        "--firecracker",
        "/nonexistent/fc",
        "--cloud-hypervisor",
        "/nonexistent/ch",
        "--qemu",
        "/nonexistent/qemu",
    ]);
    let m = msg(Engine::Firecracker, &a);
    assert!(
        m.contains("/nonexistent/fc") && m.contains("../shared/peers/README.md"),
        "{m}"
    );
    assert!(m.contains("TRUECOLD_FIRECRACKER"), "{m}");
    let m = msg(Engine::CloudHypervisor, &a);
    assert!(
        m.contains("/nonexistent/ch") && m.contains("TRUECOLD_CLOUD_HYPERVISOR"),
        "{m}"
    );
    let m = msg(Engine::QemuMicrovm, &a);
    assert!(m.contains("apt-get install qemu-system-x86"), "{m}");
    let a = parse(&["--engine", "truecold", "--vmm", "/nonexistent/vmm"]);
    let m = msg(Engine::Truecold, &a);
    assert!(m.contains("cargo build --release -p truecold-vmm"), "{m}");
    // A flag that names an existing file is taken as it is.
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("fc");
    std::fs::write(&f, b"").unwrap();
    let a = parse(&[
        "--engine",
        "firecracker",
        "--firecracker",
        f.to_str().unwrap(),
    ]);
    assert_eq!(
        find_binary(Engine::Firecracker, &a).unwrap(),
        std::fs::canonicalize(&f).unwrap()
    );
}

#[test]
fn explicit_arguments_of_an_engines_campaign_rerun_it() {
    let a = parse(&[
        "--engines",
        "firecracker,truecold",
        "-n",
        "5",
        "--seed",
        "9",
        "--mem-mib",
        "1024",
    ]);
    let bins = vec![
        (Engine::Firecracker, PathBuf::from("/p/firecracker")),
        (Engine::Truecold, PathBuf::from("/p/truecold-vmm")),
    ];
    let paths = crate::plan::explicit_args::ArgPaths {
        vmm: Path::new("/p/truecold-vmm"),
        guest_dir: Some(Path::new("/g")),
        out: Path::new("/r/x"),
        engines: &bins,
    };
    let e = crate::plan::explicit_args::explicit_args(&a, "--linux", paths);
    let line = e.join(" ");
    assert!(
        line.contains("--engines firecracker,truecold --seed 0x0000000000000009 --firecracker /p/firecracker --vmm /p/truecold-vmm"),
        "{line}"
    );
    let words: Vec<&str> = e.iter().map(String::as_str).collect();
    let b = parse(&words);
    assert_eq!(b.engines, a.engines);
    assert_eq!(b.seed, 9);
    assert_eq!(
        crate::plan::explicit_args::explicit_args(&b, "--linux", paths),
        e
    );
    // Without truecold among the arms there is no VMM to name.
    let a = parse(&["--engine", "qemu-microvm"]);
    let bins = vec![(
        Engine::QemuMicrovm,
        PathBuf::from("/usr/bin/qemu-system-x86_64"),
    )];
    let e = crate::plan::explicit_args::explicit_args(
        &a,
        "--linux",
        crate::plan::explicit_args::ArgPaths {
            engines: &bins,
            ..paths
        },
    );
    assert!(!e.contains(&"--vmm".to_string()), "{e:?}");
    assert!(e.join(" ").contains("--qemu /usr/bin/qemu-system-x86_64"));
}

/// An interleaved arm's warning names its arms and shows the seed as every message does
/// (hex), the one text an engines campaign's and a tune phase's arms share.
#[test]
fn an_interleaved_arms_warning_shows_its_seed_in_hex() {
    let w = interleaved_arm_warning(
        "an engines campaign",
        [Engine::Firecracker, Engine::Truecold]
            .iter()
            .map(|e| e.as_str()),
        crate::cli::DEFAULT_SEED,
    );
    assert_eq!(
        w,
        "one arm of an engines campaign (firecracker, truecold): interleaved launch by launch \
         with the other arm(s) in seeded shuffled rounds (seed 0x74727565636f6c64), so this \
         arm's rows have the others' launches between them"
    );
    let t = interleaved_arm_warning("the tune's screen phase", ["baseline"].into_iter(), 255);
    assert!(t.contains("(seed 0x00000000000000ff)"), "{t}");
    assert!(!t.contains("255"), "{t}");
}

/// `--ram-layout` in an engines campaign: truecold-vmm's arm runs and records it (its
/// campaign, its guest, its launch), each peer's arm records none.
#[test]
fn the_ram_layout_reaches_truecold_vmms_arm_only() {
    use truecold_proto::kinds::RamLayout;
    let a = parse(&[
        "--engines",
        "truecold,firecracker,cloud-hypervisor",
        "-n",
        "2",
        "--ram-layout",
        "hole-inside",
    ]);
    let sp = EnginesSpec::of_plan(
        &a,
        a.engines.clone(),
        2,
        truecold_proof::schema::Observer::Serial,
    );
    assert_eq!(sp.layout(Engine::Truecold), RamLayout::HoleInside);
    assert_eq!(
        sp.campaign(Engine::Truecold).ram_layout,
        RamLayout::HoleInside
    );
    for e in [Engine::Firecracker, Engine::CloudHypervisor] {
        assert_eq!(sp.layout(e), RamLayout::ABSENT, "{e}");
        assert_eq!(sp.campaign(e).ram_layout, RamLayout::ABSENT, "{e}");
    }
    let lg = LinuxGuest {
        vmlinux: "/g/vmlinux".into(),
        initramfs: "/g/initramfs.cpio".into(),
        init: "/g/init".into(),
        config: "/g/config".into(),
        symbols: "/g/vmlinux".into(),
    };
    let g = guest_of(&a, &lg);
    assert_eq!(g.ram_layout, RamLayout::HoleInside);
    let l = truecold_engine::launch(
        Engine::Truecold,
        Path::new("/p/truecold-vmm"),
        &g,
        Path::new("/w"),
        HostKind::Hardware,
    )
    .unwrap();
    assert_eq!(l.ram_layout, RamLayout::HoleInside);
    assert!(l.display(1).contains("--ram-layout hole-inside"));
}
