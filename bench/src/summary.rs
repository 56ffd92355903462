//! The doc's summary: one row per target a section measured (what was aimed at, what was
//! measured, whether it was met), kept as data until it is written, and the section that
//! lists them after a full run.

use std::fmt::Write;

/// The summary section's title in the doc.
pub const TITLE: &str = "Summary";

/// One target and how a run fared against it. The target text is the row's identity: a
/// partial run replaces the row with the same target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryRow {
    /// What was aimed at.
    pub target: String,
    /// What was measured.
    pub measured: String,
    /// Whether the target was met ([`yes`], or a word of the section's own).
    pub met: &'static str,
}

impl SummaryRow {
    /// A row of `target`, `measured` and `met`.
    pub fn new(target: impl Into<String>, measured: impl Into<String>, met: &'static str) -> Self {
        SummaryRow {
            target: target.into(),
            measured: measured.into(),
            met,
        }
    }

    /// The row as a Markdown table row.
    pub fn render(&self) -> String {
        format!("| {} | {} | {} |", self.target, self.measured, self.met)
    }

    /// The row of a partial run, which says so next to the figure: the rest of the table
    /// comes from another run.
    pub fn measured_alone(mut self, part: &str) -> Self {
        let _ = write!(self.measured, " (re-run alone: `bench {part}`)");
        self
    }
}

/// A target's verdict: `yes`, or a bold `no` that stands out in the table.
pub fn yes(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "**no**"
    }
}

/// The body of the summary section after a full run: every row, in the order measured, and
/// the machine.
pub fn section(rows: &[SummaryRow], machine: &str) -> String {
    let mut body = String::from(
        "Targets, measured by `scripts/bench.sh` in \
         one run (details and spreads in the sections below). Compared systems ran \
         interleaved in the same invocation, so load hit them alike; each section gives the \
         load average; absolute numbers are for orientation only.\n\n| target | measured | met? |\n|---|---|---|\n",
    );
    for row in rows {
        body.push_str(&row.render());
        body.push('\n');
    }
    let _ = write!(body, "\nMachine: {machine}.\n");
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc;

    fn row() -> SummaryRow {
        SummaryRow::new("server p99 ≤ 5 ms", format!("{:.2} ms", 5.531), yes(false))
    }

    #[test]
    fn a_row_renders_as_three_cells() {
        assert_eq!(row().render(), "| server p99 ≤ 5 ms | 5.53 ms | **no** |");
        assert_eq!(
            SummaryRow::new("a", "1", yes(true)).render(),
            "| a | 1 | yes |"
        );
    }

    #[test]
    fn a_partial_run_notes_itself_beside_the_figure() {
        assert_eq!(
            row().measured_alone("server").render(),
            "| server p99 ≤ 5 ms | 5.53 ms (re-run alone: `bench server`) | **no** |"
        );
    }

    #[test]
    fn the_section_lists_rows_under_the_header_and_names_the_machine() {
        let body = section(&[row(), SummaryRow::new("b", "2", "yes")], "a CPU");
        assert!(body.ends_with(
            "| target | measured | met? |\n|---|---|---|\n\
             | server p99 ≤ 5 ms | 5.53 ms | **no** |\n| b | 2 | yes |\n\nMachine: a CPU.\n"
        ));
    }

    #[test]
    fn a_partial_run_replaces_its_row_in_the_written_summary() {
        let before = section(
            &[SummaryRow::new("server p99 ≤ 5 ms", "9 ms", "**no**")],
            "m",
        );
        let doc = doc::replace_section("# B\n", TITLE, &before);
        let after = doc::upsert_rows(&doc, TITLE, &[row().measured_alone("server").render()]);
        assert!(after.contains(
            "|---|---|---|\n| server p99 ≤ 5 ms | 5.53 ms (re-run alone: `bench server`) | **no** |\n\nMachine: m.\n"
        ));
        assert!(!after.contains("9 ms"));
    }
}
