//! The layering rule of every crate in the workspace: following the imports between a crate's
//! files never leads back to where it started.
//!
//! A module is a file (`src/a/mod.rs` is module `a`, `src/a/b.rs` is `a::b`); a module
//! declared inline (`#[cfg(test)] mod tests { .. }`) belongs to its file, so a test module's
//! imports count as its file's. An import is any `crate::..`, `super::..` or `self::..` path,
//! in a `use` tree or in the code, resolved to the longest prefix that is a module; a name
//! the target module itself imports (`pub use child::Item`) resolves to where it comes from.
//! A module and the modules it declares count as one: a child may use its parent's items, and
//! a parent's references to its own children are not followed. Each binary of `src/bin/` is
//! a crate of its own. The crates are the root `Cargo.toml`'s workspace members, so a new
//! crate is covered without touching this file.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// Module → the modules it imports from.
type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn no_crate_has_an_import_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let members = workspace_members(&root);
    assert!(members.len() > 3, "workspace members: {members:?}");
    let mut failures = Vec::new();
    for member in &members {
        for (name, graph) in crate_graphs(&root.join(member), member) {
            let circles = circles(&graph);
            if circles.is_empty() {
                println!("{name}: {} modules, no import circle", graph.len());
                continue;
            }
            for circle in &circles {
                println!("{name}: import circle {}", circle.join(" -> "));
                failures.push(format!("{name}: {}", circle.join(" -> ")));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "import circles:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_circle_finder_sees_a_circle_and_only_a_circle() {
    let graph = |edges: &[(&str, &str)]| {
        let mut graph = Graph::new();
        for (from, to) in edges {
            graph
                .entry(from.to_string())
                .or_default()
                .insert(to.to_string());
            graph.entry(to.to_string()).or_default();
        }
        graph
    };
    let layered = graph(&[("api", "state"), ("api", "acquire"), ("acquire", "state")]);
    assert!(circles(&layered).is_empty());
    let circular = graph(&[
        ("api", "acquire"),
        ("acquire", "state"),
        ("state", "api"),
        ("state", "clock"),
    ]);
    assert_eq!(
        circles(&circular),
        vec![vec!["acquire", "state", "api", "acquire"]]
    );
    let two = graph(&[("a", "b"), ("b", "a"), ("c", "c")]);
    assert_eq!(circles(&two), vec![vec!["a", "b", "a"], vec!["c", "c"]]);
}

#[test]
fn imports_are_read_from_use_trees_paths_and_test_modules() {
    let modules: BTreeSet<String> = [
        "store",
        "store::etcd",
        "store::etcd::lock",
        "store::etcd::queue",
        "store::etcd::records",
        "lease",
        "test_support",
    ]
    .map(String::from)
    .into();
    let lock = "
        use super::{queue::{Joined, PassedOn}, records};  // use crate::lease;
        use crate::store::StoreError;
        fn f() -> &'static str { let _ = super::super::Acquired; \"crate::lease\" }
        #[cfg(test)]
        mod tests {
            use super::*;
            use crate::test_support::Fixture;
            fn g() { super::super::queue::h() }
        }
    ";
    let files = BTreeMap::from([("store::etcd::lock".to_string(), lock.to_string())]);
    let graph = graph_of(&files, &modules);
    let found: Vec<&str> = graph["store::etcd::lock"]
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(
        found,
        [
            "store",
            "store::etcd::queue",
            "store::etcd::records",
            "test_support"
        ]
    );
}

/// The `members` of the root `Cargo.toml`'s `[workspace]` (a `dir/*` entry: every crate in
/// `dir`).
fn workspace_members(root: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let list = manifest
        .split_once("members")
        .and_then(|(_, rest)| rest.split_once('['))
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(list, _)| list)
        .expect("a members list in the root Cargo.toml");
    let mut members = Vec::new();
    for entry in list.split('"').skip(1).step_by(2) {
        match entry.strip_suffix("/*") {
            Some(dir) => {
                let mut crates: Vec<String> = std::fs::read_dir(root.join(dir))
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .filter(|p| p.join("Cargo.toml").is_file())
                    .map(|p| format!("{dir}/{}", p.file_name().unwrap().to_string_lossy()))
                    .collect();
                crates.sort();
                members.extend(crates);
            }
            None => members.push(entry.to_string()),
        }
    }
    members
}

/// The import graphs of a crate: its library (and `main.rs`), and each binary of `src/bin/`.
fn crate_graphs(dir: &Path, name: &str) -> Vec<(String, Graph)> {
    let src = dir.join("src");
    let paths = rust_files(&src);
    assert!(
        !paths.is_empty(),
        "{name}: no source under {}",
        src.display()
    );
    let bin = src.join("bin");
    let mut targets: BTreeMap<String, (PathBuf, Vec<PathBuf>)> = BTreeMap::new();
    for path in paths {
        let (target, root) = match path.strip_prefix(&bin) {
            Ok(inside) => {
                let first = inside.iter().next().unwrap().to_string_lossy();
                let binary = first.trim_end_matches(".rs").to_string();
                let root = if inside.iter().count() == 1 {
                    bin.clone()
                } else {
                    bin.join(&binary)
                };
                (format!("{name} (bin {binary})"), root)
            }
            Err(_) => (name.to_string(), src.clone()),
        };
        targets
            .entry(target)
            .or_insert_with(|| (root, Vec::new()))
            .1
            .push(path);
    }
    targets
        .into_iter()
        .map(|(target, (root, paths))| {
            // `lib.rs` and `main.rs` are both the root: their imports count together.
            let mut files: BTreeMap<String, String> = BTreeMap::new();
            for path in &paths {
                let text = std::fs::read_to_string(path).unwrap();
                let file = files.entry(module_of(&root, path)).or_default();
                file.push_str(&text);
                file.push('\n');
            }
            let modules = files.keys().cloned().collect();
            (target, graph_of(&files, &modules))
        })
        .collect()
}

/// The `.rs` files below `dir`, in path order.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let (mut files, mut dirs) = (Vec::new(), vec![dir.to_path_buf()]);
    while let Some(dir) = dirs.pop() {
        for path in std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()) {
            match path.extension() {
                _ if path.is_dir() => dirs.push(path),
                Some(ext) if ext == "rs" => files.push(path),
                _ => {}
            }
        }
    }
    files.sort();
    files
}

/// A file's module path below `root`: `a.rs` and `a/mod.rs` → `a`, `a/b.rs` → `a::b`,
/// `lib.rs` and `main.rs` (or a binary's own file) → `` (the crate root).
fn module_of(root: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    // A binary of its own file is the root of its crate, whatever its name.
    let is_root =
        parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main" || root.ends_with("bin"));
    if is_root {
        return String::new();
    }
    parts.join("::")
}

/// The graph of the files `module → source`: the modules each file imports from, besides
/// itself and the modules it declares.
fn graph_of(files: &BTreeMap<String, String>, modules: &BTreeSet<String>) -> Graph {
    let parsed: BTreeMap<&String, Imports> = files
        .iter()
        .map(|(module, text)| (module, imports(module, &tokens(text), modules)))
        .collect();
    parsed
        .iter()
        .map(|(from, imports)| {
            let targets = imports
                .paths
                .iter()
                .map(|path| through_reexports(path, modules, &parsed))
                // The root is every module's ancestor: nothing imported from it leads back.
                .filter(|to| !to.is_empty() && to != *from)
                .filter(|to| !to.starts_with(&format!("{from}::")))
                .collect();
            (from.to_string(), targets)
        })
        .collect()
}

/// The module `path` (absolute segments) lands in: the longest prefix that is a module, or,
/// when the next segment is a name that module imports, the module it imports it from.
fn through_reexports(
    path: &[String],
    modules: &BTreeSet<String>,
    parsed: &BTreeMap<&String, Imports>,
) -> String {
    let mut path = path.to_vec();
    // Bounded: a name imported back and forth resolves somewhere all the same.
    for _ in 0..8 {
        let (module, rest) = split_module(&path, modules);
        let imported = rest
            .first()
            .and_then(|name| parsed.get(&module)?.names.get(name));
        match imported {
            Some(origin) => {
                let mut next = origin.clone();
                next.extend_from_slice(&rest[1..]);
                path = next;
            }
            _ => return module,
        }
    }
    split_module(&path, modules).0
}

/// The longest prefix of `path` that is a module, and the segments after it.
fn split_module<'p>(path: &'p [String], modules: &BTreeSet<String>) -> (String, &'p [String]) {
    for len in (1..=path.len()).rev() {
        let candidate = path[..len].join("::");
        if modules.contains(&candidate) {
            return (candidate, &path[len..]);
        }
    }
    (String::new(), path)
}

/// What one file imports.
#[derive(Default)]
struct Imports {
    /// Every `crate::`/`super::`/`self::` path and every `use` path inside the crate, as
    /// absolute segments.
    paths: Vec<Vec<String>>,
    /// The names the file's top-level `use` declarations bring in (`as` renames included),
    /// with the absolute path each stands for.
    names: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    PathSep,
    Open,
    Close,
    Comma,
    Star,
    Semi,
    Other,
}

/// The tokens of Rust source that matter for paths, with comments, strings and character
/// literals left out (so `"crate::x"` in a message is not an import).
fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' {
            i = skip_string(&chars, i + 1, None);
        } else if let Some((start, raw)) = string_prefix(&chars, i) {
            i = skip_string(&chars, start, raw);
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{1F600}'), else a lifetime or label.
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Token::Ident(chars[start..i].iter().collect()));
        } else {
            out.push(match c {
                ':' if next == Some(':') => {
                    i += 1;
                    Token::PathSep
                }
                '{' => Token::Open,
                '}' => Token::Close,
                ',' => Token::Comma,
                '*' => Token::Star,
                ';' => Token::Semi,
                _ => Token::Other,
            });
            i += 1;
        }
    }
    out
}

/// For a byte or raw string starting at `i` (`b"`, `r"`, `r#"`, `br#"`): the index after its
/// opening quote and, for a raw string, its number of `#`s.
fn string_prefix(chars: &[char], i: usize) -> Option<(usize, Option<usize>)> {
    let mut j = i;
    if chars[j] == 'b' {
        j += 1;
    }
    let raw = chars.get(j) == Some(&'r');
    if raw {
        j += 1;
    }
    if j == i {
        return None;
    }
    let hashes = chars[j..].iter().take_while(|c| **c == '#').count();
    (chars.get(j + hashes) == Some(&'"')).then_some((j + hashes + 1, raw.then_some(hashes)))
}

/// The index after the string whose body starts at `i`: a plain one (escapes apply) for
/// `raw` `None`, else one that ends with `"` and that many `#`s.
fn skip_string(chars: &[char], mut i: usize, raw: Option<usize>) -> usize {
    while i < chars.len() {
        match (chars[i], raw) {
            ('\\', None) => i += 2,
            ('"', None) => return i + 1,
            ('"', Some(hashes))
                if chars[i + 1..].iter().take_while(|c| **c == '#').count() >= hashes =>
            {
                return i + 1 + hashes
            }
            _ => i += 1,
        }
    }
    i
}

/// The imports in the tokens of module `module`, inline modules (`mod tests { .. }`)
/// included: inside one, `self` and `super` are relative to it.
fn imports(module: &str, tokens: &[Token], modules: &BTreeSet<String>) -> Imports {
    let file_scope: Vec<String> = module
        .split("::")
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    let mut imports = Imports::default();
    // One entry per open brace: the inline module it opens, if it does.
    let mut braces: Vec<Option<String>> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let scope: Vec<String> = file_scope
            .iter()
            .cloned()
            .chain(braces.iter().flatten().cloned())
            .collect();
        let ident = |at: usize| match tokens.get(at) {
            Some(Token::Ident(word)) => Some(word.as_str()),
            _ => None,
        };
        match &tokens[i] {
            Token::Open => braces.push(None),
            Token::Close => {
                braces.pop();
            }
            Token::Ident(word) if word == "mod" => {
                if let (Some(name), Some(Token::Open)) = (ident(i + 1), tokens.get(i + 2)) {
                    braces.push(Some(name.to_string()));
                    i += 3;
                    continue;
                }
            }
            Token::Ident(word) if word == "use" => {
                let mut trees = Vec::new();
                i = use_tree(tokens, i + 1, Vec::new(), &mut trees);
                let top_level = braces.is_empty();
                for (path, name) in trees {
                    if let Some(absolute) = absolute(&scope, &path, modules, true) {
                        if let (true, Some(name)) = (top_level, name) {
                            imports.names.insert(name, absolute.clone());
                        }
                        imports.paths.push(absolute);
                    }
                }
                continue;
            }
            Token::Ident(word)
                if matches!(word.as_str(), "crate" | "super" | "self")
                    && tokens.get(i + 1) == Some(&Token::PathSep)
                    && (i == 0 || tokens[i - 1] != Token::PathSep) =>
            {
                let mut trees = Vec::new();
                i = use_tree(tokens, i, Vec::new(), &mut trees);
                for (path, _) in trees {
                    imports
                        .paths
                        .extend(absolute(&scope, &path, modules, false));
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    imports
}

/// Reads the path or use tree at `i` after `prefix`: pushes every leaf path with the name it
/// brings in (`None` for a glob), returns the index after the tree.
fn use_tree(
    tokens: &[Token],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    if tokens.get(i) == Some(&Token::PathSep) {
        i += 1; // `::std::..`: an external crate, left with an empty first segment.
        prefix.push(String::new());
    }
    loop {
        match tokens.get(i) {
            Some(Token::Ident(word)) => {
                prefix.push(word.clone());
                i += 1;
                if tokens.get(i) == Some(&Token::PathSep) {
                    i += 1;
                    continue;
                }
                let mut name = word.clone();
                if let (Some(Token::Ident(as_)), Some(Token::Ident(alias))) =
                    (tokens.get(i), tokens.get(i + 1))
                {
                    if as_ == "as" {
                        name = alias.clone();
                        i += 2;
                    }
                }
                if name == "self" {
                    prefix.pop();
                    name = prefix.last().cloned().unwrap_or_default();
                }
                out.push((prefix, Some(name)));
                return i;
            }
            Some(Token::Star) => {
                out.push((prefix, None));
                return i + 1;
            }
            Some(Token::Open) => {
                i += 1;
                loop {
                    match tokens.get(i) {
                        None => return i,
                        Some(Token::Close) => return i + 1,
                        Some(Token::Comma) => i += 1,
                        // Anything but a tree (a stray token) is stepped over.
                        Some(_) => i = use_tree(tokens, i, prefix.clone(), out).max(i + 1),
                    }
                }
            }
            _ => {
                if !prefix.is_empty() {
                    out.push((prefix, None));
                }
                return i;
            }
        }
    }
}

/// The absolute segments of `path` written in `scope`: `crate::`, `super::` and `self::`
/// paths; in a `use`, also a path that starts with a module declared in `scope`. `None` for
/// a path outside the crate.
fn absolute(
    scope: &[String],
    path: &[String],
    modules: &BTreeSet<String>,
    in_use: bool,
) -> Option<Vec<String>> {
    let (first, rest) = path.split_first()?;
    let mut base: Vec<String> = match first.as_str() {
        "crate" => Vec::new(),
        "self" => scope.to_vec(),
        "super" => scope[..scope.len().saturating_sub(1)].to_vec(),
        _ if in_use => {
            let mut child = scope.to_vec();
            child.push(first.clone());
            modules.contains(&child.join("::")).then_some(child)?
        }
        _ => return None,
    };
    let mut rest = rest;
    while rest.first().is_some_and(|s| s == "super") {
        base.pop();
        rest = &rest[1..];
    }
    base.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(base)
}

/// Every circle of `graph`, each once, as the shortest path from its smallest-named module
/// back to it (`a -> b -> a`), in name order.
fn circles(graph: &Graph) -> Vec<Vec<String>> {
    let mut found: Vec<Vec<String>> = Vec::new();
    let mut on_circle = BTreeSet::new();
    for start in graph.keys() {
        if on_circle.contains(start) {
            continue;
        }
        if let Some(circle) = shortest_way_back(graph, start) {
            on_circle.extend(circle.iter().cloned());
            found.push(circle);
        }
    }
    found
}

/// The shortest path `start -> .. -> start`, if there is one.
fn shortest_way_back(graph: &Graph, start: &str) -> Option<Vec<String>> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(at) = queue.pop_front() {
        for next in graph.get(at).into_iter().flatten() {
            if next == start {
                let mut path = vec![start.to_string(), at.to_string()];
                let mut step = at;
                while step != start {
                    step = came_from[step];
                    path.push(step.to_string());
                }
                path.reverse();
                return Some(path);
            }
            if !came_from.contains_key(next.as_str()) {
                came_from.insert(next, at);
                queue.push_back(next);
            }
        }
    }
    None
}
