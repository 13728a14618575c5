//! A deterministic writer of uncompressed `newc` cpio archives (the initramfs format the
//! Linux kernel unpacks): entries in the caller's order, inode numbers 1, 2, 3, …, owner
//! root, mtime 0, so the same entries always give the same bytes.

use std::io::{self, Write};

/// What an entry is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File(Vec<u8>),
    CharDev { major: u32, minor: u32 },
}

/// One archive member. `name` is relative (`init`, `dev/console`); `perm` is the permission bits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub perm: u32,
    pub kind: Kind,
}

#[derive(Debug, thiserror::Error)]
pub enum CpioError {
    #[error("bad member name `{0}` (want relative, no `..`, no NUL, not empty)")]
    BadName(String),
    #[error("permission bits {perm:#o} of `{name}` exceed 0o7777")]
    BadPerm { name: String, perm: u32 },
    #[error("`{0}` is larger than newc's 4 GiB limit")]
    TooLarge(String),
    #[error("writing the archive")]
    Io(#[from] io::Error),
}

const MAGIC: &str = "070701";
const TRAILER: &str = "TRAILER!!!";
const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFCHR: u32 = 0o020000;

fn pad4(n: usize) -> usize {
    (4 - n % 4) % 4
}

struct Header<'a> {
    ino: u32,
    mode: u32,
    nlink: u32,
    size: u32,
    rdev: (u32, u32),
    name: &'a str,
}

fn write_header(out: &mut impl Write, h: &Header<'_>) -> io::Result<usize> {
    let namesize = h.name.len() + 1;
    let fields = [
        h.ino,
        h.mode,
        0,
        0,
        h.nlink,
        0,
        h.size,
        0,
        0,
        h.rdev.0,
        h.rdev.1,
        namesize as u32,
        0,
    ];
    let mut s = String::with_capacity(110 + namesize + 3);
    s.push_str(MAGIC);
    for f in fields {
        s.push_str(&format!("{f:08x}"));
    }
    s.push_str(h.name);
    s.push('\0');
    for _ in 0..pad4(110 + namesize) {
        s.push('\0');
    }
    out.write_all(s.as_bytes())?;
    Ok(s.len())
}

fn check(e: &Entry) -> Result<(), CpioError> {
    let n = &e.name;
    if n.is_empty()
        || n.starts_with('/')
        || n.contains('\0')
        || n.split('/').any(|c| c.is_empty() || c == "." || c == "..")
        || n == TRAILER
    {
        return Err(CpioError::BadName(n.clone()));
    }
    if e.perm > 0o7777 {
        return Err(CpioError::BadPerm {
            name: n.clone(),
            perm: e.perm,
        });
    }
    Ok(())
}

/// Writes `entries` in order, then the trailer. Returns the archive's length.
pub fn write_newc(entries: &[Entry], out: &mut impl Write) -> Result<u64, CpioError> {
    let mut len = 0u64;
    for (i, e) in entries.iter().enumerate() {
        check(e)?;
        let (mode, nlink, data, rdev): (u32, u32, &[u8], (u32, u32)) = match &e.kind {
            Kind::Dir => (S_IFDIR, 2, &[], (0, 0)),
            Kind::File(d) => (S_IFREG, 1, d, (0, 0)),
            Kind::CharDev { major, minor } => (S_IFCHR, 1, &[], (*major, *minor)),
        };
        let size = u32::try_from(data.len()).map_err(|_| CpioError::TooLarge(e.name.clone()))?;
        let ino = u32::try_from(i + 1).map_err(|_| CpioError::TooLarge(e.name.clone()))?;
        let h = Header {
            ino,
            mode: mode | e.perm,
            nlink,
            size,
            rdev,
            name: &e.name,
        };
        len += write_header(out, &h)? as u64;
        out.write_all(data)?;
        out.write_all(&[0u8; 3][..pad4(data.len())])?;
        len += (data.len() + pad4(data.len())) as u64;
    }
    let t = Header {
        ino: 0,
        mode: 0,
        nlink: 1,
        size: 0,
        rdev: (0, 0),
        name: TRAILER,
    };
    len += write_header(out, &t)? as u64;
    Ok(len)
}

/// The truecold initramfs: the directories PID 1 mounts on, `dev/console`, `dev/null` and
/// `/init`. `dev/null` matters: without a console (the default) the kernel starts PID 1 with
/// fds 0–2 closed, and Rust's runtime then reopens them on `/dev/null` before `main` — and
/// aborts if it cannot (devtmpfs is not mounted yet at that point).
pub fn initramfs_entries(init: Vec<u8>) -> Vec<Entry> {
    let dir = |name: &str| Entry {
        name: name.into(),
        perm: 0o755,
        kind: Kind::Dir,
    };
    vec![
        dir("dev"),
        Entry {
            name: "dev/console".into(),
            perm: 0o600,
            kind: Kind::CharDev { major: 5, minor: 1 },
        },
        Entry {
            name: "dev/null".into(),
            perm: 0o666,
            kind: Kind::CharDev { major: 1, minor: 3 },
        },
        dir("proc"),
        dir("sys"),
        dir("tmp"),
        Entry {
            name: "init".into(),
            perm: 0o755,
            kind: Kind::File(init),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(h: &[u8], i: usize) -> u32 {
        let s = std::str::from_utf8(&h[6 + 8 * i..14 + 8 * i]).unwrap();
        u32::from_str_radix(s, 16).unwrap()
    }

    #[test]
    fn layout_of_one_file() {
        let mut v = Vec::new();
        let e = vec![Entry {
            name: "init".into(),
            perm: 0o755,
            kind: Kind::File(b"hello".to_vec()),
        }];
        let len = write_newc(&e, &mut v).unwrap();
        assert_eq!(len as usize, v.len());
        assert_eq!(&v[..6], b"070701");
        assert_eq!(field(&v, 0), 1); // ino
        assert_eq!(field(&v, 1), 0o100755); // mode
        assert_eq!(field(&v, 2), 0); // uid
        assert_eq!(field(&v, 5), 0); // mtime
        assert_eq!(field(&v, 6), 5); // filesize
        assert_eq!(field(&v, 11), 5); // namesize incl. NUL
                                      // 110 + 5 = 115 → padded to 116; data 5 → padded to 8.
        assert_eq!(&v[110..115], b"init\0");
        assert_eq!(&v[116..121], b"hello");
        assert_eq!(&v[121..124], &[0, 0, 0]);
        let t = &v[124..];
        assert_eq!(&t[110..121], b"TRAILER!!!\0");
        assert_eq!(t.len() % 4, 0);
        assert_eq!(v.len() % 4, 0);
    }

    #[test]
    fn dirs_and_devices() {
        let mut v = Vec::new();
        let e = vec![
            Entry {
                name: "dev".into(),
                perm: 0o755,
                kind: Kind::Dir,
            },
            Entry {
                name: "dev/console".into(),
                perm: 0o600,
                kind: Kind::CharDev { major: 5, minor: 1 },
            },
        ];
        write_newc(&e, &mut v).unwrap();
        assert_eq!(field(&v, 1), 0o040755);
        assert_eq!(field(&v, 4), 2);
        // "dev\0" ends at 114, padded to 116, no data.
        let off = 110 + 4 + pad4(114);
        assert_eq!(&v[off..off + 6], b"070701");
        assert_eq!(field(&v[off..], 0), 2);
        assert_eq!(field(&v[off..], 1), 0o020600);
        assert_eq!(field(&v[off..], 9), 5);
        assert_eq!(field(&v[off..], 10), 1);
    }

    #[test]
    fn same_entries_same_bytes() {
        let a = initramfs_entries(vec![7u8; 1001]);
        let (mut x, mut y) = (Vec::new(), Vec::new());
        write_newc(&a, &mut x).unwrap();
        write_newc(&a.clone(), &mut y).unwrap();
        assert_eq!(x, y);
        let mut z = Vec::new();
        write_newc(&initramfs_entries(vec![8u8; 1001]), &mut z).unwrap();
        assert_ne!(x, z);
    }

    #[test]
    fn rejects_bad_names_and_perms() {
        for n in ["", "/init", "a/../b", "a//b", "./a", "a\0b", "TRAILER!!!"] {
            let e = vec![Entry {
                name: n.into(),
                perm: 0o644,
                kind: Kind::Dir,
            }];
            assert!(
                matches!(write_newc(&e, &mut Vec::new()), Err(CpioError::BadName(_))),
                "{n:?}"
            );
        }
        let e = vec![Entry {
            name: "x".into(),
            perm: 0o10000,
            kind: Kind::Dir,
        }];
        assert!(matches!(
            write_newc(&e, &mut Vec::new()),
            Err(CpioError::BadPerm { .. })
        ));
    }

    #[test]
    fn kernel_compatible_per_gnu_cpio() {
        // Cross-check with GNU cpio when present on the machine (it is on the dev box and CI
        // installs it with the kernel tools): list the archive and compare names and modes.
        let Ok(out) = std::process::Command::new("cpio").arg("--version").output() else {
            panic!("GNU cpio missing: apt-get install cpio");
        };
        assert!(out.status.success());
        let mut v = Vec::new();
        write_newc(&initramfs_entries(b"#!bin".to_vec()), &mut v).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.cpio");
        std::fs::write(&f, &v).unwrap();
        let o = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("cpio -itv --quiet < {}", f.display()))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8(o.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 7, "{text}");
        assert!(lines[0].starts_with("drwxr-xr-x") && lines[0].ends_with(" dev"));
        assert!(lines[1].starts_with("crw-------") && lines[1].ends_with(" dev/console"));
        assert!(lines[2].starts_with("crw-rw-rw-") && lines[2].ends_with(" dev/null"));
        assert!(lines[6].starts_with("-rwxr-xr-x") && lines[6].ends_with(" init"));
    }
}
