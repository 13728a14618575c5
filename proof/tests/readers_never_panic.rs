//! Property tests: arbitrary bytes never panic the CSV, JSON or SHA256SUMS readers, and
//! whatever the CSV reader accepts is canonical (equal to the writer's bytes for its rows).
mod common;

use proptest::prelude::*;
use truecold_proof::bundle::parse_result;
use truecold_proof::csv::{read_samples, write_samples, Caps, SamplesReader};
use truecold_proof::sums::{format_sums, parse_sums};

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
    fn accepted_csv_is_canonical(pos in any::<prop::sample::Index>(), byte in any::<u8>(), extra in any::<prop::sample::Index>(), ins in any::<u8>()) {
        let good = write_samples(&common::Fixture::linux(6).samples()).into_bytes();
        let mut b = good.clone();
        let i = pos.index(b.len());
        b[i] = byte;
        let j = extra.index(b.len());
        b.insert(j, ins);
        if let Ok(rows) = read_samples(&b) {
            prop_assert_eq!(write_samples(&rows).into_bytes(), b);
        }
    }

    #[test]
    fn small_caps_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096), row in 1usize..600, total in 1u64..5000, rows in 0u64..5) {
        let caps = Caps { max_bytes: total, max_row_bytes: row, max_rows: rows };
        if let Ok(mut r) = SamplesReader::with_caps(bytes.as_slice(), caps) {
            let mut n = 0;
            while let Ok(Some(_)) = r.next_sample() {
                n += 1;
            }
            prop_assert!(n <= rows);
        }
        let good = write_samples(&common::Fixture::probe(4).samples()).into_bytes();
        if let Ok(mut r) = SamplesReader::with_caps(good.as_slice(), caps) {
            while let Ok(Some(_)) = r.next_sample() {}
        }
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

/// Found by fuzzing (fuzz/fuzz_targets/proof_sums.rs): a `\r\n` line end was accepted, so a
/// SHA256SUMS the writer never makes passed as canonical.
#[test]
fn sums_lines_end_in_a_newline_alone() {
    let d = "ab".repeat(32);
    let good = format!("{d}  README.md\n{d}  samples.csv\n");
    let entries = parse_sums(good.as_bytes()).unwrap();
    assert_eq!(format_sums(&entries), good);
    assert!(parse_sums(good.replace('\n', "\r\n").as_bytes()).is_err());
    assert!(parse_sums(format!("{d}  README.md\r\n").as_bytes()).is_err());
    assert!(
        truecold_proof::arms::parse_arms_sums(format!("{d}  arms.json\r\n").as_bytes()).is_err()
    );
}
