//! `report --html`: the page is optional, and when present exactly what `report` writes (at
//! the version it is: a version-1 page keeps its bytes, `report --html` writes version 2); it
//! is listed in SHA256SUMS, escapes every bundle string, and bounds its sample table.
mod common;

use common::*;
use std::fs;
use truecold_proof::html_page::{GENERATOR, MAX_ROWS};
use truecold_proof::names::HTML_FILE;
use truecold_proof::verify::{report_dir, report_dir_with, verify_dir};
use truecold_proof::Check;

fn page(dir: &std::path::Path) -> String {
    fs::read_to_string(dir.join(HTML_FILE)).unwrap()
}

#[test]
fn the_page_is_optional_listed_and_checked_like_the_readme() {
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::linux(30).write(t.path(), "b");
    // Absent: valid (the bench never writes one).
    assert!(!dir.join(HTML_FILE).exists());
    assert!(verify_dir(&dir).is_valid());
    let written = report_dir_with(&dir, true).unwrap();
    assert!(written.iter().any(|n| n == HTML_FILE), "{written:?}");
    let v = verify_dir(&dir);
    assert!(v.is_valid(), "{}", v.render(&dir, 20));
    let sums = fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
    assert!(sums.contains(&format!("  {HTML_FILE}\n")), "{sums}");
    let p = page(&dir);
    for want in [
        "VALID",
        "Linux boot: request to strict-ready",
        "request_to_strict_ready",
        "Stage waterfall",
        "data:image/svg+xml;base64,",
        "Every row (<a href=\"samples.csv\">",
        GENERATOR,
    ] {
        assert!(p.contains(want), "{want}");
    }
    assert!(!p.contains("<script") && !p.contains("http://") && !p.contains("https://"));
    // Deterministic: written again, the same bytes.
    report_dir_with(&dir, true).unwrap();
    assert_eq!(page(&dir), p);

    // A hand edit, re-summed: stale, a reason about the page that `report` cures.
    fs::write(dir.join(HTML_FILE), p.replace("VALID", "VALlD")).unwrap();
    resum(&dir);
    let v = verify_dir(&dir);
    assert!(v.has(Check::GeneratedStale), "{}", v.render(&dir, 20));
    assert!(v
        .reasons
        .iter()
        .all(|r| r.file.as_deref() == Some(HTML_FILE)));
    // `report` without --html regenerates a page that is there.
    report_dir(&dir).unwrap();
    assert_eq!(page(&dir), p);
    assert!(verify_dir(&dir).is_valid());

    // Present but not listed: a reason.
    let listed = fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
    let unlisted: String = listed
        .lines()
        .filter(|l| !l.ends_with(HTML_FILE))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(dir.join("SHA256SUMS"), unlisted).unwrap();
    assert!(verify_dir(&dir).has(Check::FileUnlisted));
}

#[test]
fn a_hostile_string_is_text_on_the_page() {
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::linux(14).write(t.path(), "b");
    let evil = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&";
    forge(&dir, |r, _| r.environment.cpu_model = evil.into());
    let v = verify_dir(&dir);
    assert!(v.is_valid(), "{}", v.render(&dir, 20));
    report_dir_with(&dir, true).unwrap();
    let p = page(&dir);
    assert!(
        !p.contains("<script") && !p.contains("<img src=x"),
        "markup got through"
    );
    assert!(
        p.contains("&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;"),
        "the CPU model is not shown as text"
    );
    assert!(verify_dir(&dir).is_valid());
}

#[test]
fn a_large_campaign_lists_a_bounded_sample_table_and_says_so() {
    let t = tempfile::tempdir().unwrap();
    let n = MAX_ROWS as u64 + 50;
    let dir = Fixture::probe(n).write(t.path(), "b");
    report_dir_with(&dir, true).unwrap();
    let p = page(&dir);
    let rows = p.matches("<tr><td class=\"n\">").count() + p.matches("<tr class=\"fail\">").count();
    assert!(rows <= MAX_ROWS, "{rows} rows listed");
    assert!(
        p.contains(&format!("rows of {n}")) || p.contains(&format!("of {n} rows")),
        "the page does not say it shows a part"
    );
    assert!(
        p.contains("<a href=\"samples.csv\"><code>samples.csv</code></a> has every row"),
        "no link to every row"
    );
    assert!(verify_dir(&dir).is_valid());
}

#[test]
fn a_multi_arm_directory_gets_one_page_with_its_tables() {
    let t = tempfile::tempdir().unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../results/20261201T135923Z-engines-truecold-firecracker-cloud-hypervisor-linux-2vcpu-1024mib");
    let dir = t.path().join("e");
    copy_tree(&src, &dir);
    report_dir_with(&dir, true).unwrap();
    let v = verify_dir(&dir);
    assert!(v.is_valid(), "{}", v.render(&dir, 20));
    let p = page(&dir);
    assert!(p.contains("VALID") && p.contains("engines campaign"));
    assert!(p.contains("<table>") && p.contains("firecracker"));
    assert!(
        p.contains("data:image/svg+xml;base64,"),
        "cdf.svg not inline"
    );
    // Stale: a reason about the page, cured by `report`.
    fs::write(dir.join(HTML_FILE), p.replace("VALID", "VALlD")).unwrap();
    truecold_proof::verify::report_dir(&dir).unwrap();
    assert_eq!(page(&dir), p);
}

/// The committed page (version 1, no generator line) is regenerated by `report` as the
/// version it is, byte for byte; `report --html` writes version 2 over it, which verifies
/// too.
#[test]
fn a_version_1_page_keeps_its_bytes_and_report_html_writes_version_2() {
    let t = tempfile::tempdir().unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../results/20261203T1552Z-engines-truecold-firecracker-cloud-hypervisor-own-defaults-nested-2vcpu-16384mib",
    );
    let committed = fs::read_to_string(src.join(HTML_FILE)).unwrap();
    assert!(
        !committed.contains(GENERATOR),
        "the committed page is version 2"
    );
    let dir = t.path().join("e");
    copy_tree(&src, &dir);
    assert!(verify_dir(&dir).is_valid());
    report_dir(&dir).unwrap();
    assert_eq!(page(&dir), committed, "report changed a version-1 page");
    assert_eq!(
        truecold_proof::html_page::version_of(committed.as_bytes()),
        1
    );
    report_dir_with(&dir, true).unwrap();
    let p = page(&dir);
    assert!(
        p.contains(GENERATOR),
        "report --html did not write version 2"
    );
    assert_eq!(truecold_proof::html_page::version_of(p.as_bytes()), 2);
    let v = verify_dir(&dir);
    assert!(v.is_valid(), "{}", v.render(&dir, 20));
    // A version-2 page stays version 2 under `report`.
    report_dir(&dir).unwrap();
    assert_eq!(page(&dir), p);
}
