//! Progress while a campaign runs, through `indicatif`: on a terminal a live bar (done/total,
//! rate, ETA, p50/p99 of the successes so far, failures); otherwise (pipe, file, `CI` set)
//! plain lines with the same figures, one each 10 % of the campaign (or after 10 s without
//! one), and none with `--quiet`. No rate or ETA is shown before the first launch finished.
//! Display only: the bundle is computed from the samples, never from this. The percentiles
//! are `truecold-proof`'s one definition (nearest rank, [`nearest_rank_index`]), the same as
//! the bundle's, of the latencies floored to three significant digits and shown to those
//! digits (`p50 2.05 ms`): exact as shown, from one count per such value ([`Running`]), so
//! the display's memory is bounded (at most 900 counts per decade) whatever the campaign's
//! length.

use indicatif::{HumanDuration, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::BTreeMap;
use std::io::Write;
use truecold_proof::stats::nearest_rank_index;
#[cfg(test)]
use truecold_proof::stats::{ascending, percentile_sorted};

/// `v` floored to three significant digits (`2_051_999` → `2_050_000`).
pub fn floor_3_digits(v: u64) -> u64 {
    let mut unit = 1u64;
    while v / unit >= 1000 {
        unit *= 10;
    }
    v / unit * unit
}

/// `ns` (floored to three significant digits) in ms, to those digits: `2.05 ms`,
/// `41.2 ms`, `0.950 ms`, `412 ms`.
pub fn ms_3_digits(ns: u64) -> String {
    let v = floor_3_digits(ns);
    // Decimals after the ms point that three significant digits reach.
    let decimals: u32 = match v {
        x if x >= 100_000_000 => 0,
        x if x >= 10_000_000 => 1,
        x if x >= 1_000_000 => 2,
        x if x >= 100_000 => 3,
        x if x >= 10_000 => 4,
        x if x >= 1_000 => 5,
        _ => 6,
    };
    let units = v / 10u64.pow(6 - decimals);
    let scale = 10u64.pow(decimals);
    if decimals == 0 {
        format!("{units} ms")
    } else {
        format!(
            "{}.{:0w$} ms",
            units / scale,
            units % scale,
            w = decimals as usize
        )
    }
}

/// Latencies counted per value floored to three significant digits: the nearest-rank
/// percentiles of the floored values, exact, in memory bounded by the number of distinct
/// floored values (at most 900 per decade of ns), never by the number of launches.
#[derive(Clone, Debug, Default)]
pub struct Running {
    counts: BTreeMap<u64, u64>,
    n: u64,
}

impl Running {
    /// Counts one value.
    pub fn add(&mut self, v: u64) {
        *self.counts.entry(floor_3_digits(v)).or_insert(0) += 1;
        self.n += 1;
    }

    /// Values counted.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Whether none was counted.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The nearest-rank `num/den` percentile of the floored values (the rank is
    /// `truecold_proof::stats::nearest_rank_index`, the one definition); `None` when empty.
    pub fn percentile(&self, num: u64, den: u64) -> Option<u64> {
        let idx =
            u64::try_from(nearest_rank_index(usize::try_from(self.n).ok()?, num, den)?).ok()?;
        let mut seen = 0u64;
        for (&v, &c) in &self.counts {
            seen = seen.saturating_add(c);
            if seen > idx {
                return Some(v);
            }
        }
        None
    }
}

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// An `indicatif` bar on stderr, redrawn in place.
    Live,
    /// A full line every so many samples, on the given writer.
    Plain,
    /// Nothing (`--quiet`).
    Hidden,
}

impl Style {
    /// Hidden with `--quiet` ([`crate::terminal::output::quiet`]); else live on a terminal stderr
    /// unless `CI` is set to anything but `false`/`0`; else plain.
    pub fn detect() -> Style {
        if crate::terminal::output::quiet() {
            return Style::Hidden;
        }
        let ci = std::env::var("CI")
            .map(|v| !v.is_empty() && v != "false" && v != "0")
            .unwrap_or(false);
        // SAFETY: isatty only inspects the file descriptor.
        let tty = unsafe { libc::isatty(libc::STDERR_FILENO) } == 1;
        if tty && !ci {
            Style::Live
        } else {
            Style::Plain
        }
    }
}

/// The longest a plain display stays silent while launches finish.
pub const PLAIN_AT_LEAST: std::time::Duration = std::time::Duration::from_secs(10);

/// The live bar's layout: label, bar, done/total, then [`Progress::figures`] as its message.
pub const BAR_TEMPLATE: &str = "[{prefix}] {bar:30} {pos}/{len} · {msg}";

/// Live statistics of a running campaign.
pub struct Progress<W: Write> {
    /// Plain lines go here; the live bar draws on stderr.
    out: W,
    style: Style,
    label: String,
    total: u64,
    done: u64,
    failures: u64,
    /// Successes' latencies, counted ([`Running`]).
    sorted: Running,
    plain_every: u64,
    /// When the last plain line was written, and the longest silence between two
    /// ([`PLAIN_AT_LEAST`]).
    last_line: std::time::Instant,
    at_least: std::time::Duration,
    /// What the caller adds (a tune: the current arm and its running effect).
    note: String,
    /// Drawn on stderr (live) or hidden (plain); its estimator gives the rate and ETA of both.
    bar: ProgressBar,
}

impl<W: Write> Progress<W> {
    pub fn new(out: W, style: Style, label: &str, total: u64) -> Self {
        let target = match style {
            Style::Live => ProgressDrawTarget::stderr(),
            Style::Plain | Style::Hidden => ProgressDrawTarget::hidden(),
        };
        let bar = ProgressBar::with_draw_target(Some(total), target);
        // The template is a constant (tested below); the default bar is only a fallback.
        bar.set_style(
            ProgressStyle::with_template(BAR_TEMPLATE)
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_prefix(label.to_string());
        let p = Progress {
            out,
            style,
            label: label.to_string(),
            total,
            done: 0,
            failures: 0,
            sorted: Running::default(),
            // About ten plain lines per campaign.
            plain_every: (total / 10).max(1),
            last_line: std::time::Instant::now(),
            at_least: PLAIN_AT_LEAST,
            note: String::new(),
            bar,
        };
        p.bar.set_message(p.figures());
        p
    }

    /// Sets the note shown after the figures (empty: none).
    pub fn set_note(&mut self, note: String) {
        self.note = note;
        self.bar.set_message(self.figures());
    }

    /// Counts one finished sample.
    pub fn record(&mut self, ok: bool, latency_ns: Option<u64>) {
        self.done += 1;
        match (ok, latency_ns) {
            (true, Some(l)) => self.sorted.add(l),
            _ => self.failures += 1,
        }
        self.bar.inc(1);
        self.bar.set_message(self.figures());
        if self.style == Style::Plain
            && (self.done % self.plain_every == 0
                || self.done == self.total
                || self.last_line.elapsed() >= self.at_least)
        {
            let line = self.line();
            let _ = writeln!(self.out, "{line}");
            self.last_line = std::time::Instant::now();
        }
    }

    /// Successes' p50 and p99 (three significant digits) and the failure count: `p50
    /// 2.00 ms, p99 3.00 ms (successes), 1 failed`.
    pub fn stats(&self) -> String {
        let p = |q| {
            self.sorted
                .percentile(q, 100)
                .map(ms_3_digits)
                .unwrap_or_else(|| "–".into())
        };
        format!(
            "p50 {}, p99 {} (successes), {} failed",
            p(50),
            p(99),
            self.failures
        )
    }

    /// Rate, ETA (`indicatif`'s estimates) and [`Progress::stats`]: `4.9/s, ETA 3 minutes,
    /// p50 …`.
    /// Before the first launch finished: `waiting for the first launch` (no rate or ETA yet).
    pub fn figures(&self) -> String {
        let mut s = if self.done == 0 {
            "waiting for the first launch".to_string()
        } else {
            format!(
                "{:.1}/s, ETA {:#}, {}",
                self.bar.per_sec(),
                HumanDuration(self.bar.eta()),
                self.stats()
            )
        };
        if !self.note.is_empty() {
            s.push_str(" · ");
            s.push_str(&self.note);
        }
        s
    }

    /// The plain status line: `[label] done/total done, ` and [`Progress::figures`].
    pub fn line(&self) -> String {
        format!(
            "[{}] {}/{} done, {}",
            self.label,
            self.done,
            self.total,
            self.figures()
        )
    }

    /// Ends the display: the live bar stays on screen at the count actually reached, with
    /// its final figures (a campaign stopped early, by Ctrl-C or the fail-fast rule, shows
    /// `10/30`, never a full bar, and no ETA).
    pub fn finish(&mut self) {
        if self.done < self.total {
            self.bar.set_message(self.stopped_figures());
        }
        if self.style == Style::Live {
            // `abandon`, not `finish`: indicatif's `finish` moves the bar to its length.
            self.bar.abandon();
        }
        let _ = self.out.flush();
    }

    /// The figures of a display that ends before its total: the rate and the statistics,
    /// `stopped` where the ETA was.
    fn stopped_figures(&self) -> String {
        let mut s = if self.done == 0 {
            "stopped before the first launch finished".to_string()
        } else {
            format!(
                "{:.1}/s, stopped at {}/{}, {}",
                self.bar.per_sec(),
                self.done,
                self.total,
                self.stats()
            )
        };
        if !self.note.is_empty() {
            s.push_str(" · ");
            s.push_str(&self.note);
        }
        s
    }

    /// The writer (tests).
    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_template_parses() {
        assert!(ProgressStyle::with_template(BAR_TEMPLATE).is_ok());
    }

    #[test]
    fn plain_lines_show_done_rate_eta_percentiles_and_failures() {
        let mut p = Progress::new(Vec::new(), Style::Plain, "probe", 4);
        p.record(true, Some(3_000_000));
        p.record(false, None);
        p.record(true, Some(1_000_000));
        p.record(true, Some(2_000_000));
        let text = String::from_utf8(p.into_inner()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[3].starts_with("[probe] 4/4 done, "), "{}", lines[3]);
        assert!(lines[3].contains("/s, ETA "), "{}", lines[3]);
        assert!(
            lines[3].ends_with(", p50 2.00 ms, p99 3.00 ms (successes), 1 failed"),
            "{}",
            lines[3]
        );
        assert!(lines[1].starts_with("[probe] 2/4 done, "), "{}", lines[1]);
        assert!(
            lines[1].ends_with(", p50 3.00 ms, p99 3.00 ms (successes), 1 failed"),
            "{}",
            lines[1]
        );
    }

    /// A plain display writes a line each 10 % of the campaign (the clock's line is left
    /// out: `at_least` is the longest silence, here never reached), and nothing before the
    /// first launch finished says a rate or an ETA.
    #[test]
    fn plain_lines_each_ten_percent_and_no_rate_before_the_first_launch() {
        let mut p = Progress::new(Vec::new(), Style::Plain, "probe", 50);
        p.at_least = std::time::Duration::MAX;
        let first = p.figures();
        assert_eq!(first, "waiting for the first launch");
        assert_eq!(p.bar.message(), first);
        for _ in 0..50 {
            p.record(true, Some(1_000_000));
        }
        let text = String::from_utf8(p.into_inner()).unwrap();
        let done: Vec<&str> = text
            .lines()
            .map(|l| l.split(' ').nth(1).unwrap_or(""))
            .collect();
        assert_eq!(
            done,
            [
                "5/50", "10/50", "15/50", "20/50", "25/50", "30/50", "35/50", "40/50", "45/50",
                "50/50"
            ],
            "{text}"
        );
        // The clock's rule: with no silence allowed, every launch writes its line.
        let mut p = Progress::new(Vec::new(), Style::Plain, "probe", 50);
        p.at_least = std::time::Duration::ZERO;
        for _ in 0..3 {
            p.record(false, None);
        }
        assert_eq!(
            String::from_utf8(p.into_inner()).unwrap().lines().count(),
            3
        );
    }

    /// `--quiet`: the hidden display writes nothing anywhere.
    #[test]
    fn a_hidden_display_writes_nothing() {
        let mut p = Progress::new(Vec::new(), Style::Hidden, "probe", 3);
        for _ in 0..3 {
            p.record(true, Some(1_000_000));
        }
        p.finish();
        assert!(p.into_inner().is_empty());
    }

    #[test]
    fn percentiles_are_the_bundles_definition() {
        let mut p = Progress::new(Vec::new(), Style::Plain, "x", 200);
        let lat: Vec<u64> = (1..=200u64).rev().map(|i| i * 1_000_000).collect();
        for &l in &lat {
            p.record(true, Some(l));
        }
        let sorted = ascending(&lat);
        let want = |q| ms_3_digits(percentile_sorted(&sorted, q, 100).unwrap());
        assert_eq!(
            p.stats(),
            format!("p50 {}, p99 {} (successes), 0 failed", want(50), want(99))
        );
    }

    /// The counts give the nearest-rank percentile of the floored values, for every rank,
    /// and three significant digits are shown as such.
    #[test]
    fn running_counts_are_the_percentiles_of_the_floored_values() {
        let mut r = Running::default();
        let mut floored = Vec::new();
        for i in 0..5_000u64 {
            let v = 900_000 + (i * 7919) % 2_100_000 + i % 13;
            r.add(v);
            floored.push(floor_3_digits(v));
        }
        let floored = ascending(&floored);
        for q in 0..=100 {
            assert_eq!(
                r.percentile(q, 100),
                percentile_sorted(&floored, q, 100),
                "p{q}"
            );
        }
        assert_eq!(r.len(), 5_000);
        // Bounded: 100 values of 0.900–0.999 ms (1 µs apart), 200 of 1.00–2.99 ms, 3.00 ms.
        assert!(r.counts.len() <= 301, "{}", r.counts.len());
        assert_eq!(Running::default().percentile(50, 100), None);
        assert_eq!(floor_3_digits(2_051_999), 2_050_000);
        assert_eq!(floor_3_digits(999), 999);
        for (ns, shown) in [
            (2_051_999, "2.05 ms"),
            (41_299_000, "41.2 ms"),
            (950_400, "0.950 ms"),
            (412_345_678, "412 ms"),
            (4_123_456_789, "4120 ms"),
            (12_345, "0.0123 ms"),
            (7, "0.000007 ms"),
        ] {
            assert_eq!(ms_3_digits(ns), shown, "{ns}");
        }
    }

    #[test]
    fn live_bar_advances_and_carries_the_statistics() {
        let mut p = Progress::new(Vec::new(), Style::Live, "x", 2);
        p.bar.set_draw_target(ProgressDrawTarget::hidden());
        p.record(false, None);
        assert_eq!(p.bar.position(), 1);
        assert_eq!(p.bar.length(), Some(2));
        let m = p.bar.message();
        assert!(m.contains("/s, ETA "), "{m}");
        assert!(m.ends_with(", p50 –, p99 – (successes), 1 failed"), "{m}");
        p.record(true, Some(5_000_000));
        p.finish();
        assert!(p.bar.is_finished());
        let m = p.bar.message();
        assert!(
            m.ends_with(", p50 5.00 ms, p99 5.00 ms (successes), 1 failed"),
            "{m}"
        );
        // Live output goes to the bar, never to the plain writer.
        assert!(p.into_inner().is_empty());
    }

    /// A campaign stopped early (Ctrl-C after 10 of 30): the bar ends at 10/30, not full,
    /// and its message says where it stopped instead of an ETA.
    #[test]
    fn a_stopped_display_keeps_the_count_reached() {
        let mut p = Progress::new(Vec::new(), Style::Live, "x", 30);
        p.bar.set_draw_target(ProgressDrawTarget::hidden());
        for _ in 0..10 {
            p.record(true, Some(2_000_000));
        }
        p.finish();
        assert!(p.bar.is_finished());
        assert_eq!(p.bar.position(), 10);
        assert_eq!(p.bar.length(), Some(30));
        let m = p.bar.message();
        assert!(m.contains("stopped at 10/30"), "{m}");
        assert!(!m.contains("ETA"), "{m}");
        // A complete campaign ends full, its message as it was.
        let mut p = Progress::new(Vec::new(), Style::Live, "x", 2);
        p.bar.set_draw_target(ProgressDrawTarget::hidden());
        p.record(true, Some(2_000_000));
        p.record(true, Some(2_000_000));
        p.finish();
        assert_eq!(p.bar.position(), 2);
        assert!(p.bar.message().contains("ETA"), "{}", p.bar.message());
    }
}
