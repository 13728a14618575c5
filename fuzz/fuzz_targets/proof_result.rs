//! `result.json`: `parse_result` never panics; whatever it accepts is written back by
//! `result_bytes` to bytes that parse to the same value, and the README generated from it
//! (what `regenerate` writes for a bundle it read) renders without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;
use truecold_proof::bundle::{parse_result, result_bytes};
use truecold_proof::reports::Expect;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = parse_result(data) {
        let again = result_bytes(&r).expect("a parsed result.json serialises");
        assert_eq!(parse_result(&again).as_ref().ok(), Some(&r));
        let _ = truecold_proof::bundle::readme(&r);
        let _ = Expect::of(&r);
    }
});
