//! Line charts as standalone SVG, with no plotting dependency: a few series of (x, y)
//! points on linear or logarithmic axes, with ticks, a legend and a title.

use std::fmt::Write;

/// A named series of points.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Points, drawn in x order.
    pub points: Vec<(f64, f64)>,
}

/// A line chart.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The series.
    pub series: Vec<Series>,
}

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 440.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
const COLOURS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Short label of a tick value.
fn label(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e3 {
        format!("{}K", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = if v.abs() >= 10.0 {
        format!("{v:.0}")
    } else if v.abs() >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.5}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// An axis: maps values to pixels and proposes ticks.
struct Axis {
    log: bool,
    lo: f64,
    hi: f64,
}

impl Axis {
    fn new(values: impl Iterator<Item = f64>, log: bool) -> Axis {
        let values: Vec<f64> = values
            .filter(|v| v.is_finite() && (!log || *v > 0.0))
            .collect();
        let (mut lo, mut hi) = values
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
                (l.min(*v), h.max(*v))
            });
        if values.is_empty() {
            (lo, hi) = (1.0, 10.0);
        }
        if log {
            lo = 10f64.powf(lo.log10().floor());
            hi = 10f64.powf(hi.log10().ceil());
            if hi <= lo {
                hi = lo * 10.0;
            }
        } else {
            lo = lo.min(0.0);
            if hi <= lo {
                hi = lo + 1.0;
            }
            hi *= 1.05;
        }
        Axis { log, lo, hi }
    }

    /// Position in 0..=1.
    fn at(&self, v: f64) -> f64 {
        if self.log {
            (v.max(self.lo).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let (a, b) = (
                self.lo.log10().round() as i32,
                self.hi.log10().round() as i32,
            );
            (a..=b).map(|e| 10f64.powi(e)).collect()
        } else {
            let raw = (self.hi - self.lo) / 5.0;
            let magnitude = 10f64.powf(raw.log10().floor());
            let step = [1.0, 2.0, 5.0, 10.0]
                .iter()
                .map(|m| m * magnitude)
                .find(|s| *s >= raw)
                .unwrap_or(raw);
            let mut ticks = Vec::new();
            let mut t = (self.lo / step).ceil() * step;
            while t <= self.hi + step * 1e-9 {
                ticks.push(t);
                t += step;
            }
            ticks
        }
    }
}

impl Chart {
    /// The chart as an SVG document.
    pub fn to_svg(&self) -> String {
        let points = || self.series.iter().flat_map(|s| s.points.iter());
        let x = Axis::new(points().map(|p| p.0), self.log_x);
        let y = Axis::new(points().map(|p| p.1), self.log_y);
        let (pw, ph) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
        let px = |v: f64| LEFT + x.at(v) * pw;
        let py = |v: f64| TOP + ph - y.at(v) * ph;
        let mut svg = String::new();
        let _ = writeln!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="28" font-size="15" text-anchor="middle">{}</text>"#,
            LEFT + pw / 2.0,
            escape(&self.title)
        );
        for t in x.ticks() {
            let at = px(t);
            let _ = writeln!(
                svg,
                r##"<line x1="{at:.1}" y1="{TOP}" x2="{at:.1}" y2="{:.1}" stroke="#e5e5e5"/><text x="{at:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                TOP + ph,
                TOP + ph + 18.0,
                label(t)
            );
        }
        for t in y.ticks() {
            let at = py(t);
            let _ = writeln!(
                svg,
                r##"<line x1="{LEFT}" y1="{at:.1}" x2="{:.1}" y2="{at:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT + pw,
                LEFT - 6.0,
                at + 4.0,
                label(t)
            );
        }
        let _ = writeln!(
            svg,
            r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LEFT + pw / 2.0,
            HEIGHT - 16.0,
            escape(&self.x_label)
        );
        let _ = writeln!(
            svg,
            r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">{}</text>"#,
            TOP + ph / 2.0,
            TOP + ph / 2.0,
            escape(&self.y_label)
        );
        for (i, s) in self.series.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let mut pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|(a, b)| a.is_finite() && b.is_finite())
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let path: Vec<String> = pts
                .iter()
                .map(|(a, b)| format!("{:.1},{:.1}", px(*a), py(*b)))
                .collect();
            let _ = writeln!(
                svg,
                r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#,
                path.join(" ")
            );
            for (a, b) in &pts {
                let _ = writeln!(
                    svg,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{colour}"/>"#,
                    px(*a),
                    py(*b)
                );
            }
            let ly = TOP + 10.0 + i as f64 * 20.0;
            let lx = LEFT + pw + 14.0;
            let _ = writeln!(
                svg,
                r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{colour}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
                lx + 22.0,
                lx + 28.0,
                ly + 4.0,
                escape(&s.name)
            );
        }
        svg.push_str("</svg>\n");
        svg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_svg_with_every_series_and_point() {
        let chart = Chart {
            title: "merge <latency>".into(),
            x_label: "source fraction (%)".into(),
            y_label: "ms".into(),
            log_x: true,
            log_y: false,
            series: vec![
                Series {
                    name: "copy-on-write".into(),
                    points: vec![(0.001, 120.0), (0.01, 130.0), (1.0, 900.0)],
                },
                Series {
                    name: "merge-on-read".into(),
                    points: vec![(0.001, 20.0), (0.01, 25.0), (1.0, 300.0)],
                },
            ],
        };
        let svg = chart.to_svg();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 6);
        assert!(svg.contains("merge &lt;latency&gt;"));
        assert!(svg.contains(">copy-on-write<") && svg.contains(">merge-on-read<"));
        assert_eq!(label(10_000.0), "10K");
        assert_eq!(label(0.001), "0.001");
    }
}
