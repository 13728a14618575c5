//! The transport's constants: the four ports and the sizes of what crosses them.

/// `outb`: one [`Phase`](super::Phase) byte.
pub const PORT_DOORBELL: u16 = 0x0f10;
/// `insb`: [`NONCE_LEN`] bytes of the host's nonce for this boot.
pub const PORT_CHALLENGE: u16 = 0x0f11;
/// `outsb`: bytes of [`Message`](super::Message) lines.
pub const PORT_RECORD: u16 = 0x0f12;
/// `outb`: final exit code ([`ErrorCode`](super::ErrorCode)); the host stops the VM.
pub const PORT_EXIT: u16 = 0x0f13;
/// First and last port of the truecold device, for exit dispatch.
pub const PORT_FIRST: u16 = PORT_DOORBELL;
/// See [`PORT_FIRST`].
pub const PORT_LAST: u16 = PORT_EXIT;

/// Bytes in the liveness nonce.
pub const NONCE_LEN: usize = 16;
/// Longest line, `\n` included.
pub const MAX_LINE: usize = 4096;
/// The version tag every line starts with.
pub const LINE_TAG: &str = "TC1";
