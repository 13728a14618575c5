//! From a kernel function to the Kconfig symbol that builds it, read from a kernel source
//! tree (pure over the tree: nothing is built or written): the function's `.c` file
//! ([`find_files`]: where an initcall is registered, `module_init(fn)` / `*_initcall(fn)`, or
//! where a function is defined), then the directory's Makefile line that builds that file
//! ([`kconfig_symbol`]: `obj-$(CONFIG_X) += file.o`, through a composite object and up the
//! directories built by `obj-y`), and the timed waits in the file ([`timed_waits`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top directories of a tree searched for a function (x86's `arch/` only).
pub const SEARCHED: [&str; 16] = [
    "arch/x86", "block", "certs", "crypto", "drivers", "fs", "init", "io_uring", "ipc", "kernel",
    "lib", "mm", "net", "security", "sound", "virt",
];

/// Directories under [`SEARCHED`] that are not linked into the kernel image (the boot
/// decompressor, real-mode code, the purgatory, the vDSO, the EFI stub): a function defined
/// there too (`strstr`, `memcpy`) is not the kernel's.
pub const NOT_IN_VMLINUX: [&str; 5] = [
    "arch/x86/boot",
    "arch/x86/realmode",
    "arch/x86/purgatory",
    "arch/x86/entry/vdso",
    "drivers/firmware/efi/libstub",
];

/// The largest `.c` file read (a generated table can be megabytes; no function we look for
/// lives in one).
const MAX_C_FILE: u64 = 2 << 20;

/// The most directories a search walks up from a file built by `obj-y`.
const MAX_UP: usize = 8;

/// Why a tree could not be searched.
#[derive(Debug, thiserror::Error)]
pub enum KconfigMapError {
    #[error("{0} is not a kernel source tree (no Makefile and Kconfig at its top)")]
    NotATree(PathBuf),
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Checks that `tree` looks like a kernel source tree.
pub fn check_tree(tree: &Path) -> Result<(), KconfigMapError> {
    if tree.join("Makefile").is_file() && tree.join("Kconfig").is_file() {
        Ok(())
    } else {
        Err(KconfigMapError::NotATree(tree.to_path_buf()))
    }
}

/// The identifier that ends at byte `end` of `line` (exclusive), if any.
fn ident_before(line: &str, end: usize) -> Option<&str> {
    let b = line.as_bytes();
    let mut i = end;
    while i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') {
        i -= 1;
    }
    (i < end).then(|| &line[i..end])
}

/// What one line of C says of `names`: an initcall registration (`module_init(fn)`,
/// `*_initcall(fn)`, `*_initcall_sync(fn)`) or a definition at the top level (a line that
/// starts in column 0 with a type, holds `fn(` and does not end with `;`).
fn line_hits<'a>(line: &'a str, names: &BTreeSet<&str>) -> Vec<(&'a str, bool)> {
    let mut out = Vec::new();
    let trimmed = line.trim_end();
    for (i, _) in line.match_indices('(') {
        let Some(id) = ident_before(line, i) else {
            continue;
        };
        let registers =
            id == "module_init" || id.ends_with("initcall") || id.ends_with("initcall_sync");
        if registers {
            let inner = &line[i + 1..];
            let arg = inner.split(')').next().unwrap_or("").trim();
            if names.contains(arg) {
                out.push((arg, true));
            }
            continue;
        }
        let top = line
            .bytes()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_');
        if top && names.contains(id) && !trimmed.ends_with(';') && !line.starts_with("#") {
            out.push((id, false));
        }
    }
    out
}

/// For each of `names`, the `.c` file (relative to `tree`) that registers it as an initcall,
/// else the one that defines it at the top level (the first in path order either way). One
/// pass over the [`SEARCHED`] directories.
pub fn find_files(
    tree: &Path,
    names: &[&str],
) -> Result<BTreeMap<String, PathBuf>, KconfigMapError> {
    check_tree(tree)?;
    let wanted: BTreeSet<&str> = names.iter().copied().collect();
    let mut registered: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut defined: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut stack: Vec<PathBuf> = SEARCHED
        .iter()
        .rev()
        .map(|d| tree.join(d))
        .filter(|d| d.is_dir())
        .collect();
    while let Some(dir) = stack.pop() {
        let rd = std::fs::read_dir(&dir).map_err(|source| KconfigMapError::Read {
            path: dir.clone(),
            source,
        })?;
        let mut entries: Vec<(PathBuf, std::fs::FileType)> = rd
            .flatten()
            .filter_map(|e| e.file_type().ok().map(|t| (e.path(), t)))
            .collect();
        entries.sort_by(|a, b| b.0.cmp(&a.0));
        for (path, t) in entries {
            if t.is_dir() {
                if !NOT_IN_VMLINUX.iter().any(|d| path == tree.join(d)) {
                    stack.push(path);
                }
                continue;
            }
            // x86's 32-bit-only files (`strstr_32.c`): the kernel is x86_64.
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            if !t.is_file()
                || !name
                    .as_deref()
                    .is_some_and(|n| n.ends_with(".c") && !n.ends_with("_32.c"))
            {
                continue;
            }
            if std::fs::metadata(&path)
                .map(|m| m.len())
                .unwrap_or(u64::MAX)
                > MAX_C_FILE
            {
                continue;
            }
            let Ok(text) = std::fs::read(&path) else {
                continue;
            };
            let text = String::from_utf8_lossy(&text);
            let rel = path.strip_prefix(tree).unwrap_or(&path).to_path_buf();
            for line in text.lines() {
                if !line.contains('(') {
                    continue;
                }
                for (name, reg) in line_hits(line, &wanted) {
                    let into = if reg { &mut registered } else { &mut defined };
                    into.entry(name.to_string()).or_insert_with(|| rel.clone());
                }
            }
        }
    }
    for (k, v) in defined {
        registered.entry(k).or_insert(v);
    }
    Ok(registered)
}

/// A Makefile's assignments, continuation lines joined: (left-hand side, right-hand words).
fn assignments(text: &str) -> Vec<(String, Vec<String>)> {
    let mut joined = String::new();
    let mut out = Vec::new();
    for raw in text.lines() {
        let line = raw.split('#').next().unwrap_or("");
        if let Some(head) = line.trim_end().strip_suffix('\\') {
            joined.push_str(head);
            joined.push(' ');
            continue;
        }
        joined.push_str(line);
        let whole = std::mem::take(&mut joined);
        let Some(at) = whole.find('=') else { continue };
        let lhs = whole[..at].trim_end_matches([':', '+', '?']).trim();
        let rhs = whole[at + 1..].split_whitespace().map(str::to_string);
        if !lhs.is_empty() && !lhs.contains(char::is_whitespace) {
            out.push((lhs.to_string(), rhs.collect()));
        }
    }
    out
}

/// The `CONFIG_` symbol a Makefile left-hand side names (`obj-$(CONFIG_X)`,
/// `obj-$(subst m,y,$(CONFIG_X))`), without the prefix.
fn symbol_of(lhs: &str) -> Option<String> {
    let at = lhs.find("CONFIG_")? + "CONFIG_".len();
    let s: String = lhs[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!s.is_empty()).then_some(s)
}

/// What the Makefile in `dir` says builds `object` (`file.o` or `subdir/`): `Some(Some(X))`
/// under `obj-$(CONFIG_X)` (directly or as part of a composite object), `Some(None)` under
/// `obj-y` / `lib-y` (built with the directory), `None` when no line names it.
fn built_by(dir: &Path, object: &str, depth: usize) -> Option<Option<String>> {
    let text = ["Makefile", "Kbuild"]
        .iter()
        .find_map(|m| std::fs::read_to_string(dir.join(m)).ok())?;
    let lines = assignments(&text);
    for (lhs, rhs) in &lines {
        if !rhs.iter().any(|w| w == object) {
            continue;
        }
        if let Some(rest) = lhs
            .strip_prefix("obj-")
            .or_else(|| lhs.strip_prefix("lib-"))
        {
            return Some(if rest == "y" { None } else { symbol_of(lhs) });
        }
        // A composite object: `name-y`, `name-objs`, `name-$(CONFIG_Z)` → `name.o`.
        let comp = lhs
            .split_once('-')
            .map(|(name, _)| format!("{name}.o"))
            .filter(|c| c != object);
        if let (Some(c), true) = (comp, depth < 3) {
            if let Some(found) = built_by(dir, &c, depth + 1) {
                return Some(found);
            }
        }
    }
    None
}

/// The Kconfig symbol (without `CONFIG_`) that builds `file` (relative to `tree`): the
/// Makefile line of its directory, and for a file built with its directory (`obj-y`) the
/// line of each directory above that builds it, up to one that names a symbol. `None`: built
/// whatever the config (or no Makefile line found).
pub fn kconfig_symbol(tree: &Path, file: &Path) -> Option<String> {
    let mut dir = file.parent()?.to_path_buf();
    let mut object = format!("{}.o", file.file_stem()?.to_string_lossy());
    for _ in 0..MAX_UP {
        match built_by(&tree.join(&dir), &object, 0)? {
            Some(sym) => return Some(sym),
            None => {
                let name = dir.file_name()?.to_string_lossy().into_owned();
                object = format!("{name}/");
                dir = dir.parent()?.to_path_buf();
                if dir.as_os_str().is_empty() {
                    return None;
                }
            }
        }
    }
    None
}

/// The functions whose call is a timed wait.
pub const WAITS: [&str; 8] = [
    "msleep",
    "msleep_interruptible",
    "ssleep",
    "mdelay",
    "udelay",
    "usleep_range",
    "fsleep",
    "schedule_timeout",
];

/// The timed waits of a C file's `text`: (line number, the call as written), in order.
pub fn timed_waits(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for (i, _) in line.match_indices('(') {
            let Some(id) = ident_before(line, i) else {
                continue;
            };
            if !WAITS.contains(&id) {
                continue;
            }
            let close = line[i..].find(')').map(|c| i + c + 1).unwrap_or(line.len());
            let call: String = line[i - id.len()..close].chars().take(60).collect();
            out.push((n + 1, call));
        }
    }
    out
}

/// Whether the kernel `config` (a `.config`'s text) builds `symbol` in (`CONFIG_X=y`).
pub fn built_in(config: &str, symbol: &str) -> bool {
    let want = format!("CONFIG_{symbol}=y");
    config.lines().any(|l| l.trim_end() == want)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small tree: a driver under a symbol, a composite object, a file built with its
    /// directory under a parent's symbol, core code built whatever the config.
    pub(crate) fn mini_tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let w = |p: &str, s: &str| {
            let f = t.path().join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, s).unwrap();
        };
        w("Makefile", "obj-y += drivers/ kernel/\n");
        w("Kconfig", "mainmenu \"x\"\n");
        w(
            "drivers/Makefile",
            "obj-$(CONFIG_INPUT)\t+= input/\nobj-y += char/\n",
        );
        w("drivers/input/Makefile", "obj-y += serio/\n");
        w(
            "drivers/input/serio/Makefile",
            "obj-$(CONFIG_SERIO)\t\t+= serio.o\nobj-$(CONFIG_SERIO_I8042)\t+= i8042.o\n",
        );
        w(
            "drivers/input/serio/i8042.c",
            "static int __init i8042_init(void)\n{\n\tmdelay(50); msleep(10);\n\treturn 0;\n}\nmodule_init(i8042_init);\n",
        );
        w(
            "drivers/char/Makefile",
            "obj-y += mem.o\nobj-$(CONFIG_FLOPPY_X) += floppy.o\nfloppy-y := fd_core.o \\\n\tfd_io.o\n",
        );
        w(
            "drivers/char/mem.c",
            "static int __init chr_dev_init(void)\n{\n}\nfs_initcall(chr_dev_init);\n",
        );
        w(
            "drivers/char/fd_io.c",
            "int fd_wait(int x);\nint fd_wait(int x)\n{\n\tudelay(x);\n}\n",
        );
        w("kernel/Makefile", "obj-y = fork.o\n");
        w("arch/x86/boot/Makefile", "targets += string.o\n");
        w("arch/x86/boot/string.c", "char *fork_init(void)\n{\n}\n");
        w("arch/x86/lib/fork_32.c", "char *fork_init(void)\n{\n}\n");
        w("kernel/fork.c", "void __init fork_init(void)\n{\n}\n");
        t
    }

    #[test]
    fn functions_map_to_the_symbol_that_builds_them() {
        let t = mini_tree();
        let files = find_files(
            t.path(),
            &[
                "i8042_init",
                "chr_dev_init",
                "fd_wait",
                "fork_init",
                "absent",
            ],
        )
        .unwrap();
        assert_eq!(
            files["i8042_init"],
            Path::new("drivers/input/serio/i8042.c")
        );
        assert_eq!(files["fd_wait"], Path::new("drivers/char/fd_io.c"));
        assert!(!files.contains_key("absent"));
        let sym = |f: &str| kconfig_symbol(t.path(), &files[f]);
        // Its directory's line.
        assert_eq!(sym("i8042_init").as_deref(), Some("SERIO_I8042"));
        // A composite object's symbol.
        assert_eq!(sym("fd_wait").as_deref(), Some("FLOPPY_X"));
        // obj-y all the way up: built whatever the config.
        assert_eq!(sym("chr_dev_init"), None);
        assert_eq!(sym("fork_init"), None);
        // The decompressor's copy and a 32-bit one are not the kernel's.
        assert_eq!(files["fork_init"], Path::new("kernel/fork.c"));
        // A file built with its directory (serio/ under obj-y) takes the parent's symbol.
        std::fs::write(
            t.path().join("drivers/input/serio/Makefile"),
            "obj-y += i8042.o\n",
        )
        .unwrap();
        assert_eq!(sym("i8042_init").as_deref(), Some("INPUT"));
        assert!(matches!(
            find_files(&t.path().join("kernel"), &["x"]),
            Err(KconfigMapError::NotATree(_))
        ));
    }

    #[test]
    fn waits_and_built_in_symbols() {
        let w = timed_waits("\tmdelay(50); msleep(10);\nfoo(1);\n\tusleep_range(100, 200);\n");
        assert_eq!(
            w,
            [
                (1, "mdelay(50)".to_string()),
                (1, "msleep(10)".to_string()),
                (3, "usleep_range(100, 200)".to_string())
            ]
        );
        assert!(built_in("CONFIG_A=y\nCONFIG_B=m\n", "A"));
        assert!(!built_in("CONFIG_A=y\nCONFIG_B=m\n", "B"));
        assert!(!built_in("CONFIG_AB=y\n", "A"));
    }
}
