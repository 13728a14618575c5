//! Ctrl-C: the first SIGINT asks the campaign to stop launching (in-flight samples finish,
//! a partial bundle marked incomplete is written); a second one exits at once (status 130).

use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the first SIGINT.
pub static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_sig: libc::c_int) {
    if STOP.swap(true, Ordering::SeqCst) {
        // SAFETY: _exit is async-signal-safe; the user asked twice.
        unsafe { libc::_exit(130) };
    }
}

/// Errors installing the handler.
#[derive(Debug, thiserror::Error)]
#[error("installing the SIGINT handler")]
pub struct InstallError(#[source] std::io::Error);

/// Installs the SIGINT handler (idempotent).
pub fn install() -> Result<&'static AtomicBool, InstallError> {
    // SAFETY: all-zero is a valid sigaction; the fields are set below.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = on_sigint as *const () as usize;
    sa.sa_flags = libc::SA_RESTART;
    // SAFETY: `sa.sa_mask` is a valid sigset_t to initialise.
    unsafe { libc::sigemptyset(&mut sa.sa_mask) };
    // SAFETY: `sa` is fully initialised; the handler only touches an atomic and _exit,
    // both async-signal-safe; the old action is not needed.
    let rc = unsafe { libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(InstallError(std::io::Error::last_os_error()));
    }
    Ok(&STOP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sigint_sets_the_stop_flag() {
        let stop = install().unwrap();
        assert!(!stop.load(Ordering::SeqCst));
        // SAFETY: raising a signal whose handler was just installed.
        unsafe { libc::raise(libc::SIGINT) };
        assert!(stop.load(Ordering::SeqCst));
        // Reset for any other test in this process; never raise twice here (that exits).
        STOP.store(false, Ordering::SeqCst);
    }
}
