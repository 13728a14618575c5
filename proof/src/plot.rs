//! The bundle's SVG plots, drawn with `plotters` (SVG backend): the latency CDF
//! (successes, and with failures at the deadline when any failed; p50 and p99 marked) over
//! its tail on a log scale (1 − F down to one launch), and the per-stage breakdown (p50
//! bar, p99 tick, successful samples only).
//!
//! **Why plotters, and how it stays byte-identical.** Bundles are checksummed and
//! `verify` regenerates the plots and compares bytes, so the same data must give the same
//! SVG on every host. `plotters` was tried first and does: with its default features off
//! (no `ttf`, no `ab_glyph`) it measures text with a fixed arithmetic estimate instead of
//! the host's fonts, and its SVG backend writes integer pixel coordinates, no timestamps
//! and no ids. Turning its `ttf` feature on would make layout depend on the installed
//! fonts; the committed bundles' regenerated plots (checked by `verify` everywhere)
//! would catch that.
//!
//! **Axes.** Ticks sit on round values: 1, 2 or 5 × 10^k milliseconds ([`ticks`],
//! [`log_ticks`]). The CDF's latency axis runs from the fastest success to just past the
//! slowest ([`ticks_between`]: not from 0); it is logarithmic when the successes' tail is
//! long ([`long_tail`]: p99 > 10 × p50 or max > 20 × p50), linear otherwise; the plot says
//! which.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::fmt::ms;
use crate::schema::{ResultJson, Sample};
use crate::stats::{ascending, percentile_sorted, with_failures, Summary};
use crate::summary::success_latencies;

const W: u32 = 800;
const H: u32 = 520;
/// Title block height (two lines).
const TITLE_H: u32 = 58;
const FONT: &str = "monospace";
/// First legend line of the CDF (under the title).
const LEGEND_Y: i32 = 62;
const DARK: RGBColor = RGBColor(0x2c, 0x3e, 0x50);
/// The p50/p99 markers.
const MARK: RGBColor = RGBColor(0x7f, 0x8c, 0x8d);
/// Height of the CDF's tail panel (under the CDF).
const TAIL_H: u32 = 300;
const RED: RGBColor = RGBColor(0xc0, 0x39, 0x2b);

/// The long-tail rule for the latency axis: p99 > 10 × p50 or max > 20 × p50 (nearest
/// rank, successes). Integer arithmetic.
pub fn long_tail(sorted: &[u64]) -> bool {
    let (Some(p50), Some(p99), Some(&max)) = (
        percentile_sorted(sorted, 50, 100),
        percentile_sorted(sorted, 99, 100),
        sorted.last(),
    ) else {
        return false;
    };
    let p50 = u128::from(p50);
    u128::from(p99) > 10 * p50 || u128::from(max) > 20 * p50
}

/// The 1-2-5 step (1, 2 or 5 × 10^k) that cuts `0..=hi` into at most `max` intervals.
fn step_125(hi: f64, max: usize) -> f64 {
    let raw = hi / max.max(1) as f64;
    let mut mag = 10f64.powi(raw.log10().floor() as i32);
    loop {
        for m in [1.0, 2.0, 5.0] {
            if m * mag >= raw {
                return m * mag;
            }
        }
        mag *= 10.0;
    }
}

/// Linear ticks from 0: multiples of one 1-2-5 step, at most `max + 1` of them, the last
/// ≥ `hi` (so the axis ends on a round value). `hi` in any unit, > 0.
pub fn ticks(hi: f64, max: usize) -> Vec<f64> {
    if !(hi > 0.0 && hi.is_finite()) {
        return vec![0.0, 1.0];
    }
    let step = step_125(hi, max);
    let n = (hi / step).ceil() as i64;
    (0..=n).map(|k| round_sig(k as f64 * step)).collect()
}

/// Linear ticks over `lo..=hi` (data units, `lo < hi`): multiples of one 1-2-5 step, the
/// first at or below `lo`, the last at or above `hi`, at most about `max + 1` of them. The
/// axis starts near the data, not at 0.
pub fn ticks_between(lo: f64, hi: f64, max: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite() && hi > lo && lo >= 0.0) {
        return ticks(hi.max(lo), max);
    }
    let step = step_125(hi - lo, max);
    let first = (lo / step).floor() as i64;
    let last = (hi / step).ceil() as i64;
    (first..=last.max(first + 1))
        .map(|k| round_sig(k as f64 * step))
        .collect()
}

/// Decade ticks (1, 10, 100 … %) from the decade at or below `lo` (> 0) up to 100.
fn decade_ticks(lo: f64) -> Vec<f64> {
    let mut k = if lo > 0.0 && lo.is_finite() {
        lo.log10().floor() as i32
    } else {
        0
    };
    k = k.min(1);
    (k..=2).map(|e| round_sig(10f64.powi(e))).collect()
}

/// Logarithmic ticks: every 1, 2 and 5 × 10^k from the largest at or below `lo` to the
/// smallest at or above `hi`. `0 < lo < hi`.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return vec![1.0, 10.0];
    }
    let mut out = Vec::new();
    let mut k = lo.log10().floor() as i32 - 1;
    loop {
        for m in [1.0, 2.0, 5.0] {
            let v = round_sig(m * 10f64.powi(k));
            if v <= lo * (1.0 + 1e-9) {
                out.clear();
                out.push(v);
            } else {
                out.push(v);
                if v >= hi * (1.0 - 1e-9) {
                    return out;
                }
            }
        }
        k += 1;
    }
}

/// Rounds to 12 significant digits (removes float noise from k·step and m·10^k).
fn round_sig(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let mag = 10f64.powi(11 - v.abs().log10().floor() as i32);
    (v * mag).round() / mag
}

/// A tick label: the value with as many decimals as it needs (at most 6).
pub fn tick_label(v: f64) -> String {
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// One axis: linear or logarithmic, with its ticks (in data units, e.g. ms) and a label
/// suffix. As a plotters coordinate its values are axis positions (log10 of the value on a
/// log axis), its key points are exactly the ticks, and it labels them itself.
struct Axis {
    log: bool,
    /// Data range shown, data units.
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
    suffix: &'static str,
}

impl Axis {
    /// An axis spanning exactly its ticks (first to last).
    fn new(log: bool, ticks: Vec<f64>, suffix: &'static str) -> Axis {
        Axis {
            log,
            lo: ticks.first().copied().unwrap_or(0.0),
            hi: ticks.last().copied().unwrap_or(1.0),
            ticks,
            suffix,
        }
    }
    /// Axis position of data value `v` (log10 on a log axis).
    fn pos(&self, v: f64) -> f64 {
        if self.log {
            v.max(1e-12).log10()
        } else {
            v
        }
    }
    fn bounds(&self) -> (f64, f64) {
        (self.pos(self.lo), self.pos(self.hi))
    }
}

impl Ranged for Axis {
    type FormatOption = plotters::coord::ranged1d::NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let (lo, hi) = self.bounds();
        let span = limit.1 - limit.0;
        if span == 0 || hi <= lo {
            return limit.0;
        }
        let frac = ((*value - lo) / (hi - lo)).clamp(-1.0, 2.0);
        limit.0 + (f64::from(span) * frac).round() as i32
    }

    /// The ticks as bold points; no light points (no minor grid).
    fn key_points<Hint: plotters::coord::ranged1d::KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            return Vec::new();
        }
        self.ticks.iter().map(|&t| self.pos(t)).collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        let (lo, hi) = self.bounds();
        lo..hi
    }
}

impl plotters::coord::ranged1d::ValueFormatter<f64> for Axis {
    fn format_ext(&self, p: &f64) -> String {
        let nearest = self.ticks.iter().min_by(|a, b| {
            (self.pos(**a) - p)
                .abs()
                .total_cmp(&(self.pos(**b) - p).abs())
        });
        nearest
            .map(|&t| format!("{}{}", tick_label(t), self.suffix))
            .unwrap_or_default()
    }
}

fn ns_to_ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

type PlotResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Two title lines, left-aligned, inside the title block.
fn title(root: &DrawingArea<SVGBackend, Shift>, lines: [&str; 2]) -> PlotResult<()> {
    root.draw(&Text::new(lines[0], (12, 6), (FONT, 20).into_font()))?;
    root.draw(&Text::new(lines[1], (12, 28), (FONT, 16).into_font()))?;
    Ok(())
}

/// The step-CDF points of ascending `sorted` on `axis`, y in percent; consecutive points
/// closer than 1/4096 of the axis are merged (the plot has fewer pixels than that).
/// A CDF chart below `top` px of titles: latency on `axis`, 0–100 % up, light grid.
fn cdf_chart<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    top: u32,
    axis: Axis,
    x_desc: &str,
) -> PlotResult<ChartContext<'a, SVGBackend<'b>, Cartesian2d<Axis, Axis>>> {
    let mut chart = ChartBuilder::on(root)
        .margin_top(top)
        .margin_right(30)
        .margin_left(10)
        .margin_bottom(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(axis, Axis::new(false, ticks(100.0, 5), "%"))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .label_style((FONT, 14))
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(0xe0, 0xe0, 0xe0))
        .draw()?;
    Ok(chart)
}

fn cdf_points(sorted: &[u64], axis: &Axis) -> Vec<(f64, f64)> {
    let n = sorted.len() as f64;
    let r = Ranged::range(axis);
    let span = (r.end - r.start).max(f64::MIN_POSITIVE);
    let q = |x: f64, y: f64| (((x - r.start) / span * 4096.0) as i64, (y * 40.96) as i64);
    step_points(
        sorted,
        |v| axis.pos(ns_to_ms(v)).clamp(r.start, r.end),
        |i| (i + 1) as f64 * 100.0 / n,
        0.0,
        q,
    )
}

/// The corners of a step curve through `sorted`: for sample `i` at `x(v)`, a vertical step
/// from the previous height (`y0` before the first) to `y(i)`, each corner kept only where
/// it moves the curve by at least one cell of `q`'s grid (so a long campaign's curve stays
/// small without changing its drawn shape).
fn step_points(
    sorted: &[u64],
    x: impl Fn(u64) -> f64,
    y: impl Fn(usize) -> f64,
    y0: f64,
    q: impl Fn(f64, f64) -> (i64, i64),
) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut last_q = None;
    let mut y_prev = y0;
    for (i, &v) in sorted.iter().enumerate() {
        let (x, y) = (x(v), y(i));
        for p in [(x, y_prev), (x, y)] {
            let k = q(p.0, p.1);
            if last_q != Some(k) {
                out.push(p);
                last_q = Some(k);
            }
        }
        y_prev = y;
    }
    out
}

fn error_svg(w: u32, h: u32, what: &str) -> String {
    let esc = crate::fmt::esc(what);
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\">\
         <text x=\"10\" y=\"20\">plot failed: {esc}</text></svg>\n"
    )
}

/// The latency CDF.
pub fn cdf_svg(result: &ResultJson, samples: &[Sample]) -> String {
    let mut out = String::new();
    match draw_cdf(&mut out, result, samples) {
        Ok(()) => out,
        Err(e) => error_svg(W, H, &e.to_string()),
    }
}

fn draw_cdf(out: &mut String, result: &ResultJson, samples: &[Sample]) -> PlotResult<()> {
    let ok = success_latencies(samples);
    let failed = samples.len() as u64 - ok.len() as u64;
    let deadline = result.contract.deadline_ns;
    let all = ascending(&with_failures(&ok, failed, deadline));
    let log = long_tail(&ok);
    // The axis covers the successes, from the fastest to the slowest plus a tenth of their
    // spread; values beyond it (failures at the deadline) are drawn at its right edge and
    // said so in the legend.
    let (lo_ns, hi_ns) = match (ok.first(), ok.last()) {
        (Some(&a), Some(&b)) => (a, b.saturating_add((b - a) / 10).max(b.saturating_add(1))),
        _ => (
            all.first().copied().unwrap_or(0),
            all.last().copied().unwrap_or(0).max(1),
        ),
    };
    let x_axis = || {
        Axis::new(
            log,
            if log {
                log_ticks(ns_to_ms(lo_ns.max(1)), ns_to_ms(hi_ns))
            } else {
                ticks_between(ns_to_ms(lo_ns), ns_to_ms(hi_ns), 8)
            },
            "",
        )
    };
    let axis = x_axis();
    let top_ms = axis.hi;
    let clipped = all.iter().filter(|&&v| ns_to_ms(v) > top_ms).count();
    let stats = Summary::of_sorted(&ok);
    let x_desc = if log {
        "latency, ms (log scale: long tail)"
    } else {
        "latency, ms"
    };
    {
        let root = SVGBackend::with_string(out, (W, H + TAIL_H)).into_drawing_area();
        root.fill(&WHITE)?;
        let (upper, lower) = root.split_vertically(H);
        title(
            &upper,
            [
                result.contract.kind.label(),
                &format!(
                    "latency CDF, request to strict-ready: {} attempts, {} ok",
                    samples.len(),
                    ok.len()
                ),
            ],
        )?;
        // The with-failures series only where it differs from the successes (a failure
        // exists): an identical series would hide under the other and still be in the legend.
        let mut legend: Vec<(String, RGBColor)> =
            vec![(format!("successes only, n={}", ok.len()), DARK)];
        if failed > 0 {
            legend.push((
                format!(
                    "with failures at the {} ms deadline (right-censored), n={}{}",
                    ms(deadline),
                    all.len(),
                    if clipped > 0 {
                        format!(", {clipped} drawn at the right edge")
                    } else {
                        String::new()
                    }
                ),
                RED,
            ));
        }
        if let Some(st) = &stats {
            legend.push((
                format!(
                    "p50 {} ms, p99 {} ms (successes; nearest rank)",
                    ms(st.p50),
                    ms(st.p99)
                ),
                MARK,
            ));
        }
        let legend_h = 18 * legend.len() as u32;
        let points_all = cdf_points(&all, &axis);
        let points_ok = cdf_points(&ok, &axis);
        let mut chart = cdf_chart(&upper, TITLE_H + 4 + legend_h, axis, x_desc)?;
        if failed > 0 {
            chart.draw_series(LineSeries::new(points_all, RED.stroke_width(2)))?;
        }
        if !ok.is_empty() {
            chart.draw_series(LineSeries::new(points_ok, DARK.stroke_width(2)))?;
        }
        if let Some(st) = &stats {
            for (name, v) in [("p50", st.p50), ("p99", st.p99)] {
                let x = x_axis().pos(ns_to_ms(v));
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(x, 0.0), (x, 100.0)],
                    MARK.stroke_width(1),
                )))?;
                let (px, py) = chart.backend_coord(&(x, if name == "p50" { 50.0 } else { 99.0 }));
                upper.draw(&Text::new(
                    format!("{name} {}", ms(v)),
                    (px + 4, py + 2),
                    (FONT, 12).into_font().color(&MARK),
                ))?;
            }
        }
        draw_legend(&upper, &legend)?;
        draw_tail(&lower, &ok, x_axis(), x_desc)?;
        root.present()?;
    }
    Ok(())
}

/// The legend under the title: drawn there, not in the plot, so it covers no data.
fn draw_legend(
    root: &DrawingArea<SVGBackend, Shift>,
    legend: &[(String, RGBColor)],
) -> PlotResult<()> {
    for (k, (text, colour)) in legend.iter().enumerate() {
        let y = LEGEND_Y + 18 * k as i32;
        root.draw(&PathElement::new(
            vec![(14, y), (38, y)],
            colour.stroke_width(2),
        ))?;
        root.draw(&Text::new(
            text.as_str(),
            (46, y - 7),
            (FONT, 14).into_font(),
        ))?;
    }
    Ok(())
}

/// The tail view under the CDF: the share of successes at least as slow as x
/// (1 − F just below x), on a logarithmic axis from 100 % down to one sample (1/n), so the
/// slowest launches of a long campaign each stay visible instead of sharing the CDF's top
/// pixel.
fn draw_tail(
    root: &DrawingArea<SVGBackend, Shift>,
    sorted: &[u64],
    axis: Axis,
    x_desc: &str,
) -> PlotResult<()> {
    root.draw(&Text::new(
        "tail: share of successes at least this slow (1 - F), logarithmic y, down to one launch",
        (12, 4),
        (FONT, 14).into_font(),
    ))?;
    let n = sorted.len().max(1);
    let y_axis = Axis::new(true, decade_ticks(100.0 / n as f64), "%");
    let (x_range, y_range) = (Ranged::range(&axis), Ranged::range(&y_axis));
    let q = |x: f64, y: f64| {
        let fx = (x - x_range.start) / (x_range.end - x_range.start).max(f64::MIN_POSITIVE);
        let fy = (y - y_range.start) / (y_range.end - y_range.start).max(f64::MIN_POSITIVE);
        ((fx * 4096.0) as i64, (fy * 4096.0) as i64)
    };
    let pts = step_points(
        sorted,
        |v| axis.pos(ns_to_ms(v)).clamp(x_range.start, x_range.end),
        |i| y_axis.pos((n - i) as f64 * 100.0 / n as f64),
        y_axis.pos(100.0),
        q,
    );
    let mut chart = ChartBuilder::on(root)
        .margin_top(24)
        .margin_right(30)
        .margin_left(10)
        .margin_bottom(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(axis, y_axis)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .label_style((FONT, 14))
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(0xe0, 0xe0, 0xe0))
        .draw()?;
    if !pts.is_empty() {
        chart.draw_series(LineSeries::new(pts, DARK.stroke_width(2)))?;
    }
    Ok(())
}

/// The per-stage breakdown: one bar per stage with data (p50), a tick at p99.
pub fn stages_svg(result: &ResultJson) -> String {
    let rows: Vec<(&str, u64, u64)> = result
        .summary
        .stages
        .iter()
        .filter_map(|st| st.successes.map(|s| (st.name.as_str(), s.p50, s.p99)))
        .collect();
    let row_h = 26u32;
    let h = TITLE_H + 70 + row_h * (rows.len() as u32).max(1);
    let mut out = String::new();
    match draw_stages(&mut out, result, &rows, h) {
        Ok(()) => out,
        Err(e) => error_svg(W, h, &e.to_string()),
    }
}

fn draw_stages(
    out: &mut String,
    result: &ResultJson,
    rows: &[(&str, u64, u64)],
    h: u32,
) -> PlotResult<()> {
    let xmax = rows.iter().map(|r| r.2).max().unwrap_or(0).max(1);
    let axis = Axis::new(false, ticks(ns_to_ms(xmax), 6), "");
    let right = Ranged::range(&axis).end;
    let n = rows.len().max(1) as f64;
    let rows_axis = Axis {
        lo: 0.0,
        hi: n,
        ticks: Vec::new(),
        ..Axis::new(false, Vec::new(), "")
    };
    let root = SVGBackend::with_string(out, (W, h)).into_drawing_area();
    root.fill(&WHITE)?;
    title(
        &root,
        [
            result.contract.kind.label(),
            "per-stage p50 (bar) and p99 (tick), successful samples, ms",
        ],
    )?;
    let mut chart = ChartBuilder::on(&root)
        .margin_top(TITLE_H)
        .margin_right(150)
        .margin_left(10)
        .margin_bottom(10)
        .x_label_area_size(40)
        .y_label_area_size(180)
        .build_cartesian_2d(axis, rows_axis)?;
    chart
        .configure_mesh()
        .x_desc("duration, ms")
        .label_style((FONT, 14))
        .disable_y_mesh()
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(0xe0, 0xe0, 0xe0))
        .draw()?;
    if rows.is_empty() {
        root.draw(&Text::new(
            "no successful sample has stage data",
            (200, (TITLE_H + 20) as i32),
            (FONT, 14).into_font(),
        ))?;
    }
    for (i, (name, p50, p99)) in rows.iter().enumerate() {
        // Row i from the top.
        let y0 = n - i as f64;
        let (bar_lo, bar_hi) = (y0 - 0.8, y0 - 0.2);
        chart.draw_series(std::iter::once(Rectangle::new(
            [(0.0, bar_lo), (ns_to_ms(*p50), bar_hi)],
            DARK.filled(),
        )))?;
        let t = ns_to_ms(*p99);
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(t, y0 - 0.95), (t, y0 - 0.05)],
            RED.stroke_width(2),
        )))?;
        let (lx, ly) = chart.backend_coord(&(0.0, y0 - 0.5));
        root.draw(&Text::new(
            name.to_string(),
            (lx - 8, ly),
            (FONT, 14).into_font().into_text_style(&root).pos(
                plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Right,
                    plotters::style::text_anchor::VPos::Center,
                ),
            ),
        ))?;
        let (rx, _) = chart.backend_coord(&(right, y0 - 0.5));
        root.draw(&Text::new(
            format!("{} / {}", ms(*p50), ms(*p99)),
            (rx + 10, ly),
            (FONT, 14).into_font().into_text_style(&root).pos(
                plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Left,
                    plotters::style::text_anchor::VPos::Center,
                ),
            ),
        ))?;
    }
    root.present()?;
    Ok(())
}

/// One colour per arm of a multi-arm CDF, in arm order (cycled past the fourth).
const ARM_COLOURS: [RGBColor; 6] = [
    DARK,
    RED,
    RGBColor(0x27, 0xae, 0x60),
    RGBColor(0x8e, 0x44, 0xad),
    RGBColor(0xd3, 0x54, 0x00),
    RGBColor(0x16, 0xa0, 0x85),
];

/// The CDFs of several arms' headlines (successes; any order) on one latency axis: the
/// multi-arm directory's `cdf.svg`. `heading` is the first title line, `clock` the second
/// (what the time axis measures). The axis is logarithmic when any arm has a long tail
/// ([`long_tail`]) or the arms' medians are more than 10× apart.
pub fn arms_cdf_svg(heading: &str, clock: &str, arms: &[(String, Vec<u64>)]) -> String {
    arms_cdf(heading, clock, arms, false)
}

/// [`arms_cdf_svg`] with a linear latency axis that runs from the fastest success to just past
/// the slowest ([`ticks_between`]), as the bundle's CDF does, not from 0 (where three curves
/// near each other would share the right edge): the engines page of `report.html`. A
/// directory's `cdf.svg` keeps its axis from 0 (`verify` holds it to its bytes).
pub fn arms_cdf_svg_from_data(heading: &str, clock: &str, arms: &[(String, Vec<u64>)]) -> String {
    arms_cdf(heading, clock, arms, true)
}

fn arms_cdf(heading: &str, clock: &str, arms: &[(String, Vec<u64>)], from_data: bool) -> String {
    let legend_h = 18 * arms.len() as u32;
    let h = H + legend_h;
    let mut out = String::new();
    match draw_arms_cdf(&mut out, heading, clock, arms, h, from_data) {
        Ok(()) => out,
        Err(e) => error_svg(W, h, &e.to_string()),
    }
}

fn draw_arms_cdf(
    out: &mut String,
    heading: &str,
    clock: &str,
    arms: &[(String, Vec<u64>)],
    h: u32,
    from_data: bool,
) -> PlotResult<()> {
    let sorted: Vec<(&str, Vec<u64>)> = arms
        .iter()
        .map(|(n, v)| (n.as_str(), ascending(v)))
        .collect();
    let lo_ns = sorted.iter().filter_map(|(_, v)| v.first()).min().copied();
    let hi_ns = sorted.iter().filter_map(|(_, v)| v.last()).max().copied();
    let medians: Vec<u64> = sorted
        .iter()
        .filter_map(|(_, v)| percentile_sorted(v, 50, 100))
        .collect();
    let spread = match (medians.iter().min(), medians.iter().max()) {
        (Some(&a), Some(&b)) => u128::from(b) > 10 * u128::from(a),
        _ => false,
    };
    let log = spread || sorted.iter().any(|(_, v)| long_tail(v));
    let hi_ns = hi_ns.map_or(1, |m| m.saturating_add(m / 10)).max(1);
    let axis = Axis::new(
        log,
        if log {
            log_ticks(ns_to_ms(lo_ns.unwrap_or(1).max(1)), ns_to_ms(hi_ns))
        } else if from_data {
            ticks_between(ns_to_ms(lo_ns.unwrap_or(0)), ns_to_ms(hi_ns), 8)
        } else {
            ticks(ns_to_ms(hi_ns), 8)
        },
        "",
    );
    let legend_h = 18 * arms.len() as u32;
    let root = SVGBackend::with_string(out, (W, h)).into_drawing_area();
    root.fill(&WHITE)?;
    title(&root, [heading, clock])?;
    let points: Vec<Vec<(f64, f64)>> = sorted.iter().map(|(_, v)| cdf_points(v, &axis)).collect();
    let mut chart = cdf_chart(
        &root,
        TITLE_H + 22 + legend_h,
        axis,
        if log {
            "request to strict-ready, ms (log scale)"
        } else {
            "request to strict-ready, ms"
        },
    )?;
    for (k, ((name, v), pts)) in sorted.iter().zip(points).enumerate() {
        let colour = ARM_COLOURS[k % ARM_COLOURS.len()];
        if !pts.is_empty() {
            chart.draw_series(LineSeries::new(pts, colour.stroke_width(2)))?;
        }
        let y = LEGEND_Y + 18 * k as i32;
        root.draw(&PathElement::new(
            vec![(14, y), (38, y)],
            colour.stroke_width(2),
        ))?;
        let text = format!("{name}: successes, n={}", v.len());
        root.draw(&Text::new(
            text.as_str(),
            (46, y - 7),
            (FONT, 14).into_font(),
        ))?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failed plot's message is HTML text as the page writes it ([`crate::fmt::esc`]):
    /// markup, quotes and control characters cannot leave the `<text>` element.
    #[test]
    fn a_failed_plot_escapes_its_message_as_the_page_does() {
        let what = "<script>\"a\"&'b'\n";
        let svg = error_svg(10, 20, what);
        assert_eq!(
            svg,
            format!(
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"20\">\
                 <text x=\"10\" y=\"20\">plot failed: {}</text></svg>\n",
                crate::fmt::esc(what)
            )
        );
        assert!(svg.contains("plot failed: &lt;script&gt;&quot;a&quot;&amp;&#39;b&#39;\\n<"));
    }

    /// Every tick is m × 10^k with m ∈ {1, 2, 5} (or 0).
    fn round_125(v: f64) -> bool {
        if v == 0.0 {
            return true;
        }
        let mag = 10f64.powi(v.log10().floor() as i32);
        let m = v / mag;
        [1.0, 2.0, 5.0, 10.0]
            .iter()
            .any(|c| (m - c).abs() < 1e-9 * c.max(1.0))
    }

    #[test]
    fn linear_ticks_step_by_one_two_five() {
        assert_eq!(
            ticks(264.6, 8),
            vec![0.0, 50.0, 100.0, 150.0, 200.0, 250.0, 300.0]
        );
        assert_eq!(ticks(1.0, 5), vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        assert_eq!(
            ticks(0.73, 8),
            vec![0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
        );
        assert_eq!(
            ticks(45_000.0, 6),
            vec![0.0, 10_000.0, 20_000.0, 30_000.0, 40_000.0, 50_000.0]
        );
        for hi in [0.013, 1.7, 9.99, 10.0, 33.3, 450.0, 1234.5, 98765.0] {
            let t = ticks(hi, 8);
            let step = t[1] - t[0];
            assert!(round_125(step), "{hi}: step {step}");
            assert!(t.len() <= 9 && *t.last().unwrap() >= hi, "{hi}: {t:?}");
            assert!(t
                .windows(2)
                .all(|w| ((w[1] - w[0]) - step).abs() < step * 1e-9));
        }
    }

    #[test]
    fn log_ticks_are_one_two_five_per_decade() {
        assert_eq!(
            log_ticks(1.3, 480.0),
            vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0]
        );
        assert_eq!(log_ticks(0.2, 0.9), vec![0.2, 0.5, 1.0]);
        for (lo, hi) in [(0.013, 7.0), (3.0, 3000.0), (150.0, 151.0)] {
            let t = log_ticks(lo, hi);
            assert!(t.iter().all(|&v| round_125(v)), "{t:?}");
            assert!(t[0] <= lo && *t.last().unwrap() >= hi, "{lo} {hi}: {t:?}");
        }
    }

    #[test]
    fn long_tail_rule() {
        let mut v: Vec<u64> = vec![100; 100];
        assert!(!long_tail(&v));
        // max > 20 × p50 alone.
        v[99] = 2001;
        assert!(long_tail(&v));
        v[99] = 2000;
        assert!(!long_tail(&v));
        // p99 > 10 × p50 (rank 99 of 100).
        v[98] = 1001;
        assert!(long_tail(&v));
        assert!(!long_tail(&[]));
    }
}
