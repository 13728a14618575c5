//! `report.html`, version 2: the page `truecold-proof report --html` writes now; and, for
//! both versions, the check `verify` makes of a page that is there ([`check`]) and the
//! writing ([`write`]). A page is regenerated as the version it is, told by its own
//! `generator` line ([`version_of`]: version 1, [`crate::html::page`], has none), so a
//! committed page keeps its bytes; `report --html` writes this version.
//!
//! What it shows, first screen first:
//! - one box with the verdict and the headline: VALID/INVALID, what the directory is, and
//!   for a bundle its p50, p99, max, n, clock and contract; for an engines campaign each arm's
//!   p50 and who is faster by how much; for a tune its winners and the recommended files; for
//!   a bisect its culprit;
//! - the verifier's reasons and warnings, the host warnings the directory recorded;
//! - plots at full width (a bundle's CDF and stages; an engines campaign's CDF drawn with its
//!   latency axis from the data, [`crate::plot::arms_cdf_svg_from_data`]), a bundle's stage
//!   waterfall and attribution;
//! - the README's details in units a person reads (ms, MiB, %: [`humanize`]), its title left
//!   out (the box has it), side-by-side plots stacked at full width, every table in a box that
//!   scrolls rather than widen the page;
//! - a bundle's samples: the first and the slowest rows and the first failures, in a box that
//!   scrolls, with a link to `samples.csv`, which has every row.
//!
//! As version 1: no script, nothing loaded from outside (CSS inline, plots as `data:` images),
//! every string from the directory escaped ([`esc`]), deterministic (same directory, same
//! bytes), `verify` recomputes it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::fmt::{esc, mem_text, ms};
use crate::html::{img, linked_images, markdown, HtmlError, MAX_INPUT};
use crate::kind::Kind;
use crate::names::HTML_FILE;
use crate::schema::{ResultJson, Sample, Stage, StageKind, HEADLINE};
use crate::stats::percentile_sorted;
use crate::summary::success_latencies;
use crate::verdict::{Part, Reason, Verdict};

/// The page's version, in its `generator` line.
pub const VERSION: u32 = 2;
/// The `<meta name="generator">` line of a version-2 page: what [`crate::html`] reads to
/// regenerate a page as the version it is.
pub const GENERATOR: &str = "<meta name=\"generator\" content=\"truecold-proof report.html 2\">";
/// Sample rows shown of each group (first, slowest successes, first failures).
const ROWS_EACH: usize = 20;
/// Most sample rows the page lists ([`ROWS_EACH`] of each group).
pub const MAX_ROWS: usize = 3 * ROWS_EACH;

const STYLE: &str = "*{box-sizing:border-box}body{font-family:sans-serif;margin:0;color:#222;\
line-height:1.4;overflow-wrap:anywhere}main{max-width:1200px;margin:0 auto;padding:1em}\
#verdict{border:3px solid #1e7b34;border-radius:8px;padding:.6em 1.2em;margin:0 0 1em}\
#verdict.invalid{border-color:#b00020}.badge{display:inline-block;color:#fff;\
background:#1e7b34;font-weight:bold;padding:0 .5em;border-radius:4px}\
.invalid .badge{background:#b00020}#verdict h1{font-size:1.35em;margin:.3em 0}\
.figures{display:flex;flex-wrap:wrap;gap:.4em 2em;margin:.4em 0}.figure b{display:block;\
font-size:1.5em;font-variant-numeric:tabular-nums}.figure span{color:#555;font-size:.9em}\
.facts{color:#444;margin:.3em 0}.answer{font-size:1.15em;font-weight:bold;margin:.4em 0}\
h2{font-size:1.2em;border-bottom:1px solid #ddd;margin-top:1.5em}h3{font-size:1.05em}\
.scroll{overflow-x:auto;max-width:100%}.rows{max-height:34em;overflow:auto}\
table{border-collapse:collapse;margin:.5em 0;font-size:.88em}td,th{border:1px solid #ccc;\
padding:2px 6px;vertical-align:top}td.n{text-align:right;font-variant-numeric:tabular-nums}\
code{background:#f3f3f3;padding:0 2px}pre{background:#f3f3f3;padding:.5em;white-space:pre-wrap}\
img{max-width:100%;height:auto}img.plot{width:100%;display:block}\
.bar{position:relative;height:14px;background:#f3f3f3;min-width:12em}\
.bar span{position:absolute;top:0;height:14px;background:#2c3e50}tr.fail{background:#fdecea}";

/// The version of the page `bytes`: [`VERSION`] when it carries [`GENERATOR`], else 1.
pub fn version_of(bytes: &[u8]) -> u32 {
    let head = &bytes[..bytes.len().min(1024)];
    if head
        .windows(GENERATOR.len())
        .any(|w| w == GENERATOR.as_bytes())
    {
        VERSION
    } else {
        1
    }
}

/// The page of `version` (1 or [`VERSION`]) of the directory `dir` of `kind`, from `v`.
pub fn page_of(dir: &Path, kind: Kind, v: &Verdict, version: u32) -> Result<String, HtmlError> {
    if version == 1 {
        crate::html::page(dir, kind, v)
    } else {
        page(dir, kind, v)
    }
}

/// The version of the page `dir` has, 1 when it has none or it cannot be read.
fn version_there(dir: &Path) -> u32 {
    use std::io::Read as _;
    let Ok(f) = crate::fsio::open_regular(&dir.join(HTML_FILE)) else {
        return 1;
    };
    let mut head = Vec::new();
    match f.take(1024).read_to_end(&mut head) {
        Ok(_) => version_of(&head),
        Err(_) => 1,
    }
}

/// `verify`: `dir`'s page, when it has one, is exactly what [`page_of`] makes of the verdict
/// `v` at the page's own version; a page that differs (or cannot be made) is a
/// [`crate::verdict::Check::GeneratedStale`] reason about [`HTML_FILE`] (which `report`
/// cures).
pub(crate) fn check(dir: &Path, kind: Kind, v: &mut Verdict) {
    let p = dir.join(HTML_FILE);
    if v.unreadable.is_some() || !crate::fsio::is_real_file(&p) {
        return;
    }
    let want = match page_of(dir, kind, v, version_there(dir)) {
        Ok(w) => w,
        Err(e) => {
            v.add_file(
                crate::verdict::Check::GeneratedStale,
                HTML_FILE,
                format!(
                    "`{HTML_FILE}` is present but cannot be recomputed: {}",
                    crate::verdict::chain(&e)
                ),
            );
            return;
        }
    };
    let got = crate::fsio::read_file(&p, (want.len() as u64).saturating_add(1));
    if got.ok().as_deref() != Some(want.as_bytes()) {
        v.add_file(
            crate::verdict::Check::GeneratedStale,
            HTML_FILE,
            format!(
                "`{HTML_FILE}` differs from what `truecold-proof report --html` writes for \
                 this directory (`truecold-proof report` regenerates it)"
            ),
        );
    }
}

/// Writes the page of `dir`, a directory of `kind`, from `v`, the verifier's verdict on it
/// ([`crate::verify::verify_dir`]'s), and lists it in `dir`'s top `SHA256SUMS` (its other
/// entries kept as they are). `current`: this version ([`VERSION`], `report --html`); else
/// the version of the page that is there (`report` regenerating it). Returns the names
/// written.
pub fn write(dir: &Path, kind: Kind, v: &Verdict, current: bool) -> Result<Vec<String>, HtmlError> {
    let version = if current { VERSION } else { version_there(dir) };
    let page = page_of(dir, kind, v, version)?;
    crate::skeleton::write(dir, HTML_FILE, page.as_bytes())?;
    let listed = crate::skeleton::read_listing(dir, |b| crate::sums::parse_sums_with(b, |_| true))?;
    let mut entries: Vec<(String, String)> =
        listed.into_iter().filter(|(n, _)| n != HTML_FILE).collect();
    entries.push((
        HTML_FILE.to_string(),
        crate::digest::sha256_hex(page.as_bytes()),
    ));
    crate::skeleton::write_sums(dir, &entries)?;
    Ok(vec![
        HTML_FILE.to_string(),
        crate::names::SUMS_FILE.to_string(),
    ])
}

/// The version-2 page of the directory `dir` of `kind`, from `v`, the verifier's verdict on
/// it.
pub fn page(dir: &Path, kind: Kind, v: &Verdict) -> Result<String, HtmlError> {
    if let Some(u) = &v.unreadable {
        return Err(HtmlError::Unreadable(u.clone()));
    }
    let not_page = |r: &&Reason| r.file.as_deref() != Some(HTML_FILE);
    let reasons: Vec<&Reason> = v.reasons.iter().filter(not_page).collect();
    let warnings: Vec<&Reason> = v.warnings.iter().filter(not_page).collect();
    let label = v.label_text();
    // The box's title: what the directory is. A bisect's label ends with its answer (the
    // culprit), which the box says on its own line; a tune's names every arm, where its
    // README's title says what was tuned.
    let title = match kind {
        Kind::Bisect => label.split(": ").next().unwrap_or(&label).to_string(),
        Kind::Tune => readme_title(dir).unwrap_or_else(|| label.clone()),
        Kind::Bundle | Kind::Arms | Kind::Fleet => label.clone(),
    };
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">{GENERATOR}\
         <title>{} — truecold report</title><style>{STYLE}</style></head><body><main>\n",
        esc(&label)
    );
    // The box: verdict and headline, and the answer of a directory of bundles.
    let valid = reasons.is_empty();
    let _ = writeln!(
        s,
        "<section id=\"verdict\" class=\"{}\"><span class=\"badge\">{}</span> \
         <span>truecold-proof verify{}</span>\n<h1>{}</h1>",
        if valid { "valid" } else { "invalid" },
        if valid { "VALID" } else { "INVALID" },
        match (reasons.len(), warnings.len()) {
            (0, 0) => String::new(),
            (0, w) => format!(": {w} warning(s)"),
            (r, _) => format!(": {r} reason(s), listed below"),
        },
        esc(&title)
    );
    let answer = match kind {
        Kind::Bundle => {
            let (Some(r), Some(_)) = (&v.result, &v.samples) else {
                return Err(HtmlError::NoData);
            };
            bundle_box(&mut s, r);
            None
        }
        Kind::Arms => Some(arms_box(&mut s, dir, v)),
        Kind::Tune => Some(tune_box(&mut s, dir, v)),
        Kind::Bisect => Some(bisect_box(&mut s, v)),
        // A fleet's answer is its shards' verdicts (the parts table) and its README's merge.
        Kind::Fleet => None,
    };
    if let Some(a) = answer.filter(|a| !a.is_empty()) {
        let _ = writeln!(s, "<p class=\"answer\">{a}</p>");
    }
    let _ = writeln!(s, "</section>");
    findings(&mut s, &reasons, &warnings);
    recorded(&mut s, v);
    match kind {
        Kind::Bundle => {
            let (Some(r), Some(samples)) = (&v.result, &v.samples) else {
                return Err(HtmlError::NoData);
            };
            bundle_sections(&mut s, dir, r, samples)?;
        }
        Kind::Arms | Kind::Tune | Kind::Bisect | Kind::Fleet => {
            if kind == Kind::Arms {
                arms_cdf(&mut s, dir, v);
            }
            if kind != Kind::Arms && !v.parts.is_empty() {
                parts_table(&mut s, &v.parts);
            }
            let readme = crate::fsio::read_file(&dir.join(crate::names::README_FILE), MAX_INPUT)?;
            let text = String::from_utf8_lossy(&readme);
            let images = linked_images(dir, &text)?;
            let _ = writeln!(s, "<h2>Details (README.md)</h2>");
            s.push_str(&details(&text, &images, kind == Kind::Arms));
        }
    }
    s.push_str(
        "<hr><p>Written by <code>truecold-proof report --html</code>; \
         <code>truecold-proof verify</code> recomputes this page and fails the directory if it \
         differs. The page runs no script and loads nothing from outside itself.</p>\n\
         </main></body></html>\n",
    );
    Ok(s)
}

/// One figure of the box: its value large, its name small.
fn figure(s: &mut String, name: &str, value: &str) {
    let _ = write!(
        s,
        "<div class=\"figure\"><span>{}</span><b>{}</b></div>",
        esc(name),
        esc(value)
    );
}

/// A bundle's headline in the box: p50, p99, max, n; then clock, contract, guest, host.
fn bundle_box(s: &mut String, r: &ResultJson) {
    let sm = &r.summary;
    let _ = write!(s, "<div class=\"figures\">");
    match &sm.headline.successes {
        Some(h) => {
            figure(s, "p50", &format!("{} ms", ms(h.p50)));
            figure(s, "p99", &format!("{} ms", ms(h.p99)));
            figure(s, "max", &format!("{} ms", ms(h.max)));
        }
        None => figure(s, "p50", "no success"),
    }
    figure(
        s,
        "n (ok of attempts)",
        &format!("{} of {}", sm.successes, sm.attempts),
    );
    let _ = writeln!(s, "</div>");
    let _ = writeln!(
        s,
        "<p class=\"facts\">{HEADLINE}, successes · clock: <b>{}</b> · contract: {} ({}) · {} \
         vCPU, {}{} · host: {}{}</p>",
        esc(r.contract.clock.describe()),
        esc(r.contract.kind.as_str()),
        esc(&r.contract.mode.describe()),
        r.configuration.vcpus,
        esc(&mem_text(r.configuration.mem_bytes)),
        if r.configuration.backing.is_empty() {
            String::new()
        } else {
            format!(", backing {}", esc(&r.configuration.backing))
        },
        esc(r.environment.host_kind.as_str()),
        match (&r.contract.stopped, r.contract.incomplete) {
            (Some(k), _) => format!(" · STOPPED (`{}` failures in a row)", esc(k)),
            (None, true) => " · INCOMPLETE".to_string(),
            (None, false) => String::new(),
        }
    );
}

/// `part`'s p50 in ms, or `no success`.
fn p50_text(p: &Part) -> String {
    p.headline
        .map(|h| format!("{} ms", ms(h.p50)))
        .unwrap_or_else(|| "no success".into())
}

/// An engines campaign's box: each arm's p50; the answer: who is fastest, by how much
/// against each other arm, and whether `compare`'s rule calls the difference
/// (`comparison.json`'s verdicts).
fn arms_box(s: &mut String, dir: &Path, v: &Verdict) -> String {
    let _ = write!(s, "<div class=\"figures\">");
    for p in &v.parts {
        figure(s, &format!("{} p50", p.name), &p50_text(p));
    }
    let _ = writeln!(s, "</div>");
    if let Some(p) = v.parts.first() {
        let _ = writeln!(
            s,
            "<p class=\"facts\">{HEADLINE}, successes · clock: <b>{}</b> · {} arm(s), \
             interleaved</p>",
            esc(p.clock.describe()),
            v.parts.len()
        );
    }
    let mut ranked: Vec<(&Part, u64)> = v
        .parts
        .iter()
        .filter_map(|p| p.headline.map(|h| (p, h.p50)))
        .collect();
    ranked.sort_by_key(|(p, p50)| (*p50, p.name.clone()));
    let Some(&(fastest, f50)) = ranked.first() else {
        return "No arm has a success: nothing to rank.".into();
    };
    let verdicts = pair_verdicts(dir);
    let others: Vec<String> = ranked[1..]
        .iter()
        .map(|&(p, p50)| {
            let called = verdicts
                .get(&(fastest.name.clone(), p.name.clone()))
                .map(|v| match v.as_str() {
                    "regressed" | "improved" => "significant by compare's rule".to_string(),
                    other => format!("compare's rule: {}", esc(other)),
                })
                .unwrap_or_default();
            format!(
                "{} ({} ms, {}× the time{}{})",
                esc(&p.name),
                ms(p50),
                ratio_text(p50, f50),
                if called.is_empty() { "" } else { "; " },
                called
            )
        })
        .collect();
    if others.is_empty() {
        return format!("{} p50 {} ms.", esc(&fastest.name), ms(f50));
    }
    format!(
        "{} is the fastest: p50 {} ms, against {}.",
        esc(&fastest.name),
        ms(f50),
        others.join("; ")
    )
}

/// `b / a` to three decimals, floored (`4.041`).
fn ratio_text(b: u64, a: u64) -> String {
    if a == 0 {
        return "–".into();
    }
    let milli = u128::from(b) * 1000 / u128::from(a);
    format!("{}.{:03}", milli / 1000, milli % 1000)
}

/// `comparison.json`'s verdict of each pair, keyed `(a, b)` and `(b, a)` (the verdict as
/// written: b against a); empty when the file cannot be read.
fn pair_verdicts(dir: &Path) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    let Ok(bytes) = crate::fsio::read_file(&dir.join(crate::arms::COMPARISON_FILE), MAX_INPUT)
    else {
        return out;
    };
    let Ok(j) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return out;
    };
    for p in j["pairs"].as_array().into_iter().flatten() {
        if let (Some(a), Some(b), Some(v)) =
            (p["a"].as_str(), p["b"].as_str(), p["verdict"].as_str())
        {
            out.insert((a.to_string(), b.to_string()), v.to_string());
            out.insert((b.to_string(), a.to_string()), v.to_string());
        }
    }
    out
}

/// A tune's box: the winners, the recommended configuration against the baseline (the final
/// A/B), the files to apply.
fn tune_box(s: &mut String, dir: &Path, v: &Verdict) -> String {
    let j = crate::fsio::read_file(&dir.join(crate::names::TUNE_FILE), MAX_INPUT)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .unwrap_or_default();
    let winners: Vec<String> = j["screen"]["winners"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(esc))
        .collect();
    let ab = &j["confirm"]["final_ab"];
    let _ = write!(s, "<div class=\"figures\">");
    match (ab["p50_base_ns"].as_u64(), ab["p50_ns"].as_u64()) {
        (Some(base), Some(rec)) => {
            figure(s, "baseline p50", &format!("{} ms", ms(base)));
            figure(s, "recommended p50", &format!("{} ms", ms(rec)));
            if let Some(d) = ab["delta_ppm"].as_i64() {
                figure(s, "Δp50", &ppm_pct(d));
            }
        }
        _ => {
            if let Some(b) = v.parts.iter().find(|p| p.name.ends_with("baseline")) {
                figure(s, "baseline p50", &p50_text(b));
            }
        }
    }
    figure(s, "arms", &v.parts.len().to_string());
    let _ = writeln!(s, "</div>");
    if let Some(p) = v.parts.first() {
        let _ = writeln!(
            s,
            "<p class=\"facts\">{HEADLINE}, successes · clock: <b>{}</b></p>",
            esc(p.clock.describe())
        );
    }
    if winners.is_empty() {
        return "No knob won: nothing to recommend.".into();
    }
    use crate::tune::{RECOMMENDED_DIR, RECOMMENDED_FILES};
    let files: Vec<String> = RECOMMENDED_FILES
        .iter()
        .filter(|n| crate::fsio::is_real_file(&dir.join(RECOMMENDED_DIR).join(n)))
        .map(|n| format!("<a href=\"{RECOMMENDED_DIR}/{n}\"><code>{n}</code></a>"))
        .collect();
    format!(
        "Winners: {}{}. Apply them with <code>recommended/</code>: {}.",
        winners.join(", "),
        match ab["verdict"].as_str() {
            Some(verd) => format!(
                " (the recommended configuration against the baseline: {})",
                esc(verd)
            ),
            None => String::new(),
        },
        if files.is_empty() {
            "–".to_string()
        } else {
            files.join(", ")
        }
    )
}

/// A bisect's box: the baseline's p50, and the culprit's step (its good and candidate p50)
/// when the answer names a commit whose step is there; the answer is what the label says
/// after its kind (the culprit, or why there is none).
fn bisect_box(s: &mut String, v: &Verdict) -> String {
    let label = v.label_text();
    let answer = label.split_once(": ").map_or(label.as_str(), |(_, a)| a);
    let _ = write!(s, "<div class=\"figures\">");
    if let Some(b) = v
        .parts
        .iter()
        .find(|p| p.name == crate::names::BASELINE_ARM)
    {
        figure(s, "baseline p50", &p50_text(b));
    }
    // The culprit's step: the step directory named after the commit's first 12 digits.
    let commit = answer.rsplit(' ').next().unwrap_or("");
    let short: String = commit.chars().take(12).collect();
    let side = |arm: &str| {
        v.parts.iter().find(|p| {
            short.len() == 12
                && short.chars().all(|c| c.is_ascii_hexdigit())
                && p.name.contains(&format!("-{short}-"))
                && p.name.ends_with(&format!("/{arm}"))
        })
    };
    if let (Some(g), Some(c)) = (
        side(crate::names::GOOD_ARM),
        side(crate::names::CANDIDATE_ARM),
    ) {
        figure(s, "its good side p50", &p50_text(g));
        figure(s, "the culprit p50", &p50_text(c));
    }
    figure(s, "bundles", &v.parts.len().to_string());
    let _ = writeln!(s, "</div>");
    format!("Answer: {}.", esc(answer))
}

/// The README's title (its first line, a level-1 heading), when it has one.
fn readme_title(dir: &Path) -> Option<String> {
    let b = crate::fsio::read_file(&dir.join(crate::names::README_FILE), MAX_INPUT).ok()?;
    let text = String::from_utf8_lossy(&b);
    text.lines()
        .next()
        .and_then(|l| l.strip_prefix("# "))
        .map(str::to_string)
}

/// Parts per million as a signed percentage, exact (`-274952` → `−27.4952 %`).
fn ppm_pct(ppm: i64) -> String {
    let sign = if ppm < 0 { "−" } else { "+" };
    let a = ppm.unsigned_abs();
    let frac = format!("{:04}", a % 10_000);
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        format!("{sign}{} %", a / 10_000)
    } else {
        format!("{sign}{}.{frac} %", a / 10_000)
    }
}

/// The verifier's reasons and warnings (the page itself aside), at most [`crate::html::PER_CHECK`] of a
/// kind.
fn findings(s: &mut String, reasons: &[&Reason], warnings: &[&Reason]) {
    if reasons.is_empty() && warnings.is_empty() {
        return;
    }
    let _ = writeln!(s, "<h2>What verify found</h2>\n<ul>");
    for (list, what) in [(reasons, "reason"), (warnings, "warning")] {
        crate::html::reason_items(s, list.iter().copied(), what);
    }
    let _ = writeln!(s, "</ul>");
}

/// The host warnings the directory recorded.
fn recorded(s: &mut String, v: &Verdict) {
    let w = v.host_warnings();
    if w.is_empty() {
        return;
    }
    let _ = writeln!(s, "<h2>What the host was</h2>\n<ul>");
    for (text, by) in w {
        let who = if by.is_empty() {
            String::new()
        } else {
            format!("<b>{}</b>: ", esc(&by.join(", ")))
        };
        let _ = writeln!(s, "<li>{who}{}</li>", esc(&humanize(&text)));
    }
    let _ = writeln!(s, "</ul>");
}

/// Each bundle of a tune or bisect directory: its headline, in a table that scrolls.
fn parts_table(s: &mut String, parts: &[Part]) {
    let _ = writeln!(
        s,
        "<h2>Every bundle</h2>\n<div class=\"scroll\"><table><tr><th>bundle</th><th>ok of \
         attempts</th><th>p50, ms</th><th>p99, ms</th><th>max, ms</th><th>verifies</th></tr>"
    );
    for p in parts {
        let (p50, p99, max) = match &p.headline {
            Some(h) => (ms(h.p50), ms(h.p99), ms(h.max)),
            None => ("–".into(), "–".into(), "–".into()),
        };
        let _ = writeln!(
            s,
            "<tr><td><a href=\"{0}/README.md\">{0}</a></td><td class=\"n\">{1} of {2}</td>\
             <td class=\"n\">{p50}</td><td class=\"n\">{p99}</td><td class=\"n\">{max}</td>\
             <td>{3}</td></tr>",
            esc(&p.name),
            p.ok,
            p.attempts,
            if p.valid { "yes" } else { "NO" }
        );
    }
    let _ = writeln!(s, "</table></div>");
}

/// An engines campaign's CDF, its latency axis from the data; read from the arms' rows (the
/// directory's `cdf.svg` when they cannot be read).
fn arms_cdf(s: &mut String, dir: &Path, v: &Verdict) {
    let mut curves: Vec<(String, Vec<u64>)> = Vec::new();
    for p in &v.parts {
        match crate::bundle::read_bundle(&dir.join(&p.name)) {
            Ok((_, samples)) => curves.push((p.name.clone(), success_latencies(&samples))),
            Err(_) => return,
        }
    }
    let clock = v.parts.first().map_or("", |p| p.clock.describe());
    let svg = crate::plot::arms_cdf_svg_from_data(
        &format!("{HEADLINE}: {} arm(s), successes", curves.len()),
        clock,
        &curves,
    );
    let _ = writeln!(
        s,
        "<h2>Latency, every arm</h2>\n{}",
        plot_img("the arms' latency CDF", svg.as_bytes())
    );
}

/// A plot at the page's full width.
fn plot_img(alt: &str, svg: &[u8]) -> String {
    img(alt, svg).replacen("<img ", "<img class=\"plot\" ", 1)
}

/// A bundle's sections: its plots at full width, the median launch's stage waterfall, the
/// attribution, the README's details, the samples.
fn bundle_sections(
    s: &mut String,
    dir: &Path,
    r: &ResultJson,
    samples: &[Sample],
) -> Result<(), HtmlError> {
    let section = crate::attribution::readme_section_of_dir(dir);
    let generated = crate::bundle::generated_files_with(r, samples, section.as_deref());
    let images: BTreeMap<String, Vec<u8>> = generated
        .iter()
        .filter(|(n, _)| n.ends_with(".svg"))
        .cloned()
        .collect();
    let _ = writeln!(s, "<h2>Latency</h2>");
    for (name, svg) in &images {
        s.push_str(&plot_img(name, svg));
        s.push('\n');
    }
    waterfall(s, samples);
    if crate::fsio::exists_here(&dir.join(crate::attribution::JSONL_FILE)) {
        let files =
            crate::attribution::regenerate(dir, r, samples)?.map_err(HtmlError::Attribution)?;
        if let Some((name, svg)) = files
            .iter()
            .find(|(n, _)| n == crate::attribution::SVG_FILE)
        {
            let _ = writeln!(
                s,
                "<h2>Attribution</h2>\n<p>Where one boot's time goes (from <code>{}</code>; \
                 rows in <code>{}</code>).</p>\n{}",
                crate::attribution::JSONL_FILE,
                crate::attribution::CSV_FILE,
                plot_img(name, svg)
            );
            crate::html::attribution_flame(s, dir, &files, plot_img);
        }
    }
    let readme = generated
        .iter()
        .find(|(n, _)| n == crate::names::README_FILE)
        .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default();
    let _ = writeln!(s, "<h2>Details (README.md)</h2>");
    // The plots are above: the README's image lines are left out.
    let text: String = readme
        .lines()
        .filter(|l| !l.trim_start().starts_with("!["))
        .map(|l| format!("{l}\n"))
        .collect();
    s.push_str(&details(&text, &BTreeMap::new(), false));
    sample_table(s, samples);
    Ok(())
}

/// The host stages of the median success, laid end to end (as version 1 does).
fn waterfall(s: &mut String, samples: &[Sample]) {
    let _ = writeln!(s, "<h2>Stage waterfall (the median launch)</h2>");
    let lat = success_latencies(samples);
    let median = percentile_sorted(&lat, 50, 100);
    let Some(m) = median.and_then(|p| samples.iter().find(|x| x.ok && x.latency_ns == Some(p)))
    else {
        let _ = writeln!(s, "<p>No successful sample: nothing to lay out.</p>");
        return;
    };
    let total = m.latency_ns.unwrap_or(0).max(1);
    let _ = writeln!(
        s,
        "<p>Sample {} (request → strict-ready {} ms, the nearest-rank median of the {} \
         successes; the lowest index among equals). Its host stages tile that time exactly.</p>",
        m.index,
        ms(total),
        lat.len()
    );
    let _ = writeln!(
        s,
        "<div class=\"scroll\"><table><tr><th>stage</th><th>starts, ms</th><th>takes, ms</th>\
         <th>share</th><th></th></tr>"
    );
    let mut at: u64 = 0;
    for st in Stage::ALL
        .into_iter()
        .filter(|st| st.kind() == StageKind::Host)
    {
        let Some(d) = m.stages.get(st) else {
            continue;
        };
        let pct = |v: u64| {
            let b = u128::from(v.min(total)) * 10_000 / u128::from(total);
            format!("{}.{:02}%", b / 100, b % 100)
        };
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td><div class=\"bar\"><span style=\"left:{};width:{}\"></span></div></td></tr>",
            esc(st.name()),
            ms(at),
            ms(d),
            pct(d),
            pct(at),
            pct(d.min(total - at.min(total)))
        );
        at = at.saturating_add(d);
    }
    let _ = writeln!(s, "</table></div>");
}

/// The rows shown: every row when there are at most 3 × [`ROWS_EACH`]; else the first
/// [`ROWS_EACH`], the [`ROWS_EACH`] slowest successes and the first [`ROWS_EACH`] failures,
/// each once, in index order.
fn shown_rows(samples: &[Sample]) -> Vec<&Sample> {
    if samples.len() <= MAX_ROWS {
        return samples.iter().collect();
    }
    let mut keep: std::collections::BTreeSet<usize> = (0..ROWS_EACH).collect();
    let mut ok: Vec<(u64, usize)> = samples
        .iter()
        .enumerate()
        .filter(|(_, x)| x.ok)
        .filter_map(|(i, x)| x.latency_ns.map(|l| (l, i)))
        .collect();
    ok.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    keep.extend(ok.iter().take(ROWS_EACH).map(|&(_, i)| i));
    keep.extend(
        samples
            .iter()
            .enumerate()
            .filter(|(_, x)| !x.ok)
            .take(ROWS_EACH)
            .map(|(i, _)| i),
    );
    keep.into_iter().filter_map(|i| samples.get(i)).collect()
}

/// The samples: the rows [`shown_rows`] keeps, with each host stage, in a box that scrolls;
/// a link to `samples.csv`, which has every row and column.
fn sample_table(s: &mut String, samples: &[Sample]) {
    let _ = writeln!(s, "<h2>Samples</h2>");
    let rows = shown_rows(samples);
    if rows.len() < samples.len() {
        let _ = writeln!(
            s,
            "<p>{} of {} rows: the first {ROWS_EACH}, the {ROWS_EACH} slowest successes and the \
             first {ROWS_EACH} failures. <a href=\"{2}\"><code>{2}</code></a> has every row.</p>",
            rows.len(),
            samples.len(),
            crate::names::SAMPLES_FILE
        );
    } else {
        let _ = writeln!(
            s,
            "<p>Every row (<a href=\"{0}\"><code>{0}</code></a> has every column too).</p>",
            crate::names::SAMPLES_FILE
        );
    }
    let stages: Vec<Stage> = Stage::ALL
        .into_iter()
        .filter(|st| st.kind() == StageKind::Host)
        .filter(|st| rows.iter().any(|x| x.stages.get(*st).is_some()))
        .collect();
    let _ = write!(s, "<div class=\"scroll rows\">");
    crate::html::sample_rows(s, &rows, &stages);
    let _ = writeln!(s, "</div>");
}

/// A README as the page shows it: its title left out (the box has it), its figures in units
/// a person reads ([`humanize`]), a table of plots laid out as plots one under the other at
/// full width, every other table in a box that scrolls; `drop_cdf`: without the `cdf.svg`
/// image (an engines page draws its own above).
fn details(text: &str, images: &BTreeMap<String, Vec<u8>>, drop_cdf: bool) -> String {
    let mut md = String::new();
    let mut lines = text.lines().peekable();
    // The title: the first heading of level 1.
    if lines.peek().is_some_and(|l| l.starts_with("# ")) {
        lines.next();
    }
    let mut fenced = false;
    let mut table: Vec<&str> = Vec::new();
    let flush = |md: &mut String, table: &mut Vec<&str>| {
        if table.is_empty() {
            return;
        }
        if table.iter().any(|l| l.contains("![")) {
            // Plots side by side: each cell a paragraph of its own.
            for l in table.iter() {
                for cell in l.trim().trim_matches('|').split(" | ") {
                    let c = cell.trim();
                    if !c.is_empty() && !c.chars().all(|ch| matches!(ch, '-' | ':' | '|')) {
                        md.push_str(c);
                        md.push_str("\n\n");
                    }
                }
            }
        } else {
            for l in table.iter() {
                md.push_str(&humanize(l));
                md.push('\n');
            }
        }
        table.clear();
    };
    for l in lines {
        if l.starts_with("```") {
            flush(&mut md, &mut table);
            fenced = !fenced;
            md.push_str(l);
            md.push('\n');
            continue;
        }
        if fenced {
            md.push_str(l);
            md.push('\n');
            continue;
        }
        if drop_cdf && l.contains(&format!("]({})", crate::arms::ARMS_CDF_FILE)) {
            continue;
        }
        if l.starts_with('|') {
            table.push(l);
            continue;
        }
        flush(&mut md, &mut table);
        md.push_str(&humanize(l));
        md.push('\n');
    }
    flush(&mut md, &mut table);
    markdown(&md, images)
        .replace("<table>", "<div class=\"scroll\"><table>")
        .replace("</table>", "</table></div>")
        .replace("<img ", "<img class=\"plot\" ")
}

/// A line of Markdown with its raw figures in units a person reads, outside code spans:
/// `N bytes (M MiB)` → `M MiB`; `N bytes` → MiB or KiB when whole; `N ns (M ppm of …)` →
/// ms and %; `N ns` (N ≥ 1000) → ms; `N ppm` → %. Exact: a figure is written with as many
/// decimals as it has, never rounded.
pub fn humanize(line: &str) -> String {
    let mut out = String::new();
    for (k, part) in line.split('`').enumerate() {
        if k > 0 {
            out.push('`');
        }
        if k % 2 == 1 {
            out.push_str(part);
        } else {
            out.push_str(&humanize_plain(part));
        }
    }
    out
}

/// [`humanize`] of text without code spans.
fn humanize_plain(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        let start_ok =
            i == 0 || !(b[i - 1].is_alphanumeric() || b[i - 1] == '.' || b[i - 1] == '_');
        let neg = b[i] == '-' && b.get(i + 1).is_some_and(|c| c.is_ascii_digit());
        if start_ok && (b[i].is_ascii_digit() || neg) {
            let mut j = i + usize::from(neg);
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            let digits: String = b[i..j].iter().collect();
            let rest: String = b[j..].iter().collect();
            if let (Ok(n), Some((replacement, used))) = (digits.parse::<i128>(), unit(&rest)) {
                out.push_str(&replacement(n));
                i = j + used;
                continue;
            }
            out.push_str(&digits);
            i = j;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

type Render = Box<dyn Fn(i128) -> String>;

/// The unit after a figure (`rest` starts right after its digits): how to write the figure
/// and how many characters of `rest` the unit took.
fn unit(rest: &str) -> Option<(Render, usize)> {
    let word_end = |s: &str, w: &str| {
        s.strip_prefix(w)
            .is_some_and(|r| r.chars().next().is_none_or(|c| !c.is_alphanumeric()))
    };
    if let Some(r) = rest.strip_prefix(" bytes (") {
        // `N bytes (M MiB)`: the MiB it already says.
        if let Some(close) = r.find(')') {
            let inner = &r[..close];
            if inner.ends_with(" MiB")
                && inner[..inner.len() - 4].chars().all(|c| c.is_ascii_digit())
            {
                let keep = inner.to_string();
                return Some((
                    Box::new(move |_| keep.clone()),
                    " bytes (".len() + close + 1,
                ));
            }
        }
    }
    if word_end(rest, " bytes") {
        return Some((
            Box::new(|n| {
                let a = n.unsigned_abs();
                if a >= 1 << 20 && a % (1 << 20) == 0 {
                    format!("{} MiB", n / (1 << 20))
                } else if a >= 1 << 10 && a % (1 << 10) == 0 {
                    format!("{} KiB", n / (1 << 10))
                } else {
                    format!("{n} bytes")
                }
            }),
            " bytes".len(),
        ));
    }
    if let Some(r) = rest.strip_prefix(" ns (") {
        // `N ns (M ppm of p50)`.
        let digits = r.trim_start_matches('-');
        let d_len = digits.chars().take_while(|c| c.is_ascii_digit()).count();
        let sign_len = r.len() - digits.len();
        if d_len > 0 && digits[d_len..].starts_with(" ppm") {
            let ppm: i128 = r[..sign_len + d_len].parse().ok()?;
            let used = " ns (".len() + sign_len + d_len + " ppm".len();
            return Some((
                Box::new(move |n| format!("{} ({}", ns_ms(n), ppm_text(ppm))),
                used,
            ));
        }
    }
    if word_end(rest, " ns") {
        return Some((
            Box::new(|n| {
                if n.unsigned_abs() >= 1000 {
                    ns_ms(n)
                } else {
                    format!("{n} ns")
                }
            }),
            " ns".len(),
        ));
    }
    if word_end(rest, " ppm") {
        return Some((Box::new(ppm_text), " ppm".len()));
    }
    None
}

/// Nanoseconds as milliseconds, exact (`-267010` → `-0.26701 ms`).
fn ns_ms(n: i128) -> String {
    let sign = if n < 0 { "-" } else { "" };
    let a = n.unsigned_abs();
    let frac = format!("{:06}", a % 1_000_000);
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        format!("{sign}{} ms", a / 1_000_000)
    } else {
        format!("{sign}{}.{frac} ms", a / 1_000_000)
    }
}

/// Parts per million as a percentage, exact (`10653` → `1.0653 %`).
fn ppm_text(n: i128) -> String {
    let sign = if n < 0 { "-" } else { "" };
    let a = n.unsigned_abs();
    let frac = format!("{:04}", a % 10_000);
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        format!("{sign}{} %", a / 10_000)
    } else {
        format!("{sign}{}.{frac} %", a / 10_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_in_human_units_exactly() {
        assert_eq!(
            humanize("- memory: 17179869184 bytes (16384 MiB)"),
            "- memory: 16384 MiB"
        );
        assert_eq!(humanize("size 1073741824 bytes"), "size 1024 MiB");
        assert_eq!(humanize("size 1000 bytes"), "size 1000 bytes");
        assert_eq!(
            humanize("Δ -267010 ns (-3734 ppm of p50)"),
            "Δ -0.26701 ms (-0.3734 % of p50)"
        );
        assert_eq!(humanize("cv 10653 ppm, so"), "cv 1.0653 %, so");
        assert_eq!(
            humanize("1 ns per emulated instruction"),
            "1 ns per emulated instruction"
        );
        assert_eq!(humanize("took 2500000 ns."), "took 2.5 ms.");
        // Code spans and words that merely contain digits stay as they are.
        assert_eq!(
            humanize("`truecold.mem=17179869184 bytes` v6.12 ns"),
            "`truecold.mem=17179869184 bytes` v6.12 ns"
        );
        assert_eq!(humanize("sha256 ab12 ns"), "sha256 ab12 ns");
        assert_eq!(ppm_pct(-274_952), "−27.4952 %");
        assert_eq!(ratio_text(919_469_000, 227_503_000), "4.041");
    }

    #[test]
    fn a_table_of_plots_is_laid_out_one_plot_under_another() {
        let md =
            "# title\n\n| baseline | recommended |\n|---|---|\n| ![b](b.svg) | ![r](r.svg) |\n";
        let mut images = BTreeMap::new();
        images.insert("b.svg".to_string(), b"<svg/>".to_vec());
        images.insert("r.svg".to_string(), b"<svg/>".to_vec());
        let h = details(md, &images, false);
        assert!(!h.contains("<table>"), "{h}");
        assert!(!h.contains("title"), "{h}");
        assert_eq!(h.matches("<img class=\"plot\"").count(), 2, "{h}");
    }
}
