//! The README's claims that a test can check, checked:
//! - the "HTTP API" table: every row's method and path is an operation of the OpenAPI
//!   document the server serves at `/openapi.json` (`lock_server::routes::openapi::document()`,
//!   built in process), its success status is that operation's one 2xx answer, and every
//!   `/v1` operation of the document has a row; the routes outside `/v1` are named in the
//!   text;
//! - the "Layout" table: it has a row for every workspace member (the root `Cargo.toml`'s
//!   `members`) and every top-level folder (hidden ones, `target/`, `node_modules/` and
//!   `data/` aside), a crate named in a row is that folder's crate (and is named wherever it
//!   differs from the folder), and every path it names exists;
//! - one "Security" section.
//!
//! The parsers and checks are plain functions over text, so the unit tests at the bottom
//! show each check failing on a deliberately wrong copy of a README line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).expect("README.md")
}

/// The lines of the section whose `## ` heading starts with `heading`, up to the next `## `.
fn section<'a>(text: &'a str, heading: &str) -> Vec<&'a str> {
    let mut lines = text.lines();
    let start = format!("## {heading}");
    lines
        .by_ref()
        .find(|l| l.starts_with(&start))
        .unwrap_or_else(|| panic!("README has no section `{start}`"));
    lines.take_while(|l| !l.starts_with("## ")).collect()
}

/// The cells of a table's body rows (header and separator rows skipped).
fn table_rows(lines: &[&str]) -> Vec<Vec<String>> {
    lines
        .iter()
        .filter(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            l.trim()
                .trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

/// The text of every backticked span of `cell`, in order.
fn code_spans(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ApiRow {
    id: String,
    method: String,
    path: String,
    success: u16,
}

/// The "HTTP API" table: id, `METHOD /path` (the cell's first code span) and the success
/// status (the number the success cell starts with).
fn api_rows(readme: &str) -> Result<Vec<ApiRow>, String> {
    let lines = section(readme, "HTTP API");
    let mut rows = Vec::new();
    for cells in table_rows(&lines) {
        let [id, route, success, _errors] = cells.as_slice() else {
            return Err(format!("HTTP API row without 4 cells: {cells:?}"));
        };
        let route = code_spans(route)
            .first()
            .copied()
            .ok_or_else(|| format!("{id}: no `METHOD /path`"))?;
        let (method, path) = route
            .split_once(' ')
            .ok_or_else(|| format!("{id}: `{route}` is not `METHOD /path`"))?;
        let status = success
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("{id}: the success cell `{success}` starts with no status"))?;
        rows.push(ApiRow {
            id: id.clone(),
            method: method.to_string(),
            path: path.to_string(),
            success: status,
        });
    }
    Ok(rows)
}

/// What is wrong with the table against the OpenAPI document (empty: nothing).
fn check_api(rows: &[ApiRow], doc: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let mut documented = BTreeSet::new();
    for (path, ops) in doc["paths"].as_object().expect("paths") {
        for method in ops.as_object().expect("operations").keys() {
            documented.insert((method.to_uppercase(), path.clone()));
        }
    }
    let mut listed = BTreeSet::new();
    for row in rows {
        listed.insert((row.method.clone(), row.path.clone()));
        let op = &doc["paths"][&row.path][row.method.to_lowercase()];
        let Some(responses) = op["responses"].as_object() else {
            problems.push(format!(
                "{}: {} {} is not an operation of /openapi.json",
                row.id, row.method, row.path
            ));
            continue;
        };
        let ok: Vec<&String> = responses.keys().filter(|s| s.starts_with('2')).collect();
        if ok != [&row.success.to_string()] {
            problems.push(format!(
                "{}: {} {} succeeds with {}, /openapi.json says {ok:?}",
                row.id, row.method, row.path, row.success
            ));
        }
    }
    for (method, path) in &documented {
        if path.starts_with("/v1/") && !listed.contains(&(method.clone(), path.clone())) {
            problems.push(format!("{method} {path} is served but not in the table"));
        }
    }
    problems
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct LayoutRow {
    /// Every path the first cell names (`lab/`, `docs/BENCHMARKS.md`, ...).
    paths: Vec<String>,
    /// The crate named in parentheses after the path, if any: `` `lab/` (`lock-lab`) ``.
    krate: Option<String>,
}

fn layout_rows(readme: &str) -> Vec<LayoutRow> {
    let lines = section(readme, "Layout");
    table_rows(&lines)
        .into_iter()
        .map(|cells| {
            let first = cells.first().cloned().unwrap_or_default();
            let (paths, krate) = match first.split_once('(') {
                Some((paths, krate)) => (paths.to_string(), code_spans(krate).first().copied()),
                None => (first.clone(), None),
            };
            LayoutRow {
                paths: code_spans(&paths).iter().map(|s| s.to_string()).collect(),
                krate: krate.map(str::to_string),
            }
        })
        .collect()
}

/// The repository as the Layout table must describe it.
struct Repo {
    /// Workspace member folder → its crate's name.
    members: BTreeMap<String, String>,
    /// Top-level folders, without the ones that are not part of the repository's layout.
    folders: BTreeSet<String>,
}

fn check_layout(rows: &[LayoutRow], repo: &Repo, exists: impl Fn(&str) -> bool) -> Vec<String> {
    let mut problems = Vec::new();
    let row_of = |folder: &str| {
        let wanted = format!("{folder}/");
        rows.iter().find(|r| r.paths.contains(&wanted))
    };
    for (folder, krate) in &repo.members {
        match row_of(folder) {
            None => problems.push(format!("workspace member `{folder}/` has no Layout row")),
            Some(row) => match &row.krate {
                Some(named) if named != krate => problems.push(format!(
                    "`{folder}/` is crate `{krate}`, the Layout table says `{named}`"
                )),
                None if folder != krate => problems.push(format!(
                    "`{folder}/` is crate `{krate}`: the Layout row must name it"
                )),
                _ => {}
            },
        }
    }
    for folder in &repo.folders {
        if row_of(folder).is_none() {
            problems.push(format!("top-level folder `{folder}/` has no Layout row"));
        }
    }
    for row in rows {
        for path in &row.paths {
            if !exists(path) {
                problems.push(format!(
                    "the Layout table names `{path}`, which does not exist"
                ));
            }
        }
    }
    problems
}

/// The `members = [...]` of the root manifest.
fn workspace_members(manifest: &str) -> Vec<String> {
    let start = manifest.find("members").expect("members") + "members".len();
    let list = &manifest[start..];
    let list = &list[list.find('[').expect("[") + 1..list.find(']').expect("]")];
    list.split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

/// The `name` of a crate's `[package]`.
fn package_name(manifest: &str) -> String {
    manifest
        .lines()
        .skip_while(|l| l.trim() != "[package]")
        .find_map(|l| l.trim().strip_prefix("name = "))
        .map(|n| n.trim_matches('"').to_string())
        .expect("[package] name")
}

/// Folders at the top of the repository that its layout does not include: hidden ones, build
/// output, installed packages and `scripts/run.sh`'s data dir (all ignored by git).
fn is_layout_folder(name: &str) -> bool {
    !name.starts_with('.') && !["target", "node_modules", "data"].contains(&name)
}

fn repo() -> Repo {
    let root = root();
    let read = |p: PathBuf| std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
    let members = workspace_members(&read(root.join("Cargo.toml")))
        .into_iter()
        .map(|m| {
            let name = package_name(&read(root.join(&m).join("Cargo.toml")));
            (m, name)
        })
        .collect();
    let folders = std::fs::read_dir(&root)
        .expect("the repository root")
        .map(|e| e.expect("a directory entry"))
        .filter(|e| e.file_type().expect("a file type").is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| is_layout_folder(n))
        .collect();
    Repo { members, folders }
}

#[test]
fn http_api_table_matches_the_served_openapi_document() {
    let readme = readme();
    let rows = api_rows(&readme).unwrap();
    assert!(rows.len() >= 10, "only {} HTTP API rows", rows.len());
    let problems = check_api(&rows, lock_server::routes::openapi::document());
    assert!(
        problems.is_empty(),
        "README HTTP API table:\n{}",
        problems.join("\n")
    );
    // The routes outside /v1 are in the text under the table.
    for path in ["/openapi.json", "/metrics", "/healthz"] {
        assert!(
            readme.contains(&format!("`{path}`")),
            "README does not name `{path}`"
        );
    }
}

#[test]
fn layout_table_names_every_member_and_top_level_folder() {
    let rows = layout_rows(&readme());
    let root = root();
    let problems = check_layout(&rows, &repo(), |p| root.join(p).exists());
    assert!(
        problems.is_empty(),
        "README Layout table:\n{}",
        problems.join("\n")
    );
}

#[test]
fn one_security_section() {
    let headings = readme().lines().filter(|l| *l == "## Security").count();
    assert_eq!(headings, 1, "README has {headings} `## Security` sections");
}

/// The checks fail on deliberately wrong copies of the README's lines.
mod checks_can_fail {
    use super::*;

    /// A README whose one line `from` (which must be there) reads `to` instead.
    fn readme_with(from: &str, to: &str) -> String {
        let text = readme();
        assert!(
            text.contains(from),
            "README no longer has the line {from:?}"
        );
        text.replacen(from, to, 1)
    }

    fn api_problems(readme: &str) -> Vec<String> {
        check_api(
            &api_rows(readme).unwrap(),
            lock_server::routes::openapi::document(),
        )
    }

    const LEDGER_APPEND: &str = "| demo ledger append | `POST /v1/demo/ledger/{key}` `{fencingToken, entry}` | 204 | 409 FENCED_OUT, 400 |";

    #[test]
    fn a_wrong_success_status_is_found() {
        let wrong = LEDGER_APPEND.replace("| 204 |", "| 200 |");
        let problems = api_problems(&readme_with(LEDGER_APPEND, &wrong));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("succeeds with 200"), "{problems:?}");
    }

    #[test]
    fn a_route_not_served_is_found() {
        let wrong = LEDGER_APPEND.replace("POST /v1/demo/ledger", "PUT /v1/demo/ledger");
        let problems = api_problems(&readme_with(LEDGER_APPEND, &wrong));
        assert!(
            problems
                .iter()
                .any(|p| p.contains("PUT /v1/demo/ledger/{key} is not an operation")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("POST /v1/demo/ledger/{key} is served but not")),
            "{problems:?}"
        );
    }

    #[test]
    fn a_malformed_row_is_refused() {
        let wrong = LEDGER_APPEND.replace("| 204 |", "| no content |");
        let error = api_rows(&readme_with(LEDGER_APPEND, &wrong)).unwrap_err();
        assert!(error.contains("starts with no status"), "{error}");
    }

    fn layout_problems(readme: &str, exists: impl Fn(&str) -> bool) -> Vec<String> {
        check_layout(&layout_rows(readme), &repo(), exists)
    }

    const LAB: &str = "| `lab/` (`lock-lab`) |";
    const WWW: &str = "| `www/` |";

    #[test]
    fn the_real_layout_rows_are_read() {
        let rows = layout_rows(&readme());
        let lab = rows
            .iter()
            .find(|r| r.paths == ["lab/"])
            .expect("a lab/ row");
        assert_eq!(lab.krate.as_deref(), Some("lock-lab"));
        assert!(rows
            .iter()
            .any(|r| r.paths == ["docs/BENCHMARKS.md", "docs/RELIABILITY.md"]));
    }

    #[test]
    fn a_missing_folder_is_found() {
        let readme = readme_with(WWW, "| `wwww/` |");
        let root = root();
        let problems = layout_problems(&readme, |p| root.join(p).exists());
        assert!(
            problems.contains(&"top-level folder `www/` has no Layout row".to_string()),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("`wwww/`, which does not exist")),
            "{problems:?}"
        );
    }

    #[test]
    fn a_missing_member_and_a_wrong_crate_name_are_found() {
        let root = root();
        let exists = |p: &str| root.join(p).exists();
        let problems = layout_problems(&readme_with(LAB, "| `lab/` (`lock-labs`) |"), exists);
        assert_eq!(
            problems,
            ["`lab/` is crate `lock-lab`, the Layout table says `lock-labs`"]
        );
        let problems = layout_problems(&readme_with(LAB, "| `lab/` |"), exists);
        assert_eq!(
            problems,
            ["`lab/` is crate `lock-lab`: the Layout row must name it"]
        );
        let problems = layout_problems(&readme_with(LAB, "| `labs/` (`lock-lab`) |"), |_| true);
        assert!(
            problems.contains(&"workspace member `lab/` has no Layout row".to_string()),
            "{problems:?}"
        );
    }

    #[test]
    fn manifests_are_read() {
        let manifest = "[workspace]\nresolver = \"2\"\nmembers = [\"a\", \"b-c\"]\n";
        assert_eq!(workspace_members(manifest), ["a", "b-c"]);
        let manifest = "[package]\nname = \"lock-x\"\nversion = \"1\"\n";
        assert_eq!(package_name(manifest), "lock-x");
        assert!(!is_layout_folder(".git") && !is_layout_folder("target"));
        assert!(is_layout_folder("www"));
    }
}
