//! Rewrites owned `## ` sections of a Markdown file in place, leaving every other section
//! (owned by other benchmarks) untouched. A section runs from its `## ` heading to the next
//! `## ` heading or the end of the file; missing owned sections are appended.

/// `text` with the section titled `title` (without the `## `) replaced by `body`, or with
/// `## title` + `body` appended if there is no such section.
pub fn replace_section(text: &str, title: &str, body: &str) -> String {
    let heading = format!("## {title}");
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.iter().position(|l| l.trim_end() == heading);
    let mut out = String::new();
    let new_section = format!("{heading}\n\n{}\n", body.trim_end());
    match start {
        Some(s) => {
            let end = lines[s + 1..]
                .iter()
                .position(|l| l.starts_with("## "))
                .map_or(lines.len(), |i| s + 1 + i);
            for l in &lines[..s] {
                out.push_str(l);
                out.push('\n');
            }
            out.push_str(&new_section);
            if end < lines.len() {
                out.push('\n');
                for l in &lines[end..] {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
        None => {
            out.push_str(text.trim_end());
            out.push_str("\n\n");
            out.push_str(&new_section);
        }
    }
    out
}

/// `text` with every row of section `title` whose first cell matches one of `rows` replaced by
/// that row; other rows stay. A row without a match is not added: the full run owns the
/// table's shape, a partial run only re-measures rows it has.
pub fn replace_rows(text: &str, title: &str, rows: &[String]) -> String {
    let heading = format!("## {title}");
    let first_cell = |row: &str| row.split(" | ").next().map(str::to_owned);
    let mut in_section = false;
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("## ") {
            in_section = line.trim_end() == heading;
        }
        let new = rows
            .iter()
            .find(|row| in_section && line.starts_with('|') && first_cell(row) == first_cell(line));
        out.push_str(new.map_or(line, String::as_str));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str =
        "# B\n\nintro\n\n## Theirs\n\nkeep me\n\n## Mine\n\nold\n\n## Other\n\nkeep too\n";

    #[test]
    fn replaces_only_the_owned_section() {
        let out = replace_section(DOC, "Mine", "new\n");
        assert_eq!(
            out,
            "# B\n\nintro\n\n## Theirs\n\nkeep me\n\n## Mine\n\nnew\n\n## Other\n\nkeep too\n"
        );
    }

    #[test]
    fn appends_a_missing_section_and_is_idempotent() {
        let once = replace_section(DOC, "New", "body");
        assert!(once.ends_with("## Other\n\nkeep too\n\n## New\n\nbody\n"));
        assert_eq!(replace_section(&once, "New", "body"), once);
    }

    #[test]
    fn rows_are_replaced_by_first_cell_within_their_section_only() {
        let doc = "## S\n\n| t | m |\n|---|---|\n| a | 1 |\n| b | 2 |\n\n## T\n\n| a | 9 |\n";
        let rows = ["| a | 5 |".to_owned(), "| c | 7 |".to_owned()];
        assert_eq!(
            replace_rows(doc, "S", &rows),
            "## S\n\n| t | m |\n|---|---|\n| a | 5 |\n| b | 2 |\n\n## T\n\n| a | 9 |\n"
        );
    }

    #[test]
    fn a_last_section_is_replaced_to_the_end() {
        let out = replace_section(DOC, "Other", "x");
        assert!(out.ends_with("## Other\n\nx\n"));
        assert!(out.contains("keep me"));
    }
}
