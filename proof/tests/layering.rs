//! The proof crate is layered: no import circle between its files (docs/architecture.md,
//! "The directory skeleton": nothing below uses anything above it).
//!
//! The graph: one node per file of `proof/src` (`main.rs`, the binary, aside), an edge from
//! a file to every file that defines an item it names — through a `use` (trees expanded, a
//! path relative to the module or through `crate::`, `super::`, `self::`) or a path in its
//! code (`crate::fmt::ms(…)`) — following `pub use` re-exports, globs included, to the file
//! that defines the item. Comments, literals and `#[cfg(test)]` items are left out.
//!
//! `cargo test -p truecold-proof --test layering -- --nocapture` prints the measure: files,
//! edges, every circle with its files, and the five largest files and functions. Another
//! tree is measured by pointing `PROOF_SRC` at its `src` (e.g. an older commit's, from
//! `git archive <commit> proof/src | tar -x -C /tmp/old`).

#[path = "support/source.rs"]
mod source;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use source::{code_only, fn_bodies, rust_files, without_tests, workspace};

type Module = Vec<String>;

/// A use tree (`a::{b, c::{d, e as f}}`) as its paths (`[a, b]`, `[a, c, d]`, `[a, c, e]`).
fn expand(tree: &str) -> Vec<Vec<String>> {
    fn split_top(t: &str) -> Vec<String> {
        let (mut parts, mut depth, mut cur) = (Vec::new(), 0i32, String::new());
        for c in t.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if c == ',' && depth == 0 {
                parts.push(std::mem::take(&mut cur));
            } else {
                cur.push(c);
            }
        }
        parts.push(cur);
        parts
            .into_iter()
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect()
    }
    fn rec(prefix: &[String], t: &str, out: &mut Vec<Vec<String>>) {
        for p in split_top(t) {
            if let Some(open) = p.find('{') {
                let pre: Vec<String> = p[..open]
                    .split("::")
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect();
                let inner = p[open + 1..].trim_end().trim_end_matches('}');
                let mut next = prefix.to_vec();
                next.extend(pre);
                rec(&next, inner, out);
            } else {
                let p = p.split(" as ").next().unwrap_or("").trim();
                let mut path = prefix.to_vec();
                path.extend(p.split("::").map(|s| s.trim().to_string()));
                out.push(path);
            }
        }
    }
    let flat: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    rec(&[], &flat, &mut out);
    out
}

/// A `use` statement: whether it is `pub` (any visibility), and its tree.
struct Use {
    public: bool,
    tree: String,
}

/// Every `use` statement of `code`, and `code` with them blanked.
fn uses(code: &str) -> (Vec<Use>, String) {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut rest = code.to_string();
    let mut from = 0;
    while let Some(k) = code[from..].find("use ") {
        let at = from + k;
        from = at + 4;
        if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
            continue;
        }
        let Some(end) = code[at..].find(';').map(|e| at + e) else {
            break;
        };
        let before = code[..at].trim_end();
        let public = before.ends_with("pub") || (before.ends_with(')') && before.contains("pub("));
        out.push(Use {
            public,
            tree: code[at + 4..end].to_string(),
        });
        rest.replace_range(at..end, &" ".repeat(end - at));
        from = end;
    }
    (out, rest)
}

/// Every path of `code` that starts at `crate`, `super` or `self`.
fn paths(code: &str) -> Vec<Vec<String>> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(k) = code[from..].find(start) {
            let at = from + k;
            from = at + start.len();
            if at > 0
                && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_' || b[at - 1] == b':')
            {
                continue;
            }
            let mut segs = Vec::new();
            let mut rest = &code[at..];
            loop {
                let seg: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if seg.is_empty() {
                    break;
                }
                rest = &rest[seg.len()..];
                segs.push(seg);
                match rest.strip_prefix("::") {
                    Some(r) => rest = r,
                    None => break,
                }
            }
            out.push(segs);
        }
    }
    out
}

/// The names a file declares at any depth (`fn`, `struct`, `enum`, `const`, `static`,
/// `type`, `trait`, `mod`), public or not.
fn declared(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for l in code.lines() {
        let mut t = l.trim_start();
        if let Some(r) = t.strip_prefix("pub") {
            t = r.trim_start();
            if t.starts_with('(') {
                t = t.split_once(')').map_or("", |(_, r)| r).trim_start();
            }
        }
        t = t.strip_prefix("unsafe ").unwrap_or(t);
        for kw in [
            "fn ", "struct ", "enum ", "const ", "static ", "type ", "trait ", "mod ",
        ] {
            if let Some(r) = t.strip_prefix(kw) {
                let name: String = r
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        }
    }
    out
}

/// The import graph of the crate whose `src` is `src`.
struct Graph {
    files: BTreeMap<Module, PathBuf>,
    edges: BTreeMap<Module, BTreeSet<Module>>,
}

impl Graph {
    fn of(src: &Path) -> Graph {
        let mut files = BTreeMap::new();
        for p in rust_files(src) {
            let rel = p.strip_prefix(src).unwrap_or(&p).with_extension("");
            if rel == Path::new("main") {
                continue;
            }
            let mut m: Module = rel
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect();
            if m.last().is_some_and(|l| l == "mod" || l == "lib") {
                m.pop();
            }
            files.insert(m, p);
        }
        let code: BTreeMap<Module, String> = files
            .iter()
            .map(|(m, p)| {
                let text =
                    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                (m.clone(), without_tests(&code_only(&text)))
            })
            .collect();
        let absolute = |m: &Module, segs: &[String]| -> Option<Vec<String>> {
            let first = segs.first()?;
            match first.as_str() {
                "crate" => Some(segs[1..].to_vec()),
                "self" => Some(m.iter().chain(&segs[1..]).cloned().collect()),
                "super" => {
                    let mut cur = m.clone();
                    let mut i = 0;
                    while segs.get(i).is_some_and(|s| s == "super") {
                        cur.pop();
                        i += 1;
                    }
                    Some(cur.into_iter().chain(segs[i..].iter().cloned()).collect())
                }
                // A path relative to the module: one of its children.
                child => {
                    let mut c = m.clone();
                    c.push(child.to_string());
                    files
                        .contains_key(&c)
                        .then(|| m.iter().chain(segs).cloned().collect())
                }
            }
        };
        let mut reexports: BTreeMap<(Module, String), Vec<String>> = BTreeMap::new();
        let mut globs: BTreeMap<Module, Vec<Vec<String>>> = BTreeMap::new();
        let mut defs: BTreeMap<Module, BTreeSet<String>> = BTreeMap::new();
        let mut parsed: BTreeMap<Module, (Vec<Use>, String)> = BTreeMap::new();
        for (m, c) in &code {
            defs.insert(m.clone(), declared(c));
            let (us, rest) = uses(c);
            for u in us.iter().filter(|u| u.public) {
                for p in expand(&u.tree) {
                    let a =
                        absolute(m, &p).unwrap_or_else(|| m.iter().chain(&p).cloned().collect());
                    match a.split_last() {
                        Some((last, head)) if last == "*" => {
                            globs.entry(m.clone()).or_default().push(head.to_vec())
                        }
                        Some((last, _)) => {
                            reexports.insert((m.clone(), last.clone()), a.clone());
                        }
                        None => {}
                    }
                }
            }
            parsed.insert(m.clone(), (us, rest));
        }
        struct Resolver<'a> {
            files: &'a BTreeMap<Module, PathBuf>,
            reexports: &'a BTreeMap<(Module, String), Vec<String>>,
            globs: &'a BTreeMap<Module, Vec<Vec<String>>>,
            defs: &'a BTreeMap<Module, BTreeSet<String>>,
        }
        impl Resolver<'_> {
            /// The file that defines the item at the absolute path `a`.
            fn resolve(&self, a: &[String], depth: usize) -> Option<Module> {
                for k in (0..=a.len()).rev() {
                    let m: Module = a[..k].to_vec();
                    if !self.files.contains_key(&m) {
                        continue;
                    }
                    let Some(name) = a.get(k) else {
                        return Some(m);
                    };
                    if depth < 10 {
                        if let Some(t) = self.reexports.get(&(m.clone(), name.clone())) {
                            let next: Vec<String> = t.iter().chain(&a[k + 1..]).cloned().collect();
                            return self.resolve(&next, depth + 1);
                        }
                        if !self.defs.get(&m).is_some_and(|d| d.contains(name)) {
                            for g in self.globs.get(&m).into_iter().flatten() {
                                let probe: Vec<String> = g.iter().chain([name]).cloned().collect();
                                if let Some(gm) = self.resolve(&probe, depth + 1) {
                                    let holds = self
                                        .defs
                                        .get(&gm)
                                        .is_some_and(|d| d.contains(name))
                                        || self.reexports.contains_key(&(gm.clone(), name.clone()));
                                    if gm != m && holds {
                                        let next: Vec<String> =
                                            g.iter().chain(&a[k..]).cloned().collect();
                                        return self.resolve(&next, depth + 1);
                                    }
                                }
                            }
                        }
                    }
                    return Some(m);
                }
                None
            }
        }
        let r = Resolver {
            files: &files,
            reexports: &reexports,
            globs: &globs,
            defs: &defs,
        };
        let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        for (m, (us, rest)) in &parsed {
            let all = us.iter().flat_map(|u| expand(&u.tree)).chain(paths(rest));
            for p in all {
                let Some(a) = absolute(m, &p) else {
                    continue;
                };
                if let Some(t) = r.resolve(&a, 0) {
                    if &t != m && !t.is_empty() {
                        edges.entry(m.clone()).or_default().insert(t);
                    }
                }
            }
        }
        Graph { files, edges }
    }

    fn name(&self, m: &Module) -> String {
        let p = &self.files[m];
        let src = p
            .ancestors()
            .find(|a| a.file_name().is_some_and(|n| n == "src"))
            .unwrap_or(Path::new(""));
        p.strip_prefix(src).unwrap_or(p).display().to_string()
    }

    /// The strongly connected components of more than one file (Tarjan).
    fn circles(&self) -> Vec<Vec<Module>> {
        struct T<'a> {
            g: &'a Graph,
            index: BTreeMap<Module, usize>,
            low: BTreeMap<Module, usize>,
            stack: Vec<Module>,
            on: BTreeSet<Module>,
            out: Vec<Vec<Module>>,
        }
        impl T<'_> {
            fn visit(&mut self, v: &Module) {
                let i = self.index.len();
                self.index.insert(v.clone(), i);
                self.low.insert(v.clone(), i);
                self.stack.push(v.clone());
                self.on.insert(v.clone());
                for w in self.g.edges.get(v).into_iter().flatten() {
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let lw = self.low[w];
                        let lv = self.low.get_mut(v).expect("visited");
                        *lv = (*lv).min(lw);
                    } else if self.on.contains(w) {
                        let iw = self.index[w];
                        let lv = self.low.get_mut(v).expect("visited");
                        *lv = (*lv).min(iw);
                    }
                }
                if self.low[v] == self.index[v] {
                    let mut comp = Vec::new();
                    while let Some(w) = self.stack.pop() {
                        self.on.remove(&w);
                        let done = &w == v;
                        comp.push(w);
                        if done {
                            break;
                        }
                    }
                    if comp.len() > 1 {
                        comp.sort();
                        self.out.push(comp);
                    }
                }
            }
        }
        let mut t = T {
            g: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on: BTreeSet::new(),
            out: Vec::new(),
        };
        for v in self.files.keys() {
            if !t.index.contains_key(v) {
                t.visit(v);
            }
        }
        t.out
    }

    /// The measure, as text: files, edges, every circle, the largest files and functions.
    fn report(&self) -> String {
        let n_edges: usize = self.edges.values().map(BTreeSet::len).sum();
        let mut s = format!("{} files, {} edges\n", self.files.len(), n_edges);
        let circles = self.circles();
        for c in &circles {
            let set: BTreeSet<&Module> = c.iter().collect();
            let inner: usize = c
                .iter()
                .map(|m| {
                    self.edges
                        .get(m)
                        .map_or(0, |e| e.iter().filter(|t| set.contains(t)).count())
                })
                .sum();
            s += &format!("circle of {} files, {inner} edges:\n", c.len());
            for m in c {
                let to: Vec<String> = self
                    .edges
                    .get(m)
                    .into_iter()
                    .flatten()
                    .filter(|t| set.contains(t))
                    .map(|t| self.name(t))
                    .collect();
                s += &format!("  {} -> {}\n", self.name(m), to.join(", "));
            }
        }
        if circles.is_empty() {
            s += "no circle\n";
        }
        let mut sizes: Vec<(usize, String)> = Vec::new();
        let mut fns: Vec<(usize, String)> = Vec::new();
        for (m, p) in &self.files {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            sizes.push((text.lines().count(), self.name(m)));
            for f in fn_bodies(&code_only(&text)) {
                fns.push((
                    f.last - f.first + 1,
                    format!("{}:{} fn {}", self.name(m), f.first, f.name),
                ));
            }
        }
        sizes.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        fns.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        s += "largest files (lines):\n";
        for (n, f) in sizes.iter().take(5) {
            s += &format!("  {n:>5} {f}\n");
        }
        s += "largest functions (lines):\n";
        for (n, f) in fns.iter().take(5) {
            s += &format!("  {n:>5} {f}\n");
        }
        s
    }
}

#[test]
fn no_import_circle_in_proof_src() {
    let src = std::env::var_os("PROOF_SRC")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("proof/src"));
    let g = Graph::of(&src);
    let report = g.report();
    println!("{}:\n{report}", src.display());
    assert!(
        g.files.len() > 40,
        "only {} files under {}",
        g.files.len(),
        src.display()
    );
    assert!(
        g.circles().is_empty(),
        "import circles in {}:\n{report}",
        src.display()
    );
}

/// The measure finds a circle through a re-export, a glob, a relative `use`, a `super::`
/// path and a path in code; and none in a tree without one.
#[test]
fn the_measure_finds_a_circle() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    std::fs::create_dir_all(src.join("k")).unwrap();
    let write = |p: &str, s: &str| std::fs::write(src.join(p), s).unwrap();
    write(
        "lib.rs",
        "pub mod a;\npub mod b;\npub mod k;\npub use a::top;\n",
    );
    write("a.rs", "//! a\npub fn top() {}\n");
    write(
        "b.rs",
        "pub fn low() -> u8 { 1 }\n#[cfg(test)]\nmod tests { use crate::top; }\n",
    );
    write("k/mod.rs", "mod x;\nmod y;\npub use x::*;\npub use y::Y;\n");
    write("k/x.rs", "pub fn xf() { super::y::yf() }\n");
    write("k/y.rs", "pub struct Y;\npub fn yf() {}\n");
    let g = Graph::of(&src);
    assert!(g.circles().is_empty(), "{}", g.report());
    // a → b through a path in code; b → a through the crate root's re-export.
    write("a.rs", "pub fn top() { crate::b::low(); }\n");
    write("b.rs", "use crate::top;\npub fn low() -> u8 { top(); 1 }\n");
    // y → x through the glob of k; x → y through `super::`.
    write(
        "k/y.rs",
        "use crate::k::xf;\npub struct Y;\npub fn yf() { xf() }\n",
    );
    let g = Graph::of(&src);
    let names: Vec<Vec<String>> = g
        .circles()
        .iter()
        .map(|c| c.iter().map(|m| g.name(m)).collect())
        .collect();
    assert_eq!(
        names,
        vec![
            vec!["a.rs".to_string(), "b.rs".into()],
            vec!["k/x.rs".into(), "k/y.rs".into()]
        ],
        "{}",
        g.report()
    );
}
