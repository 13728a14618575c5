//! PID 1's panic path. A panicking PID 1 would otherwise leave a guest that never writes an
//! exit code, which the host can only score as a deadline failure. The hook says what
//! happened on the console, writes [`ErrorCode::Panic`] to the exit port (the host stops the
//! VM there and reports the guest's own error kind), and only then tries to power off.
//!
//! The exit port and the power-off are injected, so the hook is tested on the host.

use std::fmt::Display;
use std::io::Write;
use truecold_proto::ErrorCode;

/// The exit code a panicking PID 1 writes.
pub const PANIC_CODE: u8 = ErrorCode::Panic as u8;

/// What the hook does with one panic: the message on `console`, then the code through `exit`
/// (when the exit port could be opened; without it nothing can reach the host).
pub fn on_panic(info: &dyn Display, console: &mut dyn Write, exit: Option<&dyn Fn(u8)>) {
    let _ = writeln!(console, "truecold-init: panic: {info}");
    let _ = console.flush();
    if let Some(exit) = exit {
        exit(PANIC_CODE);
    }
}

/// Installs the process's panic hook: [`on_panic`] with the console on stderr, then
/// `power_off` (which should not return; if it does, the panic continues as usual).
pub fn install<E, P>(exit: Option<E>, power_off: P)
where
    E: Fn(u8) + Send + Sync + 'static,
    P: Fn() + Send + Sync + 'static,
{
    std::panic::set_hook(Box::new(move |info| {
        on_panic(
            info,
            &mut std::io::stderr(),
            exit.as_ref().map(|e| e as &dyn Fn(u8)),
        );
        power_off();
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn the_panic_code_is_its_own_error_kind() {
        assert_eq!(PANIC_CODE, 90);
        assert_eq!(ErrorCode::from_byte(PANIC_CODE), Ok(ErrorCode::Panic));
        assert_eq!(ErrorCode::Panic.name(), "panic");
        assert_eq!(
            ErrorCode::ALL
                .iter()
                .filter(|c| **c as u8 == PANIC_CODE)
                .count(),
            1,
            "no other code shares the byte"
        );
    }

    #[test]
    fn on_panic_prints_then_writes_the_code_to_the_exit_port() {
        let events = Mutex::new(Vec::<String>::new());
        let mut console = Vec::new();
        let exit = |c: u8| events.lock().unwrap().push(format!("exit {c}"));
        on_panic(&"index out of bounds", &mut console, Some(&exit));
        assert_eq!(
            String::from_utf8(console).unwrap(),
            "truecold-init: panic: index out of bounds\n"
        );
        assert_eq!(*events.lock().unwrap(), vec!["exit 90".to_string()]);
        // Without the port the message is all there is.
        let mut console = Vec::new();
        on_panic(&"early", &mut console, None);
        assert_eq!(console, b"truecold-init: panic: early\n");
    }

    #[test]
    fn the_installed_hook_writes_the_exit_code_before_powering_off() {
        let events = Arc::new(Mutex::new(Vec::<String>::new()));
        let (e1, e2) = (events.clone(), events.clone());
        install(
            Some(move |c: u8| e1.lock().unwrap().push(format!("exit {c}"))),
            move || e2.lock().unwrap().push("power off".into()),
        );
        let r = std::panic::catch_unwind(|| panic!("pid 1 broke"));
        // Back to the default hook before anything can fail here.
        let _ = std::panic::take_hook();
        assert!(r.is_err());
        let ev = events.lock().unwrap().clone();
        let at = ev
            .iter()
            .position(|e| e == "exit 90")
            .expect("the hook wrote the panic code");
        assert_eq!(
            ev.get(at + 1).map(String::as_str),
            Some("power off"),
            "{ev:?}"
        );
    }
}
