//! The drawable description of a chart, independent of any DOM.

use serde::Serialize;

use super::scale::{nice_step, nice_ticks, tick_label, LinearScale};

/// Overall chart size, px (the SVG's viewBox; it scales with its container).
pub const WIDTH: f64 = 640.0;
/// Default chart height, px.
pub const HEIGHT: f64 = 300.0;
/// Room for the y axis' labels, px.
pub const MARGIN_LEFT: f64 = 64.0;
/// Room at the right edge, px.
pub const MARGIN_RIGHT: f64 = 16.0;
/// Room for the title and legend, px.
pub const MARGIN_TOP: f64 = 44.0;
/// Room for the x axis' labels, px.
pub const MARGIN_BOTTOM: f64 = 44.0;

/// One axis tick.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tick {
    /// Pixel position along its axis.
    pub pos: f64,
    /// Label text.
    pub label: String,
}

/// One drawable. `class` selects the colour in `www/style.css`; `tip` becomes an SVG
/// `<title>`, shown on hover.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Shape {
    /// A rectangle (bars, holds, overlaps).
    Rect {
        x: f64,
        y: f64,
        w: f64,
        h: f64,
        class: &'static str,
        tip: String,
    },
    /// A line segment (marks).
    Line {
        x1: f64,
        y1: f64,
        x2: f64,
        y2: f64,
        class: &'static str,
    },
    /// A polyline through points (expectations, sweep series).
    Polyline {
        points: Vec<(f64, f64)>,
        class: &'static str,
    },
    /// A dot (sweep data points).
    Circle {
        cx: f64,
        cy: f64,
        r: f64,
        class: &'static str,
        tip: String,
    },
}

impl Shape {
    /// The polyline's `points` attribute.
    pub fn svg_points(points: &[(f64, f64)]) -> String {
        points
            .iter()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// One legend entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LegendEntry {
    /// Text.
    pub label: String,
    /// Colour class, as in [`Shape`].
    pub class: &'static str,
}

/// A chart ready to draw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chart {
    /// viewBox width, px.
    pub width: f64,
    /// viewBox height, px.
    pub height: f64,
    /// Title above the plot.
    pub title: String,
    /// x axis label with its unit.
    pub x_label: String,
    /// y axis label with its unit.
    pub y_label: String,
    /// x ticks.
    pub x_ticks: Vec<Tick>,
    /// y ticks.
    pub y_ticks: Vec<Tick>,
    /// The data.
    pub shapes: Vec<Shape>,
    /// The legend.
    pub legend: Vec<LegendEntry>,
    /// Shown across the plot when there is nothing to draw yet.
    pub empty_message: Option<String>,
}

/// The plot area, px: left, top, right, bottom.
pub fn plot_area(height: f64) -> (f64, f64, f64, f64) {
    (
        MARGIN_LEFT,
        MARGIN_TOP,
        WIDTH - MARGIN_RIGHT,
        height - MARGIN_BOTTOM,
    )
}

/// Axes from `[0, x_max]` × `[0, y_max]` onto the plot area, with their ticks.
pub struct Axes {
    /// x scale.
    pub x: LinearScale,
    /// y scale.
    pub y: LinearScale,
    /// x ticks.
    pub x_ticks: Vec<Tick>,
    /// y ticks.
    pub y_ticks: Vec<Tick>,
}

impl Axes {
    /// Nice axes covering `x_max` and `y_max` in a chart of `height` px.
    pub fn new(x_max: f64, y_max: f64, height: f64) -> Self {
        let (left, top, right, bottom) = plot_area(height);
        let xs = nice_ticks(x_max, 6);
        let ys = nice_ticks(y_max, 5);
        let x = LinearScale::new((0.0, *xs.last().unwrap_or(&1.0)), (left, right));
        let y = LinearScale::new((0.0, *ys.last().unwrap_or(&1.0)), (bottom, top));
        let x_step = nice_step(x_max, 6);
        let y_step = nice_step(y_max, 5);
        Axes {
            x_ticks: xs
                .iter()
                .map(|v| Tick {
                    pos: x.map(*v),
                    label: tick_label(*v, x_step),
                })
                .collect(),
            y_ticks: ys
                .iter()
                .map(|v| Tick {
                    pos: y.map(*v),
                    label: tick_label(*v, y_step),
                })
                .collect(),
            x,
            y,
        }
    }
}
