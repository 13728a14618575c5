//! Every directory committed under results/ verifies with this verifier as it is (a format
//! change that leaves one stale — a README rendered from a catalogue text that changed, say —
//! fails here, not later in a reviewer's hands).

use std::path::Path;
use truecold_proof::verify::verify_dir;

#[test]
fn every_committed_results_directory_verifies() {
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results");
    let mut n = 0;
    for e in std::fs::read_dir(&results).unwrap() {
        let dir = e.unwrap().path();
        if !dir.join("SHA256SUMS").is_file() {
            continue;
        }
        let v = verify_dir(&dir);
        assert!(v.is_valid(), "{}", v.render(&dir, 20));
        n += 1;
    }
    assert!(
        n >= 10,
        "only {n} committed directories with a SHA256SUMS under {results:?}"
    );
}
