//! Line charts, each written as PNG (bitmap backend, text through ab_glyph with the
//! DejaVu Sans font embedded at build time: no fontconfig) and SVG.

use std::path::{Path, PathBuf};
use std::sync::Once;

use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

/// DejaVu Sans from Debian's `fonts-dejavu-core` (installed by `scripts/setup.sh`).
static FONT: &[u8] = include_bytes!("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf");

/// One line: its legend and its points (x, y); points with a NaN are left out.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Points in data units.
    pub points: Vec<(f64, f64)>,
}

/// A chart: titles, axes and lines.
#[derive(Debug, Clone)]
pub struct Chart {
    /// File name without extension; `.png` and `.svg` are written.
    pub stem: String,
    /// Title above the plot.
    pub title: String,
    /// X axis label, with unit.
    pub x_label: String,
    /// Y axis label, with unit.
    pub y_label: String,
    /// Logarithmic x axis (flow counts).
    pub log_x: bool,
    /// Legend in the upper left corner (for rising lines) instead of the upper right.
    pub legend_left: bool,
    /// The lines.
    pub series: Vec<Series>,
}

const SIZE: (u32, u32) = (900, 560);

/// Line colours, one per series in order (red, blue, green, orange, purple, brown, grey):
/// distinguishable on white, unlike the palette's yellow.
const COLORS: [RGBColor; 7] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0x7f, 0x7f, 0x7f),
];

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TTF shipped by Debian; a failure would be a broken package.
        if plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_err() {
            eprintln!("bench-report: DejaVuSans.ttf did not load; PNG text will be missing");
        }
    });
}

/// Writes `dir/STEM.png` and `dir/STEM.svg`; returns both paths. A chart without
/// points writes nothing and returns no paths.
///
/// # Errors
/// A backend's drawing or file error.
pub fn write(chart: &Chart, dir: &Path) -> Result<Vec<PathBuf>> {
    let points: Vec<(f64, f64)> = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    if points.is_empty() {
        return Ok(Vec::new());
    }
    register_font();
    let png = dir.join(format!("{}.png", chart.stem));
    let svg = dir.join(format!("{}.svg", chart.stem));
    {
        let root = BitMapBackend::new(&png, SIZE).into_drawing_area();
        draw(chart, &points, &root)?;
        root.present()
            .map_err(|e| anyhow!("{}: {e}", png.display()))?;
    }
    {
        let root = SVGBackend::new(&svg, SIZE).into_drawing_area();
        draw(chart, &points, &root)?;
        root.present()
            .map_err(|e| anyhow!("{}: {e}", svg.display()))?;
    }
    Ok(vec![png, svg])
}

fn draw<DB: DrawingBackend>(
    chart: &Chart,
    points: &[(f64, f64)],
    root: &DrawingArea<DB, Shift>,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("{}: {e:?}", chart.stem);
    root.fill(&WHITE).map_err(e)?;
    let (mut x0, mut x1) = bounds(points.iter().map(|p| p.0));
    let (_, y1) = bounds(points.iter().map(|p| p.1));
    let y1 = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
    if chart.log_x {
        x0 = (x0 / 2.0).max(0.5);
        x1 *= 2.0;
    } else {
        x0 = 0.0;
        x1 = if x1 > 0.0 { x1 * 1.05 } else { 1.0 };
    }
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(&chart.title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(64);
    let style = |i: usize| COLORS[i % COLORS.len()].stroke_width(2);
    let legend_at = if chart.legend_left {
        SeriesLabelPosition::UpperLeft
    } else {
        SeriesLabelPosition::UpperRight
    };
    macro_rules! body {
        ($ctx:expr) => {{
            let mut ctx = $ctx;
            ctx.configure_mesh()
                .x_desc(chart.x_label.as_str())
                .y_desc(chart.y_label.as_str())
                .label_style(("sans-serif", 14))
                .draw()
                .map_err(e)?;
            for (i, s) in chart.series.iter().enumerate() {
                let pts: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|(x, y)| x.is_finite() && y.is_finite())
                    .collect();
                ctx.draw_series(LineSeries::new(pts.clone(), style(i)))
                    .map_err(e)?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style(i)));
                ctx.draw_series(pts.iter().map(|&p| Circle::new(p, 3, style(i).filled())))
                    .map_err(e)?;
            }
            ctx.configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 14))
                .position(legend_at)
                .draw()
                .map_err(e)?;
        }};
    }
    if chart.log_x {
        body!(builder
            .build_cartesian_2d((x0..x1).log_scale(), 0.0..y1)
            .map_err(e)?);
    } else {
        body!(builder.build_cartesian_2d(x0..x1, 0.0..y1).map_err(e)?);
    }
    Ok(())
}

fn bounds(v: impl Iterator<Item = f64>) -> (f64, f64) {
    v.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("bench-report-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn writes_png_and_svg() {
        let dir = tmpdir("plot");
        let chart = Chart {
            stem: "t".into(),
            title: "Mpps against frame size".into(),
            x_label: "frame size (bytes)".into(),
            y_label: "Mpps".into(),
            log_x: false,
            legend_left: false,
            series: vec![
                Series {
                    name: "vswitchd".into(),
                    points: vec![(64.0, 7.0), (1518.0, 2.0), (512.0, f64::NAN)],
                },
                Series {
                    name: "ovs".into(),
                    points: vec![(64.0, 3.0), (1518.0, 1.0)],
                },
            ],
        };
        let files = write(&chart, &dir).unwrap();
        assert_eq!(files.len(), 2);
        let png = std::fs::read(&files[0]).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let svg = std::fs::read_to_string(&files[1]).unwrap();
        assert!(
            svg.contains("<svg") && svg.contains("vswitchd"),
            "{svg:.200}"
        );
        let log = Chart {
            stem: "log".into(),
            log_x: true,
            legend_left: true,
            ..chart
        };
        assert_eq!(write(&log, &dir).unwrap().len(), 2);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn empty_chart_writes_nothing() {
        let dir = tmpdir("empty");
        let chart = Chart {
            stem: "e".into(),
            title: String::new(),
            x_label: String::new(),
            y_label: String::new(),
            log_x: false,
            legend_left: false,
            series: vec![Series {
                name: "x".into(),
                points: vec![(1.0, f64::NAN)],
            }],
        };
        assert!(write(&chart, &dir).unwrap().is_empty());
        assert!(std::fs::read_dir(&dir).unwrap().next().is_none());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
