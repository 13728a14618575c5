//! Port I/O to the truecold device (see `truecold_proto`): user-mode `in`/`out` after `ioperm`.

use crate::error::InitError;
use std::io;
use truecold_proto::{
    Phase, NONCE_LEN, PORT_CHALLENGE, PORT_DOORBELL, PORT_EXIT, PORT_FIRST, PORT_LAST, PORT_RECORD,
};

/// Proof that `ioperm` granted this process the truecold ports.
#[derive(Clone, Copy)]
pub struct Ports(());

impl Ports {
    /// Asks the kernel for the four truecold ports.
    pub fn open() -> Result<Self, InitError> {
        let n = libc::c_ulong::from(PORT_LAST - PORT_FIRST + 1);
        // SAFETY: ioperm only changes this process's I/O permission bitmap.
        let r = unsafe { libc::ioperm(libc::c_ulong::from(PORT_FIRST), n, 1) };
        if r != 0 {
            return Err(InitError::Ioperm(io::Error::last_os_error()));
        }
        Ok(Ports(()))
    }

    fn outb(self, port: u16, v: u8) {
        // SAFETY: `self` proves ioperm granted `port`; `out` touches no memory.
        unsafe {
            core::arch::asm!("out dx, al", in("dx") port, in("al") v, options(nomem, nostack, preserves_flags))
        };
    }

    /// Rings the doorbell with `phase`.
    pub fn doorbell(self, phase: Phase) {
        self.outb(PORT_DOORBELL, phase as u8);
    }

    /// Reads the host's nonce with one `rep insb`.
    pub fn nonce(self) -> [u8; NONCE_LEN] {
        let mut buf = [0u8; NONCE_LEN];
        // SAFETY: ioperm granted PORT_CHALLENGE; `rep insb` writes exactly rcx = NONCE_LEN
        // bytes at rdi = buf, which is NONCE_LEN bytes long; the direction flag is clear
        // per the ABI.
        unsafe {
            core::arch::asm!("rep insb", in("dx") PORT_CHALLENGE, inout("rdi") buf.as_mut_ptr() => _,
                inout("rcx") NONCE_LEN => _, options(nostack, preserves_flags));
        }
        buf
    }

    /// Sends `bytes` to the record port with one `rep outsb`.
    pub fn send(self, bytes: &[u8]) {
        // SAFETY: ioperm granted PORT_RECORD; `rep outsb` reads exactly rcx = len bytes
        // from rsi = bytes; the direction flag is clear per the ABI.
        unsafe {
            core::arch::asm!("rep outsb", in("dx") PORT_RECORD, inout("rsi") bytes.as_ptr() => _,
                inout("rcx") bytes.len() => _, options(nostack, preserves_flags, readonly));
        }
    }

    /// Writes the final code; the host stops the VM here.
    pub fn exit(self, code: u8) {
        self.outb(PORT_EXIT, code);
    }
}
