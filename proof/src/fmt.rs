//! How a figure or a string from a directory reads in every text the verifier writes:
//! durations in milliseconds, memory sizes, optional figures, p-values, the clock's words,
//! and strings from a directory made inert for a terminal ([`escape_untrusted`]), for
//! Markdown ([`md_text`], [`md_code`]) and for HTML ([`esc`]). Display only: nothing here
//! computes a figure.

use truecold_proto::kinds::Clock;
use truecold_proto::limits::GuestMem;

/// Nanoseconds as milliseconds with three decimals, truncated (display only).
pub fn ms(ns: u64) -> String {
    format!("{}.{:03}", ns / 1_000_000, (ns / 1_000) % 1_000)
}

/// [`ms`], or `–` for a figure there is none of.
pub fn opt_ms(v: Option<u64>) -> String {
    v.map_or("–".into(), ms)
}

/// A stamp or duration in a verifier's message: `N ns`, or `none` when the row has none
/// (never Rust's `Some(N)`).
pub fn opt_ns(v: Option<u64>) -> String {
    v.map_or("none".into(), |n| format!("{n} ns"))
}

/// A signed difference of nanoseconds as [`ms`] with its sign (`+0.000` for none).
pub fn signed_ms(v: i64) -> String {
    let sign = if v < 0 { "-" } else { "+" };
    format!("{sign}{}", ms(v.unsigned_abs()))
}

/// A guest memory size given in bytes, as human text: [`GuestMem`]'s `N MiB` when it is one
/// a guest can have, else the bytes and why not (a bundle is untrusted: its size may be
/// anything).
pub fn mem_text(bytes: u64) -> String {
    match GuestMem::from_bytes(bytes) {
        Ok(m) => m.to_string(),
        Err(e) => format!("{bytes} bytes ({e})"),
    }
}

/// An optional figure as a verify message shows it: the value itself, or `none` (never
/// Rust's `Some(..)`/`None`).
pub fn or_none<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "none".into(), |v| v.to_string())
}

/// `s` with every character that could act on a terminal written as an escape: C0 and C1
/// controls and DEL (`\u{1b}`, `\r`, `\n` …) and the Unicode bidirectional and line/paragraph
/// separator controls. Everything else, including non-ASCII text, is kept.
pub fn escape_untrusted(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let bidi = matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        );
        if c.is_control() || bidi {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `s` as HTML text: control and bidirectional characters written as escapes
/// ([`escape_untrusted`]), then `&`, `<`, `>`, `"` and `'` as character references. Safe in
/// element content and in a quoted attribute.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in escape_untrusted(s).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A p-value for people: three significant digits; below f64's range, "< 1e-300".
pub fn p_text(p: f64) -> String {
    if p < 1e-300 {
        "< 1e-300".into()
    } else {
        format!("{p:.2e}")
    }
}

/// What a duration on the virtual clock is (every README of a virtual-clock bundle says it).
pub const VIRTUAL_CLOCK_MEANS: &str =
    "a reproducible cost model of the boot path, not a hardware latency";

/// The clock as one plot caption line (short enough for a plot's width; READMEs use
/// [`Clock::describe`] and [`VIRTUAL_CLOCK_MEANS`] in full).
pub fn clock_caption(c: Clock) -> &'static str {
    match c {
        Clock::Wall => "clock: wall (CLOCK_MONOTONIC on the host)",
        Clock::Virtual => "clock: virtual (QEMU icount): a cost model, not a hardware latency",
    }
}

/// A string the publisher chose, as inline Markdown text that renders as itself: every
/// character that could open Markdown or HTML structure (`\`, `*`, `[`, `]`, `<`, `>`, `&`,
/// `|`, `~`, `$`, `_` where it is not inside a word, and a backtick that closes no code
/// span) is backslash-escaped; a code span (a run of backticks up to the next run of as
/// many) is kept as it is, its content rendered literally; control and bidirectional
/// characters are written as escapes ([`escape_untrusted`]'s spelling), so the text stays
/// on its one line. Text without any of them is unchanged.
pub fn md_text(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let run_at = |i: usize| chars[i..].iter().take_while(|&&c| c == '`').count();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '`' {
            let n = run_at(i);
            // The closing run: the next run of exactly `n` backticks.
            let mut j = i + n;
            let close = loop {
                if j >= chars.len() {
                    break None;
                }
                if chars[j] == '`' {
                    let m = run_at(j);
                    if m == n {
                        break Some(j);
                    }
                    j += m;
                } else {
                    j += 1;
                }
            };
            match close {
                Some(j) => {
                    let span: String = chars[i..j + n].iter().collect();
                    out.push_str(&escape_untrusted(&span));
                    i = j + n;
                }
                None => {
                    for _ in 0..n {
                        out.push_str("\\`");
                    }
                    i += n;
                }
            }
            continue;
        }
        let word = |j: Option<usize>| {
            j.and_then(|j| chars.get(j))
                .is_some_and(|c| c.is_alphanumeric())
        };
        let special = match c {
            '\\' | '*' | '[' | ']' | '<' | '>' | '&' | '|' | '~' | '$' => true,
            '_' => !(word(i.checked_sub(1)) && word(Some(i + 1))),
            _ => false,
        };
        if special {
            out.push('\\');
            out.push(c);
        } else {
            out.push_str(&escape_untrusted(c.encode_utf8(&mut [0u8; 4])));
        }
        i += 1;
    }
    out
}

/// A string the publisher chose, as one Markdown code span (rendered literally, HTML
/// included): fenced by one backtick more than its longest run of backticks (one when it has
/// none), padded with a space where it begins or ends with a backtick; control and
/// bidirectional characters written as escapes. A string without backticks or control
/// characters is `` `s` ``.
pub fn md_code(s: &str) -> String {
    let s = escape_untrusted(s);
    let mut longest = 0usize;
    let mut run = 0usize;
    for c in s.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{s}{pad}{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_as_numbers_or_a_word_never_as_options() {
        assert_eq!(opt_ns(Some(93_042_722)), "93042722 ns");
        assert_eq!(opt_ns(None), "none");
        assert_eq!(opt_ms(Some(93_042_722)), "93.042");
        assert_eq!(opt_ms(None), "–");
        assert_eq!(
            (signed_ms(-1_500_000), signed_ms(0)),
            ("-1.500".into(), "+0.000".into())
        );
    }

    #[test]
    fn publisher_text_is_inert_and_plain_text_is_unchanged() {
        assert_eq!(
            md_text("Intel(R) Xeon(R) Processor"),
            "Intel(R) Xeon(R) Processor"
        );
        assert_eq!(
            md_text("forced by TRUECOLD_HOST_KIND"),
            "forced by TRUECOLD_HOST_KIND"
        );
        assert_eq!(
            md_text("<b> **x** [l](u) _a_ & `c<b>` ``d` e"),
            r"\<b\> \*\*x\*\* \[l\](u) \_a\_ \& `c<b>` \`\`d\` e"
        );
        assert_eq!(md_text("a\n\n# b"), r"a\n\n# b");
        assert_eq!(md_text("`x\n\n# y`"), r"`x\n\n# y`");
        assert_eq!(
            md_text("boots bzImage: `truecold run` has no flag"),
            "boots bzImage: `truecold run` has no flag"
        );
        assert_eq!(md_code("a b"), "`a b`");
        assert_eq!(md_code("a`b"), "``a`b``");
        assert_eq!(md_code("`x"), "`` `x ``");
        assert_eq!(md_code("a\n\n# b"), r"`a\n\n# b`");
    }
}
