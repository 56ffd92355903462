//! The positioned shapes a chart is drawn with, in pixels of the chart's viewBox. `class`
//! names the style (colour, stroke) that the style sheet gives it; a `tip` becomes an SVG
//! `<title>`, shown on hover.

/// Where a text stands relative to its point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// Starts at the point (SVG's default).
    Start,
    /// Centred on the point.
    Middle,
    /// Ends at the point.
    End,
}

impl Anchor {
    /// The `text-anchor` attribute's value; `None` for SVG's default, which needs none.
    pub fn attribute(self) -> Option<&'static str> {
        match self {
            Anchor::Start => None,
            Anchor::Middle => Some("middle"),
            Anchor::End => Some("end"),
        }
    }
}

/// One drawable.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// A rectangle of data (bars, holds, overlaps).
    Rect {
        x: f64,
        y: f64,
        w: f64,
        h: f64,
        class: &'static str,
        tip: String,
    },
    /// A legend's colour sample: a rectangle of class `swatch` plus the entry's class.
    Swatch {
        x: f64,
        y: f64,
        w: f64,
        h: f64,
        class: &'static str,
    },
    /// A line segment (marks, ticks, grid lines, axes).
    Line {
        x1: f64,
        y1: f64,
        x2: f64,
        y2: f64,
        class: &'static str,
    },
    /// A polyline through points (expectations, series).
    Polyline {
        points: Vec<(f64, f64)>,
        class: &'static str,
    },
    /// A dot (data points).
    Circle {
        cx: f64,
        cy: f64,
        r: f64,
        class: &'static str,
        tip: String,
    },
    /// A text: titles, labels, the empty-chart message. `vertical` turns it a quarter to
    /// the left about its point (the y axis' label).
    Text {
        x: f64,
        y: f64,
        text: String,
        class: &'static str,
        anchor: Anchor,
        vertical: bool,
    },
}

impl Shape {
    /// A horizontal text.
    pub fn text(
        x: f64,
        y: f64,
        text: impl Into<String>,
        class: &'static str,
        anchor: Anchor,
    ) -> Self {
        Shape::Text {
            x,
            y,
            text: text.into(),
            class,
            anchor,
            vertical: false,
        }
    }
}
