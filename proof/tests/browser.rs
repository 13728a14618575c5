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

/// Measures a page as the browser lays it out at `width` × `height`: a copy of it with a
/// script that, once the page has loaded, writes what it found into the DOM Chromium dumps
/// (the page itself runs no script). Returns the JSON: the viewport, the document's scroll
/// width, the verdict box's bottom and text, and every element wider than the viewport or
/// past its right edge that is not inside a box that scrolls.
fn layout(page: &Path, work: &Path, width: u32, height: u32) -> serde_json::Value {
    const PROBE: &str = r#"<script>
window.addEventListener('load', function () {
  var W = window.innerWidth, H = window.innerHeight, wide = [];
  document.querySelectorAll('body *').forEach(function (e) {
    var s = e.parentElement && e.parentElement.closest('.scroll');
    if (s) { return; }
    var r = e.getBoundingClientRect();
    if (r.right > W + 0.5 || r.width > W + 0.5) {
      wide.push(e.tagName + '.' + e.className + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
    }
  });
  var box = document.getElementById('verdict');
  var out = {
    width: W, height: H, scroll_width: document.documentElement.scrollWidth, wide: wide,
    box_bottom: box ? box.getBoundingClientRect().bottom : -1,
    box_text: box ? box.innerText : ''
  };
  var pre = document.createElement('pre');
  pre.id = 'layout-probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script></body>"#;
    let html = std::fs::read_to_string(page).unwrap();
    assert!(!html.contains("<script"), "the page itself holds a script");
    let copy = work.join("probe.html");
    std::fs::write(&copy, html.replace("</body>", PROBE)).unwrap();
    let out = Command::new(chromium())
        .args(headless(&work.join("profile-layout")))
        .arg(format!("--window-size={width},{height}"))
        .arg("--virtual-time-budget=10000")
        .arg("--dump-dom")
        .arg(format!("file://{}", copy.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    let json = dom
        .split("<pre id=\"layout-probe\">")
        .nth(1)
        .and_then(|r| r.split("</pre>").next())
        .unwrap_or_else(|| panic!("no layout probe in the DOM of {}", page.display()));
    let json = json
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

/// At 1280 × 800, the first viewport holds the verdict and the headline (VALID, p50, p99,
/// the clock, the contract; an engines page who is fastest; a tune its winners; a bisect its
/// culprit), and no element is wider than the viewport (a table too wide for it scrolls in
/// its own box), for a bundle, an engines campaign, a tune and a bisect directory.
#[test]
fn the_first_screen_holds_the_verdict_and_nothing_is_wider_than_the_window() {
    chromium();
    let t = tempfile::tempdir().unwrap();
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results");
    let bundle = Fixture::linux(300).write(t.path(), "bundle");
    let engines = Campaign::four(25).write(t.path(), "engines");
    let tune = t.path().join("tune");
    copy_tree(
        &results.join("20261205T1918Z-tune-nested-linux-2vcpu-16384mib-thp-o2-and-jump-label"),
        &tune,
    );
    let bisect = t.path().join("bisect");
    copy_tree(
        &results.join(
            "20261204T2031Z-bisect-commit-nested-linux-2vcpu-1024mib-firecracker-guest-config",
        ),
        &bisect,
    );
    let r = truecold_proof::read_bundle(&bundle).unwrap().0;
    let h = r.summary.headline.successes.unwrap();
    let ms = truecold_proof::fmt::ms;
    let cases: Vec<(&Path, Vec<String>)> = vec![
        (
            &bundle,
            vec![
                "VALID".into(),
                r.contract.label.clone(),
                format!("{} ms", ms(h.p50)),
                format!("{} ms", ms(h.p99)),
                "clock:".into(),
                "contract: linux".into(),
                format!("{} of {}", r.summary.successes, r.summary.attempts),
            ],
        ),
        (
            &engines,
            vec![
                "VALID".into(),
                "is the fastest: p50".into(),
                "× the time".into(),
            ],
        ),
        (
            &tune,
            vec![
                "VALID".into(),
                "Winners: cc-optimize-for-performance, jump-label".into(),
                "reproduce.sh".into(),
            ],
        ),
        (
            &bisect,
            vec![
                "VALID".into(),
                "first bad commit 452ee01c2d5c5bb9721b7fc04b1a5730cfa9dfea".into(),
            ],
        ),
    ];
    for (dir, want) in cases {
        truecold_proof::verify::report_dir_with(dir, true).unwrap();
        let v = truecold_proof::verify::verify_dir(dir);
        assert!(v.is_valid(), "{}", v.render(dir, 20));
        let work = tempfile::tempdir().unwrap();
        let l = layout(
            &dir.join(truecold_proof::names::HTML_FILE),
            work.path(),
            1280,
            800,
        );
        let what = dir.display();
        assert_eq!(l["width"], 1280, "{what}: {l}");
        let height = l["height"].as_f64().unwrap();
        assert!(
            l["box_bottom"].as_f64().unwrap() <= height,
            "{what}: the verdict box ends below the first screen: {l}"
        );
        let text = l["box_text"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        for w in &want {
            assert!(
                text.contains(w.as_str()),
                "{what}: the first screen lacks `{w}`: {text}"
            );
        }
        assert_eq!(
            l["wide"],
            serde_json::json!([]),
            "{what}: wider than the window: {l}"
        );
        assert!(
            l["scroll_width"].as_f64().unwrap() <= 1280.0,
            "{what}: the page scrolls sideways: {l}"
        );
    }
}
