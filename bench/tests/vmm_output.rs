//! The report adapter against the real `truecold-vmm` output (no stale fixture): one probe
//! boot, then the same report edited into the Linux shape the VMM prints for a Linux guest.
//! Needs /dev/kvm and `cargo build -p truecold-vmm` (same target directory); FAILS without.

mod common;

use std::path::PathBuf;
use std::process::Command;
use truecold_bench::campaign::vmm_output::{observe, parse_output};
use truecold_proto::report::{ReportCore, VmmOutput};
use truecold_proto::{ErrorCode, Workload};

fn parse(bytes: &[u8]) -> ReportCore {
    match parse_output(bytes, false).expect("a report") {
        VmmOutput::Boot(r) => *r,
        VmmOutput::Error(e) => panic!("an error report: {e:?}"),
    }
}

fn real_probe_report() -> serde_json::Value {
    let vmm = common::vmm_next_to(&PathBuf::from(env!("CARGO_BIN_EXE_truecold")));
    common::require_kvm();
    let o = Command::new(&vmm)
        .args(["boot", "--probe", "--vcpus", "2", "--mem-mib", "64"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn probe_report_projects_onto_a_row() {
    let v = real_probe_report();
    let r = parse(v.to_string().as_bytes());
    let o = observe(&r);
    assert_eq!(o.error, None);
    // RAM under the default layout (hole-inside: 64 MiB less the declared legacy hole).
    let ram = truecold_proto::kinds::Engine::Truecold
        .expected_firmware_ram(64 << 20, truecold_proto::kinds::RamLayout::HoleInside);
    assert_eq!(o.memslots, Some(ram));
    assert_eq!(o.e820_usable, Some(ram));
    let t = &o.stamps;
    let chain = [
        t.boot_start,
        t.kvm_open,
        t.vm_created,
        t.memory_ready,
        t.kernel_loaded,
        t.first_run,
        t.init_doorbell,
        t.ready_doorbell,
        t.strict_ready,
        t.record,
        t.exit,
        t.teardown_done,
    ];
    assert!(chain.iter().all(Option::is_some), "{t:?}");
    assert!(chain.windows(2).all(|w| w[0] <= w[1]), "{t:?}");
    // The probe has no boot id; its strict-ready is the verified echo; its RAM sum is kept.
    assert_eq!(o.boot_id, None);
    assert!(o.strict_ready_verified);
    assert_eq!(v["liveness"]["kind"], "probe-echo");
    assert_eq!(o.guest_ram, Some(ram));
    assert!(o.guest.is_none());
    assert_eq!(o.cmdline, None);
}

fn linux_shaped(mut v: serde_json::Value, reply_id: &str, record_id: &str) -> serde_json::Value {
    v["probe"] = serde_json::Value::Null;
    v["liveness"]["kind"] = "binding".into();
    v["liveness"]["reply_boot_id"] = reply_id.into();
    v["guest_cmdline"] = v["kernel"]["cmdline"].clone();
    v["guest_record"] = serde_json::json!({
        "boot_id": record_id, "t_init_ns": 30000000u64, "t_ready_ns": 41000000u64,
        "t_reply_ns": 41100000u64, "t_record_ns": 42000000u64, "mem_configured": 67108864u64,
        "mem_firmware_ram": 67108864u64, "mem_total": 50000000u64, "mem_probe": 4194304u64,
        "cpus": 2,
        "platform": {
            "packages": 1, "cores_per_package": 2, "threads_per_core": 1,
            "tsc_deadline_timer": true, "constant_tsc": false, "nonstop_tsc": false,
            "tsc_unstable": false, "clocksource": "kvm-clock"
        },
        "workload": "BENCH_OK", "code": "ok"
    });
    v
}

#[test]
fn linux_report_carries_boot_id_record_and_cmdline() {
    let id = "0b1d2c3e-4f50-4617-8899-aabbccddeeff";
    let v = linux_shaped(real_probe_report(), id, id);
    let o = observe(&parse(v.to_string().as_bytes()));
    assert_eq!(o.error, None);
    assert_eq!(o.boot_id.unwrap().as_str(), id);
    let g = o.guest.unwrap();
    assert_eq!((g.t_init_ns, g.cpus), (30_000_000, 2));
    assert!(g.platform.topology_is(1, 2));
    assert_eq!(g.platform.clocksource.unwrap().as_str(), "kvm-clock");
    assert_eq!(g.workload, Workload::BenchOk);
    assert_eq!(g.code, ErrorCode::Ok);
    assert!(o.cmdline.unwrap().contains("truecold.mem=67108864"));
}

#[test]
fn reply_and_record_from_different_boots_are_a_failure() {
    let v = linux_shaped(
        real_probe_report(),
        "0b1d2c3e-4f50-4617-8899-aabbccddeeff",
        "11111111-4f50-4617-8899-aabbccddeeff",
    );
    let o = observe(&parse(v.to_string().as_bytes()));
    assert_eq!(o.error.unwrap().0.as_string(), "boot_id_mismatch");
}

#[test]
fn a_report_with_an_untyped_guest_record_is_not_a_report() {
    // The VMM decodes the guest's record into its typed value; a report whose record does
    // not decode (here an unknown code) is not something the VMM prints: a bad report.
    let id = "0b1d2c3e-4f50-4617-8899-aabbccddeeff";
    let mut v = linux_shaped(real_probe_report(), id, id);
    v["guest_record"]["code"] = "rm -rf".into();
    let e = parse_output(v.to_string().as_bytes(), false).unwrap_err();
    assert!(e.to_string().contains("unknown guest code"), "{e}");
    let mut v = linux_shaped(real_probe_report(), id, id);
    v["liveness"]["reply_boot_id"] = "not-a-uuid".into();
    assert!(parse_output(v.to_string().as_bytes(), false).is_err());
}

#[test]
fn a_vmm_that_fails_before_its_guest_runs_is_a_typed_row() {
    use truecold_bench::campaign::process_launcher::{Attempt, End};
    use truecold_bench::campaign::sample::{to_sample, RowContext};
    use truecold_proof::schema::ContractKind;
    let vmm = common::vmm_next_to(&PathBuf::from(env!("CARGO_BIN_EXE_truecold")));
    for (args, kind) in [
        (
            vec!["boot", "--kernel", "/nonexistent/vmlinux", "--force"],
            "vmm_kernel_missing",
        ),
        (
            vec!["boot", "--probe", "--mem-mib", "0"],
            "vmm_memory_too_small",
        ),
    ] {
        let o = Command::new(&vmm).args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let a = Attempt {
            slot: truecold_bench::campaign::schedule::Slot {
                index: 0,
                level: 1,
                intended_ns: 0,
            },
            request_ns: 1,
            reaped_ns: 2,
            deadline_ns: 1_000_000_000,
            end: End::Exited(1),
            stdout: o.stdout,
            stdout_truncated: false,
            stderr_tail: String::from_utf8_lossy(&o.stderr).into_owned(),
        };
        let observed = truecold_bench::campaign::vmm_output::observe_attempt(&a).unwrap();
        let ctx = RowContext {
            contract: ContractKind::Probe,
            intended: false,
            concurrency_override: None,
            mem_bytes: 128 << 20,
            vcpus: 1,
            observer: truecold_proto::kinds::Observer::VmExit,
            engine: truecold_proto::kinds::Engine::Truecold,
            backing: truecold_proto::kinds::Backing::Anon,
            ram_layout: truecold_proto::kinds::RamLayout::AroundHole,
            cpu_platform: truecold_proto::platform::CpuPlatform::ABSENT,
        };
        let s = to_sample(&a, Some(&observed), None, &ctx);
        assert!(!s.ok);
        assert_eq!(s.error_kind, kind, "{args:?}: {}", s.error_detail);
    }
}
