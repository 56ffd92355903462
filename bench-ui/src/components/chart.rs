//! `SvgChart`: draws any [`Chart`] — axes, ticks, labels, legend and shapes. All geometry was
//! computed by `crate::plot`; this component only maps it to SVG elements.

use leptos::prelude::*;

use crate::plot::chart::{plot_area, Chart, Shape};

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
        let (left, top, right, bottom) = plot_area(c.height);
        let view_box = format!("0 0 {} {}", c.width, c.height);
        let x_ticks = c
            .x_ticks
            .iter()
            .map(|t| {
                view! {
                    <line class="tick" x1=t.pos y1=bottom x2=t.pos y2=bottom + 5.0/>
                    <text class="tick-label" x=t.pos y=bottom + 18.0 text-anchor="middle">{t.label.clone()}</text>
                }
            })
            .collect_view();
        let y_ticks = c
            .y_ticks
            .iter()
            .map(|t| {
                view! {
                    <line class="grid" x1=left y1=t.pos x2=right y2=t.pos/>
                    <text class="tick-label" x=left - 6.0 y=t.pos + 4.0 text-anchor="end">{t.label.clone()}</text>
                }
            })
            .collect_view();
        // Entries laid out left to right, each as wide as its label (about 6 px a
        // character at the legend's 11 px font) plus the swatch and a gap.
        let mut next_x = left;
        let legend = c
            .legend
            .iter()
            .map(|entry| {
                let x = next_x;
                next_x += 34.0 + entry.label.chars().count() as f64 * 6.0;
                view! {
                    <rect class=format!("swatch {}", entry.class) x=x y=24.0 width=12.0 height=10.0/>
                    <text class="legend" x=x + 16.0 y=33.0>{entry.label.clone()}</text>
                }
            })
            .collect_view();
        let shapes = c.shapes.into_iter().map(shape_view).collect_view();
        let empty = c.empty_message.map(|m| {
            view! {
                <text class="empty" x=(left + right) / 2.0 y=(top + bottom) / 2.0 text-anchor="middle">{m}</text>
            }
        });
        view! {
            <svg class="chart" data-testid=test_id viewBox=view_box role="img" aria-label=c.title.clone()>
                <text class="title" x=left y=16.0>{c.title.clone()}</text>
                {legend}
                {y_ticks}
                {shapes}
                <line class="axis" x1=left y1=bottom x2=right y2=bottom/>
                <line class="axis" x1=left y1=top x2=left y2=bottom/>
                {x_ticks}
                <text class="axis-label" x=(left + right) / 2.0 y=c.height - 6.0 text-anchor="middle">{c.x_label.clone()}</text>
                <text class="axis-label" x=14.0 y=(top + bottom) / 2.0 text-anchor="middle"
                    transform=format!("rotate(-90 14 {})", (top + bottom) / 2.0)>{c.y_label.clone()}</text>
                {empty}
            </svg>
        }
    }
}

/// One data shape.
fn shape_view(shape: Shape) -> AnyView {
    match shape {
        Shape::Rect {
            x,
            y,
            w,
            h,
            class,
            tip,
        } => view! {
            <rect class=class x=x y=y width=w height=h><title>{tip}</title></rect>
        }
        .into_any(),
        Shape::Line {
            x1,
            y1,
            x2,
            y2,
            class,
        } => view! { <line class=class x1=x1 y1=y1 x2=x2 y2=y2/> }.into_any(),
        Shape::Polyline { points, class } => {
            view! { <polyline class=class points=Shape::svg_points(&points)/> }.into_any()
        }
        Shape::Circle {
            cx,
            cy,
            r,
            class,
            tip,
        } => view! {
            <circle class=class cx=cx cy=cy r=r><title>{tip}</title></circle>
        }
        .into_any(),
    }
}
