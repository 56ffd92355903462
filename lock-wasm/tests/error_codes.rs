//! One list of error codes and retry verdicts: the contract's `lock_api::ErrorCode::ALL`
//! (with `retry_safe`) plus the SDK's `lock_wasm::error::SDK_CODES`. Everything else that
//! names codes is written by hand for its language or reader and checked here against that
//! list: the npm package's `ErrorCode` object and `RETRY_SAFE` set (errors.js), its TypeScript
//! union (index.d.ts), the table of contract C3 and the npm README's table. A code added to
//! `ErrorCode` fails this test until every one of them has it.

use std::collections::BTreeSet;
use std::path::Path;

use lock_api::ErrorCode;
use lock_wasm::error::{SDK_CODES, SDK_RETRY_SAFE};

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every code callers may see.
fn all_codes() -> BTreeSet<String> {
    ErrorCode::ALL
        .iter()
        .map(|c| c.as_str())
        .chain(SDK_CODES)
        .map(str::to_owned)
        .collect()
}

fn retry_safe_codes() -> BTreeSet<String> {
    ErrorCode::ALL
        .iter()
        .filter(|c| c.retry_safe())
        .map(|c| c.as_str())
        .chain(SDK_RETRY_SAFE)
        .map(str::to_owned)
        .collect()
}

/// The text between `start` and the next `end` after it.
fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("{start:?} not found"))
        + start.len();
    let len = text[from..]
        .find(end)
        .unwrap_or_else(|| panic!("{end:?} not found"));
    &text[from..from + len]
}

/// Every `"SCREAMING_SNAKE"` string literal in `text`.
fn quoted_codes(text: &str) -> BTreeSet<String> {
    text.split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
        .map(str::to_owned)
        .collect()
}

/// The rows of the markdown table that follows `heading`: cells of each row.
fn table_rows(markdown: &str, heading: &str) -> Vec<Vec<String>> {
    let section = &markdown[markdown.find(heading).expect(heading)..];
    section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // header and separator
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

/// The codes named in a table cell: `A / B`, `` `A`, `B` ``.
fn codes_in_cell(cell: &str) -> Vec<String> {
    cell.split(['/', ','])
        .map(|c| c.trim().trim_matches('`').to_owned())
        .filter(|c| !c.is_empty())
        .collect()
}

#[test]
fn the_npm_package_lists_every_code_and_verdict() {
    let errors = read("npm/src/errors.js");
    let object = between(&errors, "const ErrorCode = Object.freeze({", "});");
    let keys: BTreeSet<String> = object
        .lines()
        .filter_map(|l| l.trim().split_once(':'))
        .map(|(key, _)| key.trim().to_owned())
        .collect();
    assert_eq!(keys, all_codes(), "errors.js ErrorCode keys");
    assert_eq!(
        quoted_codes(object),
        all_codes(),
        "errors.js ErrorCode values"
    );
    let retry = between(&errors, "const RETRY_SAFE = new Set([", "]);");
    assert_eq!(
        quoted_codes(retry),
        retry_safe_codes(),
        "errors.js RETRY_SAFE"
    );
}

#[test]
fn the_typescript_union_lists_every_code() {
    let types = read("npm/index.d.ts");
    let union = between(&types, "export type ErrorCodeName =", ";");
    assert_eq!(quoted_codes(union), all_codes(), "index.d.ts ErrorCodeName");
}

#[test]
fn contract_c3_lists_every_wire_code_with_its_verdict() {
    let c3 = read("../docs/contracts/C3-http-surfaces.md");
    let mut seen = BTreeSet::new();
    for row in table_rows(&c3, "## Error codes") {
        let verdict = row.last().expect("a verdict cell");
        for code in codes_in_cell(&row[0]) {
            let parsed = ErrorCode::from_wire(&code)
                .unwrap_or_else(|| panic!("C3 names {code}, which ErrorCode lacks"));
            assert_eq!(
                verdict.starts_with("yes"),
                parsed.retry_safe(),
                "C3's verdict for {code}: {verdict:?}"
            );
            assert!(seen.insert(code.clone()), "C3 lists {code} twice");
        }
    }
    let wire: BTreeSet<String> = ErrorCode::ALL.iter().map(|c| c.as_str().into()).collect();
    assert_eq!(seen, wire, "C3's error code table");
}

#[test]
fn the_npm_readme_lists_every_code_with_its_verdict() {
    let readme = read("npm/README.md");
    let mut seen = BTreeSet::new();
    for row in table_rows(&readme, "### Errors") {
        let retryable = row.last().expect("a retryable cell").starts_with("yes");
        for code in codes_in_cell(&row[0]) {
            let safe = retry_safe_codes().contains(&code);
            assert_eq!(retryable, safe, "npm README's verdict for {code}");
            assert!(seen.insert(code.clone()), "npm README lists {code} twice");
        }
    }
    assert_eq!(seen, all_codes(), "npm README's error table");
}

#[test]
fn the_parsers_above_can_fail() {
    // A guard on the checks themselves: a list with a code missing or extra differs.
    let mut fewer = all_codes();
    fewer.remove("TRANSPORT");
    assert_ne!(fewer, all_codes());
    assert_eq!(
        codes_in_cell("`A`, `B_C` / D"),
        vec!["A".to_owned(), "B_C".into(), "D".into()]
    );
    assert_eq!(
        quoted_codes(r#"x: "LOCK_LOST", y: "lower", "A_B""#),
        ["A_B", "LOCK_LOST"].iter().map(|s| s.to_string()).collect()
    );
}
