//! The vsock transport (`truecold.transport=vsock`): the same `TC1` lines as the serial
//! transport on one AF_VSOCK stream PID 1 opens to the host ([`HOST_CID`]:[`AGENT_PORT`]);
//! the VMM's hybrid vsock hands it to the bench as a Unix-socket connection.

use crate::error::InitError;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};
use truecold_init::exchange::{answer_nonce, send_line};
use truecold_proto::parity::{AGENT_PORT, HOST_CID};
use truecold_proto::{BootId, Message, NONCE_LEN};

/// After the record: how long PID 1 waits for the host's end of the stream (EOF or reset)
/// before it writes the exit code, so the record is not cut off in the device's queue.
pub const DRAIN_WAIT: Duration = Duration::from_secs(1);

/// The connected agent stream (reads and writes are plain `read(2)` / `write(2)`).
pub struct Vsock(File);

fn io_step(step: &'static str) -> impl FnOnce(io::Error) -> InitError {
    move |source| InitError::Vsock { step, source }
}

impl Vsock {
    /// `socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC)` and a blocking `connect` to
    /// [`HOST_CID`]:[`AGENT_PORT`].
    pub fn connect() -> Result<Self, InitError> {
        // SAFETY: plain socket(2) call, no pointers.
        let fd = unsafe { libc::socket(libc::AF_VSOCK, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io_step("socket")(io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just returned by socket(2) and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_vm is plain old data; all-zero is a valid value.
        let mut addr: libc::sockaddr_vm = unsafe { std::mem::zeroed() };
        addr.svm_family = libc::AF_VSOCK as libc::sa_family_t;
        addr.svm_cid = HOST_CID;
        addr.svm_port = AGENT_PORT;
        loop {
            // SAFETY: `addr` is a valid sockaddr_vm of the length passed; `fd` is open.
            let r = unsafe {
                libc::connect(
                    fd.as_raw_fd(),
                    (&addr as *const libc::sockaddr_vm).cast::<libc::sockaddr>(),
                    std::mem::size_of::<libc::sockaddr_vm>() as libc::socklen_t,
                )
            };
            if r == 0 {
                return Ok(Vsock(File::from(fd)));
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(io_step("connect")(e));
            }
        }
    }

    /// Writes one message line.
    pub fn send(&mut self, msg: &Message) -> Result<(), InitError> {
        send_line(&mut self.0, msg)
            .map_err(|e| InitError::agent(e, |step, source| InitError::Vsock { step, source }))
    }

    /// Reads the host's one line (bounded), which must be the nonce, and sends the reply
    /// bound to it and `boot_id`.
    pub fn answer(&mut self, boot_id: BootId) -> Result<[u8; NONCE_LEN], InitError> {
        answer_nonce(&mut self.0, boot_id)
            .map_err(|e| InitError::agent(e, |step, source| InitError::Vsock { step, source }))
    }

    /// After the record: `shutdown(SHUT_WR)` (queued behind the record on the device's TX
    /// queue), then waits at most [`DRAIN_WAIT`] for the host's EOF or reset, which can only
    /// come once the VMM has taken everything before the shutdown. Best effort: the exit
    /// code follows in any case.
    pub fn drain(self) {
        let fd = self.0.as_raw_fd();
        // SAFETY: `fd` is the open socket `self` owns.
        if unsafe { libc::shutdown(fd, libc::SHUT_WR) } != 0 {
            return;
        }
        let tv = libc::timeval {
            tv_sec: DRAIN_WAIT.as_secs() as libc::time_t,
            tv_usec: DRAIN_WAIT.subsec_micros() as libc::suseconds_t,
        };
        // SAFETY: `tv` is a valid timeval of the length passed; `fd` is open.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast::<libc::c_void>(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return;
        }
        let mut f = self.0;
        let mut buf = [0u8; 256];
        let t0 = Instant::now();
        while t0.elapsed() < DRAIN_WAIT {
            match f.read(&mut buf) {
                // More from the host after the record is ignored; EOF, a reset, the
                // timeout or DRAIN_WAIT in all ends the wait.
                Ok(n) if n > 0 => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                _ => return,
            }
        }
    }
}
