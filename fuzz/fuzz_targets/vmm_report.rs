//! `VmmOutput::parse`: the bench's reader of a VMM's stdout (one JSON report, or an error
//! report). Never panics; whatever it accepts serialises back to JSON that parses to the
//! same value.
#![no_main]
use libfuzzer_sys::fuzz_target;
use truecold_proto::report::VmmOutput;

fuzz_target!(|data: &[u8]| {
    if let Ok(out) = VmmOutput::parse(data) {
        let again = match &out {
            VmmOutput::Boot(core) => serde_json::to_vec(core),
            VmmOutput::Error(e) => serde_json::to_vec(e),
        };
        let again = again.expect("a parsed report serialises");
        assert_eq!(VmmOutput::parse(&again).as_ref(), Ok(&out));
    }
});
