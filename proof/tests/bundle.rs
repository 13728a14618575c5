//! Round trips, atomic writing, sha256sum compatibility, report determinism, labels.
mod common;

use common::*;
use std::fs;
use std::process::Command;
use truecold_proof::bundle::{parse_result, result_bytes};
use truecold_proof::csv::{read_samples, write_samples};
use truecold_proof::names::{RESULT_FILE, SAMPLES_FILE};
use truecold_proof::schema::*;
use truecold_proof::{regenerate, verify_dir, write_bundle, BundleError, Check};

#[test]
fn csv_round_trip_with_awkward_text() {
    let mut s = Fixture::linux(30).samples();
    s[3].error_detail = "comma, \"quote\", new\nline, cr\r, trailing \"".into();
    s[4].workload = "a,b".into();
    let text = write_samples(&s);
    assert_eq!(read_samples(text.as_bytes()).unwrap(), s);
}

/// The committed 1,000-row bundle (schema 5): its samples.csv parses with the `csv`-crate
/// reader for its schema and is exactly what the writer produces from its rows with that
/// schema's columns (so old bundles stay canonical); the current schema's reader refuses
/// it (it lacks the `seccomp_ns` column).
#[test]
fn committed_bundle_samples_are_canonical() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../results/20261130T181436Z-probe-floor-sequential-2vcpu-16384mib");
    let bytes = fs::read(dir.join(SAMPLES_FILE)).unwrap();
    let e = read_samples(&bytes).unwrap_err().to_string();
    assert!(e.contains("seccomp_ns"), "{e}");
    let rows = truecold_proof::csv::read_schema_samples_from(bytes.as_slice(), 5).unwrap();
    assert_eq!(rows.len(), 1000);
    assert!(rows.iter().enumerate().all(|(i, s)| s.index == i as u64));
    let mut again = Vec::new();
    truecold_proof::csv::write_schema_samples_to(&mut again, &rows, 5).unwrap();
    assert_eq!(again, bytes);
    // Written with the current schema, the same rows have the new (empty) column.
    assert!(write_samples(&rows)
        .lines()
        .next()
        .unwrap()
        .contains(",seccomp_ns,"));
    let read_samples = |b: &[u8]| truecold_proof::csv::read_schema_samples_from(b, 5);
    // The same bytes with CRLF line ends, or one field quoted, are refused.
    let crlf = String::from_utf8(bytes.clone())
        .unwrap()
        .replace('\n', "\r\n");
    assert!(read_samples(crlf.as_bytes()).is_err());
    let quoted = String::from_utf8(bytes)
        .unwrap()
        .replacen(",probe,", ",\"probe\",", 7);
    let e = read_samples(quoted.as_bytes()).unwrap_err().to_string();
    assert!(
        e.contains("line 2, column `contract`") && e.contains("canonical"),
        "{e}"
    );
}

#[test]
fn json_round_trip() {
    let f = Fixture::linux(50);
    let s = f.samples();
    let r = f.result(&s);
    assert_eq!(parse_result(&result_bytes(&r).unwrap()).unwrap(), r);
    // Every mode round-trips.
    for mode in [
        Mode::Sequential { count: 3 },
        Mode::Burst {
            count: 3,
            concurrency: 2,
        },
        Mode::OpenLoop {
            count: 3,
            rate_per_ks: 2500,
        },
        Mode::Sweep {
            max_concurrency: 4,
            per_level: 10,
        },
        Mode::Churn {
            count: 9,
            concurrency: 3,
        },
    ] {
        let mut r2 = r.clone();
        r2.contract.mode = mode;
        assert_eq!(parse_result(&result_bytes(&r2).unwrap()).unwrap(), r2);
    }
}

#[test]
fn unknown_json_field_is_rejected() {
    let f = Fixture::linux(5);
    let r = f.result(&f.samples());
    let mut v: serde_json::Value = serde_json::from_slice(&result_bytes(&r).unwrap()).unwrap();
    v["contract"]["surprise"] = serde_json::json!(1);
    assert!(parse_result(&serde_json::to_vec(&v).unwrap()).is_err());
}

#[test]
fn written_bundle_verifies_and_passes_real_sha256sum() {
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::linux(100).write(t.path(), "b");
    let v = verify_dir(&dir);
    assert!(v.is_valid(), "{}", v.render(&dir, 50));
    let out = Command::new("sha256sum")
        .args(["-c", "--strict", "SHA256SUMS"])
        .current_dir(&dir)
        .output()
        .expect("sha256sum (coreutils) must be installed: apt-get install coreutils");
    assert!(
        out.status.success(),
        "sha256sum -c --strict failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // It checked every file but SHA256SUMS.
    let n = fs::read_dir(&dir).unwrap().count() - 1;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).matches(": OK").count(),
        n
    );
}

#[test]
fn bundle_files_round_trip() {
    let t = tempfile::tempdir().unwrap();
    let f = Fixture::linux(40);
    let dir = f.write(t.path(), "b");
    let (r, s) = truecold_proof::read_bundle(&dir).unwrap();
    assert_eq!(s, f.samples());
    assert_eq!(r, f.result(&s));
    assert_eq!(
        fs::read(dir.join("config")).unwrap(),
        f.config_bytes().unwrap()
    );
}

#[test]
fn atomic_write_leaves_no_temporary_and_never_overwrites() {
    let t = tempfile::tempdir().unwrap();
    let f = Fixture::probe(10);
    let dir = f.write(t.path(), "b");
    let names: Vec<_> = fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("b")]);
    let before = fs::read(dir.join(RESULT_FILE)).unwrap();
    let s = f.samples();
    let err = write_bundle(&dir, &f.result(&s), &s, &f.inputs_for(&s)).unwrap_err();
    assert!(matches!(err, BundleError::Exists(_)), "{err}");
    assert_eq!(fs::read(dir.join(RESULT_FILE)).unwrap(), before);
    // A failing write (a probe bundle given a kernel config) leaves nothing behind.
    let mut bad = f.inputs();
    bad.kernel_config = Some(b"x".to_vec());
    let err = write_bundle(&t.path().join("c"), &f.result(&s), &s, &bad).unwrap_err();
    assert!(matches!(err, BundleError::ConfigPresence), "{err}");
    assert_eq!(fs::read_dir(t.path()).unwrap().count(), 1);
    // An extra file with a forbidden name is refused.
    let mut bad = f.inputs();
    bad.extra_files = vec![("../evil".into(), vec![])];
    assert!(matches!(
        write_bundle(&t.path().join("d"), &f.result(&s), &s, &bad),
        Err(BundleError::BadExtraName(_))
    ));
    assert_eq!(fs::read_dir(t.path()).unwrap().count(), 1);
}

#[test]
fn extra_files_are_checksummed() {
    let t = tempfile::tempdir().unwrap();
    let f = Fixture::linux(10);
    let s = f.samples();
    let mut inputs = f.inputs();
    inputs
        .extra_files
        .push(("vmm-stderr.log".into(), b"hello\n".to_vec()));
    let w = write_bundle(&t.path().join("b"), &f.result(&s), &s, &inputs).unwrap();
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 50));
    let sums = fs::read_to_string(w.path.join("SHA256SUMS")).unwrap();
    assert!(sums.contains("  vmm-stderr.log\n"));
}

#[test]
fn report_is_deterministic_and_matches_the_writer() {
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::linux(60).write(t.path(), "b");
    let snapshot = |d: &std::path::Path| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = fs::read_dir(d)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let written = snapshot(&dir);
    fs::write(dir.join("README.md"), "stale").unwrap();
    fs::remove_file(dir.join("stages.svg")).unwrap();
    regenerate(&dir).unwrap();
    let once = snapshot(&dir);
    regenerate(&dir).unwrap();
    let twice = snapshot(&dir);
    assert_eq!(once, twice);
    assert_eq!(once, written);
    assert!(verify_dir(&dir).is_valid());
}

#[test]
fn report_refuses_to_launder_changed_data() {
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::linux(20).write(t.path(), "b");
    let p = dir.join(SAMPLES_FILE);
    let mut b = fs::read(&p).unwrap();
    let last = b.len() - 2;
    b[last] = if b[last] == b'x' { b'y' } else { b'x' };
    fs::write(&p, b).unwrap();
    match regenerate(&dir) {
        Err(BundleError::Dir(truecold_proof::skeleton::DirError::Tampered(n))) => {
            assert_eq!(n, SAMPLES_FILE)
        }
        other => panic!("expected Tampered, got {other:?}"),
    }
}

#[test]
fn probe_bundle_verifies_under_its_own_label() {
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::probe(20).write(t.path(), "p");
    let v = verify_dir(&dir);
    assert!(v.is_valid(), "{}", v.render(&dir, 50));
    let r = v.result.as_ref().unwrap();
    assert_eq!(r.contract.label, PROBE_LABEL);
    assert!(v.render(&dir, 5).contains(PROBE_LABEL));
    for f in ["README.md", "latency-cdf.svg", "stages.svg", "result.json"] {
        let text = fs::read_to_string(dir.join(f)).unwrap();
        assert!(text.contains(PROBE_LABEL), "{f} lacks the probe label");
        assert!(
            !text.contains(LINUX_LABEL),
            "{f} calls a probe bundle a Linux boot"
        );
    }
    assert!(!dir.join("config").exists());
}

#[test]
fn probe_rows_in_a_linux_bundle_are_caught() {
    let t = tempfile::tempdir().unwrap();
    let f = Fixture::linux(10);
    let mut s = f.samples();
    s[2].contract = ContractKind::Probe;
    let r = f.result(&s);
    let w = write_bundle(&t.path().join("b"), &r, &s, &f.inputs_for(&s)).unwrap();
    assert!(w.verdict.has(Check::RowContract));
    // And a probe bundle relabelled as Linux is caught by its label check.
    let f = Fixture::probe(10);
    let s = f.samples();
    let mut r = f.result(&s);
    r.contract.label = LINUX_LABEL.into();
    let w = write_bundle(&t.path().join("c"), &r, &s, &f.inputs_for(&s)).unwrap();
    assert!(w.verdict.has(Check::ContractLabel));
}

#[test]
fn incomplete_bundle_is_valid_and_says_so() {
    let t = tempfile::tempdir().unwrap();
    let mut f = Fixture::linux(50);
    f.incomplete = true;
    let s: Vec<Sample> = f.samples().into_iter().take(17).collect();
    let r = f.result(&s);
    let w = write_bundle(&t.path().join("b"), &r, &s, &f.inputs_for(&s)).unwrap();
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 50));
    let readme = fs::read_to_string(w.path.join("README.md")).unwrap();
    assert!(readme.contains("INCOMPLETE"));
    // The same rows claimed complete are caught.
    f.incomplete = false;
    let r = f.result(&s);
    let w = write_bundle(&t.path().join("c"), &r, &s, &f.inputs_for(&s)).unwrap();
    assert!(w.verdict.has(Check::AttemptCount));
}

#[test]
fn unknown_schema_version_is_unreadable_with_a_clear_error() {
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::linux(5).write(t.path(), "b");
    let p = dir.join(RESULT_FILE);
    let text = fs::read_to_string(&p).unwrap().replace(
        &format!(
            "\"schema_version\": {}",
            truecold_proof::schema::SCHEMA_VERSION
        ),
        "\"schema_version\": 99",
    );
    fs::write(&p, text).unwrap();
    let v = verify_dir(&dir);
    assert_eq!(v.exit_code(), 2);
    assert!(v.unreadable.unwrap().contains("unknown schema_version 99"));
    assert_eq!(verify_dir(&t.path().join("nope")).exit_code(), 2);
}

#[test]
fn failures_are_scored_at_the_deadline() {
    let f = Fixture::linux(70); // every 7th fails: 10 failures
    let s = f.samples();
    let r = f.result(&s);
    assert_eq!((r.summary.attempts, r.summary.failures), (70, 10));
    let wf = r.summary.headline.with_failures.unwrap();
    assert_eq!(wf.n, 70);
    assert_eq!(wf.max, DEADLINE);
    // 60 successes below the deadline, 10 at it: p90 rank 63 → the deadline.
    assert_eq!(wf.p90, DEADLINE);
    assert_eq!(r.summary.headline.successes.unwrap().n, 60);
    assert_eq!(r.summary.errors.values().sum::<u64>(), 10);
    assert_eq!(r.summary.success_rate_ppm, 857_142);
}

#[test]
fn sweep_groups_and_knee() {
    let f = Fixture::linux(30);
    let mut s = f.samples();
    for (i, x) in s.iter_mut().enumerate() {
        x.concurrency = (i / 10) as u32 + 1;
    }
    let mut r = f.result(&s);
    r.contract.mode = Mode::Sweep {
        max_concurrency: 3,
        per_level: 10,
    };
    r.summary = truecold_proof::Summaries::compute(&r.contract, &s);
    assert_eq!(r.summary.by_concurrency.len(), 3);
    assert!(r.summary.peak_throughput_concurrency.is_some());
    // Same latency distribution at every level: no level is 1.5× slower, no knee.
    assert_eq!(r.summary.knee_concurrency, None);
    let t = tempfile::tempdir().unwrap();
    let w = write_bundle(&t.path().join("b"), &r, &s, &f.inputs_for(&s)).unwrap();
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 50));
}

#[test]
fn empty_incomplete_bundle_is_valid() {
    let t = tempfile::tempdir().unwrap();
    let mut f = Fixture::probe(1000);
    f.incomplete = true;
    let s: Vec<Sample> = vec![];
    let w = write_bundle(&t.path().join("b"), &f.result(&s), &s, &f.inputs_for(&s)).unwrap();
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 50));
}

#[test]
fn open_loop_bundle_built_from_stamps_verifies() {
    let t = tempfile::tempdir().unwrap();
    let f = Fixture::probe(0);
    let mut samples = Vec::new();
    for i in 0..30u64 {
        let intended = 1_000_000 + i * 10_000_000;
        let request = intended + 50_000 + i * 1000; // harness lateness
        let mut s = Sample::new(i, ContractKind::Probe, 0, MEM);
        s.set_times(&Stamps {
            intended: Some(intended),
            request: Some(request),
            boot_start: Some(request + 2_000_000),
            kvm_open: Some(request + 2_100_000),
            vm_created: Some(request + 2_500_000),
            memory_ready: Some(request + 15_000_000),
            kernel_loaded: Some(request + 15_100_000),
            sandboxed: Some(request + 15_150_000),
            first_run: Some(request + 15_600_000),
            // The probe rings both doorbells; a success passes every host stage.
            init_doorbell: Some(request + 15_700_000),
            ready_doorbell: Some(request + 15_800_000),
            serial_ready: None,
            strict_ready: Some(request + 15_900_000),
            record: Some(request + 16_000_000),
            exit: Some(request + 16_100_000),
            teardown_done: Some(request + 16_500_000),
            reaped: Some(request + 17_000_000),
        });
        s.host_memslots = Some(MEM);
        s.host_e820_usable = Some(MEM);
        s.workload = "not_run".into();
        s.ok = true;
        samples.push(s);
    }
    let mut r = f.result(&samples);
    r.contract.mode = Mode::OpenLoop {
        count: 30,
        rate_per_ks: 100_000,
    };
    r.summary = truecold_proof::Summaries::compute(&r.contract, &samples);
    let w = write_bundle(&t.path().join("b"), &r, &samples, &f.inputs_for(&samples)).unwrap();
    assert!(w.verdict.is_valid(), "{}", w.verdict.render(&w.path, 50));
    let q = r.summary.stages.iter().find(|s| s.name == "queue").unwrap();
    assert_eq!(q.successes.unwrap().min, 50_000);
    // The same rows declared sequential are caught: intended times, concurrency.
    let mut r2 = r.clone();
    r2.contract.mode = Mode::Sequential { count: 30 };
    let w = write_bundle(&t.path().join("c"), &r2, &samples, &f.inputs_for(&samples)).unwrap();
    assert!(w.verdict.has(Check::IntendedTime) && w.verdict.has(Check::Concurrency));
}

/// The text nodes of an SVG (plotters writes each on its own line).
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| t.split_once('>').map(|(_, rest)| rest))
        .filter_map(|rest| {
            rest.split_once("</text>")
                .map(|(t, _)| t.trim().to_string())
        })
        .collect()
}

#[test]
fn plots_are_deterministic_with_round_ticks() {
    use truecold_proof::plot::{cdf_svg, stages_svg};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../results/20261130T181436Z-probe-floor-sequential-2vcpu-16384mib");
    let (r, s) = truecold_proof::read_bundle(&dir).unwrap();
    let cdf = cdf_svg(&r, &s);
    assert_eq!(cdf, cdf_svg(&r, &s.clone()));
    assert_eq!(stages_svg(&r), stages_svg(&r.clone()));
    // p50 168 ms, min 141 ms, max 270 ms: a linear axis from the data, 140..300 in steps
    // of 20 ms (not from 0); p50 and p99 marked; the tail panel down to one launch of
    // 1,000 (0.1 %).
    let texts = svg_texts(&cdf);
    for t in [
        "140", "160", "200", "280", "300", "0%", "20%", "100%", "10%", "1%", "0.1%",
    ] {
        assert!(texts.iter().any(|x| x == t), "tick {t} missing: {texts:?}");
    }
    for t in ["0", "50", "120", "320", "0.01%"] {
        assert!(!texts.iter().any(|x| x == t), "tick {t} present: {texts:?}");
    }
    let st = r.summary.headline.successes.unwrap();
    for t in [
        format!("p50 {}", truecold_proof::fmt::ms(st.p50)),
        format!("p99 {}", truecold_proof::fmt::ms(st.p99)),
    ] {
        assert!(texts.contains(&t), "marker {t} missing: {texts:?}");
    }
    // No failure: no with-failures series in the legend.
    assert!(
        !texts.iter().any(|x| x.contains("with failures")),
        "{texts:?}"
    );
    assert!(texts.iter().any(|x| x == "latency, ms"), "{texts:?}");
    // The stage plot: 0..200 ms in steps of 50; the title on two lines, each within the
    // 800 px canvas (monospace at most 0.6 em per character).
    let st = stages_svg(&r);
    let texts = svg_texts(&st);
    for t in ["0", "50", "100", "150", "200"] {
        assert!(texts.iter().any(|x| x == t), "tick {t} missing: {texts:?}");
    }
    assert_eq!(texts[0], PROBE_LABEL);
    assert!(texts[1].starts_with("per-stage p50 (bar) and p99 (tick)"));
    for t in &texts[..2] {
        assert!(12.0 + t.chars().count() as f64 * 0.6 * 17.0 < 800.0, "{t}");
    }
}

#[test]
fn a_long_tail_gets_a_log_axis() {
    use truecold_proof::plot::{cdf_svg, long_tail};
    let mut f = Fixture::linux(300);
    f.sigma = 1.2; // log-normal: max far beyond 20 × p50
    let s = f.samples();
    let r = f.result(&s);
    let mut ok: Vec<u64> = s
        .iter()
        .filter(|x| x.ok)
        .filter_map(|x| x.latency_ns)
        .collect();
    ok.sort_unstable();
    assert!(long_tail(&ok));
    let svg = cdf_svg(&r, &s);
    assert_eq!(svg, cdf_svg(&r, &s));
    let texts = svg_texts(&svg);
    assert!(texts.iter().any(|t| t.contains("log scale")), "{texts:?}");
    // Tick labels are 1, 2 or 5 × 10^k.
    let ticks: Vec<f64> = texts
        .iter()
        .filter(|t| !t.ends_with('%'))
        .filter_map(|t| t.parse::<f64>().ok())
        .collect();
    assert!(ticks.len() >= 4, "{texts:?}");
    for t in &ticks {
        let mag = 10f64.powf(t.log10().floor());
        let m = (t / mag * 1e6).round() / 1e6;
        assert!([1.0, 2.0, 5.0].contains(&m), "tick {t}");
    }
    // The normal fixture keeps a linear axis.
    let f = Fixture::linux(300);
    let s = f.samples();
    let texts = svg_texts(&cdf_svg(&f.result(&s), &s));
    assert!(!texts.iter().any(|t| t.contains("log scale")));
    // It has failures: the with-failures series is drawn and in the legend.
    assert!(
        texts.iter().any(|t| t.contains("with failures")),
        "{texts:?}"
    );
}

#[test]
fn the_readme_and_result_json_state_the_clock() {
    let t = tempfile::tempdir().unwrap();
    let wall = Fixture::linux(10).write(t.path(), "wall");
    let virt = Fixture {
        host: HostKind::NestedEmulated,
        ..Fixture::linux(10)
    }
    .write(t.path(), "virtual");
    let read = |d: &std::path::Path, f: &str| std::fs::read_to_string(d.join(f)).unwrap();
    let cost = "a reproducible cost model of the boot path, not a hardware latency";
    let r = read(&wall, "README.md");
    assert!(
        r.contains(&format!(
            "- host KVM: hardware\n- clock: {}\n",
            Clock::Wall.describe()
        )),
        "{r}"
    );
    assert!(!r.contains(cost) && !r.contains("virtual"), "{r}");
    let r = read(&virt, "README.md");
    assert!(
        r.contains(&format!(
            "- host KVM: nested-emulated\n- clock: {}\n- what the clock measures: {cost}\n",
            Clock::Virtual.describe()
        )),
        "{r}"
    );
    assert!(r.contains("**Virtual clock.**"), "{r}");
    assert!(
        r.contains(
            "- nested harness: L1 QEMU `-seed` 0x0000000000000007; L0 QEMU `QEMU emulator version 10.0.2 (test)`; \
             L1 kernel sha256 `1111111111111111111111111111111111111111111111111111111111111111`; \
             L1 CPUs 2"
        ),
        "{r}"
    );
    for (d, want) in [(&wall, "wall"), (&virt, "virtual")] {
        let j: serde_json::Value = serde_json::from_str(&read(d, "result.json")).unwrap();
        assert_eq!(j["schema_version"], truecold_proof::SCHEMA_VERSION);
        assert_eq!(j["contract"]["clock"], want);
        // The nested harness's inputs exactly in the virtual-clock bundle.
        assert_eq!(j["environment"].get("nested").is_some(), want == "virtual");
        assert_eq!(j["contract"]["interleaved"], false);
        assert_eq!(j["configuration"]["knobs"], serde_json::json!([]));
    }
}
