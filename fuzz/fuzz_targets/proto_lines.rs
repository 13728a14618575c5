//! The record port's byte stream as the VMM sees it: `LineAssembler::push` in chunks the
//! fuzzer picks, then `Message::decode` on each line and the trace collector. Checks: one
//! result per `\n`, never a line longer than `MAX_LINE`, the bytes of every line that fits
//! are exactly the stream's, and the pending count is bounded.
#![no_main]
use libfuzzer_sys::fuzz_target;
use truecold_fuzz::Input;
use truecold_proto::trace::GuestTrace;
use truecold_proto::{LineAssembler, Message, MAX_LINE};

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let chunk = usize::from(input.u8()).max(1);
    let stream = input.rest();
    let mut asm = LineAssembler::default();
    let mut out = Vec::new();
    for piece in stream.chunks(chunk) {
        out.extend(asm.push(piece));
        assert!(asm.pending() < MAX_LINE);
    }
    let newlines = stream.iter().filter(|&&b| b == b'\n').count();
    assert_eq!(out.len(), newlines);
    // What a plain split gives, line by line.
    let mut expected = stream.split(|&b| b == b'\n');
    let mut trace = GuestTrace::default();
    for got in &out {
        let want = expected.next().unwrap_or_default();
        match got {
            Ok(line) => {
                assert_eq!(line.as_slice(), want);
                assert!(line.len() < MAX_LINE);
                if let Ok(Message::Trace(t)) = Message::decode(line) {
                    let _ = trace.push(t);
                }
            }
            // Overlong: MAX_LINE bytes or more before the `\n` (which would make it longer
            // than MAX_LINE with it).
            Err(_) => assert!(want.len() >= MAX_LINE, "{} bytes", want.len()),
        }
    }
    assert_eq!(asm.pending(), {
        let tail = expected.next().unwrap_or_default();
        if tail.len() >= MAX_LINE {
            0
        } else {
            tail.len()
        }
    });
});
