//! `samples.csv` readers: `read_samples` never panics and whatever it accepts is canonical
//! (the writer gives back the input byte for byte); the streaming `SamplesReader` never
//! panics and never yields more rows than its cap, under caps the fuzzer picks.
#![no_main]
use libfuzzer_sys::fuzz_target;
use truecold_fuzz::Input;
use truecold_proof::csv::{read_samples, write_samples, Caps, SamplesReader};

fuzz_target!(|data: &[u8]| {
    if let Ok(rows) = read_samples(data) {
        assert_eq!(write_samples(&rows).as_bytes(), data);
    }
    let mut input = Input::new(data);
    let caps = Caps {
        max_bytes: u64::from(input.u16()),
        max_row_bytes: usize::from(input.u16()),
        max_rows: u64::from(input.u8() % 8),
    };
    let body = input.rest();
    if let Ok(mut r) = SamplesReader::with_caps(body, caps) {
        let mut n = 0u64;
        while let Ok(Some(_)) = r.next_sample() {
            n += 1;
            assert!(n <= caps.max_rows, "{n} rows under {caps:?}");
        }
    }
});
