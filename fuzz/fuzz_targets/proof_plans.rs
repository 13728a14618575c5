//! The plan and record files of multi-bundle directories: `arms.json` (`parse_arms`, its
//! checks, and the canonical writer's round trip), `bisect.json` (its reader, the canonical
//! writer's round trip, the README rendered from it) and `tune.json` (read by
//! `verify_tune_dir`, from a scratch directory). None may panic.
#![no_main]
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use truecold_proof::arms::{arms_bytes, is_kernel_ab, is_tune_phase, parse_arms, plan_problems};
use truecold_proof::bisect::{bisect_bytes, readme, BisectFile};
use truecold_proof::tune::verify_tune_dir;
use truecold_proof::VerifyOptions;

/// A scratch directory for this process (tune.json is only read from a directory).
fn scratch() -> &'static PathBuf {
    static D: OnceLock<PathBuf> = OnceLock::new();
    D.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("truecold-fuzz-tune-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("a scratch directory under the temp dir");
        d
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    match which % 3 {
        0 => {
            if let Ok(plan) = parse_arms(body) {
                let _ = plan_problems(&plan);
                let _ = (is_kernel_ab(&plan), is_tune_phase(&plan));
                assert_eq!(parse_arms(&arms_bytes(&plan)).as_ref(), Ok(&plan));
            }
        }
        1 => {
            if let Ok(f) = serde_json::from_slice::<BisectFile>(body) {
                let again: BisectFile =
                    serde_json::from_slice(&bisect_bytes(&f)).expect("its own bytes parse");
                assert_eq!(again, f);
                let _ = readme(&f);
            }
        }
        _ => {
            let d = scratch();
            std::fs::write(d.join("tune.json"), body).expect("scratch write");
            let _ = verify_tune_dir(d, &VerifyOptions::default());
        }
    }
});
