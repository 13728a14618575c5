//! A tune's proposals (`truecold tune --propose`, `--propose-from`): the knobs chosen from an
//! attribution of the boot, each with the row it came from and why it addresses it
//! (`tune.json` schema 3, `proposals`). A proposal is a catalogue knob the attribution
//! showed the cost of, or a knob outside the catalogue ([`truecold_proto::tune::Proposed`]:
//! `initcall-blacklist-<fn>`, `kconfig-off-<SYMBOL>`), whose change its name says. Every
//! proposal is screened like any knob: one that breaks strict-ready is caught by the
//! contract (its arm's failed rows), never assumed safe.

use serde::{Deserialize, Serialize};
use truecold_proto::tune::{Knob, ProposedKind};

use crate::attribution::Instrument;

/// What an attribution row measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Evidence {
    /// An initcall's duration as the kernel measured it (`initcall_debug`).
    Initcall,
    /// A function's self time in the RIP profile (the time of the samples whose RIP it held,
    /// on the one clock when the VMM counted the samples it asked for, else samples × period).
    Function,
}

impl Evidence {
    pub fn as_str(self) -> &'static str {
        match self {
            Evidence::Initcall => "initcall",
            Evidence::Function => "function",
        }
    }
}

/// The attribution row a proposal came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProposalSource {
    /// The attribution bundle, as given.
    pub attribution: String,
    /// The instrument its launches were measured with.
    pub instrument: Instrument,
    pub evidence: Evidence,
    /// The initcall or function.
    pub name: String,
    /// What it cost the shown launch, ns.
    pub ns: u64,
    /// Why the knob addresses it.
    pub why: String,
}

/// One proposed knob and its source.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Proposal {
    pub knob: Knob,
    pub source: ProposalSource,
}

impl Proposal {
    /// One line: the knob, the row and its cost, why.
    pub fn line(&self) -> String {
        let s = &self.source;
        format!(
            "{}: {} `{}` {} ms ({}, {}): {}",
            self.knob,
            s.evidence.as_str(),
            s.name,
            crate::fmt::ms(s.ns),
            s.instrument,
            s.attribution,
            s.why
        )
    }
}

/// A proposal that was not screened: its kernel could not be got (its fragment did not
/// take, or the build failed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unbuilt {
    pub proposal: Proposal,
    /// The build's error, in a line.
    pub why: String,
}

/// Every way the proposals not screened disagree with the screened `knobs`: each a Kconfig
/// knob, not screened, with its error.
pub fn unbuilt_problems(unbuilt: &[Unbuilt], knobs: &[Knob]) -> Vec<String> {
    let mut bad = Vec::new();
    for u in unbuilt {
        let k = u.proposal.knob;
        if knobs.contains(&k) {
            bad.push(format!(
                "proposal `{k}` is recorded as not built but was screened"
            ));
        }
        if k.class() != truecold_proto::tune::KnobClass::Kconfig || u.why.is_empty() {
            bad.push(format!(
                "proposal `{k}` is recorded as not built: only a Kconfig knob's kernel is built, \
                 and the error is said"
            ));
        }
    }
    bad
}

/// Every way `proposals` disagree with the screened `knobs` (empty when they agree): each
/// proposal's knob screened and proposed once, a source that names a row, its cost and why,
/// and an `initcall-blacklist-<fn>` proposed from an initcall row names that initcall.
pub fn proposal_problems(proposals: &[Proposal], knobs: &[Knob]) -> Vec<String> {
    let mut bad = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for p in proposals {
        let k = p.knob;
        if !seen.insert(k) {
            bad.push(format!("proposal `{k}` twice"));
        }
        if !knobs.contains(&k) {
            bad.push(format!("proposal `{k}` is not a screened knob"));
        }
        let s = &p.source;
        if s.name.is_empty() || s.why.is_empty() || s.attribution.is_empty() || s.ns == 0 {
            bad.push(format!(
                "proposal `{k}`: its source names no row, cost, reason or attribution"
            ));
        }
        if let Some(q) = k.as_proposed() {
            if q.kind == ProposedKind::InitcallBlacklist
                && s.evidence == Evidence::Initcall
                && q.target != s.name
            {
                bad.push(format!(
                    "proposal `{k}` blacklists `{}`, its source row is the initcall `{}`",
                    q.target, s.name
                ));
            }
        }
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(knob: &str, evidence: Evidence, name: &str) -> Proposal {
        Proposal {
            knob: Knob::parse(knob).unwrap(),
            source: ProposalSource {
                attribution: "results/x".into(),
                instrument: Instrument::Initcall,
                evidence,
                name: name.into(),
                ns: 1_000_000,
                why: "it is slow".into(),
            },
        }
    }

    #[test]
    fn proposals_must_be_screened_once_and_name_their_row() {
        let ok = p(
            "initcall-blacklist-i8042_init",
            Evidence::Initcall,
            "i8042_init",
        );
        let knobs = vec![ok.knob];
        assert!(proposal_problems(std::slice::from_ref(&ok), &knobs).is_empty());
        assert_eq!(
            proposal_problems(&[ok.clone(), ok.clone()], &knobs),
            ["proposal `initcall-blacklist-i8042_init` twice"]
        );
        assert_eq!(
            proposal_problems(std::slice::from_ref(&ok), &[]),
            ["proposal `initcall-blacklist-i8042_init` is not a screened knob"]
        );
        let wrong = p(
            "initcall-blacklist-i8042_init",
            Evidence::Initcall,
            "pty_init",
        );
        assert_eq!(proposal_problems(&[wrong], &knobs).len(), 1);
        let mut free = ok.clone();
        free.source.ns = 0;
        assert_eq!(proposal_problems(&[free], &knobs).len(), 1);
        let j = serde_json::to_string(&ok).unwrap();
        assert!(
            j.contains(r#""knob":"initcall-blacklist-i8042_init""#),
            "{j}"
        );
        assert!(j.contains(r#""evidence":"initcall""#), "{j}");
        assert_eq!(serde_json::from_str::<Proposal>(&j).unwrap(), ok);
        assert!(ok.line().contains("i8042_init` 1.000 ms"), "{}", ok.line());
    }
}
