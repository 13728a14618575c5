//! The bench crate's module layers (docs/architecture.md, "The plan"): `src/` holds `main.rs`,
//! `lib.rs` and `cli.rs` at the top and one folder per role, and every folder imports only
//! from the folders below it in [`LAYERS`]; `cli.rs` (clap's types) imports nothing of the
//! crate; no two files import each other, directly or round a longer circle; a folder's
//! `mod.rs` holds only its module list (so importing through it imports nothing of its own).
//!
//! Read from the source: every `crate::…` path (in `use` lines and inline) and every
//! `super::…` path outside test code (`tests.rs` files, and what follows a `#[cfg(test)]`
//! line), each resolved to the file that defines the longest module path it names; a use of
//! the crate's `note!` macro is an import of the file that defines it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The folders, lowest first: each may import from those before it, never from those after.
const LAYERS: &[&str] = &[
    "terminal",
    "checks",
    "artifacts",
    "campaign",
    "attribution",
    "plan",
    "parity",
    "engines",
    "run",
    "tune",
    "bisect",
    "replay",
    "fleet",
];

/// The files at the top of `src/` beside the folders.
const TOP_FILES: &[&str] = &["lib.rs", "main.rs", "cli.rs"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, as paths relative to `src/`.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("list src") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p.strip_prefix(src()).expect("under src").to_path_buf());
        }
    }
}

fn is_test(rel: &Path) -> bool {
    rel.file_name().is_some_and(|n| n == "tests.rs")
}

/// The module path of a file (`campaign/schedule.rs` → `campaign::schedule`; `mod.rs` is
/// its folder's; `lib.rs` and `main.rs` are the root).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|l| l == "mod") || parts == ["lib"] || parts == ["main"] {
        parts.pop();
    }
    parts
}

/// The text before the first `#[cfg(test)]` line, without comments, and with every string
/// and character literal blanked (a path inside one names nothing).
fn code(text: &str) -> String {
    let cut = text
        .lines()
        .take_while(|l| !l.trim_start().starts_with("#[cfg(test)]"))
        .collect::<Vec<_>>()
        .join("\n");
    let c: Vec<char> = cut.chars().collect();
    let mut out = String::with_capacity(c.len());
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !ident(c[i - 1]))
        {
            // A raw string: r"…", r#"…"#, …
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            while j < c.len() {
                if c[j] == '"' && (1..=hashes).all(|h| c.get(j + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' {
            // A character literal ('x', '\n', '\'', '\u{..}'), or a lifetime ('a).
            if next == Some('\\') {
                let mut j = i + 3;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                out.push_str("' '");
                i = j + 1;
            } else if c.get(i + 2) == Some(&'\'') {
                out.push_str("' '");
                i += 3;
            } else {
                out.push(c[i]);
                i += 1;
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

fn ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths a file names: `crate::a::b`, `super::x`, `self::x`, `truecold_bench::a`
/// (main.rs), and each `use` line's groups (`use crate::a::{b, c::d}`) flattened.
fn paths(code: &str) -> Vec<String> {
    let flat: String = code.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    // `use` groups, flattened.
    for stmt in flat.split(';') {
        let Some(at) = stmt
            .match_indices("use ")
            .map(|(i, _)| i)
            .find(|&i| i == 0 || !ident(stmt.as_bytes()[i - 1] as char))
        else {
            continue;
        };
        let body: String = stmt[at + 4..]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        expand("", &body, &mut out);
    }
    // Inline paths.
    let b = flat.as_bytes();
    for root in ["crate::", "super::", "truecold_bench::"] {
        let mut from = 0;
        while let Some(i) = flat[from..].find(root) {
            let start = from + i;
            from = start + root.len();
            if start > 0 && ident(b[start - 1] as char) {
                continue;
            }
            let end = flat[start..]
                .find(|c: char| !(ident(c) || c == ':'))
                .map_or(flat.len(), |e| start + e);
            // A `use` group's head (`crate::a::{…}`) is the group's: expanded above.
            if flat[end..].starts_with('{') {
                continue;
            }
            out.push(flat[start..end].to_string());
        }
    }
    out
}

/// `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn expand(prefix: &str, s: &str, out: &mut Vec<String>) {
    let Some(open) = s.find('{') else {
        out.push(format!("{prefix}{s}"));
        return;
    };
    let head = &s[..open];
    let mut depth = 0;
    let mut close = s.len();
    for (i, c) in s.char_indices().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    close = i;
                    break;
                }
            }
            _ => {}
        }
    }
    let (mut item, mut depth) = (String::new(), 0);
    let mut items = Vec::new();
    for c in s[open + 1..close].chars() {
        match c {
            ',' if depth == 0 => items.push(std::mem::take(&mut item)),
            '{' => {
                depth += 1;
                item.push(c)
            }
            '}' => {
                depth -= 1;
                item.push(c)
            }
            _ => item.push(c),
        }
    }
    items.push(item);
    for it in items.into_iter().filter(|i| !i.is_empty()) {
        if it == "self" || it.starts_with("selfas") {
            out.push(format!("{prefix}{}", head.trim_end_matches("::")));
        } else {
            expand(&format!("{prefix}{head}"), &it, out);
        }
    }
}

/// The file of the longest module path `path` names from `module`, if it names one.
fn resolve(
    path: &str,
    module: &[String],
    modules: &BTreeMap<Vec<String>, PathBuf>,
) -> Option<PathBuf> {
    let mut segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let mut base: Vec<String> = match segs.first()? {
        &"crate" | &"truecold_bench" => {
            segs.remove(0);
            Vec::new()
        }
        &"super" => {
            let mut b = module.to_vec();
            while segs.first() == Some(&"super") {
                b.pop();
                segs.remove(0);
            }
            b
        }
        &"self" => {
            segs.remove(0);
            module.to_vec()
        }
        _ => return None,
    };
    let mut best = modules.get(&base).cloned();
    for s in segs {
        base.push(s.to_string());
        match modules.get(&base) {
            Some(f) => best = Some(f.clone()),
            None => break,
        }
    }
    best
}

/// Every file's imports (test code left out), as files.
fn graph() -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut all = Vec::new();
    files(&src(), &mut all);
    let modules: BTreeMap<Vec<String>, PathBuf> = all
        .iter()
        .filter(|f| !is_test(f) && f.as_path() != Path::new("main.rs"))
        .map(|f| (module_of(f), f.clone()))
        .collect();
    let macro_file = all
        .iter()
        .find(|f| {
            std::fs::read_to_string(src().join(f)).is_ok_and(|t| t.contains("macro_rules! note"))
        })
        .expect("the note! macro is defined")
        .clone();
    let mut g = BTreeMap::new();
    for f in all.iter().filter(|f| !is_test(f)) {
        let text = std::fs::read_to_string(src().join(f)).expect("read");
        let code = code(&text);
        let module = if f.as_path() == Path::new("main.rs") {
            Vec::new()
        } else {
            module_of(f)
        };
        let mut to: BTreeSet<PathBuf> = paths(&code)
            .iter()
            .filter_map(|p| resolve(p, &module, &modules))
            .filter(|t| t != f && t.as_path() != Path::new("lib.rs") && !is_mod_rs(t))
            .collect();
        if f != &macro_file && code.contains("note!") {
            to.insert(macro_file.clone());
        }
        g.insert(f.clone(), to);
    }
    g
}

fn is_mod_rs(f: &Path) -> bool {
    f.file_name().is_some_and(|n| n == "mod.rs")
}

/// The folder (or top file) a file belongs to.
fn top(f: &Path) -> String {
    let first = f.iter().next().expect("non-empty").to_string_lossy();
    first.to_string()
}

#[test]
fn src_is_the_top_files_and_one_folder_per_layer() {
    let mut names: Vec<String> = std::fs::read_dir(src())
        .expect("list src")
        .map(|e| e.expect("entry").file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    let mut want: Vec<String> = TOP_FILES
        .iter()
        .chain(LAYERS)
        .map(|s| s.to_string())
        .collect();
    want.sort();
    assert_eq!(
        names, want,
        "bench/src: the top files and one folder per layer"
    );
}

#[test]
fn every_folder_imports_only_from_the_layers_below_it() {
    let rank = |t: &str| LAYERS.iter().position(|l| *l == t);
    let mut wrong = Vec::new();
    for (f, to) in graph() {
        let from = top(&f);
        for t in &to {
            let into = top(t);
            if into == from {
                continue;
            }
            let ok = match (rank(&from), rank(&into)) {
                (Some(a), Some(b)) => b < a,
                // `cli.rs` (clap's types) is below every layer; the top files above all.
                (Some(_), None) => into == "cli.rs",
                (None, _) => from != "cli.rs",
            };
            if !ok {
                wrong.push(format!("{} imports {}", f.display(), t.display()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_command_line_imports_nothing_of_the_crate() {
    let g = graph();
    let cli = &g[Path::new("cli.rs")];
    assert!(cli.is_empty(), "cli.rs imports {cli:?}");
}

#[test]
fn no_files_import_each_other_round_a_circle() {
    let g = graph();
    // Depth-first search for a back edge; the circle it closes is named.
    fn visit(
        f: &Path,
        g: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        state: &mut BTreeMap<PathBuf, bool>,
        stack: &mut Vec<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        state.insert(f.to_path_buf(), false);
        stack.push(f.to_path_buf());
        for t in g.get(f).into_iter().flatten() {
            match state.get(t) {
                Some(false) => {
                    let at = stack.iter().position(|s| s == t).unwrap_or(0);
                    return Some(stack[at..].to_vec());
                }
                Some(true) => {}
                None => {
                    if let Some(c) = visit(t, g, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(f.to_path_buf(), true);
        None
    }
    let mut state = BTreeMap::new();
    for f in g.keys() {
        if !state.contains_key(f) {
            let circle = visit(f, &g, &mut state, &mut Vec::new());
            assert!(circle.is_none(), "an import circle: {circle:?}");
        }
    }
}

#[test]
fn every_mod_rs_holds_only_its_module_list() {
    let mut all = Vec::new();
    files(&src(), &mut all);
    let mut wrong = Vec::new();
    for f in all.iter().filter(|f| is_mod_rs(f)) {
        let text = std::fs::read_to_string(src().join(f)).expect("read");
        for line in code(&text).lines().map(str::trim).filter(|l| !l.is_empty()) {
            let module_line =
                (line.starts_with("pub mod ") || line.starts_with("mod ")) && line.ends_with(';');
            // A re-export of another crate's module, never of this crate's.
            let other_crate = line.starts_with("pub use truecold_");
            if !(module_line || other_crate || line.starts_with("#[")) {
                wrong.push(format!("{}: {line}", f.display()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "mod.rs with more than its module list:\n{}",
        wrong.join("\n")
    );
}

/// The reader itself sees what it must: a `use` group, an inline path, `super::`, and a
/// path into a folder's file.
#[test]
fn the_reader_resolves_groups_inline_paths_and_super() {
    let mut modules = BTreeMap::new();
    for m in ["campaign", "campaign::schedule", "campaign::spec", "plan"] {
        let v: Vec<String> = m.split("::").map(String::from).collect();
        modules.insert(v, PathBuf::from(format!("{}.rs", m.replace("::", "/"))));
    }
    let code = code(
        "use crate::campaign::{schedule::{Schedule, Slot}, spec};\n\
         // crate::plan::Nothing (a comment)\n\
         /* crate::plan::Nothing */ const S: &str = \"crate::plan::Nothing /*\";\n\
         fn f() { super::spec::x(); crate::plan::y(); }\n\
         #[cfg(test)]\nmod tests { use crate::campaign::schedule; }\n",
    );
    let here: Vec<String> = vec!["campaign".into(), "execute".into()];
    let got: BTreeSet<PathBuf> = paths(&code)
        .iter()
        .filter_map(|p| resolve(p, &here, &modules))
        .collect();
    let want: BTreeSet<PathBuf> = ["campaign/schedule.rs", "campaign/spec.rs", "plan.rs"]
        .into_iter()
        .map(PathBuf::from)
        .collect();
    assert_eq!(got, want);
}
