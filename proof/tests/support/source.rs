//! Reading the workspace's Rust sources as text, for the tests that hold the code's shape
//! (`layering.rs`, `one_percentile.rs`): the files of a directory, their code with comments
//! and literals blanked, the items a `#[cfg(test)]` marks cut out, and the bodies of their
//! functions. A lexer, not a parser: it knows comments, string, raw string, byte string and
//! character literals, and braces.

#![allow(dead_code)] // each test binary uses its part

use std::path::{Path, PathBuf};

/// The workspace root (the directory above this crate's).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the proof crate sits in the workspace")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, sorted; a missing or unreadable directory panics (a check
/// that read nothing would pass for nothing).
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        let entries = std::fs::read_dir(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        for e in entries {
            let p = e.unwrap_or_else(|e| panic!("{}: {e}", d.display())).path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    assert!(!out.is_empty(), "no Rust file under {}", dir.display());
    out
}

/// `text` with every comment and the inside of every string and character literal replaced
/// by spaces (newlines kept), so that what is left is code, line for line.
pub fn code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |ch: char| if ch == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < c.len() {
        let at = |k: usize| c.get(k).copied().unwrap_or('\0');
        if c[i] == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c[i] == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
        } else if (c[i] == 'r' || (c[i] == 'b' && at(i + 1) == 'r'))
            && !at(i.wrapping_sub(1)).is_alphanumeric()
            && {
                let s = if c[i] == 'b' { i + 2 } else { i + 1 };
                let mut k = s;
                while at(k) == '#' {
                    k += 1;
                }
                at(k) == '"'
            }
        {
            // A raw string: r"…", r#"…"#, br"…".
            let s = if c[i] == 'b' { i + 2 } else { i + 1 };
            let mut k = s;
            while at(k) == '#' {
                k += 1;
            }
            let hashes = k - s;
            for _ in i..=k {
                out.push(' ');
            }
            i = k + 1;
            while i < c.len() {
                if c[i] == '"' && (0..hashes).all(|h| at(i + 1 + h) == '#') {
                    for _ in 0..=hashes {
                        out.push(' ');
                    }
                    i += 1 + hashes;
                    break;
                }
                out.push(blank(c[i]));
                i += 1;
            }
        } else if c[i] == '"' {
            out.push('"');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < c.len() {
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c[i] == '\'' && at(i + 1) == '\\' {
            // An escaped character literal: '\n', '\'', '\u{1b}'.
            out.push('\'');
            i += 2;
            out.push(' ');
            while i < c.len() && c[i] != '\'' {
                out.push(' ');
                i += 1;
            }
            out.push('\'');
            i += 1;
        } else if c[i] == '\'' && at(i + 2) == '\'' {
            out.push_str("' '");
            i += 3;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// The index of the `}` that closes the `{` at `open` in `code` (its end when unbalanced).
pub fn closing_brace(code: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, &b) in code.iter().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// `code` (as [`code_only`] gives it) without the items `#[cfg(test)]` marks: a `mod tests`
/// block, a test-only function, a test-only `use`.
pub fn without_tests(code: &str) -> String {
    let mut s = code.to_string();
    while let Some(at) = s.find("#[cfg(test)]") {
        let b = s.as_bytes();
        let from = at + "#[cfg(test)]".len();
        let semi = s[from..].find(';').map(|k| k + from);
        let brace = s[from..].find('{').map(|k| k + from);
        let end = match (semi, brace) {
            (Some(x), Some(y)) if x < y => x,
            (_, Some(y)) => closing_brace(b, y),
            (Some(x), None) => x,
            (None, None) => s.len() - 1,
        };
        let cut: String = s[at..=end.min(s.len() - 1)]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        s.replace_range(at..=end.min(s.len() - 1), &cut);
    }
    s
}

/// One function of a file: its name, first and last line (1-based) and its body's code.
pub struct FnBody {
    pub name: String,
    pub first: usize,
    pub last: usize,
    pub body: String,
}

/// Every function with a body in `code` (as [`code_only`] gives it), nested ones included
/// (each also inside its parent's body).
pub fn fn_bodies(code: &str) -> Vec<FnBody> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(k) = code[from..].find("fn ") {
        let at = from + k;
        from = at + 3;
        if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
            continue;
        }
        let name: String = code[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        let (semi, brace) = (code[at..].find(';'), code[at..].find('{'));
        let open = match (semi, brace) {
            (Some(s), Some(o)) if o < s => at + o,
            (None, Some(o)) => at + o,
            _ => continue,
        };
        let close = closing_brace(b, open);
        let line = |p: usize| code[..p].matches('\n').count() + 1;
        out.push(FnBody {
            name,
            first: line(at),
            last: line(close.min(code.len())),
            body: code[open..close.min(code.len())].to_string(),
        });
    }
    out
}

/// `path` relative to the workspace root, for messages.
pub fn rel(path: &Path) -> String {
    path.strip_prefix(workspace())
        .unwrap_or(path)
        .display()
        .to_string()
}
