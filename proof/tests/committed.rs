//! Every directory committed under results/ (each one: none is skipped) verifies with this
//! verifier as it is (a format change that leaves one stale — a README rendered from a
//! catalogue text that changed, say — fails here, not later in a reviewer's hands).

use std::path::Path;
use truecold_proof::verify::verify_dir;

#[test]
fn every_committed_results_directory_verifies() {
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results");
    let mut n = 0;
    for e in std::fs::read_dir(&results).unwrap() {
        let dir = e.unwrap().path();
        // Every directory, not only those with a SHA256SUMS: `for d in results/*/; do
        // truecold-proof verify "$d"; done` passes (raw data that is no bundle lives under
        // docs/data/).
        if !dir.is_dir() {
            continue;
        }
        let v = verify_dir(&dir);
        assert!(v.is_valid(), "{}", v.render(&dir, 20));
        n += 1;
    }
    assert!(
        n >= 10,
        "only {n} committed directories with a SHA256SUMS under {results:?}"
    );
}

/// Every file under `dir` (relative path, bytes), sorted.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, d: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// `report` on a committed tune directory whose `tune.json` spells its knobs the legacy way
/// (`hz100`) rewrites nothing but its generated files, and those to the same bytes: the
/// record (`tune.json`) keeps its spelling, every file is what was committed.
#[test]
fn report_on_a_legacy_tune_directory_changes_no_byte() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../results/20261202T054549Z-tune-nested-linux-2vcpu-16384mib");
    let tune = std::fs::read_to_string(src.join("tune.json")).unwrap();
    assert!(
        tune.contains("\"hz100\""),
        "the fixture no longer has a legacy-spelled knob"
    );
    let t = tempfile::tempdir().unwrap();
    let dst = t.path().join("d");
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(&dst)
        .status()
        .unwrap();
    assert!(st.success());
    let written = truecold_proof::verify::report_dir(&dst).unwrap();
    assert!(written.iter().any(|n| n == "README.md"), "{written:?}");
    assert!(!written.iter().any(|n| n == "tune.json"), "{written:?}");
    let (before, after) = (tree(&src), tree(&dst));
    let names = |t: &[(String, Vec<u8>)]| t.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&before), names(&after));
    for ((n, a), (_, b)) in before.iter().zip(&after) {
        assert!(a == b, "{n} changed under report");
    }
}

/// The committed records made while `initcall` was the default attribution instrument read
/// as they were written now that `rip` is: a run line with `--attribution` and no
/// `--attribution-instrument` means `initcall` (`Instrument::ABSENT`), one that names `rip`
/// means `rip`; a `tune.json` with attribution launches and no recorded instrument means
/// `initcall`. `report` on them rewrites nothing: the attribution files, the run bundle's and
/// the tune's READMEs (whose attribution section says `initcall_debug`) keep their bytes.
#[test]
fn committed_attribution_records_keep_their_instrument_under_the_rip_default() {
    use truecold_proof::attribution::Instrument;
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results");
    let recorded = |dir: &str| {
        let c = std::fs::read(results.join(dir).join("cmdline.txt")).unwrap();
        truecold_proof::cmdline::parse_cmdline_txt(&c)
            .unwrap()
            .attribution_instrument()
            .unwrap()
    };
    let initcall = "20261203T2016Z-nested-linux-2vcpu-1024mib-attribution-initcall";
    let rip = "20261203T2015Z-nested-linux-2vcpu-1024mib-attribution-rip";
    let tune = "20261203T1625Z-tune-nested-linux-2vcpu-16384mib-thp-ram-layout";
    let c = std::fs::read_to_string(results.join(initcall).join("cmdline.txt")).unwrap();
    assert!(
        c.contains("--attribution 3") && !c.contains("--attribution-instrument"),
        "the fixture no longer leaves the instrument out: {c}"
    );
    assert_eq!(recorded(initcall), Some(Instrument::Initcall));
    assert_eq!(recorded(rip), Some(Instrument::Rip));
    let invocation = |dir: &str| -> truecold_proof::tune::Invocation {
        let t: serde_json::Value =
            serde_json::from_slice(&std::fs::read(results.join(dir).join("tune.json")).unwrap())
                .unwrap();
        serde_json::from_value(t["invocation"].clone()).unwrap()
    };
    let i = invocation(tune);
    assert_eq!(
        (i.options.attribution, i.options.attribution_instrument),
        (2, None)
    );
    assert_eq!(i.instrument(), Some(Instrument::Initcall));
    // A tune of before the record, run with `--attribution-instrument rip`: its argv says
    // what ran, and its README says what that measured.
    let fc = "20261203T2018Z-tune-nested-linux-2vcpu-1024mib-firecracker-guest-config";
    let i = invocation(fc);
    assert_eq!(i.options.attribution_instrument, None);
    assert_eq!(i.instrument(), Some(Instrument::Rip));
    let readme = std::fs::read_to_string(results.join(fc).join("README.md")).unwrap();
    assert!(readme.contains("`--attribution-instrument rip`"), "{fc}");
    assert!(!readme.contains("with `initcall_debug`"), "{fc}");
    for dir in [initcall, rip, tune, fc] {
        let src = results.join(dir);
        let tmp = tempfile::tempdir().unwrap();
        let dst = tmp.path().join("d");
        let st = std::process::Command::new("cp")
            .arg("-a")
            .arg(&src)
            .arg(&dst)
            .status()
            .unwrap();
        assert!(st.success());
        truecold_proof::verify::report_dir(&dst).unwrap();
        let (before, after) = (tree(&src), tree(&dst));
        assert_eq!(before.len(), after.len(), "{dir}");
        for ((n, a), (m, b)) in before.iter().zip(&after) {
            assert!(n == m && a == b, "{dir}: {n} changed under report");
        }
    }
}

/// The lines the generators write about a seed (an interleaving's, a tune's bootstrap, a
/// bisect's rule, the nested harness's L1 `-seed`) show it in hex in every committed README;
/// a warning recorded in a bundle keeps the words it was written with.
#[test]
fn committed_readmes_show_their_seeds_in_hex() {
    const LINES: [&str; 5] = [
        "- interleaving:",
        "- launches:",
        "- rule:",
        "- rule at each look:",
        "- nested harness:",
    ];
    fn readmes(d: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                readmes(&p, out);
            } else if p.file_name().is_some_and(|n| n == "README.md") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    readmes(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../results"),
        &mut files,
    );
    let mut seen = [0usize; 5];
    for f in &files {
        for line in std::fs::read_to_string(f).unwrap().lines() {
            let Some(k) = LINES.iter().position(|p| line.starts_with(p)) else {
                continue;
            };
            for (at, _) in line.match_indices("seed") {
                let rest = line[at + 4..].trim_start_matches(['`', ' ']);
                if rest.starts_with(|c: char| c.is_ascii_digit()) {
                    assert!(rest.starts_with("0x"), "{f:?}: {line}");
                    seen[k] += 1;
                }
            }
        }
    }
    for (p, n) in LINES.iter().zip(seen) {
        // No committed bisect ran sequential looks (their rule line is the one of a look).
        if *p != "- rule at each look:" {
            assert!(n > 0, "no committed README has a `{p}` line with a seed");
        }
    }
}
