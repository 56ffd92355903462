//! The dashboard's charts as data: [`builders`] computes each chart from the model as a
//! `lock_lab::chart::Chart` of positioned shapes (the geometry, scales, ticks and the line
//! chart are `lock_lab`'s, shared with the bench's figures), and one small SVG component
//! draws any of them. The arithmetic is therefore unit-tested on the host.

pub mod builders;
pub mod lab_timeline;
