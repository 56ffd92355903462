//! Dependency-free SVG charts: a line chart (one line per series) and a grouped bar chart.
//! Plain SVG 1.1 so GitHub renders it inline in `docs/BENCHMARKS.md`.

use std::fmt::Write;

/// One line of a line chart.
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Stroke colour (CSS).
    pub colour: String,
    /// Points in data units.
    pub points: Vec<(f64, f64)>,
}

const W: f64 = 640.0;
const H: f64 = 380.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

/// A "nice" upper bound for an axis (1, 2 or 5 × 10^k at or above `max`).
pub fn nice_max(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(max.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|v| *v >= max)
        .unwrap_or(10.0 * p)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn frame(out: &mut String, title: &str, x_label: &str, y_label: &str) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">
<rect width="{W}" height="{H}" fill="white"/>
<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>
<text x="{}" y="{}" text-anchor="middle">{}</text>
<text transform="translate(16,{}) rotate(-90)" text-anchor="middle">{}</text>
"#,
        (LEFT + W - RIGHT) / 2.0,
        escape(title),
        (LEFT + W - RIGHT) / 2.0,
        H - 10.0,
        escape(x_label),
        (TOP + H - BOTTOM) / 2.0,
        escape(y_label),
    );
}

fn y_axis(out: &mut String, y_max: f64) {
    for i in 0..=5 {
        let v = y_max * f64::from(i) / 5.0;
        let y = H - BOTTOM - (H - TOP - BOTTOM) * f64::from(i) / 5.0;
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            tick(v)
        );
    }
}

fn tick(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn legend(out: &mut String, row: usize, name: &str, colour: &str) {
    let y = TOP + 10.0 + 18.0 * row as f64;
    let x = W - RIGHT + 12.0;
    let _ = writeln!(
        out,
        r#"<rect x="{x}" y="{:.1}" width="12" height="12" fill="{colour}"/><text x="{}" y="{:.1}">{}</text>"#,
        y - 10.0,
        x + 18.0,
        y,
        escape(name)
    );
}

/// A line chart of `series` over a linear x axis (ticks at each x of the first series).
pub fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let x_min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let x_max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let y_max = nice_max(ys.fold(0.0, f64::max));
    let span = if x_max > x_min { x_max - x_min } else { 1.0 };
    let px = |x: f64| LEFT + (W - LEFT - RIGHT) * (x - x_min) / span;
    let py = |y: f64| H - BOTTOM - (H - TOP - BOTTOM) * y / y_max;
    let mut out = String::new();
    frame(&mut out, title, x_label, y_label);
    y_axis(&mut out, y_max);
    if let Some(first) = series.first() {
        for (x, _) in &first.points {
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
                px(*x),
                H - BOTTOM + 16.0,
                tick(*x)
            );
        }
    }
    for (row, s) in series.iter().enumerate() {
        let path: Vec<String> = s
            .points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>"#,
            s.colour,
            path.join(" ")
        );
        for (x, y) in &s.points {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"/>"#,
                px(*x),
                py(*y),
                s.colour
            );
        }
        legend(&mut out, row, &s.name, &s.colour);
    }
    out.push_str("</svg>\n");
    out
}

/// A grouped bar chart: `groups` along x, one bar per entry of `bars` (name, colour) in each,
/// `values[group][bar]`.
pub fn bar_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    groups: &[String],
    bars: &[(String, String)],
    values: &[Vec<f64>],
) -> String {
    let y_max = nice_max(values.iter().flatten().copied().fold(0.0, f64::max));
    let py = |y: f64| H - BOTTOM - (H - TOP - BOTTOM) * y / y_max;
    let group_w = (W - LEFT - RIGHT) / groups.len().max(1) as f64;
    let bar_w = group_w * 0.8 / bars.len().max(1) as f64;
    let mut out = String::new();
    frame(&mut out, title, x_label, y_label);
    y_axis(&mut out, y_max);
    for (g, name) in groups.iter().enumerate() {
        let x0 = LEFT + group_w * g as f64 + group_w * 0.1;
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            LEFT + group_w * (g as f64 + 0.5),
            H - BOTTOM + 16.0,
            escape(name)
        );
        for (b, (_, colour)) in bars.iter().enumerate() {
            let v = values.get(g).and_then(|r| r.get(b)).copied().unwrap_or(0.0);
            let _ = writeln!(
                out,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{colour}"/>"#,
                x0 + bar_w * b as f64,
                py(v),
                bar_w * 0.9,
                (H - BOTTOM - py(v)).max(0.0)
            );
        }
    }
    for (row, (name, colour)) in bars.iter().enumerate() {
        legend(&mut out, row, name, colour);
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_bounds() {
        assert_eq!(nice_max(0.7), 1.0);
        assert_eq!(nice_max(130.0), 200.0);
        assert_eq!(nice_max(4_999.0), 5_000.0);
        assert_eq!(nice_max(0.0), 1.0);
    }

    #[test]
    fn charts_are_well_formed_svg_with_every_series() {
        let s = line_chart(
            "t <1>",
            "x",
            "y",
            &[Series {
                name: "a&b".into(),
                colour: "red".into(),
                points: vec![(10.0, 1.0), (20.0, 3.0)],
            }],
        );
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert!(s.contains("t &lt;1&gt;") && s.contains("a&amp;b"));
        assert_eq!(s.matches("<circle").count(), 2);
        let b = bar_chart(
            "b",
            "x",
            "y",
            &["1".into(), "50".into()],
            &[("s".into(), "blue".into())],
            &[vec![2.0], vec![4.0]],
        );
        assert_eq!(b.matches("<rect").count(), 1 + 2 + 1);
    }
}
