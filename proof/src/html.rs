//! `report.html`, version 1 (the pages written before version 2, [`crate::html_page`], which
//! regenerates a page as the version it is), and what both versions use: the Markdown of the
//! READMEs as HTML ([`markdown`]), the plots as `data:` images ([`img`]), the images a README
//! links ([`linked_images`]). One self-contained page per directory, optional, and when
//! present exactly what `report` writes ([`crate::html_page::check`]).
//!
//! The page holds no script, loads nothing (no network, no external file): its CSS is
//! inline and its plots are the directory's SVG plots as `data:` images (an SVG shown
//! through `<img>` runs no script and fetches nothing). What it shows:
//! - the verify verdict on the directory — the page itself aside (a page cannot hold the
//!   verdict on its own bytes) and without the signature (an option of `verify`, not part
//!   of the directory);
//! - the directory's README rendered (for a bundle: the contract, configuration,
//!   environment, headline, errors and stages, recomputed from `result.json`; for a
//!   multi-arm, tune or bisect directory: its README as on disk, which `verify` holds to its
//!   regeneration, so its engines, tune or bisect tables), its image links shown inline;
//! - for a bundle: the CDF and stage plots, the median launch's stage waterfall, the
//!   attribution timeline where there is one, and a per-sample table bounded at
//!   [`MAX_ROWS`] rows (the page says which rows it shows; `samples.csv` has every one).
//!
//! Every string from the directory is HTML-escaped ([`esc`]) after its control and
//! bidirectional characters are written as escapes ([`crate::fmt::escape_untrusted`]): a hostile label
//! or error detail renders as text, never as markup.
//!
//! `verify DIR` checks `DIR/report.html` when there is one ([`crate::html_page::check`]; a
//! page inside a multi-arm, tune or bisect directory's bundles is covered by the directory's
//! `SHA256SUMS`, and checked when that bundle is verified by itself). Deterministic: same
//! directory, same bytes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::fmt::{esc, ms};
use crate::kind::Kind;
use crate::names::HTML_FILE;
use crate::schema::{ResultJson, Sample, Stage, StageKind};
use crate::stats::percentile_sorted;
use crate::summary::success_latencies;
use crate::verdict::{Reason, Verdict};

/// Most sample rows in the drill-down table.
pub const MAX_ROWS: usize = 200;
/// Most bytes of a README or image read from a directory for the page.
pub(crate) const MAX_INPUT: u64 = 16 << 20;
/// Most reasons (and warnings) of one kind listed on the page.
pub(crate) const PER_CHECK: usize = 20;

/// Why a page could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum HtmlError {
    #[error("the directory is unreadable, so it has no page: {0}")]
    Unreadable(String),
    #[error("the bundle's result.json or samples.csv did not parse, so it has no page")]
    NoData,
    #[error("the attribution files cannot be recomputed")]
    Attribution(#[source] crate::attribution::AttributionError),
    #[error(transparent)]
    File(#[from] crate::fsio::FileError),
    #[error(transparent)]
    Dir(#[from] crate::skeleton::DirError),
    #[error("{}", crate::names::SUMS_FILE)]
    Sums(#[source] crate::sums::SumsError),
}

/// The verdict the page shows: `v` less every reason and warning about the page itself,
/// without the signature.
fn page_verdict(v: &Verdict) -> (Vec<Reason>, Vec<Reason>) {
    let not_page = |r: &&Reason| r.file.as_deref() != Some(HTML_FILE);
    (
        v.reasons.iter().filter(not_page).cloned().collect(),
        v.warnings.iter().filter(not_page).cloned().collect(),
    )
}

const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:1em auto;padding:0 1em;\
color:#222}h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}td,th{border:1px solid #ccc;\
padding:2px 6px}td.n{text-align:right;font-variant-numeric:tabular-nums}code{background:#f3f3f3;\
padding:0 2px}pre{background:#f3f3f3;padding:.5em;overflow-x:auto}img{max-width:100%}\
.valid{color:#1e7b34}.invalid{color:#b00020}.verdict{font-size:1.3em;font-weight:bold}\
.bar{position:relative;height:14px;background:#f3f3f3;min-width:400px}\
.bar span{position:absolute;top:0;height:14px;background:#2c3e50}tr.fail{background:#fdecea}";

/// The version-1 page of the directory `dir` of `kind`, from `v`, the verifier's verdict on
/// it (`verify_dir`'s). A bundle's page is computed from the verdict's parsed rows; another
/// kind's from its README and the images it links, read from `dir`.
pub fn page(dir: &Path, kind: Kind, v: &Verdict) -> Result<String, HtmlError> {
    if let Some(u) = &v.unreadable {
        return Err(HtmlError::Unreadable(u.clone()));
    }
    let (reasons, warnings) = page_verdict(v);
    let mut s = String::new();
    let label = v.label_text();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>truecold report: {}</title><style>{STYLE}</style></head><body>\n",
        esc(&label)
    );
    let _ = writeln!(s, "<h1>truecold report: {}</h1>", esc(&label));
    verdict_section(&mut s, &reasons, &warnings);
    match kind {
        Kind::Bundle => {
            let (Some(r), Some(samples)) = (&v.result, &v.samples) else {
                return Err(HtmlError::NoData);
            };
            bundle_sections(&mut s, dir, r, samples)?;
        }
        Kind::Arms | Kind::Tune | Kind::Bisect | Kind::Fleet => {
            let readme = crate::fsio::read_file(&dir.join(crate::names::README_FILE), MAX_INPUT)?;
            let text = String::from_utf8_lossy(&readme);
            let images = linked_images(dir, &text)?;
            s.push_str(&markdown(&text, &images));
        }
    }
    s.push_str(
        "<hr><p>Written by <code>truecold-proof report --html</code>; \
         <code>truecold-proof verify</code> recomputes this page and fails the directory if it \
         differs. The page runs no script and loads nothing from outside itself.</p>\n\
         </body></html>\n",
    );
    Ok(s)
}

fn verdict_section(s: &mut String, reasons: &[Reason], warnings: &[Reason]) {
    let _ = writeln!(s, "<h2>Verdict</h2>");
    if reasons.is_empty() {
        let _ = writeln!(
            s,
            "<p class=\"verdict valid\">VALID{}</p>",
            if warnings.is_empty() {
                String::new()
            } else {
                format!(", {} warning(s)", warnings.len())
            }
        );
    } else {
        let _ = writeln!(
            s,
            "<p class=\"verdict invalid\">INVALID: {} reason(s)</p>",
            reasons.len()
        );
    }
    let _ = writeln!(
        s,
        "<p>What <code>truecold-proof verify</code> says of this directory, this page aside \
         and without a signature check (<code>verify --signature</code> checks one).</p>"
    );
    for (list, what) in [(reasons, "reason"), (warnings, "warning")] {
        if list.is_empty() {
            continue;
        }
        let _ = writeln!(s, "<ul>");
        reason_items(s, list, what);
        let _ = writeln!(s, "</ul>");
    }
}

/// A bundle's sections: its README (recomputed, plots inline), the median launch's stage
/// waterfall, the attribution timeline, the samples.
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
    let readme = generated
        .iter()
        .find(|(n, _)| n == crate::names::README_FILE)
        .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default();
    s.push_str(&markdown(&readme, &images));
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
                img(name, svg)
            );
            attribution_flame(s, dir, &files, img);
        }
    }
    sample_table(s, samples);
    Ok(())
}

/// With samples that counted their `requested` (a record made since): the rates not
/// obtained, said where a reader looks, and the flame graph of the shown launch.
/// `image` renders an SVG as the page's version draws it.
pub(crate) fn attribution_flame(
    s: &mut String,
    dir: &Path,
    files: &[(String, Vec<u8>)],
    image: fn(&str, &[u8]) -> String,
) {
    let warnings = crate::fsio::read_file(
        &dir.join(crate::attribution::JSONL_FILE),
        crate::attribution::JSONL_MAX_BYTES,
    )
    .map(|b| crate::attribution::rate_warnings(&b))
    .unwrap_or_default();
    for w in warnings {
        let _ = writeln!(s, "<p><b>Rate not obtained:</b> {}</p>", esc(&w));
    }
    if let Some((name, svg)) = files
        .iter()
        .find(|(n, _)| n == crate::attribution::FLAME_FILE)
    {
        let _ = writeln!(
            s,
            "<h3>Flame graph</h3>\n<p>The median launch's request → strict-ready: the host \
             stages and the guest's samples on one clock (<code>{}</code>).</p>\n{}",
            crate::attribution::FOLDED_FILE,
            image(name, svg)
        );
    }
}

/// The host stages (those that tile the headline) of the median success, laid end to end:
/// one real launch's request → strict-ready, not a sum of percentiles.
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
         successes; the lowest index among equals). Its host stages tile that time exactly; \
         the guest-clock stages and the stages after strict-ready are in the table below.</p>",
        m.index,
        ms(total),
        lat.len()
    );
    let _ = writeln!(
        s,
        "<table><tr><th>stage</th><th>starts, ms</th><th>takes, ms</th><th></th></tr>"
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
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>\
             <div class=\"bar\"><span style=\"left:{};width:{}\"></span></div></td></tr>",
            esc(st.name()),
            ms(at),
            ms(d),
            pct(at),
            pct(d.min(total - at.min(total)))
        );
        at = at.saturating_add(d);
    }
    let _ = writeln!(s, "</table>");
}

/// The rows shown: all when there are at most [`MAX_ROWS`]; else the first 100, the 50
/// slowest successes and the first 50 failures (each row once, in index order).
fn shown_rows(samples: &[Sample]) -> Vec<&Sample> {
    if samples.len() <= MAX_ROWS {
        return samples.iter().collect();
    }
    let mut keep: std::collections::BTreeSet<usize> = (0..100).collect();
    let mut ok: Vec<(u64, usize)> = samples
        .iter()
        .enumerate()
        .filter(|(_, x)| x.ok)
        .filter_map(|(i, x)| x.latency_ns.map(|l| (l, i)))
        .collect();
    ok.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    keep.extend(ok.iter().take(50).map(|&(_, i)| i));
    keep.extend(
        samples
            .iter()
            .enumerate()
            .filter(|(_, x)| !x.ok)
            .take(50)
            .map(|(i, _)| i),
    );
    keep.into_iter().filter_map(|i| samples.get(i)).collect()
}

fn sample_table(s: &mut String, samples: &[Sample]) {
    let _ = writeln!(s, "<h2>Samples</h2>");
    let rows = shown_rows(samples);
    if rows.len() < samples.len() {
        let _ = writeln!(
            s,
            "<p>Showing {} of {} rows: the first 100, the 50 slowest successes and the first 50 \
             failures (at most {MAX_ROWS} rows are listed here; <code>samples.csv</code> has \
             every row).</p>",
            rows.len(),
            samples.len()
        );
    } else {
        let _ = writeln!(s, "<p>Every row of <code>samples.csv</code>.</p>");
    }
    let stages: Vec<Stage> = Stage::ALL
        .into_iter()
        .filter(|st| rows.iter().any(|x| x.stages.get(*st).is_some()))
        .collect();
    sample_rows(s, &rows, &stages);
    let _ = writeln!(s);
}

/// The verifier's `list` of reasons or warnings (`what`) as list items: at most
/// [`PER_CHECK`] of each check, then how many more of it there are. Both page versions write it.
pub(crate) fn reason_items<'a>(
    s: &mut String,
    list: impl IntoIterator<Item = &'a Reason>,
    what: &str,
) {
    let mut counts: BTreeMap<crate::verdict::Check, usize> = BTreeMap::new();
    for r in list {
        let c = counts.entry(r.check).or_insert(0);
        *c += 1;
        if *c <= PER_CHECK {
            let _ = writeln!(s, "<li>{what} [{:?}] {}</li>", r.check, esc(&r.detail));
        }
    }
    for (c, n) in counts.into_iter().filter(|(_, n)| *n > PER_CHECK) {
        let _ = writeln!(
            s,
            "<li>[{c:?}] … and {} more of this kind</li>",
            n - PER_CHECK
        );
    }
}

/// The rows of a samples table, each with the `stages` given, as one `<table>` (no line
/// break after it): both page versions draw it.
pub(crate) fn sample_rows(s: &mut String, rows: &[&Sample], stages: &[Stage]) {
    let _ = write!(
        s,
        "<table><tr><th>index</th><th>ok</th><th>latency, ms</th><th>error</th>"
    );
    for st in stages {
        let _ = write!(s, "<th>{}, ms</th>", esc(st.name()));
    }
    let _ = writeln!(s, "</tr>");
    let opt = |v: Option<u64>| v.map(ms).unwrap_or_else(|| "–".into());
    for x in rows {
        let _ = write!(
            s,
            "<tr{}><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td><td>{}</td>",
            if x.ok { "" } else { " class=\"fail\"" },
            x.index,
            if x.ok { "yes" } else { "no" },
            opt(x.latency_ns),
            esc(&x.error_kind)
        );
        for st in stages {
            let _ = write!(s, "<td class=\"n\">{}</td>", opt(x.stages.get(*st)));
        }
        let _ = writeln!(s, "</tr>");
    }
    let _ = write!(s, "</table>");
}

/// A plot as an `<img>` with a `data:` URL.
pub(crate) fn img(name: &str, svg: &[u8]) -> String {
    format!(
        "<p><img alt=\"{}\" src=\"data:image/svg+xml;base64,{}\"></p>",
        esc(name),
        base64(svg)
    )
}

/// Standard base64 (RFC 4648, padded).
fn base64(b: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// Whether a link target is a plain relative path inside the directory (no scheme, no
/// `..`, no absolute path): only those become links or images.
fn is_local(target: &str) -> bool {
    !target.is_empty()
        && !target.starts_with('/')
        && target
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
        && target.split('/').all(|p| p != "..")
}

/// The SVG images a README links (`![alt](file.svg)`), read from `dir` (local targets only,
/// capped); a target that is not a regular file there is left out (the page shows its alt
/// text).
pub(crate) fn linked_images(
    dir: &Path,
    text: &str,
) -> Result<BTreeMap<String, Vec<u8>>, HtmlError> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    while let Some(i) = rest.find("![") {
        rest = &rest[i + 2..];
        let Some(j) = rest.find("](") else { break };
        let after = &rest[j + 2..];
        let Some(k) = after.find(')') else { break };
        let target = &after[..k];
        if is_local(target)
            && target.ends_with(".svg")
            && crate::fsio::is_real_file(&dir.join(target))
        {
            out.insert(
                target.to_string(),
                crate::fsio::read_file(&dir.join(target), MAX_INPUT)?,
            );
        }
        rest = after;
    }
    Ok(out)
}

/// The Markdown the READMEs are written in, as HTML: `#` headings, `-` lists, `|` tables,
/// fenced code, paragraphs; inline code spans, `**bold**`, backslash escapes, links (local
/// targets only) and images (from `images`, inline). Every text character escaped ([`esc`]).
pub fn markdown(text: &str, images: &BTreeMap<String, Vec<u8>>) -> String {
    let mut out = String::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    let mut para: Vec<&str> = Vec::new();
    let flush = |out: &mut String, para: &mut Vec<&str>| {
        if !para.is_empty() {
            let _ = writeln!(out, "<p>{}</p>", inline(&para.join(" "), images));
            para.clear();
        }
    };
    while i < lines.len() {
        let l = lines[i];
        if l.starts_with("```") {
            flush(&mut out, &mut para);
            i += 1;
            let mut code = String::new();
            while i < lines.len() && !lines[i].starts_with("```") {
                code.push_str(lines[i]);
                code.push('\n');
                i += 1;
            }
            let _ = writeln!(out, "<pre>{}</pre>", esc_block(&code));
            i += 1;
        } else if let Some(h) = heading(l) {
            flush(&mut out, &mut para);
            let _ = writeln!(out, "<h{0}>{1}</h{0}>", h.0 + 1, inline(h.1, images));
            i += 1;
        } else if l.starts_with("- ") {
            flush(&mut out, &mut para);
            let _ = writeln!(out, "<ul>");
            while i < lines.len() && lines[i].starts_with("- ") {
                let _ = writeln!(out, "<li>{}</li>", inline(&lines[i][2..], images));
                i += 1;
            }
            let _ = writeln!(out, "</ul>");
        } else if l.starts_with('|') {
            flush(&mut out, &mut para);
            let _ = writeln!(out, "<table>");
            let mut row = 0;
            while i < lines.len() && lines[i].starts_with('|') {
                let cells = cells(lines[i]);
                let sep = cells
                    .iter()
                    .all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':')));
                if !sep {
                    let tag = if row == 0 { "th" } else { "td" };
                    let _ = write!(out, "<tr>");
                    for c in cells {
                        let _ = write!(out, "<{tag}>{}</{tag}>", inline(c, images));
                    }
                    let _ = writeln!(out, "</tr>");
                    row += 1;
                }
                i += 1;
            }
            let _ = writeln!(out, "</table>");
        } else if l.trim().is_empty() {
            flush(&mut out, &mut para);
            i += 1;
        } else {
            para.push(l);
            i += 1;
        }
    }
    flush(&mut out, &mut para);
    out
}

/// Text of a code block: HTML-escaped, line ends kept (control characters but `\n`
/// escaped).
fn esc_block(s: &str) -> String {
    s.split('\n').map(esc).collect::<Vec<_>>().join("\n")
}

fn heading(l: &str) -> Option<(usize, &str)> {
    let n = l.chars().take_while(|&c| c == '#').count();
    (1..=5)
        .contains(&n)
        .then(|| l[n..].strip_prefix(' '))
        .flatten()
        .map(|t| (n, t))
}

/// A table row's cells: split at every `|` that is neither backslash-escaped nor inside a
/// code span.
fn cells(line: &str) -> Vec<&str> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut start = None;
    let mut i = 0;
    let mut fence = 0usize;
    while i < b.len() {
        match b[i] {
            b'\\' if fence == 0 => i += 2,
            b'`' => {
                let n = b[i..].iter().take_while(|&&c| c == b'`').count();
                if fence == 0 {
                    // Opens a span only when a closing run of as many follows.
                    if closing_run(&line[i + n..], n).is_some() {
                        fence = n;
                    }
                } else if n == fence {
                    fence = 0;
                }
                i += n;
            }
            b'|' if fence == 0 => {
                if let Some(s) = start {
                    out.push(line[s..i].trim());
                }
                start = Some(i + 1);
                i += 1;
            }
            _ => i += 1,
        }
    }
    if let Some(s) = start {
        let last = line[s..].trim();
        if !last.is_empty() {
            out.push(last);
        }
    }
    out
}

/// Where in `s` the first run of exactly `n` backticks starts.
fn closing_run(s: &str, n: usize) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'`' {
            let m = b[i..].iter().take_while(|&&c| c == b'`').count();
            if m == n {
                return Some(i);
            }
            i += m;
        } else {
            i += 1;
        }
    }
    None
}

/// One line of inline Markdown as HTML.
fn inline(s: &str, images: &BTreeMap<String, Vec<u8>>) -> String {
    let mut out = String::new();
    let mut bold = false;
    let mut i = 0;
    while i < s.len() {
        let rest = &s[i..];
        let c = rest.chars().next().unwrap_or(' ');
        if c == '\\' {
            match rest[1..].chars().next() {
                Some(n) if n.is_ascii_punctuation() => {
                    out.push_str(&esc(n.encode_utf8(&mut [0u8; 4])));
                    i += 1 + n.len_utf8();
                }
                _ => {
                    out.push('\\');
                    i += 1;
                }
            }
        } else if c == '`' {
            let n = rest.chars().take_while(|&c| c == '`').count();
            match closing_run(&rest[n..], n) {
                Some(j) => {
                    let mut code = &rest[n..n + j];
                    if code.len() >= 2
                        && code.starts_with(' ')
                        && code.ends_with(' ')
                        && !code.trim().is_empty()
                    {
                        code = &code[1..code.len() - 1];
                    }
                    let _ = write!(out, "<code>{}</code>", esc(code));
                    i += n + j + n;
                }
                None => {
                    out.push_str(&"`".repeat(n));
                    i += n;
                }
            }
        } else if rest.starts_with("**") {
            out.push_str(if bold { "</strong>" } else { "<strong>" });
            bold = !bold;
            i += 2;
        } else if let Some((alt, target, len)) = link(rest, "![") {
            match images.get(target).filter(|_| is_local(target)) {
                Some(svg) => out.push_str(&img(alt, svg)),
                None => out.push_str(&esc(alt)),
            }
            i += len;
        } else if let Some((text, target, len)) = link(rest, "[") {
            if is_local(target) {
                let _ = write!(
                    out,
                    "<a href=\"{}\">{}</a>",
                    esc(target),
                    inline(text, images)
                );
            } else {
                out.push_str(&inline(text, images));
            }
            i += len;
        } else {
            out.push_str(&esc(c.encode_utf8(&mut [0u8; 4])));
            i += c.len_utf8();
        }
    }
    if bold {
        out.push_str("</strong>");
    }
    out
}

/// `[text](target)` (or `![alt](target)` with `open` `![`) at the start of `s`: the text,
/// the target and the length of the whole; the text holds no unescaped `]`.
fn link<'a>(s: &'a str, open: &str) -> Option<(&'a str, &'a str, usize)> {
    let body = s.strip_prefix(open)?;
    let b = body.as_bytes();
    let mut i = 0;
    while i < b.len() && b[i] != b']' {
        i += if b[i] == b'\\' { 2 } else { 1 };
    }
    let text = body.get(..i)?;
    let after = body.get(i..)?.strip_prefix("](")?;
    let k = after.find(')')?;
    Some((text, &after[..k], open.len() + i + 2 + k + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_and_base64() {
        assert_eq!(
            esc("<script>\"a\"&'b'\n"),
            "&lt;script&gt;&quot;a&quot;&amp;&#39;b&#39;\\n"
        );
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn markdown_publisher_text_stays_text() {
        let none = BTreeMap::new();
        let md = format!(
            "# t\n\n- cpu: {}\n- cmd: {}\n\n| a | b |\n|---|---:|\n| {} | `x|y` |\n",
            crate::fmt::md_text("<img src=x onerror=alert(1)> **b** [l](javascript:x)"),
            crate::fmt::md_code("</code><script>"),
            crate::fmt::md_text("p|q")
        );
        let h = markdown(&md, &none);
        assert!(!h.contains("<img") && !h.contains("<script"), "{h}");
        assert!(!h.contains("href"), "{h}");
        assert!(
            h.contains("&lt;img src=x onerror=alert(1)&gt; **b** [l](javascript:x)"),
            "{h}"
        );
        assert!(
            h.contains("<code>&lt;/code&gt;&lt;script&gt;</code>"),
            "{h}"
        );
        assert!(h.contains("<td>p|q</td><td><code>x|y</code></td>"), "{h}");
        assert!(h.contains("<h2>t</h2>"), "{h}");
        assert_eq!(
            inline("[r](a/README.md) ![c](c.svg)", &none),
            "<a href=\"a/README.md\">r</a> c"
        );
    }
}
