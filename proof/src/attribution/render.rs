//! The attribution's files: the rows as [`CSV_FILE`], the timeline as [`SVG_FILE`].

use plotters::prelude::*;

use super::model::*;

/// [`CSV_FILE`]'s bytes (csv crate, `\n` line ends, every field as written).
pub fn csv_bytes(a: &Attribution) -> Vec<u8> {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
    // Writing to a Vec cannot fail; an error would only drop a record, which verify catches.
    let _ = w.write_record(CSV_HEADER);
    for r in &a.rows {
        let c = r.counters;
        let _ = w.write_record([
            r.lane.as_str().to_string(),
            r.name.clone(),
            r.start_ns.map(|x| x.to_string()).unwrap_or_default(),
            opt(r.dur_ns),
            opt(c.map(|c| c.exits.io_in)),
            opt(c.map(|c| c.exits.io_out)),
            opt(c.map(|c| c.exits.mmio)),
            opt(c.map(|c| c.exits.hlt)),
            opt(c.map(|c| c.exits.shutdown)),
            opt(c.map(|c| c.exits.other)),
            opt(c.map(|c| c.minflt)),
            opt(c.map(|c| c.majflt)),
            r.note.clone(),
        ]);
    }
    w.into_inner().unwrap_or_default()
}

const W: u32 = 1000;

const ROW_H: u32 = 18;

const TOP: u32 = 70;

/// Room for one axis's tick labels (above and below the bars).
const AXIS_H: u32 = 20;

const LEFT: u32 = 300;

const FONT: &str = "monospace";

/// [`SVG_FILE`]: a bootgraph-like timeline, one bar per host stage, guest phase and top
/// initcall, on the host clock from the request (0) to the end of the last bar, widths to
/// scale, in milliseconds: an axis with round ticks ([`crate::plot::ticks`]) above and
/// below the bars and a line marking strict-ready (the shown launch's request →
/// strict-ready). `clock` is the clock's description (`Clock::describe`).
pub fn svg(a: &Attribution, clock: &str) -> String {
    let bars: Vec<&Row> = a
        .rows
        .iter()
        .filter(|r| matches!(r.lane, Lane::Host | Lane::Guest | Lane::Initcall))
        .filter(|r| r.start_ns.is_some() && r.dur_ns.is_some())
        .collect();
    let total = a
        .rows
        .iter()
        .find(|r| r.name == "attribution_total")
        .and_then(|r| r.dur_ns)
        .unwrap_or(0);
    let last = bars
        .iter()
        .map(|r| i128::from(r.start_ns.unwrap_or(0)) + i128::from(r.dur_ns.unwrap_or(0)))
        .max()
        .unwrap_or(1)
        .max(i128::from(total))
        .max(1);
    // The axis ends on its last round tick, at or after the last bar's end.
    let ticks = crate::plot::ticks(last as f64 / 1e6, 8);
    let end_ms = ticks.last().copied().unwrap_or(1.0).max(f64::MIN_POSITIVE);
    let end = ((end_ms * 1e6) as i128).max(last);
    // With RIP samples: a line for the overhead, a strip per vCPU on the timeline, and the
    // flat profile below it (without them the drawing is what it always was).
    let strips = a.rip.as_ref().map_or(0, |r| r.strips.len()) as u32;
    let profile: Vec<&Row> = a
        .rows
        .iter()
        .filter(|r| r.lane == Lane::Rip && r.start_ns.is_some())
        .collect();
    let top = if a.rip.is_some() { TOP + 20 } else { TOP };
    let axis_y0 = top as i32;
    let bars_y0 = axis_y0 + AXIS_H as i32;
    let bars_y1 = bars_y0 + (ROW_H * (bars.len() as u32 + strips)) as i32;
    let profile_y0 = bars_y1 + 70;
    let h = top
        + AXIS_H * 2
        + ROW_H * (bars.len() as u32 + strips)
        + 30
        + if a.rip.is_some() {
            70 + ROW_H * profile.len() as u32
        } else {
            0
        };
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (W, h)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let style = (FONT, 13).into_font().color(&BLACK);
        let verdict = a
            .rows
            .iter()
            .find(|r| r.lane == Lane::Reconciliation)
            .map(|r| r.name.as_str())
            .unwrap_or("");
        let _ = root.draw(&Text::new(
            format!(
                "attribution: request -> strict-ready {} ms; {verdict}",
                crate::fmt::ms(total)
            ),
            (8, 8),
            style.clone(),
        ));
        let _ = root.draw(&Text::new(
            format!("clock: {clock}"),
            (8, 28),
            style.clone(),
        ));
        let _ = root.draw(&Text::new(
            "ms after the request (widths to scale); red line: strict-ready",
            (8, 48),
            style.clone(),
        ));
        if let Some(o) = a.rows.iter().find(|r| r.lane == Lane::Overhead) {
            let _ = root.draw(&Text::new(
                format!("sampling overhead: {}", o.note),
                (8, 68),
                (FONT, 11).into_font().color(&BLACK),
            ));
        }
        let span = (W - LEFT - 20) as i128;
        let x = |t: i128| -> i32 {
            let v = LEFT as i128 + (t.clamp(0, end) * span) / end;
            i32::try_from(v).unwrap_or(i32::MAX)
        };
        let grid = RGBColor(0xe0, 0xe0, 0xe0);
        for &t in &ticks {
            let px = x((t * 1e6) as i128);
            let _ = root.draw(&PathElement::new(
                vec![(px, bars_y0), (px, bars_y1)],
                grid.stroke_width(1),
            ));
            for (y, ty) in [(bars_y0, bars_y0 - 16), (bars_y1, bars_y1 + 4)] {
                let _ = root.draw(&PathElement::new(
                    vec![(px, y - 3), (px, y + 3)],
                    BLACK.stroke_width(1),
                ));
                let _ = root.draw(&Text::new(
                    crate::plot::tick_label(t),
                    (px, ty),
                    (FONT, 11).into_font().into_text_style(&root).pos(
                        plotters::style::text_anchor::Pos::new(
                            plotters::style::text_anchor::HPos::Center,
                            plotters::style::text_anchor::VPos::Top,
                        ),
                    ),
                ));
            }
        }
        for y in [bars_y0, bars_y1] {
            let _ = root.draw(&PathElement::new(
                vec![(x(0), y), (x(end), y)],
                BLACK.stroke_width(1),
            ));
        }
        for (i, r) in bars.iter().enumerate() {
            let y = bars_y0 + (ROW_H * i as u32) as i32;
            let s = i128::from(r.start_ns.unwrap_or(0));
            let e = s + i128::from(r.dur_ns.unwrap_or(0));
            let color = match r.lane {
                Lane::Host => RGBColor(0x2c, 0x3e, 0x50),
                Lane::Guest => RGBColor(0x27, 0xae, 0x60),
                _ => RGBColor(0xc0, 0x39, 0x2b),
            };
            let (x0, x1) = (x(s), x(e).max(x(s) + 1));
            let _ = root.draw(&Rectangle::new(
                [(x0, y + 2), (x1, y + ROW_H as i32 - 2)],
                color.filled(),
            ));
            let label: String = format!("{} {}", r.lane.as_str(), r.name)
                .chars()
                .take(38)
                .collect();
            let _ = root.draw(&Text::new(label, (4, y + 2), (FONT, 11).into_font()));
        }
        let sr = x(i128::from(total));
        let red = RGBColor(0xc0, 0x39, 0x2b);
        let _ = root.draw(&PathElement::new(
            vec![(sr, bars_y0 - 4), (sr, bars_y1 + 4)],
            red.stroke_width(2),
        ));
        let _ = root.draw(&Text::new(
            format!("strict-ready {} ms", crate::fmt::ms(total)),
            (sr.min((W - 170) as i32), bars_y1 + 20),
            (FONT, 12).into_font().color(&red),
        ));
        if let Some(rip) = &a.rip {
            let y_strips = bars_y0 + (ROW_H * bars.len() as u32) as i32;
            for (v, strip) in rip.strips.iter().enumerate() {
                let y = y_strips + (ROW_H * v as u32) as i32;
                let _ = root.draw(&Text::new(
                    format!("rip vcpu{v} by function"),
                    (4, y + 2),
                    (FONT, 11).into_font(),
                ));
                // At most one rectangle starts in each pixel column.
                let mut last: Option<(i32, i32, Key)> = None;
                let mut rects = Vec::new();
                for &(s, e, key) in strip {
                    let (x0, x1) = (x(i128::from(s)), x(i128::from(e)).max(x(i128::from(s)) + 1));
                    match last.as_mut() {
                        Some(l) if l.2 == key && l.1 >= x0 => l.1 = l.1.max(x1),
                        Some(l) if x1 <= l.1 => {}
                        Some(l) => {
                            let from = x0.max(l.1);
                            rects.push(*l);
                            last = Some((from, x1, key));
                        }
                        None => last = Some((x0, x1, key)),
                    }
                }
                rects.extend(last);
                for (x0, x1, key) in rects {
                    let _ = root.draw(&Rectangle::new(
                        [(x0, y + 2), (x1, y + ROW_H as i32 - 2)],
                        key_colour(key).filled(),
                    ));
                }
            }
            let _ = root.draw(&Text::new(
                "flat profile from RIP samples: sampled time (samples x period), ms; colours \
                 as in the strips",
                (8, profile_y0 - 24),
                style.clone(),
            ));
            let max = profile
                .iter()
                .filter_map(|r| r.dur_ns)
                .max()
                .unwrap_or(1)
                .max(1);
            let span = i128::from(W - LEFT - 80);
            for (i, r) in profile.iter().enumerate() {
                let y = profile_y0 + (ROW_H * i as u32) as i32;
                let d = r.dur_ns.unwrap_or(0);
                let len = i32::try_from(i128::from(d) * span / i128::from(max)).unwrap_or(0);
                let fname = r.name.split_once(' ').map_or("", |(_, f)| f);
                let key = rip
                    .legend
                    .iter()
                    .position(|n| n == fname)
                    .map(Key::Func)
                    .unwrap_or(match fname {
                        "[halted]" => Key::Halted,
                        "[waiting for start]" => Key::WaitingForStart,
                        "[no symbol]" => Key::NoSymbol,
                        _ => Key::Other,
                    });
                let x0 = LEFT as i32;
                let _ = root.draw(&Rectangle::new(
                    [(x0, y + 2), (x0 + len.max(1), y + ROW_H as i32 - 2)],
                    key_colour(key).filled(),
                ));
                let label: String = r.name.chars().take(38).collect();
                let _ = root.draw(&Text::new(label, (4, y + 2), (FONT, 11).into_font()));
                let _ = root.draw(&Text::new(
                    format!("{} ms", crate::fmt::ms(d)),
                    (x0 + len.max(1) + 6, y + 2),
                    (FONT, 11).into_font(),
                ));
            }
        }
        let _ = root.present();
    }
    out
}

/// A strip's colour: the legend's functions in a fixed palette, the rest in greys.
fn key_colour(k: Key) -> RGBColor {
    const PALETTE: [RGBColor; STRIP_COLOURS] = [
        RGBColor(0x1f, 0x77, 0xb4),
        RGBColor(0xff, 0x7f, 0x0e),
        RGBColor(0x2c, 0xa0, 0x2c),
        RGBColor(0xd6, 0x27, 0x28),
        RGBColor(0x94, 0x67, 0xbd),
        RGBColor(0x8c, 0x56, 0x4b),
        RGBColor(0xe3, 0x77, 0xc2),
        RGBColor(0xbc, 0xbd, 0x22),
        RGBColor(0x17, 0xbe, 0xcf),
        RGBColor(0x39, 0x3b, 0x79),
    ];
    match k {
        Key::Func(i) => PALETTE
            .get(i)
            .copied()
            .unwrap_or(RGBColor(0x7f, 0x7f, 0x7f)),
        Key::Other => RGBColor(0x7f, 0x7f, 0x7f),
        Key::NoSymbol => RGBColor(0x30, 0x30, 0x30),
        Key::Halted => RGBColor(0xd0, 0xd0, 0xd0),
        Key::WaitingForStart => RGBColor(0xf0, 0xe6, 0xc8),
    }
}
