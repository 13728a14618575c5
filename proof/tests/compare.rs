//! `compare` on synthetic samples with known shifts, and on bundles.
mod common;

use common::*;
use truecold_proof::compare::{
    bootstrap_delta_ci, compare_values, compare_verified, mann_whitney_p, CompareError,
    MetricVerdict,
};
use truecold_proof::fmt::p_text;
use truecold_proof::schema::{Clock, HostKind};
use truecold_proof::{compare_bundles, verify_dir, CompareOptions, Outcome};

fn draw(rng: &mut Rng, n: usize, median: f64) -> Vec<u64> {
    (0..n).map(|_| rng.latency(median, 0.1)).collect()
}

#[test]
fn detects_a_five_percent_median_shift_at_n_200() {
    let o = CompareOptions::default();
    for seed in 0..20 {
        let mut rng = Rng(1000 + seed);
        let a = draw(&mut rng, 200, 30e6);
        let b = draw(&mut rng, 200, 30e6 * 1.05);
        let m = compare_values("h", true, &a, &b, &o);
        assert_eq!(m.verdict, MetricVerdict::Regressed, "seed {seed}: {m:?}");
        let m = compare_values("h", true, &b, &a, &o);
        assert_eq!(m.verdict, MetricVerdict::Improved, "seed {seed}: {m:?}");
    }
}

#[test]
fn same_distribution_is_no_change_in_at_least_95_of_100_trials() {
    let o = CompareOptions::default();
    let mut no_change = 0;
    for seed in 0..100 {
        let mut rng = Rng(5000 + seed);
        let a = draw(&mut rng, 200, 30e6);
        let b = draw(&mut rng, 200, 30e6);
        if compare_values("h", true, &a, &b, &o).verdict == MetricVerdict::NoChange {
            no_change += 1;
        }
    }
    eprintln!("same distribution: {no_change}/100 trials said no change");
    assert!(
        no_change >= 95,
        "only {no_change}/100 trials said no change"
    );
}

#[test]
fn too_few_samples_is_inconclusive() {
    let o = CompareOptions::default();
    let mut rng = Rng(7);
    let a = draw(&mut rng, 10, 30e6);
    let b = draw(&mut rng, 10, 60e6);
    let m = compare_values("h", true, &a, &b, &o);
    assert_eq!(m.verdict, MetricVerdict::Inconclusive);
    assert!(m.why.contains("too few"));
}

#[test]
fn a_clear_shift_that_too_few_values_cannot_confirm_is_inconclusive_not_no_change() {
    // 5 against 5 fully separated values: the Mann–Whitney test cannot go below p ≈ 0.012,
    // yet the interval excludes 0 by far. Before this rule that was "no change".
    let o = CompareOptions {
        min_samples: 5,
        ..CompareOptions::default()
    };
    let a: Vec<u64> = (0..5).map(|i| 100_000_000 + i * 100_000).collect();
    let b: Vec<u64> = (0..5).map(|i| 130_000_000 + i * 100_000).collect();
    let m = compare_values("h", true, &a, &b, &o);
    assert!(m.p_value.unwrap() >= 0.01, "{m:?}");
    assert_eq!(m.verdict, MetricVerdict::Inconclusive, "{}", m.why);
    assert!(m.why.contains("too few values to confirm"), "{}", m.why);
    // At 6 against 6 the test confirms it.
    let a6: Vec<u64> = (0..6).map(|i| 100_000_000 + i * 100_000).collect();
    let b6: Vec<u64> = (0..6).map(|i| 130_000_000 + i * 100_000).collect();
    let m = compare_values("h", true, &a6, &b6, &o);
    assert_eq!(m.verdict, MetricVerdict::Regressed, "{}", m.why);
}

#[test]
fn wide_interval_is_inconclusive() {
    let o = CompareOptions::default();
    let mut rng = Rng(8);
    // Log-sd 1.0: the median's interval is far wider than 10 % at n = 30.
    let a: Vec<u64> = (0..30).map(|_| rng.latency(30e6, 1.0)).collect();
    let b: Vec<u64> = (0..30).map(|_| rng.latency(30e6, 1.0)).collect();
    let m = compare_values("h", true, &a, &b, &o);
    assert_eq!(m.verdict, MetricVerdict::Inconclusive, "{m:?}");
    assert!(m.why.contains("interval"));
}

#[test]
fn mann_whitney_by_hand() {
    // A = 1 2 3, B = 4 5 6: U1 = 0, mean 4.5, var 9*7/12 = 5.25, z = (4.5-0.5)/2.291 = 1.746,
    // two-sided p = 0.0808.
    let p = mann_whitney_p(&[1, 2, 3], &[4, 5, 6]).unwrap();
    assert!((p - 0.0808).abs() < 1e-3, "{p}");
    // All tied: no evidence.
    assert_eq!(mann_whitney_p(&[5, 5], &[5, 5, 5]), Some(1.0));
    assert_eq!(mann_whitney_p(&[], &[1]), None);
    // Ties: A = 1 1 2, B = 2 3 3. Ranks 1.5 1.5 3.5 | 3.5 5.5 5.5; R1 = 6.5, U1 = 0.5;
    // tie term 3*(8-2) = 18; var = 9/12 * (7 - 18/30) = 4.8; z = (4 - 0.5)/2.191 = 1.597;
    // p = 0.1102.
    let p = mann_whitney_p(&[1, 1, 2], &[2, 3, 3]).unwrap();
    assert!((p - 0.1102).abs() < 1e-3, "{p}");
}

#[test]
fn bootstrap_is_deterministic_and_brackets_the_shift() {
    let mut rng = Rng(9);
    let a = draw(&mut rng, 200, 30e6);
    let b: Vec<u64> = a.iter().map(|x| x + 3_000_000).collect();
    let ci = bootstrap_delta_ci(&a, &b, 2000, 42).unwrap();
    assert_eq!(ci, bootstrap_delta_ci(&a, &b, 2000, 42).unwrap());
    assert!(ci.0 <= 3_000_000 && 3_000_000 <= ci.1, "{ci:?}");
    assert!(ci.0 > 0, "{ci:?}");
    // Another seed gives another (still valid) interval: the seed is used.
    assert_ne!(ci, bootstrap_delta_ci(&a, &b, 2000, 43).unwrap());
}

#[test]
fn bundles_compare_and_refuse_mismatches() {
    let fa = Fixture::linux(200);
    let mut fb = Fixture::linux(200);
    fb.seed = 2;
    fb.median_ns = 30e6 * 1.10;
    let (sa, sb) = (fa.samples(), fb.samples());
    let (ra, rb) = (fa.result(&sa), fb.result(&sb));
    let o = CompareOptions::default();
    let c = compare_bundles((&ra, &sa), (&rb, &sb), &o).unwrap();
    assert_eq!(c.outcome, Outcome::Regression, "{}", c.render_text(false));
    assert_eq!(c.outcome.exit_code(), 1);
    assert!(c.metrics.iter().any(|m| m.name == "spawn"));
    let c = compare_bundles((&rb, &sb), (&ra, &sa), &o).unwrap();
    assert_eq!(c.outcome, Outcome::NoRegression, "{}", c.render_text(false));
    // Deterministic output, all three renderings.
    let again = compare_bundles((&rb, &sb), (&ra, &sa), &o).unwrap();
    assert_eq!(c.render_text(false), again.render_text(false));
    assert_eq!(c.render_json().unwrap(), again.render_json().unwrap());
    assert!(c.render_markdown(false).contains("| metric |"));
    let j: serde_json::Value = serde_json::from_str(&c.render_json().unwrap()).unwrap();
    assert_eq!(j["outcome"], "no_regression");

    // Probe vs Linux, and different host kinds: refused with reasons, unless allowed.
    let fp = Fixture::probe(200);
    let sp = fp.samples();
    let rp = fp.result(&sp);
    let err = compare_bundles((&ra, &sa), (&rp, &sp), &o)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("contract") && err.contains("host kind"),
        "{err}"
    );
    let allowed = CompareOptions {
        allow_mismatch: true,
        ..CompareOptions::default()
    };
    let c = compare_bundles((&ra, &sa), (&rp, &sp), &allowed).unwrap();
    assert_eq!(c.mismatches.len(), 2, "{:?}", c.mismatches);
    // Two wall-clock host kinds: a mismatch, allowed on request.
    let mut fw = Fixture::linux(200);
    fw.host = HostKind::Unknown;
    let sw = fw.samples();
    let rw = fw.result(&sw);
    let err = compare_bundles((&ra, &sa), (&rw, &sw), &o)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("host kind: A is hardware, B is unknown"),
        "{err}"
    );
    assert!(compare_bundles((&ra, &sa), (&rw, &sw), &allowed).is_ok());
}

#[test]
fn bundles_on_different_clocks_are_never_compared() {
    let fa = Fixture::linux(200);
    let mut fv = Fixture::linux(200);
    fv.host = HostKind::NestedEmulated;
    let (sa, sv) = (fa.samples(), fv.samples());
    let (ra, rv) = (fa.result(&sa), fv.result(&sv));
    assert_eq!(ra.contract.clock, Clock::Wall);
    assert_eq!(rv.contract.clock, Clock::Virtual);
    let allowed = CompareOptions {
        allow_mismatch: true,
        ..CompareOptions::default()
    };
    // Refused both ways round, even with --allow-mismatch.
    for o in [CompareOptions::default(), allowed] {
        let err = compare_bundles((&ra, &sa), (&rv, &sv), &o).unwrap_err();
        assert!(
            matches!(
                err,
                CompareError::Clock {
                    a: Clock::Wall,
                    b: Clock::Virtual
                }
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "cannot compare: A is on the wall clock, B on the virtual clock (durations on \
             different clocks are never compared)"
        );
        let err = compare_bundles((&rv, &sv), (&ra, &sa), &o).unwrap_err();
        assert!(
            matches!(
                err,
                CompareError::Clock {
                    a: Clock::Virtual,
                    b: Clock::Wall
                }
            ),
            "{err:?}"
        );
    }
    // Two virtual-clock bundles compare, and every output names the clock.
    let mut fv2 = Fixture::linux(200);
    fv2.host = HostKind::NestedEmulated;
    fv2.seed = 2;
    let sv2 = fv2.samples();
    let rv2 = fv2.result(&sv2);
    let c = compare_bundles((&rv, &sv), (&rv2, &sv2), &CompareOptions::default()).unwrap();
    assert_eq!(c.clock, Clock::Virtual);
    let line = format!(
        "clock: {}: a reproducible cost model of the boot path, not a hardware latency",
        Clock::Virtual.describe()
    );
    // The text output wraps at 100 columns: read it unwrapped.
    let unwrapped = c.render_text(false).replace("\n  ", " ");
    assert!(unwrapped.contains(&line), "{unwrapped}");
    assert!(
        c.render_markdown(false).contains(&line),
        "{}",
        c.render_markdown(false)
    );
    let j: serde_json::Value = serde_json::from_str(&c.render_json().unwrap()).unwrap();
    assert_eq!(j["clock"], "virtual");
    let c = compare_bundles((&ra, &sa), (&ra, &sa), &CompareOptions::default()).unwrap();
    let wall = format!("clock: {}", Clock::Wall.describe());
    assert!(
        c.render_markdown(false).contains(&wall),
        "{}",
        c.render_markdown(false)
    );
    assert!(
        !c.render_text(false).contains("virtual"),
        "{}",
        c.render_text(false)
    );
    let j: serde_json::Value = serde_json::from_str(&c.render_json().unwrap()).unwrap();
    assert_eq!(j["clock"], "wall");
}

#[test]
fn virtual_clocks_of_another_l0_qemu_l1_kernel_or_l1_cpu_count_are_never_compared() {
    let nested = |seed| {
        let mut f = Fixture::linux(200);
        f.host = HostKind::NestedEmulated;
        f.seed = seed;
        let s = f.samples();
        let r = f.result(&s);
        (r, s)
    };
    let allowed = CompareOptions {
        allow_mismatch: true,
        ..CompareOptions::default()
    };
    let (ra, sa) = nested(1);
    // Another L1 seed is the same clock (a campaign's own randomness).
    let (mut rb, sb) = nested(2);
    rb.environment.nested.as_mut().unwrap().l1_seed = 99;
    assert!(compare_bundles((&ra, &sa), (&rb, &sb), &CompareOptions::default()).is_ok());
    type Forge = fn(&mut truecold_proof::schema::ResultJson);
    let cases: [(&str, Forge); 4] = [
        (
            "L0 QEMU `QEMU emulator version 10.0.2 (test)` vs `QEMU emulator version 7.2.19`",
            |r| {
                r.environment.nested.as_mut().unwrap().l0_qemu =
                    "QEMU emulator version 7.2.19".into()
            },
        ),
        ("L1 kernel 1111", |r| {
            r.environment.nested.as_mut().unwrap().l1_kernel_sha256 = Some("2".repeat(64))
        }),
        ("vs not recorded (before schema 9)", |r| {
            r.environment.nested.as_mut().unwrap().l1_kernel_sha256 = None
        }),
        ("L1 CPUs 2 vs 1", |r| r.environment.cores = 1),
    ];
    for (want, forge) in cases {
        let mut rc = rb.clone();
        forge(&mut rc);
        for o in [CompareOptions::default(), allowed.clone()] {
            let err = compare_bundles((&ra, &sa), (&rc, &sb), &o).unwrap_err();
            assert!(matches!(err, CompareError::VirtualClock(_)), "{err:?}");
            let text = err.to_string();
            assert!(text.contains(want), "{want}: {text}");
            assert!(text.contains("different virtual clocks"), "{text}");
        }
    }
}

#[test]
fn more_failures_is_a_regression_even_if_successes_are_as_fast() {
    let mut fa = Fixture::linux(210);
    fa.fail_every = None;
    let mut fb = fa.clone();
    fb.seed = 3;
    fb.fail_every = Some(3); // a third fail, scored at the 1 s deadline
    let (sa, sb) = (fa.samples(), fb.samples());
    let c = compare_bundles(
        (&fa.result(&sa), &sa),
        (&fb.result(&sb), &sb),
        &CompareOptions::default(),
    )
    .unwrap();
    assert_eq!(c.outcome, Outcome::Regression, "{}", c.render_text(false));
}

#[test]
fn identical_samples_are_no_difference_on_every_metric() {
    let f = Fixture::linux(200);
    let s = f.samples();
    let r = f.result(&s);
    let c = compare_bundles((&r, &s), (&r, &s), &CompareOptions::default()).unwrap();
    for m in &c.metrics {
        assert_eq!(m.verdict, MetricVerdict::NoDifference, "{m:?}");
        assert_eq!(m.delta_p50_ns, Some(0));
    }
    assert_eq!(c.outcome, Outcome::NoRegression);
    assert!(c.render_text(false).contains("no difference"));
    // Constant stages (workload, teardown) are identical across different campaigns too.
    let mut g = f.clone();
    g.seed = 11;
    let sg = g.samples();
    let c = compare_bundles((&r, &s), (&g.result(&sg), &sg), &CompareOptions::default()).unwrap();
    let wl = c.metrics.iter().find(|m| m.name == "workload").unwrap();
    assert_eq!(wl.verdict, MetricVerdict::NoDifference, "{wl:?}");
}

#[test]
fn a_clear_difference_is_called_even_with_a_wide_interval() {
    // A small, noisy stage tripled: p is ~0 and |Δ| is 200 %, but the median's interval is
    // wider than 10 % of A's median. The old rule said "inconclusive"; the rule now calls
    // a significant change at least the threshold a change.
    let o = CompareOptions::default();
    let mut rng = Rng(21);
    let a: Vec<u64> = (0..200).map(|_| rng.latency(40_000.0, 0.8)).collect();
    let b: Vec<u64> = (0..200).map(|_| rng.latency(120_000.0, 0.8)).collect();
    let m = compare_values("memory", false, &a, &b, &o);
    let (lo, hi) = m.ci95_ns.unwrap();
    let width = (hi - lo) as f64 * 100.0 / m.a.p50.unwrap() as f64;
    assert!(width > o.max_ci_width_pct, "interval {width}% is not wide");
    assert!(m.p_value.unwrap() < 1e-20, "{m:?}");
    assert_eq!(m.verdict, MetricVerdict::Regressed, "{m:?}");
    assert!(m.why.contains("p ") && m.why.contains("≥ 2%"), "{}", m.why);
    // And the same data the other way round.
    let m = compare_values("memory", false, &b, &a, &o);
    assert_eq!(m.verdict, MetricVerdict::Improved, "{m:?}");
    // No significant change with that interval width stays inconclusive (a change is not
    // ruled out).
    let a2: Vec<u64> = (0..40).map(|_| rng.latency(40_000.0, 0.8)).collect();
    let b2: Vec<u64> = (0..40).map(|_| rng.latency(40_000.0, 0.8)).collect();
    let m = compare_values("memory", false, &a2, &b2, &o);
    assert_eq!(m.verdict, MetricVerdict::Inconclusive, "{m:?}");
    assert!(m.why.contains("not ruled out"), "{}", m.why);
}

#[test]
fn significant_but_below_the_threshold_is_no_change() {
    // A 0.5 % shift at n = 2000 with little noise: significant, smaller than 2 %.
    let o = CompareOptions::default();
    let mut rng = Rng(31);
    let a: Vec<u64> = (0..2000).map(|_| rng.latency(30e6, 0.01)).collect();
    let b: Vec<u64> = a.iter().map(|x| x + x / 200).collect();
    let m = compare_values("h", true, &a, &b, &o);
    assert!(m.p_value.unwrap() < o.alpha, "{m:?}");
    assert_eq!(m.verdict, MetricVerdict::NoChange, "{m:?}");
    assert!(
        m.why.contains("significant") && m.why.contains("< 2%"),
        "{}",
        m.why
    );
}

#[test]
fn p_values_come_from_the_normal_tail() {
    // z = 0 → p = 1; a huge separation → p underflows towards 0 and prints as such.
    assert_eq!(mann_whitney_p(&[1, 2], &[2, 1]), Some(1.0));
    let a: Vec<u64> = (0..500).collect();
    let b: Vec<u64> = (1000..1500).collect();
    let p = mann_whitney_p(&a, &b).unwrap();
    assert!(p < 1e-100, "{p}");
    assert!(p_text(0.0).starts_with('<'));
    assert_eq!(p_text(0.0123), "1.23e-2");
}

#[test]
fn compare_uses_the_rows_verify_accepted() {
    let t = tempfile::tempdir().unwrap();
    let a = Fixture::linux(200).write(t.path(), "a");
    let mut fb = Fixture::linux(200);
    fb.seed = 2;
    fb.median_ns = 30e6 * 1.10;
    let b = fb.write(t.path(), "b");
    let (va, vb) = (verify_dir(&a), verify_dir(&b));
    // Swap the files on disk after verifying: compare must not see it.
    std::fs::copy(a.join("samples.csv"), b.join("samples.csv")).unwrap();
    let c = compare_verified(&va, &vb, &CompareOptions::default()).unwrap();
    assert_eq!(c.outcome, Outcome::Regression, "{}", c.render_text(false));
    // An invalid verdict is refused, typed.
    let vb2 = verify_dir(&b);
    assert!(!vb2.is_valid());
    assert!(matches!(
        compare_verified(&va, &vb2, &CompareOptions::default()),
        Err(CompareError::Invalid { side: "B" })
    ));
}

#[test]
fn compare_cannot_compare_exits_200_a_bad_option_125_and_help_states_the_rule() {
    let t = tempfile::tempdir().unwrap();
    let a = Fixture::linux(30).write(t.path(), "a");
    // A bad option value.
    let (code, out, err) = run_cli(&[
        "compare".as_ref(),
        a.as_os_str(),
        a.as_os_str(),
        "--alpha".as_ref(),
        "2".as_ref(),
    ]);
    assert_eq!(code, 125, "{out}{err}");
    assert!(err.contains("bad option"), "{err}");
    // A missing bundle: cannot compare.
    let (code, _, err) = run_cli(&[
        "compare".as_ref(),
        a.as_os_str(),
        t.path().join("nope").as_os_str(),
    ]);
    assert_eq!(code, 200, "{err}");
    assert!(err.contains("(exit 200)"), "{err}");
    // Bundles on different clocks: cannot compare, even with --allow-mismatch.
    let mut fv = Fixture::linux(30);
    fv.host = HostKind::NestedEmulated;
    let v = fv.write(t.path(), "v");
    for extra in [None, Some("--allow-mismatch")] {
        let mut args = vec!["compare".as_ref(), a.as_os_str(), v.as_os_str()];
        args.extend(extra.map(std::ffi::OsStr::new));
        let (code, out, err) = run_cli(&args);
        assert_eq!(code, 200, "{out}{err}");
        assert!(
            err.contains("cannot compare: A is on the wall clock, B on the virtual clock"),
            "{err}"
        );
        assert!(out.is_empty(), "{out}");
    }
    // The same bundle twice: no difference, exit 0.
    let (code, out, err) = run_cli(&["compare".as_ref(), a.as_os_str(), a.as_os_str()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("no difference"), "{out}");
    let (code, out, _) = run_cli(&["compare".as_ref(), "--help".as_ref()]);
    assert_eq!(code, 0);
    for needle in [
        "Mann-Whitney U, two-sided, normal approximation with tie",
        "no difference",
        "--threshold-pct",
        "right-censored",
        "125  inconclusive",
        "200  cannot compare",
        "--stages",
    ] {
        assert!(
            out.contains(needle),
            "`{needle}` not in compare --help:\n{out}"
        );
    }
}

const PVM: &str = "host /dev/kvm is kvm_pvm, a software virtualization backend: these numbers do \
                   not represent hardware KVM";

fn busy(load: &str) -> String {
    format!(
        "host busy before the campaign: 1-minute load average {load} on 2 cores (threshold 0.5 \
         per core)"
    )
}

/// Two probe bundles on a kvm_pvm host whose loads were high, B 20 % slower: `a`, `b`.
fn busy_pair(parent: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let mut fa = Fixture::probe(200);
    fa.seed = 5;
    let a = fa.write(parent, "a");
    let mut fb = Fixture::probe(200);
    fb.seed = 6;
    fb.median_ns = 13e6 * 1.2;
    let b = fb.write(parent, "b");
    for (d, load) in [(&a, "1.72"), (&b, "1.51")] {
        forge(d, |r, _| {
            r.environment.warnings = vec![PVM.into(), busy(load)];
        });
    }
    (a, b)
}

#[test]
fn the_default_output_is_the_headline_within_100_columns_and_stages_need_the_flag() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = busy_pair(t.path());
    let (code, out, err) = run_cli(&["compare".as_ref(), a.as_os_str(), b.as_os_str()]);
    assert_eq!(code, 1, "{out}{err}");
    for l in out.lines() {
        assert!(
            l.chars().count() <= 100,
            "{} columns: {l}\n{out}",
            l.chars().count()
        );
    }
    for want in [
        "successes",
        "with failures",
        "regressed",
        "11 stage rows: --stages",
    ] {
        assert!(out.contains(want), "`{want}` not in:\n{out}");
    }
    for stage in ["guest_boot", "kvm_open", "teardown"] {
        assert!(
            !out.contains(stage),
            "`{stage}` in the default output:\n{out}"
        );
    }
    let (code, out, err) = run_cli(&[
        "compare".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "--stages".as_ref(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    for stage in ["guest_boot", "kvm_open", "teardown", "A p99 ms"] {
        assert!(out.contains(stage), "`{stage}` not in --stages:\n{out}");
    }
    let (_, md, _) = run_cli(&[
        "compare".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "--markdown".as_ref(),
    ]);
    assert!(!md.contains("| guest_boot |"), "{md}");
}

#[test]
fn each_side_is_shown_by_its_path_escaped_and_the_json_has_both() {
    let t = tempfile::tempdir().unwrap();
    let a = Fixture::linux(30).write(t.path(), "base\u{1b}[31m");
    let mut fb = Fixture::linux(30);
    fb.seed = 4;
    let b = fb.write(t.path(), "new");
    let (_, out, err) = run_cli(&["compare".as_ref(), a.as_os_str(), b.as_os_str()]);
    assert!(
        !out.contains('\u{1b}'),
        "a raw escape reached the terminal: {out:?}"
    );
    let escaped = format!("A: {}", a.display()).replace('\u{1b}', "\\u{1b}");
    assert!(out.contains(&escaped), "{out}{err}");
    assert!(out.contains(&format!("B: {}", b.display())), "{out}");
    let (_, out, err) = run_cli(&[
        "compare".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "--json".as_ref(),
    ]);
    let j: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert_eq!(j["path_a"], a.display().to_string());
    assert_eq!(j["path_b"], b.display().to_string());
    assert!(
        j["metrics"].as_array().unwrap().len() > 2,
        "--json keeps every metric"
    );
}

#[test]
fn host_warnings_are_listed_once_with_the_sides_that_recorded_them() {
    let fa = Fixture::probe(50);
    let mut fb = Fixture::probe(50);
    fb.seed = 3;
    let (sa, sb) = (fa.samples(), fb.samples());
    let (mut ra, mut rb) = (fa.result(&sa), fb.result(&sb));
    ra.environment.warnings = vec![PVM.into(), busy("1.72")];
    rb.environment.warnings = vec![busy("1.51"), PVM.into(), PVM.into()];
    let c = compare_bundles((&ra, &sa), (&rb, &sb), &CompareOptions::default()).unwrap();
    let got: Vec<(Vec<&str>, &str)> = c
        .warnings
        .iter()
        .map(|w| (w.sides.clone(), w.text.as_str()))
        .collect();
    let (b1, b2) = (busy("1.72"), busy("1.51"));
    assert_eq!(
        got,
        vec![
            (vec!["A", "B"], PVM),
            (vec!["A"], b1.as_str()),
            (vec!["B"], b2.as_str())
        ]
    );
    let text = c.render_text(false);
    assert_eq!(text.matches("kvm_pvm").count(), 1, "{text}");
    assert!(
        text.contains("warning (A, B): host /dev/kvm is kvm_pvm"),
        "{text}"
    );
    assert!(text.contains("warning (A): host busy before"), "{text}");
    assert!(text.contains("warning (B): host busy before"), "{text}");
    assert!(!text.contains("note:"), "{text}");
    let md = c.render_markdown(false);
    assert_eq!(md.matches("kvm_pvm").count(), 1, "{md}");
}

#[test]
fn a_busy_host_is_said_on_the_outcome_line_with_the_interleaved_remedy() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = busy_pair(t.path());
    let (code, out, err) = run_cli(&["compare".as_ref(), a.as_os_str(), b.as_os_str()]);
    assert_eq!(code, 1, "{out}{err}");
    let outcome = out
        .split("outcome:")
        .nth(1)
        .unwrap_or_else(|| panic!("no outcome line: {out}"))
        .replace("\n  ", " ");
    assert!(
        outcome.starts_with(" REGRESSION: B slower than A (exit 1); both hosts were busy"),
        "{outcome}"
    );
    assert!(outcome.contains("`truecold run --engines …`"), "{outcome}");
    assert!(outcome.contains("`truecold tune`"), "{outcome}");
    // One busy side is named; no busy host, no such words.
    let f = Fixture::probe(50);
    let s = f.samples();
    let (ra, mut rb) = (f.result(&s), f.result(&s));
    rb.environment.warnings = vec![busy("3.0")];
    let o = CompareOptions::default();
    let c = compare_bundles((&ra, &s), (&rb, &s), &o).unwrap();
    assert!(
        c.render_text(false).contains("B's host was busy"),
        "{}",
        c.render_text(false)
    );
    assert_eq!(c.busy_hosts, vec!["B"]);
    let c = compare_bundles((&ra, &s), (&ra, &s), &o).unwrap();
    assert!(
        !c.render_text(false).contains("busy"),
        "{}",
        c.render_text(false)
    );
}

#[test]
fn the_same_campaign_twice_is_no_difference_with_a_warning() {
    let t = tempfile::tempdir().unwrap();
    let a = Fixture::linux(30).write(t.path(), "a");
    let copy = t.path().join("copy");
    copy_dir(&a, &copy);
    let mut fb = Fixture::linux(30);
    fb.seed = 8;
    let b = fb.write(t.path(), "b");
    for other in [&a, &copy] {
        let (code, out, err) = run_cli(&["compare".as_ref(), a.as_os_str(), other.as_os_str()]);
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("no difference"), "{out}");
        assert!(
            out.contains("warning: A and B are the same campaign"),
            "{out}"
        );
    }
    let (_, out, _) = run_cli(&["compare".as_ref(), a.as_os_str(), b.as_os_str()]);
    assert!(!out.contains("same campaign"), "{out}");
}

/// One campaign twice on a busy host: the same-campaign warning, never the remedy for two
/// campaigns at different times (they are one campaign, which saw one load).
#[test]
fn the_same_busy_campaign_twice_warns_without_the_two_campaigns_remedy() {
    let f = Fixture::probe(50);
    let s = f.samples();
    let mut r = f.result(&s);
    r.environment.warnings = vec![
        "host busy during the campaign: other processes used 72% of all CPU time (threshold 25%)"
            .into(),
    ];
    let c = compare_bundles((&r, &s), (&r, &s), &CompareOptions::default()).unwrap();
    let text = c.render_text(false);
    assert!(
        text.contains("warning: A and B are the same campaign"),
        "{text}"
    );
    assert!(!text.contains("different times"), "{text}");
    assert!(
        text.contains("outcome: no difference, the same values (exit 0)"),
        "{text}"
    );
}

/// The outcome names the answer and the arm: B faster is `improved`, not only "no
/// regression"; B slower is a REGRESSION with the arm named; the table's verdict column says
/// which arm is faster.
#[test]
fn the_outcome_names_the_arm_that_is_faster() {
    let o = CompareOptions::default();
    let f = Fixture::probe(50);
    let s = f.samples();
    let r = f.result(&s);
    // B 30 % faster: every latency (and every stage) times 0.7.
    let faster: Vec<_> = s
        .iter()
        .map(|x| {
            let mut y = x.clone();
            y.latency_ns = y.latency_ns.map(|l| l * 7 / 10);
            y
        })
        .collect();
    let c = compare_bundles((&r, &s), (&r, &faster), &o).unwrap();
    assert_eq!(c.outcome, Outcome::NoRegression);
    let text = c.render_text(false);
    assert!(
        text.contains("outcome: improved: B faster than A (exit 0)"),
        "{text}"
    );
    assert!(text.contains("  B faster\n"), "{text}");
    assert!(text.contains("improved: B faster — p "), "{text}");
    let c = compare_bundles((&r, &faster), (&r, &s), &o).unwrap();
    let text = c.render_text(false);
    assert!(
        text.contains("outcome: REGRESSION: B slower than A (exit 1)"),
        "{text}"
    );
    assert!(text.contains("  B slower\n"), "{text}");
    // --json: the exit status beside the outcome.
    let j: serde_json::Value = serde_json::from_str(&c.render_json().unwrap()).unwrap();
    assert_eq!(j["exit"], 1);
    assert_eq!(j["outcome"], "regression");
}

/// An inconclusive comparison says how many launches a side would decide it (the tune's
/// sizing rule at the observed effect), on the metric's line, the outcome line and in JSON.
#[test]
fn an_inconclusive_comparison_names_the_n_that_would_decide() {
    let t = tempfile::tempdir().unwrap();
    let a = Fixture::probe(10).write(t.path(), "a");
    let mut fb = Fixture::probe(10);
    fb.seed = 9;
    let b = fb.write(t.path(), "b");
    let (code, out, err) = run_cli(&["compare".as_ref(), a.as_os_str(), b.as_os_str()]);
    assert_eq!(code, 125, "{out}{err}");
    let outcome = out
        .lines()
        .find(|l| l.starts_with("outcome: "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        outcome.starts_with("outcome: inconclusive (exit 125): about "),
        "{outcome}"
    );
    assert!(
        outcome.contains(" launches a side would decide"),
        "{outcome}"
    );
    let n: u64 = outcome
        .trim_start_matches("outcome: inconclusive (exit 125): about ")
        .split(' ')
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("{outcome}"));
    assert!(n >= 20, "{outcome}");
    let (_, out, _) = run_cli(&[
        "compare".as_ref(),
        "--json".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
    ]);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["exit"], 125, "{out}");
    // The outcome's n is the larger of the two headline metrics'.
    let gating: Vec<u64> = (0..2)
        .filter_map(|i| j["metrics"][i]["n_to_decide"].as_u64())
        .collect();
    assert_eq!(gating.iter().max(), Some(&n), "{out}");
}

#[test]
fn a_mismatch_lists_one_reason_a_line() {
    let t = tempfile::tempdir().unwrap();
    let a = Fixture::linux(30).write(t.path(), "a");
    let p = Fixture::probe(30).write(t.path(), "p");
    let (code, out, err) = run_cli(&["compare".as_ref(), a.as_os_str(), p.as_os_str()]);
    assert_eq!(code, 200, "{out}{err}");
    assert!(!err.contains("\\n"), "a literal \\n: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[0].ends_with("not comparable (pass --allow-mismatch to compare anyway):"),
        "{err}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("  - contract: A is")),
        "{err}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  - host kind: A is hardware, B is pvm")),
        "{err}"
    );
}

#[test]
fn json_is_always_emitted_with_an_error_object_when_the_bundles_cannot_be_compared() {
    let t = tempfile::tempdir().unwrap();
    let a = Fixture::linux(30).write(t.path(), "a");
    let p = Fixture::probe(30).write(t.path(), "p");
    let missing = t.path().join("missing");
    let cases: [(&std::path::Path, &[&str], i32, &str); 3] = [
        (&p, &[], 200, "mismatch"),
        (&missing, &[], 200, "invalid"),
        (&a, &["--alpha", "2"], 125, "bad_option"),
    ];
    for (b, extra, want_code, kind) in cases {
        let mut args = vec![
            "compare".as_ref(),
            a.as_os_str(),
            b.as_os_str(),
            "--json".as_ref(),
        ];
        args.extend(extra.iter().map(std::ffi::OsStr::new));
        let (code, out, err) = run_cli(&args);
        assert_eq!(code, want_code, "{kind}: {out}{err}");
        let j: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{kind}: {e}: {out:?}"));
        assert_eq!(j["error"]["kind"], kind, "{j}");
        assert!(!j["error"]["message"].as_str().unwrap().is_empty(), "{j}");
        assert_eq!(j["path_a"], a.display().to_string(), "{j}");
        assert_eq!(j["path_b"], b.display().to_string(), "{j}");
        assert_eq!(j["exit"], want_code, "{j}");
    }
}

#[test]
fn a_multi_arm_tune_or_bisect_directory_is_refused_naming_the_bundles_inside() {
    let t = tempfile::tempdir().unwrap();
    let arms = Campaign::four(3).write(t.path(), "engines");
    let one = arms.join("truecold");
    // It verifies, yet it is not one bundle.
    assert!(verify_dir(&arms).is_valid());
    let (code, out, err) = run_cli(&["compare".as_ref(), arms.as_os_str(), one.as_os_str()]);
    assert_eq!(code, 200, "{out}{err}");
    assert!(!err.contains("not valid"), "{err}");
    assert!(
        err.contains("A (") && err.contains("is a multi-arm directory (it holds arms.json)"),
        "{err}"
    );
    for arm in [
        "truecold",
        "firecracker",
        "cloud-hypervisor",
        "qemu-microvm",
    ] {
        let want = format!("  {}", arms.join(arm).display());
        assert!(
            err.lines().any(|l| l.starts_with(&want)),
            "`{want}` not listed: {err}"
        );
    }
    // A tune directory (tune.json; its arms two levels down) and a bisect directory, on B.
    for (name, marker, inner, what) in [
        ("tune", "tune.json", "screen/baseline", "a tune directory"),
        ("bisect", "bisect.json", "baseline", "a bisect directory"),
    ] {
        let d = t.path().join(name);
        std::fs::create_dir_all(d.join(inner).parent().unwrap()).unwrap();
        copy_dir(&one, &d.join(inner));
        std::fs::write(d.join(marker), "{}").unwrap();
        let (code, out, err) = run_cli(&["compare".as_ref(), one.as_os_str(), d.as_os_str()]);
        assert_eq!(code, 200, "{out}{err}");
        assert!(
            err.contains("B (") && err.contains(what) && err.contains(marker),
            "{err}"
        );
        assert!(err.contains(&d.join(inner).display().to_string()), "{err}");
        let (_, out, _) = run_cli(&[
            "compare".as_ref(),
            one.as_os_str(),
            d.as_os_str(),
            "--json".as_ref(),
        ]);
        let j: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(j["error"]["kind"], "not_a_bundle", "{j}");
    }
}

#[test]
fn exit_codes_are_distinct_and_every_listing_says_so() {
    use truecold_proof::compare::{EXIT_CANNOT_COMPARE, EXIT_USAGE};
    assert_eq!(EXIT_CANNOT_COMPARE, 200);
    assert_eq!(EXIT_USAGE, 125);
    assert_eq!(Outcome::Inconclusive.exit_code(), 125);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // The README points to docs/verify.md's one table.
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(readme.contains("docs/verify.md#exit-codes"), "README.md");
    let text = std::fs::read_to_string(root.join("docs/verify.md")).unwrap();
    assert!(
        text.contains("200 cannot compare"),
        "docs/verify.md does not list 200"
    );
    assert!(
        !text.contains("125 inconclusive or cannot compare"),
        "docs/verify.md still says 125"
    );
    let (code, out, _) = run_cli(&["--help".as_ref()]);
    assert_eq!(code, 0);
    assert!(out.contains("200 cannot compare"), "{out}");
    // A usage error is 125, whatever else is on the line.
    let (code, _, _) = run_cli(&[
        "compare".as_ref(),
        "x".as_ref(),
        "y".as_ref(),
        "--bogus".as_ref(),
    ]);
    assert_eq!(code, 125);
}
