//! SHA-256 as every part of a directory spells it: lowercase hex, of bytes in memory
//! ([`sha256_hex`]) or of a stream through one fixed buffer ([`sha256_reader`],
//! [`HashingReader`]), and the one test of a digest's spelling ([`is_sha256_hex`]).

use std::io::{self, Read};

use sha2::{Digest, Sha256};
use truecold_proto::hex;

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The buffer [`sha256_reader`] hashes through: memory use is this, whatever the size of
/// the file.
pub const HASH_BUFFER: usize = 64 * 1024;

/// Lowercase hex sha256 of everything `r` yields, and how many bytes that was. Streams
/// through one fixed [`HASH_BUFFER`]: a file of any size is hashed in constant memory.
pub fn sha256_reader(mut r: impl Read) -> io::Result<(String, u64)> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; HASH_BUFFER];
    let mut n: u64 = 0;
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => {
                h.update(&buf[..k]);
                n = n.saturating_add(k as u64);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((hex(&h.finalize()), n))
}

/// A reader that hashes every byte it yields: a file parsed as a stream is hashed from the
/// same descriptor and the same bytes ([`HashingReader::finish`]).
pub struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
    len: u64,
}

impl<R: Read> HashingReader<R> {
    pub fn new(inner: R) -> Self {
        HashingReader {
            inner,
            hasher: Sha256::new(),
            len: 0,
        }
    }

    /// Reads what the parser left (so the digest covers the whole file), then returns the
    /// digest (lowercase hex) and the length.
    pub fn finish(mut self) -> io::Result<(String, u64)> {
        let mut buf = vec![0u8; HASH_BUFFER];
        while self.read(&mut buf)? != 0 {}
        Ok((hex(&self.hasher.finalize()), self.len))
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = loop {
            match self.inner.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => break r?,
            }
        };
        self.hasher.update(&buf[..n]);
        self.len = self.len.saturating_add(n as u64);
        Ok(n)
    }
}

/// True for 64 lowercase hex digits.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
