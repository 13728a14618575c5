//! Handwritten, deterministic SVG plots (integer coordinates, no floats, no timestamps):
//! the latency CDF (successes and with failures at the deadline) and the per-stage
//! breakdown (p50 bar, p99 tick, successes only).

use crate::report::ms;
use crate::schema::{ResultJson, Sample};
use crate::stats::with_failures;

/// File name of the CDF plot.
pub const CDF_FILE: &str = "latency-cdf.svg";
/// File name of the stage plot.
pub const STAGES_FILE: &str = "stages.svg";

const W: u64 = 800;
const H: u64 = 480;
const L: u64 = 70;
const R: u64 = 40;
const T: u64 = 50;
const B: u64 = 50;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn header(title: &str, h: u64) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{h}\" \
         viewBox=\"0 0 {W} {h}\" font-family=\"monospace\" font-size=\"12\">\n\
         <rect width=\"{W}\" height=\"{h}\" fill=\"white\"/>\n\
         <text x=\"{L}\" y=\"22\" font-size=\"14\">{}</text>\n",
        esc(title)
    )
}

fn scale(v: u64, max: u64, span: u64) -> u64 {
    if max == 0 {
        return 0;
    }
    (u128::from(v.min(max)) * u128::from(span) / u128::from(max)) as u64
}

/// A step-CDF path of ascending `sorted` on an x range `0..=xmax`.
fn cdf_path(sorted: &[u64], xmax: u64) -> String {
    let pw = W - L - R;
    let ph = H - T - B;
    let n = sorted.len() as u64;
    let mut d = format!("M {} {}", L, H - B);
    for (i, &v) in sorted.iter().enumerate() {
        let x = L + scale(v, xmax, pw);
        let y = H - B - scale(i as u64 + 1, n, ph);
        d.push_str(&format!(" H {x} V {y}"));
    }
    d
}

/// The latency CDF.
pub fn cdf_svg(result: &ResultJson, samples: &[Sample]) -> String {
    let mut ok: Vec<u64> = samples
        .iter()
        .filter(|s| s.ok)
        .filter_map(|s| s.latency_ns)
        .collect();
    ok.sort_unstable();
    let failed = samples.len() as u64 - ok.len() as u64;
    let mut all = with_failures(&ok, failed, result.contract.deadline_ns);
    all.sort_unstable();
    // The x range covers the successes (plus 10 %); values beyond it (failures at the
    // deadline) are drawn at the right edge and said so in the legend.
    let xmax = match ok.last() {
        Some(&m) => m.saturating_add(m / 10),
        None => all.last().copied().unwrap_or(0),
    }
    .max(1);
    let clipped = all.iter().filter(|&&v| v > xmax).count();
    let title = format!(
        "{}: latency CDF ({} attempts, {} ok)",
        result.contract.label,
        samples.len(),
        ok.len()
    );
    let mut s = header(&title, H);
    let (pw, ph) = (W - L - R, H - T - B);
    s.push_str(&format!(
        "<rect x=\"{L}\" y=\"{T}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"black\"/>\n"
    ));
    for k in 0..=5u64 {
        let x = L + pw * k / 5;
        let v = xmax * k / 5;
        s.push_str(&format!(
            "<line x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\" stroke=\"black\"/>\
             <text x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{} ms</text>\n",
            H - B,
            H - B + 5,
            H - B + 20,
            ms(v)
        ));
        let y = H - B - ph * k / 5;
        s.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}%</text>\n",
            L - 6,
            y + 4,
            k * 20
        ));
    }
    if !all.is_empty() {
        s.push_str(&format!(
            "<path d=\"{}\" fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\"/>\n",
            cdf_path(&all, xmax)
        ));
    }
    if !ok.is_empty() {
        s.push_str(&format!(
            "<path d=\"{}\" fill=\"none\" stroke=\"#2c3e50\" stroke-width=\"2\"/>\n",
            cdf_path(&ok, xmax)
        ));
    }
    s.push_str(&format!(
        "<text x=\"{}\" y=\"{}\" fill=\"#2c3e50\">successes only (n={})</text>\n\
         <text x=\"{}\" y=\"{}\" fill=\"#c0392b\">with failures at deadline {} ms (n={}{})</text>\n\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">latency, request to strict-ready</text>\n</svg>\n",
        L + 10,
        T + 18,
        ok.len(),
        L + 10,
        T + 34,
        ms(result.contract.deadline_ns),
        all.len(),
        if clipped > 0 {
            format!("; {clipped} beyond the axis, drawn at its right edge")
        } else {
            String::new()
        },
        L + pw / 2,
        H - 12
    ));
    s
}

/// The per-stage breakdown: one bar per stage with data (p50), a tick at p99.
pub fn stages_svg(result: &ResultJson) -> String {
    let rows: Vec<(&str, u64, u64)> = result
        .summary
        .stages
        .iter()
        .filter_map(|st| st.successes.map(|s| (st.name.as_str(), s.p50, s.p99)))
        .collect();
    let row_h = 24u64;
    let left = 190u64;
    let h = T + B + row_h * (rows.len() as u64).max(1);
    let pw = W - left - R - 160;
    let xmax = rows.iter().map(|r| r.2).max().unwrap_or(0).max(1);
    let title = format!(
        "{}: per-stage p50 (bar) and p99 (tick), successes",
        result.contract.label
    );
    let mut s = header(&title, h);
    if rows.is_empty() {
        s.push_str(&format!(
            "<text x=\"{L}\" y=\"{}\">no successful sample has stage data</text>\n",
            T + 16
        ));
    }
    for (i, (name, p50, p99)) in rows.iter().enumerate() {
        let y = T + row_h * i as u64;
        let bw = scale(*p50, xmax, pw).max(1);
        let tx = left + scale(*p99, xmax, pw);
        s.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
             <rect x=\"{left}\" y=\"{}\" width=\"{bw}\" height=\"{}\" fill=\"#2c3e50\"/>\
             <line x1=\"{tx}\" y1=\"{}\" x2=\"{tx}\" y2=\"{}\" stroke=\"#c0392b\" stroke-width=\"2\"/>\
             <text x=\"{}\" y=\"{}\">{} / {} ms</text>\n",
            left - 8,
            y + 16,
            esc(name),
            y + 4,
            row_h - 8,
            y + 2,
            y + row_h - 2,
            left + pw + 16,
            y + 16,
            ms(*p50),
            ms(*p99)
        ));
    }
    s.push_str("</svg>\n");
    s
}
