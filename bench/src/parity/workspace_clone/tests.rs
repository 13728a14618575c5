use super::*;
use std::os::unix::fs::MetadataExt;

const MIB: u64 = 1 << 20;

/// An 8 MiB sparse file with ~100 KiB of data in three extents (distinct bytes in each).
fn sparse_base(dir: &Path) -> PathBuf {
    let p = dir.join("base.img");
    let f = File::create(&p).expect("create");
    f.set_len(8 * MIB).expect("set_len");
    for (off, len, byte) in [
        (0u64, 4096usize, 0xa1u8),
        (MIB, 64 << 10, 0xb2),
        (5 * MIB + 4096, 32 << 10, 0xc3),
    ] {
        let data: Vec<u8> = (0..len).map(|i| byte ^ (i as u8)).collect();
        f.write_all_at(&data, off).expect("write");
    }
    f.sync_all().expect("sync");
    p
}

/// Data extents of `p` by SEEK_DATA/SEEK_HOLE.
fn extents(p: &Path) -> Vec<(u64, u64)> {
    let f = File::open(p).expect("open");
    let size = f.metadata().expect("meta").len();
    let mut out = Vec::new();
    let mut off = 0;
    while let Some((s, e)) = next_extent(&f, off, size).expect("extent") {
        out.push((s, e));
        off = e;
    }
    out
}

/// Hashing the base (which reads all of it, unwritten extents included) leaves the sparse
/// clone as sparse as before: the digest is the file's, and the same bytes are copied.
#[test]
fn hashing_the_base_does_not_make_its_clones_copy_more() {
    let t = tempfile::tempdir().expect("tempdir");
    let base = sparse_base(t.path());
    // An allocated-but-unwritten extent (the journal of an ext4 image is one).
    let f = OpenOptions::new().write(true).open(&base).expect("open");
    // SAFETY: fallocate on a descriptor `f` owns, mode 0 (allocate), within the file.
    let r = unsafe { libc::fallocate(f.as_raw_fd(), 0, 2 * MIB as i64, MIB as i64) };
    assert_eq!(r, 0, "fallocate: {}", io::Error::last_os_error());
    f.sync_all().expect("sync");
    drop(f);
    let before =
        clone_image_with(&base, &t.path().join("a.img"), ClonePolicy::SparseOnly).expect("clone");
    let digest = image_digest(&base).expect("digest");
    assert_eq!(
        digest,
        truecold_proof::digest::sha256_hex(&std::fs::read(&base).expect("read"))
    );
    // (Reading it again, above, filled the cache: the digest's drop is what is measured.)
    image_digest(&base).expect("digest");
    let after =
        clone_image_with(&base, &t.path().join("b.img"), ClonePolicy::SparseOnly).expect("clone");
    assert_eq!(
        after.copied_bytes, before.copied_bytes,
        "{before:?} {after:?}"
    );
    assert_eq!(
        std::fs::read(t.path().join("b.img")).expect("read"),
        std::fs::read(&base).expect("read")
    );
}

#[test]
fn sparse_copy_preserves_content_and_holes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = sparse_base(dir.path());
    let dest = dir.path().join("clone.img");
    let c = clone_image_with(&base, &dest, ClonePolicy::SparseOnly).expect("clone");
    assert_eq!(c.mode, CloneMode::SparseCopy);
    assert_eq!(c.reflink_errno, None, "not tried");
    assert_eq!(c.size, 8 * MIB);
    assert_eq!(
        std::fs::read(&dest).expect("read"),
        std::fs::read(&base).expect("read")
    );
    let (bm, dm) = (
        std::fs::metadata(&base).expect("meta"),
        std::fs::metadata(&dest).expect("meta"),
    );
    assert_eq!(dm.len(), bm.len());
    assert_eq!(dm.mode() & 0o777, 0o600);
    // The holes stayed holes: as many blocks allocated as the base (not 8 MiB's worth).
    assert!(
        dm.blocks() * 512 < MIB,
        "clone allocates {} bytes",
        dm.blocks() * 512
    );
    assert_eq!(dm.blocks(), bm.blocks());
    assert_eq!(extents(&dest), extents(&base));
    assert_eq!(c.extents as usize, extents(&base).len());
    assert_eq!(
        c.copied_bytes,
        extents(&base).iter().map(|(s, e)| e - s).sum::<u64>()
    );
    assert!(c.copied_bytes < 200 << 10, "{c:?}");
}

#[test]
fn auto_reflinks_or_falls_back_to_a_sparse_copy_with_the_refusal_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = sparse_base(dir.path());
    let dest = dir.path().join("clone.img");
    let c = clone_image(&base, &dest).expect("clone");
    match c.mode {
        CloneMode::Reflink => assert_eq!((c.reflink_errno, c.copied_bytes), (None, 0)),
        CloneMode::SparseCopy => assert!(c.reflink_errno.is_some(), "{c:?}"),
    }
    assert_eq!(
        std::fs::read(&dest).expect("read"),
        std::fs::read(&base).expect("read")
    );
    // The clone is private: writing it leaves the base as it was.
    let before = std::fs::read(&base).expect("read");
    OpenOptions::new()
        .write(true)
        .open(&dest)
        .expect("open")
        .write_all_at(b"guest wrote here", 3 * MIB)
        .expect("write");
    assert_eq!(std::fs::read(&base).expect("read"), before);
    // An all-hole base clones to an all-hole image.
    let empty = dir.path().join("empty.img");
    File::create(&empty)
        .expect("create")
        .set_len(8 * MIB)
        .expect("len");
    let c = clone_image_with(&empty, &dir.path().join("e2.img"), ClonePolicy::SparseOnly)
        .expect("clone");
    assert_eq!((c.copied_bytes, c.extents), (0, 0));
    assert_eq!(
        std::fs::metadata(dir.path().join("e2.img"))
            .expect("m")
            .len(),
        8 * MIB
    );
}

#[test]
fn clone_failures_are_typed_and_leave_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = sparse_base(dir.path());
    let missing = dir.path().join("nope.img");
    let dest = dir.path().join("d.img");
    let e = clone_image(&missing, &dest).expect_err("missing base");
    assert!(matches!(e, CloneError::BaseMissing { .. }), "{e:?}");
    assert_eq!(e.name(), "base_missing");
    assert!(!dest.exists());
    let e = clone_image(dir.path(), &dest).expect_err("a directory");
    assert!(matches!(e, CloneError::BaseNotFile { .. }), "{e:?}");
    assert!(!dest.exists());
    // An existing destination is never overwritten.
    std::fs::write(&dest, b"keep").expect("write");
    let e = clone_image(&base, &dest).expect_err("exists");
    assert!(matches!(e, CloneError::DestExists { .. }), "{e:?}");
    assert_eq!(std::fs::read(&dest).expect("read"), b"keep");
    let e = clone_image(&base, &dir.path().join("no/such/dir/d.img")).expect_err("unwritable");
    assert!(matches!(e, CloneError::DestUnwritable { .. }), "{e:?}");
    assert!(
        std::error::Error::source(&e).is_some(),
        "the io error is the source"
    );
    // /proc does not take new files (ENOENT/EACCES): unwritable, not a panic.
    let e = clone_image(&base, Path::new("/proc/truecold-clone.img")).expect_err("proc");
    assert!(matches!(e, CloneError::DestUnwritable { .. }), "{e:?}");
}

#[test]
fn a_full_filesystem_is_no_space() {
    // ENOSPC and EDQUOT are classified wherever they come from (creating, sizing, copying,
    // the reflink); other errors go to the caller's kind. A real full filesystem needs a
    // small mount, which this test does not make.
    let dest = Path::new("/x/d.img");
    let other = |source| CloneError::DestUnwritable {
        dest: dest.into(),
        source,
    };
    for errno in [libc::ENOSPC, libc::EDQUOT] {
        let e = dest_error(dest, io::Error::from_raw_os_error(errno), other);
        assert!(matches!(e, CloneError::NoSpace { .. }), "{e:?}");
        assert_eq!(e.name(), "no_space");
    }
    let e = dest_error(dest, io::Error::from_raw_os_error(libc::EACCES), other);
    assert!(matches!(e, CloneError::DestUnwritable { .. }), "{e:?}");
}

#[test]
fn removal_is_verified() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = sparse_base(dir.path());
    let dest = dir.path().join("c.img");
    clone_image(&base, &dest).expect("clone");
    let r = remove_image(&dest).expect("remove");
    assert!(r.was_present);
    assert!(!dest.exists());
    let r = remove_image(&dest).expect("already gone");
    assert!(!r.was_present);
    // A directory is not an image: refused, and left alone.
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).expect("mkdir");
    assert!(matches!(
        remove_image(&sub),
        Err(RemoveError::Remove { .. })
    ));
    assert!(sub.exists());
    assert!(matches!(
        verify_gone(&sub),
        Err(RemoveError::StillPresent { .. })
    ));
}

/// An ext4 image as the workspace is built: `mkfs.ext4 -d` over a tree with ~100 KiB of
/// files. `None` where mkfs.ext4 is missing.
fn ext4_image(dir: &Path) -> Option<PathBuf> {
    let tree = dir.join("tree");
    std::fs::create_dir_all(tree.join("truecold")).ok()?;
    std::fs::write(
        tree.join("truecold/seed"),
        truecold_proto::parity::WORKSPACE_SEED,
    )
    .ok()?;
    for i in 0..25u32 {
        let data: Vec<u8> = (0..4096u32).map(|j| (i * 31 + j) as u8).collect();
        std::fs::write(tree.join(format!("truecold/f{i}")), data).ok()?;
    }
    let img = dir.join("ws.img");
    let ok = std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F", "-d"])
        .arg(&tree)
        .arg(&img)
        .arg("8M")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?
        .success();
    // Written back, so SEEK_DATA reports the extents as they will stay (dirty pages of
    // delayed allocation read as data until then).
    File::open(&img).ok()?.sync_all().ok()?;
    ok.then_some(img)
}

#[test]
fn clone_figures() {
    // The figures of the module doc: `-- --nocapture` prints them.
    let dir = tempfile::tempdir().expect("tempdir");
    let img = ext4_image(dir.path())
        .expect("clone_figures needs mkfs.ext4 (e2fsprogs: `apt-get install e2fsprogs`)");
    let m = std::fs::metadata(&img).expect("meta");
    let runs = 20;
    let mut report = vec![format!(
        "image: {} bytes apparent, {} KiB allocated, {} data extents",
        m.len(),
        m.blocks() / 2,
        extents(&img).len()
    )];
    for policy in [ClonePolicy::Auto, ClonePolicy::SparseOnly] {
        let mut ns = Vec::new();
        let mut last = None;
        for i in 0..runs {
            let d = dir.path().join(format!("c-{policy:?}-{i}.img"));
            let c = clone_image_with(&img, &d, policy).expect("clone");
            // The base is not read here: its pages in the page cache would make ext4 report
            // its unwritten extents (the journal mkfs left uninitialised) as data.
            assert_eq!(c.extents as usize, extents(&img).len(), "{c:?}");
            let r = remove_image(&d).expect("remove");
            ns.push((c.ns, r.ns));
            last = Some(c);
        }
        ns.sort_unstable();
        let c = last.expect("runs > 0");
        let mut rm: Vec<u64> = ns.iter().map(|x| x.1).collect();
        rm.sort_unstable();
        report.push(format!(
            "{policy:?}: mode {}, reflink errno {:?}, {} bytes in {} extents, clone median {} µs \
             (min {} µs, max {} µs), remove median {} µs",
            c.mode.as_str(),
            c.reflink_errno,
            c.copied_bytes,
            c.extents,
            ns[runs / 2].0 / 1000,
            ns[0].0 / 1000,
            ns[runs - 1].0 / 1000,
            rm[runs / 2] / 1000
        ));
    }
    // The clone reads as the base (the base read last: see above).
    let d = dir.path().join("check.img");
    clone_image(&img, &d).expect("clone");
    assert_eq!(
        std::fs::read(&d).expect("r"),
        std::fs::read(&img).expect("r")
    );
    let after = extents(&img);
    report.push(format!(
        "after the base was read once: {} data extents, {} bytes (the page cache makes ext4 \
         report unwritten extents with cached pages as data)",
        after.len(),
        after.iter().map(|(s, e)| e - s).sum::<u64>()
    ));
    // The refused reflink alone.
    let d = dir.path().join("probe.img");
    let src = File::open(&img).expect("open");
    let dst = File::create(&d).expect("create");
    let t0 = now_ns();
    // SAFETY: both descriptors are open; FICLONE takes the source fd as its argument.
    let rc = unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONE, src.as_raw_fd()) };
    let err = io::Error::last_os_error();
    let t = now_ns() - t0;
    report.push(format!(
        "FICLONE alone: rc {rc} ({}) in {} ns",
        if rc == 0 {
            "ok".to_string()
        } else {
            err.to_string()
        },
        t
    ));
    for l in &report {
        eprintln!("clone_figures: {l}");
    }
}
