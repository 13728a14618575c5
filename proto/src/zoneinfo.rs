//! `/proc/zoneinfo`: the kernel's zones, of which the zone rule
//! ([`crate::layout::check_zones`]) needs two sums — `present` (pages the kernel put in the
//! zone) and `managed` (pages of those it handed to its page allocator) — over every zone
//! of every node. The guest reads the file; this parser is pure, bounded ([`MAX_BYTES`],
//! [`MAX_ZONES`]) and total: any text gives a [`ZoneTotals`] or a typed [`ZoneinfoError`],
//! never a panic.
//!
//! The format (Linux `mm/vmstat.c` `zoneinfo_show_print`, every zone of every online node,
//! empty ones included): a line `Node N, zone NAME` opens a zone's block; inside it, among
//! other lines, one `present N` and one `managed N` (numbers of pages, the name the first
//! word of the line). Other lines (the per-node `nr_*` stats, watermarks, per-CPU pagesets)
//! are passed over, whatever they say.

/// The most text accepted (the guest reads at most this many bytes): a few KiB at 2 vCPUs,
/// growing with CPUs × zones (the per-CPU pageset lines).
pub const MAX_BYTES: usize = 1 << 20;
/// The most zone blocks accepted (nodes × zones).
pub const MAX_ZONES: usize = 4096;

/// The sums over every zone block (pages).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZoneTotals {
    /// Zone blocks read.
    pub zones: usize,
    /// Σpresent.
    pub present_pages: u64,
    /// Σmanaged.
    pub managed_pages: u64,
}

impl ZoneTotals {
    /// Σpresent × [`crate::layout::PAGE`] (saturating: never reached, the sums are of pages
    /// of a 64-bit physical address space).
    pub fn present_bytes(&self) -> u64 {
        self.present_pages.saturating_mul(crate::layout::PAGE)
    }

    /// Σmanaged × [`crate::layout::PAGE`].
    pub fn managed_bytes(&self) -> u64 {
        self.managed_pages.saturating_mul(crate::layout::PAGE)
    }
}

/// Why a text is not a zoneinfo the rule can use.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ZoneinfoError {
    #[error("more than {MAX_BYTES} bytes")]
    TooLong,
    #[error("more than {MAX_ZONES} zones")]
    TooManyZones,
    #[error("no `Node N, zone NAME` line")]
    NoZones,
    #[error("line {line}: `{key}` before any `Node N, zone NAME` line")]
    OutsideZone { line: usize, key: &'static str },
    #[error("line {line}: malformed zone header `{text}`")]
    BadHeader { line: usize, text: String },
    #[error("line {line}: `{key}` is not one decimal number of pages: `{text}`")]
    BadNumber {
        line: usize,
        key: &'static str,
        text: String,
    },
    #[error("line {line}: a second `{key}` in one zone")]
    Repeated { line: usize, key: &'static str },
    #[error("the zone opened on line {line} has no `{key}` line")]
    Missing { line: usize, key: &'static str },
    #[error("Σ{0} overflows 64 bits")]
    Overflow(&'static str),
}

/// How much of a line an error quotes.
const QUOTE: usize = 80;

fn quote(s: &str) -> String {
    s.chars().take(QUOTE).collect()
}

/// One open zone block: where it opened and what it gave so far.
struct Block {
    line: usize,
    present: Option<u64>,
    managed: Option<u64>,
}

impl Block {
    fn close(self, t: &mut ZoneTotals) -> Result<(), ZoneinfoError> {
        let missing = |key| ZoneinfoError::Missing {
            line: self.line,
            key,
        };
        let p = self.present.ok_or_else(|| missing("present"))?;
        let m = self.managed.ok_or_else(|| missing("managed"))?;
        t.present_pages = t
            .present_pages
            .checked_add(p)
            .ok_or(ZoneinfoError::Overflow("present"))?;
        t.managed_pages = t
            .managed_pages
            .checked_add(m)
            .ok_or(ZoneinfoError::Overflow("managed"))?;
        Ok(())
    }
}

/// Whether `line` is a zone header, `Node <decimal>, zone <name>` (the name right-aligned
/// in 8 columns by the kernel, so any run of spaces before it). `Ok(false)`: not a header
/// at all; an error: it starts like one but is malformed.
fn header(line: &str, n: usize) -> Result<bool, ZoneinfoError> {
    let Some(rest) = line.strip_prefix("Node ") else {
        return Ok(false);
    };
    let bad = || ZoneinfoError::BadHeader {
        line: n,
        text: quote(line),
    };
    let (node, zone) = rest.split_once(',').ok_or_else(bad)?;
    let name = zone.trim_start().strip_prefix("zone").ok_or_else(bad)?;
    let name_ok = name.starts_with(' ')
        && !name.trim().is_empty()
        && !name.trim().contains(char::is_whitespace);
    if node.is_empty() || !node.bytes().all(|b| b.is_ascii_digit()) || !name_ok {
        return Err(bad());
    }
    Ok(true)
}

/// Σpresent and Σmanaged over every zone block of `text` (see the module's doc).
pub fn parse(text: &str) -> Result<ZoneTotals, ZoneinfoError> {
    if text.len() > MAX_BYTES {
        return Err(ZoneinfoError::TooLong);
    }
    let mut totals = ZoneTotals::default();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if header(line, n)? {
            if let Some(b) = open.take() {
                b.close(&mut totals)?;
            }
            totals.zones += 1;
            if totals.zones > MAX_ZONES {
                return Err(ZoneinfoError::TooManyZones);
            }
            open = Some(Block {
                line: n,
                present: None,
                managed: None,
            });
            continue;
        }
        let mut words = line.split_ascii_whitespace();
        let key = match words.next() {
            Some("present") => "present",
            Some("managed") => "managed",
            _ => continue,
        };
        let Some(b) = open.as_mut() else {
            return Err(ZoneinfoError::OutsideZone { line: n, key });
        };
        let bad = || ZoneinfoError::BadNumber {
            line: n,
            key,
            text: quote(line.trim()),
        };
        let value = match (words.next(), words.next()) {
            (Some(v), None) if v.bytes().all(|c| c.is_ascii_digit()) => {
                v.parse::<u64>().map_err(|_| bad())?
            }
            _ => return Err(bad()),
        };
        let slot = if key == "present" {
            &mut b.present
        } else {
            &mut b.managed
        };
        if slot.replace(value).is_some() {
            return Err(ZoneinfoError::Repeated { line: n, key });
        }
    }
    match open {
        Some(b) => b.close(&mut totals)?,
        None => return Err(ZoneinfoError::NoZones),
    }
    Ok(totals)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A whole `/proc/zoneinfo`, unedited: a Firecracker guest with 2 vCPUs and 24 GiB
    /// running Linux 6.18 (one node; DMA, DMA32, Normal, and the empty Movable and Device
    /// zones; per-node stats, per-CPU pagesets).
    pub(crate) const FC_HOST: &str = include_str!("zoneinfo/fc-host-6.18-2cpu-24g.txt");

    #[test]
    fn real_text() {
        let t = parse(FC_HOST).unwrap();
        assert_eq!(t.zones, 5);
        assert_eq!(t.present_pages, 3998 + 782_336 + 5_505_024);
        assert_eq!(t.managed_pages, 3840 + 772_845 + 5_394_258);
        assert_eq!(t.present_bytes(), t.present_pages * 4096);
        assert_eq!(t.managed_bytes(), t.managed_pages * 4096);
    }

    /// Two nodes, a DMA zone, empty zones: every block counts.
    #[test]
    fn every_node_and_zone_is_summed() {
        let z = |node, name, p, m| {
            format!(
                "Node {node}, zone {name:>8}\n  pages free     3\n        min      1\n        \
                 spanned  9\n        present  {p}\n        managed  {m}\n        cma      0\n        \
                 protection: (0, 0)\n"
            )
        };
        let text = [
            z(0, "DMA", 3998, 3840),
            z(0, "DMA32", 258_048, 244_000),
            z(0, "Normal", 0, 0),
            z(1, "Normal", 100, 99),
        ]
        .concat();
        assert_eq!(
            parse(&text),
            Ok(ZoneTotals {
                zones: 4,
                present_pages: 3998 + 258_048 + 100,
                managed_pages: 3840 + 244_000 + 99
            })
        );
    }

    #[test]
    fn hostile_text_is_a_typed_error() {
        let ok = "Node 0, zone    DMA32\n  present 5\n  managed 4\n";
        assert!(parse(ok).is_ok());
        for (text, want) in [
            ("", ZoneinfoError::NoZones),
            ("cpu: 0\n  count: 3\n", ZoneinfoError::NoZones),
            (
                "present 5\n",
                ZoneinfoError::OutsideZone {
                    line: 1,
                    key: "present",
                },
            ),
            (
                "  present 5\nNode 0, zone DMA32\n",
                ZoneinfoError::OutsideZone {
                    line: 1,
                    key: "present",
                },
            ),
            (
                "Node 0, zone DMA32\n  present 5\n",
                ZoneinfoError::Missing {
                    line: 1,
                    key: "managed",
                },
            ),
            (
                "Node 0, zone DMA32\n  managed 5\n",
                ZoneinfoError::Missing {
                    line: 1,
                    key: "present",
                },
            ),
            (
                "Node 0, zone DMA32\n  present 5\n  managed 4\n  present 5\n",
                ZoneinfoError::Repeated {
                    line: 4,
                    key: "present",
                },
            ),
            (
                "Node 0, zone DMA32\n  present -5\n  managed 4\n",
                ZoneinfoError::BadNumber {
                    line: 2,
                    key: "present",
                    text: "present -5".into(),
                },
            ),
            (
                "Node 0, zone DMA32\n  present 5 pages\n  managed 4\n",
                ZoneinfoError::BadNumber {
                    line: 2,
                    key: "present",
                    text: "present 5 pages".into(),
                },
            ),
            (
                "Node 0, zone DMA32\n  present\n  managed 4\n",
                ZoneinfoError::BadNumber {
                    line: 2,
                    key: "present",
                    text: "present".into(),
                },
            ),
            (
                "Node 0, zone DMA32\n  present 99999999999999999999\n  managed 4\n",
                ZoneinfoError::BadNumber {
                    line: 2,
                    key: "present",
                    text: "present 99999999999999999999".into(),
                },
            ),
            (
                "Node x, zone DMA32\n",
                ZoneinfoError::BadHeader {
                    line: 1,
                    text: "Node x, zone DMA32".into(),
                },
            ),
            (
                "Node 0, zone\n",
                ZoneinfoError::BadHeader {
                    line: 1,
                    text: "Node 0, zone".into(),
                },
            ),
            (
                "Node 0 zone DMA\n",
                ZoneinfoError::BadHeader {
                    line: 1,
                    text: "Node 0 zone DMA".into(),
                },
            ),
            // A second zone without its figures fails even though the first was whole.
            (
                "Node 0, zone DMA32\n present 5\n managed 4\nNode 0, zone Normal\n",
                ZoneinfoError::Missing {
                    line: 4,
                    key: "present",
                },
            ),
        ] {
            assert_eq!(parse(text), Err(want), "{text:?}");
        }
        let big = u64::MAX;
        let two = format!(
            "Node 0, zone A\n present {big}\n managed 1\nNode 0, zone B\n present 1\n managed 1\n"
        );
        assert_eq!(parse(&two), Err(ZoneinfoError::Overflow("present")));
        let long = "x".repeat(MAX_BYTES + 1);
        assert_eq!(parse(&long), Err(ZoneinfoError::TooLong));
        let many = "Node 0, zone A\n present 1\n managed 1\n".repeat(MAX_ZONES + 1);
        assert_eq!(parse(&many), Err(ZoneinfoError::TooManyZones));
        assert_eq!(
            parse(&"Node 0, zone A\n present 1\n managed 1\n".repeat(MAX_ZONES)),
            Ok(ZoneTotals {
                zones: MAX_ZONES,
                present_pages: MAX_ZONES as u64,
                managed_pages: MAX_ZONES as u64
            })
        );
        // Quoted text is cut.
        let wide = format!("Node 0, zone A\n present {}\n managed 1\n", "9".repeat(500));
        match parse(&wide) {
            Err(ZoneinfoError::BadNumber { text, .. }) => assert_eq!(text.chars().count(), QUOTE),
            other => panic!("{other:?}"),
        }
    }

    proptest! {
        /// Total: any text gives a value or a typed error, never a panic.
        #[test]
        fn never_panics(text in ".{0,400}") {
            let _ = parse(&text);
        }

        /// Any real-shaped text: lines spliced from the real file and arbitrary ones.
        #[test]
        fn never_panics_on_spliced_lines(picks in prop::collection::vec((0usize..200, ".{0,40}"), 0..60)) {
            let lines: Vec<&str> = FC_HOST.lines().collect();
            let mut text = String::new();
            for (i, junk) in picks {
                match lines.get(i) {
                    Some(l) => text.push_str(l),
                    None => text.push_str(&junk),
                }
                text.push('\n');
            }
            let _ = parse(&text);
        }
    }
}
