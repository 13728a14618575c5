//! The L1→host data stream: how the L1 init sends the files its job wrote back to the host
//! over L1's second serial port. Text lines, so kernel tty post-processing (`\n` → `\r\n`)
//! is harmless:
//!
//! ```text
//! TCL1 FILE <relative path> <length> <sha256 hex>
//! <hex of up to CHUNK bytes>          (as many lines as needed)
//! TCL1 END
//! TCL1 EXIT <job exit code>
//! ```
//!
//! The host treats the stream as untrusted: paths are checked, lengths and digests must
//! match, and anything malformed is a typed [`StreamError`].

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{self, Write};
use truecold_proto::hex;

/// Bytes of file content per hex line.
pub const CHUNK: usize = 48;
const TAG: &str = "TCL1";

/// Writes one file into the stream.
pub fn write_file(out: &mut impl Write, rel_path: &str, data: &[u8]) -> io::Result<()> {
    let digest = hex(&Sha256::digest(data));
    writeln!(out, "{TAG} FILE {rel_path} {} {digest}", data.len())?;
    for chunk in data.chunks(CHUNK) {
        writeln!(out, "{}", hex(chunk))?;
    }
    writeln!(out, "{TAG} END")
}

/// Writes the closing line with the job's exit code.
pub fn write_exit(out: &mut impl Write, code: i32) -> io::Result<()> {
    writeln!(out, "{TAG} EXIT {code}")
}

/// What the host got back.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Received {
    /// Relative path → content, each length- and digest-checked.
    pub files: BTreeMap<String, Vec<u8>>,
    /// The job's exit code; `None` when the stream ended before the EXIT line.
    pub exit: Option<i32>,
}

/// A malformed stream.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error("line {line}: malformed header `{text}`")]
    BadHeader { line: usize, text: String },
    #[error("line {line}: unsafe path `{path}`")]
    BadPath { line: usize, path: String },
    #[error("line {line}: bad hex in the body of `{path}`")]
    BadHex { line: usize, path: String },
    #[error("`{path}`: got {got} bytes, header said {want}")]
    Length {
        path: String,
        got: usize,
        want: usize,
    },
    #[error("`{path}`: sha256 mismatch")]
    Digest { path: String },
    #[error("`{path}`: stream ended inside the file")]
    Truncated { path: String },
    #[error("`{path}` sent twice")]
    Duplicate { path: String },
}

/// A path the host may create under its output directory: relative, no `..`, plain names.
fn safe_path(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && p.split('/').all(|c| {
            !c.is_empty()
                && c != "."
                && c != ".."
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        })
}

/// Decodes a whole stream. Lines before the first `TCL1` line are ignored (tty noise).
pub fn decode(text: &str) -> Result<Received, StreamError> {
    let mut got = Received::default();
    let mut current: Option<(String, usize, String, Vec<u8>)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim_end_matches('\r');
        if let Some((path, want, digest, mut data)) = current.take() {
            if line == format!("{TAG} END") {
                if data.len() != want {
                    return Err(StreamError::Length {
                        path,
                        got: data.len(),
                        want,
                    });
                }
                if hex(&Sha256::digest(&data)) != digest {
                    return Err(StreamError::Digest { path });
                }
                if got.files.insert(path.clone(), data).is_some() {
                    return Err(StreamError::Duplicate { path });
                }
                continue;
            }
            if !unhex_into(line, &mut data) || data.len() > want {
                return Err(StreamError::BadHex {
                    line: line_no,
                    path,
                });
            }
            current = Some((path, want, digest, data));
            continue;
        }
        let Some(rest) = line.strip_prefix(TAG).and_then(|r| r.strip_prefix(' ')) else {
            continue;
        };
        let bad = || StreamError::BadHeader {
            line: line_no,
            text: line.chars().take(200).collect(),
        };
        let words: Vec<&str> = rest.split(' ').collect();
        match words.as_slice() {
            ["FILE", path, len, digest] => {
                if !safe_path(path) {
                    return Err(StreamError::BadPath {
                        line: line_no,
                        path: (*path).into(),
                    });
                }
                let want: usize = len.parse().map_err(|_| bad())?;
                if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(bad());
                }
                current = Some((
                    (*path).to_string(),
                    want,
                    digest.to_ascii_lowercase(),
                    Vec::new(),
                ));
            }
            ["EXIT", code] => got.exit = Some(code.parse().map_err(|_| bad())?),
            _ => return Err(bad()),
        }
    }
    match current {
        Some((path, ..)) => Err(StreamError::Truncated { path }),
        None => Ok(got),
    }
}

fn unhex_into(s: &str, out: &mut Vec<u8>) -> bool {
    if s.len() % 2 != 0 {
        return false;
    }
    for pair in s.as_bytes().chunks(2) {
        let (Some(h), Some(l)) = (
            (pair[0] as char).to_digit(16),
            (pair[1] as char).to_digit(16),
        ) else {
            return false;
        };
        out.push((h * 16 + l) as u8);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stream(files: &[(&str, &[u8])], exit: Option<i32>) -> String {
        let mut v = b"noise before\r\n".to_vec();
        for (p, d) in files {
            write_file(&mut v, p, d).unwrap();
        }
        if let Some(c) = exit {
            write_exit(&mut v, c).unwrap();
        }
        String::from_utf8(v).unwrap().replace('\n', "\r\n")
    }

    #[test]
    fn round_trip() {
        let big: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let s = stream(
            &[
                ("report.json", b"{}"),
                ("b/empty", b""),
                ("b/big.csv", &big),
            ],
            Some(3),
        );
        let r = decode(&s).unwrap();
        assert_eq!(r.exit, Some(3));
        assert_eq!(r.files["report.json"], b"{}");
        assert_eq!(r.files["b/empty"], b"");
        assert_eq!(r.files["b/big.csv"], big);
    }

    #[test]
    fn rejects_damage() {
        let good = stream(&[("a", b"hello world")], Some(0));
        let flipped = good.replacen("68656c6c6f", "68656c6c6e", 1);
        assert_eq!(
            decode(&flipped),
            Err(StreamError::Digest { path: "a".into() })
        );
        let cut: String = good.lines().take(2).collect::<Vec<_>>().join("\n");
        assert_eq!(
            decode(&cut),
            Err(StreamError::Truncated { path: "a".into() })
        );
        let evil = stream(&[("../etc/passwd", b"x")], None);
        assert!(matches!(decode(&evil), Err(StreamError::BadPath { .. })));
        let dup = stream(&[("a", b"1"), ("a", b"1")], None);
        assert_eq!(
            decode(&dup),
            Err(StreamError::Duplicate { path: "a".into() })
        );
        assert!(matches!(
            decode("TCL1 FILE a x 00"),
            Err(StreamError::BadHeader { .. })
        ));
        assert!(matches!(
            decode("TCL1 WHAT"),
            Err(StreamError::BadHeader { .. })
        ));
        assert_eq!(decode("no stream at all").unwrap(), Received::default());
    }

    proptest! {
        #[test]
        fn decode_never_panics(s in ".{0,400}") {
            let _ = decode(&s);
            let _ = decode(&format!("TCL1 FILE a 3 {}\n{s}", "0".repeat(64)));
        }
    }
}
