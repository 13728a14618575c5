//! Progress while a campaign runs: on a terminal one live line (done/total, p50/p99 of
//! successes so far, failures); otherwise (pipe, file, `CI=true`) plain lines at intervals.
//! Display only: the bundle is computed from the samples, never from this.

use std::io::Write;
use truecold_proof::report::ms;
use truecold_proof::stats::percentile_sorted;
use truecold_proto::measure::now_ns;

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Redraw one line in place (`\r`).
    Live,
    /// A full line every so many samples.
    Plain,
}

impl Style {
    /// Live on a terminal stderr unless `CI` is set to anything but `false`/`0`.
    pub fn detect() -> Style {
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

/// Live statistics of a running campaign.
pub struct Progress<W: Write> {
    out: W,
    style: Style,
    label: String,
    total: u64,
    done: u64,
    failures: u64,
    sorted: Vec<u64>,
    last_draw_ns: u64,
    plain_every: u64,
}

/// Redraw interval of the live line.
const LIVE_EVERY_NS: u64 = 100_000_000;

impl<W: Write> Progress<W> {
    pub fn new(out: W, style: Style, label: &str, total: u64) -> Self {
        Progress {
            out,
            style,
            label: label.to_string(),
            total,
            done: 0,
            failures: 0,
            sorted: Vec::new(),
            last_draw_ns: 0,
            // About twenty plain lines per campaign.
            plain_every: (total / 20).max(1),
        }
    }

    /// Counts one finished sample.
    pub fn record(&mut self, ok: bool, latency_ns: Option<u64>) {
        self.done += 1;
        match (ok, latency_ns) {
            (true, Some(l)) => {
                let at = self.sorted.partition_point(|&x| x <= l);
                self.sorted.insert(at, l);
            }
            _ => self.failures += 1,
        }
        match self.style {
            Style::Live => {
                let now = now_ns();
                if now.saturating_sub(self.last_draw_ns) >= LIVE_EVERY_NS || self.done == self.total
                {
                    self.last_draw_ns = now;
                    let line = self.line();
                    let _ = write!(self.out, "\r\x1b[2K{line}");
                    let _ = self.out.flush();
                }
            }
            Style::Plain => {
                if self.done % self.plain_every == 0 || self.done == self.total {
                    let line = self.line();
                    let _ = writeln!(self.out, "{line}");
                }
            }
        }
    }

    /// The status line.
    pub fn line(&self) -> String {
        let p = |q| {
            percentile_sorted(&self.sorted, q, 100)
                .map(|v| format!("{} ms", ms(v)))
                .unwrap_or_else(|| "–".into())
        };
        format!(
            "[{}] {}/{} done, p50 {}, p99 {} (successes), {} failed",
            self.label,
            self.done,
            self.total,
            p(50),
            p(99),
            self.failures
        )
    }

    /// Ends the live line.
    pub fn finish(&mut self) {
        if self.style == Style::Live {
            let _ = writeln!(self.out);
        }
        let _ = self.out.flush();
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
    fn plain_lines_show_done_percentiles_and_failures() {
        let mut p = Progress::new(Vec::new(), Style::Plain, "probe", 4);
        p.record(true, Some(3_000_000));
        p.record(false, None);
        p.record(true, Some(1_000_000));
        p.record(true, Some(2_000_000));
        let text = String::from_utf8(p.into_inner()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[3],
            "[probe] 4/4 done, p50 2.000 ms, p99 3.000 ms (successes), 1 failed"
        );
        assert_eq!(
            lines[1],
            "[probe] 2/4 done, p50 3.000 ms, p99 3.000 ms (successes), 1 failed"
        );
    }

    #[test]
    fn live_line_redraws_in_place() {
        let mut p = Progress::new(Vec::new(), Style::Live, "x", 2);
        p.record(false, None);
        p.record(false, None);
        p.finish();
        let text = String::from_utf8(p.into_inner()).unwrap();
        assert!(text.starts_with("\r\x1b[2K[x] 1/2 done, p50 –"));
        assert!(text.ends_with("[x] 2/2 done, p50 –, p99 – (successes), 2 failed\n"));
    }
}
