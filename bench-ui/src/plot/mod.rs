//! Plot geometry: every chart is computed here as plain data (a [`chart::Chart`] of
//! positioned shapes, ticks and legend entries) and drawn by one small SVG component. The
//! arithmetic is therefore unit-tested on the host, and the component stays a dumb mapper.

pub mod builders;
pub mod chart;
pub mod scale;
