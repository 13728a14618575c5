//! What the bundle says of its host and harness, against its rows: the observer's own
//! files (a parity bundle's lifecycle), the nested harness, the residue.

use std::collections::BTreeMap;

use super::files::*;
use crate::digest::{is_sha256_hex, sha256_hex};
use crate::fsio::MAX_PARSED_BYTES;
use crate::schema::{HostKind, Observer, ResultJson, Sample};
use crate::verdict::{Check, Verdict};

/// The observer's own files and columns: an agent bundle's lifecycle; no cleanup column
/// nor parity record under any other observer.
pub(super) fn check_observer(
    v: &mut Verdict,
    r: &ResultJson,
    s: &[Sample],
    files: &BTreeMap<String, Entry>,
) {
    if r.contract.observer == Observer::Agent {
        let csv = files.get(crate::lifecycle::STATE_CSV).map(|f| {
            f.reread(MAX_PARSED_BYTES)?.ok_or_else(|| {
                std::io::Error::other(format!("larger than {MAX_PARSED_BYTES} bytes"))
            })
        });
        check_lifecycle_file(v, r, s, csv);
        return;
    }
    if s.iter()
        .any(|x| x.cleanup_ok.is_some() || x.cleanup_ns.is_some())
    {
        v.add(
            Check::Lifecycle,
            "cleanup columns filled in a bundle whose observer is not `agent`".to_string(),
        );
    }
    if r.environment.parity.is_some() {
        v.add(
            Check::Lifecycle,
            "environment.parity in a bundle whose observer is not `agent`".to_string(),
        );
    }
}

/// The parity contract's `state.csv`: read, every launch's lifecycle complete by the one rule,
/// and every successful row's launch ended `ok`.
fn check_lifecycle_file(
    v: &mut Verdict,
    r: &ResultJson,
    samples: &[Sample],
    csv: Option<std::io::Result<Vec<u8>>>,
) {
    use crate::lifecycle::{check_lifecycle, read_csv, OUTCOME_OK, STATE_CSV};
    let bytes = match csv {
        None => {
            return v.add(
                Check::Lifecycle,
                format!("`{STATE_CSV}` is missing (every parity bundle carries its lifecycle)"),
            )
        }
        Some(Err(e)) => return v.add(Check::Lifecycle, format!("`{STATE_CSV}`: {e}")),
        Some(Ok(b)) => b,
    };
    match &r.environment.parity {
        None => v.add(
            Check::Lifecycle,
            "environment.parity is missing (every parity bundle states its lifecycle digest)"
                .to_string(),
        ),
        Some(p) if p.journal != crate::lifecycle::JOURNAL => v.add(
            Check::Lifecycle,
            format!(
                "environment.parity.journal is `{}`, not the contract's `{}`",
                p.journal,
                crate::lifecycle::JOURNAL
            ),
        ),
        Some(p) if p.state_sha256 != sha256_hex(&bytes) => v.add(
            Check::Lifecycle,
            format!(
                "environment.parity.state_sha256 is {}, `{STATE_CSV}` hashes to {}",
                p.state_sha256,
                sha256_hex(&bytes)
            ),
        ),
        Some(_) => {}
    }
    let rows = match read_csv(&bytes) {
        Ok(r) => r,
        Err(e) => return v.add(Check::Lifecycle, format!("`{STATE_CSV}`: {e}")),
    };
    for f in check_lifecycle(&rows, samples.len() as u64) {
        v.add(Check::Lifecycle, format!("`{STATE_CSV}`: {f}"));
    }
    // Each launch's lifecycle against its row: CREATED before the request, RUNNING after it
    // and before strict-ready (the contract: persisted before it is declared).
    for s in samples {
        let Some(row) = rows.iter().find(|r| r.idx == s.index) else {
            continue;
        };
        let req = s.actual_request_ns;
        let early = row.created_ns.is_some_and(|c| c > req)
            || row.running_ns.is_some_and(|r| r < req)
            || matches!((row.running_ns, s.ready_ns), (Some(r), Some(ready)) if r > ready)
            || (s.ready_ns.is_some() && row.running_ns.is_none());
        if early {
            v.add(
                Check::Lifecycle,
                format!(
                    "row {}: its lifecycle (created {}, running {}) is not CREATED before \
                     the request and RUNNING between the request and strict-ready ({})",
                    s.index,
                    crate::fmt::opt_ns(row.created_ns),
                    crate::fmt::opt_ns(row.running_ns),
                    crate::fmt::opt_ns(s.ready_ns)
                ),
            );
        }
    }
    for s in samples.iter().filter(|s| s.ok) {
        let ended = rows.iter().find(|r| r.idx == s.index);
        if ended.and_then(|r| r.outcome.as_deref()) != Some(OUTCOME_OK) {
            v.add(
                Check::Lifecycle,
                format!(
                    "row {} is a success, but its launch's lifecycle did not end `{OUTCOME_OK}`",
                    s.index
                ),
            );
        }
    }
}

/// `environment.nested` (schema 7+): present exactly in a `nested-emulated` bundle; absent
/// before schema 7.
pub(super) fn check_nested(v: &mut Verdict, r: &ResultJson) {
    let nested_host = r.environment.host_kind == HostKind::NestedEmulated;
    match (&r.environment.nested, r.schema_version >= 7, nested_host) {
        (None, true, true) => v.add(
            Check::NestedHarness,
            "environment.nested is missing (every schema-7 nested-emulated bundle names L1's \
             seed and the L0 QEMU)"
                .to_string(),
        ),
        (Some(_), true, false) => v.add(
            Check::NestedHarness,
            format!(
                "environment.nested is present in a bundle whose host kind is {}",
                r.environment.host_kind.as_str()
            ),
        ),
        (Some(_), false, _) => v.add(
            Check::NestedHarness,
            format!(
                "environment.nested is present in a schema-{} bundle (schema 7 added it)",
                r.schema_version
            ),
        ),
        (Some(h), true, true) => match (&h.l1_kernel_sha256, r.schema_version >= 9) {
            (None, true) => v.add(
                Check::NestedHarness,
                "environment.nested.l1_kernel_sha256 is missing (every schema-9 nested bundle \
                 names the L1 kernel its virtual clock ran on)"
                    .to_string(),
            ),
            (Some(d), true) if !is_sha256_hex(d) => v.add(
                Check::NestedHarness,
                format!("environment.nested.l1_kernel_sha256 {d:?} is not 64 lowercase hex digits"),
            ),
            _ if [&h.l1_init_sha256, &h.bench_sha256]
                .into_iter()
                .flatten()
                .any(|d| !is_sha256_hex(d)) =>
            {
                v.add(
                    Check::NestedHarness,
                    "environment.nested.l1_init_sha256 or bench_sha256 is not 64 lowercase hex \
                     digits"
                        .to_string(),
                )
            }
            (Some(_), false) => v.add(
                Check::NestedHarness,
                format!(
                    "environment.nested.l1_kernel_sha256 is present in a schema-{} bundle \
                     (schema 9 added it)",
                    r.schema_version
                ),
            ),
            _ => {}
        },
        _ => {}
    }
}

/// `environment.residue` (schema 6+): present, its leaks recomputed exactly from its two
/// readings, each leak also a warning.
pub(super) fn check_residue(v: &mut Verdict, r: &ResultJson) {
    let env = &r.environment;
    let Some(res) = &env.residue else {
        if r.schema_version >= 6 {
            v.add(
                Check::Residue,
                "environment.residue is missing (every schema-6 bundle records what the \
                 campaign left behind)"
                    .to_string(),
            );
        }
        return;
    };
    let again = crate::residue::leaks(&res.before, &res.after);
    if again != res.leaks {
        v.add(
            Check::Residue,
            format!(
                "environment.residue.leaks is [{}]; its readings give [{}]",
                res.leaks.join("; "),
                again.join("; ")
            ),
        );
    }
    for l in &res.leaks {
        if !env.warnings.contains(l) {
            v.add(
                Check::Residue,
                format!("the leak `{l}` is not among environment.warnings"),
            );
        }
    }
}
