//! The host exchanges of PID 1 over any byte stream: the `ready` line, and one bounded
//! `TC1 nonce` line answered by the `reply` line bound to that nonce and the boot id. One
//! code path for every channel: ttyS0 (serial transport), the AF_VSOCK stream (vsock
//! transport) and the parity contract's TCP connection ([`tcp_proof`]). The streams are
//! generic ([`Read`] + [`Write`]), so all of it runs on the host in unit tests; the TCP proof
//! takes a real [`TcpListener`] (a loopback one in the tests).
//!
//! `flush` ends every line: on ttyS0 it is `tcdrain` (the line has left the UART), on sockets
//! a no-op.

use crate::{nonce_from_line, read_line_bounded, LineRead, NonceLineError};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};
use truecold_proto::parity::TCP_PORT;
use truecold_proto::{BootId, Message, Reply, NONCE_LEN};

/// How long PID 1 waits for the host's TCP connection, its nonce line and the reply to be
/// written, from the moment the wait starts (after the agent channel's reply).
pub const TCP_WAIT: Duration = Duration::from_secs(10);

/// Why an exchange on a stream failed.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    #[error("{step}")]
    Io {
        step: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("the stream ended before the host's nonce line")]
    Eof,
    #[error("the host's line is not a `TC1 nonce` line")]
    BadNonce(#[source] NonceLineError),
}

/// Why the parity contract's TCP round trip failed.
#[derive(Debug, thiserror::Error)]
pub enum TcpProofError {
    #[error("listening on {addr}:{TCP_PORT}")]
    Listen {
        addr: Ipv4Addr,
        #[source]
        source: io::Error,
    },
    #[error("waiting for the host's connection")]
    Poll(#[source] io::Error),
    #[error("no connection from the host within {0:?}")]
    NoConnection(Duration),
    #[error("accepting the host's connection")]
    Accept(#[source] io::Error),
    #[error("bounding the connection's reads and writes")]
    Timeout(#[source] io::Error),
    #[error("the nonce/reply exchange on the host's connection")]
    Exchange(#[source] ExchangeError),
}

/// Writes one message line and flushes it (`tcdrain` on ttyS0).
pub fn send_line<S: Write>(s: &mut S, msg: &Message) -> Result<(), ExchangeError> {
    s.write_all(msg.encode().as_bytes())
        .map_err(|source| ExchangeError::Io {
            step: "write",
            source,
        })?;
    s.flush().map_err(|source| ExchangeError::Io {
        step: "flush",
        source,
    })
}

/// Reads ONE line from `s` (bounded by [`read_line_bounded`]: at most `MAX_LINE` bytes,
/// nothing after its `\n`), which must be `TC1 nonce value=<32 hex>`, then writes the
/// `reply` line bound to that nonce and `boot_id`. Returns the nonce.
pub fn answer_nonce<S: Read + Write>(
    s: &mut S,
    boot_id: BootId,
) -> Result<[u8; NONCE_LEN], ExchangeError> {
    let nonce = match read_line_bounded(s).map_err(|source| ExchangeError::Io {
        step: "read",
        source,
    })? {
        LineRead::Line(line) => nonce_from_line(&line).map_err(ExchangeError::BadNonce)?,
        LineRead::TooLong => return Err(ExchangeError::BadNonce(NonceLineError::TooLong)),
        LineRead::Eof => return Err(ExchangeError::Eof),
    };
    send_line(s, &Message::Reply(Reply::new(&nonce, boot_id)))?;
    Ok(nonce)
}

/// The guest's listener for the TCP proof: `addr`:[`TCP_PORT`] (std's backlog, 128).
pub fn tcp_listen(addr: Ipv4Addr) -> Result<TcpListener, TcpProofError> {
    TcpListener::bind((addr, TCP_PORT)).map_err(|source| TcpProofError::Listen { addr, source })
}

/// The parity contract's network proof on an already bound `listener`: waits at most `wait`
/// for ONE connection, then (within what is left of `wait` for each read and write) answers
/// the host's nonce line on it with the reply bound to that nonce and `boot_id`, and closes
/// it. Returns the nonce.
pub fn tcp_proof(
    listener: &TcpListener,
    boot_id: BootId,
    wait: Duration,
) -> Result<[u8; NONCE_LEN], TcpProofError> {
    let deadline = Instant::now() + wait;
    wait_readable(listener, deadline, wait)?;
    let (mut stream, _) = listener.accept().map_err(TcpProofError::Accept)?;
    // A zero timeout would mean "no timeout": keep at least a millisecond.
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    stream
        .set_read_timeout(Some(left))
        .and_then(|()| stream.set_write_timeout(Some(left)))
        .map_err(TcpProofError::Timeout)?;
    answer_nonce(&mut stream, boot_id).map_err(TcpProofError::Exchange)
}

/// `poll(2)` until `listener` has a connection queued or `deadline` passes.
fn wait_readable(
    listener: &TcpListener,
    deadline: Instant,
    wait: Duration,
) -> Result<(), TcpProofError> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(TcpProofError::NoConnection(wait));
        }
        // Rounded up, so the wait never ends early.
        let ms =
            libc::c_int::try_from(left.as_nanos().div_ceil(1_000_000)).unwrap_or(libc::c_int::MAX);
        let mut pfd = libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `pfd` is one valid pollfd on a socket `listener` keeps open across the call.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n > 0 {
            return Ok(());
        }
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(TcpProofError::Poll(e));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;

    fn boot_id() -> BootId {
        BootId::parse("0b3e4a53-7d9e-4f8e-9a0c-1f2e3d4c5b6a").unwrap()
    }

    /// A duplex stream: reads from `input`, collects writes, counts flushes.
    struct Duplex {
        input: io::Cursor<Vec<u8>>,
        out: Vec<u8>,
        flushes: usize,
    }

    impl Duplex {
        fn new(input: &[u8]) -> Self {
            Duplex {
                input: io::Cursor::new(input.to_vec()),
                out: Vec::new(),
                flushes: 0,
            }
        }
    }

    impl Read for Duplex {
        fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
            self.input.read(b)
        }
    }

    impl Write for Duplex {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.out.write(b)
        }
        fn flush(&mut self) -> io::Result<()> {
            self.flushes += 1;
            Ok(())
        }
    }

    fn reply_of(bytes: &[u8]) -> Reply {
        match Message::decode(bytes).unwrap() {
            Message::Reply(r) => r,
            m => panic!("not a reply: {m:?}"),
        }
    }

    #[test]
    fn answers_the_nonce_with_a_bound_reply_and_reads_nothing_more() {
        let nonce = [0x5a; NONCE_LEN];
        let mut input = Message::Nonce(nonce).encode().into_bytes();
        input.extend_from_slice(b"TC1 after the line\n");
        let mut d = Duplex::new(&input);
        assert_eq!(answer_nonce(&mut d, boot_id()).unwrap(), nonce);
        let r = reply_of(&d.out);
        assert_eq!(r.boot_id, boot_id());
        assert!(r.verifies(&nonce));
        let mut other = nonce;
        other[3] ^= 1;
        assert!(!r.verifies(&other));
        assert_eq!(d.flushes, 1, "the reply is flushed");
        assert_eq!(
            d.input.position() as usize,
            input.len() - b"TC1 after the line\n".len(),
            "nothing after the nonce line is consumed"
        );
    }

    #[test]
    fn anything_but_a_nonce_line_is_refused_without_a_reply() {
        let ready = Message::Ready { boot_id: boot_id() }.encode();
        for (input, want) in [
            (&b"garbage\n"[..], "BadNonce"),
            (ready.as_bytes(), "BadNonce"),
            (&[b'x'; truecold_proto::MAX_LINE + 5][..], "BadNonce"),
            (&b"TC1 nonce value=00"[..], "Eof"),
            (&b""[..], "Eof"),
        ] {
            let mut d = Duplex::new(input);
            let e = answer_nonce(&mut d, boot_id()).unwrap_err();
            assert!(format!("{e:?}").starts_with(want), "{e:?}");
            assert!(d.out.is_empty(), "no reply to {input:?}");
        }
    }

    #[test]
    fn send_line_writes_the_encoded_line_and_flushes() {
        let mut d = Duplex::new(b"");
        let m = Message::Ready { boot_id: boot_id() };
        send_line(&mut d, &m).unwrap();
        assert_eq!(d.out, m.encode().into_bytes());
        assert_eq!(d.flushes, 1);
    }

    fn loopback() -> TcpListener {
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap()
    }

    /// The host's side: connect, write `line`, read the answer to EOF.
    fn host(port: u16, line: Vec<u8>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
            s.write_all(&line).unwrap();
            let mut back = Vec::new();
            let _ = s.read_to_end(&mut back);
            back
        })
    }

    #[test]
    fn tcp_round_trip_on_a_real_listener() {
        let l = loopback();
        let nonce: [u8; NONCE_LEN] = rand_bytes();
        let h = host(
            l.local_addr().unwrap().port(),
            Message::Nonce(nonce).encode().into_bytes(),
        );
        assert_eq!(
            tcp_proof(&l, boot_id(), Duration::from_secs(10)).unwrap(),
            nonce
        );
        let r = reply_of(&h.join().unwrap());
        assert!(r.verifies(&nonce) && r.boot_id == boot_id());
    }

    #[test]
    fn tcp_garbage_is_an_exchange_error_and_no_reply() {
        let l = loopback();
        let h = host(l.local_addr().unwrap().port(), b"hello\n".to_vec());
        let e = tcp_proof(&l, boot_id(), Duration::from_secs(10)).unwrap_err();
        assert!(
            matches!(e, TcpProofError::Exchange(ExchangeError::BadNonce(_))),
            "{e:?}"
        );
        assert!(h.join().unwrap().is_empty());
    }

    #[test]
    fn tcp_without_a_connection_gives_up_after_the_wait() {
        let l = loopback();
        let t0 = Instant::now();
        let e = tcp_proof(&l, boot_id(), Duration::from_millis(200)).unwrap_err();
        assert!(
            matches!(e, TcpProofError::NoConnection(d) if d == Duration::from_millis(200)),
            "{e:?}"
        );
        // It waited the whole bound before giving up (never early).
        assert!(
            t0.elapsed() >= Duration::from_millis(200),
            "{:?}",
            t0.elapsed()
        );
    }

    #[test]
    fn tcp_silent_host_is_bounded_by_the_same_wait() {
        let l = loopback();
        let port = l.local_addr().unwrap().port();
        let h = std::thread::spawn(move || {
            let s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
            std::thread::sleep(Duration::from_secs(2));
            drop(s);
        });
        let e = tcp_proof(&l, boot_id(), Duration::from_millis(300)).unwrap_err();
        // The read gave up at the bound (a timeout), not at the host's close 2 s later,
        // which would have been the end of the stream (`Eof`).
        match e {
            TcpProofError::Exchange(ExchangeError::Io {
                step: "read",
                source,
            }) => assert!(
                matches!(
                    source.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "{source:?}"
            ),
            other => panic!("{other:?}"),
        }
        h.join().unwrap();
    }

    fn rand_bytes() -> [u8; NONCE_LEN] {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let mut n = [0u8; NONCE_LEN];
        n.copy_from_slice(&t.to_le_bytes());
        n
    }
}
