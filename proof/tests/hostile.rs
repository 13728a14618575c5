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
fn an_arms_json_repeating_one_arm_is_refused_before_any_arm_is_verified() {
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
    // Refused before any arm is verified: no row judged, no arm's reason.
    assert_eq!(v.rows, Some(0), "{}", v.render(&d, 5));
    let arm = format!("{}: ", plan.arms[0].name);
    assert!(
        !v.reasons.iter().any(|r| r.detail.starts_with(&arm)),
        "{}",
        v.render(&d, 5)
    );
}

// ---- Issue 27, the rest: each case asserts a typed verdict, a time bounded as a ratio to a
// pristine run of the same kind of directory, and that nothing outside was opened (an
// inotify watch on the link's target) or changed (a sentinel's bytes and mtime).

/// How many times a pristine run of the same kind of directory a hostile one may take: a
/// generous ratio (a hang, or work per repeated entry, is far beyond it).
const TIME_RATIO: u32 = 25;

/// `verify` on `dir` on a thread, with its time; a verifier that blocks fails the test
/// after a generous wait instead of hanging the suite.
fn timed_verify(
    dir: &Path,
    opts: truecold_proof::VerifyOptions,
) -> (truecold_proof::Verdict, std::time::Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    let d = dir.to_path_buf();
    std::thread::spawn(move || {
        let t0 = std::time::Instant::now();
        let v = truecold_proof::verify_dir_with(&d, &opts);
        let _ = tx.send((v, t0.elapsed()));
    });
    rx.recv_timeout(std::time::Duration::from_secs(300))
        .unwrap_or_else(|_| panic!("verify of {dir:?} blocked"))
}

/// A copy of a committed directory (as [`copy_of`]) and the time its pristine verify takes.
fn pristine(part: &str, marker: &str, into: &Path) -> (PathBuf, std::time::Duration) {
    let d = copy_of(part, marker, into);
    let (v, t) = timed_verify(&d, Default::default());
    assert!(v.is_valid(), "{}", v.render(&d, 5));
    (d, t)
}

fn assert_bounded(what: &str, hostile: std::time::Duration, pristine: std::time::Duration) {
    assert!(
        hostile <= pristine * TIME_RATIO,
        "{what}: {hostile:?}, more than {TIME_RATIO} × the pristine {pristine:?}"
    );
}

/// A file outside the directory whose bytes and mtime must not change.
struct Sentinel {
    path: PathBuf,
    bytes: Vec<u8>,
    mtime: std::time::SystemTime,
}

impl Sentinel {
    fn new(path: PathBuf) -> Self {
        std::fs::write(&path, b"SENTINEL: never written\\n").unwrap();
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        Sentinel {
            bytes: std::fs::read(&path).unwrap(),
            path,
            mtime,
        }
    }
    fn assert_unchanged(&self) {
        assert_eq!(std::fs::read(&self.path).unwrap(), self.bytes);
        assert_eq!(
            std::fs::metadata(&self.path).unwrap().modified().unwrap(),
            self.mtime
        );
    }
}

/// An inotify watch on every directory under `root` (`root` included, at most four levels):
/// [`Watch::opened`] says whether anything there was opened or read since.
struct Watch {
    fd: std::os::fd::OwnedFd,
}

impl Watch {
    #[allow(unsafe_code)]
    fn on(root: &Path) -> Watch {
        use std::os::fd::FromRawFd as _;
        // SAFETY: inotify_init1 takes flags only and returns a new descriptor or -1.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(
            raw >= 0,
            "inotify_init1: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: `raw` is a descriptor just returned to us and owned by nothing else.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) };
        let mut dirs = vec![(root.to_path_buf(), 0)];
        while let Some((d, depth)) = dirs.pop() {
            let c = std::ffi::CString::new(d.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: `raw` is our inotify descriptor; `c` is a NUL-terminated path that
            // outlives the call, which only reads it.
            let w = unsafe {
                libc::inotify_add_watch(
                    raw,
                    c.as_ptr(),
                    libc::IN_OPEN | libc::IN_ACCESS | libc::IN_MODIFY,
                )
            };
            assert!(
                w >= 0,
                "inotify_add_watch {d:?}: {}",
                std::io::Error::last_os_error()
            );
            if depth < 4 {
                for e in std::fs::read_dir(&d).unwrap() {
                    let e = e.unwrap();
                    if e.file_type().unwrap().is_dir() {
                        dirs.push((e.path(), depth + 1));
                    }
                }
            }
        }
        let w = Watch { fd };
        // The listing above opened the directories itself: those events are not the
        // verifier's.
        while w.opened() {}
        w
    }

    /// Whether any event arrived (something under the root was opened, read or written).
    #[allow(unsafe_code)]
    fn opened(&self) -> bool {
        use std::os::fd::AsRawFd as _;
        let mut buf = [0u8; 4096];
        // SAFETY: `buf` is writable for its length; the descriptor is ours and
        // non-blocking, so the read returns at once (-1 with EAGAIN when nothing came).
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        n > 0
    }
}

fn signature_options(t: &Path) -> truecold_proof::VerifyOptions {
    std::fs::write(t.join("allowed_signers"), b"").unwrap();
    truecold_proof::VerifyOptions {
        signature: Some(truecold_proof::verify::SignatureCheck {
            allowed_signers: t.join("allowed_signers"),
            identity: Some("nobody".into()),
            // Never run: a signature file that is not a regular file is refused first.
            ssh_keygen: truecold_proof::signature::SshKeygen {
                program: t.join("no-ssh-keygen-here"),
            },
        }),
    }
}

#[test]
fn a_signature_file_that_is_a_fifo_or_a_link_is_a_finding_and_never_opened() {
    for (part, marker) in [
        ("engines", "arms.json"),
        ("tune", "tune.json"),
        ("probe-floor", "result.json"),
    ] {
        for case in ["fifo", "link to a fifo outside", "link to a file outside"] {
            let t = tempfile::tempdir().unwrap();
            let (d, pristine_t) = pristine(part, marker, t.path());
            let out = t.path().join("outside");
            std::fs::create_dir(&out).unwrap();
            let sentinel = Sentinel::new(out.join("sentinel"));
            mkfifo(&out.join("fifo"));
            let sig = d.join("SHA256SUMS.sig");
            match case {
                "fifo" => mkfifo(&sig),
                "link to a fifo outside" => symlink(out.join("fifo"), &sig).unwrap(),
                _ => symlink(&sentinel.path, &sig).unwrap(),
            }
            let watch = Watch::on(&out);
            let (v, took) = timed_verify(&d, signature_options(t.path()));
            let what = format!("{part}, {case}");
            assert!(v.unreadable.is_none(), "{what}: {}", v.render(&d, 5));
            assert!(
                v.has(truecold_proof::Check::Signature),
                "{what}: {}",
                v.render(&d, 5)
            );
            assert!(
                v.has(truecold_proof::Check::NotAFile),
                "{what}: {}",
                v.render(&d, 5)
            );
            assert_bounded(&what, took, pristine_t);
            assert!(!watch.opened(), "{what}: something outside was opened");
            sentinel.assert_unchanged();
        }
    }
}

#[test]
fn a_signature_link_is_refused_before_ssh_keygen_could_open_it() {
    // The race a listing cannot see (a regular file at the listing, a link when ssh-keygen
    // opens it): the verifier reads the signature itself, once, without following a link.
    let t = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(t.path().join("sentinel"));
    let link = t.path().join("SHA256SUMS.sig");
    symlink(&sentinel.path, &link).unwrap();
    let keygen = truecold_proof::signature::SshKeygen {
        program: t.path().join("no-ssh-keygen-here"),
    };
    let e = truecold_proof::signature::verify_copy(
        &keygen,
        &t.path().join("allowed"),
        None,
        &link,
        b"",
    )
    .unwrap_err();
    assert!(
        matches!(e, truecold_proof::signature::SignError::SigFile(_)),
        "{e:?}"
    );
    assert!(e.is_finding());
    sentinel.assert_unchanged();
}

#[test]
fn a_step_or_arm_directory_that_links_outside_is_never_entered() {
    // (directory kind, the entry replaced by a link, where the real one goes)
    for (part, marker, entry) in [
        ("bisect", "bisect.json", "steps"),
        ("tune", "tune.json", "screen"),
    ] {
        let t = tempfile::tempdir().unwrap();
        let (d, pristine_t) = pristine(part, marker, t.path());
        let out = t.path().join("outside");
        std::fs::create_dir(&out).unwrap();
        let sentinel = Sentinel::new(out.join("sentinel"));
        std::fs::rename(d.join(entry), out.join(entry)).unwrap();
        symlink(out.join(entry), d.join(entry)).unwrap();
        let watch = Watch::on(&out);
        let (v, took) = timed_verify(&d, Default::default());
        let what = format!("{part}: `{entry}` a link to a copy outside");
        assert!(!v.is_valid(), "{what}");
        assert!(
            v.has(truecold_proof::Check::NotAFile),
            "{what}: {}",
            v.render(&d, 5)
        );
        assert_bounded(&what, took, pristine_t);
        assert!(
            !watch.opened(),
            "{what}: the link's target was read: {}",
            v.render(&d, 5)
        );
        sentinel.assert_unchanged();
        // The same entry a link to `/` and to `/proc`: refused, in bounded time.
        for target in ["/", "/proc"] {
            std::fs::remove_file(d.join(entry)).unwrap();
            symlink(target, d.join(entry)).unwrap();
            let (v, took) = timed_verify(&d, Default::default());
            let what = format!("{part}: `{entry}` a link to {target}");
            assert!(!v.is_valid(), "{what}");
            assert!(
                v.has(truecold_proof::Check::NotAFile),
                "{what}: {}",
                v.render(&d, 5)
            );
            assert_bounded(&what, took, pristine_t);
        }
    }
}

#[test]
fn an_arm_directory_of_a_tune_phase_that_links_outside_is_never_entered() {
    let t = tempfile::tempdir().unwrap();
    let (d, pristine_t) = pristine("tune", "tune.json", t.path());
    let plan =
        truecold_proof::arms::parse_arms(&std::fs::read(d.join("screen/arms.json")).unwrap())
            .unwrap();
    let arm = plan.arms[0].name.clone();
    let out = t.path().join("outside");
    std::fs::create_dir(&out).unwrap();
    std::fs::rename(d.join("screen").join(&arm), out.join(&arm)).unwrap();
    symlink(out.join(&arm), d.join("screen").join(&arm)).unwrap();
    let watch = Watch::on(&out);
    let (v, took) = timed_verify(&d, Default::default());
    assert!(!v.is_valid());
    assert!(
        v.has(truecold_proof::Check::NotAFile),
        "{}",
        v.render(&d, 5)
    );
    assert_bounded("tune arm link", took, pristine_t);
    assert!(!watch.opened(), "the arm's link was followed");
}

/// The `SHA256SUMS` `sums` with `n` more entries for files that are not there.
fn sums_with_extra(sums: &[u8], n: usize) -> Vec<u8> {
    let mut all = truecold_proof::sums::parse_sums(sums).unwrap();
    let digest = "0".repeat(64);
    all.extend((0..n).map(|i| (format!("zz-{i:09}"), digest.clone())));
    truecold_proof::sums::format_sums(&all).into_bytes()
}

#[test]
fn a_huge_sums_file_is_judged_in_near_linear_time_and_over_the_cap_is_too_large() {
    let t = tempfile::tempdir().unwrap();
    let (d, pristine_t) = pristine("probe-floor", "result.json", t.path());
    let mut took = Vec::new();
    let sums = std::fs::read(d.join("SHA256SUMS")).unwrap();
    for n in [50_000usize, 200_000] {
        std::fs::write(d.join("SHA256SUMS"), sums_with_extra(&sums, n)).unwrap();
        let (v, dt) = timed_verify(&d, Default::default());
        assert!(v.unreadable.is_none(), "{n}: {}", v.render(&d, 5));
        assert_eq!(
            v.reasons
                .iter()
                .filter(|r| r.check == truecold_proof::Check::FileMissing)
                .count(),
            n
        );
        took.push(dt);
    }
    // Four times the entries: near-linear is about 4×; quadratic would be 16×.
    let ratio = took[1].as_secs_f64() / took[0].as_secs_f64().max(1e-9);
    assert!(
        ratio < 10.0,
        "50k entries {:?}, 200k {:?}: ×{ratio:.1}",
        took[0],
        took[1]
    );
    eprintln!(
        "SHA256SUMS 50k entries {:?}, 200k {:?} (×{ratio:.2}); pristine {pristine_t:?}",
        took[0], took[1]
    );
    // 300,000 entries (23 MB) are over the 16 MiB read: a typed reason, never parsed.
    std::fs::write(d.join("SHA256SUMS"), sums_with_extra(&sums, 300_000)).unwrap();
    let (v, dt) = timed_verify(&d, Default::default());
    assert!(
        v.has(truecold_proof::Check::TooLarge),
        "{}",
        v.render(&d, 5)
    );
    assert_bounded("300k entries", dt, pristine_t);
}

#[test]
fn non_utf8_names_in_the_directory_and_in_sums_are_typed_reasons() {
    use std::os::unix::ffi::OsStrExt as _;
    for (part, marker) in [
        ("probe-floor", "result.json"),
        ("tune", "tune.json"),
        ("engines", "arms.json"),
    ] {
        let t = tempfile::tempdir().unwrap();
        let (d, pristine_t) = pristine(part, marker, t.path());
        let odd = d.join(std::ffi::OsStr::from_bytes(b"bad-\xff\xfe-name"));
        std::fs::write(&odd, b"x").unwrap();
        let (v, took) = timed_verify(&d, Default::default());
        assert!(v.unreadable.is_none(), "{part}: {}", v.render(&d, 5));
        assert!(
            v.has(truecold_proof::Check::FileUnlisted) || v.has(truecold_proof::Check::NotAFile),
            "{part}: {}",
            v.render(&d, 5)
        );
        assert_bounded(part, took, pristine_t);
        std::fs::remove_file(&odd).unwrap();
        let mut sums = std::fs::read(d.join("SHA256SUMS")).unwrap();
        sums.extend_from_slice(&[b'0'; 64]);
        sums.extend_from_slice(b"  zz-\xff\xfe\n");
        std::fs::write(d.join("SHA256SUMS"), sums).unwrap();
        let (v, took) = timed_verify(&d, Default::default());
        assert!(
            v.has(truecold_proof::Check::SumsMalformed),
            "{part}: {}",
            v.render(&d, 5)
        );
        assert_bounded(part, took, pristine_t);
    }
}

#[test]
fn a_listed_file_that_is_a_link_at_open_time_is_refused_by_verify_and_report() {
    // What a swap between the listing and the open leaves: the name SHA256SUMS lists is a
    // link when it is opened (here, before the run: deterministic), to the very bytes that
    // were hashed, outside the directory.
    let t = tempfile::tempdir().unwrap();
    let (d, pristine_t) = pristine("probe-floor", "result.json", t.path());
    let out = t.path().join("outside");
    std::fs::create_dir(&out).unwrap();
    std::fs::rename(d.join("cmdline.txt"), out.join("cmdline.txt")).unwrap();
    symlink(out.join("cmdline.txt"), d.join("cmdline.txt")).unwrap();
    let before = std::fs::read(out.join("cmdline.txt")).unwrap();
    let watch = Watch::on(&out);
    let (v, took) = timed_verify(&d, Default::default());
    assert!(
        v.has(truecold_proof::Check::NotAFile),
        "{}",
        v.render(&d, 5)
    );
    assert_bounded("swapped link", took, pristine_t);
    let e = truecold_proof::verify::report_dir(&d).unwrap_err();
    assert!(
        truecold_proof::verify::chain(&e).contains("cmdline.txt"),
        "{e}"
    );
    // regenerate on its own (past the verdict) refuses the link too.
    let e = truecold_proof::regenerate(&d).unwrap_err();
    assert!(
        truecold_proof::verify::chain(&e).contains("cmdline.txt"),
        "{e}"
    );
    assert!(!watch.opened(), "the link's target was read");
    assert_eq!(std::fs::read(out.join("cmdline.txt")).unwrap(), before);
}

#[test]
fn a_bisect_reusing_a_commit_step_is_refused_before_any_step_is_verified() {
    let t = tempfile::tempdir().unwrap();
    let (d, pristine_t) = pristine("bisect", "bisect.json", t.path());
    let mut f: truecold_proof::bisect::BisectFile =
        serde_json::from_slice(&std::fs::read(d.join("bisect.json")).unwrap()).unwrap();
    let first = f.steps.iter().find(|s| s.dir.is_some()).unwrap().clone();
    f.steps.extend(std::iter::repeat_n(first, 500));
    std::fs::write(
        d.join("bisect.json"),
        truecold_proof::bisect::bisect_bytes(&f),
    )
    .unwrap();
    let (v, took) = timed_verify(&d, Default::default());
    assert!(
        v.has(truecold_proof::Check::BisectSteps),
        "{}",
        v.render(&d, 5)
    );
    assert!(
        v.reasons.iter().any(|r| r.detail.contains("reuses")),
        "{}",
        v.render(&d, 5)
    );
    assert_eq!(v.rows, Some(0), "a step was verified: {}", v.render(&d, 5));
    assert_bounded("reused step", took, pristine_t);
}

#[test]
fn report_refuses_a_directory_that_does_not_verify_besides_its_generated_files() {
    let bin = env!("CARGO_BIN_EXE_truecold-proof");
    let t = tempfile::tempdir().unwrap();
    // A bundle whose record lies (its wall time) and whose SHA256SUMS was made to agree:
    // only a verdict sees it; regenerating would make its README agree too.
    let d = t.path().join("lying");
    common::copy_dir(&common::real_bundle_source(), &d);
    let (mut r, _) = truecold_proof::read_bundle(&d).unwrap();
    r.environment.harness.wall_ns = 1;
    std::fs::write(
        d.join("result.json"),
        truecold_proof::bundle::result_bytes(&r).unwrap(),
    )
    .unwrap();
    common::resum(&d);
    let readme = std::fs::read(d.join("README.md")).unwrap();
    let out = std::process::Command::new(bin)
        .arg("report")
        .arg(&d)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "report regenerated a bundle that does not verify"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not verify"), "{err}");
    assert_eq!(std::fs::read(d.join("README.md")).unwrap(), readme);
    // A bundle whose only fault is a stale README is regenerated, and then verifies.
    let d = t.path().join("stale");
    common::copy_dir(&common::real_bundle_source(), &d);
    std::fs::write(d.join("README.md"), b"# hand-edited\n").unwrap();
    let out = std::process::Command::new(bin)
        .arg("report")
        .arg(&d)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(verify_dir(&d).is_valid());
}
