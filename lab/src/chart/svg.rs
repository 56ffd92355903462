//! SVG text of a [`Chart`]: [`markup`] is the body of an `<svg>` element (the dashboard
//! sets it inside its own, styled by `www/style.css`); [`document`] is a standalone SVG 1.1
//! file with its own style sheet, as GitHub renders inline in `docs/BENCHMARKS.md`.

use std::fmt::Write;

use super::{Chart, Shape};

/// The style of everything [`Chart::marks`] draws except the data: the dashboard's look
/// (`www/style.css`) with its colours written out. Data classes come from the caller
/// ([`palette`]).
pub const BASE_STYLE: &str = "\
text{font-family:system-ui,sans-serif;font-size:11px;fill:#1d2330}
.background{fill:#fff}
.title{font-weight:600;font-size:13px}
.empty{fill:#5b6476;font-size:13px}
.axis,.tick{stroke:#1d2330}
.grid{stroke:#eceef3}
polyline{fill:none;stroke-width:2}
";

/// Style rules colouring each `(class, colour)`: the stroke of its lines and the fill of its
/// dots, bars and legend swatch.
pub fn palette(colours: &[(&str, &str)]) -> String {
    colours
        .iter()
        .map(|(c, colour)| format!(".{c}{{stroke:{colour}}}circle.{c},rect.{c}{{fill:{colour}}}\n"))
        .collect()
}

/// A standalone SVG file of `chart`: [`BASE_STYLE`] plus `style`, a white background, then
/// [`markup`].
pub fn document(chart: &Chart, style: &str) -> String {
    let (w, h) = (num(chart.frame.width), num(chart.frame.height));
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">\n\
         <style>\n{BASE_STYLE}{style}</style>\n\
         <rect class=\"background\" width=\"{w}\" height=\"{h}\"/>\n{}</svg>\n",
        escape(&chart.titles.title),
        markup(chart)
    )
}

/// Every mark of `chart` as an SVG element, one a line, in drawing order.
pub fn markup(chart: &Chart) -> String {
    let mut out = String::new();
    for mark in chart.marks() {
        element(&mut out, &mark);
        out.push('\n');
    }
    out
}

/// One shape as an SVG element; data shapes carry their tip as a `<title>`.
fn element(out: &mut String, shape: &Shape) {
    let _ = match shape {
        Shape::Rect {
            x,
            y,
            w,
            h,
            class,
            tip,
        } => write!(
            out,
            r#"<rect class="{class}" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>"#,
            num(*x),
            num(*y),
            num(*w),
            num(*h),
            escape(tip)
        ),
        Shape::Swatch { x, y, w, h, class } => write!(
            out,
            r#"<rect class="swatch {class}" x="{}" y="{}" width="{}" height="{}"/>"#,
            num(*x),
            num(*y),
            num(*w),
            num(*h)
        ),
        Shape::Line {
            x1,
            y1,
            x2,
            y2,
            class,
        } => write!(
            out,
            r#"<line class="{class}" x1="{}" y1="{}" x2="{}" y2="{}"/>"#,
            num(*x1),
            num(*y1),
            num(*x2),
            num(*y2)
        ),
        Shape::Polyline { points, class } => {
            let points: Vec<String> = points
                .iter()
                .map(|(x, y)| format!("{},{}", num(*x), num(*y)))
                .collect();
            write!(
                out,
                r#"<polyline class="{class}" points="{}"/>"#,
                points.join(" ")
            )
        }
        Shape::Circle {
            cx,
            cy,
            r,
            class,
            tip,
        } => write!(
            out,
            r#"<circle class="{class}" cx="{}" cy="{}" r="{}"><title>{}</title></circle>"#,
            num(*cx),
            num(*cy),
            num(*r),
            escape(tip)
        ),
        Shape::Text {
            x,
            y,
            text,
            class,
            anchor,
            vertical,
        } => {
            let (x, y) = (num(*x), num(*y));
            let anchor = anchor
                .attribute()
                .map(|a| format!(r#" text-anchor="{a}""#))
                .unwrap_or_default();
            let turn = if *vertical {
                format!(r#" transform="rotate(-90 {x} {y})""#)
            } else {
                String::new()
            };
            write!(
                out,
                r#"<text class="{class}" x="{x}" y="{y}"{anchor}{turn}>{}</text>"#,
                escape(text)
            )
        }
    };
}

/// A coordinate to a tenth of a pixel, without a trailing `.0` or a negative zero.
fn num(v: f64) -> String {
    format!("{}", (v * 10.0).round() / 10.0 + 0.0)
}

/// Text and attribute values with `&`, `<`, `>` and `"` escaped.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::super::builders::{line_chart, Series};
    use super::super::{Frame, Titles};
    use super::*;

    fn chart() -> Chart {
        line_chart(
            Frame::legend_beside(640.0, 380.0),
            Titles::new("t <1>", "x", "y \"q\""),
            "N",
            &[Series {
                label: "a&b".into(),
                class: "s-a",
                points: vec![(10.0, 1.0), (20.0, 3.0)],
            }],
        )
    }

    #[test]
    fn a_document_is_well_formed_svg_with_every_mark_escaped() {
        let svg = document(&chart(), &palette(&[("s-a", "#123456")]));
        assert!(svg.starts_with("<svg xmlns=") && svg.ends_with("</svg>\n"));
        assert!(svg.contains(".s-a{stroke:#123456}circle.s-a,rect.s-a{fill:#123456}"));
        assert!(svg.contains(r#"aria-label="t &lt;1&gt;""#));
        assert!(svg.contains(">a&amp;b</text>") && svg.contains("y &quot;q&quot;"));
        assert_eq!(svg.matches("<circle").count(), 2);
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert_eq!(svg.matches("<rect class=\"swatch s-a\"").count(), 1);
        assert_eq!(svg.matches('<').count(), svg.matches('>').count());
    }

    #[test]
    fn markup_has_one_element_per_mark_with_rounded_coordinates() {
        let c = chart();
        let text = markup(&c);
        assert_eq!(text.lines().count(), c.marks().len());
        assert!(text.contains(r#"transform="rotate(-90 14 "#));
        assert!(!text.contains("-0\"") && !text.contains(".0\""), "{text}");
        assert_eq!(num(117.33333), "117.3");
        assert_eq!(num(-0.01), "0");
    }
}
