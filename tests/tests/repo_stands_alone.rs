//! The repo stands alone: code and docs state each rule, or name the file of this repo that
//! states it (`docs/contracts/`, `ARCHITECTURE.md`, `docs/`), never a document a clone does
//! not have — a design brief's sections, task tickets and their acceptance criteria, or this
//! project's own tracker numbers. Third-party issues are cited as `owner/repo#N`, which the
//! pattern below does not match.
//!
//! The check runs `git grep` over the tracked files, so it sees exactly what a clone holds
//! (no build output, no `node_modules`). Where git or the repository is missing, e.g. in an
//! unpacked source archive, it says so on stderr and checks nothing.

use std::io::Write;
use std::path::Path;
use std::process::Command;

/// References to documents outside the repo. Each alternative is spelled so that this file
/// does not match itself (`DESIG[N]`, `car[d]`).
const OUTSIDE_REFERENCES: &str = concat!(
    r"DESIG[N]",                // the design brief and its sections
    r"|T-0[0-9]{2}",            // task tickets by number
    r"|\b[Cc]ar[d]\b",          // a task ticket by its other name, and its sections
    r"|[Ii]ssues?[- ]#?[0-9]+", // this project's tracker numbers
    r"|[Cc]riterion [0-9]",     // a ticket's numbered acceptance criteria
);

/// Tracked files that are not prose: the lockfile and the generated benchmark figures.
const NOT_PROSE: [&str; 2] = [":!Cargo.lock", ":!docs/bench"];

#[test]
fn code_and_docs_cite_no_document_outside_the_repo() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace");
    if let Err(why) = git_work_tree(root) {
        // Visible without --nocapture: the test harness captures only print macros.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED code_and_docs_cite_no_document_outside_the_repo: {why}"
        );
        return;
    }
    let found = Command::new("git")
        .current_dir(root)
        .args(["grep", "-n", "-I", "-E", OUTSIDE_REFERENCES, "--", "."])
        .args(NOT_PROSE)
        .output()
        .expect("git ran a moment ago");
    let hits = String::from_utf8_lossy(&found.stdout);
    match found.status.code() {
        Some(1) => {} // no match
        Some(0) => panic!(
            "{} line(s) cite a document outside the repo; state the rule, or name the section \
             of docs/ or ARCHITECTURE.md that holds it:\n{hits}",
            hits.lines().count()
        ),
        _ => panic!(
            "git grep failed: {}",
            String::from_utf8_lossy(&found.stderr)
        ),
    }
}

/// Ok when `dir` is inside a git work tree that git agrees to read.
fn git_work_tree(dir: &Path) -> Result<(), String> {
    let probe = Command::new("git")
        .current_dir(dir)
        .args(["rev-parse", "--is-inside-work-tree"])
        .output()
        .map_err(|e| format!("git is not available ({e})"))?;
    if probe.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} is not a git work tree git can read: {}",
            dir.display(),
            String::from_utf8_lossy(&probe.stderr).trim()
        ))
    }
}
