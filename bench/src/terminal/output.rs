//! What `truecold` prints besides the summary: notes and warnings on stderr, silenced by
//! `--quiet` (`-q`) for the whole process, and the progress display
//! ([`super::progress`]), hidden alike. Errors are never silenced: they are printed with
//! `eprintln!` directly.

use std::sync::atomic::{AtomicBool, Ordering};

static QUIET: AtomicBool = AtomicBool::new(false);

/// `--quiet`: no progress, no notes, no warnings for the rest of the process.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether `--quiet` was given.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// `eprintln!` unless `--quiet`: a note or a warning, never an error.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {
        if !$crate::terminal::output::quiet() {
            eprintln!($($arg)*);
        }
    };
}

/// The notes already printed, by their text ([`note_once`]).
static SHOWN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Prints `line` (a note about `what`, e.g. a warning's text) on stderr unless `--quiet`, and
/// remembers `what`: the end-of-run summary leaves out what was already said
/// ([`already_shown`]), so a warning printed before the first launch is not printed again.
pub fn note_once(what: &str, line: &str) {
    let mut shown = SHOWN.lock().unwrap_or_else(|p| p.into_inner());
    if shown.iter().any(|s| s == what) {
        return;
    }
    shown.push(what.to_string());
    drop(shown);
    if !quiet() {
        eprintln!("{line}");
    }
}

/// Whether [`note_once`] printed (or, with `--quiet`, would have printed) `what`.
pub fn already_shown(what: &str) -> bool {
    SHOWN
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .any(|s| s == what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_remembered_once() {
        let w = "output test: a warning only this test prints";
        assert!(!already_shown(w));
        note_once(w, &format!("truecold: warning: {w}"));
        assert!(already_shown(w));
        note_once(w, "never printed");
        assert_eq!(SHOWN.lock().unwrap().iter().filter(|s| *s == w).count(), 1);
    }
}
