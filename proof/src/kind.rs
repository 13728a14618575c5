//! The kinds of directory `verify` and `report` know — a bundle, a multi-arm directory, a
//! tune, a bisect, a fleet — and the one trait each kind implements ([`DirKind`]). Which kind a
//! directory is comes from the record that marks it ([`Kind::of`]); the one place that
//! turns a kind into its implementation is [`crate::verify`], above every kind. This module
//! sits below them all: a kind implements [`DirKind`] in its own module.

use std::path::Path;

use crate::names::{ARMS_FILE, BISECT_FILE, FLEET_FILE, TUNE_FILE};
use crate::verdict::{Verdict, VerifyOptions};

/// The kinds of directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Fleet,
    Bisect,
    Tune,
    Arms,
    Bundle,
}

impl Kind {
    /// Every kind, in the order [`Kind::of`] looks for their markers.
    pub const ALL: [Kind; 5] = [
        Kind::Fleet,
        Kind::Bisect,
        Kind::Tune,
        Kind::Arms,
        Kind::Bundle,
    ];

    /// The record whose presence makes a directory of this kind; `None` for a bundle, the
    /// kind of a directory that holds none of the other kinds' markers.
    pub fn marker(self) -> Option<&'static str> {
        match self {
            Kind::Fleet => Some(FLEET_FILE),
            Kind::Bisect => Some(BISECT_FILE),
            Kind::Tune => Some(TUNE_FILE),
            Kind::Arms => Some(ARMS_FILE),
            Kind::Bundle => None,
        }
    }

    /// Whether `dir` holds this kind's marker (anything by that name, even a link: the
    /// kind's verifier says what is wrong with it); never for a bundle, which has none.
    pub fn is_marked(self, dir: &Path) -> bool {
        self.marker()
            .is_some_and(|m| dir.join(m).symlink_metadata().is_ok())
    }

    /// The kind of `dir`: the first of [`Kind::ALL`] whose marker it holds
    /// ([`Kind::is_marked`]), else a bundle.
    pub fn of(dir: &Path) -> Kind {
        Kind::ALL
            .into_iter()
            .find(|k| k.is_marked(dir))
            .unwrap_or(Kind::Bundle)
    }

    /// The kind in words, with its article (`a bundle`, `a multi-arm directory`, …).
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Fleet => "a fleet directory",
            Kind::Bisect => "a bisect directory",
            Kind::Tune => "a tune directory",
            Kind::Arms => "a multi-arm directory",
            Kind::Bundle => "a bundle",
        }
    }
}

/// What every kind of directory does: it is verified, and `report` regenerates its
/// generated files (never its records) when every other file still matches its
/// `SHA256SUMS` entry.
pub trait DirKind {
    /// The kind this is the implementation of (its marker: [`Kind::marker`]).
    const KIND: Kind;
    /// Why `report` could not regenerate a directory of this kind.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Verifies the directory `dir` of this kind with `opts` (its `report.html`, a page
    /// every kind may carry, aside: [`crate::verify::verify_dir_with`] checks it).
    fn verify(dir: &Path, opts: &VerifyOptions) -> Verdict;

    /// Whether `report` regenerates the file `name` (a path relative to `dir`, as its
    /// `SHA256SUMS` lists it) of the directory `dir`: a reason about such a file is one
    /// `report` cures.
    fn is_generated(dir: &Path, name: &str) -> bool;

    /// `report DIR` on a directory of this kind: every generated file rewritten from the
    /// records, then `SHA256SUMS`; refused when a file that is not regenerated differs from
    /// its `SHA256SUMS` entry (regenerating would launder the change). Returns the paths
    /// rewritten.
    fn regenerate(dir: &Path) -> Result<Vec<String>, Self::Error>;
}
