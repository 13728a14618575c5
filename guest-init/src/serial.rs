//! The serial transport (`truecold.transport=serial`): `TC1` lines on ttyS0, the 8250 every
//! engine has. Raw mode (no echo, no line editing, no `\n` → `\r\n`), so the bytes on the
//! wire are exactly the lines; every line is drained (`tcdrain`) before the next step, so the
//! record has left the UART before the exit port stops the VM.

use crate::error::InitError;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use truecold_init::{nonce_from_line, read_line_bounded, LineRead, NonceLineError};
use truecold_proto::{Message, NONCE_LEN};

const TTY: &str = "/dev/ttyS0";

/// ttyS0, open and raw.
pub struct Serial(File);

fn io_step(step: &'static str) -> impl FnOnce(io::Error) -> InitError {
    move |source| InitError::Serial { step, source }
}

impl Serial {
    /// Opens ttyS0 (`O_RDWR | O_NOCTTY | O_CLOEXEC`) and makes it raw: `cfmakeraw`, receiver
    /// on, modem lines ignored, `VMIN = 1`, `VTIME = 0` (a read blocks until a byte arrives).
    pub fn open() -> Result<Self, InitError> {
        let f = File::options()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
            .open(TTY)
            .map_err(io_step("open /dev/ttyS0"))?;
        let fd = f.as_raw_fd();
        // SAFETY: termios is plain old data; all-zero is a valid value, overwritten next.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is an open tty owned by `f`; `t` is a valid, writable termios.
        if unsafe { libc::tcgetattr(fd, &mut t) } != 0 {
            return Err(io_step("tcgetattr")(io::Error::last_os_error()));
        }
        // SAFETY: `t` is a valid termios.
        unsafe { libc::cfmakeraw(&mut t) };
        t.c_cflag |= libc::CREAD | libc::CLOCAL;
        t.c_cc[libc::VMIN] = 1;
        t.c_cc[libc::VTIME] = 0;
        // SAFETY: `fd` is an open tty; `t` is a valid termios read from it and edited above.
        if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &t) } != 0 {
            return Err(io_step("tcsetattr")(io::Error::last_os_error()));
        }
        Ok(Serial(f))
    }

    /// Writes one message line and waits until the UART has sent it.
    pub fn send(&mut self, msg: &Message) -> Result<(), InitError> {
        self.0
            .write_all(msg.encode().as_bytes())
            .map_err(io_step("write"))?;
        loop {
            // SAFETY: the fd is an open tty owned by `self`.
            if unsafe { libc::tcdrain(self.0.as_raw_fd()) } == 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(io_step("tcdrain")(e));
            }
        }
    }

    /// Reads the host's one line (bounded) and decodes it as the nonce.
    pub fn read_nonce(&mut self) -> Result<[u8; NONCE_LEN], InitError> {
        match read_line_bounded(&mut self.0).map_err(io_step("read"))? {
            LineRead::Line(line) => nonce_from_line(&line).map_err(InitError::BadNonce),
            LineRead::TooLong => Err(InitError::BadNonce(NonceLineError::TooLong)),
            LineRead::Eof => Err(io_step("read")(io::ErrorKind::UnexpectedEof.into())),
        }
    }
}
