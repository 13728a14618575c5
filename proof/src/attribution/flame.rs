//! Flame graphs of the folded stacks ([`super::profile`]), drawn by the `inferno` crate (the
//! Rust port of flamegraph.pl): one launch's, and a differential one of two sides.
//!
//! Deterministic: frames coloured by a hash of their name (`deterministic`), the stacks
//! sorted; the same stacks give the same bytes, so `verify` recomputes the SVG from the
//! samples like every generated file. inferno's own script for zooming and search stays in
//! the SVG (a browser runs it when the file is opened by itself; `report.html` shows the SVG
//! as an image, which runs no script).

use std::collections::{BTreeMap, BTreeSet};

use inferno::flamegraph::{self, Options};

use super::model::Profile;

/// The width of the drawings, px.
const WIDTH: usize = 1200;

fn options(title: &str, subtitle: String) -> Options<'static> {
    let mut o = Options::default();
    o.title = title.to_string();
    o.subtitle = Some(subtitle);
    o.count_name = "ns".to_string();
    o.deterministic = true;
    o.image_width = Some(WIDTH);
    o
}

/// Renders `lines` (already `stack count…` lines); an error of inferno (none is expected of
/// well-formed lines) leaves a drawing that says so.
fn render(mut o: Options<'_>, lines: &[String]) -> String {
    let mut out = Vec::new();
    match flamegraph::from_lines(&mut o, lines.iter().map(String::as_str), &mut out) {
        Ok(()) => String::from_utf8_lossy(&out).into_owned(),
        Err(e) => format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"40\">\
             <text x=\"8\" y=\"20\">no flame graph: {}</text></svg>\n",
            crate::fmt::esc(&e.to_string())
        ),
    }
}

/// The flame graph of one launch (`what`: which launch, the subtitle's words).
pub fn flame_svg(p: &Profile, what: &str) -> String {
    let lines: Vec<String> = p.stacks.iter().map(|(s, n)| format!("{s} {n}")).collect();
    let kind = if p.with_stacks {
        "call stacks (frame pointers)"
    } else {
        "flat: leaf functions (no frame pointers)"
    };
    let mut o = options(
        "request -> strict-ready: host stages and guest samples on one clock",
        format!("{what}; {} ms; {kind}", crate::fmt::ms(p.total)),
    );
    o.notes = "widths: ns of the boot; each sampling period shared by the vCPUs running guest \
               code in it"
        .to_string();
    render(o, &lines)
}

/// Per stack, the mean ns over profiles (floor; a stack missing from a profile counts 0).
pub fn mean_stacks(profiles: &[Profile]) -> BTreeMap<String, u64> {
    let mut sum: BTreeMap<String, u128> = BTreeMap::new();
    for p in profiles {
        for (s, n) in &p.stacks {
            *sum.entry(s.clone()).or_insert(0) += u128::from(*n);
        }
    }
    let k = profiles.len().max(1) as u128;
    sum.into_iter()
        .map(|(s, n)| (s, u64::try_from(n / k).unwrap_or(u64::MAX)))
        .collect()
}

/// The differential flame graph of B against A (mean stacks of each side): the frames as
/// B has them, red where B spent more than A, blue where less (flamegraph.pl's differential
/// colouring).
pub fn differential_svg(
    a: &BTreeMap<String, u64>,
    b: &BTreeMap<String, u64>,
    what: &str,
) -> String {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let lines: Vec<String> = keys
        .into_iter()
        .map(|k| {
            format!(
                "{k} {} {}",
                a.get(k).copied().unwrap_or(0),
                b.get(k).copied().unwrap_or(0)
            )
        })
        .collect();
    render(
        options(
            "differential profile: B against A (red: more time in B, blue: less)",
            format!("{what}; widths: B's mean ns of the boot per stack"),
        ),
        &lines,
    )
}
