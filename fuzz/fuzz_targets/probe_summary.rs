//! `ProbeSummary::parse`: the probe guest's 56-byte summary from its port (untrusted). Never
//! panics; accepts exactly the 56-byte inputs with the magic, and the fields are the input's
//! little-endian quads (so writing them back gives the input).
#![no_main]
use libfuzzer_sys::fuzz_target;
use truecold_vmm::probe::{ProbeSummary, SummaryError, SUMMARY_LEN, SUMMARY_MAGIC};

fuzz_target!(|data: &[u8]| {
    match ProbeSummary::parse(data) {
        Ok(s) => {
            let mut b = Vec::with_capacity(SUMMARY_LEN);
            for q in [
                SUMMARY_MAGIC,
                s.ram_bytes,
                s.touched,
                s.checksum,
                s.bad,
                s.aps,
                s.map_gib,
            ] {
                b.extend_from_slice(&q.to_le_bytes());
            }
            assert_eq!(b, data);
        }
        Err(SummaryError::Length(n)) => {
            assert_eq!(n, data.len());
            assert_ne!(n, SUMMARY_LEN);
        }
        Err(SummaryError::Magic(m)) => {
            assert_eq!(data.len(), SUMMARY_LEN);
            assert_ne!(m, SUMMARY_MAGIC);
        }
    }
});
