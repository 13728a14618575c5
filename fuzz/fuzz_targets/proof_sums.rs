//! `SHA256SUMS` readers (a bundle's, and a multi-arm, tune or bisect directory's): never
//! panic, and what they accept is canonical (`format_sums` of the entries is the input):
//! sorted, unique, valid names, lowercase SHA-256 digests.
#![no_main]
use libfuzzer_sys::fuzz_target;
use truecold_proof::arms::parse_arms_sums;
use truecold_proof::digest::is_sha256_hex;
use truecold_proof::names::is_valid_name;
use truecold_proof::sums::{format_sums, parse_sums};

fuzz_target!(|data: &[u8]| {
    if let Ok(entries) = parse_sums(data) {
        assert_eq!(format_sums(&entries).as_bytes(), data);
        for (name, digest) in &entries {
            assert!(
                is_valid_name(name) && is_sha256_hex(digest),
                "{name} {digest}"
            );
        }
    }
    if let Ok(entries) = parse_arms_sums(data) {
        assert_eq!(format_sums(&entries).as_bytes(), data);
    }
});
