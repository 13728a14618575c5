//! Property tests: arbitrary bytes never panic the CSV, JSON or SHA256SUMS readers.
mod common;

use proptest::prelude::*;
use truecold_proof::bundle::parse_result;
use truecold_proof::csv::{read_samples, write_samples};
use truecold_proof::sums::parse_sums;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = read_samples(&bytes);
        let _ = parse_result(&bytes);
        let _ = parse_sums(&bytes);
    }

    #[test]
    fn mutated_valid_csv(pos in any::<prop::sample::Index>(), byte in any::<u8>(), cut in any::<prop::sample::Index>()) {
        let mut b = write_samples(&common::Fixture::linux(8).samples()).into_bytes();
        let i = pos.index(b.len());
        b[i] = byte;
        let _ = read_samples(&b);
        let c = cut.index(b.len());
        let _ = read_samples(&b[..c]);
    }

    #[test]
    fn mutated_valid_json(pos in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let f = common::Fixture::linux(8);
        let mut b = truecold_proof::bundle::result_bytes(&f.result(&f.samples())).unwrap();
        let i = pos.index(b.len());
        b[i] = byte;
        let _ = parse_result(&b);
    }

    #[test]
    fn text_fields_round_trip(detail in "\\PC*", workload in "[ -~]{0,20}") {
        let mut s = common::Fixture::linux(3).samples();
        s[1].error_detail = detail;
        s[2].workload = workload;
        prop_assert_eq!(read_samples(write_samples(&s).as_bytes()).unwrap(), s);
    }
}
