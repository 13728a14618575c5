//! `reports.jsonl`: each line parses as a `ReportLine` or is rejected without a panic; an
//! accepted line written back (`to_line`) parses to the same value and its VMM core is
//! readable; the verifier's line-by-line check (`reports::check`) runs over the whole input
//! against the rows of a committed bundle without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;
use truecold_fuzz::committed_bundle;
use truecold_proof::reports::{check, ReportLine};

fuzz_target!(|data: &[u8]| {
    for line in data.split(|&b| b == b'\n') {
        if let Ok(l) = serde_json::from_slice::<ReportLine>(line) {
            let text = l.to_line().expect("a parsed line serialises");
            let again: ReportLine =
                serde_json::from_str(text.trim_end()).expect("its own line parses");
            assert_eq!(again, l);
            let _ = l.core();
        }
    }
    let (samples, expect) = committed_bundle();
    let bad = check(data, samples, expect, 16).expect("reading a slice cannot fail");
    assert!(bad.len() <= 16);
});
