//! `SvgChart`: draws any [`Chart`]. All geometry — axes, ticks, labels, legend and shapes —
//! was computed by `lock_lab::chart`, and its SVG text is `lock_lab`'s too (the same text the
//! bench's figures are made of); this component only places it in an `<svg>` styled by
//! `www/style.css`.

use leptos::prelude::*;
use lock_lab::chart::{svg, Chart};

/// An SVG chart. `test_id` names it for tests and the end-to-end run (`data-testid`).
#[component]
pub fn SvgChart(
    /// The chart to draw; redrawn when it changes.
    #[prop(into)]
    chart: Signal<Chart>,
    /// `data-testid` of the `<svg>`.
    test_id: &'static str,
) -> impl IntoView {
    move || {
        let c = chart.get();
        let view_box = format!("0 0 {} {}", c.frame.width, c.frame.height);
        view! {
            <svg class="chart" data-testid=test_id viewBox=view_box role="img"
                aria-label=c.titles.title.clone() inner_html=svg::markup(&c)></svg>
        }
    }
}
