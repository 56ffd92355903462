//! A chart's frame (size, margins, where the legend goes) and the axes that map data onto
//! its plot area.

use super::scale::{nice_step, nice_ticks, tick_label, LinearScale};
use super::Tick;

/// Where the legend stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegendPlacement {
    /// In a row between the title and the plot (the dashboard's panels: short labels).
    Above,
    /// In a column right of the plot (the bench's figures: long labels, several series).
    Beside,
}

/// Size and margins of a chart, px of its viewBox (the SVG scales with its container).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Frame {
    /// viewBox width.
    pub width: f64,
    /// viewBox height.
    pub height: f64,
    /// Room for the y axis' labels.
    pub margin_left: f64,
    /// Room for the title (and the legend, when above).
    pub margin_top: f64,
    /// Room at the right edge (and for the legend, when beside).
    pub margin_right: f64,
    /// Room for the x axis' labels.
    pub margin_bottom: f64,
    /// Where the legend goes.
    pub legend: LegendPlacement,
}

impl Frame {
    /// A `width` × `height` chart with its legend in a row above the plot.
    pub const fn legend_above(width: f64, height: f64) -> Self {
        Frame {
            width,
            height,
            margin_left: 64.0,
            margin_top: 44.0,
            margin_right: 16.0,
            margin_bottom: 44.0,
            legend: LegendPlacement::Above,
        }
    }

    /// A `width` × `height` chart with its legend in a 180 px column right of the plot.
    pub const fn legend_beside(width: f64, height: f64) -> Self {
        Frame {
            margin_top: 32.0,
            margin_right: 196.0,
            legend: LegendPlacement::Beside,
            ..Frame::legend_above(width, height)
        }
    }

    /// The plot area, px: left, top, right, bottom.
    pub fn plot(&self) -> (f64, f64, f64, f64) {
        (
            self.margin_left,
            self.margin_top,
            self.width - self.margin_right,
            self.height - self.margin_bottom,
        )
    }
}

/// Axes from `[0, x_max]` × `[0, y_max]`, widened to round numbers, onto a frame's plot area,
/// with their ticks.
#[derive(Debug, Clone, PartialEq)]
pub struct Axes {
    /// x scale.
    pub x: LinearScale,
    /// x ticks.
    pub x_ticks: Vec<Tick>,
    /// y scale.
    pub y: LinearScale,
    /// y ticks.
    pub y_ticks: Vec<Tick>,
}

impl Axes {
    /// About six x ticks and five y ticks, each axis ending on its last tick.
    pub fn new(frame: &Frame, x_max: f64, y_max: f64) -> Self {
        let (left, top, right, bottom) = frame.plot();
        let (x, x_ticks) = axis(x_max, 6, (left, right));
        let (y, y_ticks) = axis(y_max, 5, (bottom, top));
        Axes {
            x,
            x_ticks,
            y,
            y_ticks,
        }
    }
}

/// One axis covering `[0, max]` with about `count` nice ticks, onto `range`.
fn axis(max: f64, count: u32, range: (f64, f64)) -> (LinearScale, Vec<Tick>) {
    let values = nice_ticks(max, count);
    let scale = LinearScale::new((0.0, *values.last().unwrap_or(&1.0)), range);
    let step = nice_step(max, count);
    let ticks = values
        .iter()
        .map(|v| Tick {
            pos: scale.map(*v),
            label: tick_label(*v, step),
        })
        .collect();
    (scale, ticks)
}
