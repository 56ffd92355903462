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

/// [`replace_rows`], and the rows without a match appended after the section's last table
/// row: for a part the full run does not measure (its rows exist only once it ran alone).
pub fn upsert_rows(text: &str, title: &str, rows: &[String]) -> String {
    let replaced = replace_rows(text, title, rows);
    let heading = format!("## {title}");
    let first_cell = |row: &str| row.split(" | ").next().map(str::to_owned);
    let lines: Vec<&str> = replaced.lines().collect();
    let Some(start) = lines.iter().position(|l| l.trim_end() == heading) else {
        return replaced;
    };
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.starts_with("## "))
        .map_or(lines.len(), |i| start + 1 + i);
    let section = &lines[start..end];
    let missing: Vec<&String> = rows
        .iter()
        .filter(|row| {
            !section
                .iter()
                .any(|l| l.starts_with('|') && first_cell(l) == first_cell(row))
        })
        .collect();
    let Some(last_row) = section.iter().rposition(|l| l.starts_with('|')) else {
        return replaced;
    };
    let at = start + last_row + 1;
    let mut out: Vec<String> = lines[..at].iter().map(|l| l.to_string()).collect();
    out.extend(missing.into_iter().cloned());
    out.extend(lines[at..].iter().map(|l| l.to_string()));
    out.join("\n") + "\n"
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
    fn upsert_replaces_matches_and_appends_the_rest_to_the_table() {
        let doc = "## S\n\n| t | m |\n|---|---|\n| a | 1 |\n\nafter\n\n## T\n\n| a | 9 |\n";
        let rows = ["| a | 5 |".to_owned(), "| c | 7 |".to_owned()];
        let once = upsert_rows(doc, "S", &rows);
        assert_eq!(
            once,
            "## S\n\n| t | m |\n|---|---|\n| a | 5 |\n| c | 7 |\n\nafter\n\n## T\n\n| a | 9 |\n"
        );
        assert_eq!(upsert_rows(&once, "S", &rows), once, "idempotent");
    }

    #[test]
    fn a_last_section_is_replaced_to_the_end() {
        let out = replace_section(DOC, "Other", "x");
        assert!(out.ends_with("## Other\n\nx\n"));
        assert!(out.contains("keep me"));
    }
}
