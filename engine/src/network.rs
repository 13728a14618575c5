//! The parity contract's network proof ([`NetworkProof`]): one TCP round trip from the host
//! to guest-init's listener, bound to the agent channel's boot id. Bounded in time (the
//! launch's kill instant) and in bytes (one line of at most [`MAX_LINE`]).

use std::io::{Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpStream};
use std::time::Duration;
use truecold_proto::measure::now_ns;
use truecold_proto::report::{Liveness, LivenessKind, NetworkProof};
use truecold_proto::{hex, BootId, LineAssembler, Message, MAX_LINE, NONCE_LEN};

/// Proves the guest's network: connect to `target` (the guest's address and
/// `truecold_proto::parity::TCP_PORT`), write the `TC1 nonce` line of `nonce`, read one line;
/// it verifies when it is a `TC1 reply` bound to `nonce` and `boot_id` (the agent's ready
/// line's). Gives up at `until_ns` (CLOCK_MONOTONIC). Never retries.
pub fn prove(
    target: SocketAddrV4,
    boot_id: BootId,
    nonce: [u8; NONCE_LEN],
    until_ns: u64,
) -> NetworkProof {
    let mut lv = Liveness::new(LivenessKind::Binding);
    lv.nonce = Some(hex(&nonce));
    let error = exchange(target, boot_id, &nonce, until_ns, &mut lv).err();
    NetworkProof {
        target: target.to_string(),
        liveness: lv,
        error,
    }
}

fn left(until_ns: u64) -> Result<Duration, String> {
    let now = now_ns();
    if now >= until_ns {
        return Err("the launch's time ran out".into());
    }
    Ok(Duration::from_nanos(until_ns - now))
}

fn exchange(
    target: SocketAddrV4,
    boot_id: BootId,
    nonce: &[u8; NONCE_LEN],
    until_ns: u64,
    lv: &mut Liveness,
) -> Result<(), String> {
    let mut s = TcpStream::connect_timeout(&SocketAddr::V4(target), left(until_ns)?)
        .map_err(|e| format!("connect {target}: {e}"))?;
    let _ = s.set_nodelay(true);
    s.set_write_timeout(Some(left(until_ns)?))
        .map_err(|e| format!("timeout: {e}"))?;
    s.write_all(Message::Nonce(*nonce).encode().as_bytes())
        .map_err(|e| format!("writing the nonce: {e}"))?;
    let mut lines = LineAssembler::default();
    let mut buf = [0u8; 512];
    let mut read = 0usize;
    let line = loop {
        s.set_read_timeout(Some(left(until_ns)?))
            .map_err(|e| format!("timeout: {e}"))?;
        let n = match s.read(&mut buf) {
            Ok(0) => return Err("the guest closed the connection before its reply".into()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("reading the reply: {e}")),
        };
        read += n;
        if let Some(first) = lines.push(&buf[..n]).into_iter().next() {
            break first.map_err(|e| format!("the reply line: {e}"))?;
        }
        if read > MAX_LINE {
            return Err(format!("no line within {MAX_LINE} bytes"));
        }
    };
    let l = line.strip_suffix(b"\r").unwrap_or(&line);
    let reply = match Message::decode(l) {
        Ok(Message::Reply(r)) => r,
        Ok(_) => return Err("another kind of line instead of the reply".into()),
        Err(e) => return Err(format!("the reply does not decode: {e}")),
    };
    lv.answer = Some(hex(&reply.binding));
    if !reply.verifies(nonce) {
        return Err(format!(
            "the reply (boot id {}) does not verify against the nonce",
            reply.boot_id
        ));
    }
    if reply.boot_id != boot_id {
        return Err(format!(
            "the reply's boot id {} is not the agent's {boot_id}",
            reply.boot_id
        ));
    }
    lv.verified = true;
    lv.reply_boot_id = Some(reply.boot_id);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, TcpListener};
    use truecold_proto::Reply;

    type Answer = dyn FnOnce([u8; NONCE_LEN]) -> Vec<u8> + Send;

    const BOOT: &str = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9";

    /// A one-connection guest stand-in on 127.0.0.1 that answers with `answer(nonce)`.
    fn guest(answer: impl FnOnce([u8; NONCE_LEN]) -> Vec<u8> + Send + 'static) -> SocketAddrV4 {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let SocketAddr::V4(addr) = l.local_addr().unwrap() else {
            unreachable!()
        };
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut line = Vec::new();
            let mut b = [0u8; 1];
            while s.read(&mut b).unwrap() == 1 && b[0] != b'\n' {
                line.push(b[0]);
            }
            let Ok(Message::Nonce(n)) = Message::decode(&line) else {
                panic!("not a nonce line: {line:?}")
            };
            let _ = s.write_all(&answer(n));
        });
        addr
    }

    fn far() -> u64 {
        now_ns() + 10_000_000_000
    }

    #[test]
    fn a_bound_reply_verifies() {
        let id = BootId::parse(BOOT).unwrap();
        let addr = guest(move |n| Message::Reply(Reply::new(&n, id)).encode().into_bytes());
        let p = prove(addr, id, [7; NONCE_LEN], far());
        assert_eq!(p.error, None);
        assert!(p.liveness.verified && p.liveness.reply_boot_id == Some(id));
        assert_eq!(p.liveness.nonce, Some(hex(&[7; NONCE_LEN])));
    }

    #[test]
    fn wrong_nonce_other_boot_garbage_silence_and_refusal_fail() {
        let id = BootId::parse(BOOT).unwrap();
        let other = BootId::parse("11111111-2222-4333-8444-555555555555").unwrap();
        let cases: Vec<(Box<Answer>, &str)> = vec![
            (
                Box::new(move |_| {
                    Message::Reply(Reply::new(&[0; NONCE_LEN], id))
                        .encode()
                        .into_bytes()
                }),
                "does not verify",
            ),
            (
                Box::new(move |n| Message::Reply(Reply::new(&n, other)).encode().into_bytes()),
                "is not the agent's",
            ),
            (Box::new(|_| b"TC1 bogus x=1\n".to_vec()), "does not decode"),
            (Box::new(|_| Vec::new()), "closed the connection"),
            (Box::new(|_| vec![b'a'; 3 * MAX_LINE]), "4096"),
        ];
        for (answer, want) in cases {
            let addr = guest(answer);
            let p = prove(addr, id, [9; NONCE_LEN], far());
            assert!(!p.liveness.verified, "{want}");
            let e = p.error.unwrap_or_default();
            assert!(e.contains(want), "{want}: {e}");
        }
        // Nobody listening.
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let SocketAddr::V4(addr) = l.local_addr().unwrap() else {
            unreachable!()
        };
        drop(l);
        let p = prove(addr, id, [1; NONCE_LEN], far());
        assert!(p.error.unwrap().starts_with("connect"));
        // Out of time before it starts.
        let p = prove(addr, id, [1; NONCE_LEN], now_ns());
        assert!(p.error.unwrap().contains("ran out"));
    }
}
