//! The rows against their evidence: `reports.jsonl` (each row re-derived from its line)
//! and the attribution files.

use std::collections::BTreeMap;

use super::files::*;
use crate::cmdline::parse_cmdline_txt;
use crate::names::REPORTS_FILE;
use crate::schema::{ResultJson, Sample};
use crate::verdict::{Check, Verdict};

/// `reports.jsonl` against the rows, read from the descriptor it was hashed from. `None`
/// when it cannot be read.
pub(super) fn check_reports_file(
    v: &mut Verdict,
    r: &ResultJson,
    s: &[Sample],
    files: &BTreeMap<String, Entry>,
) -> Option<()> {
    let Some(f) = files.get(REPORTS_FILE) else {
        return Some(());
    };
    let checked = f.rewound().and_then(|mut file| {
        crate::reports::check(
            std::io::BufReader::new(&mut *file),
            s,
            &crate::reports::Expect::of(r),
            MAX_REPORT_REASONS,
        )
    });
    match checked {
        Ok(bad) => {
            for why in bad {
                v.add(Check::Reports, format!("{REPORTS_FILE}: {why}"));
            }
            Some(())
        }
        Err(err) => {
            v.unreadable = Some(format!("cannot read {REPORTS_FILE}: {err}"));
            None
        }
    }
}

/// Most reports.jsonl disagreements collected (all rows are still read).
const MAX_REPORT_REASONS: usize = 10_000;

/// The attribution files ([`crate::attribution::check_bundle`]), each read capped at
/// [`crate::attribution::JSONL_MAX_BYTES`], held to the instrument `cmdline.txt`'s run line
/// asks for (when it asks for attribution launches; an unreadable line is its own reason).
pub(super) fn check_attribution(
    v: &mut Verdict,
    r: &ResultJson,
    samples: &[Sample],
    files: &BTreeMap<String, Entry>,
    cmdline: Option<&[u8]>,
) {
    let read = |name: &str| {
        let f = files.get(name)?;
        f.reread(crate::attribution::JSONL_MAX_BYTES).ok().flatten()
    };
    let clock = r.environment.host_kind.clock().describe();
    let rec = cmdline.and_then(|c| parse_cmdline_txt(c).ok());
    let asked = rec.as_ref().and_then(|rec| {
        Some(crate::attribution::Asked {
            instrument: rec.attribution_instrument().ok().flatten()?,
            measured_cmdline: rec.guest_cmdline.as_deref(),
        })
    });
    for (file, why) in crate::attribution::check_bundle(read, samples, clock, asked) {
        match file {
            Some(f) => v.add_file(Check::Attribution, &f, why),
            None => v.add(Check::Attribution, why),
        }
    }
}
