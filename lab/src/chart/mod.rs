//! Chart geometry as plain data: a builder computes a [`Chart`] (frame, titles, data shapes,
//! legend, axes with their ticks), [`Chart::marks`] lays all of it out as positioned [`Shape`]s, and
//! [`svg`] writes those as SVG text. So the arithmetic is unit-tested on the host, and the
//! bench's doc figures and the dashboard's charts are drawn by the same code.
//!
//! - [`scale`]: linear scales and nice ticks; [`frame`]: size, margins, legend placement and
//!   the axes onto the plot area; [`shape`]: the positioned shapes;
//! - [`builders`]: line charts (one series per line) and grouped bar charts;
//! - [`svg`]: the SVG text of a chart, bare (for an `<svg>` element already on a page) or as
//!   a standalone file with its style sheet.

pub mod builders;
pub mod frame;
pub mod scale;
pub mod shape;
pub mod svg;

pub use frame::{Axes, Frame, LegendPlacement};
pub use shape::{Anchor, Shape};

/// One axis tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    /// Pixel position along its axis.
    pub pos: f64,
    /// Label text.
    pub label: String,
}

/// One legend entry.
#[derive(Debug, Clone, PartialEq)]
pub struct LegendEntry {
    /// Text.
    pub label: String,
    /// Style class, as in [`Shape`].
    pub class: &'static str,
}

/// A chart's title and its axes' labels (with their units).
#[derive(Debug, Clone, PartialEq)]
pub struct Titles {
    /// Title above the plot.
    pub title: String,
    /// x axis label.
    pub x: String,
    /// y axis label.
    pub y: String,
}

impl Titles {
    /// The three texts.
    pub fn new(title: impl Into<String>, x: impl Into<String>, y: impl Into<String>) -> Self {
        Titles {
            title: title.into(),
            x: x.into(),
            y: y.into(),
        }
    }
}

/// A chart ready to draw.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Size, margins, legend placement.
    pub frame: Frame,
    /// Title and axis labels.
    pub titles: Titles,
    /// The data, in pixels of `axes`.
    pub shapes: Vec<Shape>,
    /// The legend.
    pub legend: Vec<LegendEntry>,
    /// Scales and ticks; a builder may replace the ticks (lanes, categories).
    pub axes: Axes,
    /// Shown across the plot when there is nothing to draw yet.
    pub empty_message: Option<String>,
}

/// Title baseline, px from the top.
const TITLE_Y: f64 = 16.0;
/// Legend swatch size, px.
const SWATCH: (f64, f64) = (12.0, 10.0);
/// Px per character of a legend label (11 px font), to lay entries out without measuring.
const LEGEND_CHAR: f64 = 6.0;

impl Chart {
    /// A chart on `axes` with nothing drawn yet.
    pub fn new(frame: Frame, titles: Titles, axes: Axes) -> Self {
        Chart {
            frame,
            titles,
            shapes: Vec::new(),
            legend: Vec::new(),
            axes,
            empty_message: None,
        }
    }

    /// A chart with unit axes and `message` across the plot: nothing to draw yet.
    pub fn empty(frame: Frame, titles: Titles, message: impl Into<String>) -> Self {
        Chart {
            empty_message: Some(message.into()),
            ..Chart::new(frame, titles, Axes::new(&frame, 1.0, 1.0))
        }
    }

    /// Everything to draw, in drawing order (later on top): title, legend, grid and y
    /// labels, the data, the axes, x ticks and labels, axis labels, the empty message.
    pub fn marks(&self) -> Vec<Shape> {
        let (left, top, right, bottom) = self.frame.plot();
        let (mid_x, mid_y) = ((left + right) / 2.0, (top + bottom) / 2.0);
        let mut marks = vec![Shape::text(
            left,
            TITLE_Y,
            &self.titles.title,
            "title",
            Anchor::Start,
        )];
        marks.extend(self.legend_marks());
        for t in &self.axes.y_ticks {
            marks.push(line((left, t.pos), (right, t.pos), "grid"));
            marks.push(Shape::text(
                left - 6.0,
                t.pos + 4.0,
                &t.label,
                "tick-label",
                Anchor::End,
            ));
        }
        marks.extend(self.shapes.iter().cloned());
        marks.push(line((left, bottom), (right, bottom), "axis"));
        marks.push(line((left, top), (left, bottom), "axis"));
        for t in &self.axes.x_ticks {
            marks.push(line((t.pos, bottom), (t.pos, bottom + 5.0), "tick"));
            marks.push(Shape::text(
                t.pos,
                bottom + 18.0,
                &t.label,
                "tick-label",
                Anchor::Middle,
            ));
        }
        let x_label_y = self.frame.height - 6.0;
        marks.push(Shape::text(
            mid_x,
            x_label_y,
            &self.titles.x,
            "axis-label",
            Anchor::Middle,
        ));
        marks.push(Shape::Text {
            x: 14.0,
            y: mid_y,
            text: self.titles.y.clone(),
            class: "axis-label",
            anchor: Anchor::Middle,
            vertical: true,
        });
        if let Some(message) = &self.empty_message {
            marks.push(Shape::text(mid_x, mid_y, message, "empty", Anchor::Middle));
        }
        marks
    }

    /// Each entry a swatch and its label: in a row from the plot's left edge, each as wide
    /// as its label plus the swatch and a gap, or in a column right of the plot.
    fn legend_marks(&self) -> Vec<Shape> {
        let (_, top, right, _) = self.frame.plot();
        let mut next = match self.frame.legend {
            LegendPlacement::Above => (self.frame.margin_left, 24.0),
            LegendPlacement::Beside => (right + 12.0, top),
        };
        let mut marks = Vec::new();
        for entry in &self.legend {
            let (x, y) = next;
            marks.push(Shape::Swatch {
                x,
                y,
                w: SWATCH.0,
                h: SWATCH.1,
                class: entry.class,
            });
            marks.push(Shape::text(
                x + 16.0,
                y + 9.0,
                &entry.label,
                "legend",
                Anchor::Start,
            ));
            next = match self.frame.legend {
                LegendPlacement::Above => {
                    let width = 34.0 + entry.label.chars().count() as f64 * LEGEND_CHAR;
                    (x + width, y)
                }
                LegendPlacement::Beside => (x, y + 18.0),
            };
        }
        marks
    }
}

/// A line from `a` to `b`.
fn line(a: (f64, f64), b: (f64, f64), class: &'static str) -> Shape {
    Shape::Line {
        x1: a.0,
        y1: a.1,
        x2: b.0,
        y2: b.1,
        class,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts<'a>(marks: &'a [Shape], class: &str) -> Vec<&'a str> {
        marks
            .iter()
            .filter_map(|m| match m {
                Shape::Text { text, class: c, .. } if *c == class => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn an_empty_chart_has_its_titles_axes_and_message() {
        let frame = Frame::legend_above(640.0, 300.0);
        let chart = Chart::empty(
            frame,
            Titles::new("T", "x (ms)", "y (count)"),
            "nothing yet",
        );
        let marks = chart.marks();
        assert_eq!(texts(&marks, "title"), ["T"]);
        assert_eq!(texts(&marks, "axis-label"), ["x (ms)", "y (count)"]);
        assert_eq!(texts(&marks, "empty"), ["nothing yet"]);
        // Unit axes: 0 to 1 in steps of 0.2, the y axis' labels first.
        let ticks = texts(&marks, "tick-label");
        assert_eq!((ticks.len(), ticks[0], ticks[11]), (12, "0.0", "1.0"));
        let axes = marks
            .iter()
            .filter(|m| matches!(m, Shape::Line { class: "axis", .. }))
            .count();
        assert_eq!(axes, 2);
    }

    #[test]
    fn legends_run_in_a_row_above_or_a_column_beside() {
        let legend = vec![
            LegendEntry {
                label: "abc".into(),
                class: "a",
            },
            LegendEntry {
                label: "de".into(),
                class: "b",
            },
        ];
        let swatches = |frame: Frame| {
            let mut chart = Chart::empty(frame, Titles::new("", "", ""), "");
            chart.legend = legend.clone();
            chart
                .legend_marks()
                .into_iter()
                .filter_map(|m| match m {
                    Shape::Swatch { x, y, .. } => Some((x, y)),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        // Above: the second entry starts 34 px + 6 px a character after the first.
        assert_eq!(
            swatches(Frame::legend_above(640.0, 300.0)),
            [(64.0, 24.0), (116.0, 24.0)]
        );
        // Beside: one under the other, right of the plot.
        assert_eq!(
            swatches(Frame::legend_beside(640.0, 380.0)),
            [(456.0, 32.0), (456.0, 50.0)]
        );
    }
}
