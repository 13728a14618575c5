//! A real browser renders `report.html`: headless Chromium (Debian's `chromium`, installed by
//! `scripts/deps.sh`) dumps the page's DOM (its text: the verdict, the contract's fields)
//! and takes a screenshot, which must be a non-empty PNG that is not one uniform colour
//! (decoded by `python3`, also from `scripts/deps.sh`). A missing browser fails the test.
mod common;

use common::*;
use std::path::Path;
use std::process::Command;

/// The browser, or a failure that names the script that installs it.
fn chromium() -> &'static str {
    let found = Command::new("chromium").arg("--version").output();
    match found {
        Ok(o) if o.status.success() => "chromium",
        _ => panic!(
            "chromium is not installed (or does not run): scripts/deps.sh installs it \
             (Debian package `chromium`); this test needs a real browser"
        ),
    }
}

fn headless(profile: &Path) -> Vec<String> {
    vec![
        "--headless".into(),
        "--no-sandbox".into(),
        "--disable-gpu".into(),
        "--disable-dev-shm-usage".into(),
        "--no-first-run".into(),
        "--hide-scrollbars".into(),
        format!("--user-data-dir={}", profile.display()),
    ]
}

/// Decodes an 8-bit RGB/RGBA PNG (non-interlaced) and prints its width, height and number
/// of distinct pixel values.
const PNG_STATS: &str = r#"
import struct, sys, zlib
b = open(sys.argv[1], 'rb').read()
assert b[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
i, idat, w, h, ct = 8, b'', 0, 0, 0
while i < len(b):
    n, t = struct.unpack('>I4s', b[i:i+8]); d = b[i+8:i+8+n]; i += 12 + n
    if t == b'IHDR':
        w, h, depth, ct, _, _, lace = struct.unpack('>IIBBBBB', d)
        assert depth == 8 and ct in (2, 6) and lace == 0, (depth, ct, lace)
    elif t == b'IDAT':
        idat += d
bpp = 3 if ct == 2 else 4
raw = zlib.decompress(idat)
stride = w * bpp
prev = bytearray(stride)
colours = set()
for y in range(h):
    f = raw[y * (stride + 1)]
    line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        c = prev[x - bpp] if x >= bpp else 0
        up = prev[x]
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + up) & 255
        elif f == 3: line[x] = (line[x] + (a + up) // 2) & 255
        elif f == 4:
            p = a + up - c; pa, pb, pc = abs(p - a), abs(p - up), abs(p - c)
            pr = a if pa <= pb and pa <= pc else (up if pb <= pc else c)
            line[x] = (line[x] + pr) & 255
    for x in range(0, stride, bpp * 7):
        colours.add(bytes(line[x:x + bpp]))
    prev = line
print(w, h, len(colours))
"#;

#[test]
fn chromium_renders_the_page() {
    let browser = chromium();
    let t = tempfile::tempdir().unwrap();
    let dir = Fixture::linux(30).write(t.path(), "b");
    truecold_proof::verify::report_dir_with(&dir, true).unwrap();
    let url = format!(
        "file://{}",
        dir.join(truecold_proof::names::HTML_FILE).display()
    );

    let dom = Command::new(browser)
        .args(headless(&t.path().join("profile-dom")))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let text = String::from_utf8_lossy(&dom.stdout);
    let r = truecold_proof::read_bundle(&dir).unwrap().0;
    for want in [
        "VALID".to_string(),
        r.contract.label.clone(),
        r.contract.mode.describe(),
        "request_to_strict_ready".to_string(),
        format!("vCPUs: {}", r.configuration.vcpus),
        "Stage waterfall (the median launch)".to_string(),
    ] {
        assert!(text.contains(&want), "the rendered page lacks `{want}`");
    }

    let png = t.path().join("page.png");
    let shot = Command::new(browser)
        .args(headless(&t.path().join("profile-shot")))
        .arg("--window-size=800,1000")
        .arg(format!("--screenshot={}", png.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        shot.status.success(),
        "{}",
        String::from_utf8_lossy(&shot.stderr)
    );
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.len() > 1000, "screenshot of {} bytes", bytes.len());
    let stats = Command::new("python3")
        .arg("-c")
        .arg(PNG_STATS)
        .arg(&png)
        .output()
        .unwrap_or_else(|e| panic!("python3 (scripts/deps.sh installs it): {e}"));
    assert!(
        stats.status.success(),
        "{}",
        String::from_utf8_lossy(&stats.stderr)
    );
    let out = String::from_utf8_lossy(&stats.stdout);
    let v: Vec<u64> = out.split_whitespace().map(|x| x.parse().unwrap()).collect();
    assert_eq!(v[..2], [800, 1000], "{out}");
    assert!(v[2] > 2, "the screenshot has {} colours: {out}", v[2]);
}
