//! The serial transport (`truecold.transport=serial`): `TC1` lines on ttyS0, the 8250 every
//! engine has. Raw mode (no echo, no line editing, no `\n` → `\r\n`), so the bytes on the
//! wire are exactly the lines; every line is drained (`tcdrain`) before the next step, so the
//! record has left the UART before the exit port stops the VM.

use crate::error::InitError;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use truecold_init::exchange::{answer_nonce, send_line};
use truecold_proto::{BootId, Message, NONCE_LEN};

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
        send_line(self, msg)
            .map_err(|e| InitError::agent(e, |step, source| InitError::Serial { step, source }))
    }

    /// Reads the host's one line (bounded), which must be the nonce, and sends the reply
    /// bound to it and `boot_id` (drained).
    pub fn answer(&mut self, boot_id: BootId) -> Result<[u8; NONCE_LEN], InitError> {
        answer_nonce(self, boot_id)
            .map_err(|e| InitError::agent(e, |step, source| InitError::Serial { step, source }))
    }
}

impl Read for Serial {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

/// `flush` is `tcdrain`: it returns once the UART has sent everything written.
impl Write for Serial {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        loop {
            // SAFETY: the fd is an open tty owned by `self`.
            if unsafe { libc::tcdrain(self.0.as_raw_fd()) } == 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}
