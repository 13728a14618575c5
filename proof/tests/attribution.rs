//! Attribution: the clock join, the rows, csv/svg determinism, the reconciliation, and verify
//! on a synthetic bundle with attribution files (KVM-free).
mod common;

use common::*;
use std::fs;
use truecold_proof::attribution::{
    self, attribute, csv_bytes, parse_lines, svg, AttributionError, AttributionLine, Lane,
    CSV_FILE, JSONL_FILE, RECONCILE_BOUND_PPM, SVG_FILE,
};
use truecold_proof::reports::ReportLine;
use truecold_proof::schema::*;
use truecold_proof::{verify_dir, write_bundle, Check};
use truecold_proto::report::{Accounting, Counters, ExitTally};
use truecold_proto::trace::{GuestTrace, Initcall, KernelMark, KmsgSync};

const CLOCK: &str = "wall";

/// Attribution lines from the fixture's own report lines, each with a trace and accounting.
fn lines_for(samples: &[Sample]) -> Vec<AttributionLine> {
    let jsonl = reports_jsonl(samples, 10_000_000_000);
    jsonl
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut report: ReportLine = serde_json::from_slice(l).unwrap();
            let vmm = report.vmm.as_mut().unwrap();
            let ready = vmm["stamps"]["ready_doorbell"].as_u64();
            let t_ready = vmm["guest_record"]["t_ready_ns"].as_u64();
            if let (Some(_), Some(t_ready)) = (ready, t_ready) {
                // The guest's log: its sync line 1 ms after ready, on a printk clock that
                // runs 3 ms ahead of CLOCK_MONOTONIC (on a whole µs, the kmsg resolution).
                let mono_sync = (t_ready + 1_000_000) / 1000 * 1000;
                let trace = GuestTrace {
                    sync: Some(KmsgSync {
                        kmsg_us: (mono_sync + 3_000_000) / 1000,
                        mono_ns: mono_sync,
                        records: 40,
                        truncated: false,
                    }),
                    initcalls: vec![
                        Initcall {
                            func: "0xffffffff81000010".into(),
                            start_us: 3_500,
                            dur_us: 700,
                            ret: 0,
                        },
                        Initcall {
                            func: "small_init".into(),
                            start_us: 4_300,
                            dur_us: 20,
                            ret: -19,
                        },
                    ],
                    marks: vec![KernelMark {
                        name: "linux_version".into(),
                        t_us: 3_000,
                    }],
                };
                vmm["guest_trace"] = serde_json::to_value(trace).unwrap();
            }
            let mut acct = Accounting::default();
            for (i, m) in truecold_proto::measure::Mark::ALL.iter().enumerate() {
                if vmm["stamps"][m.name()].is_u64() {
                    acct.take(
                        *m,
                        Counters {
                            exits: ExitTally {
                                io_out: 10 * i as u64,
                                ..ExitTally::default()
                            },
                            minflt: 100 * i as u64,
                            majflt: 0,
                        },
                    );
                }
            }
            vmm["accounting"] = serde_json::to_value(acct).unwrap();
            AttributionLine {
                report,
                symbols: [("0xffffffff81000010".to_string(), "big_init".to_string())]
                    .into_iter()
                    .collect(),
                functions: Vec::new(),
            }
        })
        .collect()
}

fn jsonl(lines: &[AttributionLine]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in lines {
        out.extend_from_slice(serde_json::to_string(l).unwrap().as_bytes());
        out.push(b'\n');
    }
    out
}

#[test]
fn rows_join_the_clocks_and_reconcile() {
    let f = Fixture::linux(9);
    let samples = f.samples();
    let lines = lines_for(&samples);
    let a = attribute(&lines, &samples).unwrap();
    // The attribution launches are the measured rows themselves: the median equals p50.
    assert!(a.represents);
    let total = a
        .rows
        .iter()
        .find(|r| r.name == "attribution_total")
        .unwrap();
    let p50 = a.rows.iter().find(|r| r.name == "measured_p50").unwrap();
    assert_eq!(total.dur_ns, p50.dur_ns);
    let rec = a
        .rows
        .iter()
        .find(|r| r.lane == Lane::Reconciliation)
        .unwrap();
    assert_eq!(rec.name, "represents the measured boot");
    // Host stages tile the total.
    let host: u64 = a
        .rows
        .iter()
        .filter(|r| r.lane == Lane::Host && r.note.is_empty())
        .map(|r| r.dur_ns.unwrap())
        .sum();
    assert_eq!(Some(host), total.dur_ns);
    // The guest's ready is the host's ready doorbell (the join), and its init start sits
    // guest_init_to_ready before it.
    let idx: usize = total.note.split(' ').nth(6).unwrap().parse().unwrap();
    let s = &samples[idx];
    let ready_rel = s.stages.get(Stage::Spawn).unwrap()
        + [
            Stage::KvmOpen,
            Stage::VmCreate,
            Stage::Memory,
            Stage::KernelLoad,
            Stage::Vcpus,
            Stage::GuestBoot,
            Stage::GuestInit,
        ]
        .iter()
        .map(|st| s.stages.get(*st).unwrap_or(0))
        .sum::<u64>();
    let init_ready = a
        .rows
        .iter()
        .find(|r| r.name == "init_start..ready")
        .unwrap();
    assert_eq!(
        init_ready.start_ns.unwrap() + init_ready.dur_ns.unwrap() as i64,
        ready_rel as i64
    );
    assert_eq!(init_ready.dur_ns, s.stages.get(Stage::GuestInitToReady));
    // printk 3,000 µs is mono 0 (the printk clock runs 3 ms ahead): kernel start lands
    // t_ready before the host's ready doorbell.
    let t_ready = s.stages.get(Stage::GuestKernelToInit).unwrap()
        + s.stages.get(Stage::GuestInitToReady).unwrap();
    let k = a
        .rows
        .iter()
        .find(|r| r.name.starts_with("kernel:linux_version.."))
        .unwrap();
    assert_eq!(k.start_ns.unwrap(), ready_rel as i64 - t_ready as i64);
    // The guest lane starts at the host's first KVM_RUN: early boot before the first mark.
    let early = a
        .rows
        .iter()
        .find(|r| r.name == "first_run..kernel:linux_version")
        .unwrap();
    assert_eq!(
        early.start_ns.unwrap() + early.dur_ns.unwrap() as i64,
        k.start_ns.unwrap()
    );
    // Initcalls: longest first, symbolized, placed on the same clock.
    let calls: Vec<_> = a.rows.iter().filter(|r| r.lane == Lane::Initcall).collect();
    assert_eq!(calls[0].name, "big_init");
    assert_eq!(calls[0].dur_ns, Some(700_000));
    assert_eq!(calls[0].start_ns.unwrap(), k.start_ns.unwrap() + 500_000);
    assert_eq!(
        (calls[1].name.as_str(), calls[1].note.as_str()),
        ("small_init", "ret -19")
    );
    // Counters per stage come out of the same spans.
    let spawn = a.rows.iter().find(|r| r.name == "spawn").unwrap();
    assert_eq!(spawn.counters.unwrap().minflt, 200);
}

#[test]
fn reconciliation_outside_the_bound_says_so() {
    let f = Fixture::linux(5);
    let samples = f.samples();
    let lines = lines_for(&samples);
    let a = attribute(&lines, &samples).unwrap();
    let total = a
        .rows
        .iter()
        .find(|r| r.name == "attribution_total")
        .unwrap()
        .dur_ns
        .unwrap();
    // Measured rows 25 % faster than the attribution: outside 10 %.
    let mut faster = samples.clone();
    for s in &mut faster {
        s.latency_ns = Some(total * 3 / 4);
    }
    let b = attribute(&lines, &faster).unwrap();
    assert!(!b.represents);
    let csv = String::from_utf8(csv_bytes(&b)).unwrap();
    assert!(
        csv.contains("does not represent the measured boot"),
        "{csv}"
    );
    assert!(csv.contains(&format!("bound {RECONCILE_BOUND_PPM} ppm")));
    // Just inside: 10 % exactly.
    for s in &mut faster {
        s.latency_ns = Some(total - total / 10);
    }
    let total_rounded = total - total / 10;
    let d = (total - total_rounded) as u128 * 1_000_000 / total_rounded as u128;
    assert_eq!(
        attribute(&lines, &faster).unwrap().represents,
        d <= u128::from(RECONCILE_BOUND_PPM)
    );
    // No measured success: not represented, and said so.
    for s in &mut faster {
        s.ok = false;
    }
    let c = attribute(&lines, &faster).unwrap();
    assert!(!c.represents);
}

#[test]
fn csv_and_svg_are_deterministic_and_to_scale() {
    let f = Fixture::linux(4);
    let samples = f.samples();
    let lines = lines_for(&samples);
    let a = attribute(&lines, &samples).unwrap();
    let again = attribute(&parse_lines(&jsonl(&lines)).unwrap(), &samples).unwrap();
    assert_eq!(csv_bytes(&a), csv_bytes(&again));
    assert_eq!(svg(&a, CLOCK), svg(&again, CLOCK));
    let csv = String::from_utf8(csv_bytes(&a)).unwrap();
    assert!(csv.starts_with(
        "lane,name,start_ns,dur_ns,io_in,io_out,mmio,hlt,shutdown,other,minflt,majflt,note\n"
    ));
    let s = svg(&a, CLOCK);
    assert!(s.contains("<rect") && s.contains("clock: wall"));
}

#[test]
fn hostile_jsonl_is_a_typed_error() {
    assert!(matches!(
        parse_lines(b"{not json}\n"),
        Err(AttributionError::BadLine { line: 1, .. })
    ));
    assert!(matches!(
        parse_lines(b"{\"report\":1}\n"),
        Err(AttributionError::BadLine { .. })
    ));
    let many = "x\n".repeat(attribution::MAX_RUNS + 1);
    assert!(matches!(
        parse_lines(many.as_bytes()),
        Err(AttributionError::BadLine { line: 1, .. }) | Err(AttributionError::TooManyRuns)
    ));
    let mut big = vec![b'{'; attribution::MAX_LINE + 1];
    big.push(b'\n');
    assert!(matches!(
        parse_lines(&big),
        Err(AttributionError::BadLine { .. })
    ));
    assert_eq!(
        attribute(&[], &[]).unwrap_err(),
        AttributionError::NoUsableRun
    );
}

fn bundle_with_attribution(parent: &std::path::Path) -> std::path::PathBuf {
    let f = Fixture::linux(6);
    let samples = f.samples();
    let result = f.result(&samples);
    let mut inputs = f.inputs_for(&samples);
    let j = jsonl(&lines_for(&samples));
    let clock = result.environment.host_kind.clock().describe();
    inputs.extra_files.push((JSONL_FILE.into(), j.clone()));
    inputs
        .extra_files
        .extend(attribution::generate(&j, &samples, clock).unwrap());
    let dest = parent.join("b");
    let w = write_bundle(&dest, &result, &samples, &inputs).unwrap();
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&dest, 50));
    dest
}

#[test]
fn verify_recomputes_the_attribution_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = bundle_with_attribution(tmp.path());
    let sums = fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
    for n in [JSONL_FILE, CSV_FILE, SVG_FILE] {
        assert!(sums.contains(n), "{n} not covered by SHA256SUMS");
    }
    // Tampered csv (re-summed so only the recomputation can catch it).
    let csv = fs::read_to_string(dir.join(CSV_FILE)).unwrap();
    fs::write(
        dir.join(CSV_FILE),
        csv.replace(
            "represents the measured boot",
            "represents the measured boot!",
        ),
    )
    .unwrap();
    resum(&dir);
    let v = verify_dir(&dir);
    assert!(
        checks(&v).contains(&Check::Attribution),
        "{}",
        v.render(&dir, 20)
    );

    // A tampered trace line changes what the svg must be.
    let dir2 = tmp.path().join("c");
    copy_dir(
        &bundle_with_attribution(&tmp.path().join("x").tap_mkdir()),
        &dir2,
    );
    let j = fs::read_to_string(dir2.join(JSONL_FILE)).unwrap();
    fs::write(
        dir2.join(JSONL_FILE),
        j.replace("\"dur_us\":700", "\"dur_us\":900"),
    )
    .unwrap();
    resum(&dir2);
    assert!(checks(&verify_dir(&dir2)).contains(&Check::Attribution));

    // The svg removed; the csv without the jsonl.
    let dir3 = tmp.path().join("d");
    copy_dir(
        &bundle_with_attribution(&tmp.path().join("y").tap_mkdir()),
        &dir3,
    );
    fs::remove_file(dir3.join(SVG_FILE)).unwrap();
    resum(&dir3);
    assert!(checks(&verify_dir(&dir3)).contains(&Check::Attribution));
    fs::remove_file(dir3.join(JSONL_FILE)).unwrap();
    resum(&dir3);
    assert!(checks(&verify_dir(&dir3)).contains(&Check::Attribution));
}

trait Mkdir {
    fn tap_mkdir(self) -> Self;
}

impl Mkdir for std::path::PathBuf {
    fn tap_mkdir(self) -> Self {
        fs::create_dir_all(&self).unwrap();
        self
    }
}

#[test]
fn report_regenerates_the_attribution_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = bundle_with_attribution(tmp.path());
    let good = fs::read(dir.join(SVG_FILE)).unwrap();
    fs::write(dir.join(SVG_FILE), b"<svg/>").unwrap();
    resum(&dir);
    assert!(checks(&verify_dir(&dir)).contains(&Check::Attribution));
    let written = truecold_proof::regenerate(&dir).unwrap();
    assert!(written.iter().any(|n| n == SVG_FILE), "{written:?}");
    assert_eq!(fs::read(dir.join(SVG_FILE)).unwrap(), good);
    let v = verify_dir(&dir);
    assert!(v.is_valid(), "{}", v.render(&dir, 20));
    // The jsonl is not regenerated: a changed one is refused, not laundered.
    let j = fs::read_to_string(dir.join(JSONL_FILE)).unwrap();
    fs::write(
        dir.join(JSONL_FILE),
        j.replace("\"dur_us\":700", "\"dur_us\":900"),
    )
    .unwrap();
    assert!(truecold_proof::regenerate(&dir).is_err());
}

/// Function A and B of the synthetic RIP lines, and a RIP in neither.
const FN_A: u64 = 0xffff_ffff_8100_0000;
const FN_B: u64 = 0xffff_ffff_8100_0100;
const USER_RIP: u64 = 0x40_1000;

/// The fixture's lines as `--attribution-instrument rip` launches: no trace; vCPU 0 sampled
/// 6 times in A, 3 in B (A, A, B, A, A, A, B, B, halted, A), vCPU 1 twice waiting, twice
/// in B and once in no function; a 100 µs period from `first_run`.
fn rip_lines_for(samples: &[Sample]) -> Vec<AttributionLine> {
    use truecold_proto::rip::{Recorder, RipSamples, Sample as Rs, SamplePeriod, VcpuState};
    lines_for(samples)
        .into_iter()
        .map(|mut l| {
            let vmm = l.report.vmm.as_mut().unwrap();
            vmm.as_object_mut().unwrap().remove("guest_trace");
            if let Some(t0) = vmm["stamps"]["first_run"].as_u64() {
                let seq0 = [
                    (FN_A, VcpuState::Running),
                    (FN_A + 8, VcpuState::Running),
                    (FN_B, VcpuState::Running),
                    (FN_A + 0x10, VcpuState::Running),
                    (FN_A, VcpuState::Running),
                    (FN_A, VcpuState::Unknown),
                    (FN_B + 4, VcpuState::Running),
                    (FN_B + 0xff, VcpuState::Running),
                    (FN_B, VcpuState::Halted),
                    (FN_A + 0xff, VcpuState::Running),
                ];
                let seq1 = [
                    (0xfff0, VcpuState::WaitingForStart),
                    (0xfff0, VcpuState::WaitingForStart),
                    (FN_B, VcpuState::Running),
                    (FN_B, VcpuState::Running),
                    (USER_RIP, VcpuState::Running),
                ];
                let mut vcpus = Vec::new();
                for seq in [&seq0[..], &seq1[..]] {
                    let mut r = Recorder::new(2);
                    r.start(t0);
                    for (k, (rip, state)) in seq.iter().enumerate() {
                        assert!(r.push(Rs {
                            t_ns: t0 + (k as u64 + 1) * 100_000,
                            rip: *rip,
                            state: *state,
                        }));
                    }
                    vcpus.push(r.finish());
                }
                let rs = RipSamples {
                    period_us: SamplePeriod::from_us(100).unwrap(),
                    t0_ns: t0,
                    ticks: 10,
                    missed_ticks: 1,
                    vcpus,
                };
                vmm["rip_samples"] = serde_json::to_value(rs).unwrap();
            }
            l.symbols.clear();
            l.functions = vec![
                attribution::RipFunction {
                    start: FN_B,
                    end: FN_B + 0x100,
                    name: "fn_b".into(),
                },
                attribution::RipFunction {
                    start: FN_A,
                    end: FN_A + 0x100,
                    name: "fn_a".into(),
                },
            ];
            l
        })
        .collect()
}

fn row<'a>(a: &'a attribution::Attribution, name: &str) -> &'a attribution::Row {
    a.rows
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no row {name}: {:?}", a.rows))
}

#[test]
fn rip_samples_give_a_flat_profile_per_vcpu_and_the_overhead() {
    let f = Fixture::linux(9);
    let samples = f.samples();
    let lines = rip_lines_for(&samples);
    let a = attribute(&lines, &samples).unwrap();
    assert!(a.represents);
    // Per function: samples × the period; halted, waiting and no-symbol apart.
    let ms = |n: u64| Some(n * 100_000);
    assert_eq!(
        row(&a, "vcpu0 fn_a").dur_ns,
        ms(6),
        "the unknown state counts as running"
    );
    assert_eq!(row(&a, "vcpu0 fn_b").dur_ns, ms(3));
    assert_eq!(row(&a, "vcpu0 [halted]").dur_ns, ms(1));
    assert_eq!(row(&a, "vcpu0 samples").dur_ns, ms(10));
    assert!(row(&a, "vcpu0 fn_a")
        .note
        .starts_with("6 samples (600000 ppm"));
    assert_eq!(row(&a, "vcpu1 [waiting for start]").dur_ns, ms(2));
    assert_eq!(row(&a, "vcpu1 fn_b").dur_ns, ms(2));
    assert_eq!(row(&a, "vcpu1 [no symbol]").dur_ns, ms(1));
    assert!(a.rows.iter().all(|r| r.name != "vcpu1 fn_a"));
    assert!(a.rows.iter().all(|r| r.name != "vcpu0 [other]"));
    // Each vCPU's profile adds up to its samples.
    for v in ["vcpu0", "vcpu1"] {
        let sum: u64 = a
            .rows
            .iter()
            .filter(|r| r.lane == Lane::Rip && r.start_ns.is_some() && r.name.starts_with(v))
            .filter_map(|r| r.dur_ns)
            .sum();
        assert_eq!(Some(sum), row(&a, &format!("{v} samples")).dur_ns, "{v}");
    }
    // The first sample's time, after the request.
    let first = row(&a, "vcpu0 fn_a").start_ns.unwrap();
    assert!(first > 0);
    assert_eq!(row(&a, "vcpu0 fn_b").start_ns, Some(first + 200_000));
    // Strips: runs of alike samples merged (A A | B | A A A | B B | halted | A).
    let rip = a.rip.as_ref().unwrap();
    assert_eq!(rip.legend, vec!["fn_a", "fn_b"]);
    assert_eq!(rip.strips[0].len(), 6);
    assert_eq!(rip.strips[0][0].1 - rip.strips[0][0].0, 200_000);
    // The overhead: these launches are the measured rows, so 0; the notes say so.
    let o = row(&a, "sampling_overhead");
    assert_eq!(o.lane, Lane::Overhead);
    assert!(
        o.note
            .starts_with("attribution p50 - measured p50 = +0 ns (+0 ppm"),
        "{}",
        o.note
    );
    assert!(row(&a, "vcpu0 samples").note.contains("1 ticks missed"));
    assert!(row(&a, "vcpu0 samples")
        .note
        .contains("(mean interval 100000 ns)"));
    // Measured rows 10 % slower: the overhead is −1/11 of their p50, and the reconciliation
    // holds (|Δ| = 90,909 ppm ≤ 100,000).
    let slower: Vec<Sample> = samples
        .iter()
        .cloned()
        .map(|mut s| {
            s.latency_ns = s.latency_ns.map(|l| l + l / 10);
            s
        })
        .collect();
    let b = attribute(&lines, &slower).unwrap();
    let attr = row(&b, "sampling_overhead").dur_ns.unwrap();
    let p50 = row(&b, "measured_p50").dur_ns.unwrap();
    let d = attr as i128 - p50 as i128;
    let note = &row(&b, "sampling_overhead").note;
    assert!(d < 0);
    assert!(
        note.contains(&format!("= {d} ns ({} ppm", d * 1_000_000 / p50 as i128)),
        "{note}"
    );
    // The CSV and SVG are deterministic and carry them.
    let csv = String::from_utf8(csv_bytes(&a)).unwrap();
    assert!(csv.contains("rip,vcpu0 fn_a,"));
    assert!(csv.contains("overhead,sampling_overhead,"));
    let s = svg(&a, CLOCK);
    assert_eq!(s, svg(&attribute(&lines, &samples).unwrap(), CLOCK));
    assert!(s.contains("rip vcpu0 by function") && s.contains("sampling overhead"));
    // Without samples: no rip or overhead row, no strips.
    let plain = attribute(&lines_for(&samples), &samples).unwrap();
    assert!(plain.rip.is_none());
    assert!(plain
        .rows
        .iter()
        .all(|r| !matches!(r.lane, Lane::Rip | Lane::Overhead)));
}

#[test]
fn rip_functions_that_overlap_or_do_not_decode_are_refused() {
    let f = Fixture::linux(3);
    let samples = f.samples();
    let mut lines = rip_lines_for(&samples);
    for l in &mut lines {
        l.functions[0].start = FN_A + 0x80;
    }
    assert!(matches!(
        attribute(&lines, &samples),
        Err(AttributionError::BadLine { .. })
    ));
    let mut lines = rip_lines_for(&samples);
    for l in &mut lines {
        let v = l.report.vmm.as_mut().unwrap();
        if v["rip_samples"].is_object() {
            v["rip_samples"]["vcpus"][0]["state"] = "rr".into();
        }
    }
    assert!(matches!(
        attribute(&lines, &samples),
        Err(AttributionError::Rip(_))
    ));
}

#[test]
fn verify_catches_a_changed_sample_or_profile_row() {
    let tmp = tempfile::tempdir().unwrap();
    let make = |name: &str| {
        let f = Fixture::linux(6);
        let samples = f.samples();
        let result = f.result(&samples);
        let mut inputs = f.inputs_for(&samples);
        let j = jsonl(&rip_lines_for(&samples));
        let clock = result.environment.host_kind.clock().describe();
        inputs.extra_files.push((JSONL_FILE.into(), j.clone()));
        inputs
            .extra_files
            .extend(attribution::generate(&j, &samples, clock).unwrap());
        let dest = tmp.path().join(name);
        let w = write_bundle(&dest, &result, &samples, &inputs).unwrap();
        assert!(w.verdict.is_valid(), "{}", w.verdict.render(&dest, 50));
        dest
    };
    // A profile row's figure changed in the CSV.
    let d1 = make("p");
    let csv = fs::read_to_string(d1.join(CSV_FILE)).unwrap();
    assert!(csv.contains("6 samples (600000 ppm"));
    fs::write(
        d1.join(CSV_FILE),
        csv.replace("6 samples (600000 ppm", "7 samples (600000 ppm"),
    )
    .unwrap();
    resum(&d1);
    assert!(checks(&verify_dir(&d1)).contains(&Check::Attribution));
    // One sample moved from fn_a to fn_b in the jsonl (its RIP delta changed).
    let d2 = make("s");
    let j = fs::read_to_string(d2.join(JSONL_FILE)).unwrap();
    let before = format!("\"drip\":[{},", FN_A as i64);
    assert!(j.contains(&before));
    fs::write(
        d2.join(JSONL_FILE),
        j.replace(&before, &format!("\"drip\":[{},", FN_B as i64)),
    )
    .unwrap();
    resum(&d2);
    assert!(checks(&verify_dir(&d2)).contains(&Check::Attribution));
    // Untouched, it verifies.
    let d3 = make("ok");
    assert!(
        verify_dir(&d3).is_valid(),
        "{}",
        verify_dir(&d3).render(&d3, 20)
    );
}

/// Attribution launches that all failed are data: the CSV says none reached strict-ready and
/// why (each failure counted), there is no timeline, and the bundle verifies; a timeline
/// planted beside such a CSV is a reason.
#[test]
fn attribution_launches_that_all_failed_are_a_row_not_an_invalid_bundle() {
    let f = Fixture::linux(6);
    let samples = f.samples();
    let result = f.result(&samples);
    let mut lines = lines_for(&samples);
    for l in &mut lines {
        l.report.vmm = None;
    }
    let j = jsonl(&lines);
    let clock = result.environment.host_kind.clock().describe();
    let files = attribution::generate(&j, &samples, clock).unwrap();
    assert_eq!(
        files.len(),
        1,
        "{:?}",
        files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    let csv = String::from_utf8(files[0].1.clone()).unwrap();
    assert!(csv.contains(attribution::NO_ATTRIBUTION), "{csv}");
    assert!(
        csv.contains(&format!("none of the {} attribution", lines.len())),
        "{csv}"
    );
    assert!(
        csv.contains(&format!("no VMM report ×{}", lines.len())),
        "{csv}"
    );
    let mut inputs = f.inputs_for(&samples);
    inputs.extra_files.push((JSONL_FILE.into(), j.clone()));
    inputs.extra_files.extend(files);
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("b");
    let w = write_bundle(&dest, &result, &samples, &inputs).unwrap();
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&dest, 50));
    // A timeline planted beside it (and summed) is caught.
    let mut inputs = f.inputs_for(&samples);
    inputs.extra_files.push((JSONL_FILE.into(), j.clone()));
    inputs
        .extra_files
        .extend(attribution::generate(&j, &samples, clock).unwrap());
    inputs
        .extra_files
        .push((SVG_FILE.into(), b"<svg/>".to_vec()));
    let dest = tmp.path().join("c");
    let w = write_bundle(&dest, &result, &samples, &inputs).unwrap();
    assert!(!w.verdict.is_valid());
    assert!(
        w.verdict
            .render(&dest, 50)
            .contains("whose launches all failed"),
        "{}",
        w.verdict.render(&dest, 50)
    );
}

/// The run line's instrument holds the attribution launches (`cmdline.txt`'s `truecold run`
/// with `--attribution`): `initcall` launches carry no RIP samples and the measured command
/// line with the trace's words added, `rip` launches that reached strict-ready carry samples
/// and the measured command line. A line with launches that names no instrument was written
/// while `initcall` was the default and reads as `initcall` (`Instrument::ABSENT`); a line
/// without launches (an arm of a tune written before arms named them) holds them to nothing.
#[test]
fn the_launches_are_held_to_the_instrument_the_run_line_names() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle_with = |name: &str, rip: bool, flags: &str, more_words: &str| {
        let f = Fixture::linux(6);
        let samples = f.samples();
        let result = f.result(&samples);
        let mut inputs = f.inputs_for(&samples);
        let run = f.invocation();
        assert!(inputs.cmdline.contains(&run));
        inputs.cmdline = inputs.cmdline.replace(&run, &format!("{run}{flags}"));
        // The kernel command line each launch reports: the measured one under `rip`, the
        // trace's words added under `initcall`.
        let (mut lines, cmdline) = if rip {
            (rip_lines_for(&samples), GUEST_CMDLINE.to_string())
        } else {
            (
                lines_for(&samples),
                format!(
                    "{GUEST_CMDLINE} {}",
                    truecold_proto::cmdline::ATTRIBUTION_CMDLINE
                ),
            )
        };
        for l in &mut lines {
            l.report.vmm.as_mut().unwrap()["guest_cmdline"] =
                format!("{cmdline}{more_words}").into();
        }
        let j = jsonl(&lines);
        let clock = result.environment.host_kind.clock().describe();
        inputs.extra_files.push((JSONL_FILE.into(), j.clone()));
        inputs
            .extra_files
            .extend(attribution::generate(&j, &samples, clock).unwrap());
        let dest = tmp.path().join(name);
        let w = write_bundle(&dest, &result, &samples, &inputs).unwrap();
        let text = w.verdict.render(&dest, 50);
        (w.verdict.is_valid(), checks(&w.verdict), text)
    };
    let bundle = |name: &str, rip: bool, flags: &str| bundle_with(name, rip, flags, "");
    type Seen = (bool, std::collections::BTreeSet<Check>, String);
    let valid = |(ok, _, text): Seen| assert!(ok, "{text}");
    let refused = |(ok, c, text): Seen, why: &[&str]| {
        assert!(!ok, "{text}");
        assert_eq!(c, [Check::Attribution].into(), "{text}");
        for w in why {
            assert!(text.contains(w), "`{w}` not in {text}");
        }
    };
    // `initcall` launches: under a line that names no instrument, and one that names it.
    valid(bundle("i-absent", false, " --attribution 3"));
    valid(bundle(
        "i-named",
        false,
        " --attribution 3 --attribution-instrument initcall",
    ));
    refused(
        bundle(
            "i-as-rip",
            false,
            " --attribution 3 --attribution-instrument rip",
        ),
        &[
            "reached strict-ready without RIP samples",
            "not the measured one unchanged (+initcall_debug +log_buf_len=4M \
             +truecold.attribution=1 against that)",
            "--attribution-instrument rip",
        ],
    );
    // `rip` launches: under a line that names `rip`; under one that names none they
    // contradict the `initcall` it means.
    valid(bundle(
        "r-named",
        true,
        " --attribution 3 --attribution-instrument rip --attribution-sample-us 100",
    ));
    refused(
        bundle("r-absent", true, " --attribution 3"),
        &[
            "carries RIP samples",
            "not the measured one with `initcall_debug log_buf_len=4M \
             truecold.attribution=1` added (-initcall_debug -log_buf_len=4M \
             -truecold.attribution=1 against that)",
            "--attribution-instrument initcall",
        ],
    );
    // A word the measured boot did not have, under either instrument.
    let named_rip = " --attribution 3 --attribution-instrument rip --attribution-sample-us 100";
    refused(
        bundle_with("r-word", true, named_rip, " initcall_debug"),
        &["not the measured one unchanged (+initcall_debug against that)"],
    );
    refused(
        bundle_with("i-word", false, " --attribution 3", " quiet"),
        &["(+quiet against that)"],
    );
    // No launches on the line: nothing to hold them to.
    valid(bundle("r-unnamed", true, ""));
    valid(bundle("i-unnamed", false, ""));
}

/// Two more functions, the callers of the stacked lines.
const FN_C: u64 = 0xffff_ffff_8100_0200;
const FN_D: u64 = 0xffff_ffff_8100_0300;

/// [`rip_lines_for`] from a VMM that counts `requested` (one count per vCPU) and, with
/// `stacks`, walks call stacks: vCPU 0's samples in fn_a called from fn_c (a complete
/// chain), in fn_b called from fn_d then fn_c, its halted sample under fn_c with a chain that
/// looped; vCPU 1's not walked.
fn counted_lines_for(
    samples: &[Sample],
    requested: [u64; 2],
    stacks: bool,
) -> Vec<AttributionLine> {
    use truecold_proto::rip::{Recorder, RipSamples, StackEnd, VcpuState};
    rip_lines_for(samples)
        .into_iter()
        .map(|mut l| {
            let vmm = l.report.vmm.as_mut().unwrap();
            if vmm["rip_samples"].is_object() {
                let mut rs: RipSamples =
                    serde_json::from_value(vmm["rip_samples"].clone()).unwrap();
                let decoded = rs.decode().unwrap();
                let mut vcpus = Vec::new();
                for (v, d) in decoded.iter().enumerate() {
                    let mut r = if stacks {
                        Recorder::with_stacks(2)
                    } else {
                        Recorder::new(2)
                    };
                    r.start(rs.t0_ns);
                    for s in d {
                        let in_fn = |f: u64| (f..f + 0x100).contains(&s.rip);
                        let (frames, end): (Vec<u64>, StackEnd) = if v == 1 {
                            (vec![], StackEnd::NotWalked)
                        } else if s.state == VcpuState::Halted {
                            (vec![FN_C + 0x40], StackEnd::NotAbove)
                        } else if in_fn(FN_A) {
                            (vec![FN_C + 0x10], StackEnd::End)
                        } else if in_fn(FN_B) {
                            (vec![FN_D + 0x8, FN_C + 0x20], StackEnd::End)
                        } else {
                            (vec![], StackEnd::End)
                        };
                        assert!(r.push_with_stack(*s, &frames, end));
                    }
                    let mut out = r.finish();
                    out.requested = Some(requested[v]);
                    vcpus.push(out);
                }
                rs.vcpus = vcpus;
                vmm["rip_samples"] = serde_json::to_value(rs).unwrap();
            }
            for (start, name) in [(FN_C, "fn_c"), (FN_D, "fn_d")] {
                l.functions.push(attribution::RipFunction {
                    start,
                    end: start + 0x100,
                    name: name.into(),
                });
            }
            l
        })
        .collect()
}

fn file<'a>(files: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    files
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, b)| b.as_slice())
}

/// A record whose VMM counted `requested`: a rate row per vCPU (one below the floor says
/// so), the call-stacks row, and the shown launch's folded stacks and flame graph, whose
/// stacks add up to its request → strict-ready; without the counts (an older record),
/// none of them.
#[test]
fn requested_counts_give_rates_folded_stacks_and_a_flame_graph() {
    let f = Fixture::linux(5);
    let samples = f.samples();
    // vCPU 0: 10 of 10 (100 %); vCPU 1: 5 of 20 (25 %).
    for stacks in [false, true] {
        let lines = counted_lines_for(&samples, [10, 20], stacks);
        let a = attribute(&lines, &samples).unwrap();
        let r0 = &row(&a, "vcpu0 rate").note;
        assert!(
            r0.starts_with("10 of 10 requested samples (100.0 %): the rate asked for was obtained"),
            "{r0}"
        );
        let r1 = &row(&a, "vcpu1 rate").note;
        assert!(
            r1.starts_with("5 of 20 requested samples (25.0 %): below the 90.0 % floor"),
            "{r1}"
        );
        let st = &row(&a, "call stacks").note;
        if stacks {
            assert!(
                st.starts_with(
                    "call stacks from the guest kernel's frame pointers: 15 samples, 4 distinct \
                     stacks; walks: 9 complete, 1 bad chain: a frame not above the previous, 5 \
                     not walked"
                ),
                "{st}"
            );
        } else {
            assert!(st.starts_with("flat: no call stacks walked"), "{st}");
        }
        let j = jsonl(&lines);
        let files = attribution::generate(&j, &samples, CLOCK).unwrap();
        assert_eq!(files, attribution::generate(&j, &samples, CLOCK).unwrap());
        let folded =
            String::from_utf8(file(&files, attribution::FOLDED_FILE).unwrap().to_vec()).unwrap();
        let total = row(&a, "attribution_total").dur_ns.unwrap();
        let mut sum = 0u64;
        let mut prev = "";
        for line in folded.lines() {
            let (stack, n) = line.rsplit_once(' ').unwrap();
            assert!(stack > prev, "sorted, each stack once");
            prev = stack;
            assert!(stack.starts_with("request->strict-ready;"), "{line}");
            sum += n.parse::<u64>().unwrap();
        }
        assert_eq!(sum, total, "the root is request -> strict-ready");
        assert!(folded.contains(";spawn "), "{folded}");
        if stacks {
            assert!(folded.contains(";fn_c;fn_a "), "{folded}");
            assert!(folded.contains(";fn_c;fn_d;fn_b "), "{folded}");
            assert!(
                folded.contains(
                    ";[stack: bad chain: a frame not above the previous];fn_c;fn_b;[halted] "
                ),
                "{folded}"
            );
        } else {
            assert!(!folded.contains("fn_c"), "{folded}");
            assert!(folded.contains(";fn_b;[halted] "), "{folded}");
        }
        let flame =
            String::from_utf8(file(&files, attribution::FLAME_FILE).unwrap().to_vec()).unwrap();
        assert!(
            flame.starts_with("<?xml") && flame.contains("<svg"),
            "{}",
            &flame[..200]
        );
        assert!(flame.contains("fn_a") && flame.contains("spawn"));
        // The README and the run's summary say the rate was not obtained.
        let section = attribution::readme_section(&j).unwrap();
        assert!(section.contains("| 0 | 1 | 20 | 5 | 25.0 % |"), "{section}");
        assert!(
            section.contains(
                "**The rate asked for was not obtained**: launch 0 vCPU 1: 5 of 20 (25.0 %)"
            ),
            "{section}"
        );
        let w = attribution::rate_warnings(&j);
        let sampled = lines
            .iter()
            .filter(|l| {
                l.report
                    .vmm
                    .as_ref()
                    .is_some_and(|v| v["rip_samples"].is_object())
            })
            .count();
        assert_eq!(w.len(), sampled, "{w:?}");
        assert!(w[0].starts_with("attribution launch 0 vCPU 1: 5 of 20 requested samples (25.0 %)"));
    }
    // Every rate obtained: said once, no warning.
    let ok = jsonl(&counted_lines_for(&samples, [10, 5], false));
    assert!(attribution::readme_section(&ok)
        .unwrap()
        .contains("Every vCPU obtained the rate asked for."));
    assert!(attribution::rate_warnings(&ok).is_empty());
    // An older record: no rate rows, no stacks row, no folded stacks, no README section.
    let old = rip_lines_for(&samples);
    let a = attribute(&old, &samples).unwrap();
    assert!(a
        .rows
        .iter()
        .all(|r| !r.name.ends_with(" rate") && r.name != "call stacks"));
    let files = attribution::generate(&jsonl(&old), &samples, CLOCK).unwrap();
    assert_eq!(files.len(), 2);
    assert!(attribution::readme_section(&jsonl(&old)).is_none());
}

/// The sharing rule of the folded stacks: a sampling period's time goes to the samples of
/// the vCPUs running guest code in it, shared equally; one with only idle samples to them;
/// one without a sample to `[not sampled]`.
#[test]
fn each_period_is_shared_by_the_vcpus_running_in_it() {
    let f = Fixture::linux(3);
    let samples = f.samples();
    let lines = counted_lines_for(&samples, [10, 5], false);
    let p = attribution::profile(&lines[0]).unwrap().unwrap();
    // A leaf's ns over the stages its samples fall in.
    let ns = |s: &str| -> u64 {
        p.stacks
            .iter()
            .filter(|(k, _)| k.ends_with(&format!(";{s}")))
            .map(|(_, n)| n)
            .sum()
    };
    // vCPU 0: A A B A A A(unknown) B B halted A; vCPU 1: waiting waiting B B user, periods
    // 1..=10 after the sampler's start (one sample of each vCPU a period, from period 1).
    // fn_a: periods 1, 2 whole (vCPU 1 waiting), 4, 5 half (vCPU 1 in fn_b, then in user
    // space), 6 and 10 whole: 5 periods.
    assert_eq!(ns("fn_a"), 500_000);
    // fn_b: periods 3 (both vCPUs in it), 7 and 8 whole, period 4 half (vCPU 1).
    assert_eq!(ns("fn_b"), 350_000);
    assert_eq!(ns("[no symbol]"), 50_000);
    // Period 9: vCPU 0 halted alone: the idle sample has it.
    assert_eq!(ns("[halted]"), 100_000);
    // The waiting AP never had a period: vCPU 0 ran in each of its.
    assert!(p.stacks.keys().all(|k| !k.ends_with("[waiting for start]")));
    let sampled: u64 = p
        .stacks
        .iter()
        .filter(|(k, _)| !k.ends_with(attribution::NOT_SAMPLED) && k.matches(';').count() > 1)
        .map(|(_, n)| n)
        .sum();
    assert_eq!(sampled, 1_000_000, "ten sampled periods");
}

/// verify recomputes the folded stacks and the flame graph like every generated file, and
/// the README's attribution section: an altered folded-stack file, a flame graph that does
/// not match the samples, a README without its section, and folded stacks beside an
/// attribution that does not make them are each a reason; `report` regenerates them.
#[test]
fn verify_holds_the_folded_stacks_and_flame_graph_to_the_samples() {
    let tmp = tempfile::tempdir().unwrap();
    let make = |name: &str, lines: Vec<AttributionLine>| {
        let f = Fixture::linux(6);
        let samples = f.samples();
        let result = f.result(&samples);
        let mut inputs = f.inputs_for(&samples);
        let j = jsonl(&lines);
        let clock = result.environment.host_kind.clock().describe();
        inputs.extra_files.push((JSONL_FILE.into(), j.clone()));
        inputs
            .extra_files
            .extend(attribution::generate(&j, &samples, clock).unwrap());
        let dest = tmp.path().join(name);
        let w = write_bundle(&dest, &result, &samples, &inputs).unwrap();
        assert!(w.verdict.is_valid(), "{}", w.verdict.render(&dest, 50));
        dest
    };
    let samples = Fixture::linux(6).samples();
    let lines = || counted_lines_for(&samples, [10, 20], true);
    let d = make("ok", lines());
    let readme = fs::read_to_string(d.join("README.md")).unwrap();
    assert!(readme.contains("\n## Attribution\n"), "{readme}");
    assert!(readme.contains("**The rate asked for was not obtained**"));
    let sums = fs::read_to_string(d.join("SHA256SUMS")).unwrap();
    for n in [attribution::FOLDED_FILE, attribution::FLAME_FILE] {
        assert!(sums.contains(n), "{n}");
    }
    assert!(verify_dir(&d).is_valid());
    // An altered folded-stack file.
    let d1 = make("folded", lines());
    let folded = fs::read_to_string(d1.join(attribution::FOLDED_FILE)).unwrap();
    let (first, rest) = folded.split_once('\n').unwrap();
    let (stack, n) = first.rsplit_once(' ').unwrap();
    let n: u64 = n.parse().unwrap();
    fs::write(
        d1.join(attribution::FOLDED_FILE),
        format!("{stack} {}\n{rest}", n + 1),
    )
    .unwrap();
    resum(&d1);
    let v = verify_dir(&d1);
    assert!(
        checks(&v).contains(&Check::Attribution),
        "{}",
        v.render(&d1, 20)
    );
    assert!(truecold_proof::regenerate(&d1).is_ok());
    assert_eq!(
        fs::read_to_string(d1.join(attribution::FOLDED_FILE)).unwrap(),
        folded
    );
    assert!(verify_dir(&d1).is_valid());
    // A flame graph that does not match the samples: one sample moved from fn_a to fn_b in
    // the jsonl, the flame graph (and every other file) left as they were.
    let d2 = make("flame", lines());
    let flame = fs::read(d2.join(attribution::FLAME_FILE)).unwrap();
    let other = make("other", {
        let mut l = lines();
        for x in &mut l {
            if let Some(v) = x.report.vmm.as_mut() {
                if v["rip_samples"].is_object() {
                    v["rip_samples"]["vcpus"][0]["drip"][0] = (FN_B as i64).into();
                }
            }
        }
        l
    });
    let other_flame = fs::read(other.join(attribution::FLAME_FILE)).unwrap();
    assert_ne!(flame, other_flame, "the samples change the flame graph");
    fs::write(d2.join(attribution::FLAME_FILE), &other_flame).unwrap();
    resum(&d2);
    let v = verify_dir(&d2);
    assert!(
        v.reasons
            .iter()
            .any(|r| r.check == Check::Attribution && r.detail.contains(attribution::FLAME_FILE)),
        "{}",
        v.render(&d2, 20)
    );
    // The page: the flame graph among the attribution's images, the rate not obtained said
    // where a reader looks; it verifies, and a second `report` writes the same bytes.
    let dh = make("html", lines());
    truecold_proof::verify::report_dir_with(&dh, true).unwrap();
    let page = fs::read_to_string(dh.join(truecold_proof::names::HTML_FILE)).unwrap();
    assert!(page.contains("<h3>Flame graph</h3>"), "flame graph section");
    assert!(page.contains("<b>Rate not obtained:</b> attribution launch 0 vCPU 1: 5 of 20"));
    assert!(
        page.contains("The rate asked for was not obtained"),
        "the README's section"
    );
    assert!(!page.contains("<script"));
    assert!(
        verify_dir(&dh).is_valid(),
        "{}",
        verify_dir(&dh).render(&dh, 20)
    );
    truecold_proof::verify::report_dir_with(&dh, true).unwrap();
    assert_eq!(
        fs::read_to_string(dh.join(truecold_proof::names::HTML_FILE)).unwrap(),
        page
    );
    // The README without its attribution section.
    let d3 = make("readme", lines());
    let r = fs::read_to_string(d3.join("README.md")).unwrap();
    let cut = r.find("\n## Attribution\n").unwrap();
    let end = r[cut + 1..].find("\n## ").unwrap() + cut + 1;
    fs::write(d3.join("README.md"), format!("{}{}", &r[..cut], &r[end..])).unwrap();
    resum(&d3);
    assert!(checks(&verify_dir(&d3)).contains(&Check::GeneratedStale));
    // Folded stacks planted beside an older record's attribution.
    let d4 = make("old", rip_lines_for(&samples));
    assert!(!d4.join(attribution::FOLDED_FILE).exists());
    assert!(!fs::read_to_string(d4.join("README.md"))
        .unwrap()
        .contains("## Attribution"));
    fs::write(d4.join(attribution::FOLDED_FILE), &folded).unwrap();
    resum(&d4);
    assert!(checks(&verify_dir(&d4)).contains(&Check::Attribution));
}

/// `compare A B` of two bundles with RIP-sampled attribution launches: the differential
/// profile names the function whose samples B added, with its ms, above the noise, and
/// nothing else; every line of the text output within its width; a bundle without
/// attribution gives none.
#[test]
fn compare_adds_the_differential_profile() {
    let tmp = tempfile::tempdir().unwrap();
    let make = |name: &str, lines: Vec<AttributionLine>| {
        let f = Fixture::linux(30);
        let samples = f.samples();
        let result = f.result(&samples);
        let mut inputs = f.inputs_for(&samples);
        let j = jsonl(&lines);
        let clock = result.environment.host_kind.clock().describe();
        inputs.extra_files.push((JSONL_FILE.into(), j.clone()));
        inputs
            .extra_files
            .extend(attribution::generate(&j, &samples, clock).unwrap());
        let dest = tmp.path().join(name);
        let w = write_bundle(&dest, &result, &samples, &inputs).unwrap();
        assert!(w.verdict.is_valid(), "{}", w.verdict.render(&dest, 50));
        dest
    };
    let samples = Fixture::linux(30).samples();
    let a = make("a", counted_lines_for(&samples, [10, 5], false));
    // B: vCPU 0's samples in fn_a moved to fn_d (5 of its periods, 0.5 ms of the boot).
    let mut lb = counted_lines_for(&samples, [10, 5], false);
    for l in &mut lb {
        let v = l.report.vmm.as_mut().unwrap();
        if v["rip_samples"].is_object() {
            let mut rs: truecold_proto::rip::RipSamples =
                serde_json::from_value(v["rip_samples"].clone()).unwrap();
            let d = rs.decode().unwrap();
            let mut r = truecold_proto::rip::Recorder::new(2);
            r.start(rs.t0_ns);
            for s in &d[0] {
                let mut s = *s;
                if (FN_A..FN_A + 0x100).contains(&s.rip) {
                    s.rip = FN_D + 4;
                }
                r.push(s);
            }
            let mut v0 = r.finish();
            v0.requested = rs.vcpus[0].requested;
            rs.vcpus[0] = v0;
            v["rip_samples"] = serde_json::to_value(rs).unwrap();
        }
    }
    let b = make("b", lb);
    let o = truecold_proof::CompareOptions::default();
    let c = truecold_proof::verify::compare_dirs(&a, &b, &o, |_, _| {}).unwrap();
    let p = c.profile.as_ref().expect("both sides sampled");
    assert!(p.a_launches > 1 && p.a_launches == p.b_launches);
    let names: Vec<&str> = p.above_noise().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["fn_a", "fn_d"], "{:?}", p.functions);
    let fd = p.functions.iter().find(|f| f.name == "fn_d").unwrap();
    assert_eq!((fd.a_ns, fd.b_ns, fd.delta_ns), (0, 500_000, 500_000));
    assert_eq!(fd.ci95_ns, Some((500_000, 500_000)));
    let t = c.render_text(false);
    assert!(
        t.contains("differential profile of the attribution launches"),
        "{t}"
    );
    assert!(
        t.lines()
            .all(|l| l.chars().count() <= truecold_proof::compare::TEXT_WIDTH),
        "{t}"
    );
    let m = c.render_markdown(false);
    assert!(
        m.contains("| * | +0.500 | [+0.500, +0.500] | 0.000 | 0.500 | fn_d |"),
        "{m}"
    );
    let j: serde_json::Value = serde_json::from_str(&c.render_json().unwrap()).unwrap();
    assert_eq!(j["profile"]["functions"][0]["name"], "fn_a");
    assert!(p.flame_svg().contains("fn_d"));
    // A without attribution: no profile, no key.
    let plain = tmp.path().join("plain");
    let f = Fixture::linux(30);
    let s = f.samples();
    write_bundle(&plain, &f.result(&s), &s, &f.inputs_for(&s)).unwrap();
    let c = truecold_proof::verify::compare_dirs(&plain, &b, &o, |_, _| {}).unwrap();
    assert!(c.profile.is_none());
    assert!(!c.render_json().unwrap().contains("\"profile\""));
}
