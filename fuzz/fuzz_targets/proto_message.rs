//! `Message::decode` (every `TC1` line the guest sends, and the host's nonce line under the
//! serial transport): never panics, and whatever it accepts re-encodes to one line that
//! decodes to the same message.
#![no_main]
use libfuzzer_sys::fuzz_target;
use truecold_proto::{Message, ProtoError, MAX_LINE};

fuzz_target!(|data: &[u8]| {
    match Message::decode(data) {
        Ok(m) => {
            let line = m.encode();
            assert!(
                line.ends_with('\n') && line.matches('\n').count() == 1,
                "{line:?}"
            );
            assert!(line.len() <= MAX_LINE, "{} bytes", line.len());
            assert_eq!(
                Message::decode(line.as_bytes()).as_ref(),
                Ok(&m),
                "{line:?}"
            );
            // Accepted input is printable ASCII (its own final newline aside).
            let body = data.strip_suffix(b"\n").unwrap_or(data);
            assert!(body.iter().all(|c| (0x20..0x7f).contains(c)));
        }
        Err(ProtoError::LineTooLong) => assert!(data.len() > MAX_LINE),
        Err(_) => {}
    }
});
