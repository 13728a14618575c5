//! What several commands' flags share: the per-launch deadline in effect (`run`, `tune`, a
//! bisect's campaigns) and the attribution launches' instrumentation (`run`, `tune`).

use super::arg_error::ArgError;
use crate::attribution::instrumentation::{default_period, Instrument, Instrumentation};
use crate::cli::InstrumentArgs;

/// Default deadline of a campaign on a real host.
pub const DEFAULT_DEADLINE_MS: u64 = 2_000;
/// Default deadline inside the nested harness, where L1 and L2 both run under emulation.
pub const DEFAULT_NESTED_DEADLINE_MS: u64 = 300_000;

/// The per-launch deadline in effect: the one given, else the default where it runs.
pub fn deadline_ms(given: Option<u64>, nested: bool) -> u64 {
    given.unwrap_or(if nested {
        DEFAULT_NESTED_DEADLINE_MS
    } else {
        DEFAULT_DEADLINE_MS
    })
}

/// The attribution launches' instrumentation `--attribution-instrument` and
/// `--attribution-sample-us` ask for (`truecold run`, `truecold tune`); a period given to
/// `initcall` (which samples nothing) is refused, never dropped.
pub fn instrumentation(a: &InstrumentArgs) -> Result<Instrumentation, ArgError> {
    let i = Instrumentation {
        instrument: a.attribution_instrument,
        period: a.attribution_sample_us,
    };
    if i.instrument != Instrument::Rip && i.period != default_period() {
        return Err(ArgError::SamplePeriodNotRip(i.period));
    }
    Ok(i)
}
