//! The liveness challenge: the guest's boot id, the binding of the host's nonce to it, and
//! the reply whose arrival is strict-ready.

use core::fmt;
use sha2::{Digest, Sha256};

use super::ports::NONCE_LEN;

/// Domain separator of the liveness binding.
const BINDING_DOMAIN: &[u8] = b"truecold-liveness-v1\0";

/// A guest boot id: the 36-character UUID from `/proc/sys/kernel/random/boot_id`.
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct BootId([u8; 36]);

impl TryFrom<String> for BootId {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        BootId::parse(&s)
            .ok_or_else(|| format!("`{s}` is not a boot id (8-4-4-4-12 lowercase hex)"))
    }
}

impl From<BootId> for String {
    fn from(b: BootId) -> String {
        b.as_str().to_string()
    }
}

impl BootId {
    /// Parses and validates `8-4-4-4-12` lowercase hex (trailing whitespace allowed).
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim_end();
        let b = s.as_bytes();
        if b.len() != 36 {
            return None;
        }
        for (i, c) in b.iter().enumerate() {
            let dash = matches!(i, 8 | 13 | 18 | 23);
            let ok = if dash {
                *c == b'-'
            } else {
                c.is_ascii_digit() || (b'a'..=b'f').contains(c)
            };
            if !ok {
                return None;
            }
        }
        let mut out = [0u8; 36];
        out.copy_from_slice(b);
        Some(BootId(out))
    }

    /// The UUID text.
    pub fn as_str(&self) -> &str {
        // Constructed only from validated ASCII.
        core::str::from_utf8(&self.0).unwrap_or("")
    }
}

impl fmt::Debug for BootId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BootId({})", self.as_str())
    }
}

impl fmt::Display for BootId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The liveness binding: an unkeyed SHA-256 over a domain tag, the host's nonce and the
/// guest's boot id. It is not a MAC (there is no key): it binds the answer to this fresh nonce
/// (so it cannot have been computed before the nonce existed) and to this boot id, and proves
/// nothing about *who* computed it.
/// Binds the reply to this nonce (fresh per boot) and this guest boot.
pub fn liveness_binding(nonce: &[u8; NONCE_LEN], boot_id: &BootId) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(BINDING_DOMAIN);
    h.update(nonce);
    h.update(boot_id.0);
    h.finalize().into()
}

/// The reply to the liveness challenge: its arrival at the host is strict-ready.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub boot_id: BootId,
    pub binding: [u8; 32],
}

impl Reply {
    /// Builds the reply for `nonce`.
    pub fn new(nonce: &[u8; NONCE_LEN], boot_id: BootId) -> Self {
        Reply {
            binding: liveness_binding(nonce, &boot_id),
            boot_id,
        }
    }

    /// True when the binding matches `nonce` and this reply's boot id.
    pub fn verifies(&self, nonce: &[u8; NONCE_LEN]) -> bool {
        liveness_binding(nonce, &self.boot_id) == self.binding
    }
}
