//! Source-level rules, checked over `lock-wasm/src`:
//! - `LockOutcome` (R1's result) appears nowhere in the SDK;
//! - no thread-local, task-local or global state carries a fencing token;
//! - the runtime-agnostic core names no runtime (tokio) and keeps no thread-local state
//!   (only `native.rs` and `wasm/` implement the seams);
//!
//! That no module imports itself back through another, tests included, is the workspace-wide
//! rule of `tests/tests/module_graph.rs`.
//!
//! That the core reads no clock, sleeps and draws no randomness except through the seams is
//! enforced at compile time instead: `clippy.toml`'s `disallowed-methods`.

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

/// C2 ct2-pinned, *No ambient token*: every thread-local, task-local or static item is
/// inspected up to the end of its declaration, and none may mention a token or a handle.
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
