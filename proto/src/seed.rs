//! Seeds as the command lines take and show them: decimal or `0x` hexadecimal on input
//! ([`parse`]), hexadecimal on output ([`hex`]): every message, generated README and
//! command line the bench writes shows a seed with [`hex`]. A bundle's JSON stores its
//! seeds as numbers.

/// The default seed of every seeded shuffle and bootstrap (`truecold run`/`tune`'s
/// `--seed`, `truecold-proof compare`'s): "truecold" in ASCII.
pub const DEFAULT: u64 = u64::from_be_bytes(*b"truecold");

/// `s` as a seed: decimal (`8391162081848888420`) or hexadecimal after `0x`/`0X`
/// (`0x74727565636f6c64`, `_` allowed between digits as in Rust literals).
pub fn parse(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, radix) = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => (h, 16),
        None => (t, 10),
    };
    let clean: String = digits.chars().filter(|&c| c != '_').collect();
    if clean.is_empty() || digits.starts_with('_') || digits.ends_with('_') {
        return Err(format!(
            "`{s}` is not a seed: decimal or 0x hexadecimal digits"
        ));
    }
    u64::from_str_radix(&clean, radix).map_err(|e| {
        format!("`{s}` is not a seed (decimal or 0x hexadecimal, at most 64 bits): {e}")
    })
}

/// `seed` as the command lines show it: `0x` and 16 lowercase hex digits.
pub fn hex(seed: u64) -> String {
    format!("{seed:#018x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_and_hex_read_alike_and_hex_shows_back() {
        let truecold = u64::from_be_bytes(*b"truecold");
        assert_eq!(DEFAULT, truecold);
        assert_eq!(parse("0x74727565636f6c64"), Ok(truecold));
        assert_eq!(parse("0X7472_7565_636F_6C64"), Ok(truecold));
        assert_eq!(parse(&truecold.to_string()), Ok(truecold));
        assert_eq!(hex(truecold), "0x74727565636f6c64");
        assert_eq!(hex(1), "0x0000000000000001");
        assert_eq!(parse(&hex(u64::MAX)), Ok(u64::MAX));
        assert_eq!(parse("0"), Ok(0));
        for bad in [
            "",
            "0x",
            "-1",
            "0x1g",
            "18446744073709551616",
            "0x1_",
            "seed",
            "0x_1",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
