//! `attribution.jsonl` (an attribution run's launches, whose kernel-log trace comes from the
//! guest): `parse_lines` never panics, and `generate` (the attribution table and its SVG,
//! what `regenerate` and `verify` recompute) runs on whatever it accepts, against a
//! committed bundle's measured rows, without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;
use truecold_fuzz::committed_bundle;
use truecold_proof::attribution::{generate, parse_lines};

fuzz_target!(|data: &[u8]| {
    if let Ok(lines) = parse_lines(data) {
        assert!(lines.len() <= data.split(|&b| b == b'\n').count());
        let (samples, _) = committed_bundle();
        let _ = generate(data, samples, "virtual");
    }
});
