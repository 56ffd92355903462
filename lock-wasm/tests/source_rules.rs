//! Source-level rules, checked over `lock-wasm/src`:
//! - `LockOutcome` (R1's result) appears nowhere in the SDK;
//! - no thread-local, task-local or global state carries a fencing token;
//! - the runtime-agnostic core names no runtime (tokio) and keeps no thread-local state
//!   (only `native.rs` and `wasm/` implement the seams);
//! - no module imports itself back through another: the modules of `src` form no cycle.
//!
//! That the core reads no clock, sleeps and draws no randomness except through the seams is
//! enforced at compile time instead: `clippy.toml`'s `disallowed-methods`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn all_sources() -> Vec<(PathBuf, String)> {
    let mut paths = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut paths,
    );
    assert!(paths.len() > 10, "found only {paths:?}");
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

#[test]
fn lock_outcome_appears_nowhere_in_the_sdk() {
    for (path, text) in all_sources() {
        assert!(
            !text.contains("LockOutcome"),
            "{} mentions LockOutcome",
            path.display()
        );
    }
}

/// Criterion 9: every thread-local, task-local or static item is inspected up to the end of
/// its declaration, and none may mention a token or a handle.
#[test]
fn no_ambient_state_carries_a_fencing_token() {
    let starts = [
        "static ",
        "pub static ",
        "pub(crate) static ",
        "thread_local!",
        "task_local!",
    ];
    let mut inspected = 0;
    for (path, text) in all_sources() {
        let mut offset = 0;
        for line in text.split_inclusive('\n') {
            let trimmed = line.trim_start();
            if starts.iter().any(|s| trimmed.starts_with(s)) || trimmed.contains("static mut ") {
                // The declaration up to its first `;` (a thread_local! block's items are
                // also matched one by one, as their lines start with `static`).
                let decl: String = text[offset..].chars().take_while(|c| *c != ';').collect();
                let decl = decl.to_lowercase();
                inspected += 1;
                for word in ["token", "fencing", "lockhandle", "lockgrant"] {
                    assert!(
                        !decl.contains(word),
                        "{}: ambient state mentions {word}: {decl}",
                        path.display()
                    );
                }
            }
            offset += line.len();
        }
    }
    println!("{inspected} ambient-state declarations inspected");
}

#[test]
fn the_core_names_no_runtime() {
    let forbidden = ["tokio::", "thread_local!"];
    for (path, text) in all_sources() {
        let p = path.to_string_lossy();
        if p.contains("/src/native") || p.contains("/src/wasm/") {
            continue;
        }
        for word in forbidden {
            assert!(!text.contains(word), "{} uses {word}", path.display());
        }
    }
}

/// A source file's module path: `src/a.rs` and `src/a/mod.rs` → `a`, `src/a/b.rs` → `a::b`,
/// `src/lib.rs` → `` (the crate root).
fn module_of(path: &Path) -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let relative = path.strip_prefix(&src).unwrap().with_extension("");
    let parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|p| p != "mod" && p != "lib")
        .collect();
    parts.join("::")
}

/// The non-test code of a source file: comment lines and `#[cfg(test)]` modules dropped.
fn code_of(text: &str) -> String {
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    let code = code
        .split("#[cfg(all(test, not(target_arch = \"wasm32\")))]")
        .next()
        .unwrap_or(code);
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The modules `code` (of module `from`) refers to: every `crate::a::b...` and
/// `super::...` path, resolved to the longest prefix that is a module of `modules`. Items the
/// crate root re-exports (`crate::Clock`) count as their module, through `reexports`. A
/// module and the modules it declares count as one: a child may use its parent's items, and
/// the parent's references to its own children (`pub use child::Item`) are not followed.
fn references(
    from: &str,
    code: &str,
    modules: &BTreeSet<String>,
    reexports: &BTreeMap<String, String>,
) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let parent = from.rsplit_once("::").map_or("", |(p, _)| p);
    for (prefix, base) in [("crate::", String::new()), ("super::", parent.to_owned())] {
        for (i, _) in code.match_indices(prefix) {
            let before = code[..i].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue; // `mycrate::`, not `crate::`
            }
            let rest = &code[i + prefix.len()..];
            let path: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let mut segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
            let mut target = None;
            while !segments.is_empty() {
                let candidate = [base.as_str(), &segments.join("::")]
                    .iter()
                    .filter(|s| !s.is_empty())
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("::");
                if modules.contains(&candidate) {
                    target = Some(candidate);
                    break;
                }
                segments.pop();
            }
            // An item of the parent itself (`super::Clock`), or one the root re-exports.
            let target = target.or_else(|| match base.as_str() {
                "" => reexports.get(path.split("::").next()?).cloned(),
                parent => Some(parent.to_owned()),
            });
            if let Some(t) = target.filter(|t| t != from && !t.is_empty()) {
                // A child module declared by `from` is below it, not a dependency back.
                if !t.starts_with(&format!("{from}::")) {
                    found.insert(t);
                }
            }
        }
    }
    found
}

/// `pub use module::{A, B};` lines of the crate root: item → module.
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for line in lib.lines().filter(|l| l.starts_with("pub use ")) {
        let body = line.trim_start_matches("pub use ").trim_end_matches(';');
        let Some((module, items)) = body.split_once("::") else {
            continue;
        };
        for item in items.trim_matches(|c| c == '{' || c == '}').split(',') {
            map.insert(item.trim().to_owned(), module.to_owned());
        }
    }
    map
}

/// The layering rule: following the modules' references from any module never leads back
/// to it. (Shared session state sits below the acquire loop, the background task and the
/// public API; no two of them lean on each other.)
#[test]
fn the_modules_form_no_import_cycle() {
    let sources = all_sources();
    let modules: BTreeSet<String> = sources.iter().map(|(p, _)| module_of(p)).collect();
    let lib = sources
        .iter()
        .find(|(p, _)| p.ends_with("lib.rs"))
        .map(|(_, t)| t.clone())
        .unwrap();
    let reexports = root_reexports(&lib);
    let graph: BTreeMap<String, BTreeSet<String>> = sources
        .iter()
        .map(|(p, text)| {
            let from = module_of(p);
            let refs = references(&from, &code_of(text), &modules, &reexports);
            (from, refs)
        })
        .filter(|(from, _)| !from.is_empty())
        .collect();
    assert!(
        graph["acquire"].contains("session_state") && !graph["acquire"].contains("session"),
        "{:?}",
        graph["acquire"]
    );
    for start in graph.keys() {
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((at, trail)) = stack.pop() {
            for next in graph.get(&at).into_iter().flatten() {
                assert!(
                    next != start,
                    "import cycle: {} -> {next}",
                    trail.join(" -> ")
                );
                if seen.insert(next.clone()) {
                    let mut longer = trail.clone();
                    longer.push(next.clone());
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
    println!("{} modules, no import cycle", graph.len());
}
