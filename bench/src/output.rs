//! Where a run's results go: the owned sections and summary rows of the Markdown doc, and
//! the SVG charts beside it; with `--no-write`, nowhere (the tables are printed anyway).

use std::path::{Path, PathBuf};

use crate::doc;
use crate::summary::{self, SummaryRow};

/// The doc and chart directory a run writes to.
#[derive(Debug, Clone, clap::Args)]
pub struct Output {
    /// Markdown file whose owned sections are rewritten.
    #[arg(long, default_value = "docs/BENCHMARKS.md")]
    pub doc: PathBuf,
    /// Directory for the SVG charts (linked relative to the doc).
    #[arg(long, default_value = "docs/bench")]
    pub charts: PathBuf,
    /// Do not touch the doc or charts (print only).
    #[arg(long)]
    pub no_write: bool,
}

impl Output {
    /// Replaces (or appends) the section `title` with `body`.
    pub fn write_section(&self, title: &str, body: &str) {
        self.edit_doc(|text| doc::replace_section(text, title, body));
    }

    /// Replaces the summary rows with the targets of `rows` and appends the others to the
    /// summary table.
    pub fn upsert_summary(&self, rows: &[SummaryRow]) {
        let rows: Vec<String> = rows.iter().map(SummaryRow::render).collect();
        self.edit_doc(|text| doc::upsert_rows(text, summary::TITLE, &rows));
    }

    /// Writes `svg` as `name` under the chart dir; returns the Markdown image link.
    pub fn chart(&self, name: &str, alt: &str, svg: &str) -> String {
        if !self.no_write {
            std::fs::create_dir_all(&self.charts).expect("chart dir");
            std::fs::write(self.charts.join(name), svg).expect("write chart");
        }
        let doc_dir = self.doc.parent().unwrap_or(Path::new("."));
        let rel = self
            .charts
            .strip_prefix(doc_dir)
            .unwrap_or(&self.charts)
            .join(name);
        format!("![{alt}]({})", rel.display())
    }

    /// Rewrites the doc through `edit`, unless `--no-write`.
    fn edit_doc(&self, edit: impl FnOnce(&str) -> String) {
        if self.no_write {
            return;
        }
        let text = std::fs::read_to_string(&self.doc).unwrap_or_else(|_| "# Benchmarks\n".into());
        std::fs::write(&self.doc, edit(&text)).expect("write doc");
    }
}
