//! The crate's architecture, checked on its source: no import cycle between files, every import
//! between top-level modules points the way `src/lib.rs` and the README state, and no function
//! is longer than 150 lines. Read from the text (a small lexer that drops comments, strings and
//! character literals, then every `crate::`, `super::` and `self::` path, `use` groups included),
//! so it needs no compiler and runs in `cargo test`.
#![cfg(not(target_arch = "wasm32"))]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What each top-level module may import, besides itself. `attention` is the pure core; `cpu`,
/// `model` and `gpu` build on it in that order; `backend` runs them; `jobs` runs the trained
/// model's long work on the backend; `ui` shows everything and reaches the kernels only through
/// `backend` and `jobs` (it imports neither `cpu` nor `gpu`). `settings`, `embed`, `export` and
/// `viz` are pure and serve `ui`; `settings` knows no model's shape.
const ALLOWED: [(&str, &[&str]); 13] = [
    ("attention", &[]),
    ("cpu", &["attention"]),
    ("model", &["attention", "cpu"]),
    ("gpu", &["attention", "cpu", "model"]),
    ("settings", &["attention"]),
    ("embed", &["settings"]),
    ("export", &["attention"]),
    ("viz", &["attention"]),
    ("backend", &["attention", "cpu", "model", "gpu", "settings"]),
    ("jobs", &["attention", "cpu", "model", "backend"]),
    ("bench", &["attention", "cpu", "model", "gpu", "jobs"]),
    ("ui", &["attention", "model", "backend", "jobs", "settings", "embed", "export", "viz"]),
    (
        "lib",
        &[
            "attention",
            "cpu",
            "model",
            "gpu",
            "backend",
            "jobs",
            "settings",
            "embed",
            "export",
            "viz",
            "bench",
            "ui",
        ],
    ),
];

/// Inside `model`, by concern (the folder under `src/model/`, or the file for one that is alone;
/// `mod` is `model/mod.rs`): what each may import of the others. The tokenizers, the shape and
/// the figures' wording (`digits`) stand alone; the shared layers know only the shape; loading
/// knows the shape, the wording and the tokenizers (a family's tensors are data in `load/names.rs`, not code of the family); each
/// family builds on those, and neither imports the other's folder.
const MODEL_ALLOWED: [(&str, &[&str]); 9] = [
    ("spec", &[]),
    ("digits", &[]),
    ("intervals", &["digits"]),
    ("tokenize", &[]),
    ("layers", &["spec"]),
    ("load", &["spec", "digits", "tokenize"]),
    ("encoder", &["spec", "digits", "intervals", "layers", "load", "tokenize"]),
    ("decoder", &["spec", "digits", "intervals", "layers", "load", "tokenize"]),
    ("mod", &["spec", "digits", "intervals", "tokenize", "layers", "load", "encoder", "decoder"]),
];

/// Longest function allowed, in lines.
const MAX_FUNCTION_LINES: usize = 150;

/// The source with comments, string and character literals blanked (line breaks kept).
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let (mut out, mut i) = (String::with_capacity(src.len()), 0);
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    while i < c.len() {
        if c[i] == '/' && peek(&c, i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && peek(&c, i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && peek(&c, i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && peek(&c, i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (peek(&c, i + 1) == '"' || (peek(&c, i + 1) == '#' && matches!(peek(&c, i + 2), '"' | '#')))
        {
            // A raw string: r"..." or r#"..."#, closed by a quote and as many hashes.
            let hashes = (1..).take_while(|&k| peek(&c, i + k) == '#').count();
            i += 2 + hashes;
            while i < c.len() && !(c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#'))) {
                blank(&mut out, c[i]);
                i += 1;
            }
            i += 1 + hashes;
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c[i] == '\'' && (peek(&c, i + 1) == '\\' || peek(&c, i + 2) == '\'') {
            // A character literal ('x', '\n', '\''), not a lifetime ('a).
            i += if peek(&c, i + 1) == '\\' { 2 } else { 1 };
            while i < c.len() && c[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// The character at `i`, or NUL past the end.
fn peek(c: &[char], i: usize) -> char {
    c.get(i).copied().unwrap_or('\0')
}

fn is_ident(ch: char) -> bool {
    ch.is_alphanumeric() || ch == '_'
}

/// Every path starting with `crate`, `super` or `self` in stripped source, as its segments with
/// where it starts; a `use` group (`crate::a::{b::C, d}`) gives one path per member.
fn paths(code: &str) -> Vec<(usize, Vec<String>)> {
    let c: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let starts = (i == 0 || !is_ident(c[i - 1]) && c[i - 1] != ':')
            && ["crate", "super", "self"].iter().any(|k| code_at(&c, i, k) && code_at(&c, i + k.len(), "::"));
        if starts {
            let mut at = i;
            for tail in path_tails(&c, &mut at) {
                found.push((i, tail));
            }
            i = at.max(i + 1);
        } else {
            i += 1;
        }
    }
    found
}

/// The inline modules (`mod tests { ... }`) of stripped source: name and the span of the body.
fn inline_modules(code: &str) -> Vec<(String, std::ops::Range<usize>)> {
    let c: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    for i in 0..c.len() {
        if !(code_at(&c, i, "mod ") && (i == 0 || !is_ident(c[i - 1]))) {
            continue;
        }
        let name: String = c[i + 4..].iter().take_while(|ch| is_ident(**ch)).collect();
        let mut j = i + 4 + name.len();
        while j < c.len() && c[j].is_whitespace() {
            j += 1;
        }
        if peek(&c, j) != '{' {
            continue; // `mod name;`: a file of its own
        }
        let mut depth = 0;
        for (k, ch) in c.iter().enumerate().skip(j) {
            depth += match ch {
                '{' => 1,
                '}' => -1,
                _ => 0,
            };
            if depth == 0 {
                found.push((name, j..k));
                break;
            }
        }
    }
    found
}

fn code_at(c: &[char], i: usize, s: &str) -> bool {
    s.chars().enumerate().all(|(k, ch)| c.get(i + k) == Some(&ch))
}

/// Parses `seg (:: seg)*` at `*i`, where a segment is an identifier, `*`, or a `{...}` group;
/// returns every full path it names.
fn path_tails(c: &[char], i: &mut usize) -> Vec<Vec<String>> {
    let skip_space = |i: &mut usize| {
        while *i < c.len() && c[*i].is_whitespace() {
            *i += 1;
        }
    };
    skip_space(i);
    if *i < c.len() && c[*i] == '{' {
        *i += 1;
        let mut all = Vec::new();
        loop {
            skip_space(i);
            if *i >= c.len() || c[*i] == '}' {
                *i += 1;
                return all;
            }
            all.extend(path_tails(c, i));
            skip_space(i);
            if *i < c.len() && c[*i] == ',' {
                *i += 1;
            }
        }
    }
    let start = *i;
    while *i < c.len() && (is_ident(c[*i]) || c[*i] == '*') {
        *i += 1;
    }
    let seg: String = c[start..*i].iter().collect();
    if seg.is_empty() {
        return vec![vec![]];
    }
    if code_at(c, *i, "::") {
        *i += 2;
        return path_tails(c, i).into_iter().map(|t| [vec![seg.clone()], t].concat()).collect();
    }
    vec![vec![seg]]
}

/// A crate's files by module path (`["ui", "trained", "view"]`; `lib.rs` is `[]`).
struct Crate {
    root: PathBuf,
    files: BTreeMap<Vec<String>, PathBuf>,
}

impl Crate {
    fn read(root: &Path) -> Crate {
        let mut files = BTreeMap::new();
        let mut dirs = vec![root.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().map(Result::unwrap) {
                let path = entry.path();
                if path.is_dir() && path.file_name() != Some("bin".as_ref()) {
                    dirs.push(path);
                } else if path.extension() == Some("rs".as_ref()) && path != root.join("main.rs") {
                    files.insert(module_of(root, &path), path);
                }
            }
        }
        Crate { root: root.to_path_buf(), files }
    }

    /// The file a path in `module`'s code refers to: the longest prefix that is a module file.
    fn resolve(&self, module: &[String], path: &[String]) -> Option<&PathBuf> {
        let (head, rest) = path.split_first()?;
        let supers = rest.iter().take_while(|s| *s == "super").count();
        let mut parts: Vec<String> = match head.as_str() {
            "crate" => vec![],
            "self" => module.to_vec(),
            _ => module[..module.len().checked_sub(1 + supers)?].to_vec(),
        };
        parts.extend(rest.iter().skip(if head == "super" { supers } else { 0 }).cloned());
        (0..=parts.len()).rev().find_map(|k| self.files.get(&parts[..k]))
    }

    /// Each file's imports of other files.
    fn edges(&self) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
        let mut edges = BTreeMap::new();
        for (module, file) in &self.files {
            let code = strip(&std::fs::read_to_string(file).unwrap());
            let inline = inline_modules(&code);
            // `super` and `self` inside `mod tests { ... }` start from that inline module.
            let module_at = |at: usize| {
                let inner =
                    inline.iter().filter(|(_, body)| body.contains(&at)).map(|(name, _)| name.clone());
                module.iter().cloned().chain(inner).collect::<Vec<_>>()
            };
            let targets: BTreeSet<PathBuf> = paths(&code)
                .iter()
                .filter_map(|(at, p)| self.resolve(&module_at(*at), p))
                .filter(|t| *t != file)
                .cloned()
                .collect();
            edges.insert(file.clone(), targets);
        }
        edges
    }

    /// The top-level module of a file ("lib" for `lib.rs`).
    fn top(&self, file: &Path) -> String {
        module_of(&self.root, file).first().cloned().unwrap_or_else(|| "lib".into())
    }
}

fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> =
        rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The files of every import cycle (strongly connected components of more than one file).
fn cycles(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    // Two files are in one cycle when each reaches the other.
    let reach = |from: &PathBuf| {
        let (mut seen, mut todo) = (BTreeSet::new(), vec![from.clone()]);
        while let Some(f) = todo.pop() {
            for t in edges.get(&f).into_iter().flatten() {
                if seen.insert(t.clone()) {
                    todo.push(t.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&PathBuf, BTreeSet<PathBuf>> = edges.keys().map(|f| (f, reach(f))).collect();
    let mut found: Vec<Vec<PathBuf>> = Vec::new();
    for (f, r) in &reaches {
        let mut group: Vec<PathBuf> =
            r.iter().filter(|t| reaches.get(t).is_some_and(|b| b.contains(*f))).cloned().collect();
        group.sort();
        if group.len() > 1 && !found.contains(&group) {
            found.push(group);
        }
    }
    found
}

/// Imports between top-level modules that `ALLOWED` does not list.
fn forbidden(krate: &Crate, edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<String> {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.into_iter().collect();
    let mut bad = Vec::new();
    for (from, targets) in edges {
        let top = krate.top(from);
        for to in targets {
            let to_top = krate.top(to);
            let ok = to_top == top || allowed.get(top.as_str()).is_some_and(|a| a.contains(&to_top.as_str()));
            if !ok {
                bad.push(format!("{} imports {} ({top} may not use {to_top})", from.display(), to.display()));
            }
        }
    }
    bad
}

/// The concern of a file under `src/model/` (its folder there, or its own name; `mod` for
/// `model/mod.rs`), or `None` for a file elsewhere.
fn model_part(krate: &Crate, file: &Path) -> Option<String> {
    let module = module_of(&krate.root, file);
    (module.first().map(String::as_str) == Some("model"))
        .then(|| module.get(1).cloned().unwrap_or_else(|| "mod".into()))
}

/// Imports between the concerns of `model` that `MODEL_ALLOWED` does not list.
fn forbidden_in_model(krate: &Crate, edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<String> {
    let allowed: BTreeMap<&str, &[&str]> = MODEL_ALLOWED.into_iter().collect();
    let mut bad = Vec::new();
    for (from, targets) in edges {
        let Some(part) = model_part(krate, from) else { continue };
        for to in targets {
            let Some(to_part) = model_part(krate, to) else { continue };
            let ok =
                to_part == part || allowed.get(part.as_str()).is_some_and(|a| a.contains(&to_part.as_str()));
            if !ok {
                bad.push(format!(
                    "{} imports {} (model/{part} may not use model/{to_part})",
                    from.display(),
                    to.display()
                ));
            }
        }
    }
    bad
}

/// Loops in `ui/` whose body awaits: a loop that steps work between the browser's turns is a
/// driver, and the one driver is `jobs::driver::drive` (components start jobs and show what they
/// publish). As `file:line`.
fn loops_that_await(krate: &Crate) -> Vec<String> {
    let mut found = Vec::new();
    for (module, file) in &krate.files {
        if module.first().map(String::as_str) != Some("ui") {
            continue;
        }
        let code = strip(&std::fs::read_to_string(file).unwrap());
        let c: Vec<char> = code.chars().collect();
        for keyword in ["loop", "while", "for"] {
            let mut from = 0;
            while let Some(at) = code[from..].find(keyword).map(|i| from + i) {
                from = at + keyword.len();
                let before = code[..at].chars().next_back().unwrap_or(' ');
                let after = c.get(code[..from].chars().count()).copied().unwrap_or(' ');
                if is_ident(before) || is_ident(after) || before == '.' {
                    continue;
                }
                // The loop's body: the first brace after the keyword, to its match (a `for` that
                // is not a loop, as in `impl A for B`, has no `in` before its brace).
                let Some(open) = code[from..].find('{').map(|i| from + i) else { continue };
                if keyword == "for" && !code[from..open].contains(" in ") {
                    continue;
                }
                let (mut depth, mut end) = (0i32, open);
                for (i, ch) in code[open..].char_indices() {
                    depth += match ch {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    if depth == 0 {
                        end = open + i;
                        break;
                    }
                }
                if code[open..end].contains(".await") {
                    found.push(format!("{}:{}", file.display(), code[..at].lines().count()));
                }
            }
        }
    }
    found
}

/// Functions longer than `limit` lines, by brace matching from each `fn` line.
fn long_functions(krate: &Crate, limit: usize) -> Vec<String> {
    let mut long = Vec::new();
    for file in krate.files.values() {
        let code = strip(&std::fs::read_to_string(file).unwrap());
        let lines: Vec<&str> = code.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let words: Vec<&str> = line.split(|c: char| !is_ident(c)).filter(|w| !w.is_empty()).collect();
            let Some(at) = words.iter().position(|w| *w == "fn") else { continue };
            if at > 0
                && !["pub", "async", "unsafe", "const", "crate", "super", "self", "in"]
                    .contains(&words[at - 1])
            {
                continue;
            }
            let (mut depth, mut started) = (0i32, false);
            for (k, l) in lines.iter().enumerate().skip(n) {
                if !started && l.trim_end().ends_with(';') {
                    break; // a declaration without a body
                }
                for ch in l.chars() {
                    depth += match ch {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    started |= ch == '{';
                }
                if started && depth <= 0 {
                    if k - n + 1 > limit {
                        long.push(format!(
                            "{}:{} fn {} ({} lines)",
                            file.display(),
                            n + 1,
                            words[at + 1],
                            k - n + 1
                        ));
                    }
                    break;
                }
            }
        }
    }
    long
}

fn this_crate() -> Crate {
    Crate::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

#[test]
fn no_file_imports_another_that_imports_it_back() {
    let krate = this_crate();
    let edges = krate.edges();
    assert!(edges.len() > 50, "only {} files read", edges.len());
    assert_eq!(cycles(&edges), Vec::<Vec<PathBuf>>::new());
}

#[test]
fn imports_between_modules_point_the_stated_way() {
    let krate = this_crate();
    // Every top-level module is in the table, and the table itself has no cycle.
    let tops: BTreeSet<String> = krate.files.values().map(|f| krate.top(f)).collect();
    let listed: BTreeSet<String> = ALLOWED.iter().map(|(m, _)| m.to_string()).collect();
    assert_eq!(tops, listed, "modules and the table differ");
    let table: BTreeMap<PathBuf, BTreeSet<PathBuf>> = ALLOWED
        .iter()
        .map(|(m, uses)| (PathBuf::from(m), uses.iter().map(PathBuf::from).collect()))
        .collect();
    assert_eq!(cycles(&table), Vec::<Vec<PathBuf>>::new());
    assert_eq!(forbidden(&krate, &krate.edges()), Vec::<String>::new());
}

#[test]
fn the_model_is_kept_in_folders_by_concern_and_neither_family_imports_the_other() {
    let krate = this_crate();
    // Every concern under src/model/ is in the table, and the table has no cycle.
    let parts: BTreeSet<String> = krate.files.values().filter_map(|f| model_part(&krate, f)).collect();
    let listed: BTreeSet<String> = MODEL_ALLOWED.iter().map(|(m, _)| m.to_string()).collect();
    assert_eq!(parts, listed, "src/model/'s folders and the table differ");
    let table: BTreeMap<PathBuf, BTreeSet<PathBuf>> = MODEL_ALLOWED
        .iter()
        .map(|(m, uses)| (PathBuf::from(m), uses.iter().map(PathBuf::from).collect()))
        .collect();
    assert_eq!(cycles(&table), Vec::<Vec<PathBuf>>::new());
    let allowed: BTreeMap<&str, &[&str]> = MODEL_ALLOWED.into_iter().collect();
    assert!(!allowed["encoder"].contains(&"decoder") && !allowed["decoder"].contains(&"encoder"));
    assert_eq!(forbidden_in_model(&krate, &krate.edges()), Vec::<String>::new());
}

#[test]
fn no_component_drives_work_in_a_loop_of_its_own() {
    assert_eq!(loops_that_await(&this_crate()), Vec::<String>::new());
}

#[test]
fn no_function_is_longer_than_150_lines() {
    assert_eq!(long_functions(&this_crate(), MAX_FUNCTION_LINES), Vec::<String>::new());
}

/// The checks themselves, on a small crate written for the purpose: they must see a cycle, an
/// upward import and a long function where there are some, and nothing in comments or strings.
#[test]
fn the_checks_find_what_they_look_for() {
    let dir = std::env::temp_dir().join(format!("headlab-architecture-{}", std::process::id()));
    let write = |path: &str, text: &str| {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    };
    let body = "    let x = 1;\n".repeat(MAX_FUNCTION_LINES);
    write("lib.rs", "pub mod attention;\npub mod cpu;\n");
    write(
        "attention/mod.rs",
        // In `mod tests { ... }`, `super::super` is the crate root: an import of cpu.
        "pub mod a;\npub mod b;\n// crate::cpu::X in a comment\nconst S: &str = \"crate::cpu::Y\";\nmod tests { use super::super::cpu::K; }\n",
    );
    write("attention/a.rs", "use super::b::Thing;\nuse crate::{cpu::{self, Kernel}, attention::b};\n");
    write(
        "attention/b.rs",
        &format!("pub fn thing() {{\n{body}}}\nfn t() {{ super::a::f(); let c = '\"'; }}\n"),
    );
    write("cpu/mod.rs", "fn f<'a>(x: &'a str) -> char { '{' }\n");
    write(
        "ui/mod.rs",
        "async fn a() { for x in y { z(); } }\nasync fn b() {\n    while go() {\n        step().await;\n    }\n}\nfn c() { // loop { x.await }\n}\nimpl J for K { async fn d() { e().await } }\n",
    );
    let krate = Crate::read(&dir);
    let edges = krate.edges();
    let names = |files: &[PathBuf]| files.iter().map(|f| module_of(&dir, f).join("/")).collect::<Vec<_>>();
    assert_eq!(
        cycles(&edges).iter().map(|c| names(c)).collect::<Vec<_>>(),
        vec![vec!["attention/a", "attention/b"]]
    );
    let bad = forbidden(&krate, &edges);
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(bad.iter().all(|b| b.contains("attention may not use cpu")), "{bad:?}");
    assert!(
        bad[0].contains("attention/a.rs imports") && bad[1].contains("attention/mod.rs imports"),
        "{bad:?}"
    );
    assert_eq!(
        loops_that_await(&krate)
            .iter()
            .map(|l| l.rsplit('/').next().unwrap().to_string())
            .collect::<Vec<_>>(),
        ["mod.rs:3"],
        "the awaiting loop, not the plain one or the comment"
    );
    let long = long_functions(&krate, MAX_FUNCTION_LINES);
    assert_eq!(long.len(), 1, "{long:?}");
    assert!(long[0].contains("fn thing (152 lines)"), "{long:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
