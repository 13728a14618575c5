//! A user's own kernel config, as `truecold tune` and `truecold bisect` record it: how a
//! config is read ([`parse_config`]), which of its symbols the resolved config did not keep
//! ([`not_carried`]), and the record a tune's `tune.json` and a bisect's `bisect.json` hold of
//! it ([`UserKernel`]: the file's form and digest, the file itself beside the record as
//! [`USER_KERNEL_FILE`]). One definition: the bench reads and builds with these, the verifier
//! recomputes them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::fsio::{read_capped, MAX_PARSED_BYTES};
use crate::verdict::{Check, Verdict};

/// The user's config file as given, in a tune or bisect directory (beside its record).
pub const USER_KERNEL_FILE: &str = "user-kernel.config";

/// A config's assignments: `CONFIG_X` → value (`n` for "is not set"); the last line naming
/// a symbol wins, as Kconfig reads a `.config`.
pub fn parse_config(text: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            if let Some(sym) = rest.strip_suffix(" is not set") {
                if sym.starts_with("CONFIG_") {
                    m.insert(sym.to_string(), "n".to_string());
                }
            }
        } else if let Some((k, v)) = line.split_once('=') {
            if k.starts_with("CONFIG_") {
                m.insert(k.to_string(), v.to_string());
            }
        }
    }
    m
}

/// What the user's config file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConfigForm {
    /// A complete `.config` (`--kernel-config`): resolved by `olddefconfig` alone.
    Full,
    /// Kconfig lines over truecold's base guest (`--kernel-fragment`): merged after
    /// tinyconfig and `kernel-config/base.config`; the last line naming a symbol wins.
    Fragment,
}

impl ConfigForm {
    /// The `truecold run` / `tune` / `bisect` flag that takes a file of this form.
    pub fn flag(self) -> &'static str {
        match self {
            ConfigForm::Full => "--kernel-config",
            ConfigForm::Fragment => "--kernel-fragment",
        }
    }
}

/// One symbol of the given config that the resolved config does not hold as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotCarried {
    pub symbol: String,
    pub given: String,
    /// `None`: the symbol is gone (not in this source's Kconfig, or its dependencies off).
    pub resolved: Option<String>,
}

impl std::fmt::Display for NotCarried {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.resolved {
            Some(r) => write!(f, "{}: given {}, resolved {r}", self.symbol, self.given),
            None => write!(f, "{}: given {}, gone", self.symbol, self.given),
        }
    }
}

/// The symbols `given` sets that `resolved` does not hold as given. A symbol `given` leaves
/// unset (`n`) and `resolved` does not mention is carried (absent is unset).
pub fn not_carried(
    given: &BTreeMap<String, String>,
    resolved: &BTreeMap<String, String>,
) -> Vec<NotCarried> {
    given
        .iter()
        .filter_map(|(sym, g)| match resolved.get(sym) {
            Some(r) if r == g => None,
            None if g == "n" => None,
            r => Some(NotCarried {
                symbol: sym.clone(),
                given: g.clone(),
                resolved: r.cloned(),
            }),
        })
        .collect()
}

/// [`not_carried`] of two config texts, each as its line ([`NotCarried`]'s `Display`): what
/// a record lists.
pub fn not_carried_lines(given: &str, resolved: &str) -> Vec<String> {
    not_carried(&parse_config(given), &parse_config(resolved))
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// A user's kernel as a tune or a bisect recorded it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserKernel {
    /// A complete `.config`, or a fragment over truecold's base.
    pub form: ConfigForm,
    /// sha256 of [`USER_KERNEL_FILE`], the file as given.
    pub sha256: String,
    /// The file's path as given on the command line (informative).
    pub given_as: String,
    /// `--kernel-source` as given (a tune; a bisect's tree is its `source`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The symbols of the file that the baseline's resolved config does not hold as given
    /// ([`not_carried_lines`] of the file and the baseline's `config`).
    pub not_carried: Vec<String>,
}

/// Whether `config` sets every symbol of the Kconfig `fragment` as the fragment does (a
/// symbol the fragment unsets is set when `config` unsets or omits it): a knob whose fragment
/// this holds for changes nothing.
pub fn sets_all(config: &str, fragment: &str) -> bool {
    not_carried(&parse_config(fragment), &parse_config(config)).is_empty()
}

/// The directory's user's kernel against its record `kernel` (`None`: the record names
/// none): [`USER_KERNEL_FILE`] is there exactly when a record is, with the recorded sha256,
/// and the recorded symbols that did not carry over are what it and `base_config` (the
/// baseline's resolved config) give.
pub fn check_user_kernel(
    v: &mut Verdict,
    dir: &Path,
    kernel: Option<&UserKernel>,
    base_config: &Path,
) {
    let p = dir.join(USER_KERNEL_FILE);
    let present = crate::fsio::exists_here(&p);
    let Some(k) = kernel else {
        if present {
            v.add_file(
                Check::UserKernel,
                USER_KERNEL_FILE,
                format!("`{USER_KERNEL_FILE}` is here but the record names no user's kernel"),
            );
        }
        return;
    };
    let bytes = match read_capped(&p, MAX_PARSED_BYTES) {
        Ok(Some(b)) if crate::fsio::is_real_file(&p) => b,
        _ => {
            v.add_file(
                Check::UserKernel,
                USER_KERNEL_FILE,
                format!(
                    "`{USER_KERNEL_FILE}` (the user's kernel config the record names) is \
                     missing or unreadable"
                ),
            );
            return;
        }
    };
    let got = crate::digest::sha256_hex(&bytes);
    if got != k.sha256 {
        v.add_file(
            Check::UserKernel,
            USER_KERNEL_FILE,
            format!(
                "`{USER_KERNEL_FILE}` has sha256 {got}; the record says {}",
                k.sha256
            ),
        );
    }
    if let Ok(Some(c)) = read_capped(base_config, MAX_PARSED_BYTES) {
        let want = not_carried_lines(
            &String::from_utf8_lossy(&bytes),
            &String::from_utf8_lossy(&c),
        );
        if want != k.not_carried {
            v.add(
                Check::UserKernel,
                format!(
                    "the record's symbols that did not carry over [{}] are not what \
                     `{USER_KERNEL_FILE}` and the baseline's config give [{}]",
                    k.not_carried.join("; "),
                    want.join("; ")
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_is_read_as_kconfig_reads_it() {
        let m = parse_config(
            "#\n# Automatically generated file; DO NOT EDIT.\nCONFIG_A=y\n# CONFIG_B is not set\n\
             CONFIG_C=\"x y\"\nCONFIG_A=m\n# CONFIG_D is not set or so\nNOT_CONFIG=y\n",
        );
        assert_eq!(m.get("CONFIG_A").map(String::as_str), Some("m"));
        assert_eq!(m.get("CONFIG_B").map(String::as_str), Some("n"));
        assert_eq!(m.get("CONFIG_C").map(String::as_str), Some("\"x y\""));
        assert_eq!(m.len(), 3, "{m:?}");
    }

    #[test]
    fn symbols_that_did_not_carry_over_are_listed() {
        let given =
            "CONFIG_A=y\nCONFIG_B=y\n# CONFIG_C is not set\n# CONFIG_D is not set\nCONFIG_E=16\n";
        let resolved = "CONFIG_A=y\nCONFIG_C=y\nCONFIG_E=32\nCONFIG_NEW=y\n";
        assert_eq!(
            not_carried_lines(given, resolved),
            [
                "CONFIG_B: given y, gone",
                "CONFIG_C: given n, resolved y",
                "CONFIG_E: given 16, resolved 32",
            ]
        );
    }

    #[test]
    fn the_form_reads_and_writes_kebab_case_and_names_its_flag() {
        assert_eq!(
            serde_json::to_string(&ConfigForm::Full).unwrap(),
            "\"full\""
        );
        assert_eq!(ConfigForm::Fragment.flag(), "--kernel-fragment");
    }
}
