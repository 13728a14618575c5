//! A hostile publisher's directory (issue 27): links, FIFOs, oversize files, planted
//! temporary names and repeated entries. Each case starts from a committed directory that
//! verifies, makes one change, and asserts a typed verdict or error, that the verifier
//! returns, and that nothing outside the directory was read into the output or written.

mod common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use truecold_proof::verify::verify_dir;

/// The test binary's allocator: the system's, noting on the threads that ask
/// ([`largest_allocation`]) the largest single request, so a test can show a reader stayed
/// within its cap instead of holding a whole file.
struct Watching;

thread_local! {
    static WATCH: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static LARGEST: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: the allocator may run while a thread's locals are torn down.
    let _ = WATCH.try_with(|w| {
        if w.get() {
            let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
        }
    });
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds `GlobalAlloc`'s
// contract; `note` only reads and writes two thread-local cells and never allocates.
unsafe impl std::alloc::GlobalAlloc for Watching {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        note(l.size());
        // SAFETY: the caller's `l` goes to `System` as it came (same contract).
        unsafe { std::alloc::System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
        // SAFETY: `p` was allocated by `System` with `l` (every allocation goes there).
        unsafe { std::alloc::System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, new: usize) -> *mut u8 {
        note(new);
        // SAFETY: `p` and `l` are `System`'s, as above; `new` is the caller's.
        unsafe { std::alloc::System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Watching = Watching;

/// Runs `f` and returns its value and the largest single allocation it made (this thread).
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|l| l.set(0));
    WATCH.with(|w| w.set(true));
    let out = f();
    WATCH.with(|w| w.set(false));
    (out, LARGEST.with(|l| l.get()))
}

/// The most any one allocation may take while a hostile file is read: the parsed-file cap
/// (16 MiB, which a growing buffer may double) with room to spare, and far below the
/// 256 MiB the oversize files below would take if held whole.
const ALLOCATION_BOUND: usize = 64 << 20;

fn results() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../results")
}

/// A copy of the committed directory whose name contains `part` and which holds `marker`.
fn copy_of(part: &str, marker: &str, into: &Path) -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir(results())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains(part))
                && p.join(marker).is_file()
        })
        .collect();
    found.sort();
    let src = found
        .first()
        .unwrap_or_else(|| panic!("no committed directory like `{part}` with {marker}"));
    let dst = into.join("d");
    copy_tree(src, &dst);
    let v = verify_dir(&dst);
    assert!(v.is_valid(), "the pristine copy: {}", v.render(&dst, 5));
    dst
}

/// Copies a directory tree (`cp -a`).
fn copy_tree(src: &Path, dst: &Path) {
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(src)
        .arg(dst)
        .status()
        .unwrap();
    assert!(st.success(), "cp -a {src:?} {dst:?}");
}

fn mkfifo(p: &Path) {
    let st = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap();
    assert!(st.success(), "mkfifo {p:?}");
}

/// A file outside the directory, with a line a leak would show.
fn outside(tmp: &Path) -> PathBuf {
    let o = tmp.join("outside.txt");
    std::fs::write(&o, "SECRET-OUTSIDE-LINE\n").unwrap();
    o
}

/// `verify` on a thread, its rendered verdict; a verifier that blocks (on a FIFO) fails
/// the test after a generous wait instead of hanging the suite.
fn verify_within(dir: &Path, what: &str) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    let d = dir.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(verify_dir(&d).render(&d, 20));
    });
    let text = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .unwrap_or_else(|_| panic!("{what}: verify blocked"));
    assert!(text.starts_with("INVALID"), "{what}: {text}");
    text
}

fn assert_invalid_without_leak(dir: &Path) -> String {
    let v = verify_dir(dir);
    assert!(!v.is_valid(), "accepted: {}", v.render(dir, 20));
    let text = v.render(dir, 100);
    assert!(!text.contains("SECRET-OUTSIDE-LINE"), "leaked: {text}");
    text
}

#[test]
fn a_symlinked_sums_file_of_an_arms_directory_is_refused_and_not_read() {
    let t = tempfile::tempdir().unwrap();
    let d = copy_of("engines", "arms.json", t.path());
    let o = outside(t.path());
    std::fs::remove_file(d.join("SHA256SUMS")).unwrap();
    symlink(&o, d.join("SHA256SUMS")).unwrap();
    let text = assert_invalid_without_leak(&d);
    assert!(text.contains("SHA256SUMS"), "{text}");
}

#[test]
fn a_symlinked_sums_file_of_a_tune_directory_is_refused_and_not_read() {
    let t = tempfile::tempdir().unwrap();
    let d = copy_of("tune", "tune.json", t.path());
    let o = outside(t.path());
    std::fs::remove_file(d.join("SHA256SUMS")).unwrap();
    symlink(&o, d.join("SHA256SUMS")).unwrap();
    assert_invalid_without_leak(&d);
}

#[test]
fn a_symlinked_arms_json_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let d = copy_of("engines", "arms.json", t.path());
    let real = t.path().join("arms.json");
    std::fs::rename(d.join("arms.json"), &real).unwrap();
    symlink(&real, d.join("arms.json")).unwrap();
    let v = verify_dir(&d);
    assert!(!v.is_valid());
    let u = v.unreadable.clone().unwrap_or_default();
    assert!(u.contains("arms.json"), "{}", v.render(&d, 5));
}

#[test]
fn a_symlinked_readme_of_a_tune_or_bisect_directory_is_refused() {
    for (part, marker) in [("tune", "tune.json"), ("bisect", "bisect.json")] {
        let t = tempfile::tempdir().unwrap();
        let d = copy_of(part, marker, t.path());
        // The link leads to a FIFO outside: following it would block the verifier (and
        // would read outside the directory); the test fails by its timeout then.
        let fifo = t.path().join("outside-fifo");
        mkfifo(&fifo);
        std::fs::remove_file(d.join("README.md")).unwrap();
        symlink(&fifo, d.join("README.md")).unwrap();
        let text = verify_within(&d, part);
        assert!(!text.contains("SECRET-OUTSIDE-LINE"), "leaked: {text}");
        assert!(text.contains("README.md"), "{part}: {text}");
    }
}

#[test]
fn a_fifo_named_arms_json_does_not_hang_verify() {
    let t = tempfile::tempdir().unwrap();
    let d = copy_of("engines", "arms.json", t.path());
    std::fs::remove_file(d.join("arms.json")).unwrap();
    mkfifo(&d.join("arms.json"));
    // Run on a thread: a hang fails the test (after a generous wait) instead of the suite.
    let (tx, rx) = std::sync::mpsc::channel();
    let dd = d.clone();
    std::thread::spawn(move || {
        let _ = tx.send(verify_dir(&dd));
    });
    let v = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("verify hung on a FIFO");
    assert!(!v.is_valid());
    assert!(
        v.unreadable
            .as_deref()
            .is_some_and(|u| u.contains("arms.json")),
        "{}",
        v.render(&d, 5)
    );
}

#[test]
fn a_bisect_baseline_that_links_outside_is_not_followed() {
    let t = tempfile::tempdir().unwrap();
    let d = copy_of("bisect", "bisect.json", t.path());
    // The real baseline moves outside; the directory keeps only a link to it.
    let real = t.path().join("elsewhere");
    std::fs::rename(d.join("baseline"), &real).unwrap();
    symlink(&real, d.join("baseline")).unwrap();
    let text = assert_invalid_without_leak(&d);
    assert!(
        text.contains("a link is never followed"),
        "the link was followed: {text}"
    );
}

#[test]
fn an_oversize_readme_is_a_typed_verdict_not_memory() {
    for (part, marker) in [("tune", "tune.json"), ("bisect", "bisect.json")] {
        let t = tempfile::tempdir().unwrap();
        let d = copy_of(part, marker, t.path());
        // A sparse 256 MiB README: held whole it would be one 256 MiB allocation.
        let f = std::fs::File::create(d.join("README.md")).unwrap();
        f.set_len(256 << 20).unwrap();
        drop(f);
        let (text, largest) = largest_allocation(|| assert_invalid_without_leak(&d));
        assert!(text.contains("README.md"), "{part}: {text}");
        assert!(
            largest < ALLOCATION_BOUND,
            "{part}: one allocation of {largest} bytes"
        );
    }
}

#[test]
fn a_fifo_readme_does_not_hang_verify() {
    for (part, marker) in [("tune", "tune.json"), ("bisect", "bisect.json")] {
        let t = tempfile::tempdir().unwrap();
        let d = copy_of(part, marker, t.path());
        std::fs::remove_file(d.join("README.md")).unwrap();
        mkfifo(&d.join("README.md"));
        let text = verify_within(&d, part);
        assert!(text.starts_with("INVALID"), "{part}: {text}");
        assert!(text.contains("README.md"), "{part}: {text}");
    }
}

/// A line 256 MiB long that is never stored anywhere: one 64 KiB buffer served again and
/// again, then `\n` and the end.
struct EndlessLine {
    left: u64,
    buf: Vec<u8>,
    done: bool,
}

impl std::io::Read for EndlessLine {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = {
            let b = std::io::BufRead::fill_buf(self)?;
            let n = b.len().min(out.len());
            out[..n].copy_from_slice(&b[..n]);
            n
        };
        std::io::BufRead::consume(self, n);
        Ok(n)
    }
}

impl std::io::BufRead for EndlessLine {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.left > 0 {
            let n = self.buf.len().min(self.left as usize);
            Ok(&self.buf[..n])
        } else if !self.done {
            Ok(b"\n")
        } else {
            Ok(&[])
        }
    }
    fn consume(&mut self, n: usize) {
        if self.left > 0 {
            self.left -= n as u64;
        } else if n > 0 {
            self.done = true;
        }
    }
}

#[test]
fn an_overlong_reports_line_is_skipped_in_bounded_memory() {
    // Stored whole, the rest of this line would be one 256 MiB allocation (the old skip
    // collected it).
    let (r, s) = truecold_proof::read_bundle(&common::real_bundle_source()).unwrap();
    let line = EndlessLine {
        left: 256 << 20,
        buf: vec![b'x'; 64 << 10],
        done: false,
    };
    let expect = truecold_proof::reports::Expect::of(&r);
    let (bad, largest) =
        largest_allocation(|| truecold_proof::reports::check(line, &s, &expect, 10).unwrap());
    assert!(
        largest < ALLOCATION_BOUND,
        "one allocation of {largest} bytes"
    );
    assert!(
        bad.first().is_some_and(|b| b.contains("longer than")),
        "{bad:?}"
    );
}

#[test]
fn report_refuses_a_planted_temporary_link_and_writes_nothing_outside() {
    let t = tempfile::tempdir().unwrap();
    let src = common::real_bundle_source();
    let d = t.path().join("b");
    common::copy_dir(&src, &d);
    let victim = t.path().join("victim");
    std::fs::write(&victim, b"untouched").unwrap();
    let readme_before = std::fs::read(d.join("README.md")).unwrap();
    let tmp = d.join(truecold_proof::fsio::temp_name("README.md"));
    symlink(&victim, &tmp).unwrap();
    let e = truecold_proof::regenerate(&d).unwrap_err();
    let msg = truecold_proof::verify::chain(&e);
    assert!(msg.contains("README.md"), "{msg}");
    assert_eq!(std::fs::read(&victim).unwrap(), b"untouched");
    assert!(
        std::fs::symlink_metadata(d.join("README.md"))
            .unwrap()
            .file_type()
            .is_file(),
        "README.md became a link"
    );
    assert_eq!(std::fs::read(d.join("README.md")).unwrap(), readme_before);
}

#[test]
fn two_hundred_thousand_sums_entries_with_a_late_duplicate_return() {
    // Not a speed goal: a quadratic check would take hours here; this only has to return.
    let mut text = String::new();
    let digest = "0".repeat(64);
    for i in 0..200_000u32 {
        text.push_str(&format!("{digest}  f{i:07}\n"));
    }
    text.push_str(&format!("{digest}  f0000000\n"));
    // A generous bound (the check takes well under a second; a quadratic one, minutes).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(truecold_proof::sums::parse_sums(text.as_bytes()));
    });
    let e = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the duplicate check did not return")
        .unwrap_err();
    assert_eq!(
        e,
        truecold_proof::sums::SumsError::Duplicate("f0000000".into())
    );
}

#[test]
fn an_arms_json_repeating_one_arm_verifies_it_once_and_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let d = copy_of("engines", "arms.json", t.path());
    let mut plan =
        truecold_proof::arms::parse_arms(&std::fs::read(d.join("arms.json")).unwrap()).unwrap();
    let one = plan.arms[0].clone();
    plan.arms = std::iter::repeat_n(one, 3_000).collect();
    std::fs::write(d.join("arms.json"), truecold_proof::arms::arms_bytes(&plan)).unwrap();
    // A generous bound: one arm verified takes well under it, 3,000 copies far more.
    let (tx, rx) = std::sync::mpsc::channel();
    let dd = d.clone();
    std::thread::spawn(move || {
        let _ = tx.send(verify_dir(&dd));
    });
    let v = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("verify did not return: the repeated arm is verified per copy");
    assert!(!v.is_valid());
    assert!(
        v.has(truecold_proof::Check::ArmsPlan),
        "{}",
        v.render(&d, 5)
    );
    // One copy of the arm verified: its rows are counted once.
    let rows: usize = v.rows.unwrap_or(0);
    let arm_rows = truecold_proof::read_bundle(&d.join(&plan.arms[0].name))
        .unwrap()
        .1
        .len();
    assert_eq!(rows, arm_rows);
}
